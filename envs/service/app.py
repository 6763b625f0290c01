"""KernelRL's evaluation as an HTTP service: `create_app(backend, problems, settings, reward_fn) -> FastAPI`.

    POST /evaluate   {problem_id | problem_source, solution, settings?} -> the verdict
    POST /reward     same body -> {reward, status, cached}   (for hosted fine-tuning graders)
    GET  /problems   the loaded problem set;  GET /problems/{id}  one problem with its source
    GET  /healthz    liveness, the only route without authentication

FastAPI because request validation and the OpenAPI schema come from the same typed models (api.py), so the
contract cannot drift from the code; authentication, rate and body limits sit in `GuardMiddleware` (guard.py).
The backend (a `KernelEvaluator`) returns verdicts; the reward comes from `reward_fn`, built from rewards/ by
the caller, so envs/ imports no reward code. More: docs/evaluation.md."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import hashlib
import logging
import time
from typing import Any, Callable, Iterable, Literal

from fastapi import FastAPI, HTTPException, Request, Security
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPBearer
from starlette.concurrency import run_in_threadpool

from envs.kernel_evaluator import KernelEvaluator
from envs.problems import Problem, ProblemError, parse_problem
from envs.service.api import (
    EvaluateRequest,
    Health,
    ProblemDetail,
    ProblemInfo,
    ProblemList,
    RewardResponse,
    VerdictResponse,
    _errors,
    _finite,
    apply_overrides,
    verdict_response,
)
from envs.service.guard import GuardMiddleware, TokenBucketLimiter
from envs.verdict import Verdict
from envs.worker.worker_set import EvaluatorError

__all__ = ["BackendUnavailable", "RewardFunction", "ServiceSettings", "create_app", "make_backend"]

log = logging.getLogger("kernelrl.service")

SOURCE_ID_PREFIX = "source/"  # problem id given to a problem sent as problem_source


# reward(verdict, delta) -> the verdict's reward; delta None: the service's own (a request's override otherwise)
RewardFunction = Callable[[Verdict, "float | None"], float]


class BackendUnavailable(RuntimeError):
    """The chosen backend cannot be built here (e.g. `ray` without envs/ray_pool.py or ray installed)."""


def make_backend(kind: Literal["local", "ray"], eval_settings, cache=None, pool_config: dict[str, Any] | None = None):
    """The evaluation backend the service runs on: the switch between `local` and `ray`.

    local: `envs.evaluator.Evaluator`, worker processes on this machine.
    ray:   `envs.pool.RayEvaluationPool` (PoolConfig from `pool_config`); imported, with Ray, only here."""
    if kind == "local":
        if pool_config:
            raise ValueError("pool settings apply to the ray backend only")
        from envs.evaluator import Evaluator

        return Evaluator(eval_settings, cache=cache)
    if kind == "ray":
        try:
            from envs.pool import PoolConfig
            from envs.pool.ray_backend import RayEvaluationPool
        except ImportError as e:
            raise BackendUnavailable(f"backend 'ray' needs envs.pool (RayEvaluationPool) and ray: {e}") from e
        return RayEvaluationPool(eval_settings, PoolConfig.from_mapping(pool_config), cache)
    raise ValueError(f"backend must be 'local' or 'ray', not {kind!r}")


def _backpressure_errors() -> tuple[type[BaseException], ...]:
    """Exceptions by which a backend says 'full, retry later' (the Ray pool's PoolFullError)."""
    try:
        from envs.pool.scheduler import PoolFullError  # no Ray import
    except ImportError:
        return ()
    return (PoolFullError,)


@dataclasses.dataclass(frozen=True)
class ServiceSettings:
    tokens: tuple[str, ...] = ()  # accepted bearer tokens; each one is a client with its own rate bucket
    insecure_no_auth: bool = False  # must be set explicitly to serve without tokens
    max_body_bytes: int = 1 << 20
    rate_per_second: float = 5.0  # token-bucket refill per client; <= 0 disables the rate limit
    rate_burst: int = 50  # bucket size: requests a client may make at once
    max_concurrent_evaluations: int = 1  # threads running backend.evaluate
    max_queued_evaluations: int = 64  # waiting beyond those -> 503
    busy_retry_after_s: int = 5
    default_baseline: str = "inductor"  # the backend's baseline (what a `baseline` override is relative to)
    allow_problem_source: bool = False  # accept problems sent inline (their code runs in the sandboxed worker)
    close_backend_on_shutdown: bool = True  # the app's lifespan closes the backend (before uvicorn exits)
    backend_name: str = "local"

    def __post_init__(self) -> None:
        if not self.tokens and not self.insecure_no_auth:
            raise ValueError("no bearer token configured; give one or set insecure_no_auth explicitly")
        if any(not t for t in self.tokens):
            raise ValueError("empty bearer token")
        if self.max_body_bytes < 1 or self.max_concurrent_evaluations < 1 or self.max_queued_evaluations < 0:
            raise ValueError("max_body_bytes and max_concurrent_evaluations must be >= 1, max_queued_evaluations >= 0")
        if self.rate_per_second > 0 and self.rate_burst < 1:
            raise ValueError("rate_burst must be >= 1")
        if self.default_baseline not in ("inductor", "eager"):
            raise ValueError(f"default_baseline must be inductor or eager, not {self.default_baseline!r}")


# --- bounded evaluation off the event loop --------------------------------------------------------
class _Busy(Exception):
    pass


class EvaluationGate:
    """Runs blocking evaluations in `max_concurrent` threads; refuses when `max_queued` already wait."""

    def __init__(self, max_concurrent: int, max_queued: int):
        self.capacity = max_concurrent + max_queued
        self.in_flight = 0
        self.executor = concurrent.futures.ThreadPoolExecutor(max_concurrent, thread_name_prefix="evaluate")

    async def run(self, fn, *args):
        if self.in_flight >= self.capacity:
            raise _Busy
        self.in_flight += 1
        try:
            # wrap_future: cancelling the request cancels the job if it has not started yet.
            return await asyncio.wrap_future(self.executor.submit(fn, *args))
        finally:
            self.in_flight -= 1

    def shutdown(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)


# --- the app -------------------------------------------------------------------------------------
def _echo_safe(obj: Any) -> Any:
    """`obj` (a request's validation errors, echoing its input) as JSON can encode it: non-finite numbers as
    their names, lone surrogates in strings backslash-escaped."""
    obj = _finite(obj, str)
    if isinstance(obj, str):
        return obj.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(obj, dict):
        return {_echo_safe(k): _echo_safe(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_echo_safe(v) for v in obj]
    return obj


def create_app(
    backend: KernelEvaluator, problems: Iterable[Problem], settings: ServiceSettings, reward_fn: RewardFunction
) -> FastAPI:
    if not callable(getattr(backend, "evaluate", None)):  # all the service calls
        raise TypeError(f"{type(backend).__name__} has no evaluate(problem, answer) method")
    by_id: dict[str, Problem] = {}
    for p in problems:
        if p.id in by_id:
            raise ValueError(f"duplicate problem id {p.id!r}")
        by_id[p.id] = p
    gate = EvaluationGate(settings.max_concurrent_evaluations, settings.max_queued_evaluations)
    busy_errors = _backpressure_errors()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        log.info(
            "serving %d problems on the %s backend (auth %s)",
            len(by_id),
            settings.backend_name,
            "on" if settings.tokens else "OFF",
        )
        try:
            yield
        finally:
            gate.shutdown()
            close = getattr(backend, "close", None)
            if settings.close_backend_on_shutdown and close is not None:
                log.info("closing the evaluation backend")
                await asyncio.to_thread(close)

    app = FastAPI(
        title="KernelRL evaluation service",
        version="1",
        description="Evaluates candidate Triton kernels against KernelBench-format problems.",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )  # the schema is at /openapi.json
    app.add_middleware(
        GuardMiddleware,
        tokens=settings.tokens,
        limiter=TokenBucketLimiter(settings.rate_per_second, settings.rate_burst),
        max_body_bytes=settings.max_body_bytes,
    )

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        # FastAPI's own handler, except that the offending input it echoes may be NaN, Infinity (Python's JSON
        # parser accepts them) or a lone surrogate (a "\ud800" escape), which a JSON response cannot carry:
        # rendering the 422 failed with a 500.
        return JSONResponse(status_code=422, content={"detail": _echo_safe(jsonable_encoder(exc.errors()))})

    # The middleware enforces the token; this dependency puts the bearer scheme into the OpenAPI schema.
    secured = [Security(HTTPBearer(auto_error=False))] if settings.tokens else []
    common = _errors(401, 413, 429)

    async def resolve(req: EvaluateRequest) -> Problem:
        if req.problem_id is not None:
            problem = by_id.get(req.problem_id)
            if problem is None:
                raise HTTPException(404, f"unknown problem id {req.problem_id!r}; GET /problems lists them")
            if req.problem_sha256 is not None and req.problem_sha256 != problem.sha256:
                raise HTTPException(
                    409,
                    f"problem {req.problem_id!r} here has SHA-256 {problem.sha256[:12]}..., "
                    f"not the {req.problem_sha256[:12]}... the client expects",
                )
            return problem
        if not settings.allow_problem_source:
            raise HTTPException(
                403,
                "this service does not accept problem_source (it was started without "
                "--allow-problem-source); use problem_id",
            )
        source = req.problem_source
        pid = SOURCE_ID_PREFIX + hashlib.sha256(source.encode()).hexdigest()[:16]
        try:
            return await run_in_threadpool(parse_problem, source, pid)
        except ProblemError as e:
            raise HTTPException(422, str(e)) from None

    async def run(req: EvaluateRequest, client: str) -> tuple[Verdict, float]:
        problem = await resolve(req)
        started = time.monotonic()
        try:
            verdict = await gate.run(backend.evaluate, problem, req.solution)
        except (_Busy, *busy_errors):
            raise HTTPException(
                503,
                "too many evaluations in progress; retry later",
                headers={"Retry-After": str(settings.busy_retry_after_s)},
            ) from None
        except EvaluatorError as e:
            log.error("evaluator failure on %s: %s", problem.id, e)
            raise HTTPException(503, f"the evaluator failed: {e}") from None
        if verdict.problem_id != problem.id:
            # The verdict cache is keyed by problem source, not id: a hit may carry another id for the same text.
            verdict = dataclasses.replace(verdict, problem_id=problem.id)
        verdict = apply_overrides(verdict, req.settings, settings.default_baseline)
        value = reward_fn(verdict, req.settings.delta if req.settings is not None else None)
        log.info(
            "%s %s -> %s reward=%.4f cached=%s in %.2fs",
            client,
            problem.id,
            verdict.status.value,
            value,
            verdict.cached,
            time.monotonic() - started,
        )
        return verdict, value

    def client_of(request) -> str:
        return request.scope.get("state", {}).get("client", "?")

    @app.post(
        "/evaluate",
        response_model=VerdictResponse,
        dependencies=secured,
        responses=_errors(401, 404, 409, 413, 422, 429, 503),
        summary="Evaluate a solution; the full verdict",
    )
    async def evaluate(req: EvaluateRequest, request: Request) -> VerdictResponse:
        return verdict_response(*await run(req, client_of(request)))

    @app.post(
        "/reward",
        response_model=RewardResponse,
        dependencies=secured,
        responses=_errors(401, 404, 409, 413, 422, 429, 503),
        summary="Evaluate a solution; only its reward",
    )
    async def reward(req: EvaluateRequest, request: Request) -> RewardResponse:
        verdict, value = await run(req, client_of(request))
        return RewardResponse(reward=value, status=verdict.status, cached=verdict.cached)

    def info(p: Problem) -> dict[str, Any]:
        return dict(
            id=p.id,
            level=p.level,
            has_reference=p.reference_solution is not None,
            small_sizes=_finite(p.small_sizes, str),
        )

    @app.get(
        "/problems",
        response_model=ProblemList,
        dependencies=secured,
        responses=common,
        summary="The loaded problem set",
    )
    async def list_problems() -> ProblemList:
        return ProblemList(problems=[ProblemInfo(**info(p)) for p in by_id.values()])

    @app.get(
        "/problems/{problem_id:path}",
        response_model=ProblemDetail,
        dependencies=secured,
        responses=_errors(401, 404, 413, 429),
        summary="One problem, with its source",
    )
    async def get_problem(problem_id: str) -> ProblemDetail:
        p = by_id.get(problem_id)
        if p is None:
            raise HTTPException(404, f"unknown problem id {problem_id!r}")
        return ProblemDetail(**info(p), source=p.source)

    @app.get("/healthz", response_model=Health, summary="Liveness (no authentication)")
    async def healthz() -> Health:
        return Health()

    return app
