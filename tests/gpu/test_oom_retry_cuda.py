"""A GPU filled by another process: the evaluation of a known-correct kernel runs out of memory through no fault
of its own, is retried (envs/worker/oom.py, WorkerSet._run_through_oom), and once the other process has let go
ends `correct`. Run on a GPU."""

import subprocess
import sys
import textwrap
import threading
import time

import pytest

from envs import EvalSettings, Evaluator, PhaseTimeouts, Status
from tests.conftest import builtin

pytestmark = [pytest.mark.gpu, pytest.mark.integration]

# Takes every visible GPU's memory but about `leave` bytes in 256 MiB blocks, says "ready", holds it until its
# stdin closes.
FILLER = textwrap.dedent(
    """
    import sys, torch
    leave = int(sys.argv[1])
    held = []
    for d in range(torch.cuda.device_count()):
        while True:
            free, _ = torch.cuda.mem_get_info(d)
            size = min(256 << 20, free - leave)
            if size < (16 << 20):
                break
            try:
                held.append(torch.empty(size, dtype=torch.uint8, device=f"cuda:{d}"))
            except torch.OutOfMemoryError:
                break
    print("ready", min(torch.cuda.mem_get_info(d)[0] for d in range(torch.cuda.device_count())), flush=True)
    sys.stdin.read()
    """
)


# 2 GiB: less than the harness itself holds for relu at full size (its 3 GiB input, the reference's output, the
# truth), as the colocated recipe's auto budget (8.7 GiB) was for larger problems in the session 25 notes: what
# the process holds must not make the honest candidate the OOM's owner, only what its own calls held.
@pytest.mark.parametrize("budget_gib", [None, 2.0])
def test_a_reference_kernel_on_a_gpu_full_of_others_is_retried_to_correct(tmp_path, budget_gib):
    problem, solution = builtin("L0_02_relu")  # its input alone is 3 GiB at the full size
    settings = EvalSettings(
        device="cuda",
        timeouts=PhaseTimeouts(correctness=60, timing=120),
        oom_retries=6,
        oom_backoff_s=5.0,
        worker_memory_gib=budget_gib,
    )
    with Evaluator(settings) as ev:
        first = ev.evaluate(problem, solution)  # warm: the worker and the problem's baselines
        assert first.status is Status.CORRECT, first.error
        filler = subprocess.Popen(
            [sys.executable, "-c", FILLER, str(1 << 30)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        try:
            line = filler.stdout.readline().split()
            assert line and line[0] == "ready", "the filler could not fill the GPU"
            assert int(line[1]) < 2 << 30  # about 1 GiB left: less than the problem needs
            verdicts = []
            evaluation = threading.Thread(target=lambda: verdicts.append(ev.evaluate(problem, solution)))  # no cache
            evaluation.start()
            deadline = time.monotonic() + 300
            while ev.pool.oom_retries == 0 and evaluation.is_alive() and time.monotonic() < deadline:
                time.sleep(0.2)
            assert ev.pool.oom_retries >= 1, verdicts and verdicts[0].error
        finally:
            filler.stdin.close()  # let go of the memory
            filler.wait(timeout=60)
        evaluation.join(timeout=600)
        (verdict,) = verdicts
        assert verdict.status is Status.CORRECT, verdict.error
        assert any("other processes" in note for note in verdict.notes)
        assert verdict.phase_seconds["oom_backoff"] >= 5.0
