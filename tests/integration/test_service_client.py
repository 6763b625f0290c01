"""envs/service/client.py against the real service (scripts/serve_env.py on 127.0.0.1, device cpu): typed
verdicts, 4xx raised without retries, batches in order, retries through a service that is not up yet, a full
evaluation queue (503) and an empty rate bucket (429), timeouts; and against a scripted HTTP peer, bodies the
service never sends (a proxy's page, a wrong shape)."""

from __future__ import annotations

import asyncio
import json
import math
import threading
import time

import pytest

from envs.service.client import (
    AsyncKernelRLClient,
    AuthenticationError,
    EvaluationResult,
    EvaluationTimeout,
    KernelRLClient,
    MalformedResponse,
    RequestRejected,
    RetryPolicy,
    RewardResult,
    ScoreRequest,
    ServiceUnavailable,
)
from envs.verdict import Status, Verdict
from tests.servers.kernelrl_service import ROOT, TOKEN, ServiceProcess, free_port
from tests.servers.scripted_http import ScriptedHTTP

pytestmark = pytest.mark.integration

RELU = (ROOT / "envs/builtin/solutions/L0_02_relu.py").read_text()
WRONG = RELU.replace("tl.maximum(x, 0.0)", "tl.abs(x)")
CPU_REWARD = 1 / (1 + math.exp(-(1 - 1.8)))  # correct, no speedup on CPU: sigmoid(1 - delta)
FAST = RetryPolicy(attempts=4, base_delay_s=0.05, max_delay_s=0.2)


def variant(i: int) -> str:
    """The relu solution with a distinct module constant: a fresh evaluation, not a cache hit."""
    return RELU + f'\n_VARIANT = "{i}-{time.monotonic_ns()}"\n'


def client(service, **kw) -> KernelRLClient:
    return KernelRLClient(service.url, service.token, retry=kw.pop("retry", FAST), **kw)


# --- typed results ----------------------------------------------------------------------------------
def test_evaluate_returns_the_projects_verdict(kernelrl_service):
    with client(kernelrl_service) as c:
        result = c.evaluate("L0_02_relu", RELU)
        wrong = c.evaluate(ScoreRequest("L0_02_relu", f"```python\n{WRONG}```"))
    assert isinstance(result, EvaluationResult) and isinstance(result.verdict, Verdict)
    v = result.verdict
    assert v.status is Status.CORRECT and v.correct and v.problem_id == "L0_02_relu" and v.device == "cpu"
    assert v.speedup is None and v.hack is None and result.extra == {}
    assert result.reward == pytest.approx(CPU_REWARD, abs=1e-6)
    assert wrong.verdict.status is Status.INCORRECT and wrong.reward == 0.0
    assert wrong.verdict.mismatch and "differ" in wrong.verdict.error
    assert c.stats["requests"] == 2 and not any(k.startswith("retry") for k in c.stats)


def test_reward_problems_and_overrides(kernelrl_service):
    with client(kernelrl_service) as c:
        r = c.reward("L0_02_relu", RELU, delta=1.0)
        ids = [p.id for p in c.problems()]
        detail = c.problem("L0_02_relu")
        assert c.healthy()
    assert isinstance(r, RewardResult) and r.status is Status.CORRECT
    assert r.reward == pytest.approx(0.5, abs=1e-6)  # sigmoid(1 - 1.0): the request's delta reached the service
    assert "L0_02_relu" in ids and all(i.startswith("L0_") for i in ids)  # --levels 0
    assert detail.source == (ROOT / "envs/builtin/problems/L0_02_relu.py").read_text()


# --- 4xx: raised at once ------------------------------------------------------------------------------
def test_input_errors_are_raised_without_retrying(kernelrl_service):
    with client(kernelrl_service) as c:
        with pytest.raises(RequestRejected) as unknown:
            c.evaluate("L9_99_nothing", RELU)
        with pytest.raises(RequestRejected) as invalid:
            c.evaluate("L0_02_relu", RELU, delta=1e9)  # out of the allowed range: 422
        with pytest.raises(RequestRejected) as version:
            c.evaluate("L0_02_relu", RELU, problem_sha256="0" * 64)
        assert c.stats == {"requests": 3}
    assert unknown.value.status_code == 404 and "L9_99_nothing" in str(unknown.value)
    assert invalid.value.status_code == 422 and isinstance(invalid.value.detail, list)
    assert version.value.status_code == 409
    with KernelRLClient(kernelrl_service.url, "wrong-token-0123456789abcdef", retry=FAST) as c:
        with pytest.raises(AuthenticationError) as auth:
            c.problems()
        assert c.stats == {"requests": 1}
    assert auth.value.status_code == 401
    with pytest.raises(ValueError, match="exactly one"):
        ScoreRequest(None, RELU).body()


# --- batches --------------------------------------------------------------------------------------------
def test_evaluate_many_keeps_the_order(kernelrl_service):
    requests = [
        ScoreRequest("L0_02_relu", WRONG),
        ScoreRequest("L0_02_relu", RELU),
        ScoreRequest("L0_02_relu", "```python\ndef broken(:\n```"),
        ScoreRequest("L9_99_nothing", RELU),
    ]
    with client(kernelrl_service) as c:
        out = c.evaluate_many(requests, concurrency=3, return_exceptions=True)
        with pytest.raises(RequestRejected):
            c.evaluate_many(requests, concurrency=3)
    assert [o.verdict.status for o in out[:3]] == [Status.INCORRECT, Status.CORRECT, Status.COMPILE_ERROR]
    assert isinstance(out[3], RequestRejected) and out[3].status_code == 404


def test_async_client(kernelrl_service):
    async def main():
        async with AsyncKernelRLClient(kernelrl_service.url, kernelrl_service.token, retry=FAST) as c:
            one = await c.evaluate("L0_02_relu", RELU)
            many = await c.evaluate_many([ScoreRequest("L0_02_relu", s) for s in (RELU, WRONG)], concurrency=2)
            reward = await c.reward("L0_02_relu", WRONG)
            with pytest.raises(RequestRejected):
                await c.evaluate("L9_99_nothing", RELU)
            return one, many, reward, [p.id for p in await c.problems()]

    one, many, reward, ids = asyncio.run(main())
    assert one.verdict.correct and one.reward == pytest.approx(CPU_REWARD, abs=1e-6)
    assert [m.verdict.status for m in many] == [Status.CORRECT, Status.INCORRECT]
    assert reward.status is Status.INCORRECT and reward.reward == 0.0 and "L0_02_relu" in ids


# --- retries -------------------------------------------------------------------------------------------
def test_retries_until_the_service_is_up_then_through_503_and_429(tmp_path):
    """A client that starts before the service, then a service whose queue holds nothing beyond the one
    running evaluation (--max-queue 0: 503 with Retry-After) and whose rate bucket is small (429)."""
    port = free_port()
    policy = RetryPolicy(attempts=400, base_delay_s=0.1, max_delay_s=0.3)
    box: dict = {}
    with KernelRLClient(f"http://127.0.0.1:{port}", TOKEN, retry=policy) as c:
        early = threading.Thread(target=lambda: box.update(result=c.evaluate("L0_02_relu", RELU)))
        early.start()
        time.sleep(0.5)  # the client is retrying on refused connections before the server exists
        service = ServiceProcess(
            tmp_path, "--max-concurrent", "1", "--max-queue", "0", "--rate", "4", "--burst", "4", port=port
        )
        try:
            early.join(180)
            assert "result" in box, service.log_tail()
            assert box["result"].verdict.correct and c.stats["retry_transport"] >= 1
            # Four fresh evaluations at once against one evaluation slot: the others get 503 and come back.
            out = c.evaluate_many([ScoreRequest("L0_02_relu", variant(i)) for i in range(4)], concurrency=4)
            assert all(o.verdict.correct for o in out), [(o.verdict.status, o.verdict.error) for o in out]
            assert c.stats.get("retry_503", 0) >= 1, (c.stats, service.log_tail())
            # More requests than the bucket holds: 429 with Retry-After, then served.
            problems = [c.problems() for _ in range(8)]
            assert all(any(p.id == "L0_02_relu" for p in ps) for ps in problems)
            assert c.stats.get("retry_429", 0) >= 1, c.stats
        finally:
            service.stop()


def test_gives_up_after_the_last_attempt():
    port = free_port()  # nothing listens there
    with KernelRLClient(f"http://127.0.0.1:{port}", retry=RetryPolicy(attempts=3, base_delay_s=0.01)) as c:
        with pytest.raises(ServiceUnavailable) as e:
            c.evaluate("L0_02_relu", RELU)
        assert e.value.attempts == 3 and c.stats == {"requests": 3, "retry_transport": 3}
        assert not c.healthy()


def test_retry_after_is_honoured_up_to_the_cap():
    with ScriptedHTTP([(503, {"Retry-After": "1"}, b'{"detail": "busy"}'), (503, {}, b'{"detail": "busy"}')]) as peer:
        with KernelRLClient(peer.url, retry=RetryPolicy(attempts=3, base_delay_s=0.01, max_delay_s=5, jitter=0)) as c:
            t = time.monotonic()
            with pytest.raises(ServiceUnavailable) as e:
                c.reward("L0_02_relu", RELU)
            elapsed = time.monotonic() - t
    assert e.value.status_code == 503 and len(peer.requests) == 3
    assert 1.0 <= elapsed < 3.0  # waited the server's second once, then the short backoff
    assert RetryPolicy(max_delay_s=2, jitter=0).delay(1, retry_after=60) == 2  # capped


# --- timeouts --------------------------------------------------------------------------------------------
def test_a_read_timeout_is_raised_not_retried(kernelrl_service):
    with client(kernelrl_service, timeout=0.001) as c:  # no fresh evaluation answers within a millisecond
        with pytest.raises(EvaluationTimeout, match="still be running"):
            c.evaluate("L0_02_relu", variant(99))
        assert c.stats == {"requests": 1}


def test_a_stalled_peer_times_out_and_may_be_retried():
    with ScriptedHTTP([("hang", 2.0)]) as peer:

        async def main():
            policy = RetryPolicy(attempts=2, base_delay_s=0.01, retry_timeouts=True)
            async with AsyncKernelRLClient(peer.url, timeout=0.3, retry=policy) as c:
                with pytest.raises(ServiceUnavailable, match="ReadTimeout"):
                    await c.evaluate("L0_02_relu", RELU)
                return dict(c.stats)

        stats = asyncio.run(main())
    assert stats == {"requests": 2, "retry_transport": 2} and len(peer.requests) == 2


# --- malformed answers -------------------------------------------------------------------------------------
OK_VERDICT = {
    "status": "correct",
    "correct": True,
    "reward": 0.31,
    "cached": False,
    "problem_id": "L0_02_relu",
    "device": "cpu",
}


@pytest.mark.parametrize(
    "body,match",
    [
        (b"<html><body>502 Bad Gateway</body></html>", "not JSON"),
        (b'{"status": "correct", "correct": true', "not JSON"),
        (json.dumps([1, 2]).encode(), "not a VerdictResponse"),
        (json.dumps({**OK_VERDICT, "status": "great"}).encode(), "status"),
        (json.dumps({k: v for k, v in OK_VERDICT.items() if k != "reward"}).encode(), "reward"),
        (json.dumps({**OK_VERDICT, "correct": False}).encode(), "contradicts"),
        (json.dumps({**OK_VERDICT, "timings": {"kernel": {"median_ms": 1}}}).encode(), "timings"),
    ],
)
def test_malformed_answers_raise_with_the_reason(body, match):
    with ScriptedHTTP([(200, {"Content-Type": "application/json"}, body)]) as peer:
        with KernelRLClient(peer.url, retry=FAST) as c:
            with pytest.raises(MalformedResponse, match=match):
                c.evaluate("L0_02_relu", RELU)


def test_unknown_fields_are_kept_aside():
    body = json.dumps({**OK_VERDICT, "future_field": [1]}).encode()
    with ScriptedHTTP([(200, {"Content-Type": "application/json"}, body)]) as peer:
        with KernelRLClient(peer.url, retry=FAST) as c:
            result = c.evaluate("L0_02_relu", RELU)
    assert result.verdict.correct and result.extra == {"future_field": [1]}
