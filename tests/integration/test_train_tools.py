"""The training loop with tools on (rollout.tools): the real Trainer, the real Ray evaluation pool on CPU
(Triton interpreter), the real LoRA learner on a tiny random model, the real parser, tools and trajectory
runner. The first test scripts the policy's turns (a random model calls no tool), so the trajectories are
multi-turn and the learner trains on rows whose tool outputs are masked; the second runs scripts/train.py
as a user would, with the hf engine writing every turn itself."""

from __future__ import annotations

import asyncio
import json

import pytest

from rl.rollout.trajectory_record import read_jsonl
from rl.tracking import read_metrics
from tests.conftest import builtin
from tests.integration.test_train import ENV, TINY, train

pytestmark = pytest.mark.integration

TOOLS = [
    "rollout.tools=[kernel_evaluator,kernel_search]",
    "prompt.one_shot=false",
    "rollout.max_tokens=1500",
    "rollout.trajectory.max_total_tokens=6000",
    "rollout.trajectory.max_context_tokens=100000",
    "loop.steps=1",
    "validation.at_start=false",
]


def call(name, **arguments):
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def script(trajectory_id, turn, request):
    """Member 0 drafts a wrong kernel, checks it, then submits the reference; member 1 answers wrong at once."""
    _, solution = builtin(request.problem_id)
    wrong = solution.replace("tl.store(", "tl.store(1 + ", 1)
    if trajectory_id.endswith("#1"):
        return f"```python\n{wrong}\n```"
    if turn == 0:
        return (
            "Similar kernels first.\n"
            + call("kernel_search", query="elementwise")
            + call("kernel_evaluator", code=wrong)
        )
    return "The store was off by one.\n" + call("submit", code=solution + "\nVARIANT = 1\n")  # not the store's own


# ppo: the critic and GAE on the masked rows too (slow: CI runs grpo; unit tests cover GAE's masking)
@pytest.mark.parametrize("algorithm", ["grpo", pytest.param("ppo", marks=pytest.mark.slow)])
def test_one_training_step_on_scripted_multi_turn_trajectories(tmp_path, monkeypatch, algorithm):
    from hydra import compose, initialize_config_dir

    from rl.components import build_components, close_components
    from rl.config import RunConfig
    from rl.data import ProblemData
    from rl.loop import Trainer
    from rl.tracking import RunLogger, WandbConfig
    from tests.conftest import ROOT
    from tests.scripted_engine import ScriptedEngine

    monkeypatch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        tiny = [o if o != "algorithm=grpo" else f"algorithm={algorithm}" for o in TINY]
        cfg = compose("config", overrides=[*tiny, *TOOLS, "data.levels=[0]", f"cache_path={tmp_path}/verdicts.sqlite"])
    run = RunConfig.from_hydra(cfg)
    data = ProblemData.load(run.data)
    components = build_components(run, data)
    components.engine.shutdown()  # the tiny model's hf engine would call no tool: the turns are scripted
    components.engine = ScriptedEngine(script, with_request=True)
    components.make_engine = lambda: ScriptedEngine(script, with_request=True)
    logger = RunLogger(tmp_path, WandbConfig(mode="disabled"))
    try:
        summary = asyncio.run(Trainer(run, tmp_path, components, data, logger).run())
    finally:
        close_components(components)
        logger.close()
    assert summary["steps"] == 1

    rows = read_metrics(tmp_path / "metrics.jsonl")
    step = next(r for r in rows if r["step"] == 1)
    trajectories = read_jsonl(tmp_path / "trajectories.jsonl")
    lines = [json.loads(line) for line in (tmp_path / "trajectories.jsonl").read_text().splitlines()]
    train = [t for t, line in zip(trajectories, lines) if line["split"] == "train" and line["step"] == 1]
    assert len(train) == 4 and {line["split"] for line in lines} == {"train", "val"}  # 2 problems x n=2; val at end
    assert step["train/turns_mean"] == 1.5 and step["train/tool_calls_mean"] == 1.5  # (2 + 1) turns, (3 + 0) calls
    assert step["train/tool/kernel_evaluator/calls_per_trajectory"] == 0.5
    assert step["train/tool/kernel_evaluator/latency_mean_s"] > 0 and step["time/tool_calls"] > 0
    assert step["train/turn_0/correct_rate"] == 0.0 and step["train/turn_1/correct_rate"] == 1.0
    assert step["train/final_correct_rate"] == 0.5 and step["train/reward_gain_first_to_final"] > 0
    assert step["train/stop/submit"] == 0.5 and step["train/stop/no_tool_call"] == 0.5
    for t in train:
        assert t.final_verdict.correct == t.trajectory_id.endswith("#0")
    # The learner trained on the policy's tokens only: the tool outputs inside member 0's row are masked.
    assert step["train/completion_tokens"] == sum(t.completion_tokens for t in train)
    assert all(t.prefix_consistent() for t in train)
    assert step["train/loss"] == step["train/loss"]  # a number, not NaN: the update ran
    if algorithm == "ppo":  # the value head trained on the policy tokens of the same rows
        assert step["train/value_loss"] == step["train/value_loss"] and step["train/value_grad_norm"] > 0
    # A correct answer found in training is now in the solution store kernel_search reads.
    from envs.solutions import SolutionStore

    store = SolutionStore(tmp_path / "solutions.sqlite")
    try:
        assert any("trajectory step1" in r.provenance for r in store.records())
    finally:
        store.close()


def test_train_py_runs_a_step_with_tools_on_the_hf_engine(tmp_path):
    result = train(
        tmp_path,
        "rollout.tools=[kernel_evaluator,kernel_search,docs_search]",
        "loop.steps=1",
        "rollout.trajectory.max_turns=2",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    step = next(r for r in read_metrics(tmp_path / "metrics.jsonl") if r["step"] == 1)
    assert step["train/turns_mean"] >= 1 and "train/tool_calls_mean" in step and "train/final_correct_rate" in step
    trajectories = read_jsonl(tmp_path / "trajectories.jsonl")
    assert len(trajectories) >= 4 and all(t.turns and t.final_verdict is not None for t in trajectories)
    assert ENV["WANDB_MODE"] == "offline" and list((tmp_path / "wandb").glob("offline-run-*"))
