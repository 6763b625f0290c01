"""Tools mode's configuration in training and in the benchmark: the same keys (`rollout.tools`,
`rollout.trajectory.*`) with the same defaults, built by the same function (rl.config.trajectory_config), and the
clear errors for what a mode cannot do. Composition only: nothing starts."""

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from rl.bench.main import BenchmarkError, trajectory_settings
from rl.config import ConfigError, RunConfig
from rl.rollout.trajectory import TrajectoryConfig
from tests.conftest import ROOT

TOOLS = "rollout.tools=[kernel_evaluator,kernel_search]"


def _compose(name, *overrides):
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return OmegaConf.to_container(compose(name, overrides=list(overrides)), resolve=True)


def _hydra(*overrides):
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose("config", overrides=list(overrides))


def test_the_benchmark_reads_the_training_keys_with_the_same_defaults():
    bench = _compose("benchmark")["rollout"]
    train = _compose("config", "rollout=default")["rollout"]
    assert bench["tools"] == train["tools"] == [] and bench["trajectory"] == train["trajectory"]
    assert TrajectoryConfig.from_mapping({**bench["trajectory"], "tools": ["kernel_search"]}) == TrajectoryConfig(
        tools=("kernel_search",), layout="concat"
    )  # the YAML restates the dataclass's defaults


def test_benchmark_trajectory_settings():
    assert trajectory_settings(_compose("benchmark", "policy=tiny_random")) is None  # no tools: refinement mode
    local = trajectory_settings(_compose("benchmark", "policy=tiny_random", TOOLS, "rollout.trajectory.max_turns=2"))
    assert local.tools == ("kernel_evaluator", "kernel_search") and local.max_turns == 2
    assert local.max_context_tokens == 4096 and local.tool_format == "auto"  # the engine's max_model_len
    api = trajectory_settings(_compose("benchmark", "policy=gpt5", TOOLS))
    assert api.tool_format == "native" and api.max_context_tokens is None  # as training builds it for API models
    for overrides, message in [
        (["policy=files", "policy.dir=/tmp", TOOLS], "needs a model"),
        (["policy=tiny_random", "attempts=3", TOOLS], "max_turns, not attempts"),
        (["policy=tiny_random", "rollout.tools=[kernel_evaluatr]"], "kernel_evaluatr"),
        (["policy=tiny_random", TOOLS, "+rollout.trajectory.max_turnz=2"], "max_turnz"),
        (["policy=tiny_random", TOOLS, "+rollout.n=4"], "unknown keys"),
    ]:
        with pytest.raises(BenchmarkError, match=message):
            trajectory_settings(_compose("benchmark", *overrides))


def test_train_with_tools_and_ppo_composes():
    # the default run samples at 0.7 and the ppo preset's learner scores at 1.0: refused, with the fix named
    with pytest.raises(ConfigError, match=r"set rollout.temperature=1.0 or algorithm.temperature=0.7"):
        RunConfig.from_hydra(_hydra("loop.steps=1", TOOLS, "algorithm=ppo", "policy=tiny_random"))
    run = RunConfig.from_hydra(
        _hydra("loop.steps=1", TOOLS, "algorithm=ppo", "policy=tiny_random", "rollout.temperature=1.0")
    )
    assert run.algorithm.uses_critic and run.trajectory.tools == ("kernel_evaluator", "kernel_search")
    assert run.trajectory.max_turns == 3 and run.trajectory.layout == "concat"  # conf/rollout/local_cpu.yaml
    per_turn = RunConfig.from_hydra(
        _hydra(
            TOOLS,
            "algorithm=ppo",
            "policy=tiny_random",
            "rollout.temperature=1.0",
            "rollout.trajectory.reward_mode=discounted",
        )
    )
    assert per_turn.trajectory.layout == "per_turn"  # Kevin's per-turn returns: each turn a row, PPO per row
