"""Run a function on N CPU ranks (gloo) with ``torch.multiprocessing.spawn``, and collect what each returns.

``run_ranks(target, world_size)`` starts ``world_size`` processes on 127.0.0.1 with a free port,
initialises a gloo process group in each, calls ``target(rank, world_size)`` (a module-level
function, picklable by name), and returns the JSON-able values the ranks returned, by rank.
A rank that raises fails the test with its traceback; a hang is killed after ``timeout`` seconds.
``run_ranks_checked`` runs again when a check of the values fails: for real steps read from the
allocator, where gloo's threads add bytes by timing (its docstring).
"""
from __future__ import annotations

import json
import os
import sys
import socket
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import torch.multiprocessing as mp

TIMEOUT_S = 120


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def exit_now() -> None:
    """End the rank without running the interpreter's teardown, once its work is done and written.

    torch's gloo process group can abort a rank at interpreter exit, after ``destroy_process_group``
    ("terminate called without an active exception", SIGABRT), and the launcher then fails the job:
    a script of init, ``gather_object`` and destroy alone, under load, aborted in 9 runs of 40 here,
    none of 40 with this exit.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _entry(rank: int, world_size: int, port: int, target: Callable, out_dir: str) -> None:
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)  # two ranks share two cores
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    try:
        value = target(rank, world_size)
        Path(out_dir, f"rank{rank}.json").write_text(json.dumps(value))
        dist.barrier()
    finally:
        dist.destroy_process_group()
    exit_now()


def run_ranks(target: Callable[[int, int], Any], world_size: int = 2, timeout: float = TIMEOUT_S) -> list[Any]:
    """``[target(0, n), ..., target(n-1, n)]`` run on ``n = world_size`` gloo ranks."""
    with tempfile.TemporaryDirectory() as out_dir:
        context = mp.start_processes(_entry, args=(world_size, free_port(), target, out_dir), nprocs=world_size,
                                     join=False, start_method="spawn")
        deadline = time.monotonic() + timeout
        while not context.join(timeout=1):
            if time.monotonic() > deadline:
                for process in context.processes:
                    if process.is_alive():
                        process.kill()
                raise TimeoutError(f"{target.__name__} on {world_size} ranks did not finish in {timeout} s")
        return [json.loads(Path(out_dir, f"rank{rank}.json").read_text()) for rank in range(world_size)]


def run_ranks_checked(target: Callable[[int, int], Any], world_size: int, check: Callable[[list[Any]], None], *,
                      attempts: int = 3, timeout: float = TIMEOUT_S) -> list[Any]:
    """``run_ranks``, then ``check(values)``; a run the check fails is run again, up to ``attempts`` runs.

    For the tests that read a real gloo step from the allocator: gloo's worker threads allocate and
    free buffers of their own (and drop their work objects) on their own schedule, so a block they
    still hold can be alive at the main thread's peak or not, by timing alone, and more of them
    under load. That can only add bytes to the real reading; the reference is a quiet run. The
    check asserts, with the allowance each test documents; the last failure is raised with the
    number of runs it took, so a real regression (which fails every run) still fails.
    """
    for attempt in range(1, attempts + 1):
        values = run_ranks(target, world_size, timeout=timeout)
        try:
            check(values)
        except AssertionError as error:
            if attempt == attempts:
                raise AssertionError(f"failed in each of {attempts} runs; the last: {error}") from error
        else:
            return values
    raise AssertionError("unreachable")  # (attempts >= 1)
