"""Old import paths keep working: the same module object, a DeprecationWarning where users were told the path."""
import importlib
import subprocess
import sys
import warnings

import pytest

from deeplite_like._moved import MOVED


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_imports_the_module_now_at_the_new_one(old):
    new, told = MOVED[old]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    assert module.__spec__.name == new          # the real spec, not the alias's


@pytest.mark.parametrize("old", sorted(name for name, (_new, told) in MOVED.items() if told))
def test_a_path_users_were_told_warns_once_naming_the_new_path_at_their_line(old):
    new, _told = MOVED[old]
    code = (f"import warnings\nwarnings.simplefilter('always')\n"
            f"with warnings.catch_warnings(record=True) as caught:\n    import {old}\n"
            f"print([(w.category.__name__, str(w.message), w.filename, w.lineno) for w in caught])\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    caught = eval(done.stdout)
    ours = [w for w in caught if w[1].startswith(f"{old} moved to {new}")]
    assert [(category, filename, line) for category, _message, filename, line in ours] == [
        ("DeprecationWarning", "<string>", 4)]   # once, at the user's import line
