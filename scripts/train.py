#!/usr/bin/env python
"""KernelRL's main job: train a policy with RL on the kernel environment.

  python scripts/train.py                                  # the default run (conf/experiment/local_cpu.yaml)
  python scripts/train.py +experiment=gpt5_triton          # the paper's recipe
  python scripts/train.py -m delta=1.2,1.5,1.8,2.1         # a sweep (one run directory per value)
  python scripts/train.py resume=outputs/2026-12-01/08-00-00   # continue a stopped run

Everything the config names is checked before Ray, vLLM or a model starts: a bad value, `+key`, model
path, problem set, resume path or a missing API key exits with code 2 and one clear line (what Hydra
cannot compose, an unknown choice or a key without `+`, exits 1 with Hydra's message). Outputs go
to Hydra's run directory: metrics.jsonl, summary.json, wandb/, checkpoints/, final_policy/.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rl.checkpoints import CheckpointError, find_checkpoint  # noqa: E402
from rl.config import ConfigError, RunConfig  # noqa: E402
from rl.data import DataError, ProblemData  # noqa: E402

log = logging.getLogger("kernelrl")


def check(cfg: DictConfig) -> tuple[RunConfig, ProblemData]:
    """The cheap checks, in the order a user would fix them."""
    from rl.prompts import PromptError

    try:
        run = RunConfig.from_hydra(cfg)
        data = ProblemData.load(run.data)
        if run.resume:
            find_checkpoint(run.resume)
        from rl.components import build_prompts

        prompts = build_prompts(run, data)  # templates compile, the one-shot store is not empty
        for problem in data.train[:1]:
            prompts.build(problem)
    except (ConfigError, DataError, CheckpointError, PromptError) as e:
        print(f"kernelrl: configuration error: {e}", file=sys.stderr)
        sys.exit(2)
    return run, data


def fit_to_evaluator(run: RunConfig, data: ProblemData) -> ProblemData:
    """On a CPU evaluator, problems without SMALL_SIZES (KernelBench files) get derived small sizes and
    degenerate problems are left out (envs/screening.py, cached per problem), before Ray or a model starts.
    A GPU run's driver may have no GPU to check them on, so there the set is used as loaded."""
    from envs.cache import SqliteCache
    from envs.worker.worker_set import resolve_device

    if resolve_device(run.eval.device) != "cpu":
        return data
    try:
        cache = SqliteCache(run.cache_path) if run.cache_path else None
        data, skipped = data.fitted(run.eval, cache)
    except (DataError, ValueError) as e:  # envs.cache.CacheError is a ValueError
        print(f"kernelrl: configuration error: {e}", file=sys.stderr)
        sys.exit(2)
    for problem_id, reason in skipped.items():
        log.warning("left out %s: %s", problem_id, reason)
    return data


def run_hosted_rft(run: RunConfig, data: ProblemData, run_dir: Path, cfg: DictConfig) -> int:
    """OpenAI reinforcement fine-tuning graded by this machine's evaluation service (rl/hosted, docs/hosted.md)."""
    from rl.hosted.driver import run_hosted
    from rl.tracking import RunLogger

    log.info("%d training and %d validation problems; reinforcement fine-tuning of %s on OpenAI -> %s",
             len(data.train), len(data.validation), run.hosted.base_model or run.policy.engine.get("model"), run_dir)
    logger = RunLogger(run_dir, run.wandb, OmegaConf.to_container(cfg, resolve=True))
    try:
        return run_hosted(run, data, run_dir, logger)
    finally:
        logger.close()


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> None:
    run, data = check(cfg)
    run_dir = Path(hydra.core.hydra_config.HydraConfig.get().runtime.output_dir)
    if run.runs_hosted_rft:  # an API policy under a recipe with hosted.mode=rft: OpenAI trains, KernelRL grades
        sys.exit(run_hosted_rft(run, data, run_dir, cfg))
    data = fit_to_evaluator(run, data)
    log.info("%d training and %d validation problems; policy %s (%s); %d steps -> %s", len(data.train),
             len(data.validation), run.policy.name, run.policy.engine_kind, run.loop.steps, run_dir)
    if run.policy.learner is None:
        log.warning("policy %s has no learner: the run generates, evaluates and validates without updating "
                    "weights", run.policy.name)

    from rl.components import build_components, close_components
    from rl.loop import RunError, Trainer
    from rl.tracking import RunLogger

    resume_metrics = resume_step = None
    if run.resume:
        _, state = find_checkpoint(run.resume)
        resume_metrics, resume_step = Path(state.run_dir) / "metrics.jsonl", state.step
    logger = RunLogger(run_dir, run.wandb, OmegaConf.to_container(cfg, resolve=True),
                       resume_from=resume_metrics, resume_step=resume_step)
    # SIGTERM (a scheduler's cancel, `kill`) unwinds like Ctrl-C, so engines shut down properly and the
    # weight exports in /dev/shm are removed (a killed vLLM leaves shared memory behind)
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))
    components = build_components(run, data)
    try:
        summary = asyncio.run(Trainer(run, run_dir, components, data, logger).run())
    except RunError as e:
        log.error("%s", e)
        sys.exit(1)
    finally:
        close_components(components)
        logger.close()
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
