#!/usr/bin/env python
"""Curate training problems (envs.data.pipeline): crawled nn.Modules, synthetic fusion problems and directories
of KernelBench-format files, normalized, validated by running, decontaminated against the evaluation sets,
deduplicated, rated L0-L5, timed on a GPU, clustered; written as a problem-set directory with manifest.jsonl,
rejected.jsonl, decisions.jsonl and the funnel (funnel.md).

  python scripts/curate.py output=data/curated
  python scripts/curate.py sources=[path/to/dir] decontaminate=[path/to/KernelBench,builtin] output=DIR
  python scripts/curate.py crawl.enabled=false synthetic.count=50 skip=[cluster] output=/tmp/small
Train on the result: python scripts/train.py data=curated data.problems=DIR
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from envs.data.output import OutputError
from envs.data.pipeline import CurateConfig, run_pipeline

# absolute, so Hydra finds the configs whether this runs as a file or as an installed command
CONF = Path(__file__).resolve().parents[1] / "conf"

log = logging.getLogger("kernelrl")


@hydra.main(config_path=str(CONF / "curate"), config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> None:
    mapping = OmegaConf.to_container(cfg, resolve=True)
    mapping.pop("hydra", None)
    try:
        config = CurateConfig.from_mapping(mapping)
        report = run_pipeline(config)
    except (ValueError, OutputError) as e:
        raise SystemExit(f"curate: {e}") from None
    print((report.output / "funnel.md").read_text())
    print(json.dumps({"output": str(report.output), "kept": report.kept, "seconds": report.funnel["seconds"]}))


if __name__ == "__main__":
    main()
