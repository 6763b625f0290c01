"""The LLM operators' prompts: fresh proposals (several strategies), mutation with verdict feedback, crossover,
and retrieval of similar solved kernels. Each returns the chat messages a policy answers.

All start from rl.prompts.PromptBuilder's messages (system rules, the optional one-shot example, the problem),
so the agent asks in the same format the policy was trained and benchmarked on, and add one instruction:
  fresh/<strategy>  a strategy hint appended to the problem turn
  mutate            [..., assistant: the parent's code, user: the evaluator's feedback on it (and, on a GPU, its
                    profile: rl.agent.profiles) + what to improve]
  crossover         the problem turn plus two earlier kernels, their verdicts (and GPU profiles), asking for one
                    that combines them
  retrieval         the problem turn plus verified kernels of OTHER similar problems (envs.retrieval.KernelIndex,
                    built from the solution store less held-out splits; the problem's own never returned)
Feedback is envs.tools.feedback.verdict_feedback, the `kernel_evaluator` tool's text (a hack names its rule,
never the detector's reason).
"""

from __future__ import annotations

from typing import Sequence

from envs.problems import Problem
from envs.retrieval import KernelIndex
from envs.source import extract_code
from envs.tools.feedback import verdict_feedback
from envs.tools.profile import format_profile
from rl.agent.records import CandidateRecord
from rl.prompts import PromptBuilder
from rl.types import Message

__all__ = ["STRATEGIES", "fresh_messages", "mutate_messages", "crossover_messages", "retrieval_messages"]

STRATEGIES = {
    "plain": "",
    "fused": "Strategy: fuse the whole computation into as few Triton kernels as possible (ideally one), keeping "
    "intermediates in registers instead of writing them to memory.",
    "tiled": "Strategy: use a tiled kernel: each program handles a BLOCK-sized tile (BLOCK sizes as tl.constexpr "
    "launch parameters), looping over the reduction dimension in tiles when there is one.",
    "autotuned": "Strategy: wrap the kernel in @triton.autotune with a few triton.Config choices of BLOCK sizes and "
    "num_warps, keyed on the problem's sizes.",
}
_MAX_CODE_CHARS = 6000
_ANSWER = "Answer with the complete solution (class ModelNew and its kernels) in one fenced python block."


def _code(record: CandidateRecord) -> str:
    code = extract_code(record.proposal.text).strip()
    return code if len(code) <= _MAX_CODE_CHARS else code[:_MAX_CODE_CHARS] + "\n# ... (truncated)"


def _append_to_last_user(messages: list[Message], text: str) -> list[Message]:
    """Add `text` to the last user turn (a second consecutive user turn breaks strict chat templates)."""
    out = [dict(m) for m in messages]
    for m in reversed(out):
        if m["role"] == "user":
            m["content"] = f"{m['content']}\n\n{text}"
            return out
    raise ValueError("the prompt has no user turn to extend")


def _feedback(record: CandidateRecord, profile: dict | None) -> str:
    text = verdict_feedback(record.verdict, record.reward)
    return text if profile is None else f"{text}\n\nWhere its device time goes:\n{format_profile(profile)}"


def fresh_messages(builder: PromptBuilder, problem: Problem, strategy: str) -> list[Message]:
    if strategy not in STRATEGIES:
        raise ValueError(f"fresh strategy must be one of {sorted(STRATEGIES)}, not {strategy!r}")
    messages = builder.build(problem).messages
    return _append_to_last_user(messages, STRATEGIES[strategy]) if STRATEGIES[strategy] else messages


def mutate_messages(
    builder: PromptBuilder, problem: Problem, parent: CandidateRecord, profile: dict | None = None
) -> list[Message]:
    """`profile`: the parent's GPU profile facts (envs/worker/profiling.py), shown after the verdict."""
    goal = (
        "Make it faster while keeping it correct: fuse work, pick better block sizes and warps, avoid "
        "redundant memory traffic."
        if parent.correct
        else "Fix it so that it is correct."
    )
    feedback = _feedback(parent, profile)
    return [
        *builder.build(problem).messages,
        {"role": "assistant", "content": f"```python\n{_code(parent)}\n```"},
        {"role": "user", "content": f"The evaluator ran this ModelNew:\n{feedback}\n\n{goal} {_ANSWER}"},
    ]


def crossover_messages(
    builder: PromptBuilder,
    problem: Problem,
    a: CandidateRecord,
    b: CandidateRecord,
    profiles: Sequence[dict | None] = (None, None),
) -> list[Message]:
    """`profiles`: each parent's GPU profile facts (or None), shown after its verdict as in mutate_messages."""
    parts = ["Two earlier solutions of this problem and the evaluator's verdicts on them:"]
    for name, record, profile in (("A", a, profiles[0]), ("B", b, profiles[1])):
        parts.append(f"### solution {name}\n```python\n{_code(record)}\n```\n{_feedback(record, profile)}")
    parts.append(
        "Write one solution that combines the strengths of both (the correct parts, the faster "
        f"techniques) and avoids their failures. {_ANSWER}"
    )
    return _append_to_last_user(builder.build(problem).messages, "\n\n".join(parts))


def retrieval_messages(builder: PromptBuilder, problem: Problem, index: KernelIndex, k: int = 2) -> list[Message]:
    """None of the hits is `problem`'s own (by id and source hash); held-out splits are not in `index`."""
    hits = index.search(problem.source, k=k, exclude_ids={problem.id}, exclude_sha256={problem.sha256})
    messages = builder.build(problem).messages
    if not hits:
        return messages
    parts = ["Verified Triton solutions of similar problems (other problems: adapt, do not copy blindly):"]
    for hit in hits:
        r = hit.record
        speed = f"{r.speedup:.2f}x" if r.speedup is not None else "speedup not measured"
        parts.append(
            f"### problem {r.problem_id} ({speed})\n```python\n{r.problem_source.strip()[:_MAX_CODE_CHARS]}\n"
            f"```\n### its solution\n```python\n{r.solution.strip()[:_MAX_CODE_CHARS]}\n```"
        )
    return _append_to_last_user(messages, "\n\n".join(parts))
