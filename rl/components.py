"""Builds what the loop drives from a RunConfig: the evaluation pool, the rollout engine, the learner, prompts.

The order matters on a small machine: the pool starts Ray (with pool.init_kwargs) and its actors,
the model directory is resolved once (SmolLM2's GGUF converted and cached), then the learner and the
engine load it. Everything built here is closed by `close_components`.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from rl.config import RunConfig
from rl.data import ProblemData
from rl.loop import Components

if TYPE_CHECKING:
    from envs.pool.ray_backend import RayEvaluationPool

__all__ = ["build_components", "build_prompts", "close_components", "training_gpus"]

log = logging.getLogger("kernelrl.components")


def build_prompts(config: RunConfig, data: ProblemData) -> Any:
    """The prompt builder; its one-shot store holds verified solutions of problems NOT held out for
    validation (envs.retrieval also never returns a problem's own solution)."""
    from rl.prompts import PromptBuilder
    from envs.retrieval import KernelIndex, builtin_solutions

    index = None
    if config.prompt.one_shot:
        index = KernelIndex(
            builtin_solutions(),
            held_out_ids=[p.id for p in data.validation],
            held_out_sha256=[p.sha256 for p in data.validation],
        )
    return PromptBuilder(config.prompt, index)


def build_pool(config: RunConfig) -> RayEvaluationPool:
    """The pool starts first (it starts Ray), so on GPUs it sizes itself around what the learner and the rollout
    engines will ask for once they start: with pool.num_actors null it takes only the GPUs they leave."""
    from envs.cache import SqliteCache
    from envs.pool import RayEvaluationPool

    cache = SqliteCache(config.cache_path) if config.cache_path else None
    return RayEvaluationPool(config.eval, config.pool, cache, reserve_gpus=lambda: training_gpus(config))


def training_gpus(config: RunConfig) -> float:
    """GPUs the learner (all its ranks) and the rollout engines request from Ray: the same figures their own
    actors resolve (rl.learner.actor.learner_resources, EngineConfig.resolved_num_gpus); Ray must be connected."""
    gpus = 0.0
    if config.policy.learner is not None:
        from rl.learner.actor import learner_resources
        from rl.learner.config import PolicyConfig

        policy = PolicyConfig.from_mapping(dict(config.policy.learner))
        gpus += learner_resources(policy)["num_gpus"] * policy.world_size
    if not config.policy.is_api:
        from rl.rollout.config import EngineConfig

        engine = EngineConfig.from_mapping(dict(config.policy.engine))
        gpus += engine.resolved_num_gpus() * engine.num_engines
    log.info("the learner and rollout engines ask for %g GPUs; the evaluation pool sizes itself around them", gpus)
    return gpus


def build_learner(config: RunConfig, model_dir: Path) -> Any:
    from rl.learner.config import PolicyConfig

    policy = PolicyConfig.from_mapping({**dict(config.policy.learner or {}), "model": str(model_dir)})
    if policy.world_size > 1 or policy.cpu_offload:  # FSDP2 ranks in Ray actors (rl.learner.group)
        from rl.learner.group import LearnerGroup

        log.info("learner group: %d FSDP2 ranks", policy.world_size)
        return LearnerGroup.create(policy, config.algorithm)
    try:
        from rl.learner.actor import LearnerActor  # the Ray actor, once rl.learner ships it
    except ImportError:
        from rl.learner.policy import Policy

        log.info("learner in the driver process (rl.learner.actor not available)")
        return Policy(policy, config.algorithm)
    return LearnerActor.create(policy, config.algorithm)


def policy_model(config: RunConfig, prompts: Any) -> Path:
    """The local model the run starts from: the policy's model, warm-started first when configured
    (rl.warmstart: SFT on verified synthetic pairs, rendered with the run's own prompts; cached)."""
    from rl.warmstart.stage import start_model

    policy = config.policy
    return start_model(policy.model, policy.warm_start_config, prompts, config.eval, learner=policy.learner)


def engine_factory(config: RunConfig, model: str | Path | None = None) -> Callable[[], Any]:
    """A function that builds the rollout engine (the loop calls it again to replace a dead one); `model`
    replaces the policy's model spec (the warm-started directory)."""
    from rl.rollout import make_engine

    engine = dict(config.policy.engine)
    spec = str(model) if model is not None else config.policy.model

    def make() -> Any:
        return make_engine(
            engine, spec, sync=config.loop.sync, chat_template=config.policy.chat_template, seed=config.loop.seed
        )

    return make


def _start(engine: Any) -> Any:
    """Engines with a synchronous `start` (the openai engine: preflight checks) start here, so that an endpoint
    that refuses or a missing key stops the run before anything else is built."""
    start = getattr(engine, "start", None)
    if start is not None and not asyncio.iscoroutinefunction(start):
        start()
    return engine


def build_components(config: RunConfig, data: ProblemData) -> Components:
    prompts = build_prompts(config, data)
    # An API policy is checked first (cheap, and the most likely to be refused); the warm start (SFT, before
    # Ray holds any memory) next; local engines start after the pool, which starts Ray with pool.init_kwargs.
    model = None if config.policy.is_api else policy_model(config, prompts)
    make_engine = engine_factory(config, model)
    engine = _start(make_engine()) if config.policy.is_api else None
    pool = build_pool(config)
    try:
        learner = None
        if config.policy.learner is not None:
            learner = build_learner(config, model)
        if engine is None:
            engine = _start(make_engine())
        return Components(
            pool=pool, make_engine=lambda: _start(make_engine()), learner=learner, prompts=prompts, engine=engine
        )
    except BaseException:
        if engine is not None:
            engine.shutdown()
        pool.close(drain=False)
        raise


def close_components(components: Components) -> None:
    if components.engine is not None:  # normally the loop shut it down already
        components.engine.shutdown()
    shutdown = getattr(components.learner, "shutdown", None)
    if shutdown is not None:
        shutdown()
    components.pool.close(drain=False)
