"""One agent run from its (Hydra) config, conf/generate.yaml: problems -> policies, pool, store -> search ->
re-verification -> best kernels, report, plots, solution store. `scripts/generate.py` is the command line."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import time
from pathlib import Path
from typing import Any, Mapping

from envs.kernel_evaluator import KernelEvaluator
from envs.problems import Problem
from envs.settings import EvalSettings
from rewards.kernel_reward import reward_for_verdict
from rl.agent.outputs import write_outputs
from rl.agent.policies import Policy, ReplayEngine
from rl.agent.report import build_report
from rl.agent.search import Search, SearchConfig
from rl.agent.store import PopulationStore
from rl.agent.verify import VerifyConfig, verify_winners
from rl.types import SamplingConfig

__all__ = ["AgentError", "run_from_config"]

log = logging.getLogger("kernelrl.agent")

_HELD_OUT_SPLITS = ("validation", "benchmark")


class AgentError(ValueError):
    """A configuration the agent cannot run (said before anything expensive starts)."""


def _sampling(m: Mapping[str, Any]) -> SamplingConfig:
    return SamplingConfig(
        n=1,
        temperature=m["temperature"],
        top_p=m["top_p"],
        max_tokens=m["max_tokens"],
        seed=m.get("seed"),
        stop=tuple(m.get("stop") or ()),
    )


def _policy(
    entry: Mapping[str, Any], problems: list[Problem], sampling: SamplingConfig, ray_init: Mapping[str, Any]
) -> Policy:
    name = entry.get("name") or entry.get("model")
    if entry.get("kind") == "files":
        if not entry.get("dir") or entry["dir"] == "???":
            raise AgentError(f"policy {name!r}: kind files needs dir=DIR (<stem>.py|.md or <stem>/<k>.py|.md)")
        return Policy(name or "files", ReplayEngine(entry["dir"], problems), sampling)
    if not entry.get("engine"):
        raise AgentError(f"policy {name!r} has no engine (kind: vllm | hf | openai) and is not kind: files")
    from rl.rollout import make_engine

    engine_cfg = dict(entry["engine"])
    if engine_cfg.get("kind") in ("vllm", "hf"):
        import ray

        if not ray.is_initialized():
            ray.init(**dict(ray_init or {}))
    engine = make_engine(
        engine_cfg, entry["model"], sync="merged", chat_template=entry.get("chat_template"), seed=sampling.seed
    )
    start = getattr(engine, "start", None)
    if start is not None and not asyncio.iscoroutinefunction(start):
        start()  # the openai engine's preflight: key, model served
    return Policy(f"{name} ({engine_cfg.get('kind')})", engine, sampling)


def _pool(cfg: Mapping[str, Any], settings: EvalSettings, cache: Any) -> tuple[KernelEvaluator, Any]:
    """(the evaluator the search uses, the thing to close)."""
    if cfg["backend"] == "local":
        from envs import Evaluator

        evaluator = Evaluator(settings, cache=cache)
        return evaluator, evaluator
    if cfg["backend"] == "ray":
        from envs.pool import PoolConfig, RayEvaluationPool

        pool = RayEvaluationPool(settings, PoolConfig.from_mapping(cfg.get("pool")), cache)
        return pool, pool
    raise AgentError(f"backend must be local or ray, not {cfg['backend']!r}")


def _problems(cfg: Mapping[str, Any], settings: EvalSettings, cache: Any) -> tuple[list[Problem], dict[str, str]]:
    from envs.screening import fit_problems
    from rl.bench.main import select_problems

    problems, skipped = fit_problems(
        select_problems(str(cfg["problems"]), cfg.get("levels"), cfg.get("ids")), settings, cache
    )
    if not problems:
        raise AgentError(f"no problem left to search: {skipped}")
    return problems, skipped


def run_from_config(cfg: dict[str, Any], out_dir: Path) -> dict[str, Any]:
    """Run the search `cfg` describes (conf/generate.yaml resolved to plain containers); returns the report."""
    from envs.cache import SqliteCache
    from envs.solutions import SolutionStore, default_solutions_path
    from rl.prompts import PromptBuilder, PromptConfig
    from rewards.kernel_reward import check_delta
    from envs.retrieval import KernelIndex, builtin_solutions

    started = time.perf_counter()
    check_delta(cfg["delta"])  # before problems are screened and the store is created
    search_config = SearchConfig.from_mapping(cfg.get("agent"))
    verify_config = VerifyConfig(**dict(cfg.get("verify") or {}))
    settings = EvalSettings.from_mapping(cfg["eval"])
    split = cfg["solutions"]["split"]
    cache = SqliteCache(cfg["cache_path"]) if cfg.get("cache_path") else None
    solutions_path = cfg["solutions"].get("path") or default_solutions_path(cfg.get("cache_path"))
    solutions = SolutionStore(solutions_path) if solutions_path and cfg["solutions"].get("enabled", True) else None
    problems, skipped = _problems(cfg, settings, cache)
    records = builtin_solutions()
    if solutions is not None:
        solutions.seed(records)
        records = solutions.records(exclude_splits=_HELD_OUT_SPLITS)  # held-out problems never retrieved
    index = KernelIndex(records)
    prompt_config = PromptConfig.from_mapping(cfg.get("prompt"))
    prompts = PromptBuilder(prompt_config, index if prompt_config.one_shot else None)
    sampling = _sampling(cfg["sampling"])
    entries = [cfg["policy"], *(cfg.get("extra_policies") or [])]
    policies: list[Policy] = []
    try:
        for entry in entries:
            policies.append(_policy(entry, problems, sampling, cfg.get("ray_init") or {}))
        # After the policies: a bad one (policy.dir missing) must not leave an empty store in the run directory.
        store = PopulationStore(cfg.get("store") or out_dir / "population.sqlite")
        pool, closer = _pool(cfg, settings, cache)
        try:
            search = Search(
                search_config,
                store,
                pool,
                policies,
                prompts,
                index,
                functools.partial(reward_for_verdict, delta=cfg["delta"]),
            )
            outcomes = asyncio.run(search.run(problems))
            device_name = getattr(closer, "device_name", settings.device)
        finally:
            closer.close()
    finally:
        for p in policies:
            p.engine.shutdown()
    verified = verify_winners(outcomes, settings, verify_config, cfg["delta"])
    records_all = [r for o in outcomes for r in o.records]
    run_info = {
        "policies": [p.name for p in policies],
        "problem_set": str(cfg["problems"]),
        "levels": cfg.get("levels"),
        "ids": cfg.get("ids"),
        "device": device_name,
        "store": str(store.path),
        "seed": search_config.seed,
        "proposers": search_config.proposers,
        "evaluations": search.total.evaluations,
        "llm_calls": search.total.llm_calls,
        "tokens": search.total.tokens,
        "cost_usd": search.total.cost_usd,
        "eval_seconds": search.total.eval_seconds,
        "candidates": len(records_all),
        "resumed_candidates": sum(o.resumed_from for o in outcomes),
        "bandit": {"pulls": search.bandit.pulls, "reward_sum": search.bandit.total},
        "profiles": search.total.profiles,
        "stop_at_floor_fraction": search_config.budget.stop_at_floor_fraction,
        "notes": search.notes,
        "verify": dataclasses.asdict(verify_config) if verify_config.enabled else "off",
        "skipped": skipped,
        "wall_seconds": time.perf_counter() - started,
        "eval": cfg["eval"],
    }
    report = build_report(outcomes, verified, settings.baseline, run_info)
    write_outputs(
        report,
        outcomes,
        verified,
        out_dir,
        solutions,
        split,
        cfg.get("name") or out_dir.name,
        plots=cfg.get("plots", True),
    )
    store.close()
    if solutions is not None:
        solutions.close()
    return report
