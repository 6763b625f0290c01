"""transformers models as a rollout engine: the reference engine (tests, logprob cross-checks) and the one for
GPUs without vLLM.

Three decode paths (`engine.hf_decode`; auto: compiled on cuda, static on cpu): transformers `generate`, the
plain reference; static, our own loop over a StaticCache (rl/rollout/hf_decode.py), where each row leaves as
soon as it ends; compiled, that loop's step under torch.compile. Samples are generated in batches of up to
`max_num_seqs` rows; logprobs are those of the sampled tokens under the processed distribution, like vLLM's.
Each batch has one seeded random stream, so a step is reproducible for the same requests and batch size.
Weights are loaded in place, so compiled graphs serve the new ones. `warm_up` compiles the shapes a run will
generate first, before it generates them (the loop calls it while the pool measures baselines). Details:
docs/rollout.md."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, AsyncIterator, Iterator

from rl.rollout.common import check_requests, load_tokenizer, prompt_ids, sample_seed
from rl.rollout.config import EngineConfig
from rl.types import RolloutRequest, Sample, SamplingConfig, WeightUpdate

Row = tuple[RolloutRequest, list[int], int]  # request, prompt ids, sample index
# Decode steps per warmed shape: the first compiled call compiles (on CUDA it also runs eagerly once), the second
# records the CUDA graph, the third replays it.
WARM_UP_STEPS = 4


@dataclasses.dataclass(frozen=True)
class DecodeShape:
    """What the compiled decoder specializes on: rows (bucketed), cache length, and the sampler's branches."""

    rows: int
    width: int  # prompt width: with max_new, it gives the cache length
    max_new: int
    temperature: float
    top_p: float


class HFEngine:
    def __init__(self, model_dir: str | Path, config: EngineConfig, *, chat_template: str | None = None):
        import torch
        from transformers import AutoModelForCausalLM

        from envs.gpu_lock import GpuGate
        from rl.rollout.hf_decode import StaticDecoder

        self.model_dir = str(model_dir)
        self.config = config
        self.device = config.resolved_device()
        self.dtype = getattr(torch, config.resolved_dtype())
        self.decode = config.resolved_hf_decode()
        self.tokenizer = load_tokenizer(model_dir, chat_template)
        t0 = time.perf_counter()
        self.model = AutoModelForCausalLM.from_pretrained(self.model_dir, dtype=self.dtype).to(self.device).eval()
        self.model.requires_grad_(False)  # as peft leaves it after a merge: compiled graphs guard on it
        self.start_seconds = time.perf_counter() - t0
        self._base_state: dict[str, Any] | None = None  # base weights, kept once an adapter is merged over them
        eos = self.model.generation_config.eos_token_id
        eos = [eos] if isinstance(eos, int) else list(eos or [])
        self.eos_ids = sorted(set(eos) | {self.tokenizer.eos_token_id})
        self.version = 0
        # On a GPU the decode loop holds the GPU's gate shared between its looks: an evaluation timing kernels
        # on the same GPU (a colocated recipe) waits for the current chunk and times alone.
        gate = GpuGate.for_current_device() if torch.device(self.device).type == "cuda" else None
        self._decoder = (
            None
            if self.decode == "generate"
            else StaticDecoder(
                self.model,
                self.eos_ids,
                self.tokenizer.pad_token_id,
                compile=self.decode == "compiled",
                max_rows=config.max_num_seqs,
                gate=gate,
            )
        )
        self._lock = threading.Lock()  # one batch or one weight load at a time
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="hf-engine")  # CUDA graph trees are per thread

    async def generate(self, requests: list[RolloutRequest]) -> AsyncIterator[Sample]:
        """Yield each sample as soon as its row ends (generate: as soon as its batch ends)."""
        prompts = [prompt_ids(self.tokenizer, r.messages) for r in requests]
        check_requests(requests, self.config.max_model_len, prompts)
        batches = list(self._batches(requests, prompts))
        t0, waited0 = time.perf_counter(), self._decoder.gate_wait_s if self._decoder is not None else 0.0
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue()
        stop = threading.Event()  # the consumer left: end after the current chunk

        def put(item: Any) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:  # the event loop is closed: nobody is listening
                stop.set()

        def produce() -> None:  # on the engine's thread, so that the GPU keeps working while samples are consumed
            try:
                for batch in batches:
                    with self._lock:
                        for samples in self._run_batch(batch, t0, waited0):
                            put(samples)
                            if stop.is_set():
                                return
            except BaseException as e:  # noqa: BLE001 - re-raised in the consumer
                put(e)
            put(None)

        loop.run_in_executor(self._worker, produce)
        try:
            while (item := await queue.get()) is not None:
                if isinstance(item, BaseException):
                    raise item
                for sample in item:
                    yield sample
        finally:
            stop.set()

    def warm_up(self, requests: list[RolloutRequest]) -> float:
        """Compile and record the compiled decoder's graphs for the batch shapes `requests` would make, a few
        tokens each and nothing returned, so that generating them later times decoding, not compilation; and one
        more shape differing in rows and cache length, so that torch.compile's second compilation (rows and length
        made dynamic), which the run's first new shape would otherwise pay, happens here too. Returns seconds;
        0 without a compiled decoder (`hf_decode` generate or static) or with `warm_up: false`."""
        if self.decode != "compiled" or not self.config.warm_up or not requests:
            return 0.0
        t0 = time.perf_counter()
        prompts = [prompt_ids(self.tokenizer, r.messages) for r in requests]
        check_requests(requests, self.config.max_model_len, prompts)
        shapes = self._warm_up_shapes([self._shape(batch) for batch in self._batches(requests, prompts)])
        # on the engine's thread (CUDA graph trees are per thread), one batch at a time with generate()'s
        self._worker.submit(self._warm, shapes).result()
        return time.perf_counter() - t0

    def _shape(self, rows: list[Row]) -> DecodeShape:
        s = rows[0][0].sampling
        width = max(len(ids) for _, ids, _ in rows)
        return DecodeShape(self._decoder.rows_bucket(len(rows)), width, self._max_new(rows), s.temperature, s.top_p)

    def _max_new(self, rows: list[Row]) -> int:
        """New tokens a batch may take: its max_tokens, less where the longest prompt would pass max_model_len."""
        return min(rows[0][0].sampling.max_tokens, self.config.max_model_len - max(len(ids) for _, ids, _ in rows))

    def _warm_up_shapes(self, shapes: list[DecodeShape]) -> list[DecodeShape]:
        """`shapes` without repeats (same rows, cache length and sampler branch), the first one followed by one
        that differs from it in both rows and cache length where the engine's limits allow one."""
        from rl.rollout.hf_decode import CACHE_BUCKET

        seen, out = set(), []
        for shape in shapes:
            key = (
                shape.rows,
                self._decoder.cache_length(shape.width, shape.max_new),
                self._decoder.sampler_branch(shape.temperature, shape.top_p),
            )
            if key not in seen:
                seen.add(key)
                out.append(shape)
        first = out[0]
        rows = next(
            (
                r
                for r in (self._decoder.rows_bucket(first.rows // 2), self._decoder.rows_bucket(first.rows + 1))
                if r != first.rows and r <= self.config.max_num_seqs
            ),
            None,
        )
        step = (
            CACHE_BUCKET if first.width + first.max_new + CACHE_BUCKET <= self.config.max_model_len else -CACHE_BUCKET
        )
        if rows is not None and first.max_new + step >= 1:
            out.insert(1, dataclasses.replace(first, rows=rows, max_new=first.max_new + step))
        return out

    def _warm(self, shapes: list[DecodeShape]) -> None:
        import torch

        with self._lock:
            for shape in shapes:
                prompts = [[self.tokenizer.pad_token_id] * shape.width] * shape.rows
                generator = torch.Generator(self.device).manual_seed(0)
                for _ in self._decoder.run(
                    prompts, shape.max_new, shape.temperature, shape.top_p, generator, steps=WARM_UP_STEPS
                ):
                    pass

    def _batches(self, requests: list[RolloutRequest], prompts: list[list[int]]) -> Iterator[list[Row]]:
        """Rows grouped by sampling settings and sorted by prompt length, max_num_seqs at a time."""
        by_sampling: dict[SamplingConfig, list[Row]] = {}
        for r, ids in zip(requests, prompts):
            if r.sampling.stop:
                raise ValueError("the hf engine does not implement stop strings (use the vllm engine)")
            # requests that differ only in n or seed share batches (a batch draws from its first row's seed)
            key = dataclasses.replace(r.sampling, n=1, seed=None)
            by_sampling.setdefault(key, []).extend((r, ids, i) for i in range(r.sampling.n))
        size = self.config.max_num_seqs
        for rows in by_sampling.values():
            rows.sort(key=lambda row: len(row[1]))
            for i in range(0, len(rows), size):
                yield rows[i : i + size]

    def _run_batch(self, rows: list[Row], t0: float, waited0: float) -> Iterator[list[Sample]]:
        import torch

        s = rows[0][0].sampling
        seed = sample_seed(s.seed, rows[0][0].request_id, rows[0][2])
        max_new = self._max_new(rows)
        if self._decoder is None:
            yield self._generate_batch(rows, t0, seed, max_new)
            return
        generator = torch.Generator(self.device)
        if seed is not None:
            generator.manual_seed(seed)
        else:
            generator.seed()
        for ended in self._decoder.run([ids for _, ids, _ in rows], max_new, s.temperature, s.top_p, generator):
            seconds = time.perf_counter() - t0
            # the wait for timing windows since this generate() began: the loop logs time/generate_gate_wait
            waited = self._decoder.gate_wait_s - waited0
            usage = {"gpu_gate_wait_s": waited} if self._decoder.gate is not None else {}
            yield [self._sample(rows[r], tokens, logprobs, seconds, usage) for r, tokens, logprobs in ended]

    def _generate_batch(self, rows: list[Row], t0: float, seed: int | None, max_new: int) -> list[Sample]:
        import torch

        s = rows[0][0].sampling
        width = max(len(ids) for _, ids, _ in rows)
        pad = self.tokenizer.pad_token_id
        input_ids = torch.tensor([[pad] * (width - len(ids)) + ids for _, ids, _ in rows], device=self.device)
        mask = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for _, ids, _ in rows], device=self.device)
        greedy = s.temperature == 0
        if seed is not None:
            torch.manual_seed(seed)
        with torch.no_grad():
            out = self.model.generate(
                input_ids=input_ids,
                attention_mask=mask,
                do_sample=not greedy,
                temperature=None if greedy else s.temperature,
                top_p=None if greedy else s.top_p,
                top_k=None,
                max_new_tokens=max_new,
                eos_token_id=self.eos_ids,
                pad_token_id=pad,
                output_scores=True,
                return_dict_in_generate=True,
            )
        new = out.sequences[:, width:]
        # scores are the processed logits (temperature, top-p applied) the tokens were drawn from
        logprobs = torch.stack(out.scores, dim=1).float().log_softmax(-1).gather(-1, new.unsqueeze(-1)).squeeze(-1)
        seconds = time.perf_counter() - t0
        return [self._sample(row, new[i].tolist(), logprobs[i].tolist(), seconds) for i, row in enumerate(rows)]

    def _sample(
        self, row: Row, tokens: list[int], logprobs: list[float], seconds: float, usage: dict | None = None
    ) -> Sample:
        request, ids, index = row
        completion, finish = self._trim(tokens)
        return Sample(
            request_id=request.request_id,
            problem_id=request.problem_id,
            index=index,
            prompt_ids=ids,
            completion_ids=completion,
            text=self.tokenizer.decode(completion, skip_special_tokens=True),
            logprobs=logprobs[: len(completion)],
            finish_reason=finish,
            policy_version=self.version,
            seconds=seconds,
            usage=dict(usage or {}),
        )

    def _trim(self, tokens: list[int]) -> tuple[list[int], str]:
        """Up to and including the first EOS (what vLLM returns too); rows that ended early are padded after it."""
        for i, t in enumerate(tokens):
            if t in self.eos_ids:
                return tokens[: i + 1], "stop"
        return tokens, "length"

    def update_weights(self, update: WeightUpdate) -> float:
        """Load a merged HF directory, or merge a peft adapter over the base weights; returns seconds."""
        t0 = time.perf_counter()
        with self._lock:
            if update.kind == "merged":
                self._load_state(_read_safetensors(update.path))
                self._base_state = None
            elif update.kind == "lora":
                self._merge_adapter(update.path)
            else:
                raise ValueError(f"unknown weight update kind {update.kind!r}")
            self.version = update.version
        return time.perf_counter() - t0

    def _merge_adapter(self, path: str) -> None:
        from peft import PeftModel

        if self._base_state is None:
            self._base_state = {k: v.detach().to("cpu", copy=True) for k, v in self.model.state_dict().items()}
        else:
            self._load_state(self._base_state)  # the previous adapter is merged in: undo it
        storage = {name: p.data for name, p in self.model.named_parameters()}
        self.model = PeftModel.from_pretrained(self.model, path).merge_and_unload().eval()
        for name, p in self.model.named_parameters():  # compiled graphs read the original storage: keep it
            if p.data_ptr() != storage[name].data_ptr():
                storage[name].copy_(p.data)
                p.data = storage[name]
        if self._decoder is not None:
            self._decoder.model = self.model

    def weight_receivers(self) -> int:
        return 1

    def open_weight_channel(self, spec: dict[str, Any], first_rank: int) -> None:
        from rl.rollout.broadcast import ChannelSpec, open_channel

        self._channel = open_channel(ChannelSpec(**spec), first_rank)

    def receive_weights(self) -> float:
        """Receive one broadcast of full weights (rl.rollout.broadcast) and serve them; returns seconds."""
        from rl.rollout.broadcast import receive

        t0 = time.perf_counter()
        version, tensors = receive(self._channel)
        with self._lock:
            self._load_state(dict(tensors))
            self._base_state = None
            self.version = version
        return time.perf_counter() - t0

    def _load_state(self, state: dict[str, Any]) -> None:
        """Copy into the parameters in place (load_state_dict copies), so that compiled graphs see the new values."""
        missing, unexpected = self.model.load_state_dict(state, strict=False)
        tied = {"lm_head.weight"} if self.model.config.tie_word_embeddings else set()
        if set(missing) - tied or unexpected:
            raise ValueError(
                f"merged weights do not match the model: missing {sorted(set(missing) - tied)[:5]}, "
                f"unexpected {sorted(unexpected)[:5]}"
            )

    def shutdown(self) -> None:
        self._worker.shutdown(wait=False, cancel_futures=True)
        self.model = self._decoder = None  # type: ignore[assignment]


def _read_safetensors(path: str) -> dict[str, Any]:
    from safetensors.torch import load_file

    files = sorted(Path(path).glob("*.safetensors"))
    if not files:
        raise ValueError(f"merged weights directory {path!r} has no *.safetensors")
    state: dict[str, Any] = {}
    for f in files:
        state.update(load_file(str(f)))
    return state
