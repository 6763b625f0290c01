"""Settings of the `openai` rollout engine (rl.rollout.openai_engine), one typed record."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from envs.settings import reject_unknown

__all__ = ["OpenAIEngineConfig", "PREFLIGHT_CHECKS", "REASONING_EFFORTS"]

# The values openai 3.x's `ReasoningEffort` accepts; servers may accept fewer (vLLM: low/medium/high).
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
PREFLIGHT_CHECKS = ("models", "completion")


@dataclasses.dataclass(frozen=True)
class OpenAIEngineConfig:
    model: str  # the served model name, e.g. gpt-5, or the name a vLLM server was started with
    base_url: str | None = None  # None: the SDK's default (api.openai.com); e.g. http://127.0.0.1:8000/v1
    # Environment variable holding the key (the key itself never enters a config, a pickle or a log).
    # None: the endpoint needs no key (only with base_url).
    api_key_env: str | None = "OPENAI_API_KEY"
    max_concurrency: int = 16  # HTTP requests in flight
    timeout_s: float = 600.0  # per HTTP request (reasoning models can think for minutes)
    max_retries: int = 6  # after the first attempt, on 408/409/429/5xx, timeouts and connection errors
    backoff_s: float = 1.0  # first retry delay, doubled per retry, jittered
    max_backoff_s: float = 60.0
    max_retry_after_s: float = 300.0  # the longest server Retry-After we honour
    requests_per_minute: float | None = None  # client-side limits (None/0: unlimited): keep under the
    tokens_per_minute: float | None = None  # account's limits instead of collecting 429s
    rate_limit_burst_s: float = 10.0  # the buckets save up at most this many seconds' worth
    # Checks before anything expensive starts: "models" (models.list: key accepted, model served; free),
    # "completion" (a 1-token request with the run's parameters: catches refused parameters; costs a token).
    preflight: tuple[str, ...] = ("models",)
    use_n: bool = True  # one request with n=... per prompt; False: n requests of one sample each
    max_n_per_request: int = 128  # OpenAI's limit for n; larger groups are split
    reasoning_effort: str | None = None  # sent as reasoning_effort (o-series, gpt-5, gpt-oss on vLLM)
    # Reasoning models refuse temperature/top_p/stop/logprobs. None: decided by the model name (o1/o3/o4/gpt-5).
    reasoning_model: bool | None = None
    logprobs: bool | None = None  # request the sampled tokens' logprobs; None: unless a reasoning model
    # vLLM's `return_token_ids` (exact prompt and completion ids from the server). None: on when the
    # "models" preflight finds a vLLM server. Without ids, `tokenizer` re-tokenizes, else ids stay empty.
    server_token_ids: bool | None = None
    tokenizer: str | None = None  # HF tokenizer dir / hub-cache name, or a .gguf file
    prices: Mapping[str, Mapping[str, float]] | None = None  # USD per 1M tokens; extends rl.rollout.pricing
    max_consecutive_failures: int = 32  # then the engine raises instead of returning error samples forever
    extra_body: Mapping[str, Any] | None = None  # extra request fields for the server (e.g. vLLM's top_k)

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model.strip():
            raise ValueError("openai engine: `model` must name the served model")
        if self.max_concurrency < 1 or self.max_n_per_request < 1 or self.max_consecutive_failures < 1:
            raise ValueError(
                "openai engine: max_concurrency, max_n_per_request and max_consecutive_failures must be >= 1"
            )
        if (
            self.max_retries < 0
            or self.timeout_s <= 0
            or self.backoff_s < 0
            or self.max_backoff_s < 0
            or self.max_retry_after_s < 0
            or self.rate_limit_burst_s <= 0
        ):
            raise ValueError(
                "openai engine: max_retries >= 0, timeout_s > 0, backoff and Retry-After caps >= 0, "
                "rate_limit_burst_s > 0"
            )
        for name in ("requests_per_minute", "tokens_per_minute"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"openai engine: {name} must be >= 0 (0 or null: unlimited)")
        unknown = set(self.preflight) - set(PREFLIGHT_CHECKS)
        if unknown:
            raise ValueError(
                f"openai engine: unknown preflight checks {sorted(unknown)}; choose from {list(PREFLIGHT_CHECKS)}"
            )
        if self.reasoning_effort is not None and self.reasoning_effort not in REASONING_EFFORTS:
            raise ValueError(
                f"openai engine: reasoning_effort {self.reasoning_effort!r} is not one of {list(REASONING_EFFORTS)}"
            )
        if self.api_key_env is None and self.base_url is None:
            raise ValueError("openai engine: api_key_env may only be null for a base_url that needs no key")

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any]) -> OpenAIEngineConfig:
        m = dict(m)
        reject_unknown(cls, m, "openai engine")
        if "preflight" in m:
            value = m["preflight"]
            m["preflight"] = (value,) if isinstance(value, str) else tuple(value or ())
        for name in ("prices", "extra_body"):
            if m.get(name) is not None:
                m[name] = {k: dict(v) if isinstance(v, Mapping) else v for k, v in dict(m[name]).items()}
        return cls(**m)
