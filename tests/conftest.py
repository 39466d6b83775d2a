import os
import sys

# Make the checkout importable when the tests run without installing the package.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import signal  # noqa: E402
import threading  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _sigint_with_pythons_handler():
    """Tests deliver real SIGINTs to this process: give them Python's default handler, also when the
    suite was started with SIGINT ignored (a background job of a shell without job control)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
