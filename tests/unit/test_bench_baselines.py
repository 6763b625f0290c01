"""The benchmark report against both baselines (eager, KernelBench's, and TorchInductor) and per KernelBench level:
benchmark.md, `compare` and the fast_p plot once showed only TorchInductor."""

import json

from rl.bench.metrics import flatten, kernelbench_level, summarize
from rl.bench.report import build_report, compare, write_markdown, write_plots
from tests.unit.test_bench_metrics import one, verdict


def kb_and_builtin():
    return [
        one("kernelbench/level1/19", verdict(kernel=1.0, inductor=2.0, eager=0.8), level=1),  # 2.0 / 0.8
        one("kernelbench/level2/7", verdict(kernel=1.0, inductor=0.5, eager=1.5), level=2),  # 0.5 / 1.5
        one("kernelbench/level2/9", verdict("incorrect"), level=2),
        one("L1_02_swish", verdict(kernel=1.0, inductor=1.1, eager=1.2), level=1),
    ]


def test_both_baselines_and_kernelbench_levels_in_the_summary():
    s = summarize(kb_and_builtin())
    assert s["fast_p_inductor"]["1"] == 0.5 and s["fast_p_eager"]["1"] == 0.5
    assert s["fast_p_inductor"]["1.5"] == 0.25 and s["fast_p_eager"]["1.5"] == 0.0
    assert s["level_scale"] == "mixed" and sorted(s["per_kernelbench_level"]) == ["1", "2"]
    kb2 = s["per_kernelbench_level"]["2"]
    assert kb2["problems"] == 2 and kb2["correct_at_1"] == 0.5
    assert kb2["fast_p_inductor"]["1"] == 0.0 and kb2["fast_p_eager"]["1"] == 0.5
    assert s["per_level"]["1"]["problems"] == 2  # the numeric levels still mix both scales
    flat = flatten(s, "val/bench")
    assert flat["val/bench/fast_1_eager"] == 0.5 and flat["val/bench/kernelbench_level2/fast_1_eager"] == 0.5
    assert kernelbench_level("kernelbench/level3/32") == 3 and kernelbench_level("L3_01_matmul") is None
    assert summarize(kb_and_builtin()[:3])["level_scale"] == "kernelbench"
    assert "per_kernelbench_level" not in summarize(kb_and_builtin()[3:])


def test_markdown_compare_and_plot_show_both_baselines(tmp_path):
    report = build_report(kb_and_builtin(), "inductor", {"policy": "p", "problem_set": "kb"})
    report = json.loads(json.dumps(report))  # as benchmark.json holds it
    write_markdown(report, tmp_path / "benchmark.md")
    md = (tmp_path / "benchmark.md").read_text()
    assert "| fast_1 (vs TorchInductor) | 50.0% |" in md
    assert "| fast_1.5 (vs eager, KernelBench's baseline) | 0.0% |" in md
    assert "## Per KernelBench level" in md and "| 2 (simple fusions) | 2 | 50.0% |" in md
    table = compare([("a", report)])
    assert "| fast_1 (vs eager, KernelBench's baseline) | 50.0% |" in table
    assert "| fast_1 vs eager, KernelBench level 2 | 50.0% |" in table
    paths = write_plots(report, tmp_path)
    assert (tmp_path / "fast_p.png").stat().st_size > 0 and len(paths) == 3


def test_an_old_report_without_fast_p_inductor_still_renders(tmp_path):
    report = json.loads(json.dumps(build_report(kb_and_builtin(), "inductor", {"policy": "p"})))
    del report["fast_p_inductor"], report["per_kernelbench_level"], report["level_scale"]
    write_markdown(report, tmp_path / "old.md")
    assert "| fast_1 (vs TorchInductor) | 50.0% |" in (tmp_path / "old.md").read_text()


def test_a_kernelbench_level_directory_or_file_keeps_kernelbench_ids_and_levels(tmp_path):
    """problems=KernelBench/level2 (or one file of it) loaded as plain files: level None, ids the file stems."""
    from envs.problems import load_problem_set
    from tests.conftest import ROOT

    level = tmp_path / "checkout" / "KernelBench" / "level2"
    level.mkdir(parents=True)
    source = (ROOT / "envs" / "builtin" / "problems" / "L0_02_relu.py").read_text()
    (level / "7_Relu.py").write_text(source)
    (level / "12_Other.py").write_text(source)
    problems = load_problem_set(str(level))
    assert [(p.id, p.level) for p in problems] == [("kernelbench/level2/7", 2), ("kernelbench/level2/12", 2)]
    one_file = load_problem_set(str(level / "12_Other.py"))
    assert [(p.id, p.level) for p in one_file] == [("kernelbench/level2/12", 2)]
    assert load_problem_set(str(level), levels=[1]) == []
