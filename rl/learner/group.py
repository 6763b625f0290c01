"""The learner group: `policy.learner.world_size` Ray actors forming one torch.distributed group (NCCL on GPUs,
gloo on CPU), each owning one rank of an FSDP2 ShardedPolicy; `LearnerGroup` is the driver's rl.types.Learner.

    group = LearnerGroup.create(policy_cfg, algorithm_cfg)      # world_size >= 1 ranks in one placement group
    metrics = group.train_step(batch)                            # every rank gets the batch, takes its share
    update = group.export_weights("merged", "/dev/shm/kernelrl/v3")

Placement: one bundle {CPU: actor.num_cpus, GPU: actor.num_gpus} per rank, strategy PACK (one node when it fits)
or SPREAD (`policy.learner.placement`). Fractional `actor.num_gpus` (e.g. 0.5 with `policy.engine.num_gpus:
0.5`) lets Ray put a learner rank and a rollout engine on one GPU (colocated); whole GPUs keep them apart
(disaggregated). A rank that dies fails the call with the reason; the loop stops with the last checkpoint
(rl.loop.Trainer._learner). Without Ray (torchrun, the benchmark) `init_from_env` sets up the same group.
"""

from __future__ import annotations

import datetime
import os
from typing import Any, Literal, Sequence

from rl.learner.config import AlgorithmConfig, PolicyConfig
from rl.learner.host import PolicyHost
from rl.learner.network import free_port, node_address
from rl.types import TrainBatch, WeightUpdate


def init_process_group(rank: int, world_size: int, address: str, port: int, device: str) -> str:
    """Join the group (blocks until every rank has joined); returns the backend."""
    import torch
    import torch.distributed as dist

    cuda = device in ("auto", "cuda") and torch.cuda.is_available()
    backend = "nccl" if cuda else "gloo"
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)) if "LOCAL_RANK" in os.environ else 0)
    dist.init_process_group(
        backend,
        init_method=f"tcp://{address}:{port}",
        rank=rank,
        world_size=world_size,
        timeout=datetime.timedelta(minutes=30),
    )
    return backend


def init_from_env(device: str = "auto") -> tuple[int, int]:
    """torchrun's RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT, or a group of one in this process."""
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    address = os.environ.get("MASTER_ADDR", "127.0.0.1")
    port = int(os.environ.get("MASTER_PORT", 0)) or free_port()
    init_process_group(rank, world, address, port, device)
    return rank, world


class LearnerRank(PolicyHost):
    """One rank (a Ray actor): joins the group in `setup`, then runs ShardedPolicy's calls in step with the others."""

    def __init__(self, rank: int, world_size: int, algorithm: AlgorithmConfig, policy: PolicyConfig):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        self.rank, self.world_size = rank, world_size
        self.algorithm, self.policy_config = algorithm, policy
        self.policy: Any = None
        self.weight_channel: Any = None

    def address(self) -> tuple[str, int]:
        return node_address(), free_port()

    def setup(self, address: str, port: int) -> str:
        from rl.learner.sharded import ShardedPolicy

        backend = init_process_group(self.rank, self.world_size, address, port, self.policy_config.device)
        self.policy = ShardedPolicy(self.policy_config, self.algorithm)
        return backend

    # full-weight broadcast into the engines (rl.rollout.broadcast): rank 0 sends, every rank gathers
    def open_weight_channel(self, spec: dict[str, Any]) -> None:
        from rl.rollout.broadcast import ChannelSpec, open_channel

        if self.rank == 0:
            self.weight_channel = open_channel(ChannelSpec(**spec), 0)

    def send_weights(self) -> dict[str, float]:
        """Gather the serving weights and broadcast them from rank 0 (every rank calls it); rank 0's timings."""
        import time

        from rl.learner.full_state import serving_state_dict
        from rl.rollout.broadcast import send

        t0 = time.perf_counter()
        on_gpu = self.policy.device.type == "cuda"
        state = serving_state_dict(
            self.policy.net, self.policy.config, cpu=not on_gpu, rank0_only=not on_gpu, is_rank0=self.rank == 0
        )
        gathered = time.perf_counter() - t0
        if self.rank != 0:
            return {}
        out = send(self.weight_channel, state, self.policy.version)
        out["gather_s"] = gathered
        out["version"] = float(self.policy.version)
        return out


class LearnerGroup:
    """rl.types.Learner over the ranks of a learner group; each call runs on every rank and returns rank 0's answer."""

    def __init__(self, actors: list[Any], placement: Any):
        self.actors = actors
        self.placement = placement

    @staticmethod
    def create(
        policy: PolicyConfig | dict, algorithm: AlgorithmConfig | dict, startup_timeout: float = 900.0
    ) -> LearnerGroup:
        import ray
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        from rl.learner.actor import learner_resources
        from rl.placement import placed_group, resource_bundle

        if not isinstance(algorithm, AlgorithmConfig):
            algorithm = AlgorithmConfig.from_mapping(algorithm)
        if not isinstance(policy, PolicyConfig):
            policy = PolicyConfig.from_mapping(policy)
        resources = learner_resources(policy)
        bundle = resource_bundle(resources["num_cpus"], resources["num_gpus"])
        group = placed_group(
            [dict(bundle) for _ in range(policy.world_size)],
            "PACK" if policy.placement == "pack" else "SPREAD",
            f"{policy.world_size} learner ranks of {bundle}",
            startup_timeout,
        )
        actors = [
            ray.remote(LearnerRank)
            .options(
                num_cpus=resources["num_cpus"],
                num_gpus=resources["num_gpus"],
                max_restarts=0,
                scheduling_strategy=PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=i),
                runtime_env={"env_vars": {"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}},
            )
            .remote(i, policy.world_size, algorithm, policy)
            for i in range(policy.world_size)
        ]
        learner = LearnerGroup(actors, group)
        try:
            address, port = ray.get(actors[0].address.remote(), timeout=startup_timeout)
            ray.get([a.setup.remote(address, port) for a in actors], timeout=startup_timeout)
        except BaseException as e:
            learner.shutdown()
            if isinstance(e, ray.exceptions.RayError):
                raise RuntimeError(f"the learner group failed to start: {e}") from None
            raise
        return learner

    def _all(self, method: str, *args: Any) -> list[Any]:
        import ray

        return ray.get([getattr(a, method).remote(*args) for a in self.actors])

    def train_step(self, batch: TrainBatch) -> dict[str, float]:
        import ray

        return self._all("train_step", ray.put(batch))[0]

    def sft_step(self, input_ids: Sequence[Sequence[int]], prompt_lengths: Sequence[int]) -> dict[str, float]:
        return self._all("sft_step", input_ids, prompt_lengths)[0]

    def logprobs(self, input_ids: Sequence[Sequence[int]], prompt_lengths: Sequence[int]) -> list[list[float]]:
        return self._all("logprobs", input_ids, prompt_lengths)[0]

    def export_weights(self, kind: Literal["lora", "merged"], path: str) -> WeightUpdate:
        return self._all("export_weights", kind, path)[0]

    def save_checkpoint(self, path: str, extra: dict[str, Any] | None = None) -> None:
        self._all("save_checkpoint", path, extra)

    def load_checkpoint(self, path: str) -> dict[str, Any]:
        return self._all("load_checkpoint", path)[0]

    @property
    def version(self) -> int:
        import ray

        return ray.get(self.actors[0].version.remote())

    @property
    def device(self) -> str:
        import ray

        return ray.get(self.actors[0].device.remote())

    @property
    def weight_senders(self) -> list[Any]:
        return list(self.actors)

    def shutdown(self) -> None:
        import ray
        from ray.util.placement_group import remove_placement_group

        for actor in self.actors:
            ray.kill(actor)
        if self.placement is not None:
            remove_placement_group(self.placement)
        self.actors, self.placement = [], None
