"""The CPU-time backstop's arithmetic and its reading of a process tree (envs/worker/cpu_backstop.py)."""

from __future__ import annotations

import subprocess
import sys

import psutil
import pytest

from envs import EvalSettings
from envs.worker.cpu_backstop import STARTUP_CPU_S, CpuBudget, PhaseCpuWatch, tree_cpu_seconds


def test_budget_per_phase_per_evaluation_and_per_life():
    budget = CpuBudget(2.0, {"load": 10.0, "correctness": 30.0})
    assert budget.phase_seconds("correctness") == 60.0 and budget.evaluation_seconds() == 80.0
    assert budget.lifetime_seconds() == 160 + STARTUP_CPU_S
    with pytest.raises(ValueError, match="cpu_cores"):
        EvalSettings(cpu_cores=0)


def test_watch_counts_from_the_phase_start_and_names_the_phase():
    watch = PhaseCpuWatch(CpuBudget(0.5, {"load": 10.0, "correctness": 20.0}))
    assert watch.over(1e9) is None  # no phase entered yet
    watch.enter("load", 100.0)
    assert watch.over(104.9) is None
    watch.enter("correctness", 104.9)  # each phase starts from zero
    assert watch.over(114.0) is None
    why = watch.over(115.0)
    assert why and "correctness phase used 10.1 s" in why and "CPU-time backstop of 10 s" in why
    assert "0.5 cores x the 20 s phase timeout" in why


def test_a_process_leaving_the_tree_does_not_credit_the_phase():
    watch = PhaseCpuWatch(CpuBudget(1.0, {"timing": 10.0}))
    watch.enter("timing", 50.0)
    assert watch.over(58.0) is None  # 8 s used
    assert watch.over(40.0) is None  # a busy child was adopted outside: its 8 s stay counted
    assert watch.used == pytest.approx(8.0)
    assert watch.over(42.5) is not None  # 10.5 s


def test_tree_cpu_includes_live_children():
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time\nt = time.process_time()\n"
            "while time.process_time() - t < 0.5: pass\nimport sys; sys.stdout.write('x'); "
            "sys.stdout.flush(); time.sleep(30)",
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert child.stdout.read(1) == b"x"
        me = psutil.Process()
        with_child = tree_cpu_seconds([me, *me.children(recursive=True)])
        alone = tree_cpu_seconds([me])
        assert with_child - alone >= 0.5
    finally:
        child.kill()
        child.wait()
