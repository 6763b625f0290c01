"""The warm-start stage: verified synthetic pairs -> SFT (rl.sft) -> a merged model the RL run starts from.

    model_dir = warm_started_model(config, base_dir, prompts)    # cached; built on first use

1. The synthetic solved problems (rl.warmstart.solved_problems) are judged by the run's own evaluator settings;
   only pairs judged correct are kept (the count and every rejection are logged and recorded).
2. Each kept pair becomes an SFT example rendered exactly like the RL prompts (the run's PromptBuilder:
   same system rules, same one-shot retrieval, same chat template), answered in the example-answer format.
3. rl.sft trains a LoRA adapter on the completions and merges it; the merged directory lands in the model
   cache under a name derived from everything that shaped it (base model, examples, SFT settings), so a
   changed recipe never reuses a stale model and an unchanged one is built once.

The RL learner then trains its own LoRA adapter on top of the merged warm-start weights.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import time
from pathlib import Path
from typing import Any, Mapping

from envs.problems import parse_problem
from envs.settings import reject_unknown
from rl.warmstart.solved_problems import CONTAMINATION_NOTE, synthetic_solved

__all__ = [
    "WarmStartConfig",
    "candidate_examples",
    "fingerprint",
    "start_model",
    "train_adapter",
    "verified_examples",
    "warm_started_model",
]

log = logging.getLogger("kernelrl.warmstart")
RECORD = "warmstart.json"  # beside the merged weights: what was trained on and how it went


@dataclasses.dataclass(frozen=True)
class WarmStartConfig:
    enabled: bool = False
    seed: int = 0  # draws sizes/blocks of the synthetic set, and the SFT order
    epochs: int = 3
    batch_size: int = 4
    lr: float = 3e-4
    lora_r: int = 16
    lora_alpha: float = 32.0
    max_length: int = 4096

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.batch_size < 1 or self.lr <= 0 or self.lora_r < 1:
            raise ValueError("warm_start needs epochs >= 1, batch_size >= 1, lr > 0 and lora_r >= 1")

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any] | None) -> WarmStartConfig:
        m = dict(m or {})
        reject_unknown(cls, m, "warm_start")
        return cls(**m)


def candidate_examples(prompts: Any, seed: int) -> list[tuple[Any, Any]]:
    """(problem, SFT example) for every synthetic pair, rendered like the RL prompts (not yet verified)."""
    from rl.sft import SFTExample

    out = []
    for pair in synthetic_solved(seed):
        problem = parse_problem(pair.source, pair.problem_id)
        out.append(
            (
                problem,
                SFTExample(
                    messages=prompts.build(problem).messages, completion=prompts.answer(pair.problem_id, pair.solution)
                ),
            )
        )
    return out


def verified_examples(candidates: list[tuple[Any, Any]], eval_settings: Any) -> tuple[list[Any], dict[str, Any]]:
    """The examples whose answer the evaluator judges correct, and a record of the selection."""
    from envs.evaluator import Evaluator

    start = time.perf_counter()
    with Evaluator(eval_settings) as evaluator:
        verdicts = evaluator.evaluate_many(
            [(p, e.completion) for p, e in candidates], progress=True, desc="warm start: verifying"
        )
    examples, rejected = [], {}
    for (problem, example), verdict in zip(candidates, verdicts):
        if verdict.correct:
            examples.append(example)
        else:
            rejected[problem.id] = f"{verdict.status.value}: {(verdict.error or '')[:200]}"
            log.warning("warm start: synthetic pair %s rejected (%s)", problem.id, rejected[problem.id])
    record = {
        "synthetic": len(candidates),
        "kept": len(examples),
        "rejected": rejected,
        "verify_seconds": round(time.perf_counter() - start, 1),
        "decontamination": CONTAMINATION_NOTE,
    }
    return examples, record


# Written into config.json by whichever transformers converted the model, not part of the model: the H200's
# transformers 5.17 and the CI VM's 5.19 gave the same SmolLM2 two fingerprints, so the GPU recipe rebuilt the
# shipped adapter (80 s) although nothing that shapes it differed.
_CONVERTER_KEYS = ("transformers_version",)


def _model_config_digest(base_dir: Path) -> str:
    config = json.loads((base_dir / "config.json").read_text())
    for key in _CONVERTER_KEYS:
        config.pop(key, None)
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()


def fingerprint(base_dir: Path, examples: list[Any], config: WarmStartConfig) -> str:
    """What shapes the warm start, the same on every machine: the base model's name (rl.models.model_reference,
    not this machine's path) and config, the SFT settings and every rendered example."""
    from rl.models import model_reference

    h = hashlib.sha256()
    h.update(
        json.dumps(
            {
                "base": model_reference(base_dir),
                "base_config": _model_config_digest(base_dir),
                "sft": dataclasses.asdict(config),
                "examples": [dataclasses.asdict(e) for e in examples],
            },
            sort_keys=True,
        ).encode()
    )
    return h.hexdigest()[:12]


def train_adapter(
    config: WarmStartConfig,
    base_dir: Path,
    candidates: list[tuple[Any, Any]],
    eval_settings: Any,
    learner: Mapping[str, Any] | None,
    out: Path,
    export: str,
) -> dict[str, Any]:
    """Verify the candidates, SFT on the kept ones and write the result (`export`: merged or lora) to `out`;
    returns the record (verification, losses, settings)."""
    from rl.learner.config import LoraSettings, OptimizerSettings, PolicyConfig
    from rl.sft import SFTConfig, run_sft

    learner = dict(learner or {})
    policy = PolicyConfig(
        model=str(base_dir),
        finetune="lora",
        dtype=learner.get("dtype", "float32"),
        device=learner.get("device", "auto"),
        seed=config.seed,
        micro_batch_tokens=int(learner.get("micro_batch_tokens", PolicyConfig.micro_batch_tokens)),
        lora=LoraSettings(r=config.lora_r, alpha=config.lora_alpha),
        optimizer=OptimizerSettings(lr=config.lr),
    )
    sft = SFTConfig(
        epochs=config.epochs,
        batch_size=config.batch_size,
        max_length=config.max_length,
        export=export,
        seed=config.seed,
    )
    examples, record = verified_examples(candidates, eval_settings)
    if not examples:
        raise RuntimeError(f"warm start: the evaluator rejected every synthetic pair: {record['rejected']}")
    log.info("warm start: SFT on %d verified synthetic pairs, %d epochs", len(examples), config.epochs)
    result = run_sft(policy, examples, str(out), sft)
    log.info(
        "warm start: loss per epoch %s, %.0f s",
        [round(e["loss"], 3) for e in result["epochs"]],
        result["train_seconds"],
    )
    return {**record, "sft": result, "config": dataclasses.asdict(config)}


def warm_started_model(
    config: WarmStartConfig, base_dir: Path, prompts: Any, eval_settings: Any, learner: Mapping[str, Any] | None = None
) -> Path:
    """The merged warm-start model for `base_dir`, cached: merged from the shipped adapter when its fingerprint
    is this recipe's (rl.warmstart.artifact), else built by SFT on first use."""
    from rl.models import cache_root, cached_model
    from rl.warmstart import shipped as ship

    candidates = candidate_examples(prompts, config.seed)
    # named by what shapes it before verification, so that a cached model costs no evaluation at start
    recipe = fingerprint(base_dir, [e for _, e in candidates], config)
    name = f"{base_dir.name}-warmstart-{recipe}"
    cached = cache_root() / name
    if (cached / "config.json").is_file():
        log.info("warm start: cached model %s", cached)
        return cached
    shipped = ship.shipped_adapter(recipe)
    if shipped is not None:
        log.info("warm start: merging the shipped adapter %s (fingerprint %s) into %s", shipped, recipe, base_dir.name)

        def merge(out: Path) -> None:
            ship.merge_adapter(base_dir, shipped, out)
            record = {**(ship.read_manifest(shipped) or {}), "source": f"shipped adapter {shipped}"}
            (out / RECORD).write_text(json.dumps(record, indent=2))

        return cached_model(name, merge)

    def build(out: Path) -> None:
        record = train_adapter(config, base_dir, candidates, eval_settings, learner, out, "merged")
        record["sft"]["output"] = name
        (out / RECORD).write_text(json.dumps({**record, "source": "built here", "fingerprint": recipe}, indent=2))

    return cached_model(name, build)


def start_model(
    model: str, config: WarmStartConfig, prompts: Any, eval_settings: Any, learner: Mapping[str, Any] | None = None
) -> Path:
    """The local model a policy starts from, the same for a training run and a benchmark: `model` resolved
    (rl.models: SmolLM2's GGUF converted and cached), then warm-started when `config.enabled`."""
    from rl.models import resolve_model

    base = resolve_model(model)
    if not config.enabled:
        return base
    return warm_started_model(config, base, prompts, eval_settings, learner=learner)
