"""The training loop's tool-augmented rollouts (rollout.tools non-empty): what rl.loop.Trainer calls instead of
rl.scoring.generate_and_score, and what it logs of them.

    tools = ToolRollouts(run_config, data, pool, run_dir)
    result = await tools.generate(engine, requests, problems, reward, priority)   # a RolloutResult
    row.update(tools.record(results, step, "train", logger))                     # metrics; JSONL; W&B table

What the tools use:
- kernel_evaluator and the final answers: the run's evaluation pool (same checks, cache and timing).
- kernel_search: verified kernels from the solution store (envs/solutions.py, `solutions.sqlite` beside the
  verdict cache; without a cache, the built-in references only), rebuilt for every rollout so that solutions
  found in earlier steps are found; validation problems are never returned (by id and by source hash), and
  neither is the problem being solved. Every correct answer of a training trajectory is added to the store
  (split "train"; validation trajectories add theirs as "validation", which training searches never see).
- docs_search: the installed triton's reference. profile: the pool's actors (needs eval.device=cuda).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Iterable, Mapping

from envs.kernel_evaluator import KernelEvaluator
from envs.problems import Problem
from rewards.shaping import RewardConfig
from envs.retrieval import KernelIndex, builtin_solutions
from rl.rollout.trajectory_metrics import trajectory_metrics, trajectory_rows
from rl.rollout.trajectory_record import write_jsonl
from rl.rollout.trajectory_scoring import generate_trajectories_and_score
from rl.scoring import RolloutResult
from rl.types import RolloutRequest

__all__ = ["HELD_OUT_SPLITS", "TRAJECTORIES_FILE", "ToolRollouts", "kernel_search_index", "open_solution_store"]

log = logging.getLogger("kernelrl.tools")

TRAJECTORIES_FILE = "trajectories.jsonl"  # in the run directory: one trajectory per line, with step and split
# Solutions found on these splits are never in a kernel_search index (training's or the benchmark's).
HELD_OUT_SPLITS = ("validation", "benchmark")


def open_solution_store(verdict_cache_path: str | Path | None) -> Any:
    """The run's envs.solutions.SolutionStore (`solutions.sqlite` beside the verdict cache), seeded with the
    built-in references; None without a cache (kernel_search then reads the references alone)."""
    from envs.solutions import SolutionStore, default_solutions_path

    path = default_solutions_path(verdict_cache_path)
    if path is None:
        return None
    store = SolutionStore(path)
    store.seed(builtin_solutions())
    return store


def kernel_search_index(store: Any, held_out: Iterable[Problem]) -> KernelIndex:
    """The leakage rule of every kernel_search, in training and in the benchmark: the store's solutions less
    those found on a held-out split (HELD_OUT_SPLITS), less every solution of a `held_out` problem (the
    validation split in training, the benchmarked problems in the benchmark), by id and by source hash. The
    tool itself also leaves out the problem being solved (envs/tools/kernel_search.py)."""
    held_out = list(held_out)
    records = store.records(exclude_splits=HELD_OUT_SPLITS) if store is not None else builtin_solutions()
    return KernelIndex(records, held_out_ids=[p.id for p in held_out], held_out_sha256=[p.sha256 for p in held_out])


class ToolRollouts:
    def __init__(self, config: Any, data: Any, pool: KernelEvaluator, run_dir: str | Path):
        """`config`: the rl.config.RunConfig (its `trajectory` set); `data`: the run's rl.data.ProblemData."""
        self.config = config.trajectory
        self.delta = config.reward.delta  # the kernel reward's, for the first -> final reward gain
        self.pool = pool
        self.path = Path(run_dir) / TRAJECTORIES_FILE
        self.held_out = list(data.validation)
        self.store = open_solution_store(config.cache_path)
        if "profile" in self.config.tools and getattr(pool, "device", None) != "cuda":
            log.warning(
                "rollout.tools has profile but the pool evaluates on %s: profile will answer that it needs a GPU",
                getattr(pool, "device", "?"),
            )

    def index(self) -> KernelIndex:
        """kernel_search's index now (rebuilt per rollout: answers found in earlier steps are found)."""
        return kernel_search_index(self.store, self.held_out)

    async def generate(
        self,
        engine: Any,
        requests: list[RolloutRequest],
        problems: Mapping[str, Problem],
        reward: RewardConfig,
        priority: str = "train",
    ) -> RolloutResult:
        return await generate_trajectories_and_score(
            engine,
            requests,
            problems,
            self.pool,
            reward,
            self.config,
            priority,
            solutions=self.index(),
            profiler=self.pool if hasattr(self.pool, "profile") else None,
            store=self.store,
            store_split="validation" if priority == "validation" else "train",
        )

    def record(self, results: list[RolloutResult], step: int, split: str, logger: Any = None) -> dict[str, float]:
        """Append the results' trajectories to trajectories.jsonl, log a W&B table of them when the logger
        wants one this step, and return the step's trajectory metrics (flat keys, rl.rollout.trajectory_metrics)."""
        trajectories = [t for r in results for t in r.trajectories]
        if not trajectories:
            return {}
        write_jsonl(self.path, trajectories, extra={"step": step, "split": split})
        if logger is not None and (logger.wants_table(step) or step == 0):
            rows = trajectory_rows(trajectories, step, logger.config.table_rows)
            logger.table(step, f"{split}/trajectories_table", rows)
        row = trajectory_metrics(trajectories, split, self.delta)
        # wall seconds of the turns' tool calls (time/evaluate also counts the final answers' evaluation)
        row["time/tool_calls" if split == "train" else f"time/{split}_tool_calls"] = sum(
            r.evaluate_s - r.wait_for_rewards_s for r in results
        )
        return row

    def close(self) -> None:
        if self.store is not None:
            self.store.close()
            self.store = None
