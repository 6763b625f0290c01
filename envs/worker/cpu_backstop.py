"""CPU time as a backstop to the wall-clock deadlines: per phase (the parent's watch) and per life (the kernel's).

Deadlines bound how long a phase takes, not how many cores it keeps busy: a candidate can start busy threads and
still answer in time. Two limits, neither needing a capability:
- per phase (`PhaseCpuWatch`, in the parent): `cpu_cores x its timeout` CPU seconds over the worker's process
  tree, else the worker is killed (verdict `timeout`);
- per life (RLIMIT_CPU, set by the harness on itself before any untrusted code): two evaluations' budgets plus
  the start; the code cannot raise it, and the pool replaces a worker before it could be reached.
Details: docs/sandbox.md."""

from __future__ import annotations

import dataclasses
import math
import os
import resource

import psutil

ENV_VAR = "KERNELRL_WORKER_CPU_SECONDS"
STARTUP_CPU_S = 300.0  # importing torch and triton and initialising CUDA, with room for a loaded host


@dataclasses.dataclass(frozen=True)
class CpuBudget:
    """CPU seconds per phase: `cores` cores' worth of each phase's wall-clock timeout."""

    cores: float
    timeouts: dict[str, float]

    def phase_seconds(self, phase: str) -> float:
        return self.cores * self.timeouts[phase]

    def evaluation_seconds(self) -> float:
        return sum(self.phase_seconds(p) for p in self.timeouts)

    def lifetime_seconds(self) -> int:
        """The harness's RLIMIT_CPU: room for two whole evaluations beside its start, so that recycling
        when less than one is left (`lifetime_headroom`) rarely happens to an honest worker."""
        return math.ceil(2 * self.evaluation_seconds() + STARTUP_CPU_S)


def tree_cpu_seconds(processes: list[psutil.Process]) -> float:
    """User + system seconds of `processes` (all their threads) and of their reaped children."""
    total = 0.0
    for p in processes:
        try:
            t = p.cpu_times()
        except psutil.Error:  # ended meanwhile: its time moved to its parent's reaped children
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


def own_cpu_seconds(pid: int) -> float | None:
    """What RLIMIT_CPU counts for one process: its threads' user + system seconds (None: gone)."""
    try:
        t = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return None
    return t.user + t.system


class PhaseCpuWatch:
    """Parent side, one evaluation: the CPU the worker's tree used in the current phase against its budget."""

    def __init__(self, budget: CpuBudget):
        self.budget = budget
        self.phase: str | None = None
        self._start = 0.0
        self.used = 0.0

    def enter(self, phase: str, tree_seconds: float) -> None:
        self.phase, self._start, self.used = phase, tree_seconds, 0.0

    def over(self, tree_seconds: float) -> str | None:
        """Why the phase is over its budget, or None. The tree's total only drops when a process leaves it
        (unsandboxed, an orphan adopted outside the tree): what was counted stays counted."""
        if self.phase is None:
            return None
        if tree_seconds < self._start + self.used:
            self._start = tree_seconds - self.used
        self.used = tree_seconds - self._start
        limit = self.budget.phase_seconds(self.phase)
        if self.used <= limit:
            return None
        return (
            f"the {self.phase} phase used {self.used:.1f} s of CPU time (the worker and every process it "
            f"started), over its CPU-time backstop of {limit:.0f} s ({self.budget.cores:g} cores x the "
            f"{self.budget.timeouts[self.phase]:g} s phase timeout): the code kept more cores busy than "
            "an evaluation may"
        )


def apply_lifetime_limit() -> int | None:
    """In the worker, before any untrusted code: RLIMIT_CPU soft = hard = $KERNELRL_WORKER_CPU_SECONDS
    (never above an existing hard limit). Returns the limit set, or None without the variable."""
    raw = os.environ.get(ENV_VAR)
    if not raw:
        return None
    seconds = int(raw)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard != resource.RLIM_INFINITY:
        seconds = min(seconds, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds))
    return seconds
