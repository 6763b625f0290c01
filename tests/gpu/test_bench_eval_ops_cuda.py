"""scripts/bench_eval_ops.py on CUDA: the GPU kernels of a full-size evaluation land in its phases' steps, the
candidate's own Triton kernel among the timed runs."""

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.gpu


def test_gpu_kernels_of_a_full_size_relu_evaluation_are_counted_per_step(tmp_path):
    out = tmp_path / "ops.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench_eval_ops.py"), "--problem", "L0_02_relu", "--device", "cuda"]
        + ["--set", "timing_precision=0.03", "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(out.read_text())["report"]
    assert report["phases"]["correctness"]["device_s"] > 0 and report["phases"]["timing"]["device_s"] > 0
    timed = {op["name"] for op in report["parts"]["timing.timed_runs"]["ops"]}
    assert any("relu" in name for name in timed), sorted(timed)[:20]  # the reference solution's Triton kernel
    # the kernels are attributed, not left between phases
    assert report["parts"].get("between", {"device_s": 0.0})["device_s"] < report["phases"]["timing"]["device_s"]
