"""The learner as a Ray actor (rl.types.Learner): one process owning the Policy, on a GPU when there is one.

    learner = create_learner(algorithm_cfg, policy_cfg)        # configs or Hydra mappings
    metrics = ray.get(learner.train_step.remote(batch))
    update = ray.get(learner.export_weights.remote("merged", "/dev/shm/kernelrl/policy"))
"""

from __future__ import annotations

from typing import Any, Literal, Sequence

from rl.learner.config import AlgorithmConfig, PolicyConfig
from rl.types import TrainBatch, WeightUpdate


class LearnerActor:
    """Thin wrapper: every call goes to rl.learner.policy.Policy in the actor's process."""

    def __init__(self, algorithm: AlgorithmConfig | dict, policy: PolicyConfig | dict):
        from rl.learner.policy import Policy  # torch/transformers load in the actor, not the driver

        if not isinstance(algorithm, AlgorithmConfig):
            algorithm = AlgorithmConfig.from_mapping(algorithm)
        if not isinstance(policy, PolicyConfig):
            policy = PolicyConfig.from_mapping(policy)
        self.policy = Policy(policy, algorithm)

    def train_step(self, batch: TrainBatch) -> dict[str, float]:
        return self.policy.train_step(batch)

    def sft_step(self, input_ids: Sequence[Sequence[int]], prompt_lengths: Sequence[int]) -> dict[str, float]:
        return self.policy.sft_step(input_ids, prompt_lengths)

    def logprobs(self, input_ids: Sequence[Sequence[int]], prompt_lengths: Sequence[int]) -> list[list[float]]:
        return self.policy.logprobs(input_ids, prompt_lengths)

    def export_weights(self, kind: Literal["lora", "merged"], path: str) -> WeightUpdate:
        return self.policy.export_weights(kind, path)

    def save_checkpoint(self, path: str, extra: dict[str, Any] | None = None) -> None:
        self.policy.save_checkpoint(path, extra)

    def load_checkpoint(self, path: str) -> dict[str, Any]:
        return self.policy.load_checkpoint(path)

    def version(self) -> int:
        return self.policy.version

    def device(self) -> str:
        return str(self.policy.device)


def learner_resources(policy: PolicyConfig) -> dict[str, float]:
    """Ray resources: policy.actor.num_gpus, or 1 GPU when the cluster has one and the device allows it."""
    import ray

    num_gpus = policy.actor.num_gpus
    if num_gpus is None:
        has_gpu = ray.cluster_resources().get("GPU", 0) >= 1
        num_gpus = 1.0 if has_gpu and policy.device in ("auto", "cuda") else 0.0
    if policy.device == "cuda" and num_gpus == 0:
        raise ValueError("policy.device=cuda but the learner actor gets no GPU (policy.actor.num_gpus=0 "
                         "or no GPU in the Ray cluster)")
    return {"num_cpus": policy.actor.num_cpus, "num_gpus": num_gpus}


def create_learner(algorithm: AlgorithmConfig | dict, policy: PolicyConfig | dict, **ray_options):
    """Start the learner actor (ray must be initialised); `ray_options` go to .options() (name, placement)."""
    import ray

    if not isinstance(algorithm, AlgorithmConfig):
        algorithm = AlgorithmConfig.from_mapping(algorithm)
    if not isinstance(policy, PolicyConfig):
        policy = PolicyConfig.from_mapping(policy)
    options = {**learner_resources(policy), **ray_options}
    return ray.remote(LearnerActor).options(**options).remote(algorithm, policy)
