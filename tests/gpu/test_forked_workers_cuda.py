"""fork_workers=on on a GPU: the zygote imports torch without initialising CUDA, so it may fork; each child
initialises CUDA itself and evaluates exactly as a started worker (verdicts, speedups, a hanging kernel
cut by its step deadline); a recycle forks a new child from the same zygote. Prints the recycle latency.

    python -m pytest -q -s tests/gpu/test_forked_workers_cuda.py      # ~60 s on one H200
"""

from __future__ import annotations

import time

import pytest

from envs import EvalSettings, Evaluator, Status
from envs.worker.forked import ForkedWorker
from tests.conftest import builtin
from tests.faults import SPIN

pytestmark = [pytest.mark.gpu, pytest.mark.integration]


def test_forked_cuda_workers_evaluate_and_recycle():
    problem, good = builtin("L0_02_relu")
    # Conditional, so that the static analysis lets it through to a worker.
    failing = good.replace(
        "-> torch.Tensor:", "-> torch.Tensor:\n        if x.numel() > 0:\n            raise AttributeError('boom')", 1
    )
    assert failing != good
    settings = EvalSettings(device="cuda", workers=1, fork_workers="on")
    with Evaluator(settings) as ev:
        slot = ev.pool._slots[0]
        w = ev.pool._worker(slot)
        assert isinstance(w, ForkedWorker), f"fell back to plain workers: {ev.pool._fork_refused}"
        zygote, first = w.zygote_pid, w.harness_pid
        ok = ev.evaluate(problem, good)  # baselines measured, a speedup derived in the forked child
        assert ok.status is Status.CORRECT and ok.speedup is not None, ok.error
        bad = ev.evaluate(problem, failing)  # baselines known: no second measurement
        assert bad.status is Status.RUNTIME_ERROR and "boom" in bad.error, bad.error
        started = time.perf_counter()
        w = ev.pool._worker(slot)
        recycle = time.perf_counter() - started
        assert w.zygote_pid == zygote and w.harness_pid != first
        again = ev.evaluate(problem, good + "\n# again\n")
        assert again.status is Status.CORRECT and again.speedup is not None, again.error
        hang = ev.evaluate(problem, SPIN)
        assert hang.status is Status.TIMEOUT and "derived step deadline" in hang.error, hang.error
        after = ev.evaluate(problem, good + "\n# after the hang\n")
        assert after.status is Status.CORRECT, after.error
        assert ev.pool._worker(slot).zygote_pid == zygote
    print(
        f"\nforked CUDA worker: recycle {recycle:.2f} s; speedups {ok.speedup:.2f} / {again.speedup:.2f} / "
        f"{after.speedup:.2f}; hang cut after {hang.phase_seconds['correctness']:.1f} s"
    )
