"""The example configs of docs/integrations.md (conf/integrations/) build what they say they configure."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf" / "integrations"


def test_verl_config_names_the_function():
    cfg = OmegaConf.load(CONF / "verl.yaml").custom_reward_function
    path = Path(cfg.path.replace("/path/to/kernelrl", str(ROOT)))
    assert path == ROOT / "rewards/integrations/verl_reward.py" and path.exists()
    from rewards.integrations import verl_reward

    assert callable(getattr(verl_reward, cfg.name))
    assert set(cfg.reward_kwargs) <= set(verl_reward.compute_score.__kwdefaults__)


def test_trl_config_builds_the_reward_and_grpo_config():
    cfg = OmegaConf.to_container(OmegaConf.load(CONF / "trl.yaml"))
    from rewards.integrations.trl_reward import KernelRLReward

    reward = KernelRLReward(**cfg["kernelrl"])
    assert reward.scorer.delta == 1.8 and reward.problem_id_column == "problem_id"
    trl = pytest.importorskip("trl", reason="pip install trl (the 'integrations' extra)")
    assert trl.GRPOConfig(**cfg["grpo"], use_cpu=True).num_generations == 8


def test_skyrl_config_builds_the_env():
    pytest.importorskip("skyrl_gym", reason="pip install skyrl-gym (the 'integrations' extra)")
    cfg = OmegaConf.load(CONF / "skyrl.yaml").environment
    from rewards.integrations.skyrl_env import ENV_ID, KernelRLEnv

    assert cfg.env_class == ENV_ID
    env = KernelRLEnv(cfg.skyrl_gym[cfg.env_class], {"reward_spec": {"ground_truth": "L1_01_gelu_tanh"}})
    assert env.max_turns == 1 and env.problem_id == "L1_01_gelu_tanh" and env.scorer.delta == 1.8
