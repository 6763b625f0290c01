"""vLLM 0.32's async engine (AsyncLLM, v1) as a rollout engine; one instance lives in one Ray actor.

Every sample is its own vLLM request (n=1, its own seed), so each leaves the engine the moment it finishes;
the prompt's prefill is shared through the prefix cache. The chat template is applied here (rl.rollout.common)
and vLLM is given token ids, so `prompt_ids` are exactly what the learner will see.

Weights after a learner step (`update_weights`):
  lora    the adapter directory is loaded in place under one fixed LoRA id (vLLM must start with enable_lora,
          which costs generation speed: docs/rollout-notes.md)
  merged  a full HF directory is loaded into the running model through `collective_rpc("reload_weights")`
          (on CPU the only path that works: vLLM repacks linear weights for oneDNN, so `load_weights` fails)
  broadcast the learner's rank 0 sends every tensor over a process group of its own; the worker extension
          rl.rollout.vllm_extension receives and loads them in each vLLM worker (NCCL between GPUs, gloo on CPU)
All reset the prefix cache: cached KV of the old weights must not be reused.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import uuid
from pathlib import Path
from typing import Any, AsyncIterator

from rl.rollout.common import check_requests, load_tokenizer, prompt_ids, sample_seed, shared_memory_segments
from rl.rollout.config import EngineConfig
from rl.types import FinishReason, RolloutRequest, Sample, WeightUpdate

log = logging.getLogger(__name__)
_LORA_ID = 1  # one adapter slot, reloaded in place every step
_FINISH: dict[str | None, FinishReason] = {"stop": "stop", "length": "length", "abort": "abort"}


class VLLMEngine:
    def __init__(
        self,
        model_dir: str | Path,
        config: EngineConfig,
        *,
        enable_lora: bool = False,
        chat_template: str | None = None,
    ):
        self.model_dir = str(model_dir)
        self.config = config
        self.enable_lora = enable_lora
        self.tokenizer = load_tokenizer(model_dir, chat_template)
        self.version = 0
        self._lora: Any = None  # the LoRARequest every request carries once an adapter is loaded
        self._engine: Any = None
        self._shm: list[str] = []
        self.start_seconds = 0.0

    async def start(self) -> float:
        """Build the engine (seconds returned). Separate from __init__ so that a Ray actor's constructor stays cheap."""
        if self._engine is not None:
            return self.start_seconds
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        c = self.config
        if c.cpu_reserved_cores is not None and c.resolved_device() == "cpu":
            os.environ["VLLM_CPU_NUM_OF_RESERVED_CPU"] = str(c.cpu_reserved_cores)  # read by its engine process
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        extra: dict[str, Any] = (
            dict(enable_lora=True, max_loras=1, max_cpu_loras=1, max_lora_rank=c.max_lora_rank)
            if self.enable_lora
            else {}
        )
        if c.tensor_parallel_size > 1:
            # worker processes on the GPUs Ray gave this actor (its placement group bundle), not Ray workers
            # that vLLM would try to place itself
            extra["distributed_executor_backend"] = "mp"
        args = AsyncEngineArgs(
            model=self.model_dir,
            tokenizer=self.model_dir,
            dtype=c.resolved_dtype(),
            max_model_len=c.max_model_len,
            gpu_memory_utilization=c.resolved_gpu_memory_utilization(),
            kv_cache_memory_bytes=c.resolved_kv_cache_bytes(),
            enforce_eager=c.enforce_eager,
            tensor_parallel_size=c.tensor_parallel_size,
            max_num_seqs=c.max_num_seqs,
            enable_prefix_caching=c.enable_prefix_caching,
            seed=c.seed,
            # the sampled tokens' logprobs after temperature (what the learner computes: log_softmax(logits / T))
            logprobs_mode="processed_logprobs",
            disable_log_stats=True,
            worker_extension_cls="rl.rollout.vllm_extension.WeightSyncExtension",
            **extra,
        )
        t0 = time.perf_counter()
        before = set(shared_memory_segments(os.getpid()))
        self._engine = AsyncLLM.from_engine_args(args)
        self.start_seconds = time.perf_counter() - t0
        # vLLM's message queues, created by its engine process: the segments that appeared with it
        self._shm = sorted(set(shared_memory_segments(os.getpid())) - before)
        return self.start_seconds

    async def generate(self, requests: list[RolloutRequest]) -> AsyncIterator[Sample]:
        """Yield each sample as it finishes (not in request order)."""
        await self.start()
        prompts = [prompt_ids(self.tokenizer, r.messages) for r in requests]
        check_requests(requests, self.config.max_model_len, prompts)
        done: asyncio.Queue = asyncio.Queue()
        t0 = time.perf_counter()
        call = uuid.uuid4().hex[:8]  # vLLM request ids must be unique even if the caller repeats its ids

        async def one(request: RolloutRequest, ids: list[int], index: int) -> None:
            try:
                await done.put(await self._sample(request, ids, index, t0, f"{call}/{request.request_id}/{index}"))
            except BaseException as e:  # handed to the consumer, which raises it
                await done.put(e)

        tasks = [asyncio.create_task(one(r, ids, i)) for r, ids in zip(requests, prompts) for i in range(r.sampling.n)]
        try:
            for _ in tasks:
                item = await done.get()
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:  # a consumer that stops early aborts what is still generating
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _sample(self, request: RolloutRequest, ids: list[int], index: int, t0: float, vllm_id: str) -> Sample:
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        s = request.sampling
        params = SamplingParams(
            n=1,
            temperature=s.temperature,
            top_p=s.top_p,
            seed=sample_seed(s.seed, request.request_id, index),
            max_tokens=min(s.max_tokens, self.config.max_model_len - len(ids)),
            stop=list(s.stop) or None,
            logprobs=0,
            output_kind=RequestOutputKind.FINAL_ONLY,
        )
        final = None
        async for out in self._engine.generate({"prompt_token_ids": ids}, params, vllm_id, lora_request=self._lora):
            final = out
        if final is None or not final.outputs:
            raise RuntimeError(f"vLLM returned no output for {vllm_id}")
        o = final.outputs[0]
        completion = [int(t) for t in o.token_ids]
        logprobs = [float(step[tok].logprob) for step, tok in zip(o.logprobs, completion)] if o.logprobs else None
        return Sample(
            request_id=request.request_id,
            problem_id=request.problem_id,
            index=index,
            prompt_ids=ids,
            completion_ids=completion,
            text=o.text,
            logprobs=logprobs,
            finish_reason=_FINISH.get(o.finish_reason, "error"),
            policy_version=self.version,
            seconds=time.perf_counter() - t0,
        )

    async def update_weights(self, update: WeightUpdate) -> float:
        """Serve `update` from the next request on; returns the seconds it took (requests in flight finish first
        on whichever weights they started with, so call it between steps)."""
        await self.start()
        t0 = time.perf_counter()
        if update.kind == "lora":
            if not self.enable_lora:
                raise ValueError("a LoRA update needs an engine started with LoRA sync (weight sync 'lora')")
            from vllm.lora.request import LoRARequest

            await self._engine.add_lora(LoRARequest("policy", _LORA_ID, update.path, load_inplace=True))
            self._lora = LoRARequest("policy", _LORA_ID, update.path)
        elif update.kind == "merged":
            await self._engine.collective_rpc("reload_weights", kwargs={"weights_path": update.path})
            self._lora = None  # the merged weights already contain any adapter
        else:
            raise ValueError(f"unknown weight update kind {update.kind!r}")
        await self._engine.reset_prefix_cache()
        self.version = update.version
        return time.perf_counter() - t0

    def weight_receivers(self) -> int:
        return self.config.tensor_parallel_size  # one per worker process

    async def open_weight_channel(self, spec: dict[str, Any], first_rank: int) -> None:
        await self.start()
        await self._engine.collective_rpc("kernelrl_open_channel", args=(spec, first_rank))

    async def receive_weights(self) -> float:
        """Receive one broadcast of full weights (the learner sends at the same time); returns seconds."""
        t0 = time.perf_counter()
        versions = await self._engine.collective_rpc("kernelrl_receive")
        await self._engine.reset_prefix_cache()
        self._lora = None
        self.version = int(versions[0])
        return time.perf_counter() - t0

    def shutdown(self) -> None:
        """Stop the engine core process and free its shared memory (a killed engine leaves /dev/shm segments)."""
        if self._engine is None:
            return
        self._engine.shutdown()
        self._engine = None
        # vLLM unlinks its queues when its processes exit cleanly; on a loaded machine it force-kills them after a
        # few seconds and the segments stay behind. They are ours (our processes mapped them): remove them.
        for path in self._shm:
            if os.path.exists(path):
                log.warning("removing shared memory vLLM left behind: %s", path)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
        self._shm = []
