"""The difficulty stage's LLM judge over real HTTP (tests/servers/chat_completions.py on 127.0.0.1): a level
from the answer, retries on 5xx, answers cached in SQLite so a re-run asks nothing, and the structural
estimate (noted) when the answer states no level or the endpoint is unusable."""

from __future__ import annotations

import json

import pytest

from envs.data.difficulty import assign_difficulty
from envs.data.llm import CurationLLM
from envs.data.records import CandidateProblem, Origin
from envs.problems import load_builtin
from tests.servers.chat_completions import ChatServer, Fault

pytestmark = pytest.mark.integration

KEY, KEY_ENV = "sk-test-curate-0123456789", "KERNELRL_TEST_CURATE_KEY"


def _completion(content: str) -> str:
    return json.dumps(
        {
            "id": "c1",
            "object": "chat.completion",
            "created": 0,
            "model": "test-model",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3},
        }
    )


def test_llm_levels_with_retries_cache_and_fallback(tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    rubric = tmp_path / "rubric.md"
    rubric.write_text("Rate the difficulty. Answer LEVEL: <0-5>\n")
    problems = load_builtin()
    matmul = CandidateProblem("m", problems[22].source, Origin("kernelbench", "x"))  # L3_01_matmul
    relu = CandidateProblem("r", problems[1].source, Origin("kernelbench", "y"))
    with ChatServer(api_key=KEY) as server:
        cfg = {
            "model": "test-model",
            "base_url": server.base_url,
            "api_key_env": KEY_ENV,
            "backoff_s": 0.01,
            "json_mode": False,
            "requests_per_minute": None,
            "cache": str(tmp_path / "llm.sqlite"),
        }
        llm = CurationLLM.from_mapping(cfg)
        server.faults = [Fault(500), Fault(raw_body=_completion("Reasoning... LEVEL: 5"))]
        result = assign_difficulty([matmul], llm, rubric)
        assert result.kept[0].level == 5 and result.kept[0].facts["difficulty"]["by"] == "llm:test-model"
        assert len(server.requests) == 2  # the 500 was retried
        assert server.requests[-1]["body"]["messages"][0]["content"] == rubric.read_text()
        again = assign_difficulty([matmul], CurationLLM.from_mapping(cfg), rubric)  # a fresh client: the cache
        assert again.kept[0].level == 5 and "(cached)" in again.kept[0].facts["difficulty"]["by"]
        assert len(server.requests) == 2
        # The server's default answer states no level: the structural estimate decides, and says so.
        fallback = assign_difficulty([relu], llm, rubric)
        assert fallback.kept[0].level == 0 and fallback.kept[0].facts["difficulty"]["by"] == "structural"
        assert any(d.decision == "note" and "states no level" in d.reason for d in fallback.decisions)
        server.faults = [Fault(400)]
        refused = assign_difficulty(
            [CandidateProblem("r2", problems[2].source, Origin("kernelbench", "z"))], llm, rubric
        )
        assert any("unavailable" in d.reason for d in refused.decisions if d.decision == "note")


def test_llm_writes_inputs_for_a_module_the_rules_cannot_size(tmp_path, monkeypatch):
    from envs.data.crawl.crawler import CrawlConfig, CrawlSkip, crawl
    from envs.problems import parse_problem

    monkeypatch.setenv(KEY_ENV, KEY)
    tree = tmp_path / "mylib"
    tree.mkdir()
    (tree / "block.py").write_text(
        "import torch\n\nclass Block(torch.nn.Module):\n    def __init__(self, config):\n"
        "        super().__init__()\n        self.scale = config\n\n"
        "    def forward(self, x):\n        return torch.tanh(x) * self.scale\n"
    )
    code = (
        "```python\nimport torch\nN = 4096\nD = 4096\nSMALL_SIZES = {'N': 32, 'D': 32}\n"
        "def get_init_inputs():\n    return [2.0]\n\ndef get_inputs():\n    return [torch.randn(N, D)]\n```"
    )
    with ChatServer(api_key=KEY) as server:
        server.faults = [Fault(raw_body=_completion(code))]
        llm_cfg = {
            "model": "test-model",
            "base_url": server.base_url,
            "api_key_env": KEY_ENV,
            "json_mode": False,
            "requests_per_minute": None,
        }
        without = list(crawl(CrawlConfig(packages=(), directories=(str(tree),))))
        assert isinstance(without[0], CrawlSkip) and "config" in without[0].reason
        items = list(crawl(CrawlConfig(packages=(), directories=(str(tree),), llm=llm_cfg)))
    assert len(items) == 1 and not isinstance(items[0], CrawlSkip)
    problem = parse_problem(items[0].source, items[0].id)
    assert problem.small_sizes == {"N": 32, "D": 32} and "LLM-written (test-model)" in items[0].source
    assert items[0].origin.license is None and items[0].origin.path.endswith("block.py")
