"""Deadlines from the baseline on CPU: real worker processes, the Triton interpreter, the configured phase
timeouts left at their defaults (minutes), so only the derived step deadlines can cut in time."""

from __future__ import annotations

import os

import pytest

from envs import EvalSettings, Evaluator, Status
from envs.settings import StepBudget, StepDeadlines
from envs.source import prepare_solution
from rewards.kernel_reward import reward_for_verdict
from tests.conftest import builtin
from tests.faults import SPIN, processes_matching, still_running

pytestmark = pytest.mark.integration

RELU = builtin("L0_02_relu")


def test_a_hanging_kernel_is_cut_by_the_derived_deadline_and_its_worker_replaced():
    problem, good = RELU
    settings = EvalSettings(device="cpu")
    assert settings.timeouts.correctness >= 300  # the bound that used to cut it
    with Evaluator(settings) as ev:
        before = ev.pool.worker_pids()  # the harness (forked from a zygote: the zygote and bubblewrap stay)
        v = ev.evaluate(problem, SPIN)  # the full path: it passes the static analysis
        budget = settings.deadlines.cpu
        assert v.status is Status.TIMEOUT and reward_for_verdict(v) == 0.0, v
        assert "correctness phase" in v.error and "derived step deadline" in v.error, v.error
        cut = v.phase_seconds["correctness"]
        print(
            f"hang cut after {cut:.2f} s in the correctness phase (budget {budget.fixed_s:g} s + "
            f"{budget.multiple:g} x reference)"
        )
        assert budget.fixed_s <= cut < budget.fixed_s + 15  # the reference is well under 10 ms here
        ok = ev.evaluate(problem, good)
        assert ok.status is Status.CORRECT, ok.error
        after = ev.pool.worker_pids(wrappers=True)  # sandboxed, bubblewrap's processes (and the zygote) too
        assert not set(before) & set(after)  # the hung harness was killed and replaced
        assert not still_running(before)
        leftovers = {p.pid for p in processes_matching(None, (f"{os.getpid()}-",))} - set(after)
        assert not leftovers  # nothing of the hung worker's is left


SLEEPY = """
import time
import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def _relu(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=m), 0.0), mask=m)

class ModelNew(nn.Module):
    def forward(self, x):
        time.sleep(SECONDS)
        out = torch.empty_like(x)
        _relu[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
        return out
"""


def test_the_deadline_is_per_step_a_slow_call_is_cut_and_steady_progress_is_not():
    """With a 2 s step budget: ten calls of 0.4 s each (4 s in all) pass, one call of 3 s is cut."""
    problem, _ = RELU
    settings = EvalSettings(device="cpu", deadlines=StepDeadlines(cpu=StepBudget(fixed_s=2.0, multiple=1.0)))
    with Evaluator(settings) as ev:
        steady = ev.pool.execute(problem, prepare_solution(SLEEPY.replace("SECONDS", "0.4")), None)[0]
        assert steady.status is Status.CORRECT, steady.error
        assert steady.phase_seconds["correctness"] + steady.phase_seconds["timing"] > 3.0
        slow = ev.pool.execute(problem, prepare_solution(SLEEPY.replace("SECONDS", "3.0")), None)[0]
        assert slow.status is Status.TIMEOUT and "derived step deadline of 2.0 s" in slow.error, slow.error
        assert slow.phase_seconds["correctness"] < 3.0
