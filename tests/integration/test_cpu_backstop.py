"""The CPU-time backstop on real workers: a candidate that keeps extra cores busy while every call still
returns in time (so no deadline fires) is stopped by its phase's CPU budget, and the harness's lifetime
RLIMIT_CPU is in place and cannot be raised again from inside."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from envs import EvalSettings, Evaluator, PhaseTimeouts, Status, resolve_problem
from envs.settings import StepBudget, StepDeadlines
from envs.source import canonicalize
from envs.worker.cpu_backstop import CpuBudget

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]

# A correct ReLU whose import starts threads that hash forever: hashlib releases the GIL, so each one can
# take a core of its own while the main thread answers every call within its step deadline. Threads
# started at import are no runtime-check finding (those look at what one forward starts), and no process
# is left behind.
BURNER = """
import hashlib
import threading
import time

import torch
import torch.nn as nn
import triton
import triton.language as tl

_BLOCK = bytes(1 << 20)


def _burn():
    while True:
        hashlib.sha256(_BLOCK).digest()


for _ in range(4):
    threading.Thread(target=_burn, daemon=True).start()


@triton.jit
def _relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        # Return only once the threads have had 1.5 more CPU seconds (process_time counts every thread):
        # the phase then lasts as long as the threads need on however loaded a host, within its deadlines.
        start, give_up = time.process_time(), time.monotonic() + 20
        while time.process_time() - start < 1.5 and time.monotonic() < give_up:
            time.sleep(0.05)
        x = x.contiguous()
        out = torch.empty_like(x)
        _relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
        return out
"""


def test_busy_threads_are_stopped_by_the_phase_cpu_budget():
    """cpu_cores=0.05 x the 120 s correctness timeout = 6 CPU seconds, where the honest work of this phase
    takes 0.1. Unchecked (cpu_cores large), the phase ends correct after its 8 calls, 12 CPU seconds of the
    threads later; the budget stops it halfway. (The step deadline is widened so that a loaded host
    cannot turn a waiting call into a step timeout.)"""
    settings = EvalSettings(
        device="cpu",
        workers=1,
        cpu_cores=0.05,
        timeouts=PhaseTimeouts(correctness=120),
        deadlines=StepDeadlines(cpu=StepBudget(fixed_s=30.0, multiple=100.0)),
    )
    problem = resolve_problem("L0_02_relu")
    with Evaluator(settings) as ev:
        # The execution stage alone: the static analysis would refuse the threads before anything ran.
        verdict = ev.pool.execute(problem, canonicalize(BURNER), None)[0]
        after = ev.evaluate(problem, Path(problem.reference_solution).read_text())
    print(verdict.status.value, verdict.phase_seconds, verdict.error)
    assert verdict.status is Status.TIMEOUT, (verdict.status, verdict.error)
    assert "CPU-time backstop" in verdict.error and "correctness phase" in verdict.error, verdict.error
    assert after.status is Status.CORRECT, after.error  # the worker was replaced; its threads died with it


def test_the_harness_runs_under_its_lifetime_cpu_limit():
    settings = EvalSettings(device="cpu", workers=1)
    expected = CpuBudget(settings.cpu_cores, settings.timeouts.as_dict()).lifetime_seconds()
    with Evaluator(settings) as ev:
        pids = ev.pool.worker_pids()
        limits = Path(f"/proc/{pids[0]}/limits").read_text()
    line = next(row for row in limits.splitlines() if row.startswith("Max cpu time"))
    assert line.split()[3:5] == [str(expected), str(expected)], line


# RLIMIT_CPU counts the CPU time a process has already used, and importing envs (torch) takes 1-1.6 s of it here:
# the limit is that much plus 2 s, or the kernel would kill the process before it tries to raise the limit.
_RAISE_THEN_BURN = """
import os, resource, sys
from envs.worker.cpu_backstop import ENV_VAR, apply_lifetime_limit
used = resource.getrusage(resource.RUSAGE_SELF)
os.environ[ENV_VAR] = str(int(used.ru_utime + used.ru_stime) + 2)
print(apply_lifetime_limit() == int(os.environ[ENV_VAR]), flush=True)
try:
    resource.setrlimit(resource.RLIMIT_CPU, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    print("raised", flush=True)
except (ValueError, OSError):
    print("refused", flush=True)
while True:
    pass
"""


def _has_cap_sys_resource() -> bool:
    status = Path("/proc/self/status").read_text()
    effective = next(line.split()[1] for line in status.splitlines() if line.startswith("CapEff"))
    return bool(int(effective, 16) >> 24 & 1)  # CAP_SYS_RESOURCE is capability 24


def test_the_lifetime_limit_kills_and_cannot_be_raised():
    """As the harness sets it, in a process without CAP_SYS_RESOURCE (a sandboxed worker has no capability
    at all): raising it back is refused, and two CPU seconds later the kernel kills the process."""
    if _has_cap_sys_resource():
        pytest.skip("this test process holds CAP_SYS_RESOURCE, which may raise any limit")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", _RAISE_THEN_BURN], env=env, capture_output=True, text=True, timeout=60)
    assert proc.stdout.split() == ["True", "refused"], (proc.stdout, proc.stderr)
    assert proc.returncode == -9, proc.returncode  # SIGKILL at the hard limit


def test_a_worker_whose_candidate_left_threads_running_is_replaced():
    """Threads a candidate started at import would run on into the next evaluation on the same warm worker,
    taking its CPU and counting against its phase budgets: the worker is replaced instead."""
    sleeper = BURNER.replace("hashlib.sha256(_BLOCK).digest()", "time.sleep(1)").replace("range(4)", "range(1)")
    sleeper = sleeper.replace("time.process_time() - start < 1.5", "False")
    problem = resolve_problem("L0_02_relu")
    with Evaluator(EvalSettings(device="cpu", workers=1)) as ev:
        before = ev.pool.worker_pids()
        verdict = ev.pool.execute(problem, canonicalize(sleeper), None)[0]
        after = ev.pool.worker_pids()
    assert verdict.status is Status.CORRECT, verdict.error
    assert any("left 1 thread(s) running" in note for note in verdict.notes), verdict.notes
    assert set(before).isdisjoint(after)
