"""Tool-call parsing, reward modes, the Trajectory record (loss masks, JSONL), and the runner's control flow
driven by scripted turns (tests/scripted_engine.py) with the real docs and search tools; evaluation here is an
in-process evaluator of canonical answers (the integration tests use the real worker pool)."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from envs import resolve_problem
from envs.tools import resolve_tools
from envs.verdict import Status, Verdict
from envs.retrieval import KernelIndex, builtin_solutions
from rewards.kernel_reward import reward_for_verdict
from rl.rollout.tool_calls import parse_tool_calls, tool_instructions
from rl.rollout.trajectory import TrajectoryConfig, TrajectoryRunner
from rl.rollout.trajectory_metrics import trajectory_metrics, trajectory_rows
from rl.rollout.trajectory_record import Trajectory, read_jsonl, write_jsonl
from rl.rollout.trajectory_rewards import discounted_returns, trajectory_reward
from rl.types import RolloutRequest, SamplingConfig
from tests.scripted_engine import ScriptedEngine

TOOLS = resolve_tools(["kernel_evaluator", "kernel_search", "docs_search"])

R = reward_for_verdict(Verdict(Status.CORRECT, "p", "cpu"), 1.8)  # a correct CPU verdict: sigmoid(1 - 1.8)
CODE = "import triton\nclass ModelNew:\n    pass"


# ------------------------------------------------------------------------------------------- parsing
def test_hermes_fenced_and_native_calls_are_parsed():
    text = (
        'Let me look.\n<tool_call>\n{"name": "kernel_search", "arguments": {"query": "softmax"}}\n</tool_call>\n'
        '```tool\n{"name": "docs_search", "arguments": "{\\"query\\": \\"tl.max\\"}"}\n```'
    )
    calls = parse_tool_calls(text, TOOLS)
    assert [(c.name, c.arguments, c.error) for c in calls] == [
        ("kernel_search", {"query": "softmax"}, None),
        ("docs_search", {"query": "tl.max"}, None),
    ]
    assert [c.name for c in parse_tool_calls(text, TOOLS, "hermes")] == ["kernel_search"]
    assert [c.name for c in parse_tool_calls(text, TOOLS, "fenced")] == ["docs_search"]
    native = [{"id": "call_7", "type": "function", "function": {"name": "submit", "arguments": '{"code": "x = 1"}'}}]
    (call,) = parse_tool_calls("", TOOLS, "auto", native)
    assert (call.name, call.arguments, call.call_id, call.error) == ("submit", {"code": "x = 1"}, "call_7", None)


def test_imperfect_calls_are_repaired_or_reported_never_raised():
    raw_newlines = '<tool_call>{"name": "kernel_evaluator", "arguments": {"code": "import triton\nx = 1"}}</tool_call>'
    assert parse_tool_calls(raw_newlines, TOOLS)[0].arguments == {"code": "import triton\nx = 1"}
    code_beside = f'<tool_call>{{"name": "kernel_evaluator"}}</tool_call>\n```python\n{CODE}\n```'
    assert parse_tool_calls(code_beside, TOOLS)[0].arguments == {"code": CODE}
    parameters = '<tool_call>{"name": "kernel_search", "parameters": {"query": "gemm"}}</tool_call>'
    assert parse_tool_calls(parameters, TOOLS)[0].arguments == {"query": "gemm"}
    unclosed = '<tool_call>{"name": "kernel_search", "arguments": {"query": "gemm"}}'  # cut by max_tokens
    assert parse_tool_calls(unclosed, TOOLS)[0].error is None
    errors = {
        '<tool_call>{"name": kernel_search}</tool_call>': "not valid JSON",
        '<tool_call>["kernel_search"]</tool_call>': "must be a JSON object",
        '<tool_call>{"name": "web", "arguments": {}}</tool_call>': "there is no tool 'web'",
        '<tool_call>{"name": "kernel_search", "arguments": {"query": 3}}</tool_call>': "must be a string",
        '<tool_call>{"name": "kernel_search", "arguments": "{bad"}</tool_call>': "not valid JSON",
        '<tool_call>{"name": "kernel_evaluator", "arguments": {}}</tool_call>': "missing the argument(s) code",
    }
    for text, message in errors.items():
        (call,) = parse_tool_calls(text, TOOLS)
        assert call.error is not None and message in call.error, (text, call)
    assert parse_tool_calls("no calls here, just ```python\nx\n```", TOOLS) == []


def test_tool_instructions_list_every_schema():
    text = tool_instructions(TOOLS, "hermes")
    assert "<tool_call>" in text and all(f'"name": "{t.name}"' in text for t in TOOLS)
    assert "```tool" in tool_instructions(TOOLS, "fenced")


# ------------------------------------------------------------------------------------------- rewards
def test_reward_modes():
    turns = [0.0, 0.3, 0.9]
    assert trajectory_reward("final", 0.6, turns) == (0.6, [0.6, 0.6, 0.6])
    assert trajectory_reward("best", 0.6, turns) == (0.9, [0.9, 0.9, 0.9])
    reward, returns = trajectory_reward("discounted", 0.9, turns, gamma=0.4)
    assert returns == pytest.approx([0.0 + 0.4 * (0.3 + 0.4 * 0.9), 0.3 + 0.4 * 0.9, 0.9])
    assert reward == pytest.approx(returns[0])
    assert discounted_returns([1.0, 1.0], 0.0) == [1.0, 1.0]
    with pytest.raises(ValueError, match="reward_mode"):
        trajectory_reward("mean", 0.0, turns)
    with pytest.raises(ValueError, match="gamma"):
        trajectory_reward("discounted", 0.0, turns, gamma=1.5)


def test_config_refuses_unknown_keys_tools_and_modes():
    assert TrajectoryConfig.from_mapping({"tools": ["kernel_evaluator"], "max_turns": 2}).tools == ("kernel_evaluator",)
    for bad, message in (
        ({"max_turnz": 2}, "unknown trajectory settings"),
        ({"tools": ["web"]}, "unknown tool"),
        ({"reward_mode": "sum"}, "reward_mode"),
        ({"max_turns": 0}, "max_turns"),
        ({"tool_format": "xml"}, "tool_format"),
        ({"layout": "flat"}, "layout"),
    ):
        with pytest.raises(ValueError, match=message):
            TrajectoryConfig.from_mapping(bad)


# ------------------------------------------------------------------------------------------- runner
class CanonicalEvaluator:
    """Judges an answer by whether it is exactly the reference solution: a real, deterministic verdict source
    for control-flow tests without worker processes (the integration tests evaluate for real)."""

    def __init__(self, correct: str):
        self.correct, self.calls = correct.strip(), []

    async def evaluate_async(self, problem, answer, priority="train"):
        self.calls.append(answer)
        ok = answer.strip() == self.correct
        return Verdict(
            Status.CORRECT if ok else Status.INCORRECT,
            problem.id,
            "cpu",
            error=None if ok else "trial 1 of 5: values differ",
        )


def run(script, config, n=1, correct=CODE, store=None):
    problem = resolve_problem("L0_02_relu")
    engine = ScriptedEngine(script)
    pool = CanonicalEvaluator(correct)
    runner = TrajectoryRunner(engine, pool, config, solutions=KernelIndex(builtin_solutions([0, 1, 2])), store=store)
    request = RolloutRequest(
        "step1/p0",
        problem.id,
        [{"role": "system", "content": "Write Triton."}, {"role": "user", "content": problem.source}],
        SamplingConfig(n=n, max_tokens=400),
    )
    return asyncio.run(runner.run([request], {problem.id: problem})), engine, pool


def tool_call(name, **arguments):
    import json

    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def test_a_scripted_multi_turn_trajectory_with_search_docs_evaluation_and_submit(tmp_path):
    script = {
        0: "I'll search first.\n"
        + tool_call("kernel_search", query="softmax")
        + tool_call("docs_search", query="tl.maximum"),
        1: "Draft:\n" + tool_call("kernel_evaluator", code="import triton\nclass ModelNew: wrong"),
        2: "Fixed.\n" + tool_call("kernel_evaluator", code=CODE),
        3: tool_call("submit", code=CODE),
    }
    config = TrajectoryConfig(tools=("kernel_evaluator", "kernel_search", "docs_search"), max_turns=6)
    (t,), engine, pool = run(lambda tid, turn: script[turn], config)
    assert t.stop_reason == "submit" and len(t.turns) == 4 and t.final_answer == CODE
    assert [c.name for c in t.tool_calls] == [
        "kernel_search",
        "docs_search",
        "kernel_evaluator",
        "kernel_evaluator",
        "submit",
    ]
    assert "verified solution" in t.tool_calls[0].result and "tl.maximum" in t.tool_calls[1].result
    assert "status: incorrect" in t.tool_calls[2].result
    assert "evaluations left in this trajectory: 3" in t.tool_calls[2].result
    assert t.tool_calls[3].verdict.correct and t.final_verdict.correct and t.reward == R
    # the system prompt offered the tools; observations came back as tool messages the next turn saw
    assert "<tools>" in engine.requests[0].messages[0]["content"]
    assert [m["role"] for m in engine.requests[1].messages][-3:] == ["assistant", "tool", "tool"]
    assert pool.calls == ["import triton\nclass ModelNew: wrong", CODE]  # the submitted CODE keeps its tool verdict
    # one training row: loss only on the four completions, each inside the last prompt where it was generated
    (row,) = t.training_rows("concat")
    assert t.prefix_consistent() and len(row.input_ids) == len(row.loss_mask) == len(row.logprobs)
    assert sum(row.loss_mask) == t.completion_tokens
    for turn in t.turns:
        start = len(turn.prompt_ids)
        assert row.input_ids[start : start + len(turn.completion_ids)] == turn.completion_ids
        assert all(row.loss_mask[start : start + len(turn.completion_ids)])
    observation = engine.tokenizer.encode(t.tool_calls[0].result[:40], add_special_tokens=False)
    at = next(i for i in range(len(row.input_ids)) if row.input_ids[i : i + len(observation)] == observation)
    assert not any(row.loss_mask[at : at + len(observation)])  # tool output is masked
    assert {p for p, m in zip(row.logprobs, row.loss_mask) if not m} == {None}
    # JSONL round trip, metrics, table rows
    path = tmp_path / "trajectories.jsonl"
    assert write_jsonl(path, [t]) == 1
    (back,) = read_jsonl(path)
    assert back == t and isinstance(back, Trajectory)
    m = trajectory_metrics([t])
    assert m["train/turns_mean"] == 4 and m["train/tool_calls_mean"] == 5
    assert m["train/tool/kernel_evaluator/calls_per_trajectory"] == 2 and m["train/stop/submit"] == 1
    assert m["train/turn_1/correct_rate"] == 0 and m["train/turn_2/correct_rate"] == 1
    assert m["train/reward_gain_first_to_final"] == pytest.approx(R)
    assert trajectory_rows([t], step=1)[0]["tool_calls"].startswith("kernel_search,docs_search")


def test_budgets_malformed_calls_and_the_last_code_block():
    config = TrajectoryConfig(tools=("kernel_evaluator",), max_turns=3, max_evaluations=1, max_tool_calls=3)
    script = {
        0: tool_call("kernel_evaluator", code="x") + '<tool_call>{"name": oops}</tool_call>',
        1: tool_call("kernel_evaluator", code="y") + tool_call("kernel_evaluator", code="z"),
        2: f"Final answer:\n```python\n{CODE}\n```",
    }
    (t,), _, pool = run(lambda tid, turn: script[turn], config)
    results = [c.result for c in t.tool_calls]
    assert "status: incorrect" in results[0] and "not valid JSON" in results[1]
    assert "budget is spent" in results[2] and "tool call limit reached" in results[3]
    assert [c.ok for c in t.tool_calls] == [True, False, False, False]
    assert t.stop_reason == "no_tool_call" and t.final_answer == CODE and t.final_verdict.correct
    assert pool.calls == ["x", CODE]  # the spent budget stopped y; z was past the tool-call limit


def test_no_tool_call_ends_the_trajectory_and_group_members_run_independently():
    def script(tid, turn):
        if tid.endswith("#0"):
            return f"```python\n{CODE}\n```"  # answers at once
        return tool_call("kernel_search", query="relu") if turn == 0 else "I give up."

    trajectories, engine, _ = run(script, TrajectoryConfig(max_turns=3), n=2)
    first, second = trajectories
    assert (first.stop_reason, len(first.turns), first.final_verdict.correct) == ("no_tool_call", 1, True)
    assert (second.stop_reason, len(second.turns), second.final_verdict.correct) == ("no_tool_call", 2, False)
    assert second.final_answer == "I give up."  # no code anywhere: the last text is judged (and fails)
    assert [len([r for r in engine.requests if r.request_id.endswith(f"/t{k}")]) for k in range(3)] == [2, 1, 0]


def test_token_budget_and_per_turn_discounted_rows():
    config = TrajectoryConfig(
        tools=("kernel_evaluator",),
        max_turns=5,
        max_total_tokens=300,
        reward_mode="discounted",
        gamma=0.4,
        layout="per_turn",
    )
    draft = "import triton\nclass ModelNew: draft"
    script = {
        0: f"```python\n{draft}\n```\n" + tool_call("kernel_evaluator"),
        1: tool_call("kernel_evaluator", code=CODE) + "x" * 400,
    }
    (t,), engine, _ = run(lambda tid, turn: script[turn], config)
    assert t.stop_reason == "token_budget" and len(t.turns) == 2
    assert engine.requests[1].sampling.max_tokens == 300 - len(t.turns[0].completion_ids)
    assert [turn.reward for turn in t.turns] == [0.0, R]
    assert t.turn_returns == pytest.approx([0.4 * R, R]) and t.reward == pytest.approx(0.4 * R)
    rows = t.training_rows("per_turn")
    assert [r.turn for r in rows] == [0, 1] and [r.reward for r in rows] == pytest.approx([0.4 * R, R])
    for row, turn in zip(rows, t.turns):
        assert sum(row.loss_mask) == len(turn.completion_ids)
        assert row.loss_mask[: len(turn.prompt_ids)] == [0] * len(turn.prompt_ids)


def test_best_mode_and_the_per_turn_fallback_when_prefixes_differ():
    script = {0: tool_call("kernel_evaluator", code=CODE), 1: "```python\nworse\n```"}
    (t,), _, _ = run(lambda tid, turn: script[turn], TrajectoryConfig(tools=("kernel_evaluator",), reward_mode="best"))
    assert t.final_verdict.correct is False and t.reward == R  # the best turn, not the final answer
    turns = [
        dataclasses.replace(t.turns[0]),
        dataclasses.replace(t.turns[1], prompt_ids=[1, 2, 3] + t.turns[1].prompt_ids),
    ]
    drifted = dataclasses.replace(t, turns=turns)
    assert not drifted.prefix_consistent()
    rows = drifted.training_rows("concat")  # cannot be one row: one per turn, the trajectory's reward each
    assert len(rows) == 2 and all(r.reward == R for r in rows)


def test_solutions_found_in_trajectories_go_to_the_store(tmp_path):
    from envs.solutions import SolutionStore

    store = SolutionStore(tmp_path / "solutions.sqlite")
    script = {0: tool_call("kernel_evaluator", code=CODE), 1: tool_call("submit", code=CODE)}
    run(lambda tid, turn: script[turn], TrajectoryConfig(tools=("kernel_evaluator",)), store=store)
    (record,) = store.records()
    assert record.problem_id == "L0_02_relu" and record.solution == CODE
    assert "trajectory step1/p0#0" in record.provenance
    assert store.records(exclude_splits=("train",)) == []


def test_trajectories_become_the_loops_groups_with_loss_masks():
    from rl.rollout.trajectory_scoring import trajectory_groups

    script = {0: tool_call("kernel_search", query="relu"), 1: tool_call("submit", code=CODE)}
    trajectories, _, _ = run(lambda tid, turn: script[turn], TrajectoryConfig(), n=2)
    request = RolloutRequest("step1/p0", "L0_02_relu", [], SamplingConfig(n=2))
    (group,) = trajectory_groups([request], trajectories, "concat")
    assert [s.sample.index for s in group.samples] == [0, 1] and group.rewards == [R, R]
    for scored, t in zip(group.samples, trajectories):
        s = scored.sample
        mask = s.loss_mask
        assert s.prompt_ids == t.turns[0].prompt_ids and len(mask) == len(s.completion_ids) == len(s.logprobs)
        assert sum(mask) == t.completion_tokens and mask[0] == 1 and 0 in mask  # the observation is masked
        assert all(p == 0.0 for p, m in zip(s.logprobs, mask) if not m)
    (per_turn,) = trajectory_groups([request], trajectories, "per_turn")
    assert len(per_turn.samples) == 4 and all(all(s.sample.loss_mask) for s in per_turn.samples)


def test_a_policy_that_keeps_calling_tools_stops_at_max_turns():
    (t,), engine, _ = run(lambda tid, turn: tool_call("kernel_search", query="relu"), TrajectoryConfig(max_turns=2))
    assert t.stop_reason == "max_turns" and len(t.turns) == 2 and len(engine.requests) == 2
    assert t.final_answer == t.turns[-1].text and not t.final_verdict.correct  # no code anywhere: judged and failed


# ------------------------------------------------------------------------------------------- history, context
def test_summary_history_shows_earlier_turns_as_their_summaries_and_trains_per_turn():
    draft = "import triton\nclass ModelNew: draft"
    script = {
        0: "Long reasoning about blocks and masks. " * 3
        + f"\n```python\n{draft}\n```\n"
        + tool_call("kernel_evaluator")
        + "\n<summary>Tried a draft; checking it.</summary>",
        1: "More thinking. " + tool_call("submit", code=CODE),
    }
    config = TrajectoryConfig(tools=("kernel_evaluator",), history="summary")
    (t,), engine, _ = run(lambda tid, turn: script[turn], config)
    assert "<summary>" in engine.requests[0].messages[0]["content"]  # the policy is asked for summaries
    earlier = engine.requests[1].messages[2]
    assert earlier["role"] == "assistant" and "Long reasoning" not in earlier["content"]
    assert earlier["content"] == (
        f"<summary>Tried a draft; checking it.</summary>\n```python\n{draft}\n```\n" + tool_call("kernel_evaluator")
    )
    assert t.messages[2]["content"] == script[0]  # the record keeps what the policy wrote
    assert t.stop_reason == "submit" and t.final_verdict.correct
    assert not t.prefix_consistent()
    rows = t.training_rows(config.layout)  # concat is impossible: one row per turn, each masked to its turn
    assert [sum(r.loss_mask) for r in rows] == [len(turn.completion_ids) for turn in t.turns]


def test_full_history_sends_earlier_turns_verbatim():
    script = {0: tool_call("kernel_search", query="relu") + " thinking", 1: tool_call("submit", code=CODE)}
    (t,), engine, _ = run(lambda tid, turn: script[turn], TrajectoryConfig())
    assert engine.requests[1].messages[2]["content"] == script[0] and t.prefix_consistent()


def test_a_trajectory_ends_before_its_prompt_outgrows_the_context():
    script = {0: tool_call("kernel_search", query="relu softmax"), 1: tool_call("submit", code=CODE)}
    (t,), engine, _ = run(lambda tid, turn: script[turn], TrajectoryConfig(max_context_tokens=1200))
    assert t.stop_reason == "context_limit" and len(engine.requests) == 1 and len(t.turns) == 1
    (t,), engine, _ = run(lambda tid, turn: script[turn], TrajectoryConfig(max_context_tokens=100_000))
    assert t.stop_reason == "submit" and len(engine.requests) == 2
    with pytest.raises(ValueError, match="max_context_tokens"):
        TrajectoryConfig(max_context_tokens=10)


def test_native_format_offers_schemas_on_the_request_and_layout_follows_the_reward_mode():
    script = {0: tool_call("submit", code=CODE)}  # text calls are not read in native mode
    (t,), engine, _ = run(lambda tid, turn: script[turn], TrajectoryConfig(tool_format="native"))
    offered = [d["function"]["name"] for d in engine.requests[0].tools]
    assert offered == ["kernel_evaluator", "kernel_search", "submit"]
    assert engine.requests[0].messages[0]["content"] == "Write Triton."  # no text offer
    assert t.stop_reason == "no_tool_call"
    (t,), engine, _ = run(lambda tid, turn: script[turn], TrajectoryConfig())
    assert engine.requests[0].tools is None and "<tool_call>" in engine.requests[0].messages[0]["content"]
    assert TrajectoryConfig(reward_mode="discounted").layout == "per_turn"
    assert TrajectoryConfig(reward_mode="best").layout == "concat"
    assert TrajectoryConfig(reward_mode="discounted", layout="concat").layout == "concat"
    with pytest.raises(ValueError, match="history"):
        TrajectoryConfig(history="forget")
