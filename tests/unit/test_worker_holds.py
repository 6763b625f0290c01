"""Every tensor operation of an evaluation runs inside a GPU hold (envs/worker/evaluation.py `_gpu`): work outside
one would overlap another worker's timed window. Run in a child process, since the harness's `prepare` installs
process-wide hooks. tests/gpu/test_cuda_evaluation.py runs the same probe on a GPU, baselines included."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def ops_outside_holds(device: str, problem_id: str, baselines: bool) -> dict:
    """Run one evaluation of `problem_id`'s reference solution in this process, its holds granted by a thread
    playing the parent; return its status and the tensor operations that ran with no hold taken."""
    import collections
    import contextlib
    import tempfile

    from torch.utils._python_dispatch import TorchDispatchMode

    from envs import EvalSettings
    from envs.source import canonicalize
    from envs.worker import harness
    from envs.worker.evaluation import Evaluation
    from envs.worker.parent_link import ParentLink
    from envs.worker.worker_set import worker_request
    from tests.conftest import builtin
    from tests.unit.test_parent_link import granting_parent

    problem, solution = builtin(problem_id)
    request = worker_request(EvalSettings(device=device), device, problem, canonicalize(solution), baselines)
    to_worker_r, to_worker_w = os.pipe()
    to_parent_r, to_parent_w = os.pipe()
    granting_parent(to_parent_r, to_worker_w, [])
    link = ParentLink(to_worker_r, to_parent_w)
    link.nonce = request.nonce
    held: list[str] = []
    outside: collections.Counter = collections.Counter()

    class Recorded(Evaluation):
        def _gpu(self, mode):
            @contextlib.contextmanager
            def hold():
                held.append(mode)
                try:
                    with Evaluation._gpu(self, mode):
                        yield
                finally:
                    held.pop()

            return hold()

    class Outside(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if not held:
                outside[str(func)] += 1
            return func(*args, **(kwargs or {}))

    harness.prepare(device)
    evaluation = Recorded(link, request, tempfile.mkdtemp())
    with Outside():
        result = evaluation.run()
    return {"status": result["status"], "error": result.get("error"), "outside": dict(outside)}


def run_probe(device: str, problem_id: str, baselines: bool) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    out = subprocess.run(
        [sys.executable, __file__, device, problem_id, str(int(baselines))],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_no_tensor_operation_of_an_evaluation_runs_outside_a_gpu_hold():
    got = run_probe("cpu", "L1_05_row_sum", baselines=False)
    assert got["status"] == "correct", got
    assert got["outside"] == {}, got["outside"]


if __name__ == "__main__":
    print(json.dumps(ops_outside_holds(sys.argv[1], sys.argv[2], bool(int(sys.argv[3])))))
