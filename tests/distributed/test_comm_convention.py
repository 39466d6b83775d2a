"""The communication convention (payload S and ring bus bytes) and the import rules, in one process."""
from __future__ import annotations

import subprocess
import sys

import pytest

from deeplite_like.results import bus_bytes, bus_factor


@pytest.mark.parametrize("kind, n, payload, expected", [
    ("all_reduce", 2, 2048, 2048),        # 2(2-1)/2 = 1
    ("all_reduce", 4, 1000, 1500),        # 2(4-1)/4 = 3/2
    ("all_reduce", 8, 800, 1400),         # 2*7/8 = 7/4
    ("all_gather", 2, 132_352, 66_176),   # (2-1)/2
    ("all_gather", 4, 400, 300),          # 3/4
    ("reduce_scatter", 4, 400, 300),
    ("all_to_all", 3, 300, 200),          # 2/3
    ("broadcast", 8, 123, 123),           # 1
    ("p2p", 2, 10, 10),
    ("barrier", 2, 0, 0),
    ("all_reduce", 1, 4096, 0),           # one rank moves nothing
    ("all_reduce", 3, 10, 13),            # 10 * 4/3 = 13.3: rounded down
])
def test_bus_bytes(kind, n, payload, expected):
    assert bus_bytes(kind, payload, n) == expected


def test_unknown_kind_and_bad_group_say_what_is_wrong():
    with pytest.raises(ValueError, match="unknown collective kind 'allreduce'"):
        bus_factor("allreduce", 2)
    with pytest.raises(ValueError, match="group_size must be >= 1, got 0"):
        bus_factor("all_reduce", 0)


@pytest.mark.slow  # (about 3 s here)
def test_every_collective_operator_of_this_torch_is_in_the_table():
    code = ("import torch, torch.distributed._functional_collectives, torch.distributed.tensor.parallel\n"
            "import torch.distributed.fsdp  # (these register more operators when imported)\n"
            "from deeplite_like.backends.torch.distributed.recording import COLLECTIVES, FREE_COMM_OPS\n"
            "spaces = ('c10d', '_c10d_functional', '_c10d_functional_autograd', '_dtensor', 'fsdp')\n"
            "ops = {n.replace('::', '.') for n in torch._C._dispatch_get_all_op_names() if n.split('::')[0] in spaces}\n"
            "assert len(ops) > 40, len(ops)\n"
            "missing = sorted(ops - set(COLLECTIVES) - set(FREE_COMM_OPS))\n"
            "assert missing == [], missing\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=str(__import__("pathlib").Path(__file__).parents[2]))


@pytest.mark.slow  # (about 2 s here)
def test_counting_imports_no_dtensor_and_plain_counts_record_no_communication():
    code = ("import sys, torch\n"
            "from deeplite_like.backends.torch import count_ops\n"
            "c = count_ops(torch.nn.Linear(4, 3), torch.ones(2, 4))\n"
            "assert c.communication == [] and c.as_dict()['communication'] == [], c.communication\n"
            "assert c.comm_payload_bytes == 0 and c.comm_bus_bytes == 0\n"
            "from deeplite_like.backends.torch.params import parameter_stats\n"
            "assert parameter_stats(torch.nn.Linear(4, 3)).total_params == 15\n"
            "loaded = [m for m in sys.modules if m.startswith(('torch.distributed.tensor', 'torch.distributed.fsdp'))]\n"
            "assert not loaded, loaded\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=str(__import__("pathlib").Path(__file__).parents[2]))


@pytest.mark.slow  # (about 3 s here)
@pytest.mark.parametrize("module", ["recording", "shards", "job"])
def test_each_distributed_module_imports_first_without_a_cycle(module):
    subprocess.run([sys.executable, "-c", f"import deeplite_like.backends.torch.distributed.{module}"], check=True,
                   cwd=str(__import__("pathlib").Path(__file__).parents[2]))
