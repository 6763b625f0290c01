"""envs/service/ without worker processes: a fake backend behind the real app, in process."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import threading

import httpx
import pytest

from envs.problems import resolve_problem
from envs.service import (
    EvalOverrides,
    GuardMiddleware,
    ServiceSettings,
    TokenBucketLimiter,
    VerdictResponse,
    apply_overrides,
    create_app,
    verdict_response,
)
from envs.verdict import Status, Timings, TimingStats, Verdict
from rewards.kernel_reward import kernel_reward, reward_function

TOKEN = "unit-test-token-0123456789"


class FakeBackend:
    def __init__(self, verdict: Verdict | None = None, block: threading.Event | None = None):
        self.verdict, self.block, self.calls, self.closed = verdict, block, [], False

    def evaluate(self, problem, answer):
        self.calls.append((problem.id, answer))
        if self.block is not None:
            self.block.wait(10)
        return self.verdict or Verdict(Status.CORRECT, problem.id, "cpu")

    def close(self):
        self.closed = True


def _stats(ms: float) -> TimingStats:
    return TimingStats(ms, ms, 0.0, ms, ms, ms, ms, 100)


def _cuda_verdict(inductor: float | None = 2.0) -> Verdict:
    timings = Timings(kernel=_stats(1.0), eager=_stats(4.0), inductor=_stats(inductor) if inductor else None)
    return Verdict(
        Status.CORRECT,
        "L0_02_relu",
        "NVIDIA H200",
        timings=timings,
        speedup=(inductor or 4.0) / 1.0,
        baseline="inductor" if inductor else "eager",
    )


def _client(app, token: str | None = TOKEN) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test", headers=headers)


def _app(backend=None, **kw):
    settings = ServiceSettings(**{"tokens": (TOKEN,), **kw})
    return create_app(backend or FakeBackend(), [resolve_problem("L0_02_relu")], settings, reward_function(1.8))


def test_settings_refuse_to_run_without_a_token_unless_told():
    with pytest.raises(ValueError, match="no bearer token"):
        ServiceSettings()
    assert ServiceSettings(insecure_no_auth=True).tokens == ()


def test_verdict_response_types_every_verdict_field():
    fields = {f.name for f in dataclasses.fields(Verdict)} | {"correct", "reward"}
    assert fields <= set(VerdictResponse.model_fields), "type the new Verdict fields in VerdictResponse"
    # What the CLI prints comes first, in its order.
    assert list(VerdictResponse.model_fields)[:8] == [
        "status",
        "correct",
        "hack",
        "speedup",
        "reward",
        "timings",
        "error",
        "cached",
    ]


def test_non_finite_numbers_become_valid_json():
    v = Verdict(
        Status.INCORRECT,
        "p",
        "cpu",
        error="NaN",
        mismatch={"reason": "NaN", "value": math.nan, "expected": 1.0, "index": [0, 1]},
    )
    body = verdict_response(v, 0.0).model_dump(mode="json")
    assert body["mismatch"]["value"] == "nan"
    json.dumps(body, allow_nan=False)


def test_overrides_rederive_speedup_and_reward():
    v, reward = _cuda_verdict(), reward_function(1.8)
    assert apply_overrides(v, None, "inductor") is v
    eager = apply_overrides(v, EvalOverrides(baseline="eager"), "inductor")
    assert eager.speedup == pytest.approx(4.0) and eager.baseline == "eager"
    assert reward(eager) == pytest.approx(kernel_reward(True, 4.0))
    shifted = apply_overrides(v, EvalOverrides(delta=3.0), "inductor")
    assert shifted.speedup == v.speedup and reward(shifted, 3.0) == pytest.approx(kernel_reward(True, 2.0, 3.0))
    # No inductor timing (the backend fell back to eager): keep eager, say so.
    fallback = apply_overrides(_cuda_verdict(None), EvalOverrides(baseline="inductor"), "eager")
    assert fallback.baseline == "eager" and "unavailable" in fallback.notes[-1]
    # A wrong answer earns nothing whatever the overrides.
    wrong = Verdict(Status.INCORRECT, "p", "cpu")
    assert reward(apply_overrides(wrong, EvalOverrides(delta=-10), "inductor"), -10) == 0.0


def test_token_bucket():
    now = [0.0]
    limiter = TokenBucketLimiter(rate=2.0, burst=3, clock=lambda: now[0])
    assert [limiter.take("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.take("a") == pytest.approx(0.5)
    assert limiter.take("b") == 0.0  # per client
    now[0] += 0.5
    assert limiter.take("a") == 0.0 and limiter.take("a") > 0
    assert TokenBucketLimiter(rate=0, burst=1).take("a") == 0.0  # disabled


def test_body_limit_stops_reading_an_endless_body():
    reads, sent = [0], []

    async def endless():
        reads[0] += 1
        return {"type": "http.request", "body": b"x" * 1000, "more_body": True}

    async def send(message):
        sent.append(message)

    async def app(scope, receive, send):  # pragma: no cover - must not be reached
        raise AssertionError("the app must not see an oversized body")

    guard = GuardMiddleware(app, [], TokenBucketLimiter(0, 1), max_body_bytes=10_000)
    scope = {"type": "http", "method": "POST", "path": "/evaluate", "headers": [], "client": ("1.2.3.4", 5)}
    asyncio.run(guard(scope, endless, send))
    assert sent[0]["status"] == 413 and reads[0] == 11


def test_auth_and_problem_routes_in_process():
    async def go():
        backend = FakeBackend()
        app = _app(backend)
        async with _client(app) as c, _client(app, "nope-nope-nope-nope") as bad:
            assert (await bad.get("/problems")).status_code == 401
            assert (await c.get("/problems")).json()["problems"][0]["id"] == "L0_02_relu"
            r = await c.post("/reward", json={"problem_id": "L0_02_relu", "solution": "x"})
            assert r.json() == {"reward": pytest.approx(0.31, abs=0.001), "status": "correct", "cached": False}
            assert backend.calls == [("L0_02_relu", "x")]

    asyncio.run(go())


def test_a_body_with_nan_infinity_or_a_lone_surrogate_is_a_422_naming_the_field_not_a_500():
    """Python's JSON parser accepts NaN and Infinity; the validation error echoes the offending input, which
    JSON cannot carry, so FastAPI's own handler failed to render it (500 Internal Server Error)."""

    async def go():
        backend = FakeBackend()
        async with _client(_app(backend)) as c:
            for body, field in (
                ('{"problem_id": "L0_02_relu", "solution": "x", "settings": {"delta": NaN}}', "delta"),
                ('{"problem_id": "L0_02_relu", "solution": "x", "extra": -Infinity}', "extra"),
                ('{"problem_id": "L0_02_relu", "solution": Infinity}', "solution"),
                ('{"problem_id": "\\ud800", "solution": "x"}', "problem_id"),
            ):  # a lone surrogate
                r = await c.post("/evaluate", content=body, headers={"Content-Type": "application/json"})
                assert r.status_code == 422, (body, r.text)
                detail = r.json()["detail"]
                assert detail[0]["loc"][-1] == field and isinstance(detail[0]["input"], str), detail
            r = await c.post("/evaluate", content='{"solution": "x"}', headers={"Content-Type": "application/json"})
            assert r.status_code == 422 and "exactly one of problem_id" in r.json()["detail"][0]["msg"]
        assert backend.calls == []

    asyncio.run(go())


def test_insecure_mode_needs_no_token_and_problem_source_is_refused_by_default():
    assert ServiceSettings(tokens=(TOKEN,)).allow_problem_source is False

    async def go():
        app = _app(tokens=(), insecure_no_auth=True)
        async with _client(app, None) as c:
            assert (await c.get("/problems")).status_code == 200
            r = await c.post("/evaluate", json={"problem_source": "x", "solution": "y"})
            assert r.status_code == 403 and "--allow-problem-source" in r.json()["detail"]

    asyncio.run(go())


def test_bounded_queue_answers_503():
    async def go():
        release = threading.Event()
        backend = FakeBackend(block=release)
        app = _app(backend, max_concurrent_evaluations=1, max_queued_evaluations=1)
        body = {"problem_id": "L0_02_relu", "solution": "x"}
        async with _client(app) as c:
            first = [asyncio.create_task(c.post("/evaluate", json=body)) for _ in range(2)]
            while len(backend.calls) < 1:
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.05)
            third = await c.post("/evaluate", json=body)
            assert third.status_code == 503 and third.headers["retry-after"] == "5"
            release.set()
            assert [r.status_code for r in await asyncio.gather(*first)] == [200, 200]

    asyncio.run(go())
