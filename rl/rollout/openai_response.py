"""From a Chat Completions response to rl.types.Sample records: text, token ids, logprobs, usage and cost.

Pure functions of the response (plus the price table and an optional tokenizer), so the accounting
rules live in one place:
- token ids come from the server when it returns them (vLLM's `return_token_ids`), else from the
  configured tokenizer (chat template for the prompt), else stay empty (`usage["token_ids"]` says which);
- logprobs are kept only when they align one-to-one with the completion ids;
- one request bills its prompt once: the prompt's cost is split evenly over the request's samples,
  the completion cost by each sample's share of completion tokens (evenly when per-sample counts are
  unknown), so the samples' costs add up to the request's.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

from rl.rollout.pricing import PriceTable, RequestUsage
from rl.types import FinishReason, Message, RolloutRequest, Sample

__all__ = [
    "FINISH_REASONS",
    "MalformedResponse",
    "ResponseSamples",
    "encode_chat",
    "error_samples",
    "load_tokenizer",
    "request_usage",
    "response_samples",
]

FINISH_REASONS: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "stop",
    "function_call": "stop",
    "content_filter": "abort",
    "abort": "abort",
    "error": "error",
}  # anything else: abort


class MalformedResponse(ValueError):
    """A 200 answer that is not a chat completion (a broken server or proxy)."""


@dataclasses.dataclass(frozen=True)
class ResponseSamples:
    samples: list[Sample]
    usage: RequestUsage
    cost: float | None  # None: the model has no price
    token_ids: str  # "server" | "tokenizer" | "none" (of the prompt)


def request_usage(response: Any) -> RequestUsage:
    u = getattr(response, "usage", None)
    if u is None:
        return RequestUsage()
    details = getattr(u, "completion_tokens_details", None)
    prompt_details = getattr(u, "prompt_tokens_details", None)
    return RequestUsage(
        prompt_tokens=int(u.prompt_tokens or 0),
        completion_tokens=int(u.completion_tokens or 0),
        reasoning_tokens=int(getattr(details, "reasoning_tokens", None) or 0),
        cached_prompt_tokens=int(getattr(prompt_details, "cached_tokens", None) or 0),
    )


def encode_chat(tokenizer: Any, messages: list[Message]) -> list[int]:
    ids = tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
    if hasattr(ids, "keys"):  # transformers 5 returns a BatchEncoding
        ids = ids["input_ids"]
    return [int(i) for i in ids]


def load_tokenizer(path: str) -> Any:
    """An HF tokenizer from a model/tokenizer directory (or cached hub name), or from a .gguf file.
    Raises ValueError with the reason."""
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise ValueError("`tokenizer` is set but transformers is not installed") from None
    try:
        if path.endswith(".gguf"):
            directory, name = os.path.split(path)
            return AutoTokenizer.from_pretrained(directory or ".", gguf_file=name)
        return AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError) as e:
        raise ValueError(f"cannot load tokenizer {path!r}: {' '.join(str(e).split())[:300]}") from None


def _ids(value: Any) -> list[int] | None:
    return [int(i) for i in value] if isinstance(value, list) and value else None


def _logprobs(choice: Any) -> list[float] | None:
    content = getattr(getattr(choice, "logprobs", None), "content", None)
    return [float(t.logprob) for t in content] if content else None


def _tool_calls(message: Any) -> list[dict[str, Any]] | None:
    """The message's native function calls as plain dicts in the API's schema (what a later request sends
    back in the assistant message); None when it made none. Calls of other types are kept as they are."""
    calls = getattr(message, "tool_calls", None)
    if not calls:
        return None
    out = []
    for call in calls:
        d = call.model_dump(exclude_none=True) if hasattr(call, "model_dump") else dict(call)
        function = d.get("function") or {}
        if isinstance(function, dict) and not isinstance(function.get("arguments", ""), str):
            function = {**function, "arguments": json.dumps(function["arguments"])}
        out.append({**d, "type": d.get("type", "function"), "function": function})
    return out


def _choices(response: Any) -> list[Any]:
    """The response's choices in index order; MalformedResponse when they are not choices at all
    (the SDK builds its objects without validating them)."""
    choices = getattr(response, "choices", None) or []
    ok = isinstance(choices, list) and all(
        isinstance(getattr(c, "index", None), int)
        and getattr(c, "message", None) is not None
        and isinstance(getattr(c.message, "content", None), (str, type(None)))
        for c in choices
    )
    if not ok:
        raise MalformedResponse(f"the answer is not a chat completion: choices={str(choices)[:200]}")
    return sorted(choices, key=lambda c: c.index)


def response_samples(
    request: RolloutRequest,
    indices: list[int],
    response: Any,
    *,
    model: str,
    prices: PriceTable,
    tokenizer: Any = None,
    seconds: float = 0.0,
    extra_usage: dict[str, Any] | None = None,
) -> ResponseSamples:
    """The samples `indices` of `request` that `response` answers (missing choices become error samples)."""
    usage = request_usage(response)
    cost = prices.cost(model, usage)
    prompt_cost = prices.cost(model, dataclasses.replace(usage, completion_tokens=0)) or 0.0
    prompt_ids, prompt_source = _ids(getattr(response, "prompt_token_ids", None)), "server"
    if prompt_ids is None:
        prompt_ids, prompt_source = (
            (encode_chat(tokenizer, request.messages), "tokenizer") if tokenizer else ([], "none")
        )

    rows = []
    for choice in _choices(response)[: len(indices)]:
        text = choice.message.content or ""
        ids, source = _ids(getattr(choice, "token_ids", None)), "server"
        if ids is None:
            ids, source = (
                (list(tokenizer.encode(text, add_special_tokens=False)), "tokenizer")
                if tokenizer is not None and text
                else ([], "none")
            )
        rows.append((choice, text, ids, source))
    n = len(indices)
    measured = len(rows) == n and all(ids for _, _, ids, _ in rows)
    counts = [len(ids) if measured else usage.completion_tokens / n for _, _, ids, _ in rows]
    total = sum(counts) or 1.0
    served_model = getattr(response, "model", None) or model
    samples = []
    for k, (choice, text, ids, source) in enumerate(rows):
        share = counts[k] / total if measured else 1.0 / n
        logprobs = _logprobs(choice)
        if logprobs is not None and len(logprobs) != len(ids):
            logprobs = None  # only useful aligned with completion ids
        sample_usage = {
            "model": served_model,
            "prompt_tokens": usage.prompt_tokens,
            "cached_prompt_tokens": usage.cached_prompt_tokens,
            "completion_tokens": counts[k],
            "reasoning_tokens": usage.reasoning_tokens * share,
            "completion_tokens_measured": measured,
            "cost_usd": None if cost is None else prompt_cost / n + (cost - prompt_cost) * share,
            "request_cost_usd": cost,
            "samples_in_request": n,
            "finish_reason_raw": choice.finish_reason,
            "token_ids": source,
            "prompt_token_ids": prompt_source,
            **(extra_usage or {}),
        }
        samples.append(
            Sample(
                request.request_id,
                request.problem_id,
                indices[k],
                list(prompt_ids),
                ids,
                text,
                logprobs,
                FINISH_REASONS.get(choice.finish_reason or "", "abort"),
                request.policy_version,
                seconds,
                sample_usage,
                tool_calls=_tool_calls(choice.message),
            )
        )
    if len(rows) < n:  # a server that returned fewer choices than asked
        samples += error_samples(
            request,
            indices[len(rows) :],
            f"the server returned {len(rows)} of {n} choices",
            seconds,
            {"model": served_model, **(extra_usage or {})},
        )
    return ResponseSamples(samples, usage, cost, prompt_source)


def error_samples(
    request: RolloutRequest, indices: list[int], message: str, seconds: float, extra_usage: dict[str, Any] | None = None
) -> list[Sample]:
    """Samples for a request that produced nothing: empty text, finish_reason "error", zero cost."""
    usage = {
        "error": message,
        "cost_usd": 0.0,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "reasoning_tokens": 0,
        **(extra_usage or {}),
    }
    return [
        Sample(
            request.request_id,
            request.problem_id,
            i,
            [],
            [],
            "",
            None,
            "error",
            request.policy_version,
            seconds,
            dict(usage),
        )
        for i in indices
    ]
