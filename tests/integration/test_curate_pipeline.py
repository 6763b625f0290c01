"""The curation pipeline end to end on the CPU: a KernelBench level-1 subset (which decontamination must drop:
it is the evaluation set), the torch.nn activation modules crawled, and 50 synthetic problems; the result
loads as training data with the balanced sampler."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from envs.data.pipeline import CurateConfig, run_pipeline
from envs.problems import load_problem_set
from rl.data import DataConfig, ProblemData

pytestmark = pytest.mark.integration

KERNELBENCH = Path(
    os.environ.get("KERNELBENCH_DIR") or Path(__file__).resolve().parents[2].parent / "shared" / "kernelbench"
)


@pytest.mark.skipif(not (KERNELBENCH / "KernelBench" / "level1").is_dir(), reason="no KernelBench checkout")
def test_pipeline_end_to_end_on_cpu(tmp_path):
    subset = tmp_path / "kb_subset"
    subset.mkdir()
    level1 = sorted((KERNELBENCH / "KernelBench" / "level1").glob("*.py"))
    for path in [p for p in level1 if p.name.split("_")[0] in {"19", "23", "40", "47", "88"}]:
        (subset / path.name).write_text(path.read_text())
    out = tmp_path / "curated"
    config = CurateConfig.from_mapping(
        {
            "output": str(out),
            "sources": [str(subset)],
            "crawl": {"packages": ["torch.nn.modules.activation"]},
            "synthetic": {"count": 50, "seed": 5},
            "decontaminate": [str(KERNELBENCH), "builtin"],
            "clusters": 8,
            "workers": 1,
            "variants_per_problem": 1,
        }
    )
    report = run_pipeline(config)
    table = report.funnel
    assert table["entered"]["kernelbench"] == 5 and table["entered"]["synthetic"] == 50
    assert table["entered"]["crawl"] >= 20
    # Unchanged KernelBench files never survive decontamination against KernelBench.
    assert table["stages"]["decontaminate"]["kernelbench"]["out"] == 0
    rejected = [json.loads(line) for line in (out / "rejected.jsonl").read_text().splitlines()]
    kb_rejections = [r for r in rejected if r["problem"].startswith("src_")]
    assert len(kb_rejections) == 5 and all(
        r["stage"] == "decontaminate" and r["collided_with"].startswith("kernelbench/level1/") for r in kb_rejections
    )
    assert all({"problem", "stage", "reason", "source_path"} <= set(r) for r in rejected)
    manifest = [json.loads(line) for line in (out / "manifest.jsonl").read_text().splitlines()]
    assert len(manifest) == report.kept >= 30
    assert {m["kind"] for m in manifest} >= {"synthetic", "crawl"}
    for m in manifest:
        assert (out / m["file"]).is_file() and 0 <= m["level"] <= 5 and m["weight"] > 0
        assert m["cluster"] is not None and m["baselines"] is None  # no GPU: the runtime stage noted, not timed
        if m["kind"] == "crawl":
            assert m["package"] == "torch" and m["license"] and m["version"]
    assert any(m["parent"] for m in manifest)  # validated shape variants
    decisions = [json.loads(line) for line in (out / "decisions.jsonl").read_text().splitlines()]
    assert any(d["stage"] == "runtime" and "skipped" in d["reason"] for d in decisions)
    # RReLU samples its slopes in training mode: the worker's check sees two answers for the same inputs.
    rrelu = [d for d in decisions if d["problem"].endswith("_RReLU") and d["stage"] == "validate"]
    assert rrelu and rrelu[0]["decision"] == "reject" and "nondeterministic" in rrelu[0]["reason"]
    assert "after validate" in (out / "funnel.md").read_text()
    # The set is training data: levels from the manifest, weights for the balanced sampler.
    problems = load_problem_set(str(out))
    assert len(problems) == report.kept and all(p.small_sizes for p in problems)
    data = ProblemData.load(DataConfig(problems=str(out), sampler="balanced", validation_fraction=0.1))
    assert data.weights and set(data.weights) == {p.id for p in data.train}
