"""The `openai` rollout engine: rl.types.RolloutEngine over any OpenAI-compatible Chat Completions endpoint.

GPT-5 through the OpenAI API, a vLLM server, a gateway: one engine (openai SDK, AsyncOpenAI). A refused key, an
unknown model or an unreachable endpoint fails at `start()` (preflight), before anything expensive starts.
Requests are bounded (concurrency, requests/min, tokens/min), retried with backoff on transient errors and honour
Retry-After; a request that still fails becomes samples with finish_reason "error" (reward 0). Keys are read from
the environment when a client is made and never stored, pickled or logged. Hosted models are sampled, not
trained, here. Start-up, limits, samples and keys in detail: docs/rollout.md."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import random
import re
import time
from typing import Any, AsyncIterator

from envs.retry_after import retry_after_seconds
from rl.rollout.api_limits import AsyncTokenBucket, backoff_delay
from rl.rollout.openai_config import OpenAIEngineConfig
from rl.rollout.openai_response import MalformedResponse, error_samples, load_tokenizer, response_samples
from rl.rollout.pricing import PriceTable
from rl.types import RolloutRequest, Sample, WeightUpdate

__all__ = ["EngineError", "OpenAIEngine", "OpenAIEngineConfig", "redact"]

log = logging.getLogger(__name__)

_REASONING_MODEL = re.compile(r"^(o\d+(-|$)|gpt-5(?!-chat))")
_RETRYABLE_STATUS = {408, 409, 429}
_FATAL_STATUS = {
    401: "the endpoint refused the API key",
    403: "the endpoint denied access",
    404: "the endpoint does not know this model or path",
}
_SECRET = re.compile(r"\b(sk-[A-Za-z0-9]{0,4})[A-Za-z0-9_\-*.]{6,}|(Bearer\s+)[^\s\"',]+", re.IGNORECASE)


class EngineError(RuntimeError):
    """The engine cannot go on: no key, a refused key, an unknown model, an unreachable endpoint,
    too many failures in a row, or an operation API models do not have. Messages are redacted."""


def redact(text: str, secrets: tuple[str, ...] = ()) -> str:
    """`text` without the given secrets and anything shaped like an API key or bearer token."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    return _SECRET.sub(lambda m: (m.group(1) or m.group(2) or "") + "***", text)


class _Attempt(Exception):
    """One failed HTTP attempt, classified."""

    def __init__(self, message: str, retryable: bool, retry_after: float | None = None, status: int | None = None):
        super().__init__(message)
        self.retryable, self.retry_after, self.status = retryable, retry_after, status


class OpenAIEngine:
    """RolloutEngine over an OpenAI-compatible endpoint. Create, `start()`, then `generate(...)`."""

    def __init__(self, config: OpenAIEngineConfig, *, seed: int | None = None):
        self.config = config
        self._api_key()  # no key: an error now, not at the first request
        self.prices = PriceTable(config.prices)
        self.reasoning = (
            config.reasoning_model if config.reasoning_model is not None else bool(_REASONING_MODEL.match(config.model))
        )
        self.logprobs = config.logprobs if config.logprobs is not None else not self.reasoning
        self.server_token_ids: bool | None = config.server_token_ids
        self.server_kind: str | None = None  # "vllm" when the models preflight recognises one
        self.started = False
        self.stats: dict[str, float] = {
            k: 0
            for k in (  # "http_requests" counts attempts, retries included
                "http_requests",
                "failed_requests",
                "retries",
                "samples",
                "prompt_tokens",
                "completion_tokens",
                "reasoning_tokens",
                "cost_usd",
                "wait_seconds",
            )
        }
        self._rng = random.Random(seed)
        self._rpm = AsyncTokenBucket(config.requests_per_minute, config.rate_limit_burst_s)
        self._tpm = AsyncTokenBucket(config.tokens_per_minute, config.rate_limit_burst_s)
        self._failure_streak = 0
        self._warned: set[str] = set()
        self._reset_runtime()

    # ------------------------------------------------------------------ runtime state (not pickled)
    def _reset_runtime(self) -> None:
        self._client: Any = None
        self._client_loop: asyncio.AbstractEventLoop | None = None
        self._semaphore: asyncio.Semaphore | None = None
        self._tokenizer: Any = None
        self._pause_until = 0.0  # time.monotonic() before which no request is sent (a 429's Retry-After)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        for name in ("_client", "_client_loop", "_semaphore", "_tokenizer"):
            state[name] = None
        state["_pause_until"] = 0.0  # monotonic clocks do not travel between processes
        return state

    def __repr__(self) -> str:
        return (
            f"OpenAIEngine(model={self.config.model!r}, base_url={self.config.base_url!r}, "
            f"api_key_env={self.config.api_key_env!r}, started={self.started})"
        )

    # ------------------------------------------------------------------ credentials and clients
    def _api_key(self) -> str:
        env = self.config.api_key_env
        if env is None:
            return "no-key-needed"  # the SDK insists on a non-empty key; the server ignores it
        key = os.environ.get(env, "").strip()
        if not key:
            raise EngineError(
                f"openai engine: no API key in the environment variable {env} "
                f"(set it, or set api_key_env to the variable that holds the key)"
            )
        return key

    def _redact(self, text: str) -> str:
        try:
            key = self._api_key()
        except EngineError:
            key = ""
        return redact(text, (key,))

    def _async_client(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            import openai

            self._client = openai.AsyncOpenAI(
                api_key=self._api_key(), base_url=self.config.base_url, timeout=self.config.timeout_s, max_retries=0
            )
            self._client_loop = loop
            self._semaphore = asyncio.Semaphore(self.config.max_concurrency)
            for bucket in (self._rpm, self._tpm):
                bucket._lock = None  # locks belong to one event loop
        return self._client

    # ------------------------------------------------------------------ start-up
    def start(self) -> None:
        """Preflight checks and tokenizer; idempotent. Raises EngineError with the reason."""
        if self.started:
            return
        import openai

        client = openai.OpenAI(
            api_key=self._api_key(),
            base_url=self.config.base_url,
            timeout=min(60.0, self.config.timeout_s),
            max_retries=2,
        )
        where, stage = self.config.base_url or "the OpenAI API", ""
        try:
            if "models" in self.config.preflight:
                stage = "models"
                self._preflight_models(client, where)
            if self.server_token_ids is None:
                self.server_token_ids = self.server_kind == "vllm"
            if "completion" in self.config.preflight:
                stage = "completion"
                response = client.chat.completions.create(
                    **self._params(
                        [{"role": "user", "content": "Say OK."}],
                        n=1,
                        max_tokens=1,
                        seed=None,
                        stop=(),
                        temperature=1.0,
                        top_p=1.0,
                    )
                )
                if not response.choices:
                    raise EngineError(f"openai engine: {where} answered a test completion with no choices")
        except openai.APIStatusError as e:
            reason = _FATAL_STATUS.get(e.status_code, "the endpoint refused the preflight request")
            hint = (
                "; an endpoint without GET /models can be checked with preflight: [completion]"
                if stage == "models" and e.status_code in (404, 405)
                else ""
            )
            raise EngineError(
                self._redact(
                    f"openai engine: {reason} (model {self.config.model!r} at {where}, "
                    f"HTTP {e.status_code}): {_short(e)}{hint}"
                )
            ) from None
        except openai.APIConnectionError as e:
            raise EngineError(
                self._redact(f"openai engine: cannot reach {where}: {type(e).__name__}: {_short(e)}")
            ) from None
        finally:
            client.close()
        self._load_tokenizer()
        self.started = True

    def _load_tokenizer(self) -> None:
        # Also after unpickling (tokenizers do not travel): the copy in a Ray actor loads its own.
        if self.config.tokenizer and self._tokenizer is None:
            try:
                self._tokenizer = load_tokenizer(self.config.tokenizer)
            except ValueError as e:
                raise EngineError(f"openai engine: {e}") from None

    def _preflight_models(self, client: Any, where: str) -> None:
        models = list(client.models.list())
        ids = [m.id for m in models]
        if self.config.model not in ids:
            shown = ", ".join(sorted(ids)[:20]) + (" ..." if len(ids) > 20 else "")
            raise EngineError(
                f"openai engine: {where} does not serve model {self.config.model!r} (it serves: {shown or 'nothing'})"
            )
        entry = models[ids.index(self.config.model)]
        if getattr(entry, "owned_by", None) == "vllm":
            self.server_kind = "vllm"

    # ------------------------------------------------------------------ requests
    def _params(
        self,
        messages: list[dict[str, str]],
        *,
        n: int,
        max_tokens: int,
        seed: int | None,
        stop: tuple[str, ...],
        temperature: float,
        top_p: float,
        tools: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        cfg = self.config
        kwargs: dict[str, Any] = {"model": cfg.model, "messages": messages, "max_completion_tokens": max_tokens}
        if tools:  # native function calling: the calls come back in each choice's message.tool_calls
            kwargs["tools"] = tools
        if n > 1:
            kwargs["n"] = n
        if self.reasoning:
            if (temperature, top_p) != (1.0, 1.0) or stop:
                self._warn_once(
                    "reasoning",
                    f"{cfg.model} is a reasoning model: temperature, top_p and stop "
                    "are not sent (the API refuses them)",
                )
        else:
            kwargs["temperature"], kwargs["top_p"] = temperature, top_p
            if stop:
                kwargs["stop"] = list(stop)
        if cfg.reasoning_effort is not None:
            kwargs["reasoning_effort"] = cfg.reasoning_effort
        if seed is not None:
            kwargs["seed"] = seed
        if self.logprobs:
            kwargs["logprobs"] = True
        extra = dict(cfg.extra_body or {})
        if self.server_token_ids:
            extra["return_token_ids"] = True
        if extra:
            kwargs["extra_body"] = extra
        return kwargs

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning("openai engine: %s", message)

    def _calls(self, request: RolloutRequest) -> list[list[int]]:
        """Sample indices per HTTP request: groups of up to max_n_per_request, or one each."""
        n, step = request.sampling.n, (self.config.max_n_per_request if self.config.use_n else 1)
        return [list(range(i, min(n, i + step))) for i in range(0, n, step)]

    async def generate(self, requests: list[RolloutRequest]) -> AsyncIterator[Sample]:
        """Yield every sample of every request as soon as its HTTP request finishes."""
        if not self.started:
            await asyncio.to_thread(self.start)
        if self.config.tokenizer and self._tokenizer is None:
            await asyncio.to_thread(self._load_tokenizer)
        self._async_client()
        accepted = time.monotonic()
        done: asyncio.Queue = asyncio.Queue()

        async def run(request: RolloutRequest, indices: list[int]) -> None:
            try:
                await done.put(await self._call(request, indices, accepted))
            except Exception as e:  # handed to the consumer, which raises it
                await done.put(e)

        tasks = [asyncio.create_task(run(r, idx)) for r in requests for idx in self._calls(r)]
        try:
            for _ in range(len(tasks)):
                item = await done.get()
                if isinstance(item, BaseException):
                    raise item
                for sample in item:
                    yield sample
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def _estimate_tokens(self, request: RolloutRequest, n: int) -> int:
        # What OpenAI counts against tokens/min when a request arrives: the prompt plus max_tokens per choice.
        chars = sum(len(m.get("content") or "") for m in request.messages)
        return chars // 4 + 8 * len(request.messages) + n * request.sampling.max_tokens

    async def _wait_for_pause(self) -> float:
        waited = 0.0
        while (delay := self._pause_until - time.monotonic()) > 0:
            await asyncio.sleep(delay)
            waited += delay
        return waited

    async def _call(self, request: RolloutRequest, indices: list[int], accepted: float) -> list[Sample]:
        import openai

        client = self._async_client()
        sp = request.sampling
        seed = None if sp.seed is None else _derive_seed(sp.seed, request.request_id, indices[0])
        kwargs = self._params(
            request.messages,
            n=len(indices),
            max_tokens=sp.max_tokens,
            seed=seed,
            stop=sp.stop,
            temperature=sp.temperature,
            top_p=sp.top_p,
            tools=request.tools,
        )
        estimate = self._estimate_tokens(request, len(indices))
        waited, retries = 0.0, 0
        while True:
            waited += await self._wait_for_pause()
            waited += await self._rpm.acquire(1)
            waited += await self._tpm.acquire(estimate)
            assert self._semaphore is not None
            async with self._semaphore:
                sent = time.monotonic()
                try:
                    response = await client.chat.completions.create(**kwargs)
                    failure = None
                except openai.APIStatusError as e:
                    failure = self._classify_status(e)
                except openai.APIConnectionError as e:  # includes APITimeoutError
                    failure = _Attempt(f"{type(e).__name__}: {_short(e)}", retryable=True)
                except ValueError as e:  # a 200 whose body is not JSON: a broken server or proxy
                    failure = _Attempt(f"malformed response: {_short(e)}", retryable=True)
                api_seconds = time.monotonic() - sent
            self.stats["http_requests"] += 1
            if failure is None:
                break
            self._tpm.adjust(-estimate)  # a refused request used no tokens
            if failure.retryable and retries < self.config.max_retries:
                delay = backoff_delay(
                    retries,
                    self.config.backoff_s,
                    self.config.max_backoff_s,
                    failure.retry_after,
                    self.config.max_retry_after_s,
                    self._rng,
                )
                if failure.status == 429 and failure.retry_after is not None:
                    self._pause_until = max(self._pause_until, time.monotonic() + delay)
                log.info(
                    "openai engine: %s; retry %d/%d in %.2fs",
                    self._redact(str(failure)),
                    retries + 1,
                    self.config.max_retries,
                    delay,
                )
                retries += 1
                self.stats["retries"] += 1
                await asyncio.sleep(delay)
                waited += delay
                continue
            return self._failed(request, indices, failure, retries, accepted, waited)
        try:
            samples = self._samples(request, indices, response, retries, accepted, waited, api_seconds, estimate)
        except MalformedResponse as e:
            return self._failed(
                request, indices, _Attempt(f"malformed response: {e}", False), retries, accepted, waited
            )
        self._failure_streak = 0
        self.stats["wait_seconds"] += waited
        return samples

    def _classify_status(self, e: Any) -> _Attempt:
        status = e.status_code
        message = f"HTTP {status}: {_short(e)}"
        if status in _FATAL_STATUS:
            raise EngineError(
                self._redact(f"openai engine: {_FATAL_STATUS[status]} (model {self.config.model!r}, {message})")
            )
        if status == 429 and getattr(e, "code", None) == "insufficient_quota":
            raise EngineError(self._redact(f"openai engine: the account's quota is exhausted ({message})"))
        retryable = status in _RETRYABLE_STATUS or status >= 500
        headers = getattr(getattr(e, "response", None), "headers", None)
        return _Attempt(message, retryable, retry_after_seconds(headers), status)

    def _failed(
        self,
        request: RolloutRequest,
        indices: list[int],
        failure: _Attempt,
        retries: int,
        accepted: float,
        waited: float,
    ) -> list[Sample]:
        self.stats["failed_requests"] += 1
        self.stats["wait_seconds"] += waited
        self._failure_streak += 1
        message = self._redact(str(failure))
        if self._failure_streak >= self.config.max_consecutive_failures:
            raise EngineError(f"openai engine: {self._failure_streak} requests in a row failed; last: {message}")
        log.warning("openai engine: request %s failed after %d retries: %s", request.request_id, retries, message)
        return error_samples(
            request,
            indices,
            message,
            time.monotonic() - accepted,
            {"model": self.config.model, "retries": retries, "wait_seconds": waited},
        )

    # ------------------------------------------------------------------ responses
    def _samples(
        self,
        request: RolloutRequest,
        indices: list[int],
        response: Any,
        retries: int,
        accepted: float,
        waited: float,
        api_seconds: float,
        estimate: int,
    ) -> list[Sample]:
        result = response_samples(
            request,
            indices,
            response,
            model=self.config.model,
            prices=self.prices,
            tokenizer=self._tokenizer,
            seconds=time.monotonic() - accepted,
            extra_usage={"retries": retries, "wait_seconds": waited, "api_seconds": api_seconds},
        )
        usage = result.usage
        self._tpm.adjust(usage.prompt_tokens + usage.completion_tokens - estimate)
        if result.cost is None:
            self._warn_once(
                "price", f"no price for model {self.config.model!r}: cost_usd is None (add it under prices:)"
            )
        if result.token_ids == "none":
            self._warn_once(
                "ids",
                "no token ids: the server returns none and no tokenizer is configured "
                "(prompt_ids and completion_ids stay empty; fine for sampling, not for training)",
            )
        self.stats["samples"] += len(result.samples)
        self.stats["prompt_tokens"] += usage.prompt_tokens
        self.stats["completion_tokens"] += usage.completion_tokens
        self.stats["reasoning_tokens"] += usage.reasoning_tokens
        self.stats["cost_usd"] += result.cost or 0.0
        return result.samples

    # ------------------------------------------------------------------ RolloutEngine
    def update_weights(self, update: WeightUpdate) -> float:
        raise EngineError(
            f"openai engine: cannot load weights into {self.config.model!r}: a hosted model's "
            "weights are not ours to update (train open models with the vllm engine; hosted "
            "fine-tuning is rl/hosted)"
        )

    def metrics(self) -> dict[str, float]:
        """Totals since the engine was made, as flat `rollout/api/...` keys."""
        return {f"rollout/api/{k}": float(v) for k, v in self.stats.items()}

    async def aclose(self) -> None:
        client, self._client, self._client_loop = self._client, None, None
        if client is not None:
            await client.close()

    def shutdown(self) -> None:
        client, loop = self._client, self._client_loop
        self._client, self._client_loop = None, None
        if client is None or loop is None or loop.is_closed():
            return  # nothing open, or its loop (and sockets) are gone already
        if loop.is_running():
            asyncio.run_coroutine_threadsafe(client.close(), loop)
        else:
            loop.run_until_complete(client.close())


# ---------------------------------------------------------------------- helpers


def _short(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[:limit] + "..."


def _derive_seed(seed: int, request_id: str, first_index: int) -> int:
    digest = hashlib.sha256(f"{seed}/{request_id}/{first_index}".encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF
