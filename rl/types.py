"""The records that cross process boundaries in the RL loop, and the two interfaces the loop drives.

    problems --(rl.prompts)--> RolloutRequest --(RolloutEngine)--> Sample
    Sample --(evaluation pool + rewards/)--> ScoredSample; the ScoredSamples of one request form a Group
    Groups --(rl.learner.advantages)--> TrainBatch --(Learner.train_step)--> metrics, WeightUpdate
    WeightUpdate --(RolloutEngine.update_weights)--> the engines serve the new policy

Everything here is a plain dataclass of Python scalars and lists, so that records travel through Ray
(pickled) and into JSONL (dataclasses.asdict) unchanged. Token ids and logprobs are lists, not
tensors: tensors do not survive every transport (vLLM's collective_rpc drops them, for one).
"""

from __future__ import annotations

import dataclasses
from typing import Any, AsyncIterator, Literal, Protocol, runtime_checkable

from envs.verdict import Status, Verdict

Message = dict[str, str]  # one chat message: {"role": "system" | "user" | "assistant" | "tool", "content": ...}
FinishReason = Literal["stop", "length", "abort", "error"]


@dataclasses.dataclass(frozen=True)
class SamplingConfig:
    """How the rollout engine samples. The same values go to vLLM, transformers and OpenAI-compatible APIs."""

    n: int = 4  # samples per prompt (the GRPO group size)
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 512
    seed: int | None = None  # per-request seeds are derived from it, so a step is reproducible
    stop: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class RolloutRequest:
    """One prompt to sample `sampling.n` completions for."""

    request_id: str  # unique within a run, e.g. "step3/p7"
    problem_id: str
    messages: list[Message]
    sampling: SamplingConfig
    policy_version: int = 0  # the weights version the engine must serve (checked by engines that can)
    # OpenAI function-calling declarations offered with this prompt (native tool calling: the openai engine
    # sends them as `tools`); None: no tools, or tools offered in the prompt's text (rl/rollout/tool_calls.py)
    tools: list[dict[str, Any]] | None = None


@dataclasses.dataclass(frozen=True)
class Sample:
    """One completion of one request, as the engine produced it."""

    request_id: str
    problem_id: str
    index: int  # 0 .. n-1 within its request
    prompt_ids: list[int]
    completion_ids: list[int]
    text: str
    logprobs: list[float] | None  # the engine's logprob of each sampled token (len == len(completion_ids))
    finish_reason: FinishReason
    policy_version: int  # the weights version that generated it
    seconds: float = 0.0  # from the request's start to this sample's last token
    usage: dict[str, Any] = dataclasses.field(default_factory=dict)  # API engines: tokens, cost, retries
    # Native function calls of the response, in the API's schema ([{"id", "type": "function", "function":
    # {"name", "arguments": "<json>"}}]); None: the engine has none (text formats are parsed from `text`)
    tool_calls: list[dict[str, Any]] | None = None
    # One per completion token, 1 = the policy wrote it (trained on), 0 = not (a tool's output inside a
    # multi-turn row); None: every completion token is the policy's
    loss_mask: list[int] | None = None


@dataclasses.dataclass(frozen=True)
class ScoredSample:
    """A sample with its verdict and the reward the learner sees (Makora's reward plus optional shaping)."""

    sample: Sample
    verdict: Verdict
    reward: float
    reward_parts: dict[str, float] = dataclasses.field(default_factory=dict)  # {"kernel_reward": .., "overlong": ..}


@dataclasses.dataclass(frozen=True)
class Group:
    """All samples of one request: the unit group-normalized advantages are computed over."""

    request_id: str
    problem_id: str
    samples: list[ScoredSample]

    @property
    def rewards(self) -> list[float]:
        return [s.reward for s in self.samples]

    def judged(self) -> Group:
        """The samples the environment gave a verdict on. An `internal_error` (the GPU out of memory because of
        other processes, no worker that could start) says nothing about the sample: its reward of 0 would push
        the policy away from what may be a correct kernel, so the learner does not see it."""
        keep = [s for s in self.samples if s.verdict.status is not Status.INTERNAL_ERROR]
        return self if len(keep) == len(self.samples) else dataclasses.replace(self, samples=keep)


@dataclasses.dataclass(frozen=True)
class TrainBatch:
    """What one learner step consumes: one row per sample (prompt + completion tokens)."""

    input_ids: list[list[int]]  # prompt_ids + completion_ids
    prompt_lengths: list[int]  # loss only on the completion: tokens [prompt_length:] of each row
    advantages: list[float]  # one per row (sequence-level, broadcast over its completion tokens)
    rollout_logprobs: list[list[float] | None]  # engine logprobs of the completion tokens, for importance sampling
    group_ids: list[str]  # which Group each row came from (for token- vs sequence-level aggregation)
    policy_version: int  # the weights version that generated the batch
    # Per row, one 0/1 per completion token: the loss is taken only where it is 1 (policy tokens; tool outputs
    # between the turns of a trajectory are 0). None, or a None row: every completion token counts.
    loss_masks: list[list[int] | None] | None = None
    rewards: list[float] | None = None  # one per row: PPO's critic (advantage=gae) turns them into token advantages


@dataclasses.dataclass(frozen=True)
class WeightUpdate:
    """Where the learner left the weights for the engines to load after a step."""

    version: int
    kind: Literal["lora", "merged"]  # a peft adapter directory, or a full HF model directory (merged)
    path: str
    seconds: float = 0.0  # time the learner took to write it


@runtime_checkable
class RolloutEngine(Protocol):
    """Generates samples; implemented by rl.rollout's vllm, hf and openai engines (usually inside a Ray actor)."""

    def generate(self, requests: list[RolloutRequest]) -> AsyncIterator[Sample]:
        """Yield every sample of every request as soon as it is finished (not in request order)."""
        ...

    def update_weights(self, update: WeightUpdate) -> float:
        """Serve the weights of `update` from now on; returns the seconds it took."""
        ...

    def shutdown(self) -> None: ...


@runtime_checkable
class Learner(Protocol):
    """Owns the trainable policy (rl.learner), usually inside a Ray actor."""

    def train_step(self, batch: TrainBatch) -> dict[str, float]:
        """One optimizer step on the batch; returns the step's metrics (loss, kl, entropy, grad_norm, ...)."""
        ...

    def export_weights(self, kind: Literal["lora", "merged"], path: str) -> WeightUpdate: ...

    def save_checkpoint(self, path: str, extra: dict[str, Any] | None = None) -> None:
        """Atomically save everything needed to resume, plus the caller's JSON-serializable `extra`."""
        ...

    def load_checkpoint(self, path: str) -> dict[str, Any]:
        """Restore a checkpoint; returns the `extra` it was saved with (e.g. the loop's data position)."""
        ...
