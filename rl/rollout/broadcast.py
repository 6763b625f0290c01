"""Full-weight sync by broadcast (`loop.sync=broadcast`): the learner's rank 0 sends every serving tensor to
every engine process over a process group of their own, built from a TCPStore (not the learners' group).

    rank 0            learner rank 0 (rl.learner.group.LearnerRank.send_weights, rl.learner.actor.LearnerActor)
    ranks 1..n        the engines' processes: hf engines (rl.rollout.hf_engine), vLLM workers (rl.rollout.vllm_extension)

Backends: NCCL between GPU processes on different GPUs (NCCL refuses two ranks on one GPU); gloo on CPU, and
for processes sharing one GPU (gloo stages CUDA tensors through the host). Protocol, per sync: an int64 length
and a uint8 JSON header (version, then name / dtype / shape of each tensor), then one broadcast per tensor in
the header's order. Receivers allocate from the header, so nothing else needs to agree in advance.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import time
from typing import Any, Iterator

import torch


@dataclasses.dataclass(frozen=True)
class ChannelSpec:
    host: str  # where rank 0 (the sender) listens
    port: int
    world_size: int  # 1 sender + receivers
    backend: str  # "nccl" | "gloo"
    timeout_s: float = 600.0

    def __post_init__(self) -> None:
        if self.backend not in ("nccl", "gloo"):
            raise ValueError(f"weight channel backend must be nccl or gloo, not {self.backend!r}")
        if self.world_size < 2:
            raise ValueError("a weight channel needs a sender and at least one receiver")


@dataclasses.dataclass
class Channel:
    group: Any  # a torch ProcessGroup of this channel only
    rank: int
    device: torch.device


def open_channel(spec: ChannelSpec, rank: int) -> Channel:
    """Join the channel (blocks until all world_size ranks have joined)."""
    import torch.distributed as dist

    timeout = datetime.timedelta(seconds=spec.timeout_s)
    store = dist.TCPStore(spec.host, spec.port, spec.world_size, is_master=rank == 0, timeout=timeout)
    if spec.backend == "gloo":
        group = dist.ProcessGroupGloo(store, rank, spec.world_size, timeout)
        device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
    else:
        options = dist.ProcessGroupNCCL.Options()
        options._timeout = timeout
        group = dist.ProcessGroupNCCL(store, rank, spec.world_size, options)
        device = torch.device("cuda", torch.cuda.current_device())
    return Channel(group=group, rank=rank, device=device)


def _broadcast(channel: Channel, tensor: torch.Tensor) -> None:
    import torch.distributed as dist

    opts = dist.BroadcastOptions()
    opts.rootRank = 0
    channel.group.broadcast([tensor], opts).wait()


def send(channel: Channel, state: dict[str, torch.Tensor], version: int) -> dict[str, float]:
    """Rank 0: broadcast `state` (name -> tensor); returns seconds and bytes."""
    t0 = time.perf_counter()
    header = json.dumps({"version": version, "tensors": [[k, str(v.dtype).removeprefix("torch."), list(v.shape)]
                                                         for k, v in state.items()]}).encode()
    _broadcast(channel, torch.tensor([len(header)], dtype=torch.long, device=channel.device))
    _broadcast(channel, torch.frombuffer(bytearray(header), dtype=torch.uint8).to(channel.device))
    total = 0
    for value in state.values():
        tensor = value.detach().to(channel.device).contiguous()
        _broadcast(channel, tensor)
        total += tensor.numel() * tensor.element_size()
    if channel.device.type == "cuda":
        torch.cuda.synchronize(channel.device)
    return {"broadcast_s": time.perf_counter() - t0, "bytes": float(total), "tensors": float(len(state))}


def receive(channel: Channel) -> tuple[int, Iterator[tuple[str, torch.Tensor]]]:
    """Ranks 1..n: the version, and the tensors as they arrive (consume the iterator fully, in order)."""
    length = torch.zeros(1, dtype=torch.long, device=channel.device)
    _broadcast(channel, length)
    raw = torch.zeros(int(length), dtype=torch.uint8, device=channel.device)
    _broadcast(channel, raw)
    header = json.loads(bytes(raw.cpu().tolist()).decode())

    def tensors() -> Iterator[tuple[str, torch.Tensor]]:
        for name, dtype, shape in header["tensors"]:
            tensor = torch.empty(shape, dtype=getattr(torch, dtype), device=channel.device)
            _broadcast(channel, tensor)
            yield name, tensor

    return int(header["version"]), tensors()
