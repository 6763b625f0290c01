"""Rollout engines in Ray actors: `RolloutActor` (one engine, one placement group) and `RayRolloutEngine`
(the driver's RolloutEngine over `num_engines` of them).

`RolloutActor.generate` is an async streaming generator: each finished sample is sent to the driver at once
(`num_returns="streaming"`), so the loop can hand it to the evaluation pool while the others still generate.
One placement group per engine holds its resources (on GPUs: `tensor_parallel_size` GPUs packed on one node;
vLLM's own workers for tensor parallelism run inside the actor's reservation).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from pathlib import Path
from typing import Any, AsyncIterator

import ray
from ray.util.placement_group import remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from rl.placement import placed_group, resource_bundle
from rl.rollout.common import shared_memory_segments
from rl.rollout.config import EngineConfig
from rl.types import RolloutRequest, Sample, WeightUpdate

log = logging.getLogger(__name__)


class RolloutActor:
    """Owns one local engine (vllm or hf). Construct cheaply, then `start()` (the expensive part)."""

    def __init__(self, kind: str, model_dir: str, config: EngineConfig, enable_lora: bool, chat_template: str | None):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        self.kind, self.model_dir, self.config = kind, model_dir, config
        self.enable_lora, self.chat_template = enable_lora, chat_template
        self.engine: Any = None

    async def start(self) -> float:
        t0 = time.perf_counter()
        if self.engine is None:
            if self.kind == "vllm":
                from rl.rollout.vllm_engine import VLLMEngine

                self.engine = VLLMEngine(
                    self.model_dir, self.config, enable_lora=self.enable_lora, chat_template=self.chat_template
                )
                await self.engine.start()
            else:
                from rl.rollout.hf_engine import HFEngine

                self.engine = await asyncio.to_thread(
                    HFEngine, self.model_dir, self.config, chat_template=self.chat_template
                )
        return time.perf_counter() - t0

    async def generate(self, requests: list[RolloutRequest]) -> AsyncIterator[Sample]:
        async for sample in self.engine.generate(requests):
            yield sample

    async def warm_up(self, requests: list[RolloutRequest]) -> float:
        """The hf engine compiles its decoder for these requests' shapes (vLLM compiles, if at all, in start)."""
        if self.kind == "vllm":
            return 0.0
        return await asyncio.to_thread(self.engine.warm_up, requests)

    async def update_weights(self, update: WeightUpdate) -> float:
        if self.kind == "vllm":
            return await self.engine.update_weights(update)
        return await asyncio.to_thread(self.engine.update_weights, update)

    def weight_receivers(self) -> int:
        return self.engine.weight_receivers()

    async def open_weight_channel(self, spec: dict[str, Any], first_rank: int) -> None:
        if self.kind == "vllm":
            return await self.engine.open_weight_channel(spec, first_rank)
        return await asyncio.to_thread(self.engine.open_weight_channel, spec, first_rank)

    async def receive_weights(self) -> float:
        if self.kind == "vllm":
            return await self.engine.receive_weights()
        return await asyncio.to_thread(self.engine.receive_weights)

    async def shutdown(self) -> None:
        if self.engine is not None:
            self.engine.shutdown()
            self.engine = None

    def shm_segments(self) -> list[str]:
        """The /dev/shm files this actor and its child processes (vLLM's engine core) have mapped: what a clean
        shutdown must remove."""
        return shared_memory_segments(os.getpid())


class RayRolloutEngine:
    """RolloutEngine (rl.types) over `config.num_engines` RolloutActors; requests are spread by sample count,
    all samples of a request on one engine (they share its prefix cache)."""

    def __init__(
        self,
        kind: str,
        model_dir: str | Path,
        config: EngineConfig,
        *,
        enable_lora: bool = False,
        chat_template: str | None = None,
        startup_timeout: float = 900.0,
    ):
        if not ray.is_initialized():
            ray.init()
        self.kind, self.config = kind, config
        self.version = 0
        self._groups: list[Any] = []
        self.actors: list[Any] = []
        t0 = time.perf_counter()
        try:
            gpus = config.resolved_num_gpus()
            bundle = resource_bundle(config.num_cpus, gpus)
            for _ in range(config.num_engines):
                group = placed_group([bundle], "STRICT_PACK", f"a rollout engine ({bundle})", startup_timeout)
                self._groups.append(group)
                actor = (
                    ray.remote(RolloutActor)
                    .options(
                        num_cpus=config.num_cpus,
                        num_gpus=gpus,
                        max_restarts=0,
                        max_concurrency=1000,
                        scheduling_strategy=PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=0),
                        runtime_env={"env_vars": {"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}},
                    )
                    .remote(kind, str(model_dir), config, enable_lora, chat_template)
                )
                self.actors.append(actor)
            self.engine_start_seconds = ray.get([a.start.remote() for a in self.actors], timeout=startup_timeout)
        except BaseException:
            self.shutdown()
            raise
        self.start_seconds = time.perf_counter() - t0

    def _assign(self, requests: list[RolloutRequest]) -> list[list[RolloutRequest]]:
        parts: list[list[RolloutRequest]] = [[] for _ in self.actors]
        load = [0] * len(self.actors)
        for r in sorted(requests, key=lambda r: -r.sampling.n):
            i = load.index(min(load))
            parts[i].append(r)
            load[i] += r.sampling.n
        return parts

    async def generate(self, requests: list[RolloutRequest]) -> AsyncIterator[Sample]:
        """Every sample of every request as it finishes, from whichever engine finished it."""
        done: asyncio.Queue = asyncio.Queue()
        streams = [
            a.generate.options(num_returns="streaming").remote(part)
            for a, part in zip(self.actors, self._assign(requests))
            if part
        ]

        async def drain(stream: Any) -> None:
            try:
                async for ref in stream:
                    await done.put(await ref)
            except BaseException as e:  # the consumer raises it
                await done.put(e)
            finally:
                await done.put(None)

        tasks = [asyncio.create_task(drain(s)) for s in streams]
        open_streams = len(tasks)
        try:
            while open_streams:
                item = await done.get()
                if item is None:
                    open_streams -= 1
                elif isinstance(item, BaseException):
                    raise item
                else:
                    yield item
        finally:
            for task in tasks:
                task.cancel()
            for stream in streams:  # a consumer that stops early stops the engines' work too
                try:
                    ray.cancel(stream)
                except Exception:  # already finished
                    pass
            await asyncio.gather(*tasks, return_exceptions=True)

    async def warm_up(self, requests: list[RolloutRequest]) -> float:
        """Each engine compiles for the requests it would be given (HFEngine.warm_up); returns the wall seconds
        until the last one is done, 0 when none had anything to compile."""
        t0 = time.perf_counter()
        parts = [(a, part) for a, part in zip(self.actors, self._assign(requests)) if part]
        seconds = await asyncio.gather(*(a.warm_up.remote(part) for a, part in parts))
        return time.perf_counter() - t0 if any(seconds) else 0.0

    def update_weights(self, update: WeightUpdate) -> float:
        """All engines load `update` (in parallel); returns the wall seconds until the last one serves it."""
        t0 = time.perf_counter()
        ray.get([a.update_weights.remote(update) for a in self.actors])
        self.version = update.version
        return time.perf_counter() - t0

    # full-weight broadcast (rl.rollout.broadcast.BroadcastSync): these return Ray refs, so that the caller
    # waits for them together with the sender's
    def weight_receivers(self) -> list[int]:
        return ray.get([a.weight_receivers.remote() for a in self.actors])

    def open_weight_channel(self, spec: dict[str, Any], first_rank: int) -> list[Any]:
        refs, rank = [], first_rank
        for actor, receivers in zip(self.actors, self.weight_receivers()):
            refs.append(actor.open_weight_channel.remote(spec, rank))
            rank += receivers
        return refs

    def receive_weights(self) -> list[Any]:
        return [a.receive_weights.remote() for a in self.actors]

    def shutdown(self) -> None:
        """Stop each engine inside its actor first (vLLM frees its shared memory), then the actors and groups."""
        for actor in self.actors:
            try:
                ray.get(actor.shutdown.remote(), timeout=120)
            except Exception as e:  # a dead actor has nothing left to stop
                log.warning("rollout engine did not shut down cleanly: %s", e)
            ray.kill(actor)
        for group in self._groups:
            remove_placement_group(group)
        self.actors, self._groups = [], []
