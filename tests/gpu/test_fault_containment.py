"""Fault containment on a GPU: a hanging kernel is cut by the derived step deadline within seconds, and a
SIGKILLed owner leaves no CUDA worker and no GPU memory behind. Run on a GPU (prints the figures)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time

import pytest

from envs import EvalSettings, Evaluator, Status
from tests.conftest import builtin
from tests.faults import (
    SPIN,
    processes_matching,
    start_cli,
    start_owner,
    wait_gone,
    wait_until_spinning,
    worker_under,
)

pytestmark = [pytest.mark.gpu, pytest.mark.integration]

FREE_MEMORY = "import torch; free, total = torch.cuda.mem_get_info(); print(free, total)"


def free_gpu_memory() -> int:
    """Free bytes on GPU 0, asked by a fresh process (this one's own context would count against it)."""
    out = subprocess.run([sys.executable, "-c", FREE_MEMORY], capture_output=True, text=True, check=True, timeout=120)
    return int(out.stdout.split()[0])


def gpu_processes() -> set[int]:
    """Pids with a CUDA context, per nvidia-smi (empty when it is not installed)."""
    if shutil.which("nvidia-smi") is None:
        return set()
    out = subprocess.run(
        ["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"], capture_output=True, text=True, timeout=60
    ).stdout
    return {int(line) for line in out.split() if line.strip().isdigit()}


def test_a_hanging_kernel_is_cut_within_seconds_and_its_worker_replaced():
    problem, good = builtin("L0_02_relu")
    settings = EvalSettings(device="cuda")  # default phase timeouts: 300 s for correctness
    with Evaluator(settings) as ev:
        assert ev.evaluate(problem, good).correct  # baselines measured, kernels compiled: a warm worker
        before = ev.pool.worker_pids()
        v = ev.evaluate(problem, SPIN)
        assert v.status is Status.TIMEOUT and "derived step deadline" in v.error, v
        cut = v.phase_seconds["correctness"]
        budget = settings.deadlines.cuda
        print(f"\nGPU hang cut after {cut:.2f} s in the correctness phase ({v.error})")
        assert budget.fixed_s <= cut < budget.fixed_s + 20  # compiling the tiny kernel is excused
        ok = ev.evaluate(problem, good)  # no cache: evaluated again, on the replacement worker
        assert ok.status is Status.CORRECT, ok.error
        assert not set(before) & set(ev.pool.worker_pids())


def _kill_owner_and_check(owner: subprocess.Popen, tmp_path, free_before: int) -> None:
    worker = worker_under(tmp_path)
    wait_until_spinning(worker)  # a CUDA synchronize waiting for the kernel spins on the CPU
    time.sleep(1.0)  # past the tiny kernel's compilation, inside the hang
    owner.kill()
    owner.wait()
    seconds = wait_gone(lambda: processes_matching(str(tmp_path), (f"{owner.pid}-",)), timeout=15)
    deadline = time.monotonic() + 30
    while worker in gpu_processes():
        assert time.monotonic() < deadline, "the killed worker still holds a CUDA context"
        time.sleep(0.5)
    free_after = free_gpu_memory()
    print(
        f"\nno CUDA worker left {seconds:.2f} s after the owner was SIGKILLed; "
        f"GPU free {free_before / 2**30:.2f} GiB before, {free_after / 2**30:.2f} GiB after"
    )
    assert free_after >= free_before - (256 << 20)


def test_sigkilled_cli_leaves_no_cuda_worker_and_frees_the_gpu(tmp_path):
    solution = tmp_path / "spin.py"
    solution.write_text(SPIN)
    free_before = free_gpu_memory()
    cli = start_cli(tmp_path, "cuda", solution)
    try:
        _kill_owner_and_check(cli, tmp_path, free_before)
    finally:
        cli.kill()


def test_sigkilled_owner_of_a_hung_cuda_worker_frees_the_gpu(tmp_path):
    """The same without the CLI's deadline race: no step deadline, so the kernel surely still hangs."""
    free_before = free_gpu_memory()
    owner = start_owner(tmp_path, "cuda", "deadlines=StepDeadlines(cuda=StepBudget(600.0, 1.0, 60.0))", SPIN)
    try:
        _kill_owner_and_check(owner, tmp_path, free_before)
    finally:
        owner.kill()
