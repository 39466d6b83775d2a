"""``launch.run_ranks_checked``: a run whose check fails is run again; a check that fails every run fails."""
from __future__ import annotations

import pytest

from .launch import run_ranks_checked

pytestmark = pytest.mark.slow


def _rank(rank: int, world: int) -> int:
    return rank


def test_a_run_that_fails_its_check_once_is_run_again():
    runs = []

    def check(values: list[int]) -> None:
        runs.append(values)
        assert len(runs) > 1, "the first run"

    assert run_ranks_checked(_rank, 2, check) == [0, 1]
    assert runs == [[0, 1], [0, 1]]


def test_a_check_that_fails_every_run_fails_with_the_number_of_runs():
    runs = []

    def check(values: list[int]) -> None:
        runs.append(values)
        assert values == [1, 0], "ranks in order"

    with pytest.raises(AssertionError, match="failed in each of 2 runs; the last: ranks in order"):
        run_ranks_checked(_rank, 2, check, attempts=2)
    assert len(runs) == 2
