"""Pool metrics: counters, latency percentiles per stage, verdict mix, actor busy fractions.

`PoolMetrics.snapshot()` is a flat dict a trainer can hand to `wandb.log`; with Ray, the same values
are exported through `ray.util.metrics` (Prometheus, scraped by the Ray dashboard / Grafana).
"""

from __future__ import annotations

import collections
import logging
import threading
from typing import Any

from envs.verdict import Status

log = logging.getLogger(__name__)

STAGES = ("cpu_stage", "queue_wait", "execution", "total")
COUNTERS = (
    "submitted",
    "answered",
    "errors",
    "cancelled",
    "cache_hits",
    "cache_misses",
    "dedup_hits",
    "executions",
    "retries",
    "crashes_after_retry",
    "actor_failures",
    "actor_restarts",
    "actor_start_failures",
    "baseline_jobs",
)
_BOUNDARIES = [0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0]


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list (0 when empty)."""
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, max(0, int(round(q * (len(sorted_values) - 1)))))
    return sorted_values[index]


class RayExporter:
    """Mirror of the pool's metrics in Ray's metric system; every call is best effort."""

    def __init__(self, pool: str):
        from ray.util import metrics as m

        self._tags = {"pool": pool}
        self.latency = m.Histogram(
            "kernelrl_pool_latency_seconds",
            "Seconds per request and stage",
            boundaries=_BOUNDARIES,
            tag_keys=("pool", "stage"),
        )
        self.verdicts = m.Counter("kernelrl_pool_verdicts", "Verdicts answered, by status", tag_keys=("pool", "status"))
        self.events = m.Counter(
            "kernelrl_pool_events", "Pool events (cache hits, dedup hits, retries, ...)", tag_keys=("pool", "event")
        )
        self.depth = m.Gauge("kernelrl_pool_queue_depth", "Requests by state", tag_keys=("pool", "state"))
        self.busy = m.Gauge(
            "kernelrl_pool_gpu_busy_fraction",
            "Fraction of wall time an actor's device was executing a candidate",
            tag_keys=("pool", "actor"),
        )
        self.ratio = m.Gauge("kernelrl_pool_cache_hit_rate", "Verdict-cache hits / lookups", tag_keys=("pool",))

    def _safe(self, fn, *args, **tags: str) -> None:
        try:
            fn(*args, tags={**self._tags, **tags})
        except Exception as e:  # metrics must never break evaluation
            log.debug("ray metric export failed: %s", e)

    def observe(self, stage: str, seconds: float) -> None:
        self._safe(self.latency.observe, seconds, stage=stage)

    def count(self, event: str, n: int) -> None:
        self._safe(self.events.inc, n, event=event)

    def verdict(self, status: str) -> None:
        self._safe(self.verdicts.inc, 1, status=status)

    def gauges(self, depth: dict[str, int], busy: dict[str, float], cache_hit_rate: float) -> None:
        for state, n in depth.items():
            self._safe(self.depth.set, n, state=state)
        for actor, fraction in busy.items():
            self._safe(self.busy.set, fraction, actor=actor)
        self._safe(self.ratio.set, cache_hit_rate)


class PoolMetrics:
    def __init__(self, window: int = 10000, exporter: RayExporter | None = None):
        self._lock = threading.Lock()
        self._latency = {s: collections.deque(maxlen=window) for s in STAGES}
        self._counts = dict.fromkeys(COUNTERS, 0)
        self._verdicts = dict.fromkeys((s.value for s in Status), 0)
        self.exporter = exporter

    def observe(self, stage: str, seconds: float) -> None:
        with self._lock:
            self._latency[stage].append(seconds)
        if self.exporter:
            self.exporter.observe(stage, seconds)

    def count(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._counts[name] += n
        if self.exporter:
            self.exporter.count(name, n)

    def verdict(self, status: Status) -> None:
        with self._lock:
            self._verdicts[status.value] += 1
        if self.exporter:
            self.exporter.verdict(status.value)

    def get(self, name: str) -> int:
        with self._lock:
            return self._counts[name]

    def cache_hit_rate(self) -> float:
        with self._lock:
            lookups = self._counts["cache_hits"] + self._counts["cache_misses"]
            return self._counts["cache_hits"] / lookups if lookups else 0.0

    def snapshot(self, depth: dict[str, int], busy: dict[str, float], extra: dict[str, Any]) -> dict[str, Any]:
        """Flat dict: `pool/<name>` keys, latencies in seconds."""
        with self._lock:
            samples = {s: sorted(v) for s, v in self._latency.items()}
            counts = dict(self._counts)
            verdicts = dict(self._verdicts)
        out: dict[str, Any] = {f"pool/{k}": v for k, v in depth.items()}
        out["pool/queue_depth"] = depth.get("queued", 0) + depth.get("parked", 0)
        out.update({f"pool/{k}": v for k, v in counts.items()})
        out.update({f"pool/{k}": v for k, v in extra.items()})
        lookups = counts["cache_hits"] + counts["cache_misses"]
        out["pool/cache_hit_rate"] = counts["cache_hits"] / lookups if lookups else 0.0
        total_verdicts = sum(verdicts.values())
        for status, n in verdicts.items():
            out[f"pool/verdicts/{status}"] = n
            out[f"pool/verdict_frac/{status}"] = n / total_verdicts if total_verdicts else 0.0
        for stage, xs in samples.items():
            out[f"pool/latency/{stage}_count"] = len(xs)
            out[f"pool/latency/{stage}_mean_s"] = sum(xs) / len(xs) if xs else 0.0
            for q in (50, 90, 99):
                out[f"pool/latency/{stage}_p{q}_s"] = percentile(xs, q / 100)
        for actor, fraction in busy.items():
            out[f"pool/gpu_busy_fraction/{actor}"] = fraction
        out["pool/gpu_busy_fraction"] = sum(busy.values()) / len(busy) if busy else 0.0
        if self.exporter:
            self.exporter.gauges(depth, busy, out["pool/cache_hit_rate"])
        return out
