"""Prompts (rl.prompts) and retrieval of a solved kernel of another problem (envs.retrieval)."""

from __future__ import annotations

import ast
import dataclasses
import pickle

import pytest

from envs.problems import load_builtin, resolve_problem
from envs.retrieval import KernelIndex, SolvedKernel, builtin_solutions, tokenize
from envs.source import extract_code
from rl.prompts import PromptBuilder, PromptConfig, PromptError
from rl.types import SamplingConfig

PROBLEMS = load_builtin()
RECORDS = builtin_solutions()


@pytest.fixture(scope="module")
def index():
    return KernelIndex(RECORDS)


def test_tokenize_splits_compound_identifiers_and_drops_boilerplate():
    tokens = tokenize("def _layer_norm_kernel(x_ptr): return torch.nn.LayerNorm(BLOCK_SIZE)  # rms")
    assert {
        "layer_norm_kernel",
        "layer",
        "norm",
        "kernel",
        "x_ptr",
        "ptr",
        "layernorm",
        "block_size",
        "block",
        "size",
        "rms",
    } <= set(tokens)
    assert not {"def", "return", "torch", "nn", "x"} & set(tokens)


def test_search_never_returns_the_problem_itself_even_under_another_id(index):
    softmax = resolve_problem("L2_01_softmax")
    copy = SolvedKernel("kernelbench/level1/23", softmax.source, "code", provenance="a copy")
    idx = KernelIndex([*RECORDS, copy])
    for problem in PROBLEMS:
        example = idx.most_similar(problem)
        assert example is not None and example.problem_id != problem.id
        assert example.problem_sha256 != problem.sha256
    assert idx.most_similar(softmax).problem_id == "L2_02_log_softmax"


def test_similar_problems_are_found(index):
    expected = {
        "L3_01_matmul": "L3_03_matmul_transposed_b",
        "L2_03_layer_norm": "L2_04_rms_norm",
        "L5_01_attention": "L5_02_causal_attention",
        "L4_05_max_pool2d": "L4_06_avg_pool2d",
        "L0_02_relu": "L0_05_leaky_relu",
    }
    for pid, similar in expected.items():
        assert index.most_similar(resolve_problem(pid)).problem_id == similar


def test_held_out_problems_are_never_returned():
    held = {p.id for p in PROBLEMS if p.level in (2, 3)}
    sha = {resolve_problem("L0_05_leaky_relu").sha256}
    idx = KernelIndex(RECORDS, held_out_ids=held, held_out_sha256=sha)
    assert len(idx) == len(RECORDS) - len(held) - 1
    for problem in PROBLEMS:
        for hit in idx.search(problem.source, k=100):
            assert hit.record.problem_id not in held and hit.record.problem_id != "L0_05_leaky_relu"


def test_search_is_deterministic_and_ties_prefer_faster_solutions(index):
    softmax = resolve_problem("L2_01_softmax")
    assert index.search(softmax.source, k=10) == index.search(softmax.source, k=10)
    slow = SolvedKernel("other", softmax.source, "slow", speedup=0.5, provenance="b")
    fast = SolvedKernel("other", softmax.source, "fast", speedup=2.0, provenance="a")
    hits = KernelIndex([slow, fast]).search("softmax rows cols", k=2)
    assert [h.record.solution for h in hits] == ["fast", "slow"] and hits[0].score == hits[1].score
    assert index.search("zzz_unrelated_words", k=3) == []
    assert index.search("online softmax over rows", k=2)[0].record.problem_id in {"L2_01_softmax", "L2_02_log_softmax"}


def test_prompt_has_rules_example_turn_and_the_problem(index):
    builder = PromptBuilder(PromptConfig(), index)
    problem = resolve_problem("L2_03_layer_norm")
    prompt = builder.build(problem)
    roles = [m["role"] for m in prompt.messages]
    assert roles == ["system", "user", "assistant", "user"]
    system = prompt.messages[0]["content"]
    for rule in (
        "```python",
        "class ModelNew",
        "@triton.jit",
        "torch.compile",
        "try/except",
        "threads",
        "current stream",
        "inputs",
    ):
        assert rule in system
    assert problem.source.strip() in prompt.messages[-1]["content"]
    assert prompt.example is not None and prompt.example.problem_id == "L2_04_rms_norm"
    assert prompt.example.problem_source.strip() in prompt.messages[1]["content"]
    answer = prompt.messages[2]["content"]
    assert answer.startswith("```python\n") and answer.endswith("\n```")
    assert extract_code(answer).strip() == prompt.example.solution.strip()  # exactly the answer format asked for
    assert builder.build(problem) == prompt  # deterministic


def test_prompt_variants(index):
    problem = resolve_problem("L0_02_relu")
    plain = PromptBuilder(PromptConfig(one_shot=False)).build(problem)
    assert [m["role"] for m in plain.messages] == ["system", "user"] and plain.example is None
    merged = PromptBuilder(PromptConfig(system_role=False), index).build(problem)
    assert [m["role"] for m in merged.messages] == ["user", "assistant", "user"]
    assert merged.messages[0]["content"].startswith(plain.messages[0]["content"])
    stripped = PromptBuilder(PromptConfig(strip_comments=True), index).build(problem)
    full = PromptBuilder(PromptConfig(), index).build(problem)
    assert len(stripped.messages[2]["content"]) < len(full.messages[2]["content"])
    ast.parse(extract_code(stripped.messages[2]["content"]))
    none_fit = PromptBuilder(PromptConfig(max_example_chars=10), index).build(problem)
    assert none_fit.example is None and len(none_fit.messages) == 2
    limit = 1200
    short = PromptBuilder(PromptConfig(max_example_chars=limit), index).build(resolve_problem("L3_01_matmul"))
    assert short.example is not None and len(short.example.solution) <= limit


def test_request_and_pickling(index):
    builder = PromptBuilder(PromptConfig(), index)
    problem = resolve_problem("L1_02_swish")
    request = builder.request(problem, "step0/p0", SamplingConfig(n=2), policy_version=3)
    assert request.problem_id == problem.id and request.sampling.n == 2 and request.policy_version == 3
    copy = pickle.loads(pickle.dumps(builder))
    assert copy.build(problem) == builder.build(problem)


def test_bad_prompt_configs(tmp_path, index):
    with pytest.raises(PromptError, match="needs a solution store"):
        PromptBuilder(PromptConfig(one_shot=True))
    with pytest.raises(PromptError, match="no such file"):
        PromptBuilder(PromptConfig(templates=str(tmp_path)), index)
    with pytest.raises(ValueError, match="unknown prompt settings"):
        PromptConfig.from_mapping({"one_shoot": True})
    with pytest.raises(PromptError, match="max_example_chars"):
        PromptConfig(max_example_chars=0)
    for name, text in {"system.j2": "rules", "user.j2": "{{ sorce }}", "example_answer.j2": "{{ solution }}"}.items():
        (tmp_path / name).write_text(text)
    builder = PromptBuilder(PromptConfig(templates=str(tmp_path), one_shot=False))
    with pytest.raises(PromptError, match="'sorce' is undefined; available: \\['problem_id', 'source'\\]"):
        builder.build(PROBLEMS[0])
    (tmp_path / "user.j2").write_text("{% if %}")
    with pytest.raises(PromptError, match="prompt template"):
        PromptBuilder(PromptConfig(templates=str(tmp_path), one_shot=False))


def test_config_from_mapping_roundtrip():
    cfg = PromptConfig(one_shot=False, strip_comments=True, max_example_chars=None)
    assert PromptConfig.from_mapping(dataclasses.asdict(cfg)) == cfg
