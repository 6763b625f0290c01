"""The benchmark on a GPU: level-0 reference solutions at full size through policy=files, timed against eager
and TorchInductor (the metrics that are null on a CPU must be measured here). Needs hydra (scripts/benchmark.py)."""

from __future__ import annotations

import json

import pytest

from tests.integration.test_benchmark import SOLUTIONS, bench

pytestmark = [pytest.mark.gpu, pytest.mark.integration]


def test_level0_references_timed_at_full_size(tmp_path):
    pytest.importorskip("hydra")
    out = tmp_path / "l0.json"
    result = bench(
        tmp_path,
        "policy=files",
        f"policy.dir={SOLUTIONS}",
        "levels=[0]",
        "wandb.mode=disabled",
        "min_correct_at_1=1.0",
        f"output={out}",
        device="cuda",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["problems"] == 7 and report["correct_at_1"] == 1.0 and report["speedups_measured"]
    assert report["run"]["size"] == "full" and report["run"]["derived_sizes"] == {}
    assert all(v is not None for v in report["fast_p"].values())
    assert report["geomean_speedup"]["correct"] > 0 and report["geomean_speedup"]["vs_eager"]["correct"] > 0
    for row in report["per_problem"]:
        assert row["best_speedup_inductor"] is not None and row["best_speedup_eager"] is not None
