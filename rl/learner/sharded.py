"""The policy as one rank of an FSDP2 group: `ShardedPolicy`, the rl.types.Learner of each learner-group actor.

Every rank receives the whole TrainBatch and takes its share of every mini-batch's rows (balanced by tokens,
longest first, the same assignment on every rank). The loss of a rank's micro-batch is normalised by the
whole mini-batch's counts (rl.learner.losses.Normalizer), so the ranks' losses add up to the single-process
loss; FSDP2 averages gradients over the ranks, so the backward multiplies by the world size. A rank with fewer
micro-batches than another runs empty ones (loss x 0): every FSDP2 forward and backward is a collective that
all ranks must join. Metrics are merged over the ranks; logprobs and values of scoring passes are gathered,
so every rank holds the batch's old logprobs, values and advantages (PPO whitens them over the whole batch).

Sharding: each decoder layer is one FSDP2 unit, the PolicyNet (embeddings, final norm, lm_head, value head)
the root. bf16 (`policy.dtype=bfloat16`) is mixed precision here: float32 master weights and AdamW state,
bf16 compute, float32 gradient reduction. `policy.cpu_offload` keeps the shards and AdamW on the host.
Checkpoints are torch.distributed.checkpoint directories (rl.learner.sharded_checkpoint), loadable at any
world size, also by the single-process Policy; exports gather the full weights on rank 0 (rl.learner.full_state).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Literal

import torch
import torch.distributed as dist

from rl.learner.config import AlgorithmConfig, PolicyConfig
from rl.learner.losses import Stats
from rl.learner.policy import Policy
from rl.types import WeightUpdate


def fsdp_available() -> bool:
    try:
        from torch.distributed.fsdp import fully_shard  # noqa: F401  (public in torch >= 2.6)
    except ImportError:
        return False
    return True


class ShardedPolicy(Policy):
    def __init__(self, policy: PolicyConfig, algorithm: AlgorithmConfig, model: torch.nn.Module | None = None):
        if not dist.is_initialized():
            raise RuntimeError("ShardedPolicy needs an initialised torch.distributed group (rl.learner.group)")
        if policy.layout == "prefix":  # a group of one rank too (PolicyConfig refuses world_size > 1)
            raise ValueError("policy.layout=prefix is not supported by the FSDP2 learner: use layout padded or auto")
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        self.grad_scale = float(self.world_size)
        # bf16 is FSDP2 mixed precision: the parameters stay float32 (AdamW on bf16 weights loses small updates)
        self.mixed_precision = policy.dtype == "bfloat16"
        super().__init__(dataclasses.replace(policy, dtype="float32"), algorithm, model)
        self.config = policy

    # ------------------------------------------------------------------------------------------ hooks
    def _prepare_modules(self) -> None:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard

        mesh = init_device_mesh(self.device.type, (self.world_size,))
        kwargs: dict[str, Any] = {"mesh": mesh}
        if self.mixed_precision:
            kwargs["mp_policy"] = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        if self.config.cpu_offload:
            kwargs["offload_policy"] = CPUOffloadPolicy()
        for net in (self.net, self.reference_net):
            if net is None:
                continue
            for layer in net.causal_lm.get_decoder().layers:
                fully_shard(layer, **kwargs)
            fully_shard(net, **kwargs)

    def _local_micro_batches(self, rows, input_ids, prompt_lengths):
        load = [0] * self.world_size
        mine = []
        for r in sorted(rows, key=lambda r: (-len(input_ids[r]), r)):
            k = load.index(min(load))
            load[k] += len(input_ids[r])
            if k == self.rank:
                mine.append(r)
        plan: list[list[int] | None] = (
            super()._local_micro_batches(sorted(mine), input_ids, prompt_lengths) if mine else []
        )
        count = torch.tensor([len(plan)], dtype=torch.long, device=self._comm_device)
        dist.all_reduce(count, op=dist.ReduceOp.MAX)
        return plan + [None] * (int(count) - len(plan))

    def _all_rows(self, part: dict[int, torch.Tensor]) -> dict[int, torch.Tensor]:
        parts: list[Any] = [None] * self.world_size
        dist.all_gather_object(parts, {r: t.detach().cpu() for r, t in part.items()})
        return {r: t.to(self.device) for p in parts for r, t in p.items()}

    def _reduce_stats(self, local: Stats) -> Stats:
        parts: list[Any] = [None] * self.world_size
        dist.all_gather_object(parts, (local.sums, local.counts, local.maxes, local.mins, local.totals))
        merged = Stats()
        for sums, counts, maxes, mins, totals in parts:
            other = Stats()
            other.sums, other.counts, other.maxes, other.mins, other.totals = sums, counts, maxes, mins, totals
            merged.merge(other)
        return merged

    @property
    def _comm_device(self) -> torch.device:
        return self.device if dist.get_backend() == "nccl" else torch.device("cpu")

    # ------------------------------------------------------------------------------ export, checkpoints
    def full_weights(self) -> dict[str, torch.Tensor] | None:
        """The serving weights (HF names, LoRA merged) gathered on rank 0 (CPU); None on the other ranks.
        Every rank must call it (the gather is a collective)."""
        from rl.learner.full_state import serving_state_dict

        return serving_state_dict(self.net, self.config, cpu=True, rank0_only=True, is_rank0=self.rank == 0)

    def export_weights(self, kind: Literal["lora", "merged"], path: str) -> WeightUpdate:
        """A merged HF directory written by rank 0 (every rank must call it: the weights are gathered)."""
        from rl.learner.export import write_merged

        if kind != "merged":
            raise ValueError("a sharded learner exports merged weights only (loop.sync=merged or broadcast)")
        start = time.perf_counter()
        state = self.full_weights()
        if self.rank == 0:
            write_merged(state, self.causal_lm, path, self.source_dir)
        dist.barrier()
        return WeightUpdate(version=self.version, kind=kind, path=path, seconds=time.perf_counter() - start)

    def save_checkpoint(self, path: str, extra: dict[str, Any] | None = None) -> None:
        from rl.learner import sharded_checkpoint

        sharded_checkpoint.save(self, path, extra or {})

    def load_checkpoint(self, path: str) -> dict[str, Any]:
        from rl.learner import sharded_checkpoint

        return sharded_checkpoint.load(self, path)
