"""The speedup's interval over placement blocks (envs/speedup.py two-level bootstrap), with synthetic runs:
a shift between blocks must widen it, no shift must leave it about as the plain bootstrap of runs."""

from __future__ import annotations

import random

import pytest

from envs.speedup import bootstrap_ratio, estimate_speedup, group_runs
from envs.verdict import SpeedupInterval, Status, TimingStats, Verdict


def _runs(rng: random.Random, mean: float, n: int, noise: float = 0.01) -> list[float]:
    return [mean * (1 + rng.gauss(0, noise)) for _ in range(n)]


def _median(xs: list[float]) -> float:
    return sorted(xs)[int(round(0.5 * (len(xs) - 1)))]


def _flat(blocks: dict[int, list[float]]) -> list[float]:
    return [t for xs in blocks.values() for t in xs]


def _cached(ms: float) -> TimingStats:
    return TimingStats(ms, ms, 0.0, ms, ms, ms, ms, 100)


def test_a_shift_between_placement_blocks_widens_the_interval_to_cover_it():
    rng = random.Random(3)
    # Where the inputs landed moves the kernel by +-6% between blocks; within a block runs vary by 1%.
    kernel = {0: _runs(rng, 0.50, 34), 1: _runs(rng, 0.53, 33), 2: _runs(rng, 0.47, 33)}
    anchor = {b: _runs(rng, 1.0, n) for b, n in ((0, 17), (1, 17), (2, 16))}
    per_block = [_median(anchor[b]) / _median(kernel[b]) for b in kernel]
    flat_low, flat_high = bootstrap_ratio(_flat(anchor), _flat(kernel))
    low, high = bootstrap_ratio(anchor, kernel)
    # Runs resampled as if independent: an interval far narrower than the blocks' own speedups apart.
    assert flat_low > min(per_block) * 1.03 and flat_high < max(per_block) * 0.97
    assert high - low > 5 * (flat_high - flat_low)
    assert low < min(per_block) * 1.005 and high > max(per_block) * 0.995
    assert low < _median(_flat(anchor)) / _median(_flat(kernel)) < high


def test_without_a_shift_between_blocks_the_interval_is_about_the_plain_bootstrap():
    rng = random.Random(4)
    kernel = {b: _runs(rng, 0.5, n) for b, n in ((0, 34), (1, 33), (2, 33))}
    anchor = {b: _runs(rng, 1.0, n) for b, n in ((0, 17), (1, 17), (2, 16))}
    flat_low, flat_high = bootstrap_ratio(_flat(anchor), _flat(kernel))
    low, high = bootstrap_ratio(anchor, kernel)
    # Drawing blocks first adds their chance differences once more (within-block noise counted at both
    # levels): a little wider, never a different picture.
    assert 0.8 < (high - low) / (flat_high - flat_low) < 1.5
    assert low < 2.0 < high and flat_low < 2.0 < flat_high
    # One block is the plain bootstrap of runs itself.
    assert bootstrap_ratio({0: _flat(anchor)}, {0: _flat(kernel)}) == (flat_low, flat_high)


def test_a_shift_both_sides_share_cancels_because_a_drawn_block_brings_both():
    rng = random.Random(5)
    # The GPU ran 10% slower during block 1 and 10% faster during block 2: kernel and anchor alike.
    kernel = {0: _runs(rng, 0.50, 34), 1: _runs(rng, 0.55, 33), 2: _runs(rng, 0.45, 33)}
    anchor = {0: _runs(rng, 1.0, 17), 1: _runs(rng, 1.1, 17), 2: _runs(rng, 0.9, 16)}
    low, high = bootstrap_ratio(anchor, kernel)
    assert low < 2.0 < high and high - low < 0.04
    # Blocks that do not pair (other ids) are drawn on each side alone: the shared drift no longer cancels.
    unpaired_low, unpaired_high = bootstrap_ratio({b + 10: xs for b, xs in anchor.items()}, kernel)
    assert unpaired_high - unpaired_low > 5 * (high - low)


def test_runs_are_grouped_by_block_and_bad_ids_fall_back_to_one_block():
    assert group_runs([1.0, 2.0, 3.0, -1.0], [0, 1, 1, 2]) == {0: [1.0], 1: [2.0, 3.0]}  # t <= 0 dropped
    assert group_runs([1.0, 2.0]) == {0: [1.0, 2.0]}  # a worker from before blocks were reported
    assert group_runs([1.0, 2.0], [0]) == {0: [1.0, 2.0]}  # not one id per run
    assert group_runs([1.0, 2.0], [0, True]) == {0: [1.0, 2.0]}  # not a block id
    assert group_runs([1.0, 2.0], [0, -1]) == {0: [1.0, 2.0]}
    with pytest.raises(ValueError):
        bootstrap_ratio({0: [1.0]}, {0: []})


def test_estimate_reports_how_many_blocks_its_interval_resampled():
    rng = random.Random(6)
    kernel = _runs(rng, 0.5, 34) + _runs(rng, 0.53, 33) + _runs(rng, 0.47, 33)
    kernel_blocks = [0] * 34 + [1] * 33 + [2] * 33
    anchor = _runs(rng, 1.0, 50)
    anchor_blocks = [0] * 17 + [1] * 17 + [2] * 16
    blocked = estimate_speedup(kernel, _cached(1.0), _cached(0.8), "inductor", anchor, kernel_blocks, anchor_blocks)
    flat = estimate_speedup(kernel, _cached(1.0), _cached(0.8), "inductor", anchor)
    assert blocked.speedup == flat.speedup  # the point estimate does not depend on the blocks
    assert blocked.interval.blocks == 3 and flat.interval.blocks == 1 and blocked.interval.anchored
    assert blocked.interval.high - blocked.interval.low > 3 * (flat.interval.high - flat.interval.low)
    # Without an anchor the cached median is a constant; the kernel's blocks are still resampled.
    cached = estimate_speedup(kernel, _cached(1.0), None, "eager", kernel_blocks=kernel_blocks)
    assert cached.interval.blocks == 3 and not cached.interval.anchored
    assert cached.interval.low < 1.0 / 0.53 * 1.01 and cached.interval.high > 1.0 / 0.47 * 0.99


def test_the_interval_carries_each_blocks_median_of_the_kernel_and_the_anchor():
    kernel = [0.50, 0.52, 0.51, 0.60, 0.58, 0.40]
    anchor = [1.0, 1.2, 0.9]
    anchored = estimate_speedup(kernel, _cached(1.0), _cached(0.8), "eager", anchor, [2, 2, 2, 0, 0, 1], [0, 1, 2])
    # block order; a block of two runs gives its nearest-rank median (the lower one), as the verdict's medians
    assert anchored.interval.kernel_block_ms == [0.58, 0.4, 0.51]
    assert anchored.interval.anchor_block_ms == [1.0, 1.2, 0.9]
    cached = estimate_speedup(kernel, _cached(1.0), None, "eager", kernel_blocks=[2, 2, 2, 0, 0, 1])
    assert cached.interval.kernel_block_ms == [0.58, 0.4, 0.51] and cached.interval.anchor_block_ms is None
    v = Verdict(Status.CORRECT, "p", "NVIDIA H200", speedup=anchored.speedup, speedup_interval=anchored.interval)
    assert Verdict.from_dict(v.to_dict()) == v


def test_verdicts_cached_before_blocks_were_reported_still_load():
    interval = SpeedupInterval(1.5, 1.7, 0.95, True, 1.1, 1000, blocks=3)
    v = Verdict(Status.CORRECT, "p", "NVIDIA H200", speedup=1.6, baseline="inductor", speedup_interval=interval)
    assert Verdict.from_dict(v.to_dict()) == v
    old = v.to_dict()
    for field in ("blocks", "kernel_block_ms", "anchor_block_ms"):  # as written before these fields existed
        del old["speedup_interval"][field]
    loaded = Verdict.from_dict(old).speedup_interval
    assert loaded.blocks == 1 and loaded.kernel_block_ms is None and loaded.anchor_block_ms is None


def test_pool_reads_block_ids_only_when_there_is_one_per_sample():
    from envs.worker.messages import _samples

    result = {
        "kernel_samples": [0.5, float("inf"), 0.6, "x"],
        "kernel_blocks": [0, 0, 1, 1],
        "anchor_samples": [1.0, 1.1],
        "anchor_blocks": [0],
    }
    assert _samples(result, "kernel") == ([0.5, 0.6], [0, 1])  # ids follow the samples that are kept
    assert _samples(result, "anchor") == ([1.0, 1.1], None)
    assert _samples({"kernel_samples": [0.5]}, "kernel") == ([0.5], None)  # a worker from before blocks
    assert _samples({"kernel_samples": "junk"}, "kernel") == ([], None)


def test_placement_timing_feeds_its_block_ids_to_the_interval():
    from envs.timing import ANCHOR, KERNEL, placement_blocks, time_in_placements
    from tests.unit.test_timing import PlacementClock

    clock = PlacementClock([1.0, 1.08, 0.95])  # the kernel's time on each of three placements
    timed = time_in_placements(
        {KERNEL: lambda: KERNEL, ANCHOR: lambda: ANCHOR},
        placement_blocks(100, 50, 3),
        clock.moved,
        clock=clock,
        warmup_ms=0,
    )
    estimate = estimate_speedup(
        timed.samples[KERNEL],
        _cached(1.0),
        None,
        "eager",
        timed.samples[ANCHOR],
        timed.blocks[KERNEL],
        timed.blocks[ANCHOR],
    )
    per_placement = [2.0 / f for f in clock.factors]
    assert estimate.interval.blocks == 3
    assert estimate.interval.low <= min(per_placement) * 1.01 and estimate.interval.high >= max(per_placement) * 0.99
    # The same runs without their blocks: runs resampled as one sample claim no uncertainty at all.
    flat = estimate_speedup(timed.samples[KERNEL], _cached(1.0), None, "eager", timed.samples[ANCHOR])
    assert flat.interval.high - flat.interval.low < 1e-9


def test_relative_half_width_narrows_with_more_blocks_and_uses_the_anchor_where_there_is_one():
    import random

    from envs.speedup import relative_half_width

    rng = random.Random(1)

    def runs(blocks):
        kernel, kernel_ids, anchor, anchor_ids = [], [], [], []
        for b in range(blocks):
            shift = 1 + rng.uniform(-0.05, 0.05)
            kernel += [shift * (1 + rng.gauss(0, 0.002)) for _ in range(2)]
            kernel_ids += [b, b]
            anchor.append(2 * shift)  # the anchor moves with the block as the kernel does: the ratio stays 2
            anchor_ids.append(b)
        return kernel, kernel_ids, anchor, anchor_ids

    k12, i12, a12, j12 = runs(12)
    k48, i48, a48, j48 = runs(48)
    unanchored_12, unanchored_48 = relative_half_width(k12, i12), relative_half_width(k48, i48)
    assert unanchored_48 < unanchored_12  # the kernel median alone: the placement spread, shrinking with blocks
    assert relative_half_width(k12, i12, a12, j12) < unanchored_12 / 3  # paired blocks cancel the shared shift
    assert relative_half_width([], [], None, None) == float("inf")
