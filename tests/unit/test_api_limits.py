"""Client-side limits of API rollout engines: token buckets, Retry-After parsing, backoff, prices."""

from __future__ import annotations

import asyncio
import email.utils
import pickle
import random

import pytest

from envs.worker.process import scrubbed_environment
from envs.retry_after import retry_after_seconds
from rl.rollout.api_limits import AsyncTokenBucket, backoff_delay
from rl.rollout.openai_config import OpenAIEngineConfig
from rl.rollout.openai_engine import redact
from rl.rollout.pricing import DEFAULT_PRICES, PriceTable, RequestUsage


class FakeTime:
    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_bucket_spaces_requests_at_the_rate_after_the_burst():
    t = FakeTime()
    bucket = AsyncTokenBucket(60, burst_s=2.0, clock=t.clock, sleep=t.sleep)  # 1/s, 2 saved up

    async def take(k):
        return [await bucket.acquire() for _ in range(k)]

    waits = asyncio.run(take(5))
    assert waits[:2] == [0.0, 0.0]
    assert waits[2:] == pytest.approx([1.0, 1.0, 1.0])
    assert t.now == pytest.approx(103.0)


def test_bucket_larger_request_than_capacity_leaves_a_debt():
    t = FakeTime()
    bucket = AsyncTokenBucket(600, burst_s=1.0, clock=t.clock, sleep=t.sleep)  # 10 units/s, capacity 10

    async def run():
        first = await bucket.acquire(30)  # bucket full: goes at once, 20 in debt
        second = await bucket.acquire(5)  # waits out the debt and its own 5: (20 + 5) / 10
        return first, second

    assert asyncio.run(run()) == (0.0, pytest.approx(2.5))


def test_bucket_refund_and_charge():
    t = FakeTime()
    bucket = AsyncTokenBucket(60, burst_s=10.0, clock=t.clock, sleep=t.sleep)  # capacity 10
    asyncio.run(bucket.acquire(10))
    bucket.adjust(-4)  # refund: the request used less than estimated
    assert bucket.tokens == pytest.approx(4)
    bucket.adjust(6)  # charge: it used more
    assert bucket.tokens == pytest.approx(-2)
    assert asyncio.run(bucket.acquire(1)) == pytest.approx(3.0)


def test_unlimited_bucket_never_waits_and_pickles():
    bucket = AsyncTokenBucket(None)
    assert asyncio.run(bucket.acquire(1e9)) == 0.0
    limited = AsyncTokenBucket(60)
    asyncio.run(limited.acquire())
    copy = pickle.loads(pickle.dumps(limited))
    assert copy._lock is None and asyncio.run(copy.acquire()) == 0.0


def test_retry_after_forms():
    assert retry_after_seconds({"retry-after": "2"}) == 2.0
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert retry_after_seconds({"retry-after": "-3"}) == 0.0
    date = email.utils.formatdate(1_000_030.0, usegmt=True)
    assert retry_after_seconds({"retry-after": date}, now=1_000_000.0) == pytest.approx(30.0)
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None and retry_after_seconds(None) is None


def test_backoff_is_exponential_jittered_capped_and_honours_retry_after():
    rng = random.Random(0)
    for attempt in range(8):
        d = backoff_delay(attempt, 1.0, 10.0, rng=rng)
        full = min(10.0, 2.0**attempt)
        assert full / 2 <= d <= full
    assert backoff_delay(0, 1.0, 10.0, retry_after=7.0, rng=rng) >= 7.0
    assert backoff_delay(0, 1.0, 10.0, retry_after=1e6, max_retry_after_s=30.0, rng=rng) == 30.0


def test_price_lookup_and_cost():
    table = PriceTable()
    assert table.lookup("gpt-5") == DEFAULT_PRICES["gpt-5"]
    assert table.lookup("gpt-5-2025-08-07") == DEFAULT_PRICES["gpt-5"]
    assert table.lookup("gpt-5-mini-2025-08-07") == DEFAULT_PRICES["gpt-5-mini"]
    assert table.lookup("gpt-50") is None and table.cost("llama", RequestUsage(10, 10)) is None
    usage = RequestUsage(
        prompt_tokens=1_000_000, completion_tokens=2_000_000, reasoning_tokens=500_000, cached_prompt_tokens=400_000
    )
    assert table.cost("gpt-5", usage) == pytest.approx(0.6 * 1.25 + 0.4 * 0.125 + 2 * 10.0)
    local = PriceTable({"*": {"input": 0, "output": 0}})
    assert local.cost("anything", usage) == 0.0 and local.lookup("gpt-5") == DEFAULT_PRICES["gpt-5"]
    with pytest.raises(ValueError, match="needs input and output"):
        PriceTable({"m": {"input": 1.0}})
    with pytest.raises(ValueError, match="negative"):
        PriceTable({"m": {"input": -1.0, "output": 1.0}})


def test_config_refuses_bad_values_and_unknown_keys():
    with pytest.raises(ValueError, match="unknown openai engine settings"):
        OpenAIEngineConfig.from_mapping({"model": "m", "max_concurency": 3})
    with pytest.raises(ValueError, match="reasoning_effort"):
        OpenAIEngineConfig(model="gpt-5", reasoning_effort="extreme")
    with pytest.raises(ValueError, match="preflight"):
        OpenAIEngineConfig.from_mapping({"model": "m", "preflight": ["ping"]})
    with pytest.raises(ValueError, match="only be null for a base_url"):
        OpenAIEngineConfig(model="m", api_key_env=None)
    cfg = OpenAIEngineConfig.from_mapping(
        {"model": "m", "preflight": "completion", "prices": {"m": {"input": 1, "output": 2}}}
    )
    assert cfg.preflight == ("completion",) and cfg.prices == {"m": {"input": 1, "output": 2}}


def test_redact_removes_keys_and_bearer_tokens():
    text = "Incorrect API key provided: sk-proj-abcdefghijklmnop; header Authorization: Bearer tok_123456789"
    out = redact(text, ("tok_123456789",))
    assert "abcdefghijklmnop" not in out and "tok_123456789" not in out and "sk-proj***" in out


def test_worker_environment_drops_api_keys(monkeypatch):
    # The engine reads keys from the environment; candidate code runs in workers that must not see them.
    for name in ("OPENAI_API_KEY", "KERNELRL_POLICY_API_KEY", "AZURE_OPENAI_CREDENTIAL", "MY_GATEWAY_BEARER"):
        monkeypatch.setenv(name, "sk-should-not-leak-0123456789")
    env = scrubbed_environment({})
    assert not any("sk-should-not-leak" in v for v in env.values())
