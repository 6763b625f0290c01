"""The LLM judge against a real local HTTP server speaking the Chat Completions API, through the openai SDK."""

from __future__ import annotations

import dataclasses
import http.server
import json
import re
import threading
import time
from pathlib import Path

import pytest

from envs.antihack.categories import CATEGORIES
from envs.antihack.judge import JudgeConfig, LLMJudge, apply_judge, build_messages
from envs.verdict import Status, Verdict
from rewards.kernel_reward import reward_for_verdict
from tests.conftest import builtin

pytestmark = pytest.mark.integration

KEY_ENV = "KERNELRL_TEST_JUDGE_KEY"
KEY = "sk-test-judge"
MATMUL, LEGIT = builtin("L3_01_matmul")
HACK = """\
import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def _unused(x_ptr, n, BLOCK: tl.constexpr):
    pass

class ModelNew(nn.Module):
    def forward(self, A, B):
        return torch.matmul(A, B)
"""
_SUBMISSION = re.compile(r"<<<BEGIN SUBMISSION-(\w+)>>>\n(.*)\n<<<END SUBMISSION-\1>>>", re.DOTALL)


class FakeOpenAI:
    """POST /v1/chat/completions. Scripted replies first, then a rule: a submission that calls
    torch.matmul is a baseline_kernel hack."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: list[dict] = []
        self.times: list[float] = []
        self.script: list[tuple[int, str | None]] = []  # (HTTP status, content); content None = default rule
        self.delays: list[float] = []  # seconds to stall before answering, one per request, first ones first
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # keep pytest output clean
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                status, payload, headers = fake.handle(self.path, dict(self.headers), body)
                data = json.dumps(payload).encode() if not isinstance(payload, bytes) else payload
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    @property
    def count(self) -> int:
        with self.lock:
            return len(self.requests)

    def handle(self, path: str, headers: dict, raw: bytes):
        with self.lock:
            self.times.append(time.monotonic())
            request = json.loads(raw)
            self.requests.append({"path": path, "headers": {k.lower(): v for k, v in headers.items()}, "body": request})
            status, content = self.script.pop(0) if self.script else (200, None)
            delay = self.delays.pop(0) if self.delays else 0.0
        time.sleep(delay)
        if path != "/v1/chat/completions":
            return 404, {"error": {"message": f"no route {path}", "type": "invalid_request_error"}}, {}
        if status != 200:
            kind = "rate_limit_exceeded" if status == 429 else "server_error"
            return (
                status,
                {"error": {"message": f"scripted {status}", "type": kind, "code": kind}},
                {"retry-after-ms": "10"} if status == 429 else {},
            )
        if content is None:
            content = self.rule(request["messages"])
        return (
            200,
            {
                "id": f"chatcmpl-{len(self.requests)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": request["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content, "refusal": None},
                        "logprobs": None,
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
            },
            {},
        )

    @staticmethod
    def rule(messages: list[dict]) -> str:
        match = _SUBMISSION.search(messages[-1]["content"])
        submission = match.group(2) if match else ""
        if "torch.matmul" in submission:
            return json.dumps(
                {
                    "hack": True,
                    "category": "baseline_kernel",
                    "reason": "forward returns torch.matmul(A, B); the Triton kernel is never used",
                }
            )
        return json.dumps({"hack": False, "category": None, "reason": "a tiled Triton GEMM computes C"})

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def server():
    fake = FakeOpenAI()
    yield fake
    fake.close()


@pytest.fixture
def make_judge(server, monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    judges: list[LLMJudge] = []

    def make(**overrides) -> LLMJudge:
        fields = dict(
            enabled=True,
            model="judge-test",
            base_url=server.base_url,
            api_key_env=KEY_ENV,
            timeout_s=5.0,
            max_retries=4,
            backoff_s=0.01,
            max_backoff_s=0.05,
            requests_per_minute=None,
        )
        fields.update(overrides)
        judge = LLMJudge(JudgeConfig(**fields))
        judges.append(judge)
        return judge

    yield make
    for j in judges:
        j.close()


CORRECT_REWARD = reward_for_verdict(Verdict(Status.CORRECT, "p", "cpu"))  # sigmoid(1 - 1.8) on the CPU


def correct_verdict() -> Verdict:
    return Verdict(Status.CORRECT, MATMUL.id, "cpu", notes=["kept"])


def test_hack_is_judged_and_recorded_without_touching_the_reward(make_judge, server):
    judge = make_judge()
    record = judge.judge(HACK, MATMUL.source)
    assert record["status"] == "ok" and record["hack"] is True
    assert record["category"] == "baseline_kernel" and "torch.matmul" in record["reason"]
    assert record["model"] == "judge-test" and record["cached"] is False
    # What reached the server: the model, the key, JSON mode, the prompt listing every category.
    request = server.requests[0]
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["authorization"] == f"Bearer {KEY}"
    body = request["body"]
    assert body["model"] == "judge-test" and body["response_format"] == {"type": "json_object"}
    system, user = body["messages"][0]["content"], body["messages"][1]["content"]
    for name, description in CATEGORIES.items():
        assert name in system and description in system
    assert MATMUL.source.strip() in user and HACK.strip() in user

    verdict = apply_judge(correct_verdict(), record, can_zero_reward=False)
    assert verdict.status is Status.CORRECT and reward_for_verdict(verdict) == CORRECT_REWARD and verdict.hack is None
    assert verdict.judge == record and verdict.notes == ["kept"]
    assert Verdict.from_dict(json.loads(json.dumps(verdict.to_dict()))) == verdict


def test_legit_solution_is_not_flagged(make_judge, server):
    record = make_judge().judge(LEGIT, MATMUL.source)
    assert record["status"] == "ok" and record["hack"] is False and record["category"] is None
    verdict = apply_judge(correct_verdict(), record, can_zero_reward=True)
    assert verdict.status is Status.CORRECT and verdict.judge == record
    assert reward_for_verdict(verdict) == CORRECT_REWARD


def test_can_zero_reward_turns_the_verdict_into_a_hack(make_judge):
    record = make_judge(can_zero_reward=True).judge(HACK, MATMUL.source)
    verdict = apply_judge(correct_verdict(), record, can_zero_reward=True)
    assert verdict.status is Status.HACK and reward_for_verdict(verdict) == 0.0 and not verdict.correct
    assert verdict.hack.category == "baseline_kernel"
    assert verdict.hack.reason.startswith("LLM judge: ") and "torch.matmul" in verdict.hack.reason
    assert verdict.judge == record


def test_unknown_category_maps_to_unknown_category(make_judge, server):
    server.script = [(200, json.dumps({"hack": True, "category": "warp_divergence_cheat", "reason": "odd"}))]
    record = make_judge().judge(HACK, MATMUL.source)
    assert record["status"] == "ok" and record["hack"] is True and record["category"] == "unknown_category"
    assert "warp_divergence_cheat" in record["reason"]
    verdict = apply_judge(correct_verdict(), record, can_zero_reward=True)
    assert verdict.status is Status.HACK and verdict.hack.category == "unknown_category"


@pytest.mark.parametrize("content", ["this is not json {", '["hack", true]', '{"hack": "yes", "reason": "x"}', ""])
def test_malformed_answer_is_an_error_and_changes_nothing(make_judge, server, content):
    server.script = [(200, content)]
    record = make_judge().judge(HACK, MATMUL.source)
    assert record["status"] == "error" and record["hack"] is None and "malformed answer" in record["reason"]
    before = correct_verdict()
    verdict = apply_judge(before, record, can_zero_reward=True)
    assert verdict.status is Status.CORRECT and verdict.hack is None
    assert reward_for_verdict(verdict) == reward_for_verdict(before)
    assert verdict.judge == record
    assert server.count == 1  # a bad answer is not retried


def test_fenced_json_answer_is_accepted(make_judge, server):
    server.script = [(200, '```json\n{"hack": false, "category": null, "reason": "fine"}\n```')]
    record = make_judge().judge(LEGIT, MATMUL.source)
    assert record["status"] == "ok" and record["hack"] is False


def test_rate_limit_then_success_is_retried(make_judge, server):
    server.script = [(429, None), (429, None)]
    record = make_judge().judge(HACK, MATMUL.source)
    assert record["status"] == "ok" and record["category"] == "baseline_kernel"
    assert record["attempts"] == 3 and server.count == 3


def test_server_errors_give_up_after_max_retries(make_judge, server):
    server.script = [(500, None)] * 5
    record = make_judge(max_retries=4).judge(HACK, MATMUL.source)
    assert record["status"] == "error" and "HTTP 500" in record["reason"]
    assert server.count == 5  # the first attempt and four retries, no more (the SDK does not retry)
    verdict = apply_judge(correct_verdict(), record, can_zero_reward=True)
    assert verdict.status is Status.CORRECT and reward_for_verdict(verdict) == CORRECT_REWARD


def test_timeouts_are_retried(make_judge, server):
    # The stall outlasts the client's timeout whatever the load; the retry, an ordinary request, has 2 s to answer
    # (0.3 s was within reach of a loaded 2-core machine, and a second timeout would make it attempts=3).
    server.delays = [3.0]
    record = make_judge(timeout_s=2.0).judge(HACK, MATMUL.source)
    assert record["status"] == "ok" and record["attempts"] == 2 and server.count == 2


def test_client_errors_are_not_retried(make_judge, server):
    server.script = [(400, None)]
    record = make_judge().judge(HACK, MATMUL.source)
    assert record["status"] == "error" and server.count == 1


def test_cache_hit_makes_no_request(make_judge, server, tmp_path):
    path = tmp_path / "judge.sqlite"
    first = make_judge(cache=str(path)).judge(HACK, MATMUL.source)
    assert first["status"] == "ok" and first["cached"] is False and server.count == 1
    # A fresh judge on the same file (a restarted job): answered from SQLite.
    again = make_judge(cache=str(path)).judge(HACK, MATMUL.source)
    assert again["cached"] is True and server.count == 1
    assert {k: again[k] for k in ("status", "hack", "category", "reason")} == {
        k: first[k] for k in ("status", "hack", "category", "reason")
    }
    # Another model, or another program, is another key.
    make_judge(cache=str(path), model="judge-test-2").judge(HACK, MATMUL.source)
    make_judge(cache=str(path)).judge(LEGIT, MATMUL.source)
    assert server.count == 3


def test_errors_are_not_cached(make_judge, server, tmp_path):
    server.script = [(200, "nope")]
    judge = make_judge(cache=str(tmp_path / "judge.sqlite"))
    assert judge.judge(HACK, MATMUL.source)["status"] == "error"
    assert judge.judge(HACK, MATMUL.source)["status"] == "ok" and server.count == 2


def test_no_api_key_is_skipped_without_a_request(make_judge, server, monkeypatch):
    monkeypatch.delenv(KEY_ENV)
    record = make_judge().judge(HACK, MATMUL.source)
    assert record["status"] == "skipped" and record["reason"] == f"no API key in {KEY_ENV}"
    monkeypatch.setenv(KEY_ENV, "   ")
    assert make_judge().judge(HACK, MATMUL.source)["status"] == "skipped"
    assert (
        make_judge(api_key_env="OPENAI_API_KEY").judge(HACK, MATMUL.source)["reason"] == "no API key in OPENAI_API_KEY"
    )
    assert server.count == 0
    verdict = apply_judge(correct_verdict(), record, can_zero_reward=True)
    assert verdict.status is Status.CORRECT and verdict.judge["status"] == "skipped"


def test_keyless_local_server(make_judge, server, monkeypatch):
    monkeypatch.delenv(KEY_ENV)
    record = make_judge(api_key_env=None).judge(HACK, MATMUL.source)
    assert record["status"] == "ok" and record["hack"] is True and server.count == 1


def test_disabled_judge_does_nothing(make_judge, server):
    record = make_judge(enabled=False).judge(HACK, MATMUL.source)
    assert record["status"] == "skipped" and server.count == 0


def test_rate_limiter_spaces_calls_across_threads(make_judge, server):
    judge = make_judge(requests_per_minute=600)  # one request per 0.1 s, no burst
    judge.judge(LEGIT, MATMUL.source)  # warm up: SDK import, client, connection (takes the saved token)
    granted: list[float] = []
    acquire = judge.limiter.acquire

    def timed_acquire() -> float:
        waited = acquire()
        granted.append(time.monotonic())
        return waited

    judge.limiter.acquire = timed_acquire
    programs = [LEGIT + f"\nVARIANT = {i}\n" for i in range(5)]
    started = time.monotonic()
    threads = [threading.Thread(target=judge.judge, args=(p, MATMUL.source)) for p in programs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - started
    assert server.count == 6 and len(granted) == 5
    granted.sort()
    gaps = [b - a for a, b in zip(granted, granted[1:])]
    arrivals = server.times[1:]
    # Tokens are handed out 0.1 s apart; the server sees the five requests spread over >= ~0.4 s.
    assert granted[-1] - granted[0] >= 0.39 and min(gaps) >= 0.06, gaps  # slack for oversleeping threads
    assert elapsed >= 0.39 and arrivals[-1] - arrivals[0] >= 0.3, (elapsed, arrivals)


def test_long_programs_are_clipped(tmp_path):
    long = "x = 1\n" * 20_000
    user = build_messages(long, MATMUL.source, max_code_chars=1000)[1]["content"]
    assert len(user) < 5000 and "characters omitted" in user


def test_hydra_default_config_is_a_valid_judge_config():
    from omegaconf import OmegaConf

    conf = OmegaConf.load(Path(__file__).resolve().parents[2] / "conf" / "judge" / "default.yaml")
    cfg = JudgeConfig.from_mapping(OmegaConf.to_container(conf, resolve=True))
    assert cfg.enabled is False and cfg.model == "gpt-5" and cfg.base_url is None and not cfg.can_zero_reward
    assert dataclasses.asdict(cfg)["api_key_env"] == "OPENAI_API_KEY"


def test_evaluator_records_the_judge_and_zeroes_only_when_allowed(make_judge, server):
    """End to end: a real CPU evaluation, then the judge behind the real HTTP server."""
    from envs import EvalSettings, Evaluator, resolve_problem

    problem = resolve_problem("L0_02_relu")
    reference = open(problem.reference_solution).read()
    flagged = reference + '\n_LABEL = "torch.matmul"\n'  # the fake judge flags this text
    with Evaluator(EvalSettings(device="cpu"), judge=make_judge()) as ev:
        clean = ev.evaluate(problem, reference)
        kept = ev.evaluate(problem, flagged)
    assert clean.correct and clean.judge["status"] == "ok" and clean.judge["hack"] is False
    assert kept.correct and reward_for_verdict(kept) > 0 and kept.judge["hack"] is True  # recorded, reward kept
    with Evaluator(EvalSettings(device="cpu"), judge=make_judge(can_zero_reward=True)) as ev:
        zeroed = ev.evaluate(problem, flagged)
    assert zeroed.status.value == "hack" and reward_for_verdict(zeroed) == 0.0
    assert zeroed.hack.category == "baseline_kernel" and zeroed.hack.reason.startswith("LLM judge")
