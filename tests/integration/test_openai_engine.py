"""The openai rollout engine against a real HTTP server on 127.0.0.1 that injects faults (429 with
Retry-After, 5xx, stalls), through the real openai SDK."""

from __future__ import annotations

import asyncio
import logging
import pickle

import pytest

from rl.rollout.openai_engine import EngineError, OpenAIEngine, OpenAIEngineConfig
from rl.rollout.pricing import RequestUsage, PriceTable
from rl.types import RolloutEngine, RolloutRequest, SamplingConfig, WeightUpdate
from tests.servers.chat_completions import ChatServer, Fault, token_id

pytestmark = pytest.mark.integration

KEY_ENV = "KERNELRL_TEST_POLICY_KEY"
KEY = "sk-test-0123456789abcdef"
PRICES = {"test-model": {"input": 2.0, "output": 8.0}}


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    with ChatServer(api_key=KEY) as srv:
        yield srv


def make(server, **kw) -> OpenAIEngine:
    cfg = dict(
        model="test-model",
        base_url=server.base_url,
        api_key_env=KEY_ENV,
        backoff_s=0.01,
        max_backoff_s=0.05,
        prices=PRICES,
    )
    cfg.update(kw)
    return OpenAIEngine(OpenAIEngineConfig(**cfg), seed=0)


def request(rid="step0/p0", n=3, **sampling) -> RolloutRequest:
    return RolloutRequest(
        rid,
        "L0_02_relu",
        [{"role": "system", "content": "rules here"}, {"role": "user", "content": f"problem {rid} source"}],
        SamplingConfig(n=n, **{"max_tokens": 64, **sampling}),
    )


def collect(engine, requests):
    async def run():
        try:
            return [s async for s in engine.generate(requests)]
        finally:
            await engine.aclose()  # the client's sockets belong to this event loop

    return asyncio.run(run())


def test_n_samples_in_one_request_with_usage_and_cost(server):
    engine = make(server)
    assert isinstance(engine, RolloutEngine)
    samples = collect(engine, [request(n=3)])
    assert sorted(s.index for s in samples) == [0, 1, 2] and len(server.requests) == 1
    body = server.requests[0]["body"]
    assert body["n"] == 3 and body["max_completion_tokens"] == 64 and body["logprobs"] is True
    assert body["temperature"] == 1.0 and "reasoning_effort" not in body and "return_token_ids" not in body
    assert len({s.text for s in samples}) == 3 and all(s.finish_reason == "stop" for s in samples)
    # No token ids (server gives none, no tokenizer): ids empty, logprobs dropped rather than misaligned.
    assert all(s.prompt_ids == [] and s.completion_ids == [] and s.logprobs is None for s in samples)
    prompt_tokens = len("rules here problem step0/p0 source".split())
    completion_tokens = 3 * server.completion_words
    expected = PriceTable(PRICES).cost("test-model", RequestUsage(prompt_tokens, completion_tokens))
    assert expected == pytest.approx((prompt_tokens * 2.0 + completion_tokens * 8.0) / 1e6)
    assert sum(s.usage["cost_usd"] for s in samples) == pytest.approx(expected)
    assert all(s.usage["prompt_tokens"] == prompt_tokens and s.usage["retries"] == 0 for s in samples)
    assert sum(s.usage["completion_tokens"] for s in samples) == pytest.approx(completion_tokens)
    assert all(s.usage["token_ids"] == "none" and s.seconds > 0 for s in samples)
    m = engine.metrics()
    assert m["rollout/api/http_requests"] == 1 and m["rollout/api/samples"] == 3
    assert m["rollout/api/cost_usd"] == pytest.approx(expected)


def test_one_call_per_sample_without_n_and_derived_seeds(server):
    engine = make(server, use_n=False)
    samples = collect(engine, [request("a", n=2, seed=7), request("b", n=2, seed=7)])
    assert len(samples) == 4 and len(server.requests) == 4
    assert all("n" not in r["body"] for r in server.requests)
    seeds = [r["body"]["seed"] for r in server.requests]
    assert len(set(seeds)) == 4  # per request and per sample
    again = make(server, use_n=False)
    collect(again, [request("a", n=2, seed=7), request("b", n=2, seed=7)])
    assert sorted(r["body"]["seed"] for r in server.requests[4:]) == sorted(seeds)  # reproducible


def test_groups_larger_than_max_n_are_split(server):
    samples = collect(make(server, max_n_per_request=2), [request(n=5)])
    assert sorted(s.index for s in samples) == [0, 1, 2, 3, 4]
    assert sorted(r["body"].get("n", 1) for r in server.requests) == [1, 2, 2]


def test_truncation_maps_to_length(server):
    samples = collect(make(server), [request(n=2, max_tokens=4)])
    assert all(s.finish_reason == "length" and s.usage["finish_reason_raw"] == "length" for s in samples)


def test_retries_on_429_and_5xx_honour_retry_after(server):
    server.faults = [Fault(429, retry_after="1"), Fault(500), Fault(503)]
    samples = collect(make(server), [request(n=2)])
    assert len(server.requests) == 4 and all(s.finish_reason == "stop" for s in samples)
    assert all(s.usage["retries"] == 3 for s in samples)
    times = [r["t"] for r in server.requests]
    assert times[1] - times[0] >= 0.95  # the server's Retry-After, not our 10 ms backoff
    assert make(server).metrics()["rollout/api/retries"] == 0


def test_timeouts_are_retried(server):
    # The stall outlasts the timeout whatever the load; the retry, an ordinary request, has 2 s to answer
    # (0.5 s was within reach of a loaded 2-core machine, and a second timeout would make it retries=2).
    server.faults = [Fault(delay_s=3.0)]
    samples = collect(make(server, timeout_s=2.0), [request(n=1)])
    assert samples[0].finish_reason == "stop" and samples[0].usage["retries"] == 1


def test_exhausted_retries_give_error_samples_not_a_crash(server):
    server.faults = [Fault(500), Fault(502), Fault(400)]
    engine = make(server, max_retries=1)
    samples = collect(engine, [request("r1", n=2), request("r2", n=1)])
    failed = [s for s in samples if s.finish_reason == "error"]
    assert {(s.request_id, s.index) for s in samples} == {("r1", 0), ("r1", 1), ("r2", 0)}
    assert failed and all(s.text == "" and s.usage["cost_usd"] == 0.0 and "HTTP" in s.usage["error"] for s in failed)
    assert engine.metrics()["rollout/api/failed_requests"] >= 1


def test_a_run_of_failures_stops_the_engine(server):
    server.faults = [Fault(400)] * 3
    engine = make(server, max_consecutive_failures=3, max_concurrency=1)
    with pytest.raises(EngineError, match="3 requests in a row failed"):
        collect(engine, [request(f"r{i}", n=1) for i in range(3)])


def test_concurrency_bound(server):
    server.latency_s = 0.3
    collect(make(server, max_concurrency=2, use_n=False), [request(f"r{i}", n=2) for i in range(4)])
    assert len(server.requests) == 8 and server.max_in_flight == 2


def test_requests_per_minute(server):
    # 120/min with half a second of burst: one request at once, then one every 0.5 s. Measured from the
    # second arrival: the first also pays for opening the connection.
    collect(make(server, requests_per_minute=120, rate_limit_burst_s=0.5, use_n=False), [request(n=4)])
    times = sorted(r["t"] for r in server.requests)
    assert len(times) == 4 and times[-1] - times[1] >= 2 * 0.5 * 0.8


def test_tokens_per_minute(server):
    # Each request is estimated at ~1000 tokens (n * max_tokens); 60k tokens/min with a 1 s burst holds
    # one of them, so the next waits ~1 s (less the refund of what the first actually used).
    engine = make(server, tokens_per_minute=60_000, rate_limit_burst_s=1.0, use_n=False)
    collect(engine, [request(n=3, max_tokens=1000)])
    times = sorted(r["t"] for r in server.requests)
    assert times[-1] - times[0] >= 0.9 * 2 * (1000 - 15 - 30) / 1000


def test_reasoning_model_parameters_and_cost(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    with ChatServer(api_key=KEY, models=("gpt-5-mini",), reasoning_tokens=100, cached_tokens=2) as srv:
        engine = OpenAIEngine(
            OpenAIEngineConfig(model="gpt-5-mini", base_url=srv.base_url, api_key_env=KEY_ENV, reasoning_effort="low")
        )
        samples = collect(engine, [request(n=2, temperature=0.7, stop=("```\n",))])
        body = srv.requests[0]["body"]
    assert body["reasoning_effort"] == "low"
    assert not {"temperature", "top_p", "stop", "logprobs"} & set(body)
    words = srv.completion_words
    prompt = len("rules here problem step0/p0 source".split())
    # Default table: gpt-5-mini $0.25 in, $0.025 cached in, $2 out per 1M; reasoning tokens bill as output.
    expected = ((prompt - 2) * 0.25 + 2 * 0.025 + 2 * (words + 100) * 2.0) / 1e6
    assert sum(s.usage["cost_usd"] for s in samples) == pytest.approx(expected)
    assert sum(s.usage["reasoning_tokens"] for s in samples) == pytest.approx(200)


def test_vllm_server_token_ids_and_logprobs(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    with ChatServer(api_key=KEY, owned_by="vllm", supports_token_ids=True) as srv:
        engine = OpenAIEngine(
            OpenAIEngineConfig(
                model="test-model", base_url=srv.base_url, api_key_env=KEY_ENV, prices={"*": {"input": 0, "output": 0}}
            )
        )
        engine.start()
        assert engine.server_kind == "vllm" and engine.server_token_ids is True
        samples = collect(engine, [request(n=2)])
        assert srv.requests[0]["body"]["return_token_ids"] is True
    for s in samples:
        assert s.completion_ids == [token_id(w) for w in s.text.split()]
        assert s.prompt_ids == [token_id(w) for w in "rules here problem step0/p0 source".split()]
        assert s.logprobs is not None and len(s.logprobs) == len(s.completion_ids)
        assert s.usage["completion_tokens_measured"] and s.usage["cost_usd"] == 0.0
        assert s.usage["token_ids"] == "server"


def test_start_refuses_a_bad_key_without_leaking_it(server, monkeypatch, caplog):
    wrong = "sk-wrong-SECRETSECRET123456"
    monkeypatch.setenv(KEY_ENV, wrong)
    engine = make(server)
    with caplog.at_level(logging.DEBUG), pytest.raises(EngineError, match="refused the API key") as info:
        engine.start()
    assert "SECRETSECRET" not in str(info.value) and "HTTP 401" in str(info.value)
    assert "SECRETSECRET" not in caplog.text
    assert "SECRETSECRET" not in repr(engine) and b"SECRETSECRET" not in pickle.dumps(engine)


def test_start_refuses_unknown_model_missing_key_and_unreachable_endpoint(server, monkeypatch):
    with pytest.raises(EngineError, match=r"does not serve model 'nope' \(it serves: test-model\)"):
        make(server, model="nope").start()
    with pytest.raises(EngineError, match="cannot reach"):
        make(server, base_url="http://127.0.0.1:9/v1", timeout_s=2.0).start()
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(EngineError, match=f"no API key in the environment variable {KEY_ENV}"):
        make(server)
    no_key = OpenAIEngine(OpenAIEngineConfig(model="test-model", base_url=server.base_url, api_key_env=None))
    server.api_key = None
    no_key.start()  # an endpoint without auth needs no key
    assert not server.requests  # the models check costs no completion


def test_endpoint_without_models_list(server):
    server.serve_models = False
    with pytest.raises(EngineError, match=r"HTTP 404.*preflight: \[completion\]"):
        make(server).start()
    make(server, preflight=("completion",)).start()


def test_completion_preflight_and_fatal_errors_during_generation(server, monkeypatch):
    engine = make(server, preflight=("models", "completion"))
    engine.start()
    assert len(server.requests) == 1 and server.requests[0]["body"]["max_completion_tokens"] == 1
    server.faults = [Fault(429, code="insufficient_quota")]
    with pytest.raises(EngineError, match="quota is exhausted"):
        collect(engine, [request(n=1)])
    monkeypatch.setenv(KEY_ENV, "sk-rotated-but-wrong-0000000000")  # read again by the next client
    with pytest.raises(EngineError, match="refused the API key") as info:
        collect(engine, [request(n=1)])
    assert "rotated-but-wrong" not in str(info.value)


def test_pickled_engine_works_in_another_event_loop(server):
    engine = make(server)
    engine.start()
    collect(engine, [request("first", n=1)])
    blob = pickle.dumps(engine)
    assert KEY.encode() not in blob
    copy = pickle.loads(blob)
    assert copy.started and copy._client is None
    samples = collect(copy, [request("second", n=2)])
    assert len(samples) == 2 and server.requests[-1]["auth"] == f"Bearer {KEY}"
    collect(engine, [request("third", n=1)])  # the original, in a new loop again


def test_update_weights_is_refused(server):
    with pytest.raises(EngineError, match="not ours to update"):
        make(server).update_weights(WeightUpdate(1, "lora", "/tmp/x"))


def test_engine_inside_a_ray_actor(server):
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": {KEY_ENV: KEY}})
    try:

        @ray.remote
        class Rollout:
            def __init__(self, engine):
                self.engine = engine
                self.engine.start()

            async def generate(self, requests):
                return [s async for s in self.engine.generate(requests)]

        actor = Rollout.remote(make(server))
        samples = ray.get(actor.generate.remote([request("ray", n=2)]), timeout=120)
        assert sorted(s.index for s in samples) == [0, 1] and all(s.finish_reason == "stop" for s in samples)
    finally:
        ray.shutdown()


def test_tokenizer_gives_ids_when_the_server_does_not(server):
    try:
        from rl.models import SMOLLM2, resolve_model

        model_dir = resolve_model(SMOLLM2)
        from transformers import AutoTokenizer
    except Exception as e:  # noqa: BLE001 - any reason the real tokenizer is unavailable here
        pytest.skip(f"SmolLM2's tokenizer is not available: {e}")
    engine = make(server, tokenizer=str(model_dir))
    req = request(n=2)
    samples = collect(engine, [req])
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    prompt = tokenizer.apply_chat_template(req.messages, tokenize=True, add_generation_prompt=True)
    prompt = prompt["input_ids"] if hasattr(prompt, "keys") else prompt
    for s in samples:
        assert s.prompt_ids == list(prompt) and s.usage["prompt_token_ids"] == "tokenizer"
        assert s.completion_ids == tokenizer.encode(s.text, add_special_tokens=False)
        assert s.usage["token_ids"] == "tokenizer" and s.usage["completion_tokens"] == len(s.completion_ids)
        assert s.logprobs is None  # the server's "tokens" (words) do not align with the tokenizer's ids
    copy = pickle.loads(pickle.dumps(engine))  # the tokenizer does not travel: the copy loads its own
    assert copy._tokenizer is None and collect(copy, [req])[0].prompt_ids == list(prompt)
    with pytest.raises(EngineError, match="cannot load tokenizer"):
        make(server, tokenizer="/nonexistent/tokenizer").start()


def test_malformed_answers_become_error_samples(server):
    server.faults = [
        Fault(raw_body="not json"),
        Fault(raw_body='{"id": "x", "choices": "nope"}'),
        Fault(raw_body='{"object": "chat.completion"}'),
    ]
    engine = make(server, max_retries=1, max_concurrency=1, use_n=False)
    samples = collect(engine, [request("bad", n=1), request("odd", n=1)])
    # "not json" is retried (a flaky proxy); the two malformed answers end their requests.
    assert [s.finish_reason for s in samples] == ["error", "error"] and len(server.requests) == 3
    errors = sorted(s.usage["error"] for s in samples)
    assert "not a chat completion" in errors[0] and "0 of 1 choices" in errors[1]
    assert [s.finish_reason for s in collect(engine, [request("good", n=1)])] == ["stop"]
