"""The calls a learner process answers for the driver by passing them to the policy it holds: one base for
rl.learner.actor.LearnerActor (a whole Policy) and rl.learner.group.LearnerRank (one rank of a ShardedPolicy),
so the two answer the rl.types.Learner methods the same way. How each opens and feeds the weight channel
differs (one sender; rank 0 of many), so each defines that itself."""

from __future__ import annotations

from typing import Any, Literal, Sequence

from rl.types import TrainBatch, WeightUpdate


class PolicyHost:
    """Every call goes to `self.policy` (set by the subclass) in this process."""

    policy: Any

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

    def channel_address(self) -> tuple[str, int]:
        """Where the weight channel (rl.rollout.broadcast) this process sends on will listen: this node, a free port."""
        from rl.learner.network import free_port, node_address

        return node_address(), free_port()
