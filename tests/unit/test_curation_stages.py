"""Curation stages that need no worker: sources (synthetic, crawl), difficulty, variants, clustering, output."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from envs.data.cluster import cluster_and_weight
from envs.data.crawl.crawler import CrawlConfig, CrawlSkip, crawl
from envs.data.crawl.extract import ExtractError, extract_class, module_classes
from envs.data.crawl.shapes import guess_inputs
from envs.data.difficulty import assign_difficulty, parse_level, structural_level
from envs.data.embed import make_embedder
from envs.data.output import OutputError, funnel, prepare_output
from envs.data.records import CandidateProblem, Decision, Origin, StageResult
from envs.data.runtime import RuntimeConfig, filter_runtime, judge_baselines
from envs.data.fusion_problems import SyntheticConfig, generate, generate_one
from envs.data.validate import normalize
from envs.data.variants import shape_variants
from envs.problems import load_builtin, parse_problem
from envs.verdict import TimingStats


def test_structural_level_agrees_with_the_builtin_levels():
    problems = load_builtin()
    exact = sum(structural_level(p.source) == p.level for p in problems)
    assert exact >= 38, f"{exact}/{len(problems)}"  # 40/43 when written (docs/curation.md)
    assert all(abs(structural_level(p.source) - p.level) <= 2 for p in problems)


def test_parse_level_reads_the_last_stated_level():
    assert parse_level("LEVEL: 3") == 3
    assert parse_level("I think L2... no, LEVEL: 4") == 4
    assert parse_level("level=5") == 5
    assert parse_level("hard") is None and parse_level("LEVEL: 9") is None


def test_difficulty_stage_without_llm_uses_the_structure():
    c = CandidateProblem("a", load_builtin()[0].source, Origin("synthetic", "x"))
    result = assign_difficulty([c])
    assert result.kept[0].level == 0 and result.kept[0].facts["difficulty"]["by"] == "structural"


def test_synthetic_generator_is_seeded_and_index_stable():
    config = SyntheticConfig(count=40, seed=3)
    first = list(generate(config))
    assert [c.source for c in first] == [c.source for c in generate(config)]
    assert generate_one(17, SyntheticConfig(count=1000, seed=3)).source == first[17].source
    assert generate_one(17, SyntheticConfig(seed=4)).source != first[17].source
    for c in first:
        problem = parse_problem(c.source, c.id)
        assert problem.small_sizes and 0 <= c.level <= 5
    assert len({c.id for c in first}) == 40
    assert len({c.facts["synthetic"]["head"] for c in first}) >= 4


def test_extract_class_pulls_in_bases_helpers_and_absolute_imports():
    source = """
from .base import Module
from . import functional as F
import math
SCALE = 2.0
def _helper(x):
    return x * SCALE
class _Base(Module):
    def forward(self, x):
        return _helper(F.relu(x))
class Act(_Base):
    def __init__(self, in_features, bias=True):
        super().__init__()
class Unused(Module):
    def forward(self, x):
        return math.pi * x
"""
    classes = {c.name: c for c in module_classes(__import__("ast").parse(source))}
    assert set(classes) == {"Act", "Unused"}
    assert classes["Act"].init_params == (("in_features", False), ("bias", True))
    extracted = extract_class(source, "Act", "pkg.layers.act")
    assert "from pkg.layers.base import Module" in extracted and "from pkg.layers import functional as F" in extracted
    assert "def _helper" in extracted and "SCALE = 2.0" in extracted and "class _Base" in extracted
    assert "Unused" not in extracted and "import math" not in extracted
    with pytest.raises(ExtractError, match="neither defines nor imports"):
        extract_class("class A(Module):\n    def forward(self, x):\n        return g(x)\n", "A", "m")


def test_shape_rules_for_linear_and_unknown_signatures():
    linear = next(
        c
        for c in module_classes(
            __import__("ast").parse(
                "class Linear(Module):\n    def __init__(self, in_features, out_features, bias=True): pass\n"
                "    def forward(self, input): pass\n"
            )
        )
    )
    guesses, why = guess_inputs(linear)
    assert why is None and guesses[0].inputs[0].dims == ("BATCH", "FEATURES")
    assert dict(guesses[0].init) == {"in_features": "FEATURES", "out_features": "OUT_FEATURES"}
    odd = next(
        c
        for c in module_classes(
            __import__("ast").parse(
                "class Block(Module):\n    def __init__(self, config): pass\n    def forward(self, x): pass\n"
            )
        )
    )
    assert guess_inputs(odd) == ([], "no rule for required constructor argument(s) ['config']")


def test_crawl_of_torch_activations_records_provenance():
    items = list(crawl(CrawlConfig(packages=("torch.nn.modules.activation",))))
    found = {c.origin.symbol.rsplit(".", 1)[1]: c for c in items if not isinstance(c, CrawlSkip)}
    assert {"ReLU", "GELU", "Softmax", "MultiheadAttention"} <= set(found)
    relu = found["ReLU"]
    assert relu.id == "crawl_torch_nn_modules_activation_ReLU"
    assert relu.origin.symbol == "torch.nn.modules.activation.ReLU"
    assert "from torch.nn.modules.module import Module" in relu.source  # relative import resolved from the module
    assert relu.origin.package == "torch" and relu.origin.version and relu.origin.license
    assert relu.origin.path.endswith("activation.py")
    parse_problem(relu.source, relu.id)
    assert normalize([relu]).kept  # every guess parses


def test_variants_scale_a_size_at_both_sizes():
    c = CandidateProblem("p", load_builtin()[22].source, Origin("kernelbench", "x"))  # L3_01_matmul
    variants = shape_variants([c], 2, seed=0)
    assert variants and all(v.origin.parent == "p" and v.origin.kind == "variant" for v in variants)
    for v in variants:
        name, factor = v.facts["variant"]["constant"], v.facts["variant"]["factor"]
        before, after = parse_problem(c.source, "a"), parse_problem(v.source, "b")
        assert after.small_sizes[name] == max(1, int(before.small_sizes[name] * factor))


def test_cluster_weights_are_inverse_log_of_cluster_size():
    problems = load_builtin()
    cands = [CandidateProblem(p.id, p.source, Origin("kernelbench", p.id)) for p in problems]
    result = cluster_and_weight(cands, make_embedder("tfidf"), clusters=5, seed=0)
    sizes = {}
    for c in result.kept:
        sizes.setdefault(c.facts["cluster"], 0)
        sizes[c.facts["cluster"]] += 1
    assert len(sizes) == 5 and sum(sizes.values()) == len(problems)
    for c in result.kept:
        assert c.facts["weight"] == pytest.approx(1 / math.log(sizes[c.facts["cluster"]] + 1), abs=1e-6)


def test_runtime_stage_on_cpu_keeps_and_notes():
    c = CandidateProblem("p", load_builtin()[0].source, Origin("kernelbench", "x"))
    result = filter_runtime([c], None)
    assert result.kept == [c.with_facts(baselines=None)]
    assert any(d.decision == "note" and "skipped" in d.reason for d in result.decisions)


def test_runtime_stage_judges_the_workers_timing_records():
    # The records WorkerSet.measure_baselines returns: envs.verdict.TimingStats as dicts (median_ms, ...).
    c = CandidateProblem("p", load_builtin()[0].source, Origin("kernelbench", "x"))
    stats = lambda ms: dataclasses.asdict(TimingStats.from_samples([ms * 0.98, ms, ms * 1.03]))  # noqa: E731
    result = StageResult("runtime")
    for eager, inductor in ((0.4, 0.3), (2.5, None), (1500.0, 900.0)):
        judge_baselines(
            c,
            {"eager": stats(eager), "inductor": stats(inductor) if inductor else None},
            RuntimeConfig(1.0, 1000.0),
            result,
            "H200",
        )
    assert [k.facts["baselines"] for k in result.kept] == [{"eager_ms": 2.5, "inductor_ms": None, "device": "H200"}]
    reasons = [d.reason for d in result.decisions if d.decision == "reject"]
    assert reasons == ["eager 0.400 ms < 1.0 ms", "eager 1500.0 ms > 1000.0 ms"]
    empty = StageResult("runtime")
    judge_baselines(c, {}, RuntimeConfig(), empty, "H200")
    assert [d.reason for d in empty.decisions] == ["no eager time measured"]


def test_output_directory_is_never_clobbered(tmp_path):
    (tmp_path / "mine.txt").write_text("x")
    with pytest.raises(OutputError, match="not a curated set"):
        prepare_output(tmp_path, overwrite=True)
    curated = tmp_path / "set"
    prepare_output(curated, overwrite=False)
    (curated / "manifest.jsonl").write_text("")
    with pytest.raises(OutputError, match="overwrite=true"):
        prepare_output(curated, overwrite=False)
    prepare_output(curated, overwrite=True)
    assert not list(curated.iterdir())


def test_funnel_counts_per_stage_and_kind():
    decisions = [
        Decision("a", "decontaminate", "reject"),
        Decision("b", "validate", "reject"),
        Decision("c", "validate", "keep"),
        Decision("d", "validate", "keep"),
    ]
    kinds = {"a": "crawl", "b": "synthetic", "c": "synthetic", "d": "crawl"}
    table = funnel(["decontaminate", "validate"], {"crawl": 2, "synthetic": 2}, decisions, kinds)
    assert table["stages"]["decontaminate"]["crawl"] == {"in": 2, "rejected": 1, "out": 1}
    assert table["stages"]["validate"]["synthetic"] == {"in": 2, "rejected": 1, "out": 1}
    assert table["kept"] == {"crawl": 1, "synthetic": 1}
    json.dumps(table)
