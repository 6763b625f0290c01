"""The shipped warm-start adapter: the default run's SFT, built once by the project and checked on every use.

    python -m rl.warmstart.artifact build [hydra overrides]   # rebuild rl/warmstart/adapter/ (~8 min on 2 cores)
    python -m rl.warmstart.artifact check [hydra overrides]   # its fingerprint against the recipe now; exit 1 if stale

The warm start (rl.warmstart.stage) is a LoRA SFT that took 6 of the default run's 17 minutes on 2 cores the first
time it ran; a cheaper one (1 epoch at batch 1, session 17) left the model without a single correct training
answer in 6 steps, so nothing to learn from. The adapter is therefore built by the project and shipped in
rl/warmstart/adapter/ (float16 safetensors, 9.8 MB: r=16 on every linear layer of the 135M model), with
manifest.json recording:

- `fingerprint`: rl.warmstart.stage.fingerprint of what shaped it (base model name and config, SFT settings,
  every rendered example). A run uses the adapter only when its own recipe has the same fingerprint; a changed
  recipe (prompts, synthetic pairs, settings) gets a warning naming the rebuild command and builds its own, as
  before. tests/unit/test_warmstart_artifact.py fails while the shipped adapter is stale.
- `sha256` of adapter_model.safetensors: a file that does not match is never used.
- the build's verification record and loss per epoch.

Merging it into the converted base model (peft's merge, float32) takes seconds and is cached like a built one.
The run-time half (the checks and the merge) is rl.warmstart.shipped.
"""

from __future__ import annotations

import json
import logging
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from rl.warmstart.shipped import (
    ADAPTER_DIR,
    MANIFEST,
    REBUILD,
    WEIGHTS,
    merge_adapter,
    read_manifest,
    sha256,
    shipped_adapter,
)

__all__ = [
    "ADAPTER_DIR",
    "MANIFEST",
    "REBUILD",
    "WEIGHTS",
    "build",
    "check",
    "merge_adapter",
    "read_manifest",
    "sha256",
    "shipped_adapter",
]


def _default_run(overrides: list[str]) -> tuple[Any, Path, Any, list[tuple[Any, Any]], str]:
    """The default run's config (conf/config.yaml + overrides), base model, prompts, candidates, fingerprint."""
    from hydra import compose, initialize_config_dir

    from rl.components import build_prompts
    from rl.config import RunConfig
    from rl.data import ProblemData
    from rl.models import resolve_model
    from rl.warmstart.stage import candidate_examples, fingerprint

    conf = Path(__file__).resolve().parents[2] / "conf"
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        run = RunConfig.from_hydra(compose("config", overrides=overrides))
    warm = run.policy.warm_start_config
    base = resolve_model(run.policy.model)
    prompts = build_prompts(run, ProblemData.load(run.data))
    candidates = candidate_examples(prompts, warm.seed)
    return run, base, warm, candidates, fingerprint(base, [e for _, e in candidates], warm)


def build(overrides: list[str], adapter_dir: Path = ADAPTER_DIR) -> dict[str, Any]:
    """SFT the default run's warm start as an adapter and write it, float16, with its manifest."""
    from dataclasses import asdict

    import torch
    from safetensors.torch import load_file, save_file

    from rl.models import model_reference
    from rl.warmstart.stage import train_adapter

    run, base, warm, candidates, recipe = _default_run(overrides)
    with tempfile.TemporaryDirectory() as tmp:
        record = train_adapter(warm, base, candidates, run.eval, run.policy.learner, Path(tmp), "lora")
        state = {k: v.to(dtype=torch.float16) for k, v in load_file(Path(tmp) / WEIGHTS).items()}
        config = json.loads((Path(tmp) / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = model_reference(base)  # a name, not this machine's path
    if isinstance(config.get("target_modules"), list):  # peft writes a set: the same build, the same file
        config["target_modules"] = sorted(config["target_modules"])
    adapter_dir.mkdir(parents=True, exist_ok=True)
    save_file(state, adapter_dir / WEIGHTS, metadata={"format": "pt"})
    (adapter_dir / "adapter_config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    record["sft"].pop("output", None)
    manifest = {
        "fingerprint": recipe,
        "sha256": sha256(adapter_dir / WEIGHTS),
        "dtype": "float16",
        "base": model_reference(base),
        "warm_start": asdict(warm),
        "rebuild": REBUILD,
        **record,
    }
    (adapter_dir / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def check(overrides: list[str], adapter_dir: Path = ADAPTER_DIR) -> tuple[bool, str]:
    """(usable, what was compared): the shipped adapter against the recipe the default run would use now."""
    *_, recipe = _default_run(overrides)
    manifest = read_manifest(adapter_dir) or {}
    ok = shipped_adapter(recipe, adapter_dir) is not None
    return ok, f"recipe {recipe}, shipped {manifest.get('fingerprint')} (sha256 {manifest.get('sha256', '-')[:12]})"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in ("build", "check"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if argv[0] == "build":
        tmp = ADAPTER_DIR.with_name(".adapter.build")
        shutil.rmtree(tmp, ignore_errors=True)
        manifest = build(argv[1:], tmp)
        shutil.rmtree(ADAPTER_DIR, ignore_errors=True)
        tmp.rename(ADAPTER_DIR)
        print(
            json.dumps(
                {k: manifest[k] for k in ("fingerprint", "sha256", "kept")}
                | {"loss_per_epoch": [round(e["loss"], 4) for e in manifest["sft"]["epochs"]]}
            )
        )
        return 0
    ok, text = check(argv[1:])
    print(("ok: " if ok else "stale or missing: ") + text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
