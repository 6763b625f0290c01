"""The trainable policy: a transformers causal LM with a peft LoRA adapter (or all weights trainable),
its frozen reference, AdamW with an lr schedule, and the policy-gradient / SFT update steps.

The reference of a LoRA policy is the same base with the adapter disabled (`disable_adapter()`): no
second copy of the weights. A fully fine-tuned policy keeps a frozen copy, made only when kl_coef > 0.
With `algorithm=ppo` a value head (rl.learner.ppo) sits on the last hidden state, with its own AdamW.
`Policy` implements rl.types.Learner; rl.learner.actor puts it in a Ray actor, rl.learner.sharded subclasses it
for FSDP2 (the hooks `_prepare_modules`, `_local_micro_batches`, `_all_rows`, `_reduce_stats`, `grad_scale`).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import os
import random
import time
from typing import Any, Callable, Iterator, Literal, Sequence

import torch

from envs.gpu_lock import GpuGate
from rl.learner import checkpoint as ckpt
from rl.learner.config import AlgorithmConfig, PolicyConfig
from rl.learner.export import export_weights
from rl.learner.logprobs import (
    PackedRows,
    PolicyNet,
    check_supported,
    layout_for,
    pack_rows,
    plan_micro_batches,
    plan_prefix_micro_batches,
    target_offsets,
)
from rl.learner.losses import LossInputs, Normalizer, Stats, aggregate, policy_loss
from rl.learner.optim import build_optimizer
from rl.learner.ppo import token_advantages, value_loss, value_stats
from rl.types import TrainBatch, WeightUpdate

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("policy.device=cuda but no CUDA device is visible")
    return torch.device(name)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device


def load_causal_lm(config: PolicyConfig, device: torch.device):
    """The base model from a local HF directory, checked before anything heavy happens."""
    from transformers import AutoConfig, AutoModelForCausalLM

    path = config.model
    if not path or not os.path.isfile(os.path.join(path, "config.json")):
        raise FileNotFoundError(f"policy.model={path!r} is not a model directory (no config.json there)")
    check_supported(AutoConfig.from_pretrained(path))
    model = AutoModelForCausalLM.from_pretrained(
        path, dtype=_DTYPES[config.dtype], attn_implementation=config.attn_implementation
    )
    return model.to(device)


class Policy:
    def __init__(self, policy: PolicyConfig, algorithm: AlgorithmConfig, model: torch.nn.Module | None = None):
        """`model` (optional) replaces loading policy.model: a transformers causal LM, e.g. a random-init one."""
        if algorithm.loss_aggregation == "seq_mean_token_sum_norm" and algorithm.loss_max_tokens is None:
            raise ValueError(
                "loss_aggregation=seq_mean_token_sum_norm divides by a constant length: "
                "set algorithm.loss_max_tokens (normally the rollout's max_tokens)"
            )
        self.config = policy
        self.algorithm = algorithm
        self.device = resolve_device(policy.device)
        self._gate = GpuGate.for_current_device() if self.device.type == "cuda" else None
        self.layout = layout_for(policy.attn_implementation) if policy.layout == "auto" else policy.layout
        seed_everything(policy.seed)
        base = (
            model.to(device=self.device, dtype=_DTYPES[policy.dtype])
            if model is not None
            else load_causal_lm(policy, self.device)
        )
        check_supported(base.config)
        base.config.use_cache = False
        if policy.gradient_checkpointing:
            base.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        self.reference: torch.nn.Module | None = None
        if policy.finetune == "lora":
            from peft import LoraConfig, get_peft_model

            lora = policy.lora
            peft_config = LoraConfig(
                r=lora.r,
                lora_alpha=lora.alpha,
                lora_dropout=lora.dropout,
                target_modules=list(lora.target_modules),
                bias="none",
                task_type="CAUSAL_LM",
            )
            # autocast_adapter_dtype keeps the adapter in float32 over a bf16 base (AdamW on bf16 loses updates).
            self.model = get_peft_model(base, peft_config, autocast_adapter_dtype=True)
        else:
            self.model = base
            if algorithm.kl_coef > 0:
                self.reference = copy.deepcopy(base).eval().requires_grad_(False)
        self.source_dir = policy.model or None  # tokenizer files for merged exports come from here
        self.value_head: torch.nn.Module | None = None
        if algorithm.uses_critic:
            # float32 and zero-initialised: V = 0 everywhere at the start, the same on every rank
            self.value_head = torch.nn.Linear(base.config.hidden_size, 1, device=self.device, dtype=torch.float32)
            torch.nn.init.zeros_(self.value_head.weight)
            torch.nn.init.zeros_(self.value_head.bias)
        self.net = PolicyNet(self.model, self.value_head, peft=policy.finetune == "lora", compiled=policy.compile)
        self.reference_net = PolicyNet(self.reference, compiled=policy.compile) if self.reference is not None else None
        self._prepare_modules()
        if policy.compile:  # after FSDP2's fully_shard: its hooks stay outside the compiled forwards
            from rl.learner.compiled import compile_decoder_layers

            for net in (self.net, self.reference_net):
                if net is not None:
                    compile_decoder_layers(net.causal_lm)
        self.optimizer, self.scheduler = build_optimizer(
            (p for p in self.model.parameters() if p.requires_grad), policy.optimizer, self.device
        )
        self.value_optimizer = self.value_scheduler = None
        if self.value_head is not None:
            self.value_optimizer, self.value_scheduler = build_optimizer(
                self.value_head.parameters(),
                dataclasses.replace(policy.optimizer, lr=algorithm.ppo.value_lr),
                self.device,
            )
        self.version = 0  # train steps taken (the weights version the next export carries)
        self.optimizer_steps = 0

    # ------------------------------------------------------------------------- hooks of rl.learner.sharded
    grad_scale: float = 1.0  # the backward's loss multiplier (FSDP2 averages gradients over its ranks)

    def _prepare_modules(self) -> None:
        """Called once the modules exist and before the optimizers are built (FSDP2 shards here)."""

    def _local_micro_batches(self, rows: Sequence[int], input_ids, prompt_lengths) -> list[list[int] | None]:
        """The micro-batches (batch row indices) of `rows` this process runs. None: a pass without rows of
        its own, which a sharded rank with fewer rows makes so that every rank runs as many collectives."""
        budget = self.config.micro_batch_tokens
        if self.layout == "prefix":
            plan = plan_prefix_micro_batches([input_ids[r] for r in rows], [prompt_lengths[r] for r in rows], budget)
        else:
            plan = plan_micro_batches([len(input_ids[r]) for r in rows], budget, self.layout)
        return [[rows[i] for i in mb] for mb in plan]

    def _all_rows(self, part: dict[int, torch.Tensor]) -> dict[int, torch.Tensor]:
        """Per-row results of this process -> those of every process (sharded ranks gather)."""
        return part

    def _reduce_stats(self, local: Stats) -> Stats:
        """This process's metrics -> the whole mini-batch's (sharded ranks merge every rank's)."""
        return local

    # ----------------------------------------------------------------------------------------- logprobs
    @property
    def causal_lm(self) -> torch.nn.Module:
        """The transformers *ForCausalLM (inside the peft wrapper when LoRA is on)."""
        return self.net.causal_lm

    def _forward(
        self, packed: PackedRows, reference: bool = False, with_values: bool = False, with_logprobs: bool = True
    ):
        """(logprobs, entropy, values or None) of the completion targets of `packed` (logprobs and entropy
        None without `with_logprobs`: values only)."""
        kwargs = dict(temperature=self.algorithm.temperature, chunk_tokens=self.config.logprob_chunk_tokens)
        if not reference:
            return self.net(packed, with_values=with_values, with_logprobs=with_logprobs, **kwargs)
        if self.reference_net is not None:
            return self.reference_net(packed, with_values=False, **kwargs)
        with self.model.disable_adapter():
            return self.net(packed, with_values=False, **kwargs)

    @torch.no_grad()
    def _score(
        self,
        input_ids,
        prompt_lengths,
        reference: bool = False,
        with_values: bool = False,
        loss_masks=None,
        with_logprobs: bool = True,
    ) -> tuple[list[torch.Tensor] | None, list[torch.Tensor] | None]:
        """Per row: float32 logprobs of its completion tokens (of its masked-in tokens with `loss_masks`; None
        without `with_logprobs`), and the value head's values (eval mode, no grad)."""
        self.net.eval()
        logps: dict[int, torch.Tensor] = {}
        values: dict[int, torch.Tensor] = {}
        all_rows = list(range(len(input_ids)))
        for rows in self._local_micro_batches(all_rows, input_ids, prompt_lengths):
            packed = pack_rows(input_ids, prompt_lengths, rows or [0], self.device, self.layout, loss_masks)
            with self._gpu_step():
                logp, _, v = self._forward(packed, reference, with_values, with_logprobs)
            for local, row in enumerate(rows or []):
                if logp is not None:
                    logps[row] = logp[packed.seq_index == local]
                if v is not None:
                    values[row] = v[packed.seq_index == local]
        logps = self._all_rows(logps) if with_logprobs else None
        gathered = self._all_rows(values) if with_values else None
        return (
            None if logps is None else [logps[r] for r in all_rows],
            None if gathered is None else [gathered[r] for r in all_rows],
        )

    def _score_rows(self, input_ids, prompt_lengths, reference: bool = False, loss_masks=None) -> list[torch.Tensor]:
        return self._score(input_ids, prompt_lengths, reference, loss_masks=loss_masks)[0]

    def logprobs(self, input_ids: Sequence[Sequence[int]], prompt_lengths: Sequence[int]) -> list[list[float]]:
        """The trainer's logprobs of each row's completion tokens (to compare with an engine's)."""
        _check_rows(input_ids, prompt_lengths)
        return [t.tolist() for t in self._score_rows(input_ids, prompt_lengths)]

    # ---------------------------------------------------------------------------------------- updates
    def _optimizer_step(
        self,
        rows: Sequence[int],
        input_ids,
        prompt_lengths,
        micro_loss: Callable[..., tuple[torch.Tensor, Stats]],
        stats: Stats,
        with_values: bool = False,
        loss_masks=None,
    ) -> None:
        """Accumulate gradients over the micro-batches of `rows`, clip, step; metrics into `stats`. With
        `loss_masks`, only masked-in tokens are targets (logprobs.pack_rows), and the normalizers count them.

        micro_loss(packed, logp, entropy, values, norm) -> (loss, stats)."""
        self.net.train()
        norm = Normalizer(
            tokens=sum(_policy_tokens(input_ids, prompt_lengths, loss_masks, r) for r in rows),
            seqs=len(rows),
            max_tokens=self.algorithm.loss_max_tokens,
        )
        local = Stats()
        for mb in self._local_micro_batches(rows, input_ids, prompt_lengths):
            packed = pack_rows(input_ids, prompt_lengths, mb or [rows[0]], self.device, self.layout, loss_masks)
            with self._gpu_step():
                logp, entropy, values = self._forward(packed, with_values=with_values)
                loss, micro_stats = micro_loss(packed, logp, entropy, values, norm)
                if mb is None:
                    loss = loss * 0.0  # a rank without rows of its own: same collectives, no contribution
                else:
                    local.merge(micro_stats)
                (loss * self.grad_scale).backward()
        stats.merge(self._reduce_stats(local))
        max_norm = self.config.optimizer.max_grad_norm
        steps = [("grad_norm", self.optimizer, self.scheduler)]
        if with_values and self.value_optimizer is not None:
            steps.append(("value_grad_norm", self.value_optimizer, self.value_scheduler))
        for name, optimizer, scheduler in steps:
            with self._gpu_step():
                self._update(name, optimizer, scheduler, max_norm, stats)
        if self.value_optimizer is not None and not with_values:
            self.value_optimizer.zero_grad(set_to_none=True)
        self.optimizer_steps += 1

    def _update(self, name: str, optimizer, scheduler, max_norm: float | None, stats: Stats) -> None:
        """Clip, step and schedule one optimizer (a non-finite gradient norm skips the step)."""
        params = [p for group in optimizer.param_groups for p in group["params"]]
        norm_t = torch.nn.utils.clip_grad_norm_(params, max_norm if max_norm is not None else float("inf"))
        grad_norm = float(norm_t.full_tensor() if hasattr(norm_t, "full_tensor") else norm_t)  # FSDP2: a DTensor
        stats.add_mean(name, grad_norm, 1)
        if name == "grad_norm":
            stats.add_mean("lr", optimizer.param_groups[0]["lr"], 1)
        if torch.isfinite(torch.tensor(grad_norm)):
            optimizer.step()
        else:
            stats.add_total("skipped_steps", 1)  # a non-finite gradient would poison AdamW's moments
        optimizer.zero_grad(set_to_none=True)
        scheduler.step()

    @contextlib.contextmanager
    def _gpu_step(self) -> Iterator[None]:
        """One step of GPU work, held shared on the GPU's gate and finished before it is let go, so an
        evaluation timing kernels on the same GPU never has them overlap (envs.gpu_lock.GpuGate)."""
        if self._gate is None:
            yield
            return
        with self._gate.shared():
            yield
            torch.cuda.synchronize()

    def train_step(self, batch: TrainBatch) -> dict[str, float]:
        """ppo_epochs x mini_batches optimizer steps on the batch; returns the step's metrics."""
        start = time.perf_counter()
        _check_batch(batch)
        cuda = self.device.type == "cuda"
        if cuda:  # the step's own peak below, not the process's since it started
            torch.cuda.reset_peak_memory_stats(self.device)
        cfg = self.algorithm
        ids, plens, masks = batch.input_ids, batch.prompt_lengths, batch.loss_masks
        ppo = cfg.uses_critic
        # The engine's logprobs of the loss's tokens only (a masked token's entry is no sample of the policy).
        rollout = [
            None
            if lp is None
            else torch.tensor(
                [lp[j] for j in target_offsets(len(lp), masks[r] if masks is not None else None)],
                dtype=torch.float32,
                device=self.device,
            )
            for r, lp in enumerate(batch.rollout_logprobs)
        ]
        use_rollout = any(r is not None for r in rollout)
        from_rollout = cfg.old_logprobs == "rollout" and cfg.updates_per_batch > 1
        if from_rollout and any(r is None for r in rollout):
            raise ValueError(
                "algorithm.old_logprobs=rollout: some rows carry no engine logprobs "
                "(an engine that returns none); use old_logprobs=recompute"
            )
        # The old policy's logprobs need a pass of their own only when the weights change within the batch
        # (and the engine's are not taken instead); with one update they are the current logprobs, detached
        # (old = None). PPO's old values always need the pass; without old logprobs it skips the lm_head.
        recompute_old = cfg.updates_per_batch > 1 and not from_rollout
        old, old_values = (
            self._score(ids, plens, with_values=ppo, loss_masks=masks, with_logprobs=recompute_old)
            if recompute_old or ppo
            else (None, None)
        )
        if not recompute_old:
            old = rollout if from_rollout else None  # the sampler itself: its truncated IS weight is 1
        ref = self._score_rows(ids, plens, reference=True, loss_masks=masks) if cfg.kl_coef > 0 else None
        if ppo:
            if batch.rewards is None:
                raise ValueError("algorithm=ppo needs the batch's rewards (rl.learner.advantages.build_train_batch)")
            token_adv, returns = token_advantages(batch.rewards, old_values, cfg.ppo)
        else:
            # one per loss token (with a loss mask: per policy token; PPO's values above are per loss token too)
            token_adv = [
                torch.full((_policy_tokens(ids, plens, masks, r),), a, dtype=torch.float32, device=self.device)
                for r, a in enumerate(batch.advantages)
            ]

        def micro_loss(packed: PackedRows, logp, entropy, values, norm):
            def per_token(values: list[torch.Tensor] | None) -> torch.Tensor | None:
                return None if values is None else torch.cat([values[r] for r in packed.rows])

            n_rows = [int(n) for n in packed.seq_lengths]
            adv = per_token(token_adv)
            rollout_logp = None
            if use_rollout and not from_rollout:  # from the rollout: π_old is the engine's, the IS weight 1
                rollout_logp = torch.cat(
                    [
                        rollout[r] if rollout[r] is not None else torch.full((n,), float("nan"), device=self.device)
                        for r, n in zip(packed.rows, n_rows)
                    ]
                )
            x = LossInputs(
                logp=logp,
                old_logp=per_token(old) if old is not None else logp.detach(),
                advantages=adv,
                seq_index=packed.seq_index,
                seq_lengths=packed.seq_lengths,
                ref_logp=per_token(ref),
                entropy=entropy if cfg.entropy_coef > 0 else entropy.detach(),
                rollout_logp=rollout_logp,
            )
            loss, stats = policy_loss(x, cfg, norm)
            if from_rollout and updates_done == 0 and logp.numel():
                # Before the first update the trainer's logprobs are those of the weights that sampled: the
                # engine-trainer mismatch, measured on the first mini-batch's tokens.
                diff = (logp.detach() - x.old_logp).abs()
                stats.add_mean("rollout_logprob_diff_mean", diff.sum(), diff.numel())
                stats.add_max("rollout_logprob_diff_max", diff.max())
            if ppo:
                ret, old_v = per_token(returns), per_token(old_values)
                per_tok, clipped = value_loss(values, old_v, ret, cfg.ppo.value_clip)
                v_loss = aggregate(per_tok, packed.seq_index, packed.seq_lengths, cfg.loss_aggregation, norm)
                loss = loss + cfg.ppo.vf_coef * v_loss
                stats.merge(value_stats(values, ret, adv, clipped, v_loss))
                stats.totals["loss"] += cfg.ppo.vf_coef * float(v_loss.detach())
            return loss, stats

        stats = Stats()
        rows = list(range(len(ids)))
        updates_done = 0
        for epoch in range(cfg.ppo_epochs):
            order = rows
            if cfg.mini_batches > 1:
                # A generator of its own, seeded by (seed, version, epoch): reproducible and resumable
                # without touching the global RNG.
                g = torch.Generator().manual_seed(self.config.seed * 1_000_003 + self.version * 101 + epoch)
                order = torch.randperm(len(rows), generator=g).tolist()
            for part in _split(order, cfg.mini_batches):
                self._optimizer_step(part, ids, plens, micro_loss, stats, with_values=ppo, loss_masks=masks)
                updates_done += 1
        self.version += 1
        metrics = _step_metrics(stats, ids, plens, start, masks)
        metrics["optimizer_steps"] = float(cfg.updates_per_batch)
        if cuda:  # this process's peak of the step (rank 0's in a sharded group), in GiB
            metrics["max_memory_allocated_gb"] = torch.cuda.max_memory_allocated(self.device) / 2**30
            metrics["max_memory_reserved_gb"] = torch.cuda.max_memory_reserved(self.device) / 2**30
            # The step's activations go back to the driver: between steps a colocated engine and evaluation
            # workers need that memory, and kept in this process's cache it makes them run out of it.
            torch.cuda.empty_cache()
        return metrics

    def sft_step(self, input_ids: Sequence[Sequence[int]], prompt_lengths: Sequence[int]) -> dict[str, float]:
        """One optimizer step of cross-entropy on the completion tokens (token mean over the batch)."""
        start = time.perf_counter()
        _check_rows(input_ids, prompt_lengths)

        def micro_loss(packed: PackedRows, logp, entropy, values, norm):
            loss = -logp.sum() / norm.tokens
            s = Stats()
            s.add_total("loss", loss.detach())
            s.add_mean("entropy", entropy.detach().sum(), logp.numel())
            return loss, s

        stats = Stats()
        self._optimizer_step(list(range(len(input_ids))), input_ids, prompt_lengths, micro_loss, stats)
        self.version += 1
        return _step_metrics(stats, input_ids, prompt_lengths, start)

    # ------------------------------------------------------------------------------ export, checkpoints
    def export_weights(self, kind: Literal["lora", "merged"], path: str) -> WeightUpdate:
        start = time.perf_counter()
        export_weights(self.model, kind, path, lora=self.config.finetune == "lora", source_dir=self.source_dir)
        return WeightUpdate(version=self.version, kind=kind, path=path, seconds=time.perf_counter() - start)

    def save_checkpoint(self, path: str, extra: dict[str, Any] | None = None) -> None:
        ckpt.save(self, path, extra or {})

    def load_checkpoint(self, path: str) -> dict[str, Any]:
        """Restores weights, optimizer, scheduler, counters and RNG; returns the `extra` saved with them."""
        return ckpt.load(self, path)

    def trainable_state(self) -> dict[str, torch.Tensor]:
        state = {name: p for name, p in self.model.named_parameters() if p.requires_grad}
        if self.value_head is not None:
            state.update({f"value_head.{name}": p for name, p in self.value_head.named_parameters()})
        return state


def _split(order: list[int], parts: int) -> list[list[int]]:
    if parts > len(order):
        raise ValueError(f"mini_batches={parts} but the batch has only {len(order)} rows")
    size, rest = divmod(len(order), parts)
    out, start = [], 0
    for i in range(parts):
        end = start + size + (1 if i < rest else 0)
        out.append(order[start:end])
        start = end
    return out


def _policy_tokens(input_ids, prompt_lengths, loss_masks, row: int) -> int:
    mask = loss_masks[row] if loss_masks is not None else None
    return len(input_ids[row]) - prompt_lengths[row] if mask is None else sum(1 for m in mask if m)


def _step_metrics(stats: Stats, input_ids, prompt_lengths, start: float, loss_masks=None) -> dict[str, float]:
    metrics = stats.result()
    seconds = time.perf_counter() - start
    tokens = sum(len(s) for s in input_ids)
    metrics["tokens"] = float(tokens)
    # the tokens the loss was taken on (a trajectory's tool outputs are completion tokens outside the mask)
    metrics["completion_tokens"] = float(
        sum(_policy_tokens(input_ids, prompt_lengths, loss_masks, r) for r in range(len(input_ids)))
    )
    metrics["seconds"] = seconds
    metrics["tokens_per_s"] = tokens / seconds if seconds > 0 else 0.0
    return metrics


def _check_rows(input_ids: Sequence[Sequence[int]], prompt_lengths: Sequence[int]) -> None:
    if not input_ids or len(input_ids) != len(prompt_lengths):
        raise ValueError(f"{len(input_ids)} rows but {len(prompt_lengths)} prompt lengths (need >= 1 row)")
    for i, (seq, p) in enumerate(zip(input_ids, prompt_lengths)):
        if p < 1 or len(seq) <= p:
            raise ValueError(
                f"row {i}: prompt length {p} of {len(seq)} tokens (need >= 1 prompt and >= 1 completion token)"
            )


def _check_batch(batch: TrainBatch) -> None:
    _check_rows(batch.input_ids, batch.prompt_lengths)
    n = len(batch.input_ids)
    if len(batch.advantages) != n or len(batch.rollout_logprobs) != n:
        raise ValueError(
            f"batch of {n} rows has {len(batch.advantages)} advantages and "
            f"{len(batch.rollout_logprobs)} rollout logprob lists"
        )
    for i, (seq, p, lp) in enumerate(zip(batch.input_ids, batch.prompt_lengths, batch.rollout_logprobs)):
        if lp is not None and len(lp) != len(seq) - p:
            raise ValueError(f"row {i}: {len(lp)} rollout logprobs for {len(seq) - p} completion tokens")
    if batch.loss_masks is not None:
        if len(batch.loss_masks) != n:
            raise ValueError(f"batch of {n} rows has {len(batch.loss_masks)} loss masks")
        for i, (seq, p, mask) in enumerate(zip(batch.input_ids, batch.prompt_lengths, batch.loss_masks)):
            if mask is not None and (len(mask) != len(seq) - p or not any(mask)):
                raise ValueError(
                    f"row {i}: a loss mask of {len(mask)} ({sum(map(bool, mask))} set) for "
                    f"{len(seq) - p} completion tokens (needs one per token, at least one set)"
                )
