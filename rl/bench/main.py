"""One benchmark run from its (Hydra) config: problems -> sizes -> policy -> rounds -> benchmark.json, report,
plots, W&B. `scripts/benchmark.py` is the command line around `run_from_config`.

With `rollout.tools` set (the training loop's keys: `rollout.tools`, `rollout.trajectory.*`), every sample is a
multi-turn, tool-augmented trajectory (rl/bench/trajectories.py) instead of a chain of refinement attempts."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from pathlib import Path
import sys
from typing import Any, Callable

from envs.problems import Problem, ProblemError, load_problem_set
from envs.settings import EvalSettings
from rl.bench.policies import FilesEngine
from rl.bench.report import build_report, write_markdown, write_plots
from rl.bench.runner import RunSettings, run_benchmark
from rl.types import SamplingConfig

__all__ = ["BenchmarkError", "run_from_config", "select_problems"]

log = logging.getLogger("kernelrl.bench")


class BenchmarkError(ValueError):
    """A configuration the benchmark cannot run (said before anything expensive starts)."""


# Policies that serve answers already written (rl.bench.policies.FilesEngine): no model, first attempts only.
_RECORDED = ("files", "run")


def run_hydra_job(
    cfg: Any, run: Callable[[dict[str, Any], Path], dict[str, Any]], usage_errors: tuple[type[Exception], ...]
) -> tuple[dict[str, Any], dict[str, Any], Path]:
    """What scripts/benchmark.py and scripts/generate.py share inside their Hydra main: the resolved config (a
    missing mandatory setting exits 2 naming it), then `run(config, Hydra's output directory)` (any of
    `usage_errors` exits 2 with its message). Returns (config, report, output directory)."""
    import hydra
    from omegaconf import OmegaConf
    from omegaconf.errors import MissingMandatoryValue

    from envs.small_sizes import SizeError
    from rl.bench.policies import FilesPolicyError

    try:
        plain = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    except MissingMandatoryValue as e:
        print(
            f"error: missing setting {e.full_key} (e.g. policy.dir=DIR for policy=files, policy.run=RUN_DIR "
            "for policy=run)",
            file=sys.stderr,
        )
        sys.exit(2)
    out_dir = Path(hydra.core.hydra_config.HydraConfig.get().runtime.output_dir)
    try:
        report = run(plain, out_dir)
    except (BenchmarkError, ProblemError, FilesPolicyError, SizeError, ValueError, *usage_errors) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    return plain, report, out_dir


def select_problems(spec: str, levels: list[int] | None, ids: list[str] | None) -> list[Problem]:
    problems = load_problem_set(spec, levels)
    if ids is not None:
        known = {p.id for p in problems}
        unknown = [i for i in ids if i not in known]
        if unknown:
            raise BenchmarkError(
                f"unknown problem ids {unknown} in {spec!r} (levels={levels}); e.g. {sorted(known)[:3]}"
            )
        problems = [p for p in problems if p.id in set(ids)]
    if not problems:
        raise BenchmarkError(f"no problems selected from {spec!r} (levels={levels}, ids={ids})")
    return problems


def _recorded(cfg: dict[str, Any]) -> FilesEngine | None:
    """policy=run: every answer the run recorded at that step, read once (they also name the default problems)."""
    policy = cfg["policy"]
    if policy.get("kind") != "run":
        return None
    return FilesEngine.from_run(policy["run"], policy.get("step", 0), policy.get("split", "val"))


def _ids(cfg: dict[str, Any], recorded: FilesEngine | None) -> list[str] | None:
    """`ids`; for policy=run with neither ids nor levels set, the problems the run answered at that step (the
    rest of the set would count as failures)."""
    if recorded is None or cfg.get("ids") is not None or cfg.get("levels") is not None:
        return cfg.get("ids")
    return sorted(recorded.answers)


def trajectory_settings(cfg: dict[str, Any]) -> Any:
    """`rollout.tools` + `rollout.trajectory` as the rl.rollout.trajectory.TrajectoryConfig the training loop
    would build for this policy (rl.config.trajectory_config), or None when no tool is on. Refused here, before
    anything starts: the files policy (it answers first attempts only, not turns) and attempts > 1 (the
    trajectory's turns are the refinement)."""
    from rl.config import trajectory_config
    from rl.rollout.config import EngineConfig

    rollout = dict(cfg.get("rollout") or {})
    unknown = sorted(set(rollout) - {"tools", "trajectory"})
    if unknown:
        raise BenchmarkError(
            f"rollout: unknown keys {unknown} (the benchmark reads rollout.tools and "
            "rollout.trajectory; sampling is under `sampling`, samples per problem `samples`)"
        )
    tools = rollout.get("tools") or ()
    if not tools:
        return None
    policy = cfg["policy"]
    if policy.get("kind") in _RECORDED:
        raise BenchmarkError(
            f"policy={policy['kind']} answers first attempts only; rollout.tools (multi-turn trajectories) "
            "needs a model"
        )
    if cfg["attempts"] > 1:
        raise BenchmarkError(
            "rollout.tools runs one trajectory per sample whose turns are the refinement: use "
            "rollout.trajectory.max_turns, not attempts > 1"
        )
    engine = dict(policy.get("engine") or {})
    api = engine.get("kind") == "openai"
    try:
        return trajectory_config(
            tools,
            rollout.get("trajectory") or {},
            api=api,
            context=None if api else int(engine.get("max_model_len", EngineConfig.max_model_len)),
        )
    except (ValueError, TypeError) as e:
        raise BenchmarkError(f"rollout: {e}") from None


def _served_model(cfg: dict[str, Any], prompts: Any, settings: EvalSettings) -> tuple[Any, str]:
    """The model a local engine serves and a note for the report. `warm_start: auto` applies the policy's warm
    start to a base model named by preset or hub id, so that `policy=smollm2_135m` is measured as a training run
    with the same prompts starts it (the same cached warm start), and not to a model directory (a run's
    final_policy, a merged warm start), which is measured as it is; `on` and `off` decide for every model."""
    from rl.config import PolicySpec
    from rl.warmstart.stage import WarmStartConfig, start_model

    policy, mode = cfg["policy"], cfg.get("warm_start", "auto")
    if mode not in ("auto", "on", "off"):
        raise BenchmarkError(f"warm_start must be auto, on or off, not {mode!r}")
    warm = WarmStartConfig.from_mapping(policy.get("warm_start"))
    directory = Path(str(policy["model"])).expanduser().is_dir()
    if mode == "off" or not warm.enabled or (mode == "auto" and directory):
        if warm.enabled:
            log.info("benchmarking %s without the policy's warm start (warm_start=%s)", policy["model"], mode)
        return policy["model"], ""
    spec = PolicySpec.from_mapping(policy)  # the training run's checks: a warm start needs a local, trainable policy
    model = start_model(spec.model, warm, prompts, settings, learner=spec.learner)
    log.info("benchmarking the warm-started %s (%s)", policy["model"], model)
    return str(model), f", warm-started: {model.name}"


def _engine(
    cfg: dict[str, Any],
    problems: list[Problem],
    recorded: FilesEngine | None,
    prompts: Any,
    settings: EvalSettings,
) -> tuple[Any, str]:
    policy = cfg["policy"]
    if policy.get("kind") in _RECORDED and cfg["attempts"] > 1:
        raise BenchmarkError(
            f"policy={policy['kind']} answers first attempts only; refinement (attempts > 1) needs a model"
        )
    if policy.get("kind") == "files":
        if not policy.get("dir") or policy["dir"] == "???":
            raise BenchmarkError("policy=files needs policy.dir=DIR (answers: <stem>.py|.md or <stem>/<k>.py|.md)")
        return FilesEngine.from_directory(policy["dir"], problems), f"files:{policy['dir']}"
    if recorded is not None:
        return recorded.only(problems), f"run:{recorded.source}"
    if not policy.get("engine"):
        raise BenchmarkError(f"policy {policy.get('name')!r} has no engine (kind: vllm | hf | openai)")
    from rl.rollout import make_engine

    engine_cfg = dict(policy["engine"])
    model, warm_note = _served_model(cfg, prompts, settings)  # before Ray holds memory: the warm start may train
    if engine_cfg.get("kind") in ("vllm", "hf"):
        import ray

        if not ray.is_initialized():
            ray.init(**(cfg.get("ray_init") or {}))
    engine = make_engine(
        engine_cfg,
        model,
        sync="merged",
        chat_template=policy.get("chat_template"),
        seed=cfg["sampling"].get("seed"),
    )
    start = getattr(engine, "start", None)
    if start is not None and not asyncio.iscoroutinefunction(start):
        start()  # the openai engine's preflight: key, model served
    return engine, f"{policy.get('name', policy['model'])} ({engine_cfg.get('kind')}{warm_note})"


def _prompts(cfg: dict[str, Any], problems: list[Problem]) -> Any:
    from rl.prompts import PromptBuilder, PromptConfig
    from envs.retrieval import KernelIndex, builtin_solutions

    config = PromptConfig.from_mapping(cfg.get("prompt"))
    index = None
    if config.one_shot:  # the benchmark's problems are held out of the examples (no leakage)
        index = KernelIndex(
            builtin_solutions(), held_out_ids=[p.id for p in problems], held_out_sha256=[p.sha256 for p in problems]
        )
    return PromptBuilder(config, index)


def _evaluator(cfg: dict[str, Any], settings: EvalSettings, cache: Any, judge: Any) -> Any:
    from envs import Evaluator

    if cfg["backend"] == "local":
        return Evaluator(settings, cache=cache, judge=judge)
    if cfg["backend"] == "ray":
        from envs.pool import PoolConfig, RayEvaluationPool

        if judge is not None:
            raise BenchmarkError("the LLM judge runs with backend=local (the Ray pool takes no judge)")
        return RayEvaluationPool(settings, PoolConfig.from_mapping(cfg.get("pool")), cache)
    raise BenchmarkError(f"backend must be local or ray, not {cfg['backend']!r}")


def run_from_config(cfg: dict[str, Any], out_dir: Path, engine: Any = None) -> dict[str, Any]:
    """Run the benchmark `cfg` describes (conf/benchmark.yaml, resolved to plain containers); returns the report.
    `engine` (optional) replaces the policy's engine (an rl.types.RolloutEngine, e.g. a scripted one in tests)."""
    from envs.antihack.judge import LLMJudge
    from envs.cache import SqliteCache
    from envs.screening import drop_degenerate
    from envs.small_sizes import SizeSearch, needs_small_sizes, size_large_problems
    from rewards.kernel_reward import check_delta

    started = time.perf_counter()
    check_delta(cfg["delta"])
    settings = EvalSettings.from_mapping(cfg["eval"])
    if cfg["attempts"] < 1 or (cfg["samples"] is not None and cfg["samples"] < 1):
        raise BenchmarkError("samples and attempts must be >= 1")
    trajectory = trajectory_settings(cfg)
    recorded = _recorded(cfg)
    problems = select_problems(str(cfg["problems"]), cfg.get("levels"), _ids(cfg, recorded))
    benchmarked = list(problems)  # held out of kernel_search, also those left out below
    cache = SqliteCache(cfg["cache_path"]) if cfg.get("cache_path") else None
    judge_cfg = cfg.get("judge") or {}
    judge = LLMJudge.from_mapping(judge_cfg) if judge_cfg.get("enabled") else None
    from envs.worker.worker_set import resolve_device

    device = resolve_device(settings.device)
    size = settings.resolved_size(device)
    skipped: dict[str, str] = {}
    derived: dict[str, Any] = {}
    sz = dict(cfg.get("small_sizes") or {})
    derive = sz.pop("derive", True)
    search = SizeSearch(**sz)
    # Only problems too large for the CPU get sizes (envs.small_sizes.needs_small_sizes), as in eval_kernel.py and
    # training; one already small runs as it is written.
    if size == "small" and not derive:
        skipped.update(
            {p.id: "no SMALL_SIZES and small_sizes.derive=false" for p in problems if needs_small_sizes(p, search)}
        )
        problems = [p for p in problems if p.id not in skipped]
    elif size == "small":
        sized, found, failed = size_large_problems(
            problems,
            search,
            cache,
            settings.workers,
            announce=lambda n: log.info("deriving small sizes for %d problems", n),
        )
        derived = {k: dataclasses.asdict(v) for k, v in found.items()}
        skipped.update(failed)
        problems = [sized.get(p.sha256, p) for p in problems if p.id not in failed]
    if not problems:
        raise BenchmarkError(f"no problem left to benchmark: {skipped}")
    from_model = cfg["policy"].get("kind") not in _RECORDED if engine is None else not isinstance(engine, FilesEngine)
    prompts = _prompts(cfg, problems) if from_model else None  # recorded answers need none
    if engine is None:
        engine, policy_name = _engine(cfg, problems, recorded, prompts, settings)
    else:
        policy_name = f"{cfg['policy'].get('name', 'injected')} ({type(engine).__name__})"
    trajectories = None
    try:
        samples = cfg["samples"]
        if samples is None:
            samples = max(engine.samples_for(p.id) for p in problems) if isinstance(engine, FilesEngine) else 1
        s = cfg["sampling"]
        run = RunSettings(
            samples=samples,
            attempts=cfg["attempts"],
            refine_correct=cfg.get("refine_correct", False),
            feedback_chars=cfg.get("feedback_chars", 2000),
            history=cfg.get("history", "last"),
            sampling=SamplingConfig(
                n=samples,
                temperature=s["temperature"],
                top_p=s["top_p"],
                max_tokens=s["max_tokens"],
                seed=s.get("seed"),
                stop=tuple(s.get("stop") or ()),
            ),
        )
        first = (lambda p: []) if prompts is None else (lambda p: prompts.build(p).messages)
        evaluator = _evaluator(cfg, settings, cache, judge)
        try:
            if cfg["backend"] == "local":
                problems, degenerate = drop_degenerate(evaluator, problems)
            else:
                from envs import Evaluator

                with Evaluator(dataclasses.replace(settings, workers=1), cache=cache) as checker:
                    problems, degenerate = drop_degenerate(checker, problems)
            skipped.update(degenerate)
            if not problems:
                raise BenchmarkError(f"every problem was left out: {skipped}")

            def evaluate_many(items: list) -> list:
                return evaluator.evaluate_many(items, progress=cfg.get("progress", False), desc="benchmark")

            sizes = {p.id: p.small_sizes for p in problems if p.id in derived}
            if trajectory is None:
                results, stats = asyncio.run(run_benchmark(problems, engine, first, evaluate_many, run, sizes))
            else:
                results, trajectories, stats = _run_trajectories(
                    cfg, problems, benchmarked, engine, first, evaluator, trajectory, run, sizes
                )
            device_name = evaluator.device_name
        finally:
            evaluator.close()
    finally:
        engine.shutdown()
    run_info = {
        "policy": policy_name,
        "problem_set": str(cfg["problems"]),
        "levels": cfg.get("levels"),
        "ids": cfg.get("ids"),
        "device": device_name,
        "size": size,
        "samples": samples,
        "attempts": cfg["attempts"],
        "refine_correct": run.refine_correct,
        "history": run.history,
        "sampling": dataclasses.asdict(run.sampling),
        "eval": cfg["eval"],
        "backend": cfg["backend"],
        "wall_seconds": time.perf_counter() - started,
        "generate_seconds": stats.generate_seconds,
        "evaluate_seconds": stats.evaluate_seconds,
        "rounds": stats.rounds,
        "skipped": skipped,
        "derived_sizes": derived,
        "tools": list(trajectory.tools) if trajectory is not None else [],
        "trajectory": dataclasses.asdict(trajectory) if trajectory is not None else None,
    }
    report = build_report(results, settings.baseline, run_info)
    if trajectories is not None:
        from rl.bench.trajectories import trajectory_report

        report["trajectories"] = trajectory_report(trajectories, problems, cfg["delta"])
    write_outputs(report, cfg, out_dir, trajectories)
    return report


def _run_trajectories(
    cfg: dict[str, Any],
    problems: list[Problem],
    benchmarked: list[Problem],
    engine: Any,
    first: Any,
    evaluator: Any,
    trajectory: Any,
    run: RunSettings,
    sizes: dict,
) -> tuple:
    """The tools mode's rounds: the trajectories, with kernel_search over the solution store less every
    benchmarked problem (the leakage rule of training, rl.rollout.tool_rollouts.kernel_search_index)."""
    from rewards.shaping import RewardConfig
    from rl.bench.trajectories import run_trajectory_benchmark
    from rl.rollout.tool_rollouts import kernel_search_index, open_solution_store

    store = open_solution_store(cfg.get("cache_path"))
    try:
        return asyncio.run(
            run_trajectory_benchmark(
                problems,
                engine,
                first,
                evaluator,
                trajectory,
                run,
                solutions=kernel_search_index(store, benchmarked),
                store=store,
                reward=RewardConfig(delta=cfg["delta"]),
                sizes=sizes,
            )
        )
    finally:
        if store is not None:
            store.close()


def write_outputs(report: dict[str, Any], cfg: dict[str, Any], out_dir: Path, trajectories: list | None = None) -> Path:
    """benchmark.json (or `output`), benchmark.md and the plots beside it, the trajectories of a tools run as
    `<name>.trajectories.jsonl` (rl.rollout.trajectory_record.read_jsonl reads them), and the W&B run."""
    path = Path(cfg["output"]) if cfg.get("output") else out_dir / "benchmark.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1, default=str))
    if trajectories is not None:
        from rl.rollout.trajectory_record import write_jsonl

        jsonl = path.with_suffix(".trajectories.jsonl")
        jsonl.unlink(missing_ok=True)  # write_jsonl appends: a rerun to the same output replaces the file
        write_jsonl(jsonl, trajectories)
    try:
        plots = write_plots(report, path.parent)
    except ImportError as e:  # a GPU image without matplotlib still gets the JSON and the markdown
        log.warning("no plots (%s); pip install matplotlib", e)
        plots = []
    write_markdown(report, path.with_suffix(".md"), plots)
    wandb_cfg = cfg.get("wandb") or {}
    if wandb_cfg.get("mode", "offline") != "disabled":
        _log_wandb(report, wandb_cfg, path.parent, plots, trajectories)
    log.info("benchmark report: %s (+ %s)", path, path.with_suffix(".md"))
    return path


def _log_wandb(
    report: dict[str, Any],
    wandb_cfg: dict[str, Any],
    directory: Path,
    plots: list[str],
    trajectories: list | None = None,
) -> None:
    import wandb

    from rl.bench.metrics import flatten

    run = wandb.init(
        project=wandb_cfg.get("project", "kernelrl"),
        name=wandb_cfg.get("name"),
        mode=wandb_cfg.get("mode", "offline"),
        dir=str(directory),
        job_type="benchmark",
        config={k: v for k, v in report["run"].items() if k not in ("derived_sizes", "skipped")},
    )
    try:
        run.summary.update(flatten(report, "bench"))
        columns = [
            "problem_id",
            "level",
            "sample",
            "attempt",
            "status",
            "hack",
            "speedup",
            "speedup_inductor",
            "speedup_eager",
            "completion_tokens",
            "cost_usd",
            "error",
        ]
        table = wandb.Table(columns=columns)
        for row in report["per_problem"]:
            for a in row["attempts"]:
                table.add_data(
                    row["problem_id"],
                    row["level"],
                    a["sample"],
                    a["attempt"],
                    a["status"],
                    a["hack"],
                    a["speedup"],
                    a["speedup_inductor"],
                    a["speedup_eager"],
                    a["completion_tokens"],
                    a["cost_usd"],
                    (a["verdict"].get("error") or "")[:500],
                )
        logged = {"bench/per_problem": table, **{f"bench/plot/{Path(p).stem}": wandb.Image(p) for p in plots}}
        if trajectories:
            from rl.rollout.trajectory_metrics import trajectory_rows

            rows = trajectory_rows(trajectories, step=0)
            logged["bench/trajectories"] = wandb.Table(columns=list(rows[0]), data=[list(r.values()) for r in rows])
            run.summary.update({f"bench/trajectory/{k}": v for k, v in report["trajectories"]["metrics"].items()})
        run.log(logged)
    finally:
        run.finish()
