"""Native function calling end to end: the trajectory runner drives the openai engine against a real HTTP
server speaking the Chat Completions schema (tests/servers/chat_completions.py, which also enforces the
protocol's tool-message rules), with the real tools and the real CPU evaluator judging the answer."""

from __future__ import annotations

import asyncio
import json

import pytest

from envs import EvalSettings, Evaluator
from envs.retrieval import KernelIndex, builtin_solutions
from rl.rollout.openai_engine import OpenAIEngine, OpenAIEngineConfig
from rl.rollout.trajectory import TrajectoryConfig, TrajectoryRunner
from rl.types import RolloutRequest, SamplingConfig
from tests.conftest import builtin
from tests.servers.chat_completions import ChatServer

pytestmark = pytest.mark.integration

RELU, RELU_SOLUTION = builtin("L0_02_relu")


def call(call_id, name, **arguments):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def scripted_model(body):
    """Turn 0: search; turn 1 (after reading the result): submit the code. Decided from the conversation."""
    tool_messages = [m for m in body["messages"] if m["role"] == "tool"]
    if not tool_messages:
        return {
            "content": "Let me look for a similar kernel.",
            "tool_calls": [call("call_a1", "kernel_search", query="elementwise relu")],
        }
    assert "verified solution" in tool_messages[-1]["content"]
    return {"content": None, "tool_calls": [call("call_b2", "submit", code=RELU_SOLUTION)]}


def test_an_api_model_calls_tools_natively_through_a_trajectory():
    with (
        ChatServer(api_key=None, responder=scripted_model) as server,
        Evaluator(EvalSettings(device="cpu", workers=1)) as evaluator,
    ):
        engine = OpenAIEngine(
            OpenAIEngineConfig(
                model="test-model",
                base_url=server.base_url,
                api_key_env=None,
                prices={"test-model": {"input": 1.0, "output": 1.0}},
            )
        )
        config = TrajectoryConfig(tools=("kernel_search", "kernel_evaluator"), tool_format="native")
        runner = TrajectoryRunner(engine, evaluator, config, solutions=KernelIndex(builtin_solutions([0, 1])))
        request = RolloutRequest(
            "step1/p0",
            RELU.id,
            [{"role": "system", "content": "Write Triton."}, {"role": "user", "content": RELU.source}],
            SamplingConfig(n=1, max_tokens=256),
        )

        async def go():
            try:
                return await runner.run([request], {RELU.id: RELU})
            finally:
                await engine.aclose()

        (t,) = asyncio.run(go())
        bodies = [r["body"] for r in server.requests if "tools" in r["body"]]

    assert t.stop_reason == "submit" and len(t.turns) == 2 and t.final_verdict.correct
    assert [(c.name, c.call_id, c.ok) for c in t.tool_calls] == [
        ("kernel_search", "call_a1", True),
        ("submit", "call_b2", True),
    ]
    # Both turns offered the tools as function declarations, and the system prompt carries no text offer.
    assert len(bodies) == 2
    for body in bodies:
        assert [d["function"]["name"] for d in body["tools"]] == ["kernel_search", "kernel_evaluator", "submit"]
        assert body["messages"][0]["content"] == "Write Triton."
    # The second request sent the model's own call back, then the tool's answer under the call's id.
    assistant, tool = bodies[1]["messages"][2], bodies[1]["messages"][3]
    assert assistant["role"] == "assistant" and assistant["tool_calls"][0]["id"] == "call_a1"
    assert assistant["tool_calls"][0]["function"] == {
        "name": "kernel_search",
        "arguments": json.dumps({"query": "elementwise relu"}),
    }
    assert tool == {"role": "tool", "content": t.tool_calls[0].result, "tool_call_id": "call_a1"}
    assert t.turns[0].finish_reason == "stop"  # the API's "tool_calls" finish reason is a normal stop
    # each turn keeps the API's usage (the benchmark's tools mode sums tokens and cost over the turns)
    assert all(turn.usage and turn.usage["prompt_tokens"] > 0 and "cost_usd" in turn.usage for turn in t.turns)


def test_the_server_refuses_a_conversation_that_breaks_the_tool_protocol():
    """The protocol check is real: an unanswered tool call is a 400, as from the OpenAI API."""
    import openai

    with ChatServer(api_key=None) as server:
        client = openai.OpenAI(api_key="x", base_url=server.base_url, max_retries=0)
        messages = [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "", "tool_calls": [call("c1", "kernel_search", query="x")]},
            {"role": "user", "content": "and?"},
        ]
        with pytest.raises(openai.BadRequestError, match="not answered"):
            client.chat.completions.create(model="test-model", messages=messages)
        client.close()
