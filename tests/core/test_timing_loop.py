"""The shared timing loop, on a fake clock: exact forward counts, derived by hand, and a slow clock read."""
from __future__ import annotations

import types

import pytest

import deeplite_like.timing as loop
from deeplite_like.timing import MAX_BLOCKS_PER_MIN, BlockTimes, summarise, time_blocks


class FakeClock:
    """A clock where a forward takes ``forward_s`` (or the next of ``forwards_s``) and each read ``read_s``."""

    def __init__(self, forward_s: float | list[float], read_s: float = 0.0) -> None:
        self.now, self.read_s, self.calls = 0.0, read_s, 0
        self.forward_s = forward_s

    def perf_counter(self) -> float:
        self.now += self.read_s  # the read's own cost lands in the interval it closes or opens
        return self.now

    def call(self) -> None:
        steps = self.forward_s if isinstance(self.forward_s, list) else [self.forward_s]
        self.now += steps[min(self.calls, len(steps) - 1)]
        self.calls += 1


@pytest.fixture()
def clock(monkeypatch):
    def make(*args, **kwargs) -> FakeClock:
        fake = FakeClock(*args, **kwargs)
        monkeypatch.setattr(loop, "time", types.SimpleNamespace(perf_counter=fake.perf_counter))
        return fake
    return make


def run(fake: FakeClock, **options) -> BlockTimes:
    return time_blocks(fake.call, lambda: None, **options)


# Times are powers of two (in seconds) so that the fake clock's sums are exact in floating point.
MS8 = 2.0 ** -7   # 7.8125 ms
US122 = 2.0 ** -13  # 122 us


def test_blocks_fill_the_budget_with_the_samples_it_needs(clock):
    fake = clock(MS8)  # a 7.8 ms forward, free clock reads
    blocks = run(fake, warmup=2, min_run_time=5 * 2 * MS8, min_blocks=5)
    # the 2nd warm-up forward is timed: 1 forward -> number = budget / 5 blocks / forward = 2 forwards a
    # block; 5 blocks of 2 forwards fill the budget exactly -> 10 timed forwards, 12 in all
    assert (blocks.number_per_run, len(blocks.times), blocks.timed_forwards, blocks.forwards) == (2, 5, 10, 12)
    assert fake.calls == blocks.forwards
    assert blocks.times == (MS8,) * 5


def test_a_slow_forward_still_gets_its_minimum_of_blocks_and_no_more(clock):
    fake = clock(0.2)  # one forward (200 ms) is twice the budget
    blocks = run(fake, warmup=1, min_run_time=0.1, min_blocks=5)
    # number = max(1, int(0.1 / 5 / 0.2)) = 1; 5 blocks are needed for a median -> 1 + 5 forwards
    assert (blocks.number_per_run, len(blocks.times), blocks.forwards) == (1, 5, 6)
    assert fake.calls == 6


def test_a_slow_clock_read_does_not_blow_up_the_forwards(clock):
    fake = clock(US122, read_s=US122)  # 122 us forward, and each clock read costs as much (a slowed perf_counter)
    blocks = run(fake, warmup=2, min_run_time=5 * 2.0 ** -7, min_blocks=5)
    # calibration: forward + one read = 2 x 2^-13 s -> number = 2^-7 / 2^-12 = 32 forwards a block;
    # a block is 32 forwards + one read = 33 x 2^-13 s; the budget is 320 x 2^-13 s -> 10 blocks (330)
    assert (blocks.number_per_run, len(blocks.times), blocks.forwards) == (32, 10, 2 + 320)
    # the read's cost is spread over its block: 33/32 of the forward, 3 % high
    assert blocks.times[0] == 33 / 32 * US122


def test_a_very_slow_clock_read_costs_the_minimum_of_blocks(clock):
    fake = clock(1e-3, read_s=1.0)  # 1 ms forward, a clock read of 1 s
    blocks = run(fake, warmup=2, min_run_time=0.2, min_blocks=5)
    # the first warm-up forward reads 1.001 s, over a block's share (0.2 / 5 = 0.04 s): the warm-up ends
    # there and number = 1; each block reads 1.001 s, the budget is passed at once, so the minimum of
    # 5 blocks decides: 1 + 5 forwards (blocked_autorange grew its blocks instead)
    assert (blocks.number_per_run, blocks.warmup_forwards, blocks.forwards) == (1, 1, 6)


def test_blocks_stop_at_the_cap_when_forwards_get_faster_after_calibration(clock):
    fake = clock([0.05, 1e-6])  # a warm-up forward of 50 ms, then 1 us each
    blocks = run(fake, warmup=2, min_run_time=0.1, min_blocks=4)
    # the 50 ms forward is over a block's share (0.1 / 4 = 25 ms): the warm-up ends after it, and
    # number = max(1, int(0.025 / 0.05)) = 1; 1 us blocks never fill 0.1 s -> stopped at 3 x 4 blocks
    assert len(blocks.times) == MAX_BLOCKS_PER_MIN * 4 == 12
    assert blocks.forwards == 1 + 12 and fake.calls == 13


def test_a_forward_that_fills_a_block_alone_ends_the_warmup(clock):
    fake = clock([0.125, 0.0625])  # a cold first forward of 125 ms, then 62.5 ms each
    blocks = run(fake, warmup=2, min_run_time=0.25, min_blocks=5)
    # a block's share is 0.25 / 5 = 50 ms: the first warm-up forward (125 ms) fills it alone, so the
    # second warm-up is skipped (it would size number = int(0.05 / 0.0625) = 1 just the same);
    # 5 blocks of 1 forward (312.5 ms) pass the budget -> 1 + 5 forwards, each block 62.5 ms
    assert (blocks.warmup_forwards, blocks.number_per_run, blocks.forwards) == (1, 1, 6)
    assert blocks.times == (0.0625,) * 5 and fake.calls == 6


def test_a_short_warmup_forward_keeps_the_whole_warmup(clock):
    fake = clock(MS8)
    blocks = run(fake, warmup=3, min_run_time=5 * 4 * MS8, min_blocks=5)
    # 7.8 ms is under a block's share (4 x 7.8 ms): 3 warm-up forwards, the last sizing number = 4
    assert (blocks.warmup_forwards, blocks.number_per_run, blocks.forwards) == (3, 4, 3 + 20)


def test_without_warmup_the_calibrating_forward_is_the_first_measurement(clock):
    fake = clock(0.01)
    blocks = run(fake, warmup=0, min_run_time=0.05, min_blocks=3)
    # first block: 1 forward (10 ms), kept; number = int(0.05 / 3 / 0.01) = 1; 0.05 s needs 5 blocks
    assert (blocks.warmup_forwards, blocks.number_per_run, len(blocks.times), blocks.forwards) == (0, 1, 5, 5)


@pytest.mark.parametrize("option, message", [({"warmup": -1}, "warmup must be >= 0"),
                                             ({"min_blocks": 0}, "min_measurements must be >= 1"),
                                             ({"min_run_time": 0.0}, "min_run_time must be > 0")])
def test_bad_options_are_refused(option, message):
    options = {"warmup": 1, "min_run_time": 0.1, "min_blocks": 3, **option}
    with pytest.raises(ValueError, match=message):
        time_blocks(lambda: None, lambda: None, **options)


def test_summary_quartiles_and_spread_note(monkeypatch):
    blocks = BlockTimes(times=(0.005, 0.001, 0.003, 0.004, 0.002), number_per_run=1, warmup_forwards=2,
                        timed_forwards=5)
    stats = summarise(blocks, batch_size=2, num_threads=2, device="cpu")
    # sorted 1..5 ms: median 3, q1 2, q3 4 (positions 1 and 3 of 0..4) -> IQR 2 ms = 67 % of the median
    assert (stats.median_s, stats.q1_s, stats.q3_s) == pytest.approx((0.003, 0.002, 0.004))
    assert stats.iqr_s == pytest.approx(0.002) and stats.per_sample_s == pytest.approx(0.0015)
    assert (stats.forwards, stats.warmup_forwards, stats.times) == (7, 2, 5)
    assert "IQR 67% of the median, above 20%, at 2 threads" in stats.spread_warning
    assert "time with 1 thread (num_threads=1" in stats.spread_warning  # 2 threads were used
    quiet = BlockTimes(times=(0.0100, 0.0101, 0.0102, 0.0103), number_per_run=3, warmup_forwards=1, timed_forwards=12)
    # q1 = 10.0 + 0.75 x 0.1 = 10.075 ms, q3 = 10.225 ms: IQR 0.15 ms = 1.5 % of 10.15 ms -> no note
    assert summarise(quiet, batch_size=1, num_threads=1, device="cpu").spread_warning == ""


def test_the_garbage_collector_is_off_while_timing_and_restored(clock):
    import gc

    states = []
    fake = clock(MS8)

    def call() -> None:
        states.append(gc.isenabled())
        fake.call()

    assert gc.isenabled()
    time_blocks(call, lambda: None, warmup=2, min_run_time=5 * MS8, min_blocks=5)
    # off for every forward, warm-up included (each may be the one that sizes the blocks); on again after
    assert not any(states) and gc.isenabled()

    def fails() -> None:
        if not gc.isenabled():
            raise RuntimeError("boom")
    with pytest.raises(RuntimeError, match="boom"):
        time_blocks(fails, lambda: None, warmup=1, min_run_time=0.1, min_blocks=1)
    assert gc.isenabled()
