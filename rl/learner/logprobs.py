"""Token logprobs of completions: micro-batches by token budget, packed, padded or prefix, chunked lm_head.

Three exact layouts of a micro-batch: packed (rows concatenated, position ids restarting per sequence: varlen
attention with flash- or flex-attention, no padding), padded (rows of similar length right-padded; with sdpa
or eager attention a pack would need a dense block-diagonal mask) and prefix (rows sharing one prompt, a GRPO
group: the prompt runs once and the rows' completions attend to its KV cache, padded among themselves; rows
whose prompt no other row shares are padded). `layout_for(attn_implementation)` picks packed or padded.
Only positions that predict a completion token go through lm_head, `chunk_tokens` at a time under activation
checkpointing, so float32 [tokens, vocab] logits never exist for the whole batch. Details: docs/learner.md."""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable, Literal, Sequence

import torch
from torch.utils.checkpoint import checkpoint

Layout = Literal["packed", "padded", "prefix"]
_VARLEN_ATTENTION = ("flash_attention_2", "flash_attention_3", "flex_attention")


def layout_for(attn_implementation: str) -> Layout:
    return "packed" if attn_implementation in _VARLEN_ATTENTION else "padded"


def plan_micro_batches(lengths: Sequence[int], token_budget: int, layout: Layout = "packed") -> list[list[int]]:
    """Group row indices so each group fits the token budget (first-fit decreasing).

    packed: a group costs the sum of its lengths; padded: its row count times its longest row. A row
    longer than the budget gets a micro-batch of its own (a sequence is never split). The plan depends
    only on the lengths, so it is deterministic.
    """
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    bins: list[list[int]] = []
    used: list[int] = []
    for i in order:
        for b in range(len(bins)):
            # padded: rows arrive longest first, so a bin's first row is its longest
            cost = used[b] + lengths[i] if layout == "packed" else lengths[bins[b][0]] * (len(bins[b]) + 1)
            if cost <= token_budget:
                bins[b].append(i)
                used[b] = cost
                break
        else:
            bins.append([i])
            used.append(lengths[i])
    return [sorted(b) for b in bins]


def plan_prefix_micro_batches(
    input_ids: Sequence[Sequence[int]], prompt_lengths: Sequence[int], token_budget: int
) -> list[list[int]]:
    """The prefix layout's plan: rows whose prompt token ids are identical share micro-batches that run the
    prompt once. Such a micro-batch costs P + rows * W (W: its longest fed completion, the completion less its
    last token); a group over the budget is split into chunks of rows, longest first, each running the prompt
    again (still exact). Rows whose prompt no other row shares are planned as padded micro-batches. Groups come
    in the order of their first row, then the padded micro-batches: the plan depends only on the rows.
    """
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, (seq, p) in enumerate(zip(input_ids, prompt_lengths)):
        groups.setdefault(tuple(seq[:p]), []).append(i)
    plan: list[list[int]] = []
    alone: list[int] = []
    for prompt, members in groups.items():
        if len(members) == 1:
            alone.extend(members)
            continue
        fed = {i: len(input_ids[i]) - len(prompt) - 1 for i in members}
        chunk: list[int] = []
        for i in sorted(members, key=lambda i: (-fed[i], i)):
            # rows arrive longest first, so a chunk's first row is its longest
            if chunk and len(prompt) + fed[chunk[0]] * (len(chunk) + 1) > token_budget:
                plan.append(sorted(chunk))
                chunk = []
            chunk.append(i)
        plan.append(sorted(chunk))
    padded = plan_micro_batches([len(input_ids[i]) for i in alone], token_budget, "padded")
    return plan + [[alone[j] for j in mb] for mb in padded]


@dataclasses.dataclass
class PackedRows:
    """Some rows of a batch laid out for one forward pass, with N completion targets."""

    rows: list[int]  # which batch rows, in layout order
    input_ids: torch.Tensor  # [B, L] (each row without its last token: it predicts nothing)
    position_ids: torch.Tensor  # [B, L]
    attention_mask: torch.Tensor | None  # [B, L] for padded rows of unequal length, else None
    target_positions: torch.Tensor  # [N] flat positions (b * L + t) whose output predicts a target
    target_ids: torch.Tensor  # [N] the completion tokens (those of the loss mask, when rows have one)
    seq_index: torch.Tensor  # [N] local index (0..len(rows)-1) of each target's row
    seq_lengths: torch.Tensor  # [len(rows)] targets per row
    # prefix layout: the rows' shared prompt [1, P], run once; input_ids / position_ids are then the rows' fed
    # completion tokens [B, W] (positions P..), attention_mask [B, P + W] (None without padding), and a flat
    # position indexes the concatenation of the prompt's P outputs and the completions' B * W
    prompt_ids: torch.Tensor | None = None


def target_offsets(completion_length: int, mask: Sequence[int] | None) -> list[int]:
    """Which completion tokens of a row are targets: all of them, or those whose loss mask is 1."""
    if mask is None:
        return list(range(completion_length))
    if len(mask) != completion_length:
        raise ValueError(f"a loss mask of {len(mask)} for {completion_length} completion tokens")
    return [j for j, m in enumerate(mask) if m]


def pack_rows(
    input_ids: Sequence[Sequence[int]],
    prompt_lengths: Sequence[int],
    rows: Sequence[int],
    device: torch.device | str,
    layout: Layout = "packed",
    loss_masks: Sequence[Sequence[int] | None] | None = None,
) -> PackedRows:
    """`loss_masks` (per row, one 0/1 per completion token, or None): only tokens marked 1 become targets,
    so a masked token (a tool's output inside a trajectory) is context for the tokens after it but has no
    logprob, no entropy and no loss, and is not counted in `seq_lengths`.

    layout="prefix": rows that share their prompt (two or more) are laid out around it (`_pack_prefix`); any
    other set of rows is padded."""
    if layout == "prefix":
        if len(rows) > 1 and _shared_prompt(input_ids, prompt_lengths, rows):
            return _pack_prefix(input_ids, prompt_lengths, rows, device, loss_masks)
        layout = "padded"
    fed = [list(input_ids[r][:-1]) for r in rows]
    width = max(map(len, fed)) if layout == "padded" else sum(map(len, fed))
    ids, positions, mask, target_pos, targets, seq_index, seq_lengths = [], [], [], [], [], [], []
    offset = 0
    for local, row in enumerate(rows):
        seq, p = input_ids[row], prompt_lengths[row]
        # Position t predicts token t+1: completion token seq[p + j] is predicted by position p - 1 + j.
        chosen = target_offsets(len(seq) - p, loss_masks[row] if loss_masks is not None else None)
        n = len(chosen)
        target_pos.extend(offset + p - 1 + j for j in chosen)
        targets.extend(seq[p + j] for j in chosen)
        seq_index.extend([local] * n)
        seq_lengths.append(n)
        pad = width - len(fed[local]) if layout == "padded" else 0
        ids.extend(fed[local] + [0] * pad)  # any valid id: padded positions are masked and never targets
        positions.extend(list(range(len(fed[local]))) + [0] * pad)
        mask.extend([1] * len(fed[local]) + [0] * pad)
        offset += len(fed[local]) + pad
    as_long = lambda v: torch.tensor(v, dtype=torch.long, device=device)  # noqa: E731
    shape = (len(rows), width) if layout == "padded" else (1, width)
    attention_mask = as_long(mask).view(shape) if 0 in mask else None
    return PackedRows(
        rows=list(rows),
        input_ids=as_long(ids).view(shape),
        position_ids=as_long(positions).view(shape),
        attention_mask=attention_mask,
        target_positions=as_long(target_pos),
        target_ids=as_long(targets),
        seq_index=as_long(seq_index),
        seq_lengths=as_long(seq_lengths),
    )


def _shared_prompt(input_ids, prompt_lengths, rows: Sequence[int]) -> bool:
    p = prompt_lengths[rows[0]]
    prompt = list(input_ids[rows[0]][:p])
    return all(prompt_lengths[r] == p and list(input_ids[r][:p]) == prompt for r in rows)


def _pack_prefix(input_ids, prompt_lengths, rows: Sequence[int], device, loss_masks) -> PackedRows:
    """Rows sharing a prompt of P tokens: the prompt [1, P] once, then each row's completion but its last token,
    right-padded to W. Flat positions: 0..P-1 are the prompt's outputs, P + b * W + k the output of completion
    token k of row b. Completion token j is predicted by the prompt's last output (P - 1) for j = 0, else by
    the output of completion token j - 1."""
    p = prompt_lengths[rows[0]]
    fed = [list(input_ids[r][p:-1]) for r in rows]
    width = max(map(len, fed))
    ids, positions, mask, target_pos, targets, seq_index, seq_lengths = [], [], [], [], [], [], []
    for local, row in enumerate(rows):
        seq = input_ids[row]
        chosen = target_offsets(len(seq) - p, loss_masks[row] if loss_masks is not None else None)
        target_pos.extend(p - 1 if j == 0 else p + local * width + j - 1 for j in chosen)
        targets.extend(seq[p + j] for j in chosen)
        seq_index.extend([local] * len(chosen))
        seq_lengths.append(len(chosen))
        pad = width - len(fed[local])
        ids.extend(fed[local] + [0] * pad)  # any valid id: padded positions are masked and never targets
        positions.extend(range(p, p + width))  # pads continue the count: masked, so any position would do
        mask.extend([1] * p + [1] * len(fed[local]) + [0] * pad)
    as_long = lambda v: torch.tensor(v, dtype=torch.long, device=device)  # noqa: E731
    shape = (len(rows), width)
    return PackedRows(
        rows=list(rows),
        input_ids=as_long(ids).view(shape),
        position_ids=as_long(positions).view(shape),
        attention_mask=as_long(mask).view(len(rows), p + width) if 0 in mask else None,
        target_positions=as_long(target_pos),
        target_ids=as_long(targets),
        seq_index=as_long(seq_index),
        seq_lengths=as_long(seq_lengths),
        prompt_ids=as_long(list(input_ids[rows[0]][:p])).view(1, p),
    )


def _prefix_hidden(decoder: torch.nn.Module, packed: PackedRows) -> torch.Tensor:
    """[P + B * W, hidden]: the prompt's last hidden states, then those of the rows' completions, which attend
    to the prompt's KV cache repeated per row. Grad flows through the cache into the prompt's pass, so the
    prompt's gradient is the sum of the rows' contributions, as if each row had run it."""
    prompt = packed.prompt_ids
    p = prompt.shape[1]
    out = decoder(input_ids=prompt, position_ids=torch.arange(p, device=prompt.device).view(1, p), use_cache=True)
    prompt_hidden = out.last_hidden_state.reshape(p, -1)
    rows, width = packed.input_ids.shape
    if width == 0:  # every completion has one token: all are predicted by the prompt's last position
        return prompt_hidden
    cache = out.past_key_values
    if cache is None:
        raise RuntimeError("the prefix layout needs the decoder's KV cache (gradient checkpointing drops it)")
    cache.batch_repeat_interleave(rows)
    hidden = decoder(
        input_ids=packed.input_ids,
        position_ids=packed.position_ids,
        attention_mask=packed.attention_mask,
        past_key_values=cache,
        use_cache=True,
    ).last_hidden_state
    return torch.cat([prompt_hidden, hidden.reshape(rows * width, -1)])


def _chunk_logprobs(
    hidden: torch.Tensor, targets: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, temperature: float
) -> tuple[torch.Tensor, torch.Tensor]:
    logits = torch.nn.functional.linear(hidden, weight, bias).float()
    if temperature != 1.0:
        logits = logits / temperature
    lse = torch.logsumexp(logits, dim=-1)
    logp = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - lse
    # H = lse - sum_v p_v * logit_v  (the entropy of softmax(logits))
    entropy = lse - (torch.softmax(logits, dim=-1) * logits).sum(-1)
    return logp, entropy


def chunk_bounds(total: int, chunk_tokens: int) -> list[tuple[int, int]]:
    """[start, end) of each lm_head chunk. A last chunk of one token joins the one before: torch.compile
    specialises size 1, so a lone token would cost a recompile (policy.compile) in the middle of a run."""
    bounds = [(start, min(start + chunk_tokens, total)) for start in range(0, total, chunk_tokens)]
    if len(bounds) > 1 and bounds[-1][1] - bounds[-1][0] == 1:
        bounds[-2:] = [(bounds[-2][0], total)]
    return bounds


@functools.cache
def _compiled_chunk_logprobs() -> Callable:
    """_chunk_logprobs through torch.compile (policy.compile): the float32 logits, logsumexp, gather and entropy
    fused instead of several [chunk, vocab] tensors; one graph for every chunk length (rl.learner.compiled)."""
    from rl.learner.compiled import compile_fn

    return compile_fn(_chunk_logprobs)


def completion_logprobs(
    causal_lm: torch.nn.Module, packed: PackedRows, *, temperature: float = 1.0, chunk_tokens: int = 1024
) -> tuple[torch.Tensor, torch.Tensor]:
    """(logprob, entropy) of every completion target of `packed`, float32, [N] each.

    `causal_lm` is a transformers *ForCausalLM (the peft-wrapped one's base model works too: adapters
    live inside its layers). Grad flows when grad is enabled.
    """
    logp, entropy, _ = completion_outputs(causal_lm, packed, temperature=temperature, chunk_tokens=chunk_tokens)
    return logp, entropy


def completion_outputs(
    causal_lm: torch.nn.Module,
    packed: PackedRows,
    *,
    temperature: float = 1.0,
    chunk_tokens: int = 1024,
    value_head: torch.nn.Module | None = None,
    with_logprobs: bool = True,
    compiled: bool = False,
) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
    """(logprob, entropy, value) of every completion target; value is None without a value head, logprob and
    entropy None with `with_logprobs=False` (PPO's scoring pass for the old values alone: no lm_head).

    The value of target t is the head applied to the hidden state of the position that predicts t: the
    critic's estimate of the return from the state before token t is sampled (PPO, rl.learner.ppo).
    `compiled`: the chunks' log-softmax through torch.compile (policy.compile).
    """
    decoder = causal_lm.get_decoder()
    head = causal_lm.get_output_embeddings()
    if packed.prompt_ids is not None:
        hidden = _prefix_hidden(decoder, packed)
    else:
        hidden = decoder(
            input_ids=packed.input_ids,
            position_ids=packed.position_ids,
            attention_mask=packed.attention_mask,
            use_cache=False,
        ).last_hidden_state
    hidden = hidden.reshape(-1, hidden.shape[-1])[packed.target_positions]
    weight, bias = _head_parameters(head)
    chunk_fn = _compiled_chunk_logprobs() if compiled else _chunk_logprobs
    logps, entropies = [], []
    for start, end in chunk_bounds(hidden.shape[0] if with_logprobs else 0, chunk_tokens):
        h = hidden[start:end]
        t = packed.target_ids[start:end]
        if torch.is_grad_enabled():
            # Keep only h for the backward; the chunk's logits are recomputed there.
            lp, ent = checkpoint(chunk_fn, h, t, weight, bias, temperature, use_reentrant=False)
        else:
            lp, ent = chunk_fn(h, t, weight, bias, temperature)
        logps.append(lp)
        entropies.append(ent)
    values = None
    if value_head is not None:
        values = value_head(hidden.to(value_head.weight.dtype)).squeeze(-1).float()
    if not with_logprobs:
        return None, None, values
    return torch.cat(logps), torch.cat(entropies), values


class PolicyNet(torch.nn.Module):
    """The policy (and PPO's value head) behind one forward call.

    One module whose forward computes everything the loss needs: FSDP2 (rl.learner.sharded) unshards the
    parameters it owns directly (embeddings, final norm, lm_head, value head) around this call, which the
    chunked lm_head above reads as plain tensors, outside the lm_head module's own forward.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        value_head: torch.nn.Module | None = None,
        peft: bool = False,
        compiled: bool = False,
    ):
        super().__init__()
        self.model = model
        self.value_head = value_head
        self.peft = peft
        self.compiled = compiled  # policy.compile: the chunked log-softmax compiled (the layers: rl.learner.compiled)

    @property
    def causal_lm(self) -> torch.nn.Module:
        return self.model.get_base_model() if self.peft else self.model

    def forward(
        self,
        packed: PackedRows,
        temperature: float = 1.0,
        chunk_tokens: int = 1024,
        with_values: bool = True,
        with_logprobs: bool = True,
    ):
        return completion_outputs(
            self.causal_lm,
            packed,
            temperature=temperature,
            chunk_tokens=chunk_tokens,
            value_head=self.value_head if with_values else None,
            with_logprobs=with_logprobs,
            compiled=self.compiled,
        )


def _head_parameters(head: torch.nn.Module) -> tuple[torch.Tensor, torch.Tensor | None]:
    if isinstance(head, torch.nn.Linear):
        return head.weight, head.bias
    raise TypeError(
        f"lm_head must be a torch.nn.Linear to be chunked, not {type(head).__name__} "
        "(a LoRA on lm_head is not supported: leave it out of lora.target_modules)"
    )


def check_supported(config) -> None:
    """Refuse architectures whose logits are not plain lm_head(hidden) (we compute them ourselves)."""
    for attr in ("final_logit_softcapping", "logit_scale", "logits_scaling"):
        value = getattr(config, attr, None)
        if value not in (None, 1, 1.0, 0):
            raise ValueError(
                f"model config has {attr}={value}: its logits are not lm_head(hidden), "
                "which the chunked logprobs assume"
            )
