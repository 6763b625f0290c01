"""The speedup and its uncertainty, from the kernel's timed runs and the baselines.

The baseline is the anchor when there is one (eager PyTorch timed again in the kernel's own window, its
runs interleaved with the kernel's, so drift lands on both alike): median(anchor) / median(kernel), with
the cached ratio of TorchInductor to the anchor reference (timed together, in the same placement blocks)
carrying the TorchInductor speedup over. Without one, the cached first measurement's median divides the
kernel's. What the anchor read when the baselines were cached is the anchor reference (eager timed in the
candidate's placement blocks, as the timed callable and as the anchor); baselines cached before it existed
have only eager's median of 100 runs back to back, which a launch-bound problem's anchor reads 1.5-3x above
with no drift at all (docs/evaluation.md).

The drift test (`drift_detected`) keeps the anchor out of the ratio where its runs cannot tell the GPU from
the one the reference was timed on: the reference then stands in for the anchor, whose own placement noise
would only widen the speedup's spread and keep sequential timing running. An anchor beyond `MAX_DRIFT` of
what it read then is not trusted alone (the candidate shares its process): the smaller speedup is used,
with a note.

The interval is a two-level percentile bootstrap: runs of one placement block share its placement and its
moment, so each resample draws blocks with replacement, then runs within each drawn block; a drawn block
brings the kernel's and the anchor's runs together. docs/speedup-interval.md has the method, its sources,
its measured coverage and its limits.
"""

from __future__ import annotations

import dataclasses

import torch

from envs.verdict import SpeedupInterval, TimingStats, Verdict

MAX_DRIFT = 1.5
# The baselines' key of the anchor reference: TimingStats (as a dict) of eager's anchor runs, timed with the
# baselines in the candidate's placement blocks; what `drift` is judged against where it is cached.
ANCHOR_REFERENCE = "anchor_reference"
# How the cached baselines are measured, part of the baseline and verdict cache keys on a GPU: TorchInductor
# timed beside the anchor reference, in its placement blocks (the worker's timing phase).
BASELINE_METHOD = "inductor-in-reference-blocks"
CONFIDENCE = 0.95
# The drift test's interval: wider than the speedup's, since an anchor it wrongly calls drifted puts its own
# placement noise back into the speedup (a 95% interval of 12 blocks' median called 15% of undrifted anchors
# drifted in simulation, a 99% one 3%; it still tells a 5% drift in 90% of evaluations)
DRIFT_CONFIDENCE = 0.99
# ... and the most the anchor's median may differ from the reference for the reference to stand in for it: so the
# test never moves a speedup by more than this from the anchored one. The interval alone missed a step change
# (session 39, H100: both callables ~19% slower from the third block on, the anchor's runs bimodal, its median at
# 1.16x the reference and the interval still reaching 1)
DRIFT_TOLERANCE = 0.02
RESAMPLES = 1000


def _median(samples: list[float]) -> float:
    """The median as TimingStats reports it (nearest rank), so a speedup equals the ratio of the verdict's
    printed medians."""
    s = sorted(samples)
    return s[min(len(s) - 1, int(round(0.5 * (len(s) - 1))))]


@dataclasses.dataclass(frozen=True)
class SpeedupEstimate:
    speedup: float
    interval: SpeedupInterval
    baseline: str  # which baseline the speedup divides by
    notes: tuple[str, ...] = ()


Blocks = dict[int, list[float]]  # timed runs (ms) by placement block id


def group_runs(samples: list[float], blocks: list[int] | None = None) -> Blocks:
    """Runs by placement block, `blocks[i]` being the block of `samples[i]`; non-positive runs dropped.
    Without block ids (a worker from before they were reported) or with ids that do not match the
    samples one to one, every run counts as one block: the plain bootstrap of runs."""
    if blocks is None or len(blocks) != len(samples) or not all(type(b) is int and b >= 0 for b in blocks):
        blocks = [0] * len(samples)
    grouped: Blocks = {}
    for t, b in zip(samples, blocks):
        if t > 0:
            grouped.setdefault(b, []).append(float(t))
    return grouped


def block_medians(blocks: Blocks) -> list[float]:
    """Each block's median run (ms, to 10 ns), in block order."""
    return [round(_median(blocks[b]), 5) for b in sorted(blocks)]


def _as_blocks(samples: list[float] | Blocks) -> Blocks:
    return (
        {b: list(xs) for b, xs in samples.items() if xs}
        if isinstance(samples, dict)
        else ({0: list(samples)} if samples else {})
    )


def _block_picks(blocks: int, resamples: int, generator: torch.Generator) -> torch.Tensor:
    """The first level: for each resample, which block fills each of the `blocks` slots."""
    if blocks == 1:
        return torch.zeros((resamples, 1), dtype=torch.long)
    return torch.randint(blocks, (resamples, blocks), generator=generator)


def _resampled_medians(blocks: Blocks, picks: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """The nearest-rank median of each resample: slot j takes as many runs as block j has (the design of
    the measurement: split_runs fixes the block sizes), drawn with replacement from the block picked for
    it. One block: the plain bootstrap of runs."""
    groups = list(blocks.values())
    sizes = torch.tensor([len(g) for g in groups])
    offsets = torch.cumsum(sizes, 0) - sizes
    values = torch.tensor([t for g in groups for t in g], dtype=torch.float64)
    resamples = picks.shape[0]
    columns = []
    for slot, size in enumerate(sizes.tolist()):
        chosen = picks[:, slot : slot + 1]
        within = (torch.rand((resamples, size), generator=generator, dtype=torch.float64) * sizes[chosen]).long()
        columns.append(values[offsets[chosen] + within])
    runs = torch.cat(columns, dim=1)
    return runs.kthvalue(int(round(0.5 * (runs.shape[1] - 1))) + 1, dim=1).values


def bootstrap_ratio(
    numerator: list[float] | Blocks,
    denominator: list[float] | Blocks,
    scale: float = 1.0,
    resamples: int = RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of scale * median(numerator) / median(denominator), each side a list
    of runs (one block) or runs by block id (`group_runs`). Blocks are drawn first, then runs within
    them; when both sides have the same block ids a drawn block brings both sides' runs (they were
    timed together), otherwise each side's blocks are drawn on their own. A one-element numerator is a
    constant (a cached median). Seeded, so the same samples give the same interval."""
    num, den = _as_blocks(numerator), _as_blocks(denominator)
    if not num or not den:
        raise ValueError("bootstrap needs samples on both sides")
    generator = torch.Generator().manual_seed(seed)
    den_picks = _block_picks(len(den), resamples, generator)
    paired = len(den) > 1 and sorted(num) == sorted(den)
    if paired:
        num = {b: num[b] for b in den}  # the same order: slot j of both sides is block j
    num_picks = den_picks if paired else _block_picks(len(num), resamples, generator)
    stats = (
        (scale * _resampled_medians(num, num_picks, generator) / _resampled_medians(den, den_picks, generator))
        .sort()
        .values
    )
    tail = (1 - confidence) / 2
    low = stats[min(resamples - 1, int(tail * resamples))]
    high = stats[min(resamples - 1, int((1 - tail) * resamples))]
    return float(low), float(high)


def drift_detected(anchor: list[float] | Blocks, reference_ms: float) -> bool:
    """Whether the anchor's runs (a list, or runs by block) say the GPU reads differently now than when the
    anchor reference (`reference_ms`, cached with the baselines) was timed: their median is more than
    `DRIFT_TOLERANCE` from it, or the percentile bootstrap interval (`DRIFT_CONFIDENCE`) of median(anchor) /
    reference leaves out 1. Where neither, the anchor's median is as far from the reference as its own
    placement noise carries it, and dividing by it would add that noise instead of taking out a drift."""
    runs = _as_blocks(anchor)
    if not runs or not reference_ms > 0:
        return True  # nothing to judge by: the anchor decides, as without the test
    drift = _median([t for xs in runs.values() for t in xs]) / reference_ms
    if abs(drift - 1) > DRIFT_TOLERANCE:
        return True
    low, high = bootstrap_ratio(runs, [reference_ms], confidence=DRIFT_CONFIDENCE)
    return not low <= 1.0 <= high


def relative_half_width(
    kernel: list[float],
    kernel_blocks: list[int],
    anchor: list[float] | None = None,
    anchor_blocks: list[int] | None = None,
    resamples: int = RESAMPLES,
) -> float:
    """Half the width of the speedup's interval over the speedup itself, from the runs so far: the
    anchored ratio's where there are anchor runs, else the kernel median's (a cached baseline is a
    constant). What sequential timing compares with its target precision."""
    runs = group_runs(kernel, kernel_blocks)
    anchored = group_runs(anchor or [], anchor_blocks)
    if not runs:
        return float("inf")
    numerator: list[float] | Blocks = anchored or [1.0]
    low, high = bootstrap_ratio(numerator, runs, resamples=resamples)
    kernel_median = _median([t for xs in runs.values() for t in xs])
    point = (_median([t for xs in anchored.values() for t in xs]) if anchored else 1.0) / kernel_median
    return (high - low) / 2 / point


def estimate_speedup(
    kernel: list[float],
    eager: TimingStats | None,
    inductor: TimingStats | None,
    baseline: str,
    anchor: list[float] | None = None,
    kernel_blocks: list[int] | None = None,
    anchor_blocks: list[int] | None = None,
    anchor_reference: TimingStats | None = None,
    drift_test: bool = True,
) -> SpeedupEstimate | None:
    """The speedup against `baseline` (inductor or eager; eager when TorchInductor failed), or None when
    there is nothing to divide by. `kernel_blocks` / `anchor_blocks` name the placement block of each run
    (`group_runs`); the interval resamples those blocks. `anchor_reference` (cached with the baselines; None
    in baselines cached before it) is what the anchor read then: its drift is judged against it, and with
    `drift_test` an anchor without a detectable drift (`drift_detected`) gives way to it."""
    notes: list[str] = []
    chosen = inductor if baseline == "inductor" else eager
    name = baseline
    if chosen is None and eager is not None:
        chosen, name = eager, "eager"
        notes.append("TorchInductor baseline unavailable; speedup is against eager PyTorch")
    runs = group_runs(kernel, kernel_blocks)
    kernel = [t for xs in runs.values() for t in xs]
    if chosen is None or not kernel:
        return None
    cached = chosen.median_ms / _median(kernel)

    def interval(
        numerator: list[float] | Blocks, scale: float, anchored: bool, drift: float | None, anchor: Blocks | None = None
    ) -> SpeedupInterval:
        low, high = bootstrap_ratio(numerator, runs, scale)
        anchor = numerator if isinstance(numerator, dict) else anchor
        return SpeedupInterval(
            low,
            high,
            CONFIDENCE,
            anchored,
            drift,
            RESAMPLES,
            blocks=len(runs),
            kernel_block_ms=block_medians(runs),
            anchor_block_ms=block_medians(anchor) if anchor else None,
        )

    anchor_runs = group_runs(anchor or [], anchor_blocks)
    if not anchor_runs or eager is None or eager.median_ms <= 0:
        return SpeedupEstimate(cached, interval([chosen.median_ms], 1.0, False, None), name, tuple(notes))
    anchor = [t for xs in anchor_runs.values() for t in xs]
    # What an anchor read when the baselines were cached (eager's median where there is no reference), which is
    # also what TorchInductor's cached time is divided by: 1 against eager.
    then = _eager_as_cached(eager, anchor_reference)
    drift = _median(anchor) / then.median_ms
    scale = 1.0 if name == "eager" else chosen.median_ms / then.median_ms
    anchored = scale * _median(anchor) / _median(kernel)
    if drift_test and then is anchor_reference and not drift_detected(anchor_runs, then.median_ms):
        steady = scale * then.median_ms / _median(kernel)
        return SpeedupEstimate(steady, interval([then.median_ms], scale, False, drift, anchor_runs), name, tuple(notes))
    if not 1 / MAX_DRIFT <= drift <= MAX_DRIFT and cached < anchored:
        against = "its cached reference" if then is anchor_reference else "its cached time"
        notes.append(f"the re-anchored baseline is {drift:.2f}x {against}: the smaller, cached speedup is used")
        return SpeedupEstimate(cached, interval([chosen.median_ms], 1.0, False, drift), name, tuple(notes))
    return SpeedupEstimate(anchored, interval(anchor_runs, scale, True, drift), name, tuple(notes))


def _eager_as_cached(eager: TimingStats, anchor_reference: TimingStats | None) -> TimingStats:
    """What TorchInductor's cached time compares with: the anchor reference where one was cached (the worker
    times Inductor as its timed callable, in the same placement blocks), eager's back-to-back median otherwise
    (baselines measured without re-anchoring)."""
    return anchor_reference if anchor_reference is not None and anchor_reference.median_ms > 0 else eager


def rebase_speedup(verdict: Verdict, baseline: str) -> tuple[float | None, SpeedupInterval | None]:
    """`verdict`'s speedup and interval against another cached baseline (`eager` or `inductor`). The ratio of the
    two cached baselines carries over, with or without an anchor (an anchored speedup is a cached ratio times
    the anchored eager speedup); where the anchor reference was cached, it stands for eager in that ratio, since
    TorchInductor was timed beside it, not beside eager's back-to-back runs (`_eager_as_cached`)."""
    t = verdict.timings
    if t is None or t.kernel is None or t.kernel.median_ms <= 0:
        return verdict.speedup, verdict.speedup_interval
    target = getattr(t, baseline)
    if target is None:
        return verdict.speedup, verdict.speedup_interval
    current = getattr(t, verdict.baseline, None) if verdict.baseline else None
    if verdict.speedup is None or current is None or current.median_ms <= 0:
        return target.median_ms / t.kernel.median_ms, None

    def comparable(name: str, stats: TimingStats) -> TimingStats:
        return _eager_as_cached(stats, t.anchor_reference) if name == "eager" else stats

    factor = comparable(baseline, target).median_ms / comparable(verdict.baseline, current).median_ms
    interval = verdict.speedup_interval
    if interval is not None:
        interval = dataclasses.replace(interval, low=interval.low * factor, high=interval.high * factor)
    return verdict.speedup * factor, interval
