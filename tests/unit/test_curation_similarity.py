"""Curation's similarity stages: normalization, Jaccard, decontamination, deduplication (envs.data)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from envs.data.calibration import change_comments, disguise, rename_identifiers, reorder_statements
from envs.data.decontam import DecontamConfig, decontaminate
from envs.data.dedup import deduplicate
from envs.data.records import CandidateProblem, Origin
from envs.data.textsim import ShingleIndex, jaccard, normalized_tokens, shingles
from envs.problems import load_builtin, load_kernelbench, parse_problem

KERNELBENCH = Path(
    os.environ.get("KERNELBENCH_DIR") or Path(__file__).resolve().parents[2].parent / "shared" / "kernelbench"
)
BUILTIN = {p.id: p for p in load_builtin()}


def _sim(a: str, b: str) -> float:
    return jaccard(shingles(normalized_tokens(a)), shingles(normalized_tokens(b)))


def _candidate(cid: str, source: str) -> CandidateProblem:
    return CandidateProblem(cid, source, Origin("synthetic", f"test:{cid}"))


@pytest.mark.parametrize("pid", ["L3_05_linear_bias_relu", "L2_03_layer_norm", "L4_04_conv2d_bias_relu"])
def test_disguises_keep_the_problem_recognisable(pid):
    source = BUILTIN[pid].source
    for disguised in (rename_identifiers(source, 3), change_comments(source), reorder_statements(source)):
        parse_problem(disguised, "x")  # still a problem
        assert _sim(source, disguised) > 0.8
    assert _sim(source, rename_identifiers(source)) == 1.0  # renaming is invisible to normalization
    assert _sim(source, change_comments(source)) == 1.0


def test_different_problems_are_not_similar():
    pairs = [("L0_02_relu", "L2_01_softmax"), ("L3_01_matmul", "L4_02_conv2d"), ("L2_03_layer_norm", "L5_01_attention")]
    for a, b in pairs:
        # One-line forwards share most of the class's shingles (ReLU vs softmax: 0.74): below the threshold only.
        assert _sim(BUILTIN[a].source, BUILTIN[b].source) < 0.8, (a, b)


def test_shingle_index_finds_the_copy_and_reports_exact_jaccard():
    index = ShingleIndex(0.8)
    for pid, p in BUILTIN.items():
        index.add(pid, shingles(normalized_tokens(p.source)))
    found, score = index.nearest(shingles(normalized_tokens(disguise(BUILTIN["L2_01_softmax"].source))))
    assert found == "L2_01_softmax" and score > 0.8
    with pytest.raises(ValueError):
        index.add("L2_01_softmax", frozenset())


def test_decontamination_drops_copies_and_semantic_twins_keeps_new_problems():
    relu_module = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = nn.ReLU()

    def forward(self, inp):
        return self.act(inp)

N = 1024
def get_inputs():
    return [torch.randn(N, N)]
def get_init_inputs():
    return []
"""
    fresh = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        y = torch.cumprod(torch.flip(x, dims=[1]), dim=1)
        return torch.atan2(y, x) * torch.erfinv(torch.tanh(x) * 0.5)

def get_inputs():
    return [torch.randn(64, 64)]
def get_init_inputs():
    return []
"""
    evaluation = list(BUILTIN.values())
    candidates = [
        _candidate("copy", disguise(BUILTIN["L2_06_cross_entropy"].source)),
        _candidate("twin", relu_module),
        _candidate("fresh", fresh),
    ]
    result = decontaminate(candidates, evaluation, DecontamConfig())
    by_id = {d.problem: d for d in result.decisions}
    assert by_id["copy"].decision == "reject" and by_id["copy"].collided_with == "L2_06_cross_entropy"
    assert by_id["twin"].decision == "reject" and by_id["twin"].collided_with == "L0_02_relu"
    assert "ops L2" in by_id["twin"].reason
    assert by_id["fresh"].decision == "keep"
    assert [c.id for c in result.kept] == ["fresh"]
    facts = result.kept[0].facts["decontamination"]
    assert set(facts) >= {"jaccard", "tfidf", "ops"} and facts["ops"]["l2"] >= 0.45


@pytest.mark.skipif(not (KERNELBENCH / "KernelBench").is_dir(), reason="no KernelBench checkout next to the repo")
def test_unchanged_kernelbench_files_are_all_caught():
    kb = load_kernelbench(KERNELBENCH)
    sample = kb[::10]
    result = decontaminate([_candidate(f"c{i}", p.source) for i, p in enumerate(sample)], kb)
    assert not result.kept
    assert all(d.score == 1.0 for d in result.decisions)  # exact copies: Jaccard 1 with themselves
    # KernelBench repeats itself (level1/57 and level1/71 normalize to the same code): the collision is the file
    # itself or an identical twin.
    by_id = {p.id: shingles(normalized_tokens(p.source)) for p in kb}
    for d, p in zip(result.decisions, sample):
        assert d.collided_with == p.id or by_id[d.collided_with] == by_id[p.id]


def test_deduplicate_keeps_the_first_of_near_duplicates():
    a = BUILTIN["L3_06_gemm_gelu_tanh"].source
    result = deduplicate(
        [
            _candidate("first", a),
            _candidate("renamed", rename_identifiers(a, 7)),
            _candidate("other", BUILTIN["L4_05_max_pool2d"].source),
        ]
    )
    assert [c.id for c in result.kept] == ["first", "other"]
    rejected = [d for d in result.decisions if d.decision == "reject"]
    assert len(rejected) == 1 and rejected[0].problem == "renamed" and rejected[0].collided_with == "first"
    assert rejected[0].score == 1.0
