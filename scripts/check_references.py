#!/usr/bin/env python
"""Evaluate the reference solutions of a problem set with the full environment (a check of the
environment itself: every reference must be `correct`). Prints a table of verdicts, writes
`verdicts.jsonl` to Hydra's output directory and exits 1 if any reference is not correct, 2 on a bad setting.

  python scripts/check_references.py                       # built-in set, cuda if available else cpu
  python scripts/check_references.py eval.device=cpu levels=[0,1]
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from envs import EvalSettings, Evaluator, ProblemError, load_problem_set
from envs.antihack.judge import LLMJudge
from envs.cache import SqliteCache
from envs.report import verdict_table
from rewards.kernel_reward import check_delta, reward_for_verdict

# absolute, so Hydra finds the configs whether this runs as a file or as an installed command
CONF = Path(__file__).resolve().parents[1] / "conf"

log = logging.getLogger("kernelrl")


@hydra.main(config_path=str(CONF), config_name="check_references", version_base="1.3")
def main(cfg: DictConfig) -> None:
    # A bad setting exits 2 with one line: exit 1 means that a reference is not correct.
    try:
        settings = EvalSettings.from_mapping(OmegaConf.to_container(cfg.eval, resolve=True))
        check_delta(cfg.delta)
        levels = list(cfg.levels) if cfg.levels is not None else None
        problems = [p for p in load_problem_set(cfg.problems, levels) if p.reference_solution]
        if not problems:
            raise ValueError(f"no problems with reference solutions in {cfg.problems!r} (levels={levels})")
        cache = SqliteCache(cfg.cache_path) if cfg.cache_path else None
        judge_cfg = OmegaConf.to_container(cfg.judge, resolve=True)
        judge = LLMJudge.from_mapping(judge_cfg) if judge_cfg.get("enabled") else None
    except (ValueError, ProblemError) as e:
        print(f"check_references: error: {e}", file=sys.stderr)
        sys.exit(2)
    out_dir = Path(hydra.core.hydra_config.HydraConfig.get().runtime.output_dir)
    log.info("evaluating %d reference solutions (%s) -> %s", len(problems), cfg.problems, out_dir)
    items = [(p, Path(p.reference_solution).read_text()) for p in problems]
    with Evaluator(settings, cache=cache, judge=judge) as evaluator:
        evaluator.validate_problems(problems)  # degenerate problems would reward trivial answers
        verdicts = evaluator.evaluate_many(items, progress=cfg.progress, desc="reference solutions")
    with open(out_dir / "verdicts.jsonl", "w") as f:
        for v in verdicts:
            f.write(json.dumps({**v.to_dict(), "reward": reward_for_verdict(v, cfg.delta)}) + "\n")
    print(verdict_table(problems, verdicts, lambda v: reward_for_verdict(v, cfg.delta)))
    n_ok = sum(v.correct for v in verdicts)
    print(f"\n{n_ok}/{len(verdicts)} correct on {verdicts[0].device}; verdicts in {out_dir / 'verdicts.jsonl'}")
    if n_ok != len(verdicts):
        sys.exit(1)


if __name__ == "__main__":
    main()
