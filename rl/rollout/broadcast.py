"""Full-weight sync by broadcast (`loop.sync=broadcast`): the learner's rank 0 sends every serving tensor to
every engine process over a process group of their own, built from a TCPStore (not the learners' group).

    rank 0            learner rank 0 (rl.learner.group.LearnerRank.send_weights, rl.learner.actor.LearnerActor)
    ranks 1..n        the engines' processes: hf engines (rl.rollout.hf_engine),
                      vLLM workers (rl.rollout.vllm_extension)

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
    header = json.dumps(
        {
            "version": version,
            "tensors": [[k, str(v.dtype).removeprefix("torch."), list(v.shape)] for k, v in state.items()],
        }
    ).encode()
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


class BroadcastSync:
    """The driver's side of `loop.sync=broadcast`: opens the channel once (learner rank 0 + every engine process),
    then each `sync()` runs the learner ranks' send (rank 0 broadcasts, the others join the gather) and the
    engines' receive at the same time. `senders`: the learner's Ray actor handles (`weight_senders`);
    `engine`: rl.rollout.actor.RayRolloutEngine."""

    def __init__(self, senders: list[Any], engine: Any, backend: str):
        self.senders, self.engine, self.backend = senders, engine, backend
        self.opened = False

    def open(self) -> None:
        import ray

        host, port = ray.get(self.senders[0].channel_address.remote())
        receivers = sum(self.engine.weight_receivers())
        spec = dataclasses.asdict(ChannelSpec(host, port, 1 + receivers, self.backend))
        ray.get([s.open_weight_channel.remote(spec) for s in self.senders] + self.engine.open_weight_channel(spec, 1))
        self.opened = True

    def sync(self) -> dict[str, float]:
        """Returns the learner's send timings, `receive_s` (slowest engine), `sync_s` (wall) and `version`."""
        import ray

        if not self.opened:
            self.open()
        t0 = time.perf_counter()
        sends = [s.send_weights.remote() for s in self.senders]
        receives = self.engine.receive_weights()
        out = dict(ray.get(sends)[0])
        out["receive_s"] = max(ray.get(receives))
        out["sync_s"] = time.perf_counter() - t0
        return out
