"""The learner as a Ray actor (rl.types.Learner): one process owning the Policy, on a GPU when there is one.

learner = LearnerActor.create(policy_cfg, algorithm_cfg)   # configs or Hydra mappings -> RemoteLearner
metrics = learner.train_step(batch)                         # rl.types.Learner, synchronous
update = learner.export_weights("merged", "/dev/shm/kernelrl/policy")
"""

from __future__ import annotations

from typing import Any, Literal, Sequence

from rl.learner.config import AlgorithmConfig, PolicyConfig
from rl.learner.host import PolicyHost
from rl.types import TrainBatch, WeightUpdate


class LearnerActor(PolicyHost):
    """Thin wrapper: every call goes to rl.learner.policy.Policy in the actor's process."""

    def __init__(self, algorithm: AlgorithmConfig | dict, policy: PolicyConfig | dict):
        from rl.learner.host_allocator import keep_freed_memory
        from rl.learner.policy import Policy, resolve_device  # torch/transformers load in the actor, not the driver

        if not isinstance(algorithm, AlgorithmConfig):
            algorithm = AlgorithmConfig.from_mapping(algorithm)
        if not isinstance(policy, PolicyConfig):
            policy = PolicyConfig.from_mapping(policy)
        if resolve_device(policy.device).type == "cpu":  # this process holds the learner alone
            keep_freed_memory()
        self.policy = Policy(policy, algorithm)

    # full-weight broadcast into the engines (rl.rollout.broadcast): this process is the sender, rank 0
    def open_weight_channel(self, spec: dict[str, Any]) -> None:
        from rl.rollout.broadcast import ChannelSpec, open_channel

        self.weight_channel = open_channel(ChannelSpec(**spec), 0)

    def send_weights(self) -> dict[str, float]:
        import time

        from rl.learner.export import merged_state_dict
        from rl.rollout.broadcast import send

        t0 = time.perf_counter()
        state = merged_state_dict(self.policy.model, self.policy.config.finetune == "lora")
        gathered = time.perf_counter() - t0
        out = send(self.weight_channel, state, self.policy.version)
        out["gather_s"] = gathered
        out["version"] = float(self.policy.version)
        return out


def learner_resources(policy: PolicyConfig) -> dict[str, float]:
    """Ray resources: policy.actor.num_gpus, or 1 GPU when the cluster has one and the device allows it."""
    import ray

    num_gpus = policy.actor.num_gpus
    if num_gpus is None:
        has_gpu = ray.cluster_resources().get("GPU", 0) >= 1
        num_gpus = 1.0 if has_gpu and policy.device in ("auto", "cuda") else 0.0
    if policy.device == "cuda" and num_gpus == 0:
        raise ValueError(
            "policy.device=cuda but the learner actor gets no GPU (policy.actor.num_gpus=0 "
            "or no GPU in the Ray cluster)"
        )
    return {"num_cpus": policy.actor.num_cpus, "num_gpus": num_gpus}


class RemoteLearner:
    """The driver's side of a learner actor: the rl.types.Learner methods, synchronous (each waits for
    its result), so the loop drives a local Policy and a remote one the same way."""

    def __init__(self, handle, placement: Any = None):
        self.handle = handle
        self.placement = placement  # the actor's placement group, removed at shutdown

    def _call(self, method: str, *args):
        import ray

        return ray.get(getattr(self.handle, method).remote(*args))

    def train_step(self, batch: TrainBatch) -> dict[str, float]:
        return self._call("train_step", batch)

    def sft_step(self, input_ids: Sequence[Sequence[int]], prompt_lengths: Sequence[int]) -> dict[str, float]:
        return self._call("sft_step", input_ids, prompt_lengths)

    def logprobs(self, input_ids: Sequence[Sequence[int]], prompt_lengths: Sequence[int]) -> list[list[float]]:
        return self._call("logprobs", input_ids, prompt_lengths)

    def export_weights(self, kind: Literal["lora", "merged"], path: str) -> WeightUpdate:
        return self._call("export_weights", kind, path)

    def save_checkpoint(self, path: str, extra: dict[str, Any] | None = None) -> None:
        self._call("save_checkpoint", path, extra)

    def load_checkpoint(self, path: str) -> dict[str, Any]:
        return self._call("load_checkpoint", path)

    @property
    def version(self) -> int:
        return self._call("version")

    @property
    def device(self) -> str:
        return self._call("device")

    @property
    def weight_senders(self) -> list[Any]:
        return [self.handle]

    def shutdown(self) -> None:
        import ray
        from ray.util.placement_group import remove_placement_group

        ray.kill(self.handle)
        if self.placement is not None:
            remove_placement_group(self.placement)
            self.placement = None


def _create(
    policy: PolicyConfig | dict, algorithm: AlgorithmConfig | dict, startup_timeout: float = 900.0, **ray_options
) -> RemoteLearner:
    """Start the learner actor (ray must be initialised) and wait until its model is loaded, so that a
    bad model path fails here with the reason. The actor gets a placement group of its own unless
    `ray_options` (given to .options(): name, scheduling) choose its scheduling: a cluster without room for
    it then says so (rl.placement) instead of waiting silently."""
    import ray
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    from rl.placement import placed_group, resource_bundle

    if not isinstance(algorithm, AlgorithmConfig):
        algorithm = AlgorithmConfig.from_mapping(algorithm)
    if not isinstance(policy, PolicyConfig):
        policy = PolicyConfig.from_mapping(policy)
    resources = learner_resources(policy)
    group = None
    if "scheduling_strategy" not in ray_options:
        bundle = resource_bundle(resources["num_cpus"], resources["num_gpus"])
        group = placed_group([bundle], "STRICT_PACK", f"the learner ({bundle})", startup_timeout)
        ray_options["scheduling_strategy"] = PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=0)
    handle = ray.remote(LearnerActor).options(**resources, **ray_options).remote(algorithm, policy)
    learner = RemoteLearner(handle, group)
    try:
        learner.version  # noqa: B018  (the first call returns once __init__ finished)
    except ray.exceptions.RayActorError as e:
        learner.shutdown()
        raise RuntimeError(f"the learner actor failed to start: {e}") from None
    return learner


# LearnerActor.create(policy, algorithm, **ray_options) -> RemoteLearner: the one way to start it.
LearnerActor.create = staticmethod(_create)
