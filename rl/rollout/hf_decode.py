"""The hf engine's own decode loop (`engine.hf_decode: static | compiled`): one prefill, then one token per step
over a transformers StaticCache, sampled here, and each row handed out as soon as it ends.

- Logprobs are those of the sampled tokens under the processed distribution (logits / T, then top-p), computed
  per step and gathered at once: no full-vocabulary tensors are kept across steps.
- Sampling draws Exp(1) noise from the batch's torch.Generator and takes argmax(p / noise) (the Gumbel-max
  trick: an exact draw from p), so the noise is drawn outside any compiled graph and the run stays seeded. It is
  how torch.multinomial draws one sample, so with the same seed this loop samples transformers generate's tokens
  (up to float rounding).
- `compiled`: the one-token forward goes through torch.compile (mode reduce-overhead on CUDA: CUDA graphs) and
  the sampler through torch.compile. Graphs read the model's parameters where they live, so weights must be
  loaded in place (HFEngine does). The cache is kept between batches of the same shape (graphs record its
  addresses); batch rows and cache lengths are rounded up to buckets so that few shapes occur. torch.compile
  specializes the first shape and compiles once more, with rows and length dynamic, at the second; `run(...,
  steps=k)` decodes only k tokens of a shape, which is how the engine compiles its shapes ahead of a run
  (HFEngine.warm_up).
"""

from __future__ import annotations

import time
from typing import Any, Iterator

import torch

from envs.gpu_lock import GpuGate

CACHE_BUCKET = 256  # cache lengths are rounded up to a multiple of this (fewer shapes to compile and record)
CHECK_EVERY = 16  # steps between looks for finished rows (each look waits for the GPU)


class StaticDecoder:
    def __init__(
        self, model: Any, eos_ids: list[int], pad_id: int, *, compile: bool, max_rows: int, gate: GpuGate | None = None
    ):
        self.model = model
        self.gate = gate  # held shared between two looks, so kernels timed on this GPU are timed alone
        self.gate_wait_s = 0.0  # seconds decoding waited for timing windows, since the decoder was made
        self.pad_id = pad_id
        self.max_rows = max_rows
        self.device = next(model.parameters()).device
        self.eos = torch.tensor(eos_ids, device=self.device)
        self._cache: Any = None
        self._cache_shape: tuple[int, int] | None = None
        self._forward, self._sample = self._forward_eager, sample_tokens
        if compile:
            mode = "reduce-overhead" if self.device.type == "cuda" else None  # CUDA graphs on the GPU only
            self._forward = torch.compile(self._forward_eager, mode=mode, fullgraph=True)
            self._sample = torch.compile(sample_tokens, fullgraph=True)

    def _forward_eager(self, ids, positions, mask, cache):
        out = self.model(
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions,
            past_key_values=cache,
            use_cache=True,
            logits_to_keep=1,
        )
        return out.logits[:, -1]

    def _cache_for(self, rows: int, length: int) -> Any:
        from transformers import StaticCache

        if self._cache_shape != (rows, length):
            self._cache = None  # free the old one first
            self._cache = StaticCache(config=self.model.config, max_cache_len=length)
            self._cache_shape = (rows, length)
        else:
            self._cache.reset()
        return self._cache

    @staticmethod
    def cache_length(width: int, max_new: int) -> int:
        """The cache length for prompts `width` tokens wide and `max_new` new tokens: a multiple of CACHE_BUCKET."""
        return -(-(width + max_new) // CACHE_BUCKET) * CACHE_BUCKET

    @staticmethod
    def sampler_branch(temperature: float, top_p: float) -> tuple[bool, bool]:
        """(greedy, nucleus): the compiled sampler's two branches, each a graph of its own."""
        return temperature == 0, 0 < temperature and top_p < 1

    def rows_bucket(self, n: int) -> int:
        """The next power of two, at least 2 (torch.compile specializes a size of 1: one more compilation) and at
        most max_rows: a short last batch reuses a compiled shape."""
        return max(n, min(self.max_rows, max(2, 1 << (n - 1).bit_length())))

    @torch.no_grad()
    def run(
        self,
        prompts: list[list[int]],
        max_new: int,
        temperature: float,
        top_p: float,
        generator: torch.Generator | None,
        steps: int | None = None,
    ) -> Iterator[list[tuple[int, list[int], list[float]]]]:
        """Yield (row, completion ids, logprobs) of rows as they end (EOS included) or reach max_new. `steps`:
        stop after that many tokens, each row cut there (a warm-up: the cache is still sized for max_new)."""
        if max_new < 1 or (steps is not None and steps < 1):
            raise ValueError(f"max_new and steps must be >= 1, not {max_new} and {steps}")
        decode = max_new if steps is None else min(steps, max_new)
        n, dev = len(prompts), self.device
        rows = self.rows_bucket(n)
        prompts = prompts + [prompts[-1]] * (rows - n)  # filler rows, never returned
        width = max(len(p) for p in prompts)
        length = self.cache_length(width, max_new)
        ids = torch.tensor([[self.pad_id] * (width - len(p)) + p for p in prompts], device=dev)
        # ones past the prompt: causality masks the positions not yet written
        mask = torch.tensor([[0] * (width - len(p)) + [1] * (length - width + len(p)) for p in prompts], device=dev)
        positions = (mask[:, :width].cumsum(-1) - 1).clamp(min=0)
        next_pos = mask[:, :width].sum(-1, keepdim=True)
        greedy, nucleus = self.sampler_branch(temperature, top_p)
        temp = torch.full((rows, 1), temperature if temperature > 0 else 1.0, device=dev)
        top = torch.full((rows, 1), top_p, device=dev)

        hold = _GateHold(self)
        try:
            hold.take()  # the prefill too
            cache = self._cache_for(rows, length)
            logits = self._forward_eager(ids, positions, mask, cache)  # prefill: eager (one call, many shapes)
            tokens = torch.full((rows, max_new), self.pad_id, dtype=torch.long, device=dev)
            logprobs = torch.zeros(rows, max_new, device=dev)
            ended = torch.zeros(rows, dtype=torch.bool, device=dev)
            ended[n:] = True
            out: set[int] = set(range(n, rows))
            for step in range(decode):
                hold.take()
                if step:
                    torch.compiler.cudagraph_mark_step_begin()  # the previous step's graph outputs are consumed
                    logits = self._forward(tokens[:, step - 1 : step], next_pos, mask, cache)
                    next_pos = next_pos + 1
                noise = None
                if not greedy:  # drawn for the real rows only: the draws torch.multinomial (so generate) makes
                    noise = torch.empty(logits.shape, device=dev)
                    noise[:n].exponential_(generator=generator)
                    noise[n:] = 1.0
                tok, lp, eos = self._sample(logits, temp, top, noise, self.eos, greedy, nucleus)
                tokens[:, step] = tok
                logprobs[:, step] = lp
                ended |= eos
                last = step == decode - 1
                if last or (step + 1) % CHECK_EVERY == 0:
                    now = ended.nonzero()[:, 0].tolist() if not last else list(range(rows))
                    done = [r for r in now if r not in out]
                    toks = tokens[done, : step + 1].tolist() if done else []
                    lps = logprobs[done, : step + 1].tolist() if done else []
                    hold.let_go()  # not held while the caller has the rows
                    if done:
                        out.update(done)
                        yield [(r, t, lp) for r, t, lp in zip(done, toks, lps)]
                    if len(out) == rows:
                        return
        finally:
            hold.let_go()


class _GateHold:
    """The GPU's gate (envs.gpu_lock.GpuGate), held shared from one look for finished rows to the next; the
    seconds spent waiting for it go to the decoder's `gate_wait_s`."""

    def __init__(self, decoder: StaticDecoder):
        self.decoder, self._held = decoder, None

    def take(self) -> None:
        gate = self.decoder.gate
        if gate is not None and self._held is None:
            began = time.perf_counter()
            self._held = gate.hold_shared()
            self.decoder.gate_wait_s += time.perf_counter() - began

    def let_go(self) -> None:
        if self._held is not None:
            device = self.decoder.device
            if device.type == "cuda":
                torch.cuda.synchronize(device)  # the steps' kernels end before the GPU is let go
            GpuGate.let_go(self._held)
            self._held = None


def sample_tokens(logits, temperature, top_p, noise, eos, greedy: bool, nucleus: bool):
    """The token of each row, its logprob under the processed distribution, and whether it is an EOS."""
    scores = logits.float()
    if not greedy:  # greedy: the logprob under the unprocessed distribution, as transformers' generate scores it
        scores = scores / temperature
        if nucleus:  # transformers' top-p: drop the least likely tokens that together hold at most 1 - top_p
            ordered, order = scores.sort(-1)
            drop = ordered.softmax(-1).cumsum(-1) <= 1 - top_p
            drop[:, -1] = False
            scores = scores.masked_fill(drop.scatter(-1, order, drop), float("-inf"))
    logp = scores.log_softmax(-1)
    if greedy:
        tok = scores.argmax(-1)
    else:  # Gumbel-max with Exp(1) noise: argmax of p / noise is a draw from p
        tok = (logp - noise.clamp_min(1e-20).log()).argmax(-1)
    return tok, logp.gather(-1, tok[:, None])[:, 0], torch.isin(tok, eos)
