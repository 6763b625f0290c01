#!/usr/bin/env python
"""KernelRL's main job: train a policy with RL on the kernel environment.

  python scripts/train.py                                  # the default run (conf/experiment/local_cpu.yaml)
  python scripts/train.py +experiment=gpt5_triton          # the paper's recipe
  python scripts/train.py -m delta=1.2,1.5,1.8,2.1         # a sweep (one run directory per value)
  python scripts/train.py resume=outputs/2026-12-01/08-00-00   # continue a stopped run
  python scripts/train.py --check algorithm=dapo           # compose and check the config, start nothing
  python scripts/train.py --help                           # config groups, their options, common overrides

Everything the config names is checked before Ray, vLLM or a model starts: a bad value, `+key`, model
path, problem set, resume path or a missing API key exits with code 2 and one clear line per problem (what
Hydra cannot compose, an unknown choice or a key without `+`, exits 1 with Hydra's message). `--check` runs
those checks alone (every job of a `-m` sweep) and exits; `--cfg job` prints the config and then reports
the same problems (exit 2), also with `-m`. Outputs go to Hydra's run directory: metrics.jsonl,
summary.json, wandb/, checkpoints/, final_policy/.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import signal
import sys
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

from rl.loop_checkpoints import CheckpointError, find_checkpoint
from rl.config import ConfigError, RunConfig
from rl.data import DataError, ProblemData

# absolute, so Hydra finds the configs whether this runs as a file or as an installed command
CONF = Path(__file__).resolve().parents[1] / "conf"

log = logging.getLogger("kernelrl")


CONF = Path(__file__).resolve().parents[1] / "conf"


def validate(cfg: DictConfig) -> tuple[RunConfig, ProblemData]:
    """The cheap checks, in the order a user would fix them: types and ranges of every group, the model,
    the problem set, the resume path, the prompt templates. Raises ConfigError (one line per problem)."""
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
    except ConfigError:
        raise
    except (DataError, CheckpointError, PromptError) as e:
        raise ConfigError(str(e)) from None
    return run, data


def report_problems(e: ConfigError, prefix: str = "") -> None:
    for line in e.problems or [str(e)]:
        print(f"kernelrl: configuration error: {prefix}{line}", file=sys.stderr)


def check(cfg: DictConfig) -> tuple[RunConfig, ProblemData]:
    try:
        return validate(cfg)
    except ConfigError as e:
        report_problems(e)
        sys.exit(2)


# ------------------------------------------------------------------------- the front door, before Hydra
def config_groups() -> list[tuple[str, str | None, list[str]]]:
    """(group, default choice, options) for the groups conf/config.yaml selects, then experiment; read from
    conf/ so the help cannot list what does not exist."""
    defaults = OmegaConf.load(CONF / "config.yaml").get("defaults", [])
    chosen = {k: v for d in defaults if isinstance(d, (dict, DictConfig)) for k, v in d.items()}
    groups = [g for g in chosen] + ["experiment"]
    return [
        (g, chosen.get(g), sorted(p.stem for p in (CONF / g).glob("*.yaml"))) for g in groups if (CONF / g).is_dir()
    ]


def short_help() -> str:
    lines = [
        "usage: python scripts/train.py [--check] [-m] [GROUP=OPTION ...] [KEY=VALUE ...] [+experiment=NAME]",
        "",
        "Train a policy with RL on the kernel environment (Hydra config in conf/; the base config is",
        "the default CPU run). Options:",
        "  --check         compose and check the config (types, ranges, model, problem set, resume path,",
        "                  prompts; every job of a -m sweep), start nothing; exit 0, or 1/2 with one line",
        "                  per problem",
        "  --cfg job       print the composed config (then the same checks; exit 2 on a problem)",
        "  -m, --multirun  a sweep: comma-separated values give one run per combination",
        "  --hydra-help    Hydra's own help",
        "",
        "Config groups, read from conf/ (* = the base config's choice):",
    ]
    for group, default, options in config_groups():
        shown = ", ".join(o + ("*" if o == default else "") for o in options)
        prefix = "+" if group == "experiment" else ""
        lines.append(f"  {prefix}{group}={{{shown}}}")
    lines += [
        "",
        "Plain sections: loop, validation, reward, delta, cache_path, resume. Common overrides:",
        "  loop.steps=20 loop.problems_per_step=8      steps, prompts per step",
        "  rollout.n=8 rollout.temperature=1.0          group size, sampling (= algorithm.temperature)",
        "  rollout.max_tokens=1024                      generation budget",
        "  algorithm=dapo rollout.temperature=1.0       another algorithm (its temperature is 1.0)",
        "  policy.model=DIR_OR_HUB_ID                   an HF directory or an org/name in the local HF cache",
        "  data.problems=PATH data.levels=[0,1]         a problem file, directory, curated set or KernelBench",
        "  eval.device=cuda wandb.mode=online           judge on GPUs, log to W&B online",
        "  delta=1.5                                    the reward's shift",
        "  resume=outputs/DATE/TIME                     continue a stopped run",
        "",
        "Docs: README.md (Training), docs/training.md (every key and metric), docs/algorithms.md,",
        "docs/rollout.md (models, engines), conf/config.yaml (the defaults, commented).",
    ]
    return "\n".join(lines)


_HYDRA_FLAGS_WITH_VALUE = (
    "--cfg",
    "-c",
    "--package",
    "-p",
    "--config-path",
    "-cp",
    "--config-name",
    "-cn",
    "--config-dir",
    "-cd",
    "--info",
    "-i",
    "--experimental-rerun",
)
_HYDRA_FLAGS = ("-m", "--multirun", "--resolve", "--run", "-r")


def split_argv(argv: list[str]) -> tuple[dict[str, Any], list[str]]:
    """(flags, overrides) of a command line: Hydra's flags (with their values) apart from the overrides."""
    flags: dict[str, Any] = {}
    overrides: list[str] = []
    args = iter(argv)
    for a in args:
        name, eq, value = a.partition("=")
        if name in _HYDRA_FLAGS_WITH_VALUE and a.startswith("-"):
            flags[name] = value if eq else next(args, None)
        elif a in _HYDRA_FLAGS or a == "--check":
            flags[a] = True
        else:
            overrides.append(a)
    return flags, overrides


def sweep_jobs(overrides: list[str]) -> list[list[str]]:
    """The override lists of every job of a `-m` sweep (Hydra's basic sweeper: the cartesian product of the
    comma-separated values, in the order given). Raises Hydra's OverrideParseException on bad syntax."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(overrides)
    choices = [
        [o.input_line]
        if not o.is_sweep_override()
        else [f"{o.get_key_element()}={v}" for v in o.sweep_string_iterator()]
        for o in parsed
    ]
    return [list(job) for job in itertools.product(*choices)]


def compose_config(overrides: list[str]) -> DictConfig:
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3", job_name="train"):
        return compose("config", overrides=overrides)


def check_jobs(
    overrides: list[str], multirun: bool, print_cfg: str | None = None, resolve: bool = False, quiet: bool = False
) -> int:
    """--check (and `-m ... --cfg job`): compose and validate every job without starting anything. Returns the
    exit code: 0, 1 (Hydra cannot compose) or 2 (a problem in a composed config)."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    try:
        jobs = sweep_jobs(overrides) if multirun else [overrides]
    except HydraException as e:
        print(f"kernelrl: cannot parse the overrides: {e}", file=sys.stderr)
        return 1
    code = 0
    for i, job in enumerate(jobs):
        label = f"job {i} ({' '.join(job) or 'no overrides'}): " if multirun else ""
        try:
            cfg = compose_config(job)
        except (HydraException, OmegaConfBaseException) as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            print(f"kernelrl: cannot compose the config: {label}{first}", file=sys.stderr)
            code = max(code, 1)
            continue
        if print_cfg:
            if multirun:
                print(f"# {label.rstrip(': ')}")
            print(OmegaConf.to_yaml(cfg, resolve=resolve), end="")
        try:
            validate(cfg)
        except ConfigError as e:
            report_problems(e, label)
            code = 2
    if code == 0 and not (print_cfg or quiet):
        print(f"kernelrl: config ok ({len(jobs)} job{'s' if len(jobs) != 1 else ''})", file=sys.stderr)
    return code


def front_door(argv: list[str]) -> int | None:
    """What train.py does before Hydra: the short help, --check, and the config printouts Hydra cannot
    check (or, with -m, print). Returns an exit code, or None to go on to Hydra (with sys.argv cleaned)."""
    if any(a in ("--help", "-h") for a in argv):
        print(short_help())
        return 0
    flags, overrides = split_argv(argv)
    multirun = bool(flags.get("-m") or flags.get("--multirun"))
    cfg_kind = flags.get("--cfg") or flags.get("-c")
    if "--check" in flags:
        return check_jobs(overrides, multirun)
    if cfg_kind and multirun:  # Hydra refuses -m with --cfg ("Only one of --run, --multirun, --cfg ...")
        if cfg_kind != "job":
            print(
                f"kernelrl: with -m only --cfg job is printed (one config per job); drop -m for --cfg {cfg_kind}",
                file=sys.stderr,
            )
            return 1
        return check_jobs(overrides, True, print_cfg="job", resolve=bool(flags.get("--resolve")))
    return None


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
    from rl.tracking import RunLogger, hydra_run_names

    log.info(
        "%d training and %d validation problems; reinforcement fine-tuning of %s on OpenAI -> %s",
        len(data.train),
        len(data.validation),
        run.hosted.base_model or run.policy.engine.get("model"),
        run_dir,
    )
    logger = RunLogger(
        run_dir,
        hydra_run_names(run.wandb, hydra.core.hydra_config.HydraConfig.get()),
        OmegaConf.to_container(cfg, resolve=True),
    )
    try:
        return run_hosted(run, data, run_dir, logger)
    finally:
        logger.close()


def resume_logging(resume: str | None) -> dict:
    """What a resumed run's logger continues: the earlier run's metrics.jsonl and samples.jsonl up to the
    checkpoint's step, and its W&B run (the id in the checkpoint, or, for older checkpoints, in its run dir)."""
    if not resume:
        return {}
    from rl.loop_checkpoints import previous_run_dir
    from rl.tracking import wandb_run_id_of

    directory, state = find_checkpoint(resume)
    previous = previous_run_dir(directory, state)
    return {
        "resume_from": previous,
        "resume_step": state.step,
        "wandb_run_id": state.wandb_run_id or wandb_run_id_of(previous),
    }


@hydra.main(config_path=str(CONF), config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> None:
    run, data = check(cfg)
    run_dir = Path(hydra.core.hydra_config.HydraConfig.get().runtime.output_dir)
    if run.runs_hosted_rft:  # an API policy under a recipe with hosted.mode=rft: OpenAI trains, KernelRL grades
        sys.exit(run_hosted_rft(run, data, run_dir, cfg))
    data = fit_to_evaluator(run, data)
    log.info(
        "%d training and %d validation problems; policy %s (%s); %d steps -> %s",
        len(data.train),
        len(data.validation),
        run.policy.name,
        run.policy.engine_kind,
        run.loop.steps,
        run_dir,
    )
    if run.policy.learner is None:
        log.warning(
            "policy %s has no learner: the run generates, evaluates and validates without updating weights",
            run.policy.name,
        )

    from rl.components import build_components, close_components
    from rl.loop import RunError, Trainer
    from rl.tracking import RunLogger, hydra_run_names

    logger = RunLogger(
        run_dir,
        hydra_run_names(run.wandb, hydra.core.hydra_config.HydraConfig.get()),
        OmegaConf.to_container(cfg, resolve=True),
        **resume_logging(run.resume),
    )
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
    code = front_door(sys.argv[1:])
    if code is not None:
        sys.exit(code)
    flags, overrides = split_argv(sys.argv[1:])
    main()
    if flags.get("--cfg") or flags.get("-c"):  # Hydra printed the config without running main(): check it now
        sys.exit(check_jobs(overrides, False, quiet=True))
