"""The speedup and its uncertainty, from the kernel's timed runs and the baselines.

Two sources of baseline time:
- the cached first measurement of the problem (eager and TorchInductor, timed once per problem and GPU):
  cheap, but the GPU's state drifts between that window and the kernel's (clocks, temperature, other
  tenants: kernel times a median 4% and up to 28% apart a few seconds later on an H200);
- the anchor: eager PyTorch timed again in the kernel's own window, its runs interleaved with the
  kernel's (`envs.timing.interleaved_schedule`), so drift lands on both alike.

With an anchor the eager speedup is median(anchor) / median(kernel), and the TorchInductor speedup
carries the cached inductor/eager ratio over: t_inductor_now = t_inductor_cached * t_eager_now /
t_eager_cached. Without one, the cached baseline's median divides the kernel's. The interval is a
percentile bootstrap of that statistic, resampling each window's runs (the anchor's and the kernel's
independently, as they are interleaved rather than paired one to one).

An anchor far from the cached eager time (beyond `MAX_DRIFT` either way) is not trusted alone: the
candidate runs in the same process and might slow the reference down; the smaller of the two speedups is
used and a note says so.
"""

from __future__ import annotations

import dataclasses

import torch

from envs.verdict import SpeedupInterval, TimingStats, Verdict

MAX_DRIFT = 1.5
CONFIDENCE = 0.95
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


def _resampled_medians(samples: list[float], resamples: int, generator: torch.Generator) -> torch.Tensor:
    """The nearest-rank median of each of `resamples` bootstrap resamples of `samples`."""
    values = torch.tensor(samples, dtype=torch.float64)
    n = len(samples)
    picks = values[torch.randint(n, (resamples, n), generator=generator)]
    return picks.kthvalue(int(round(0.5 * (n - 1))) + 1, dim=1).values


def bootstrap_ratio(numerator: list[float], denominator: list[float], scale: float = 1.0,
                    resamples: int = RESAMPLES, confidence: float = CONFIDENCE,
                    seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of scale * median(numerator) / median(denominator); a one-element
    `numerator` is a constant (a cached median). Seeded, so the same samples give the same interval."""
    if not numerator or not denominator:
        raise ValueError("bootstrap needs samples on both sides")
    generator = torch.Generator().manual_seed(seed)
    num = torch.full((resamples,), float(numerator[0]), dtype=torch.float64) if len(numerator) == 1 else \
        _resampled_medians(numerator, resamples, generator)
    den = _resampled_medians(denominator, resamples, generator)
    stats = (scale * num / den).sort().values
    tail = (1 - confidence) / 2
    low = stats[min(resamples - 1, int(tail * resamples))]
    high = stats[min(resamples - 1, int((1 - tail) * resamples))]
    return float(low), float(high)


def estimate_speedup(kernel: list[float], eager: TimingStats | None, inductor: TimingStats | None,
                     baseline: str, anchor: list[float] | None = None) -> SpeedupEstimate | None:
    """The speedup against `baseline` (inductor or eager; eager when TorchInductor failed), or None when
    there is nothing to divide by."""
    notes: list[str] = []
    chosen = inductor if baseline == "inductor" else eager
    name = baseline
    if chosen is None and eager is not None:
        chosen, name = eager, "eager"
        notes.append("TorchInductor baseline unavailable; speedup is against eager PyTorch")
    kernel = [t for t in kernel if t > 0]
    if chosen is None or not kernel:
        return None
    cached = chosen.median_ms / _median(kernel)

    def from_cache(drift: float | None) -> SpeedupEstimate:
        low, high = bootstrap_ratio([chosen.median_ms], kernel)
        return SpeedupEstimate(cached, SpeedupInterval(low, high, CONFIDENCE, False, drift, RESAMPLES), name,
                               tuple(notes))

    if not anchor or eager is None or eager.median_ms <= 0:
        return from_cache(None)
    drift = _median(anchor) / eager.median_ms
    scale = chosen.median_ms / eager.median_ms  # 1 for eager; the cached inductor/eager ratio otherwise
    anchored = scale * _median(anchor) / _median(kernel)
    if not 1 / MAX_DRIFT <= drift <= MAX_DRIFT and cached < anchored:
        notes.append(f"the re-anchored baseline is {drift:.2f}x its cached time: the smaller, cached speedup is used")
        return from_cache(drift)
    low, high = bootstrap_ratio(anchor, kernel, scale)
    return SpeedupEstimate(anchored, SpeedupInterval(low, high, CONFIDENCE, True, drift, RESAMPLES), name,
                           tuple(notes))


def rebase_speedup(verdict: Verdict, baseline: TimingStats) -> tuple[float | None, SpeedupInterval | None]:
    """`verdict`'s speedup and interval against another cached baseline. The ratio of the two cached
    baselines carries over, with or without an anchor (an anchored speedup is a cached ratio times the
    anchored eager speedup)."""
    t = verdict.timings
    current = getattr(t, verdict.baseline, None) if t is not None and verdict.baseline else None
    if t is None or t.kernel is None or t.kernel.median_ms <= 0:
        return verdict.speedup, verdict.speedup_interval
    if verdict.speedup is None or current is None or current.median_ms <= 0:
        return baseline.median_ms / t.kernel.median_ms, None
    factor = baseline.median_ms / current.median_ms
    interval = verdict.speedup_interval
    if interval is not None:
        interval = dataclasses.replace(interval, low=interval.low * factor, high=interval.high * factor)
    return verdict.speedup * factor, interval
