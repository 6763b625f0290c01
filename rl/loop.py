"""The training loop (synchronous on-policy by default). Read `Trainer.run` and `Trainer.train_step` top to bottom.

    for step in 1..loop.steps:
        problems  = sampler.next_batch(step, loop.problems_per_step)        rl.data
        groups    = generate, each finished sample evaluated at once        rl.scoring (engine + pool + rewards)
                    (dynamic sampling: drop zero-variance groups, refill)
        batch     = build_train_batch(groups)                               rl.learner.advantages
        metrics   = learner.train_step(batch); engine.update_weights(learner.export_weights())
        log, checkpoint every N, validate every N                           rl.metrics, rl.tracking, rl.loop_checkpoints

loop.mode=one_step_off overlaps generation of step k+1 with training of step k (`_one_step_off_rollouts`).
Components arrive built (rl.components), so the loop runs the same with any engine or learner, and tests can
give it small ones. The step file by file: docs/architecture.md; one_step_off in full: docs/training.md."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import logging
import math
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from envs.kernel_evaluator import KernelEvaluator
from rl.baselines import baseline_groups, prepare_baselines
from rl.loop_checkpoints import LoopState, find_checkpoint, prune_checkpoints, save_checkpoint
from rl.config import RunConfig
from rl.data import ProblemData, ProblemSampler
from rl.gpu_monitor import GpuMonitor
from rl.metrics import (
    batch_metrics,
    learner_metrics,
    pool_metrics,
    rollout_metrics,
    sample_rows,
    stage_metrics,
    throughput_metrics,
    verl_aliases,
)
from rl.rng_state import decode_python_rng, encode_python_rng
from rl.scoring import EngineFailure, RolloutResult, generate_and_score
from rl.tracking import RunLogger
from rl.types import Group, RolloutRequest

__all__ = ["RunError", "Trainer"]

log = logging.getLogger("kernelrl.loop")


class RunError(RuntimeError):
    """The run cannot continue (the message says why); the last checkpoint is intact."""


@dataclasses.dataclass
class Components:
    pool: KernelEvaluator  # envs.pool.RayEvaluationPool in a run: evaluate_async, metrics
    make_engine: Callable[[], Any]  # builds (and rebuilds after a death) the rollout engine
    learner: Any | None  # rl.types.Learner; None: rollouts and validation only (an API policy)
    prompts: Any  # rl.prompts.PromptBuilder
    engine: Any = None  # the first engine, already built (None: the loop calls make_engine)


def _seed(*parts: Any) -> int:
    return int.from_bytes(hashlib.sha256(":".join(map(str, parts)).encode()).digest()[:4], "big")


class Trainer:
    def __init__(
        self, config: RunConfig, run_dir: str | Path, components: Components, data: ProblemData, logger: RunLogger
    ):
        self.cfg = config
        self.run_dir = Path(run_dir)
        self.components = components
        self.data = data
        self.logger = logger
        self.problems = {p.id: p for p in [*data.train, *data.validation]}
        self.sampler = ProblemSampler(
            data.train,
            config.data.curriculum,
            seed=config.loop.seed,
            weights=data.weights,
            learnability=config.data.learnability if config.data.sampler == "learnability" else None,
        )
        self.rng = random.Random(config.loop.seed)
        self.step = 0
        self.policy_version = 0
        self.engine: Any = None
        self.engine_restarts = 0
        self.history: list[dict[str, Any]] = []  # the rows logged by this process (for the summary)
        self._exports: list[Path] = []
        self._sync_root: Path | None = None  # made on the first export; removed by close()
        self.tools = None  # rl.rollout.tool_rollouts.ToolRollouts when rollout.tools is set
        if config.trajectory is not None:
            from rl.rollout.tool_rollouts import ToolRollouts

            self.tools = ToolRollouts(config, data, components.pool, self.run_dir)
        self.learner_version = 0  # weights versions the learner has trained (policy_version: what the engine serves)
        self._broadcast: Any = None  # loop.sync=broadcast: rl.rollout.broadcast.BroadcastSync, per engine
        self._inflight: asyncio.Task | None = None  # one_step_off: the next step's rollouts, generating
        self._draws_before_inflight = 0  # the sampler's draws before the in-flight step's: a checkpoint resumes there
        self._gpu: GpuMonitor | None = None  # started by run(): gpu/* per step where nvidia-smi exists
        self._startup_row: dict[str, float] = {}  # the start's own metrics: logged with the first row
        self._overlap_evaluation = config.overlaps_evaluation()
        self._deadline: float | None = None  # loop.max_minutes after run() starts (perf_counter seconds)
        self._out_of_time = False  # the deadline passed: the step just done is the last one

    # ------------------------------------------------------------------------------------------ the run
    async def run(self) -> dict[str, Any]:
        started = time.perf_counter()
        if self.cfg.loop.max_minutes is not None:
            self._deadline = started + 60.0 * self.cfg.loop.max_minutes
        if self.cfg.resume:
            self.resume(self.cfg.resume)
        # the loop owns the engine from here
        self.engine, self.components.engine = self.components.engine or self.components.make_engine(), None
        self._gpu = GpuMonitor()
        self._prepare_baselines()
        bar = None
        try:
            if self.policy_version > 0:  # a resumed run: the engine must serve the checkpoint's weights
                await self.sync_weights()
            self.learner_version = self.policy_version
            await self._warm_up_engine()
            if self.step == 0 and self.cfg.validation.at_start:
                self.log_row(0, await self.validate())
            bar = step_progress(self.cfg.loop.steps, self.step, self.cfg.loop.progress_bar)
            with _redirect_logging(bar):
                while self.step < self.cfg.loop.steps and not self._out_of_time:
                    await self.train_step()
                    if bar is not None:
                        last = self.history[-1] if self.history else {}
                        bar.set_postfix(
                            reward=f"{last.get('train/reward_mean', math.nan):.3f}",
                            correct=f"{last.get('train/correct_rate', math.nan):.2f}",
                            refresh=False,
                        )
                        bar.update(self.step - bar.n)
            if self.components.learner is not None:
                self.checkpoint()
                self.export_final()
        finally:
            if bar is not None:
                bar.close()
            if self._inflight is not None:
                self._inflight.cancel()
                self._inflight = None
            self._gpu.close()
            self.close()
        summary = self.summary(time.perf_counter() - started)
        self.logger.summary(summary)
        return summary

    def _prepare_baselines(self) -> None:
        """Queue every problem's baseline measurement (a GPU pool times them once per problem) in the order the
        run needs them: validation's problems when it validates at step 0, then the next step's (two steps' with
        one_step_off, whose second step generates while the first trains), then the rest (rl/baselines.py)."""
        validates = self.step == 0 and self.cfg.validation.at_start
        validation = self.data.validation[: self.cfg.validation.max_problems] if validates else []
        ahead = 2 if self.cfg.loop.mode == "one_step_off" else 1
        steps = range(self.step + 1, min(self.step + ahead, self.cfg.loop.steps) + 1)
        needed, rest = baseline_groups(
            [*self.data.train, *self.data.validation], validation, self.sampler, steps, self.cfg.loop.problems_per_step
        )
        what = "validation's and the first step's" if validates else "the first step's"
        prepare_baselines(self.components.pool, needed, rest, what)

    async def _warm_up_engine(self) -> None:
        """The engine compiles its decoder for the shapes it will generate first (validation's at step 0, then
        the next step's) while the pool measures their baselines, so that neither times a compilation (an hf
        engine with compiled decoding; others have nothing to warm: rl/rollout/hf_engine.py)."""
        if not hasattr(self.engine, "warm_up"):
            return
        requests = []
        if self.step == 0 and self.cfg.validation.at_start:
            problems = self.data.validation[: self.cfg.validation.max_problems]
            requests += self._requests(problems, "warm_up/val", self.cfg.validation.sampling(self.cfg.rollout))
        problems = self.sampler.peek([self.step + 1], self.cfg.loop.problems_per_step)
        requests += self._requests(problems, "warm_up/train", self.cfg.rollout)
        seconds = float(await _maybe_await(self.engine.warm_up(requests)))
        if seconds > 0:
            log.info("rollout engine compiled its first shapes in %.1f s", seconds)
            self._startup_row["time/engine_warm_up"] = seconds

    async def train_step(self) -> None:
        step = self.step + 1
        seconds: dict[str, float] = {}
        t_step = time.perf_counter()
        one_step_off = self.cfg.loop.mode == "one_step_off"
        if one_step_off:
            kept, generated, results = await self._one_step_off_rollouts(step, seconds)
        else:
            kept, generated, results = await self.collect_groups(step)
        seconds["generate"] = sum(r.generate_s for r in results)
        seconds["evaluate"] = sum(r.evaluate_s for r in results)
        seconds["wait_for_rewards"] = sum(r.wait_for_rewards_s for r in results)
        if any(r.gate_wait_s for r in results):  # an engine sharing its GPU with timing windows paused for them
            seconds["generate_gate_wait"] = sum(r.gate_wait_s for r in results)
        row = rollout_metrics(generated, "train", self.cfg.rollout.max_tokens)
        row["train/kept_groups"] = len(kept)
        row["train/refill_rounds"] = len(results) - 1
        row["perf/rollout_tokens_per_s"] = (
            sum(r.completion_tokens for r in results) / seconds["generate"] if seconds["generate"] > 0 else 0.0
        )
        if self.tools is not None:
            row.update(self.tools.record(results, step, "train", self.logger))

        if one_step_off and self.components.learner is not None:
            kept, staleness = self._drop_stale(kept)
            row.update(staleness)
        if self.components.learner is not None and kept:
            from rl.learner.advantages import build_train_batch

            version = min(s.sample.policy_version for g in kept for s in g.samples)
            batch = build_train_batch(kept, self.cfg.algorithm, version)
            t = time.perf_counter()
            out = await self._learner("train_step", batch)
            self.learner_version += 1
            seconds["train"] = time.perf_counter() - t
            row.update(learner_metrics(out))
            row.update(batch_metrics(batch, self.cfg.algorithm.advantage))
            row["perf/learner_tokens_per_s"] = sum(map(len, batch.input_ids)) / seconds["train"]
            if not one_step_off:  # one_step_off syncs when the next step's generation is collected
                t = time.perf_counter()
                await self.sync_weights()
                seconds["sync"] = time.perf_counter() - t
        elif self.components.learner is not None:
            log.warning("step %d: every group had equal rewards; no update this step", step)
            row.update(learner_metrics({}))
        self.step = step
        if step < self.cfg.loop.steps and self._time_is_up():
            self._out_of_time = True  # this step validates as the last one would, then the run ends as usual
            log.info("step %d: loop.max_minutes (%g) reached; this is the last step", step, self.cfg.loop.max_minutes)
            if self._inflight is not None:  # one_step_off's next step: not trained on, so not generated on
                self._inflight.cancel()
                self._inflight = None
        seconds["step"] = time.perf_counter() - t_step
        row.update(stage_metrics(seconds))
        if self._gpu is not None:
            row.update(self._gpu.take())
        if "train/tokens" in row:  # a step the learner trained: its tokens over the whole step's seconds
            row.update(throughput_metrics(row["train/tokens"], seconds["step"], row.get("gpu/count")))
        row.update(pool_metrics(self.components.pool.metrics(), self.cfg.wandb.pool_metrics))
        if hasattr(self.engine, "metrics"):
            row.update({f"rollout/{k}": v for k, v in (await _maybe_await(self.engine.metrics())).items()})
        self._record_samples(generated, step, "train")
        every = self.cfg.loop.checkpoint_every
        if self.components.learner is not None and every and step % every == 0:
            self.checkpoint()
        if self._validates_at(step):
            if one_step_off:
                await self._drain_and_sync(seconds)  # validate the weights just trained, not the previous ones
            try:
                row.update(await self.validate())
            except BaseException:
                self.log_row(step, row)  # a failed validation must not lose the step's training numbers
                raise
        self.log_row(step, row)
        log.info(
            "step %d/%d reward %.3f correct %.2f (%.0f s)",
            step,
            self.cfg.loop.steps,
            row.get("train/reward_mean", math.nan),
            row.get("train/correct_rate", math.nan),
            seconds["step"],
        )

    def _time_is_up(self) -> bool:
        return self._deadline is not None and time.perf_counter() >= self._deadline

    # ---------------------------------------------------------------------------------- one_step_off
    async def _one_step_off_rollouts(self, step: int, seconds: dict[str, float]):
        """The rollouts of `step` (generated while the previous step trained, or now for the first step); then the
        engine gets the newest weights and step+1 starts generating in the background."""
        t = time.perf_counter()
        if self._inflight is None:
            collected = await self.collect_groups(step)
        else:
            collected, self._inflight = await self._inflight, None
        seconds["wait_for_rollouts"] = time.perf_counter() - t
        if self.components.learner is not None and self.learner_version > self.policy_version:
            t = time.perf_counter()
            await self.sync_weights()
            seconds["sync"] = time.perf_counter() - t
        if step < self.cfg.loop.steps and not self._time_is_up():
            self._draws_before_inflight = self.sampler.draws
            self._inflight = asyncio.create_task(self.collect_groups(step + 1))
        return collected

    async def _drain_and_sync(self, seconds: dict[str, float]) -> None:
        """Let the in-flight generation finish (its result stays for the next step), then serve the newest weights."""
        if self._inflight is not None:
            await asyncio.wait([self._inflight])
        if self.components.learner is not None and self.learner_version > self.policy_version:
            t = time.perf_counter()
            await self.sync_weights()
            seconds["sync"] = seconds.get("sync", 0.0) + time.perf_counter() - t

    def _drop_stale(self, groups: list[Group]) -> tuple[list[Group], dict[str, float]]:
        """Groups with a sample more than loop.max_staleness versions behind the learner are dropped."""
        keep, dropped, lags = [], 0, []
        for g in groups:
            lag = [self.learner_version - s.sample.policy_version for s in g.samples]
            if lag and max(lag) > self.cfg.loop.max_staleness:
                dropped += 1
                continue
            keep.append(g)
            lags += lag
        if dropped:
            log.warning(
                "dropped %d groups more than %d versions behind the learner", dropped, self.cfg.loop.max_staleness
            )
        return keep, {
            "async/staleness_mean": sum(lags) / len(lags) if lags else math.nan,
            "async/staleness_max": float(max(lags)) if lags else math.nan,
            "async/dropped_stale_groups": float(dropped),
        }

    # --------------------------------------------------------------------------------------- rollouts
    def _requests(self, problems: list, tag: str, sampling) -> list[RolloutRequest]:
        def seeded(i: int):
            return dataclasses.replace(
                sampling, seed=_seed(sampling.seed, tag, i) if self.cfg.loop.seeded_sampling else None
            )

        return [
            self.components.prompts.request(p, f"{tag}/p{i}", seeded(i), self.policy_version)
            for i, p in enumerate(problems)
        ]

    async def collect_groups(self, step: int) -> tuple[list[Group], list[Group], list[RolloutResult]]:
        """(groups to train on, each holding the samples the environment judged (Group.judged); every group
        generated; one result per generate round). With dynamic sampling, zero-variance groups are dropped
        and replaced by fresh problems, at most loop.max_refill_tries extra rounds (DAPO); the batch may then
        be smaller than asked."""
        from rl.learner.advantages import split_by_variance

        wanted = self.cfg.loop.problems_per_step
        dynamic = self.cfg.algorithm.dynamic_sampling
        kept: list[Group] = []
        generated: list[Group] = []
        results: list[RolloutResult] = []
        sampling = dataclasses.replace(self.cfg.rollout, seed=self.cfg.loop.seed)
        for attempt in range(1 + (self.cfg.loop.max_refill_tries if dynamic else 0)):
            problems = self.sampler.next_batch(step, wanted - len(kept))
            result = await self.rollout(self._requests(problems, f"step{step}/r{attempt}", sampling))
            judged = [g for g in (group.judged() for group in result.groups) if g.samples]
            for group in judged:  # what data.sampler=learnability draws by (a refill round's draws too)
                self.sampler.record(group.problem_id, sum(s.verdict.correct for s in group.samples), len(group.samples))
            results.append(result)
            generated += result.groups
            kept += split_by_variance(judged)[0] if dynamic else judged
            if len(kept) >= wanted:
                break
        return kept[:wanted], generated, results

    async def rollout(self, requests: list[RolloutRequest], priority: str = "train") -> RolloutResult:
        """Generate and score (single attempts, or tool-augmented trajectories with rollout.tools); a failed
        engine is rebuilt (loop.max_engine_restarts) and the requests retried."""
        while True:
            try:
                if self.tools is not None:
                    return await self.tools.generate(self.engine, requests, self.problems, self.cfg.reward, priority)
                return await generate_and_score(
                    self.engine,
                    requests,
                    self.problems,
                    self.components.pool,
                    self.cfg.reward,
                    priority,
                    overlap=self._overlap_evaluation,
                )
            except EngineFailure as e:
                if self.engine_restarts >= self.cfg.loop.max_engine_restarts:
                    raise RunError(
                        f"the rollout engine failed {self.engine_restarts + 1} times, last: {e}; "
                        f"stopping (last checkpoint: {self._latest_checkpoint()})"
                    ) from e
                self.engine_restarts += 1
                log.error(
                    "rollout engine failed (%s); rebuilding it (%d/%d)",
                    e,
                    self.engine_restarts,
                    self.cfg.loop.max_engine_restarts,
                )
                self._shutdown_engine()
                self.engine = self.components.make_engine()
                if self.policy_version > 0:
                    await self.sync_weights()

    async def validate(self) -> dict[str, float]:
        """Held-out problems, single attempt, fixed sampling: logged under val/."""
        problems = self.data.validation[: self.cfg.validation.max_problems]
        if not problems:
            return {}
        t = time.perf_counter()
        sampling = self.cfg.validation.sampling(self.cfg.rollout)
        result = await self.rollout(self._requests(problems, f"val{self.step}", sampling), priority="validation")
        row = rollout_metrics(result.groups, "val", sampling.max_tokens)
        if self.tools is not None:
            row.update(self.tools.record([result], self.step, "val", self.logger))
        row["time/validate"] = time.perf_counter() - t
        row["time/validate_generate"] = result.generate_s  # the rest is evaluation left after the last sample
        row["time/validate_wait_for_rewards"] = result.wait_for_rewards_s
        self._record_samples(result.groups, self.step, "val")
        log.info(
            "validation at step %d: reward %.3f correct %.2f on %d problems",
            self.step,
            row.get("val/reward_mean", math.nan),
            row.get("val/correct_rate", math.nan),
            len(problems),
        )
        return row

    def _record_samples(self, groups: list[Group], step: int, split: str) -> None:
        """Every sample to samples.jsonl, the ones an evaluation stage failed on to crashers/, and a table
        now and then (validation's first one always)."""
        self.logger.samples(sample_rows(groups, step, split=split))
        if crashed := self.logger.crashers(groups, step, split):
            log.warning(
                "step %d: an evaluation stage failed on %d %s sample(s); kept in %s",
                step,
                crashed,
                split,
                self.logger.run_dir / "crashers",
            )
        if self.logger.wants_table(step) or (split == "val" and step == 0):
            rows = sample_rows(groups, step, self.logger.config.table_rows, split)
            self.logger.table(step, f"{split}/samples_table", rows)  # not {split}/samples: that is the count

    def _validates_at(self, step: int) -> bool:
        """Every validation.every steps, and at the last step (loop.steps, or the one that reached loop.max_minutes)
        when validation.at_end (one row per step)."""
        every = self.cfg.validation.every
        last = step == self.cfg.loop.steps or self._out_of_time
        return (bool(every) and step % every == 0) or (last and self.cfg.validation.at_end)

    # ------------------------------------------------------------------------------- weights and state
    async def _learner(self, method: str, *args: Any) -> Any:
        """A learner call off the event loop; a failed learner stops the run with the reason (its state since
        the last checkpoint is gone, so there is nothing to retry)."""
        return await self._guarded(method, getattr(self.components.learner, method), *args)

    async def _guarded(self, what: str, call: Callable[..., Any], *args: Any) -> Any:
        try:
            return await asyncio.to_thread(call, *args)
        except Exception as e:
            raise RunError(
                f"the learner failed in {what} after step {self.step}: {type(e).__name__}: "
                f"{str(e)[:500]}; resume from the last checkpoint: {self._latest_checkpoint()}"
            ) from e

    async def sync_weights(self) -> float:
        """Export the learner's weights and make the engine serve them; returns the engine's seconds."""
        if self.cfg.loop.sync == "broadcast":
            return await self._broadcast_weights()
        if self._sync_root is None:
            self._sync_root = (
                Path(self.cfg.loop.sync_dir)
                if self.cfg.loop.sync_dir
                else Path(
                    tempfile.mkdtemp(prefix="kernelrl-weights-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
                )
            )
        path = self._sync_root / f"v{self.step:06d}-{len(self._exports)}"
        update = await self._learner("export_weights", self.cfg.loop.sync, str(path))
        seconds = await _maybe_await(self.engine.update_weights(update))
        self.policy_version = update.version
        self._exports.append(path)
        for old in self._exports[:-1]:  # the engine has loaded the new weights: older exports are garbage
            shutil.rmtree(old, ignore_errors=True)
        self._exports = self._exports[-1:]
        return float(seconds)

    async def _broadcast_weights(self) -> float:
        """loop.sync=broadcast: every tensor from the learner's rank 0 into every engine process
        (rl.rollout.broadcast)."""
        from rl.rollout.broadcast import BroadcastSync

        if self._broadcast is None:
            backend = self.cfg.loop.broadcast_backend
            if backend == "auto":
                device = await self._guarded("device", getattr, self.components.learner, "device")
                backend = "nccl" if str(device).startswith("cuda") else "gloo"
            self._broadcast = BroadcastSync(self.components.learner.weight_senders, self.engine, backend)
        out = await self._guarded("broadcast", self._broadcast.sync)
        self.policy_version = int(out["version"])
        log.info(
            "broadcast v%d: %.1f MB in %.2f s (gather %.2f s, receive %.2f s)",
            self.policy_version,
            out["bytes"] / 1e6,
            out["sync_s"],
            out["gather_s"],
            out["receive_s"],
        )
        return float(out["sync_s"])

    def _fingerprint(self) -> str:
        data = dataclasses.asdict(self.cfg.data)
        if self.cfg.data.sampler != "learnability":  # its settings count only when used: older runs keep theirs
            del data["learnability"]
        keys = {
            "data": data,
            "rollout": dataclasses.asdict(self.cfg.rollout),
            "algorithm": dataclasses.asdict(self.cfg.algorithm),
            "seed": self.cfg.loop.seed,
        }
        if self.cfg.trajectory is not None:  # only with tools, so runs without them keep their fingerprints
            keys["trajectory"] = dataclasses.asdict(self.cfg.trajectory)
        return hashlib.sha256(json.dumps(keys, sort_keys=True, default=str).encode()).hexdigest()[:16]

    def checkpoint(self) -> Path:
        # one_step_off: the next step's problems are already drawn; a resumed run draws them again
        sampler = self.sampler.state_dict()
        if self._inflight is not None:  # the draws before the in-flight step's; what was recorded since is kept
            sampler["draws"] = self._draws_before_inflight
        state = LoopState(
            step=self.step,
            policy_version=self.learner_version,
            sampler=sampler,
            rng=encode_python_rng(self.rng.getstate()),
            run_dir=str(self.run_dir),
            config_fingerprint=self._fingerprint(),
            wandb_run_id=getattr(self.logger, "wandb_run_id", None) or "",
        )
        path = save_checkpoint(self.run_dir / "checkpoints", state, self.components.learner.save_checkpoint)
        prune_checkpoints(self.run_dir / "checkpoints", self.cfg.loop.keep_checkpoints)
        log.info("checkpoint: %s", path)
        return path

    def resume(self, path: str) -> None:
        directory, state = find_checkpoint(path)
        if state.config_fingerprint and state.config_fingerprint != self._fingerprint():
            log.warning("resuming %s with other data/rollout/algorithm settings than it was written with", directory)
        self.sampler.load_state_dict(state.sampler)
        self.rng.setstate(decode_python_rng(state.rng))
        self.step, self.policy_version = state.step, state.policy_version
        if self.components.learner is not None:
            self.components.learner.load_checkpoint(str(directory / "learner"))
        log.info("resumed from %s at step %d (sampler draws %d)", directory, self.step, self.sampler.draws)

    def _latest_checkpoint(self) -> str:
        pointer = self.run_dir / "checkpoints" / "latest"
        return str(pointer.parent / pointer.read_text().strip()) if pointer.exists() else "none"

    def export_final(self) -> None:
        if self.cfg.loop.export_final is None:
            return
        path = self.run_dir / "final_policy"
        if path.exists():
            shutil.rmtree(path)
        update = self.components.learner.export_weights(self.cfg.loop.export_final, str(path))
        log.info("final policy (%s, version %d): %s", update.kind, update.version, path)

    def close(self) -> None:
        """Stop the engine and delete the weight exports (a configured loop.sync_dir keeps its last export)."""
        self._shutdown_engine()
        if self.tools is not None:
            self.tools.close()
        if self._sync_root is not None and not self.cfg.loop.sync_dir:
            shutil.rmtree(self._sync_root, ignore_errors=True)
        self._sync_root = None

    def _shutdown_engine(self) -> None:
        self._broadcast = None  # its channel ends with the engine; a new engine opens a new one
        if self.engine is not None:
            try:
                self.engine.shutdown()
            except Exception as e:  # a dead engine cannot shut down; its replacement must still start
                log.warning("engine shutdown failed: %s", e)
            self.engine = None

    # --------------------------------------------------------------------------------------- logging
    def log_row(self, step: int, row: dict[str, Any]) -> None:
        if not row:
            return
        row, self._startup_row = {**self._startup_row, **row}, {}
        row = {**row, **verl_aliases(row)}  # verl's names beside ours (rl.metrics.VERL_ALIASES)
        self.logger.log(step, row)
        self.history.append({"step": step, **row})

    def summary(self, wall_s: float) -> dict[str, Any]:
        """First vs last training steps and first vs last validation, as measured."""
        train = [r for r in self.history if "train/reward_mean" in r]
        val = [r for r in self.history if "val/reward_mean" in r]
        k = max(1, min(3, len(train) // 3))
        out: dict[str, Any] = {
            "steps": self.step,
            "wall_s": wall_s,
            "engine_restarts": self.engine_restarts,
            "stopped_by_max_minutes": self._out_of_time,
        }
        for key in ("reward_mean", "kernel_reward_mean", "correct_rate"):
            values = [r.get(f"train/{key}") for r in train]
            values = [v for v in values if v is not None]
            if values:
                out[f"train/{key}_first{k}"] = sum(values[:k]) / len(values[:k])
                out[f"train/{key}_last{k}"] = sum(values[-k:]) / len(values[-k:])
        out.update(problem_summary(train, k))
        if val:
            for key in ("reward_mean", "correct_rate", "correct_rate_low", "correct_rate_high"):
                out[f"val/{key}_step{val[0]['step']}"] = val[0].get(f"val/{key}")
                out[f"val/{key}_step{val[-1]['step']}"] = val[-1].get(f"val/{key}")
        return out


def problem_summary(train: list[dict[str, Any]], k: int) -> dict[str, Any]:
    """Each training problem's correct rate over the first and the last `k` logged steps it was drawn in, and how
    many problems gained (a run that learns one problem while the rest stay flat says so here)."""
    prefix, suffix = "train/problem/", "/correct_rate"
    ids = sorted(
        {key[len(prefix) : -len(suffix)] for r in train for key in r if key.startswith(prefix) and key.endswith(suffix)}
    )
    out: dict[str, Any] = {}
    gained = []
    for problem_id in ids:
        values = [r[f"{prefix}{problem_id}{suffix}"] for r in train if f"{prefix}{problem_id}{suffix}" in r]
        first, last = sum(values[:k]) / len(values[:k]), sum(values[-k:]) / len(values[-k:])
        out[f"{prefix}{problem_id}/correct_rate_first{k}"] = first
        out[f"{prefix}{problem_id}/correct_rate_last{k}"] = last
        if last > first:
            gained.append(problem_id)
    if ids:
        out["train/problems_gained"] = len(gained)
        out["train/problems_gained_ids"] = ",".join(gained)
    return out


async def _maybe_await(value: Any) -> Any:
    return await value if asyncio.iscoroutine(value) or isinstance(value, asyncio.Future) else value


def step_progress(total: int, initial: int, enabled: bool, stream: Any = None) -> Any:
    """A tqdm bar over the training steps on stderr (loop.progress_bar); None when turned off, when stderr is
    not a terminal (a log file or CI keeps clean lines) or without tqdm."""
    stream = stream if stream is not None else sys.stderr
    if not enabled or not getattr(stream, "isatty", lambda: False)():
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, initial=initial, desc="steps", unit="step", file=stream, dynamic_ncols=True)


def _redirect_logging(bar: Any) -> Any:
    """Log lines printed through the bar (tqdm.write) so they do not break it; nothing without a bar."""
    if bar is None:
        return contextlib.nullcontext()
    from tqdm.contrib.logging import logging_redirect_tqdm

    return logging_redirect_tqdm(tqdm_class=type(bar))
