"""A client for KernelRL's evaluation service (envs/service/app.py), for trainers that are not KernelRL's own.

    from envs.service.client import KernelRLClient, AsyncKernelRLClient

    with KernelRLClient("http://127.0.0.1:8000", token="...") as client:      # or KernelRLClient.from_env()
        result = client.evaluate("L0_02_relu", answer)   # EvaluationResult: .verdict (envs.verdict.Verdict), .reward
        results = client.evaluate_many([ScoreRequest("L0_02_relu", a) for a in answers], concurrency=8)

It adds retries with backoff on connection errors, 429 and 5xx (never on another 4xx, nor on a read timeout
unless asked: the evaluation may still be running), typed results checked against the service's response
model (`MalformedResponse` otherwise), and concurrent batches in input order. Details: docs/evaluation.md.
Needs httpx, not FastAPI's server side."""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import json
import logging
import os
import random
import threading
import time
from typing import Any, Iterable, Sequence

import httpx
import pydantic

from envs.retry_after import retry_after_seconds
from envs.service.api import ProblemDetail, ProblemInfo, ProblemList, RewardResponse, VerdictResponse
from envs.verdict import Status, Verdict

__all__ = [
    "AsyncKernelRLClient",
    "AuthenticationError",
    "EvaluationResult",
    "EvaluationTimeout",
    "KernelRLClient",
    "MalformedResponse",
    "RequestRejected",
    "RetryPolicy",
    "RewardResult",
    "ScoreRequest",
    "ServiceError",
    "ServiceUnavailable",
    "TOKEN_ENV",
    "URL_ENV",
]

log = logging.getLogger("kernelrl.client")

URL_ENV = "KERNELRL_SERVICE_URL"
TOKEN_ENV = "KERNELRL_SERVICE_TOKEN"  # the variable scripts/serve_env.py reads its token from
DEFAULT_URL = "http://127.0.0.1:8000"
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
_VERDICT_FIELDS = frozenset(f.name for f in dataclasses.fields(Verdict))


# --- errors -----------------------------------------------------------------------------------------
class ServiceError(RuntimeError):
    """Anything the client could not turn into a result."""


class RequestRejected(ServiceError):
    """The service refused the request (a 4xx other than 429): unknown problem, invalid body, wrong problem
    hash, problem_source not allowed, body too large... Retrying the same request cannot help."""

    def __init__(self, status_code: int, detail: Any, url: str):
        self.status_code, self.detail, self.url = status_code, detail, url
        super().__init__(f"{url}: HTTP {status_code}: {detail if isinstance(detail, str) else json.dumps(detail)}")


class AuthenticationError(RequestRejected):
    """401: a missing or wrong bearer token (KERNELRL_SERVICE_TOKEN)."""


class ServiceUnavailable(ServiceError):
    """Every attempt failed on a connection error, a 429 or a 5xx."""

    def __init__(self, message: str, attempts: int, status_code: int | None = None):
        self.attempts, self.status_code = attempts, status_code
        super().__init__(message)


class EvaluationTimeout(ServiceError):
    """No answer within the read timeout (the evaluation may still be running on the server)."""


class MalformedResponse(ServiceError):
    """A 2xx answer whose body is not the service's contract (a proxy's error page, another service, a
    version mismatch)."""


# --- settings and records -----------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class RetryPolicy:
    """`attempts` tries in all; the wait before try n+1 is min(max_delay_s, base_delay_s * multiplier**(n-1)),
    times a random factor in [1 - jitter, 1 + jitter], and at least the server's Retry-After (still capped)."""

    attempts: int = 6
    base_delay_s: float = 0.5
    multiplier: float = 2.0
    max_delay_s: float = 30.0
    jitter: float = 0.2
    retry_timeouts: bool = False

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("attempts must be >= 1")
        if self.base_delay_s < 0 or self.max_delay_s < 0 or self.multiplier < 1 or not 0 <= self.jitter <= 1:
            raise ValueError("delays must be >= 0, multiplier >= 1 and jitter in [0, 1]")

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based)."""
        d = min(self.max_delay_s, self.base_delay_s * self.multiplier ** (attempt - 1))
        d *= 1 + self.jitter * (2 * random.random() - 1)
        if retry_after is not None:
            d = max(d, retry_after)
        return max(0.0, min(self.max_delay_s, d))


@dataclasses.dataclass(frozen=True)
class ScoreRequest:
    """One solution to evaluate: a problem by id (or, where the service allows it, by source) and the answer
    (markdown with a fenced python block, or bare code)."""

    problem_id: str | None
    solution: str
    problem_source: str | None = None
    delta: float | None = None  # the service's reward shift for this request (the verdict is the same)
    baseline: str | None = None  # "inductor" | "eager": what the speedup divides by
    problem_sha256: str | None = None  # refuse (409) if the served problem is another version

    def body(self) -> dict[str, Any]:
        if (self.problem_id is None) == (self.problem_source is None):
            raise ValueError("give exactly one of problem_id and problem_source")
        if not isinstance(self.solution, str):
            raise TypeError(f"solution must be a str, not {type(self.solution).__name__}")
        body: dict[str, Any] = {"solution": self.solution}
        if self.problem_id is not None:
            body["problem_id"] = self.problem_id
        else:
            body["problem_source"] = self.problem_source
        settings = {k: v for k, v in (("delta", self.delta), ("baseline", self.baseline)) if v is not None}
        if settings:
            body["settings"] = settings
        if self.problem_sha256 is not None:
            body["problem_sha256"] = self.problem_sha256
        return body


@dataclasses.dataclass(frozen=True)
class EvaluationResult:
    verdict: Verdict
    reward: float  # the service's reward for the verdict (its delta, or the request's)
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)  # response fields this client does not know


@dataclasses.dataclass(frozen=True)
class RewardResult:
    reward: float
    status: Status
    cached: bool


# --- request building and response parsing, shared by both clients ------------------------------------
def _request(problem_id: str | ScoreRequest | None, solution: str | None, kw: dict[str, Any]) -> ScoreRequest:
    if isinstance(problem_id, ScoreRequest):
        if solution is not None or kw:
            raise TypeError("pass either a ScoreRequest or its fields, not both")
        return problem_id
    if solution is None:
        raise TypeError("solution is required")
    return ScoreRequest(problem_id, solution, **kw)


def _json_body(response: httpx.Response) -> Any:
    try:
        return response.json()
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        excerpt = response.text[:200].replace("\n", " ")
        raise MalformedResponse(
            f"{response.request.url}: HTTP {response.status_code} with a body that is not "
            f"JSON ({e}); it starts {excerpt!r}"
        ) from None


def _validated(model: type[pydantic.BaseModel], response: httpx.Response) -> tuple[pydantic.BaseModel, Any]:
    data = _json_body(response)
    try:
        return model.model_validate(data), data
    except pydantic.ValidationError as e:
        problems = "; ".join(f"{'.'.join(map(str, err['loc'])) or '(body)'}: {err['msg']}" for err in e.errors()[:5])
        raise MalformedResponse(f"{response.request.url}: the answer is not a {model.__name__}: {problems}") from None


def parse_verdict(response: httpx.Response) -> EvaluationResult:
    """A /evaluate answer as an `EvaluationResult`, or MalformedResponse."""
    model, data = _validated(VerdictResponse, response)
    if model.correct != (model.status is Status.CORRECT):
        raise MalformedResponse(
            f"{response.request.url}: correct={model.correct} contradicts status={model.status.value}"
        )
    fields = {k: v for k, v in data.items() if k in _VERDICT_FIELDS}
    try:
        verdict = Verdict.from_dict(fields)
    except (TypeError, ValueError, KeyError) as e:
        raise MalformedResponse(f"{response.request.url}: cannot rebuild the verdict: {e}") from None
    extra = {k: v for k, v in data.items() if k not in _VERDICT_FIELDS and k not in ("reward", "correct")}
    return EvaluationResult(verdict, float(model.reward), extra)


def parse_reward(response: httpx.Response) -> RewardResult:
    model, _ = _validated(RewardResponse, response)
    return RewardResult(float(model.reward), model.status, model.cached)


def _detail(response: httpx.Response) -> Any:
    try:
        body = response.json()
    except ValueError:
        return response.text[:500]
    return body.get("detail", body) if isinstance(body, dict) else body


def _raise_rejected(response: httpx.Response) -> None:
    cls = AuthenticationError if response.status_code == 401 else RequestRejected
    raise cls(response.status_code, _detail(response), str(response.request.url))


class _Attempts:
    """The retry loop's bookkeeping, the same for both clients: what to do after each try."""

    def __init__(self, policy: RetryPolicy, stats: dict[str, int], lock: threading.Lock, what: str):
        self.policy, self.stats, self.lock, self.what = policy, stats, lock, what
        self.attempt = 0

    def _count(self, key: str) -> None:
        with self.lock:
            self.stats[key] = self.stats.get(key, 0) + 1

    def start(self) -> None:
        self.attempt += 1
        self._count("requests")

    def after_response(self, response: httpx.Response) -> float | None:
        """None: the response is final (2xx returned by the caller, or 4xx raised here); else seconds to wait."""
        code = response.status_code
        if code < 400:
            return None
        if code not in RETRY_STATUSES:
            _raise_rejected(response)
        self._count(f"retry_{code}")
        if self.attempt >= self.policy.attempts:
            raise ServiceUnavailable(
                f"{self.what}: HTTP {code} after {self.attempt} attempts: {_detail(response)}", self.attempt, code
            )
        wait = self.policy.delay(self.attempt, retry_after_seconds(response.headers))
        log.warning(
            "%s: HTTP %d; retrying in %.2fs (attempt %d/%d)", self.what, code, wait, self.attempt, self.policy.attempts
        )
        return wait

    def after_error(self, error: httpx.HTTPError) -> float:
        """Seconds to wait before the next try, or raises."""
        if isinstance(error, (httpx.ReadTimeout, httpx.WriteTimeout)) and not self.policy.retry_timeouts:
            raise EvaluationTimeout(
                f"{self.what}: no answer in time ({type(error).__name__}); the evaluation may "
                "still be running on the server (raise the client's timeout)"
            ) from error
        if not isinstance(error, httpx.TransportError) or isinstance(error, httpx.UnsupportedProtocol):
            raise ServiceError(f"{self.what}: {error}") from error
        self._count("retry_transport")
        if self.attempt >= self.policy.attempts:
            raise ServiceUnavailable(
                f"{self.what}: {type(error).__name__}: {error} after {self.attempt} attempts", self.attempt
            ) from error
        wait = self.policy.delay(self.attempt)
        log.warning(
            "%s: %s (%s); retrying in %.2fs (attempt %d/%d)",
            self.what,
            type(error).__name__,
            error,
            wait,
            self.attempt,
            self.policy.attempts,
        )
        return wait


def _settings(
    base_url: str | None, token: str | None, timeout: float | httpx.Timeout, connect_timeout: float
) -> tuple[str, dict[str, str], httpx.Timeout]:
    base_url = (base_url or os.environ.get(URL_ENV) or DEFAULT_URL).rstrip("/")
    if not base_url.startswith(("http://", "https://")):
        raise ValueError(f"base_url must start with http:// or https://, not {base_url!r}")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if not isinstance(timeout, httpx.Timeout):
        timeout = httpx.Timeout(timeout, connect=connect_timeout)
    return base_url, headers, timeout


class _Base:
    _client_class: type = httpx.Client  # the async client's: httpx.AsyncClient

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        *,
        timeout: float | httpx.Timeout = 600.0,
        connect_timeout: float = 10.0,
        retry: RetryPolicy | None = None,
        max_connections: int = 32,
        transport: httpx.BaseTransport | httpx.AsyncBaseTransport | None = None,
    ):
        self.base_url, self._headers, self.timeout = _settings(base_url, token, timeout, connect_timeout)
        self.retry = retry or RetryPolicy()
        self.stats: dict[str, int] = {}  # "requests" (attempts) and "retry_<code>" / "retry_transport" counts
        self._lock = threading.Lock()
        self._http = self._client_class(
            base_url=self.base_url,
            headers=self._headers,
            timeout=self.timeout,
            transport=transport,
            limits=httpx.Limits(max_connections=max_connections),
        )

    @classmethod
    def from_env(cls, **kw):
        """URL from $KERNELRL_SERVICE_URL (default http://127.0.0.1:8000), token from $KERNELRL_SERVICE_TOKEN."""
        kw.setdefault("token", os.environ.get(TOKEN_ENV, "").strip() or None)
        return cls(kw.pop("base_url", None), **kw)

    def _attempts(self, method: str, path: str) -> _Attempts:
        return _Attempts(self.retry, self.stats, self._lock, f"{method} {self.base_url}{path}")


# --- the sync client ------------------------------------------------------------------------------------
class KernelRLClient(_Base):
    """Blocking client; safe to share between threads (one connection pool)."""

    def __enter__(self) -> KernelRLClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> httpx.Response:
        attempts = self._attempts(method, path)
        while True:
            attempts.start()
            try:
                response = self._http.request(method, path, json=body)
            except httpx.HTTPError as e:
                wait = attempts.after_error(e)
            else:
                wait = attempts.after_response(response)
                if wait is None:
                    return response
            time.sleep(wait)

    def healthy(self) -> bool:
        """One try at GET /healthz (no retries): whether the service answers now."""
        try:
            return self._http.get("/healthz").status_code == 200
        except httpx.HTTPError:
            return False

    def problems(self) -> list[ProblemInfo]:
        response = self._call("GET", "/problems")
        return _validated(ProblemList, response)[0].problems

    def problem(self, problem_id: str) -> ProblemDetail:
        return _validated(ProblemDetail, self._call("GET", f"/problems/{problem_id}"))[0]

    def evaluate(self, problem_id: str | ScoreRequest | None, solution: str | None = None, **kw) -> EvaluationResult:
        """POST /evaluate. `kw`: problem_source, delta, baseline, problem_sha256 (see ScoreRequest)."""
        return parse_verdict(self._call("POST", "/evaluate", _request(problem_id, solution, kw).body()))

    def reward(self, problem_id: str | ScoreRequest | None, solution: str | None = None, **kw) -> RewardResult:
        """POST /reward: only the service's reward, status and cached flag."""
        return parse_reward(self._call("POST", "/reward", _request(problem_id, solution, kw).body()))

    def evaluate_many(
        self, requests: Iterable[ScoreRequest], concurrency: int = 8, return_exceptions: bool = False
    ) -> list[EvaluationResult | Exception]:
        """Every request evaluated, `concurrency` at a time, results in input order. With return_exceptions a
        failed request's place holds its exception (a ServiceError for anything the service did); otherwise the
        first failure is raised (the rest are
        still awaited so that no request is left running)."""
        requests = list(requests)
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        with concurrent.futures.ThreadPoolExecutor(
            min(concurrency, max(1, len(requests))), thread_name_prefix="kernelrl-client"
        ) as pool:
            futures = [pool.submit(self.evaluate, r) for r in requests]
            concurrent.futures.wait(futures)
        return _collect([f.exception() or f.result() for f in futures], return_exceptions)


# --- the async client -----------------------------------------------------------------------------------
class AsyncKernelRLClient(_Base):
    """asyncio client; use it from one event loop."""

    _client_class = httpx.AsyncClient

    async def __aenter__(self) -> AsyncKernelRLClient:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> httpx.Response:
        attempts = self._attempts(method, path)
        while True:
            attempts.start()
            try:
                response = await self._http.request(method, path, json=body)
            except httpx.HTTPError as e:
                wait = attempts.after_error(e)
            else:
                wait = attempts.after_response(response)
                if wait is None:
                    return response
            await asyncio.sleep(wait)

    async def healthy(self) -> bool:
        try:
            return (await self._http.get("/healthz")).status_code == 200
        except httpx.HTTPError:
            return False

    async def problems(self) -> list[ProblemInfo]:
        return _validated(ProblemList, await self._call("GET", "/problems"))[0].problems

    async def problem(self, problem_id: str) -> ProblemDetail:
        return _validated(ProblemDetail, await self._call("GET", f"/problems/{problem_id}"))[0]

    async def evaluate(
        self, problem_id: str | ScoreRequest | None, solution: str | None = None, **kw
    ) -> EvaluationResult:
        return parse_verdict(await self._call("POST", "/evaluate", _request(problem_id, solution, kw).body()))

    async def reward(self, problem_id: str | ScoreRequest | None, solution: str | None = None, **kw) -> RewardResult:
        return parse_reward(await self._call("POST", "/reward", _request(problem_id, solution, kw).body()))

    async def evaluate_many(
        self, requests: Iterable[ScoreRequest], concurrency: int = 8, return_exceptions: bool = False
    ) -> list[EvaluationResult | Exception]:
        requests = list(requests)
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        gate = asyncio.Semaphore(concurrency)

        async def one(r: ScoreRequest) -> EvaluationResult:
            async with gate:
                return await self.evaluate(r)

        outcomes = await asyncio.gather(*(one(r) for r in requests), return_exceptions=True)
        for o in outcomes:  # cancellation and KeyboardInterrupt are not results
            if isinstance(o, BaseException) and not isinstance(o, Exception):
                raise o
        return _collect(list(outcomes), return_exceptions)


def _collect(outcomes: Sequence[Any], return_exceptions: bool) -> list[Any]:
    if not return_exceptions:
        for o in outcomes:
            if isinstance(o, BaseException):
                raise o
    return list(outcomes)
