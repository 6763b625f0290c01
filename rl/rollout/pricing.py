"""What API tokens cost: a price table (USD per million tokens) and the cost of one request's usage.

The defaults are OpenAI's published list prices for the GPT-5 family (standard tier, as of August
2025: https://openai.com/api/pricing); prices change, so configs can replace or extend the table
(`prices:` in the policy config; a local vLLM server is free: `{"*": {"input": 0, "output": 0}}`).
A model the table does not know gets cost None, never a made-up number.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping

__all__ = ["DEFAULT_PRICES", "Price", "PriceTable", "RequestUsage"]


@dataclasses.dataclass(frozen=True)
class Price:
    input: float  # USD per 1M prompt tokens
    output: float  # USD per 1M completion tokens (reasoning tokens are completion tokens)
    cached_input: float | None = None  # USD per 1M cached prompt tokens; None: same as input


DEFAULT_PRICES: dict[str, Price] = {
    "gpt-5": Price(input=1.25, cached_input=0.125, output=10.0),
    "gpt-5-mini": Price(input=0.25, cached_input=0.025, output=2.0),
    "gpt-5-nano": Price(input=0.05, cached_input=0.005, output=0.40),
}


@dataclasses.dataclass(frozen=True)
class RequestUsage:
    """Token counts of one API request (all its choices together), as the server reports them."""

    prompt_tokens: int = 0
    completion_tokens: int = 0  # includes reasoning tokens
    reasoning_tokens: int = 0
    cached_prompt_tokens: int = 0


class PriceTable:
    """Model name -> Price. Lookup: the exact name, else the longest table name that the model name
    starts with followed by '-' (dated snapshots: gpt-5-2025-08-07 -> gpt-5, gpt-5-mini-... ->
    gpt-5-mini), else '*' if present, else unknown."""

    def __init__(self, prices: Mapping[str, Price | Mapping[str, float]] | None = None, *, defaults: bool = True):
        table: dict[str, Price] = dict(DEFAULT_PRICES) if defaults else {}
        for name, price in (prices or {}).items():
            if not isinstance(price, Price):
                unknown = set(price) - {"input", "output", "cached_input"}
                if unknown or not {"input", "output"} <= set(price):
                    raise ValueError(
                        f"price of {name!r} needs input and output (USD per 1M tokens), "
                        f"optionally cached_input; got {sorted(price)}"
                    )
                price = Price(**{k: float(v) for k, v in price.items()})
            if min(price.input, price.output, price.cached_input or 0.0) < 0:
                raise ValueError(f"price of {name!r} must not be negative")
            table[name] = price
        self.table = table

    def lookup(self, model: str) -> Price | None:
        if model in self.table:
            return self.table[model]
        prefixes = [name for name in self.table if name != "*" and model.startswith(name + "-")]
        if prefixes:
            return self.table[max(prefixes, key=len)]
        return self.table.get("*")

    def cost(self, model: str, usage: RequestUsage) -> float | None:
        """USD for `usage`, or None when the model has no price."""
        price = self.lookup(model)
        if price is None:
            return None
        cached = min(usage.cached_prompt_tokens, usage.prompt_tokens)
        cached_rate = price.input if price.cached_input is None else price.cached_input
        return (
            (usage.prompt_tokens - cached) * price.input + cached * cached_rate + usage.completion_tokens * price.output
        ) / 1e6
