"""Typed settings of the learner: the algorithm (advantages + loss) and the policy (model, LoRA, optimizer).

Both are built from Hydra mappings (`conf/algorithm/*.yaml`, `conf/policy/*.yaml`) with `from_mapping`,
which refuses unknown keys. The published recipes' values live in conf/algorithm/<name>.yaml alone (so
`train.py --cfg job` shows them); Python keeps the field defaults and the checks. A mapping that leaves
fields out (`from_mapping({"name": "dapo"})` from Python) gets them from the YAML preset its `name` names
(`preset`). Every option, its formula and its source is in docs/algorithms.md.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Any, Literal

from envs.settings import reject_unknown

AdvantageKind = Literal["grpo", "dr_grpo", "rloo", "gae"]
LossAggregation = Literal["token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm"]
KLEstimator = Literal["k1", "k3"]
OldLogprobs = Literal["recompute", "rollout"]

_ADVANTAGES = ("grpo", "dr_grpo", "rloo", "gae")
_AGGREGATIONS = ("token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm")
_ESTIMATORS = ("k1", "k3")


@dataclasses.dataclass(frozen=True)
class PPOSettings:
    """PPO's critic (advantage=gae): a value head on the policy's last hidden state, trained with its own
    AdamW. Formulas and sources: docs/algorithms.md (PPO); code: rl.learner.ppo."""

    gamma: float = 1.0  # discount over completion tokens (1: the outcome reward undiscounted, as verl's default)
    lam: float = 0.95  # GAE's lambda: 0 = one-step TD, 1 = Monte Carlo returns
    vf_coef: float = 0.5  # weight of the value loss in the loss the backbone sees
    value_clip: float | None = 0.2  # value predictions clipped to old +- this (null: unclipped)
    value_lr: float = 1e-4  # the value head's own optimizer (AdamW, the policy's schedule)
    whiten_advantages: bool = True  # advantages shifted/scaled to mean 0, std 1 over the batch's tokens

    def __post_init__(self) -> None:
        if not (0 <= self.gamma <= 1 and 0 <= self.lam <= 1):
            raise ValueError("ppo.gamma and ppo.lam must be in [0, 1]")
        if self.vf_coef < 0 or self.value_lr <= 0:
            raise ValueError("ppo.vf_coef must be >= 0 and ppo.value_lr > 0")
        if self.value_clip is not None and self.value_clip <= 0:
            raise ValueError("ppo.value_clip must be > 0 or null")


@dataclasses.dataclass(frozen=True)
class AlgorithmConfig:
    name: str = "grpo"  # a label for logs; from_mapping also takes the preset defaults from it
    advantage: AdvantageKind = "grpo"
    std_eps: float = 1e-6  # grpo: (r - mean) / (std + std_eps)
    clip_eps_low: float = 0.2  # ratio clipped to [1 - clip_eps_low, 1 + clip_eps_high]
    clip_eps_high: float = 0.2  # DAPO's clip-higher: 0.28
    loss_aggregation: LossAggregation = "seq_mean_token_mean"
    # seq_mean_token_sum_norm (Dr. GRPO) divides each sequence's token sum by this constant;
    # None: the rollout's max_tokens, which the loop fills in (Dr. GRPO's "generation budget").
    loss_max_tokens: int | None = None
    kl_coef: float = 0.0  # 0: no reference forward pass at all
    kl_estimator: KLEstimator = "k3"
    entropy_coef: float = 0.0  # bonus: loss -= entropy_coef * entropy
    tis_cap: float | None = 2.0  # truncated importance sampling cap C; None: off (rollout logprobs ignored)
    temperature: float = 1.0  # logits / temperature before log-softmax: must equal the rollout's
    ppo_epochs: int = 1  # passes over each batch
    mini_batches: int = 1  # optimizer steps per pass (the batch split into this many shuffled parts)
    # Where π_old of the clipped ratio comes from when a batch gets several updates: `recompute` (a no-grad
    # pass of the learner before the first update) or `rollout` (the engine's logprobs of the sampled
    # tokens, saving that pass; only where engine and trainer agree, e.g. fp32 on CPU: docs/algorithms.md).
    old_logprobs: OldLogprobs = "recompute"
    dynamic_sampling: bool = False  # DAPO: drop groups whose rewards are all equal; the loop refills the batch
    ppo: PPOSettings = PPOSettings()  # used when advantage=gae (algorithm=ppo)

    def __post_init__(self) -> None:
        if self.advantage not in _ADVANTAGES:
            raise ValueError(f"advantage must be one of {_ADVANTAGES}, not {self.advantage!r}")
        if self.loss_aggregation not in _AGGREGATIONS:
            raise ValueError(f"loss_aggregation must be one of {_AGGREGATIONS}, not {self.loss_aggregation!r}")
        if self.kl_estimator not in _ESTIMATORS:
            raise ValueError(f"kl_estimator must be one of {_ESTIMATORS}, not {self.kl_estimator!r}")
        if not (0 <= self.clip_eps_low < 1) or self.clip_eps_high < 0:
            raise ValueError("clip_eps_low must be in [0, 1) and clip_eps_high >= 0")
        if self.tis_cap is not None and self.tis_cap <= 0:
            raise ValueError("tis_cap must be > 0 (or null to turn truncated importance sampling off)")
        if self.temperature <= 0:
            raise ValueError("temperature must be > 0")
        if self.ppo_epochs < 1 or self.mini_batches < 1:
            raise ValueError("ppo_epochs and mini_batches must be >= 1")
        if self.loss_max_tokens is not None and self.loss_max_tokens < 1:
            raise ValueError("loss_max_tokens must be >= 1")
        if self.kl_coef < 0:
            raise ValueError("kl_coef must be >= 0")
        if self.old_logprobs not in ("recompute", "rollout"):
            raise ValueError(f"old_logprobs must be recompute or rollout, not {self.old_logprobs!r}")
        if self.old_logprobs == "rollout" and self.advantage == "gae":
            raise ValueError("old_logprobs=rollout needs no critic: PPO's old values need the learner's pass anyway")

    @property
    def uses_critic(self) -> bool:
        return self.advantage == "gae"

    @property
    def updates_per_batch(self) -> int:
        return self.ppo_epochs * self.mini_batches

    @classmethod
    def from_mapping(cls, m: dict[str, Any]) -> AlgorithmConfig:
        """`m` over the preset `m["name"]` names (conf/algorithm/<name>.yaml): a composed Hydra group lists
        every field already; a partial mapping from Python gets the rest from the YAML."""
        m = dict(m)
        reject_unknown(cls, m, "algorithm")
        name = m.get("name", "grpo")
        if name not in PRESET_NAMES:
            raise ValueError(f"unknown algorithm {name!r}; known: {sorted(PRESET_NAMES)}")
        if not _FIELDS <= set(m):  # the YAML is read only for what the mapping leaves out
            preset = preset_mapping(name)
            if isinstance(m.get("ppo"), dict):
                m["ppo"] = {**preset.get("ppo", {}), **m["ppo"]}
            m = {**preset, **m}
        if isinstance(m.get("ppo"), dict):
            ppo = dict(m["ppo"])
            reject_unknown(PPOSettings, ppo, "algorithm.ppo")
            m["ppo"] = PPOSettings(**ppo)
        return cls(**m)


# The published recipes (values and sources: conf/algorithm/<name>.yaml, docs/algorithms.md)
PRESET_DIR = Path(__file__).resolve().parents[2] / "conf" / "algorithm"
PRESET_NAMES = ("grpo", "dr_grpo", "dapo", "rloo", "ppo")
_FIELDS = {f.name for f in dataclasses.fields(AlgorithmConfig)}


@functools.lru_cache(maxsize=None)
def _load_preset(name: str) -> dict[str, Any]:
    import yaml

    path = PRESET_DIR / f"{name}.yaml"
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"algorithm preset {name!r}: {path} is missing") from None
    if not isinstance(data, dict) or data.get("name") != name or "defaults" in data:
        raise ValueError(f"{path}: a preset file is a plain mapping whose name is {name!r}")
    reject_unknown(AlgorithmConfig, dict(data), f"algorithm ({path.name})")
    return data


def preset_mapping(name: str) -> dict[str, Any]:
    """The values of conf/algorithm/<name>.yaml (a copy), for a known preset name."""
    if name not in PRESET_NAMES:
        raise ValueError(f"unknown algorithm {name!r}; known: {sorted(PRESET_NAMES)}")
    data = _load_preset(name)
    return {**data, "ppo": dict(data.get("ppo") or {})}


def preset(name: str, **overrides: Any) -> AlgorithmConfig:
    """A published recipe as conf/algorithm/<name>.yaml gives it, with `overrides` on top."""
    return AlgorithmConfig.from_mapping({"name": name, **overrides})


@dataclasses.dataclass(frozen=True)
class LoraSettings:
    r: int = 8
    alpha: float = 16.0
    dropout: float = 0.0
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")

    def __post_init__(self) -> None:
        if self.r < 1 or self.alpha <= 0 or not (0 <= self.dropout < 1):
            raise ValueError("lora needs r >= 1, alpha > 0 and dropout in [0, 1)")
        if not self.target_modules:
            raise ValueError("lora.target_modules must name at least one module")

    @classmethod
    def from_mapping(cls, m: dict[str, Any]) -> LoraSettings:
        m = dict(m)
        reject_unknown(cls, m, "lora")
        if "target_modules" in m:
            m["target_modules"] = tuple(m["target_modules"])
        return cls(**m)


@dataclasses.dataclass(frozen=True)
class OptimizerSettings:
    lr: float = 1e-5
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0
    max_grad_norm: float | None = 1.0  # None: no clipping (the norm is still measured and logged)
    schedule: Literal["constant", "cosine"] = "constant"
    warmup_steps: int = 0  # linear warm-up from 0 (both schedules)
    total_steps: int | None = None  # cosine: the step at which lr reaches min_lr_ratio * lr (required)
    min_lr_ratio: float = 0.0

    def __post_init__(self) -> None:
        if self.lr <= 0 or self.warmup_steps < 0:
            raise ValueError("optimizer.lr must be > 0 and warmup_steps >= 0")
        if self.schedule not in ("constant", "cosine"):
            raise ValueError(f"optimizer.schedule must be constant or cosine, not {self.schedule!r}")
        if self.schedule == "cosine" and (self.total_steps is None or self.total_steps <= self.warmup_steps):
            raise ValueError("optimizer.schedule=cosine needs total_steps > warmup_steps")
        if self.max_grad_norm is not None and self.max_grad_norm <= 0:
            raise ValueError("optimizer.max_grad_norm must be > 0 or null")

    @classmethod
    def from_mapping(cls, m: dict[str, Any]) -> OptimizerSettings:
        m = dict(m)
        reject_unknown(cls, m, "optimizer")
        if "betas" in m:
            m["betas"] = tuple(m["betas"])
        return cls(**m)


@dataclasses.dataclass(frozen=True)
class ActorSettings:
    """Ray resources of the learner actor."""

    num_cpus: float = 1.0  # Ray also sets OMP_NUM_THREADS (torch's CPU threads) from it
    num_gpus: float | None = None  # None: 1 when CUDA is available, else 0


@dataclasses.dataclass(frozen=True)
class PolicyConfig:
    model: str = ""  # a local HF model directory (rl.models resolves names like SmolLM2's GGUF to one)
    finetune: Literal["lora", "full"] = "lora"
    lora: LoraSettings = LoraSettings()
    optimizer: OptimizerSettings = OptimizerSettings()
    dtype: Literal["float32", "bfloat16"] = "float32"
    device: Literal["auto", "cpu", "cuda"] = "auto"
    gradient_checkpointing: bool = False
    # torch.compile each decoder layer's forward and the chunked log-softmax (rl.learner.compiled): fused
    # elementwise work on a GPU; the first train step pays the compile (tens of seconds)
    compile: bool = False
    micro_batch_tokens: int = 8192  # token budget of one packed forward/backward (sequences are never split)
    logprob_chunk_tokens: int = 1024  # lm_head + log-softmax over this many positions at a time
    attn_implementation: str = "sdpa"  # flash_attention_2 / flex_attention make packing free (varlen)
    # micro-batch layout; auto: packed iff varlen attention. prefix: rows sharing a prompt (a GRPO group) run it
    # once and attend to its KV cache (the rest padded): P + rows * C tokens instead of rows * (P + C), same
    # gradients (rl.learner.logprobs; not with gradient_checkpointing, compile or world_size > 1)
    layout: Literal["auto", "packed", "padded", "prefix"] = "auto"
    seed: int = 0
    actor: ActorSettings = ActorSettings()
    # Learner group (rl.learner.group): world_size FSDP2 ranks, one Ray actor each; 1 keeps the single
    # Policy (today's path). Each rank gets actor.num_gpus GPUs of its own placement-group bundle.
    world_size: int = 1
    cpu_offload: bool = False  # FSDP2 CPUOffloadPolicy: sharded parameters, gradients and AdamW state on the host
    placement: Literal["pack", "spread"] = "pack"  # the group's bundles: PACK (one node when it fits) or SPREAD

    def __post_init__(self) -> None:
        if self.world_size < 1:
            raise ValueError("policy.world_size must be >= 1")
        if self.placement not in ("pack", "spread"):
            raise ValueError(f"policy.placement must be pack or spread, not {self.placement!r}")
        if self.finetune not in ("lora", "full"):
            raise ValueError(f"policy.finetune must be lora or full, not {self.finetune!r}")
        if self.dtype not in ("float32", "bfloat16"):
            raise ValueError(f"policy.dtype must be float32 or bfloat16, not {self.dtype!r}")
        if self.device not in ("auto", "cpu", "cuda"):
            raise ValueError(f"policy.device must be auto, cpu or cuda, not {self.device!r}")
        if self.layout not in ("auto", "packed", "padded", "prefix"):
            raise ValueError(f"policy.layout must be auto, packed, padded or prefix, not {self.layout!r}")
        if self.layout == "prefix":
            # transformers' checkpointed layers drop the KV cache the rows attend to; the compiled layers and the
            # FSDP2 ranks are untested with a cache (docs/learner.md)
            for name, on in (
                ("gradient_checkpointing", self.gradient_checkpointing),
                ("compile", self.compile),
                ("world_size > 1", self.world_size > 1),
            ):
                if on:
                    raise ValueError(f"policy.layout=prefix does not support {name}: use layout padded or auto")
        if self.micro_batch_tokens < 1 or self.logprob_chunk_tokens < 1:
            raise ValueError("micro_batch_tokens and logprob_chunk_tokens must be >= 1")

    @classmethod
    def from_mapping(cls, m: dict[str, Any]) -> PolicyConfig:
        m = dict(m)
        reject_unknown(cls, m, "policy")
        nested = {
            "lora": LoraSettings.from_mapping,
            "optimizer": OptimizerSettings.from_mapping,
            "actor": _actor_from_mapping,
        }
        for key, build in nested.items():
            if key in m:
                m[key] = build(m[key] or {})
        return cls(**m)


def _actor_from_mapping(m: dict[str, Any]) -> ActorSettings:
    m = dict(m)
    reject_unknown(ActorSettings, m, "policy.actor")
    return ActorSettings(**m)
