"""The typed record of one multi-turn, tool-augmented trajectory, shared by the learner, W&B tables, the
benchmark and SFT (saved as JSONL, one trajectory per line).

`Trajectory` holds the problem, its `Turn`s (each generation's exact token ids and logprobs, its tool calls with
their results, the answer it proposed with its verdict and reward), the final answer and the reward.
`Trajectory.training_rows` gives the learner policy tokens only: `layout="concat"`, one row whose loss mask
covers every turn's completion (falling back to one row per turn when the chat template does not re-render
earlier turns to the same ids), or `layout="per_turn"`, one row per turn. Details: docs/tools.md."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Iterable, Literal

from envs.verdict import Verdict
from rl.types import Message

Layout = Literal["concat", "per_turn"]


@dataclasses.dataclass(frozen=True)
class ToolCallRecord:
    name: str
    arguments: dict[str, Any]
    result: str  # the observation the policy read
    ok: bool  # False: malformed call, unknown tool, bad arguments, timeout, budget spent, tool failure
    seconds: float = 0.0
    cost: dict[str, float] = dataclasses.field(default_factory=dict)
    call_id: str = ""
    verdict: Verdict | None = None  # kernel_evaluator's verdict


@dataclasses.dataclass(frozen=True)
class Turn:
    index: int
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float] | None
    text: str
    finish_reason: str
    seconds: float  # generation time of this turn
    tool_calls: list[ToolCallRecord] = dataclasses.field(default_factory=list)
    answer: str | None = None  # the code this turn proposed (submit, kernel_evaluator or its last code block)
    verdict: Verdict | None = None  # of `answer`, when the reward mode needed it evaluated
    reward: float | None = None  # of `answer` (0 when the turn proposed none)
    usage: dict[str, Any] | None = None  # the engine's usage of this turn (API engines: tokens, cost_usd)


@dataclasses.dataclass(frozen=True)
class TrainingRow:
    input_ids: list[int]
    loss_mask: list[int]  # one per input id: 1 = a policy token the loss is taken on
    logprobs: list[float | None]  # one per input id: the engine's logprob of policy tokens, None elsewhere
    reward: float  # the trajectory's reward (concat) or the turn's discounted return (per_turn)
    turn: int | None  # the turn of a per-turn row


@dataclasses.dataclass(frozen=True)
class Trajectory:
    trajectory_id: str  # request_id#index
    request_id: str
    problem_id: str
    index: int  # 0 .. n-1 within its request (the GRPO group)
    policy_version: int
    turns: list[Turn]
    messages: list[Message]  # the whole conversation, observations included (for inspection and SFT)
    final_answer: str
    final_verdict: Verdict | None
    reward: float  # by `reward_mode`
    turn_returns: list[float]  # per-turn discounted returns (reward_mode=discounted), else the reward per turn
    reward_mode: str
    stop_reason: str  # submit | no_tool_call | max_turns | token_budget | context_limit | length | error
    seconds: float = 0.0

    # ----------------------------------------------------------------------------- derived quantities
    @property
    def tool_calls(self) -> list[ToolCallRecord]:
        return [c for t in self.turns for c in t.tool_calls]

    @property
    def completion_tokens(self) -> int:
        return sum(len(t.completion_ids) for t in self.turns)

    def prefix_consistent(self) -> bool:
        """Whether each turn's prompt starts with the previous turn's prompt + completion (token ids)."""
        for prev, turn in zip(self.turns, self.turns[1:]):
            head = prev.prompt_ids + prev.completion_ids
            if turn.prompt_ids[: len(head)] != head:
                return False
        return True

    def training_rows(self, layout: Layout = "concat") -> list[TrainingRow]:
        if not self.turns:
            return []
        if layout == "per_turn" or not self.prefix_consistent():
            rewards = self.turn_returns if layout == "per_turn" else [self.reward] * len(self.turns)
            return [_row(t.prompt_ids, [t], r, t.index) for t, r in zip(self.turns, rewards) if t.completion_ids]
        last = self.turns[-1]
        return [_row(last.prompt_ids + last.completion_ids, self.turns, self.reward, None, whole=True)]

    # ----------------------------------------------------------------------------- serialization
    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["final_verdict"] = self.final_verdict.to_dict() if self.final_verdict else None
        for turn, td in zip(self.turns, d["turns"]):
            td["verdict"] = turn.verdict.to_dict() if turn.verdict else None
            for call, cd in zip(turn.tool_calls, td["tool_calls"]):
                cd["verdict"] = call.verdict.to_dict() if call.verdict else None
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Trajectory:
        d = dict(d)
        turns = []
        for td in d.pop("turns"):
            td = dict(td)
            calls = [
                ToolCallRecord(**{**c, "verdict": Verdict.from_dict(c["verdict"]) if c.get("verdict") else None})
                for c in td.pop("tool_calls")
            ]
            verdict = Verdict.from_dict(td.pop("verdict")) if td.get("verdict") else td.pop("verdict", None)
            turns.append(Turn(**td, tool_calls=calls, verdict=verdict))
        final = d.pop("final_verdict")
        return cls(**d, turns=turns, final_verdict=Verdict.from_dict(final) if final else None)


def _row(input_ids: list[int], turns: list[Turn], reward: float, turn: int | None, whole: bool = False) -> TrainingRow:
    """A row whose loss mask covers the completions of `turns` (each at its own prompt's end)."""
    ids = list(input_ids) if whole else list(turns[0].prompt_ids) + list(turns[0].completion_ids)
    mask = [0] * len(ids)
    logprobs: list[float | None] = [None] * len(ids)
    for t in turns:
        start = len(t.prompt_ids)
        for j in range(len(t.completion_ids)):
            mask[start + j] = 1
            if t.logprobs is not None:
                logprobs[start + j] = t.logprobs[j]
    return TrainingRow(ids, mask, logprobs, reward, turn)


def write_jsonl(path: str | Path, trajectories: Iterable[Trajectory], extra: dict[str, Any] | None = None) -> int:
    """Append trajectories to a JSONL file, each line with the `extra` keys too (the loop's step and split);
    returns how many were written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with path.open("a") as f:
        for t in trajectories:
            f.write(json.dumps({**(extra or {}), **t.to_dict()}) + "\n")
            n += 1
    return n


_FIELDS = {f.name for f in dataclasses.fields(Trajectory)}


def read_jsonl(path: str | Path) -> list[Trajectory]:
    """The trajectories of a JSONL file (keys that are not Trajectory fields, such as step and split, skipped)."""
    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    return [Trajectory.from_dict({k: v for k, v in row.items() if k in _FIELDS}) for row in rows]
