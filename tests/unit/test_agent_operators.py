"""The LLM operators' prompts: strategy hints, feedback in mutation, both parents in crossover, retrieval's
leakage rules (never the problem's own solution, never a held-out one)."""

import pytest

from envs.problems import resolve_problem
from envs.retrieval import KernelIndex, SolvedKernel, builtin_solutions
from rl.agent.operators import STRATEGIES, crossover_messages, fresh_messages, mutate_messages, retrieval_messages
from rl.prompts import PromptBuilder, PromptConfig
from tests.unit.agent_helpers import record

RELU = resolve_problem("L0_02_relu")


def builder(one_shot: bool = False) -> PromptBuilder:
    return PromptBuilder(PromptConfig(one_shot=one_shot), KernelIndex(builtin_solutions()) if one_shot else None)


def test_fresh_strategies_extend_the_problem_turn():
    plain = fresh_messages(builder(), RELU, "plain")
    assert plain == builder().build(RELU).messages
    for strategy, hint in STRATEGIES.items():
        messages = fresh_messages(builder(), RELU, strategy)
        assert [m["role"] for m in messages] == [m["role"] for m in plain]  # no extra user turn
        assert hint in messages[-1]["content"] and RELU.source.strip()[:40] in messages[-1]["content"]
    with pytest.raises(ValueError, match="strategy"):
        fresh_messages(builder(), RELU, "magic")


def test_mutation_shows_the_parent_and_its_verdict():
    failed = record(7, "incorrect", text="```python\nCODE_OF_PARENT\n```")
    messages = mutate_messages(builder(), RELU, failed)
    assert messages[-2] == {"role": "assistant", "content": "```python\nCODE_OF_PARENT\n```"}
    assert "status: incorrect" in messages[-1]["content"] and "Fix it" in messages[-1]["content"]
    fast = mutate_messages(builder(), RELU, record(8, "correct", 1.5, text="X"))
    assert "faster" in fast[-1]["content"] and "speedup vs TorchInductor: 1.5x" in fast[-1]["content"]


def test_crossover_shows_both_parents():
    a, b = record(1, "correct", 1.2, text="CODE_A"), record(2, "runtime_error", text="CODE_B")
    messages = crossover_messages(builder(), RELU, a, b)
    last = messages[-1]["content"]
    assert "CODE_A" in last and "CODE_B" in last and "status: runtime_error" in last
    assert messages[-1]["role"] == "user" and len(messages) == len(builder().build(RELU).messages)


def test_retrieval_never_shows_the_problem_itself_or_held_out_problems():
    own = SolvedKernel(RELU.id, RELU.source, "OWN_SOLUTION")
    copy = SolvedKernel("renamed_copy", RELU.source, "COPY_SOLUTION")  # same source under another id
    sigmoid = resolve_problem("L0_04_sigmoid")
    held = SolvedKernel(sigmoid.id, sigmoid.source, "HELD_OUT_SOLUTION")
    others = [r for r in builtin_solutions([0]) if r.problem_id not in (RELU.id, sigmoid.id)]
    index = KernelIndex([own, copy, held, *others], held_out_ids=[sigmoid.id])
    text = retrieval_messages(builder(), RELU, index, k=3)[-1]["content"]
    assert "OWN_SOLUTION" not in text and "COPY_SOLUTION" not in text and "HELD_OUT_SOLUTION" not in text
    assert text.count("### its solution") == 3
    assert retrieval_messages(builder(), RELU, KernelIndex([own])) == builder().build(RELU).messages
