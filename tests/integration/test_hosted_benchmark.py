"""scripts/benchmark.py with the API policy (policy=gpt5) at single and 3-attempt settings, as it would measure
GPT-5 or a fine-tuned `ft:` model: the real openai engine and evaluator, against a local Chat Completions server
(the stand-in for OpenAI, which cannot be reached from here) whose "model" answers wrong first, then correctly."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from rl.hosted.registry import benchmark_overrides
from tests.conftest import ROOT
from tests.servers.chat_completions import ChatServer

pytestmark = pytest.mark.integration

KEY = "sk-test-bench-0123456789abcdef"
MODEL = "ft:gpt-5-2025-08-07:test-org:kernelrl:abc123"
RELU = (ROOT / "envs/builtin/solutions/L0_02_relu.py").read_text()
FIRST_TRY = "```python\nimport torch\n\nclass ModelNew(torch.nn.Module):\n    pass  # first try\n```"


class RefiningModel(ChatServer):
    """Answers a class without forward first; once its earlier answer is in the conversation, the real kernel."""

    def _answer(self, body: dict) -> dict:
        answered = any(m["role"] == "assistant" and "first try" in (m.get("content") or "") for m in body["messages"])
        text = f"```python\n{RELU}```" if answered else FIRST_TRY
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
        }


def test_benchmark_a_hosted_model_single_and_three_attempts(tmp_path):
    env = {**os.environ, "OPENAI_API_KEY": KEY, "WANDB_MODE": "disabled"}
    with RefiningModel(api_key=KEY, models=(MODEL,)) as server:
        reports = {}
        for attempts in (1, 3):
            out = tmp_path / f"a{attempts}" / "benchmark.json"
            proc = subprocess.run(
                [
                    sys.executable,
                    str(ROOT / "scripts/benchmark.py"),
                    *benchmark_overrides(MODEL),
                    f"++policy.engine.base_url={server.base_url}",
                    "ids=[L0_02_relu]",
                    f"attempts={attempts}",
                    "eval.device=cpu",
                    "progress=false",
                    "wandb.mode=disabled",
                    f"cache_path={tmp_path / 'c.sqlite'}",
                    f"output={out}",
                    f"hydra.run.dir={tmp_path / 'hydra' / str(attempts)}",
                ],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
            )
            assert proc.returncode == 0, proc.stderr[-3000:]
            reports[attempts] = json.loads(out.read_text())
        sent = [r["body"] for r in server.requests]
    assert reports[1]["correct_at_1"] == 0.0 and reports[1]["correct_within_attempts"] == 0.0
    assert reports[3]["correct_at_1"] == 0.0 and reports[3]["correct_within_attempts"] == 1.0
    assert all(b["model"] == MODEL and "temperature" not in b for b in sent)  # a reasoning model's request
    assert sent[-1]["messages"][-2]["content"] == FIRST_TRY  # the refinement round saw its earlier answer
