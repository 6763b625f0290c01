"""transformers `generate` as a rollout engine: the plain reference (tests, logprob cross-checks, GPUs without vLLM).

Samples are generated in batches of up to `max_num_seqs` rows (left-padded; rows of one batch share sampling
settings). A batch's samples leave together when it ends. Logprobs are those of the sampled tokens under the
processed distribution (after temperature and top-p), like vLLM's `processed_logprobs`. transformers has one
random stream per batch, not one per sample: a batch is seeded from SamplingConfig.seed and its first row, so
a step is reproducible for the same requests and batch size, but samples differ from vLLM's.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from pathlib import Path
from typing import Any, AsyncIterator

from rl.rollout.common import check_requests, load_tokenizer, prompt_ids, sample_seed
from rl.rollout.config import EngineConfig
from rl.types import RolloutRequest, Sample, SamplingConfig, WeightUpdate


class HFEngine:
    def __init__(self, model_dir: str | Path, config: EngineConfig, *, chat_template: str | None = None):
        import torch
        from transformers import AutoModelForCausalLM

        self.model_dir = str(model_dir)
        self.config = config
        self.device = config.resolved_device()
        self.dtype = getattr(torch, config.resolved_dtype())
        self.tokenizer = load_tokenizer(model_dir, chat_template)
        t0 = time.perf_counter()
        self.model = AutoModelForCausalLM.from_pretrained(self.model_dir, dtype=self.dtype).to(self.device).eval()
        self.start_seconds = time.perf_counter() - t0
        self._base_state: dict[str, Any] | None = None  # base weights, kept once an adapter is merged over them
        eos = self.model.generation_config.eos_token_id
        eos = [eos] if isinstance(eos, int) else list(eos or [])
        self.eos_ids = sorted(set(eos) | {self.tokenizer.eos_token_id})
        self.version = 0

    async def generate(self, requests: list[RolloutRequest]) -> AsyncIterator[Sample]:
        """Yield the samples of each batch as soon as the batch ends."""
        prompts = [prompt_ids(self.tokenizer, r.messages) for r in requests]
        check_requests(requests, self.config.max_model_len, prompts)
        t0 = time.perf_counter()
        for batch in self._batches(requests, prompts):
            for sample in await asyncio.to_thread(self._generate_batch, batch, t0):
                yield sample

    def _batches(self, requests: list[RolloutRequest], prompts: list[list[int]]):
        """Rows (request, prompt ids, sample index) grouped by sampling settings, max_num_seqs at a time."""
        by_sampling: dict[SamplingConfig, list[tuple[RolloutRequest, list[int], int]]] = {}
        for r, ids in zip(requests, prompts):
            if r.sampling.stop:
                raise ValueError("the hf engine does not implement stop strings (use the vllm engine)")
            key = dataclasses.replace(r.sampling, n=1)  # requests that differ only in n share batches
            by_sampling.setdefault(key, []).extend((r, ids, i) for i in range(r.sampling.n))
        size = self.config.max_num_seqs
        for rows in by_sampling.values():
            for i in range(0, len(rows), size):
                yield rows[i:i + size]

    def _generate_batch(self, rows: list[tuple[RolloutRequest, list[int], int]], t0: float) -> list[Sample]:
        import torch

        s = rows[0][0].sampling
        width = max(len(ids) for _, ids, _ in rows)
        pad = self.tokenizer.pad_token_id
        input_ids = torch.tensor([[pad] * (width - len(ids)) + ids for _, ids, _ in rows], device=self.device)
        mask = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for _, ids, _ in rows], device=self.device)
        greedy = s.temperature == 0
        seed = sample_seed(s.seed, rows[0][0].request_id, rows[0][2])
        if seed is not None:
            torch.manual_seed(seed)
        with torch.no_grad():
            out = self.model.generate(
                input_ids=input_ids, attention_mask=mask, do_sample=not greedy,
                temperature=None if greedy else s.temperature, top_p=None if greedy else s.top_p, top_k=None,
                max_new_tokens=min(s.max_tokens, self.config.max_model_len - width), eos_token_id=self.eos_ids,
                pad_token_id=pad, output_scores=True, return_dict_in_generate=True)
        new = out.sequences[:, width:]
        # scores are the processed logits (temperature, top-p applied) the tokens were drawn from
        logprobs = torch.stack(out.scores, dim=1).float().log_softmax(-1).gather(-1, new.unsqueeze(-1)).squeeze(-1)
        seconds = time.perf_counter() - t0
        samples = []
        for row, (request, ids, index) in enumerate(rows):
            completion, finish = self._trim(new[row].tolist())
            text = self.tokenizer.decode(completion, skip_special_tokens=True)
            samples.append(Sample(
                request_id=request.request_id, problem_id=request.problem_id, index=index, prompt_ids=ids,
                completion_ids=completion, text=text, logprobs=logprobs[row, :len(completion)].tolist(),
                finish_reason=finish, policy_version=self.version, seconds=seconds))
        return samples

    def _trim(self, tokens: list[int]) -> tuple[list[int], str]:
        """Up to and including the first EOS (what vLLM returns too); rows that ended early are padded after it."""
        for i, t in enumerate(tokens):
            if t in self.eos_ids:
                return tokens[:i + 1], "stop"
        return tokens, "length"

    def update_weights(self, update: WeightUpdate) -> float:
        """Load a merged HF directory, or merge a peft adapter over the base weights; returns seconds."""
        t0 = time.perf_counter()
        if update.kind == "merged":
            self._load_state(_read_safetensors(update.path))
            self._base_state = None
        elif update.kind == "lora":
            from peft import PeftModel

            if self._base_state is None:
                self._base_state = {k: v.detach().to("cpu", copy=True) for k, v in self.model.state_dict().items()}
            else:
                self.model.load_state_dict(self._base_state)  # the previous adapter is merged in: undo it
            self.model = PeftModel.from_pretrained(self.model, update.path).merge_and_unload().eval()
        else:
            raise ValueError(f"unknown weight update kind {update.kind!r}")
        self.version = update.version
        return time.perf_counter() - t0

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
        self._load_state(dict(tensors))
        self._base_state = None
        self.version = version
        return time.perf_counter() - t0

    def _load_state(self, state: dict[str, Any]) -> None:
        missing, unexpected = self.model.load_state_dict(state, strict=False)
        tied = {"lm_head.weight"} if self.model.config.tie_word_embeddings else set()
        if set(missing) - tied or unexpected:
            raise ValueError(f"merged weights do not match the model: missing {sorted(set(missing) - tied)[:5]}, "
                             f"unexpected {sorted(unexpected)[:5]}")

    def shutdown(self) -> None:
        self.model = None  # type: ignore[assignment]


def _read_safetensors(path: str) -> dict[str, Any]:
    from safetensors.torch import load_file

    files = sorted(Path(path).glob("*.safetensors"))
    if not files:
        raise ValueError(f"merged weights directory {path!r} has no *.safetensors")
    state: dict[str, Any] = {}
    for f in files:
        state.update(load_file(str(f)))
    return state
