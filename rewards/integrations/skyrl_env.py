"""KernelRL's evaluation as a SkyRL-gym text environment (skyrl_gym.envs.base_text_env.BaseTextEnv).

SkyRL builds one environment per trajectory as `EnvClass(env_config, extras)`: `env_config` is the environment's
section of the trainer config (here: url, delta, timeout, max_turns, token_env), `extras` the dataset row
(`reward_spec.ground_truth` and/or `extra_info.problem_id` name the problem). Each `step(answer)` evaluates the
answer through the service and returns the reward of its verdict (rewards/kernel_reward.py). With
`max_turns` > 1 an answer that is not correct is answered with the verdict's error as the next user message,
so the policy can fix it; the episode ends on a correct answer or at `max_turns`.

    from rewards.integrations.skyrl_env import register
    register()            # skyrl_gym id "kernelrl"; rows then say  env_class: kernelrl

Example: conf/integrations/skyrl.yaml.
"""

from __future__ import annotations

import os
from typing import Any, Mapping

from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput

from envs.service.client import TOKEN_ENV, URL_ENV
from envs.verdict import Verdict
from rewards.integrations.common import KernelRewardScorer, problem_ref
from rewards.kernel_reward import DEFAULT_DELTA

__all__ = ["ENV_ID", "KernelRLEnv", "feedback", "register"]

ENV_ID = "kernelrl"
_scorers: dict[tuple, KernelRewardScorer] = {}


def _get(config: Any, key: str, default: Any) -> Any:
    if config is None:
        return default
    value = config.get(key, default) if hasattr(config, "get") else getattr(config, key, default)
    return default if value is None else value


def feedback(verdict: Verdict) -> str:
    """The next turn's user message after an answer that was not correct."""
    text = f"Your kernel was evaluated: {verdict.status.value}."
    if verdict.hack is not None:
        text += f" It was rejected as a reward hack ({verdict.hack.category}): {verdict.hack.reason}"
    elif verdict.error:
        text += f"\n\n{verdict.error.strip()[:4000]}"
    return text + "\n\nFix the problem and answer with the complete corrected code in one ```python block."


class KernelRLEnv(BaseTextEnv):
    def __init__(self, env_config: Any = None, extras: Mapping[str, Any] | None = None):
        super().__init__()
        extras = extras or {}
        reward_spec = extras.get("reward_spec") or {}
        self.problem_id, self.problem_sha256 = problem_ref(reward_spec.get("ground_truth"), extras.get("extra_info"))
        self.max_turns = int(extras.get("max_turns") or _get(env_config, "max_turns", 1))
        if self.max_turns < 1:
            raise ValueError("max_turns must be >= 1")
        key = (
            _get(env_config, "url", None),
            float(_get(env_config, "delta", DEFAULT_DELTA)),
            float(_get(env_config, "timeout", 600.0)),
            _get(env_config, "token_env", TOKEN_ENV),
        )
        # One scorer (one connection pool) per configuration, shared by the episodes; the environment's URL and
        # token are part of the configuration (they are read when the scorer is made).
        cache_key = (*key, os.environ.get(URL_ENV), os.environ.get(key[3]))
        if cache_key not in _scorers:
            _scorers[cache_key] = KernelRewardScorer(key[0], delta=key[1], timeout=key[2], token_env=key[3])
        self.scorer = _scorers[cache_key]
        self.verdicts: list[Verdict] = []
        self.rewards: list[float] = []

    def step(self, action: str) -> BaseTextEnvStepOutput:
        self.turns += 1
        scored = self.scorer.score(self.problem_id, action, self.problem_sha256)
        self.verdicts.append(scored.verdict)
        self.rewards.append(scored.reward)
        done = scored.verdict.correct or self.turns >= self.max_turns
        observations = [] if done else [{"role": "user", "content": feedback(scored.verdict)}]
        v = scored.verdict
        metadata = {
            "problem_id": self.problem_id,
            "status": v.status.value,
            "correct": v.correct,
            "speedup": v.speedup,
            "cached": v.cached,
            "turn": self.turns,
        }
        return BaseTextEnvStepOutput(observations=observations, reward=scored.reward, done=done, metadata=metadata)

    def get_metrics(self) -> dict[str, Any]:
        if not self.verdicts:
            return {}
        return {"correct": float(self.verdicts[-1].correct), "turns": self.turns, "reward": self.rewards[-1]}


def register(env_id: str = ENV_ID) -> None:
    """Register KernelRLEnv with skyrl_gym under `env_id` (once; a second call is a no-op)."""
    from skyrl_gym.envs.registration import register as skyrl_register, registry

    if env_id not in registry:
        skyrl_register(id=env_id, entry_point=f"{__name__}:KernelRLEnv")
