"""GPU utilisation and memory per training step, read from `nvidia-smi` in the background.

`nvidia-smi --loop-ms` streams one line per GPU per tick; a reader thread keeps the lines and `take()` turns
those since the last call into `gpu/*` metrics. nvidia-smi sees every process on the GPU (engine, learner,
evaluation actors), which torch's own counters in one process cannot. Without nvidia-smi it logs nothing.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import threading
from dataclasses import dataclass

log = logging.getLogger("kernelrl.gpu_monitor")

QUERY = "index,utilization.gpu,memory.used,memory.total"


@dataclass(frozen=True)
class GpuSample:
    index: int
    util_pct: float
    mem_used_mib: float
    mem_total_mib: float


def parse_line(line: str) -> GpuSample | None:
    """One `--format=csv,noheader,nounits` line of QUERY; None for anything else ('[N/A]' included)."""
    parts = [p.strip() for p in line.split(",")]
    if len(parts) != 4:
        return None
    try:
        return GpuSample(int(parts[0]), float(parts[1]), float(parts[2]), float(parts[3]))
    except ValueError:
        return None


def summarize(samples: list[GpuSample]) -> dict[str, float]:
    """Mean and max utilisation over every GPU and tick, peak memory in GiB (one GPU's largest), and how many
    GPUs nvidia-smi reported (this node's: the divisor of perf/throughput). With more than one GPU, each one's
    mean as well (`gpu/util_mean/<index>`): nvidia-smi sees the whole node, CUDA_VISIBLE_DEVICES or not, so
    GPUs a job does not use would otherwise dilute the mean."""
    if not samples:
        return {}
    utils = [s.util_pct for s in samples]
    by_gpu: dict[int, list[float]] = {}
    for s in samples:
        by_gpu.setdefault(s.index, []).append(s.util_pct)
    out = {
        "gpu/util_mean": sum(utils) / len(utils),
        "gpu/util_max": max(utils),
        "gpu/mem_used_gib_max": max(s.mem_used_mib for s in samples) / 1024,
        "gpu/mem_total_gib": max(s.mem_total_mib for s in samples) / 1024,
        "gpu/samples": float(len(samples)),
        "gpu/count": float(len(by_gpu)),
    }
    if len(by_gpu) > 1:
        out.update({f"gpu/util_mean/{i}": sum(u) / len(u) for i, u in sorted(by_gpu.items())})
    return out


class GpuMonitor:
    """Start once; `take()` after each step; `close()` at the end."""

    def __init__(self, interval_ms: int = 500, executable: str | None = None):
        self._samples: list[GpuSample] = []
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        exe = executable or shutil.which("nvidia-smi")
        if exe is None:
            return
        try:
            self._proc = subprocess.Popen(
                [exe, f"--query-gpu={QUERY}", "--format=csv,noheader,nounits", f"--loop-ms={interval_ms}"],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
        except OSError as e:  # a broken driver install must not stop a run
            log.warning("GPU metrics off: %s", e)
            return
        threading.Thread(target=self._read, name="gpu-monitor", daemon=True).start()

    @property
    def active(self) -> bool:
        return self._proc is not None

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            sample = parse_line(line)
            if sample is not None:
                with self._lock:
                    self._samples.append(sample)

    def take(self) -> dict[str, float]:
        with self._lock:
            samples, self._samples = self._samples, []
        return summarize(samples)

    def close(self) -> None:
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
            self._proc = None
