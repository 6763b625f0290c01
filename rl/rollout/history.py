"""How much of a trajectory's earlier turns the policy sees again (TrajectoryConfig.history).

- `full`: every earlier assistant message as it was written (the training row is then one prefix-consistent
  sequence, layout concat).
- `summary`: the policy is asked to end each message that calls a tool with `<summary>...</summary>` (what it
  tried, what it learned, what it will do next); from the next turn on, each earlier assistant message is
  shown as that summary, its tool calls and its last ```python block (the code the tools judged), and its
  other reasoning is dropped. Long reasoning then stops growing the context. The prompts of later turns no
  longer repeat the earlier completions token for token, so such a trajectory trains as one row per turn
  (Trajectory.training_rows falls back to per-turn rows, each with its own loss mask).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from rl.rollout.tool_calls import last_python_block, tool_call_blocks

History = Literal["full", "summary"]
HISTORIES = ("full", "summary")

SUMMARY_INSTRUCTIONS = (
    "Context is limited: end every message in which you call a tool with <summary>...</summary>, a few "
    "sentences on what you tried, what the results showed and what you will do next. In later turns your "
    "earlier messages are shown only as their summary, their tool calls and their last ```python block."
)

_SUMMARY = re.compile(r"<summary>(.*?)(?:</summary>|\Z)", re.DOTALL | re.IGNORECASE)


def summary_of(text: str) -> str | None:
    found = [s.strip() for s in _SUMMARY.findall(text) if s.strip()]
    return found[-1] if found else None


def summarized(message: dict[str, Any]) -> dict[str, Any]:
    """An earlier assistant message as the `summary` history shows it."""
    text = message.get("content") or ""
    parts = [f"<summary>{summary_of(text) or '(no summary written)'}</summary>"]
    code = last_python_block(text)
    if code is not None:
        parts.append(f"```python\n{code}\n```")
    parts += tool_call_blocks(text)
    return {**message, "content": "\n".join(parts)}


def context_messages(messages: list[dict[str, Any]], history: History) -> list[dict[str, Any]]:
    """The conversation as the next turn's prompt: unchanged for `full`; every assistant message summarized
    for `summary` (every assistant message in it is an earlier turn's)."""
    if history == "full":
        return [dict(m) for m in messages]
    return [summarized(m) if m.get("role") == "assistant" else dict(m) for m in messages]
