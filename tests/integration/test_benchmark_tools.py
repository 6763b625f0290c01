"""The benchmark in tools mode (`rollout.tools`): rl.bench.main.run_from_config as scripts/benchmark.py calls it, with
the real local Evaluator (worker processes, Triton interpreter), the real solution store, kernel_search,
kernel_evaluator and trajectory runner; the policy's turns are scripted (tests/scripted_engine.py: a tiny model
calls no tool), so each trajectory does what the test needs. Also the command line refusing what tools mode
cannot do."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from envs.solutions import SolutionStore
from envs.retrieval import SolvedKernel
from rl.rollout.trajectory_record import read_jsonl
from tests.conftest import ROOT, builtin
from tests.scripted_engine import ScriptedEngine

pytestmark = pytest.mark.integration

RELU, RELU_SOLUTION = builtin("L0_02_relu")
SIGMOID, SIGMOID_SOLUTION = builtin("L0_04_sigmoid")
RELU_WRONG = RELU_SOLUTION.replace("tl.maximum(x, 0.0)", "tl.maximum(x, 0.5)")
SIGMOID_WRONG = SIGMOID_SOLUTION.replace("1.0 / (1.0 + tl.exp(-x))", "1.0 / (2.0 + tl.exp(-x))")
EARLIER = "an earlier benchmark run"  # provenance of a benchmark-split solution that must never be returned


def call(name, **arguments):
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def script(trajectory_id, turn):
    """relu #0: three searches (relu; leaky relu, whose problem also has a benchmark-split solution; the other
    benchmarked problem's name), a wrong draft checked, then a correct
    submit; sigmoid #0: a correct draft checked, then a WRONG submit (final worse than best); every #1 answers at
    once (relu right, sigmoid wrong)."""
    problem, sample = trajectory_id.split("/")[0], trajectory_id.rsplit("#", 1)[1]
    if problem == RELU.id:
        if sample == "1":
            return f"```python\n{RELU_SOLUTION}\n```"
        if turn == 0:
            return (
                "Look for similar kernels.\n"
                + call("kernel_search", query="elementwise relu maximum")
                + call("kernel_search", query="leaky relu negative slope")
                + call("kernel_search", query="sigmoid")
                + call("kernel_evaluator", code=RELU_WRONG)
            )
        return "Off by 0.5.\n" + call("submit", code=RELU_SOLUTION + "\nVARIANT = 1\n")
    if sample == "1":
        return f"```python\n{SIGMOID_WRONG}\n```"
    if turn == 0:
        return "Check a draft.\n" + call("kernel_evaluator", code=SIGMOID_SOLUTION)
    return "A variant.\n" + call("submit", code=SIGMOID_WRONG)


def config(tmp_path, *overrides):
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(
            "benchmark",
            overrides=[
                "policy=tiny_random",
                "eval.device=cpu",
                "eval.workers=2",
                f"ids=[{RELU.id},{SIGMOID.id}]",
                "samples=2",
                f"cache_path={tmp_path}/verdicts.sqlite",
                "prompt.one_shot=false",
                "progress=false",
                "wandb.mode=offline",
                f"output={tmp_path}/run/bench.json",
                "sampling.max_tokens=6000",
                "rollout.tools=[kernel_evaluator,kernel_search]",
                "rollout.trajectory.max_total_tokens=20000",
                "rollout.trajectory.max_context_tokens=100000",
                *overrides,
            ],
        )  # byte-level tokens: 1 per byte
    return OmegaConf.to_container(cfg, resolve=True)


def test_a_tools_benchmark_on_scripted_trajectories(tmp_path, monkeypatch):
    from rl.bench.main import run_from_config

    monkeypatch.setenv("WANDB_MODE", "offline")
    store = SolutionStore(tmp_path / "solutions.sqlite")  # beside the verdict cache: the run's store
    store.add(
        SolvedKernel("L0_05_leaky_relu", builtin("L0_05_leaky_relu")[0].source, "# found earlier\n", None, EARLIER),
        "benchmark",
    )
    store.close()

    engine = ScriptedEngine(script)
    report = run_from_config(config(tmp_path), tmp_path / "hydra", engine=engine)

    # The metrics score each trajectory's final answer as its sample's single attempt.
    assert report["correct_at_1"] == 0.5 and report["pass_at_k"]["1"] == 0.5  # relu right, sigmoid's final wrong
    assert report["run"]["tools"] == ["kernel_evaluator", "kernel_search"] and report["run"]["attempts"] == 1
    t = report["trajectories"]
    assert t["correct_within_trajectory"] == 1.0 and t["final_correct"] == 0.5 and t["best_correct"] == 1.0
    relu0, relu1 = t["per_problem"][RELU.id]
    assert (relu0["turns"], relu0["tool_calls"], relu0["stop_reason"]) == (2, 5, "submit")
    assert relu0["tools"] == {"kernel_search": 3, "kernel_evaluator": 1, "submit": 1}
    assert relu0["final"]["correct"] and relu0["final_is_best"] and relu0["reward_gain_first_to_final"] > 0
    assert [(r["turn"], r["correct"]) for r in relu0["per_turn"]] == [(0, False), (1, True)]
    assert (relu1["turns"], relu1["tool_calls"], relu1["stop_reason"]) == (1, 0, "no_tool_call")
    sigmoid0, sigmoid1 = t["per_problem"][SIGMOID.id]
    assert sigmoid0["correct_within_trajectory"] and not sigmoid0["final"]["correct"]
    assert sigmoid0["best"]["source"] == "kernel_evaluator" and sigmoid0["best"]["turn"] == 0
    assert not sigmoid0["final_is_best"] and sigmoid0["reward_gain_first_to_final"] < 0
    assert not sigmoid1["correct_within_trajectory"]
    m = t["metrics"]  # the training loop's trajectory metrics over the 4 trajectories
    assert m["turns_mean"] == 1.5 and m["tool_calls_mean"] == 1.75  # (2 + 1 + 2 + 1) turns, (5 + 0 + 2 + 0) calls
    assert m["turn_0/correct_rate"] == 0.5 and m["turn_1/correct_rate"] == 0.5  # relu1, sigmoid0 of 4; relu0 of 2
    assert m["tool/kernel_search/calls_per_trajectory"] == 0.75 and "reward_gain_first_to_final" in m

    # Leakage: neither benchmarked problem's solutions, nor one found on the benchmark split, are ever returned.
    out = tmp_path / "run"
    trajectories = read_jsonl(out / "bench.trajectories.jsonl")
    assert len(trajectories) == 4
    searches = [c.result for tr in trajectories for c in tr.tool_calls if c.name == "kernel_search"]
    assert len(searches) == 3 and all("verified solution" in s for s in searches[:2])
    for result in searches:
        assert f"problem {RELU.id}" not in result and f"problem {SIGMOID.id}" not in result and EARLIER not in result
    # leaky relu's built-in reference is fair game; its benchmark-split solution (same problem, same score, and
    # first by the tie order) is not
    assert "problem L0_05_leaky_relu" in searches[1] and "builtin reference" in searches[1]
    # relu's correct answers joined the store on the benchmark split, never searched by training; sigmoid's correct
    # draft is its built-in reference as stored (the same text keeps its first provenance).
    store = SolutionStore(tmp_path / "solutions.sqlite")
    try:
        found = [r for r in store.records() if r.provenance.startswith("trajectory ")]
        assert {r.problem_id for r in found} == {RELU.id} and any("VARIANT = 1" in r.solution for r in found)
        assert not [r for r in store.records(exclude_splits=("benchmark",)) if r.provenance.startswith("trajectory ")]
    finally:
        store.close()
    md = (out / "bench.md").read_text()
    assert "## Trajectories (rollout.tools)" in md and "| L0_04_sigmoid | 0 | 2 |" in md
    assert list((out / "wandb").glob("offline-run-*"))
    # every turn's prompt went out with the tool offer appended to the benchmark's own system prompt
    assert all("<tools>" in r.messages[0]["content"] for r in engine.requests)


def test_the_command_line_refuses_what_tools_mode_cannot_do(tmp_path):
    env = {**os.environ, "WANDB_MODE": "disabled", "PYTHONPATH": str(ROOT)}

    def bench(*overrides):
        return subprocess.run(
            [
                sys.executable,
                str(ROOT / "scripts" / "benchmark.py"),
                "eval.device=cpu",
                f"hydra.run.dir={tmp_path}",
                *overrides,
            ],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
            timeout=120,
        )

    for overrides, message in [
        (["policy=files", f"policy.dir={tmp_path}", "rollout.tools=[kernel_evaluator]"], "needs a model"),
        (["policy=tiny_random", "attempts=3", "rollout.tools=[kernel_evaluator]"], "max_turns"),
        (["policy=tiny_random", "rollout.tools=[kernel_evaluatr]"], "kernel_evaluatr"),
    ]:
        result = bench(*overrides)
        assert result.returncode == 2 and message in result.stderr, (overrides, result.stderr[-1500:])
