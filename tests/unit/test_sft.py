"""The supervised warm-start on a tiny random Llama with a real (byte-level) tokenizer and chat template."""

import json
import subprocess
import sys

import pytest

pytest.importorskip("transformers")
pytest.importorskip("peft")

from rl.learner.config import LoraSettings, OptimizerSettings, PolicyConfig  # noqa: E402
from rl.learner.random_models import byte_tokenizer, tiny_llama  # noqa: E402
from rl.sft import SFTConfig, SFTExample, read_examples, run_sft, tokenize_example  # noqa: E402

EXAMPLES = [
    SFTExample(
        [{"role": "system", "content": "write kernels"}, {"role": "user", "content": f"problem {i}"}],
        f"```python\nx = {i}\n```",
    )
    for i in range(4)
]


def test_only_the_answer_and_its_end_of_turn_are_completion_tokens():
    tok = byte_tokenizer()
    ids, prompt_length = tokenize_example(tok, EXAMPLES[1])
    assert tok.decode(ids[:prompt_length]) == (
        "<|im_start|>system\nwrite kernels<|im_end|>\n<|im_start|>user\nproblem 1<|im_end|>\n<|im_start|>assistant\n"
    )
    assert tok.decode(ids[prompt_length:]) == "```python\nx = 1\n```<|im_end|>"
    with pytest.raises(ValueError, match="empty completion"):
        tokenize_example(tok, SFTExample([{"role": "user", "content": "q"}], "  "))


def test_sft_lowers_the_loss_and_writes_a_complete_model(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = byte_tokenizer()
    policy = PolicyConfig(device="cpu", lora=LoraSettings(r=8, alpha=16), optimizer=OptimizerSettings(lr=3e-2))
    result = run_sft(
        policy,
        EXAMPLES,
        str(tmp_path / "out"),
        SFTConfig(epochs=4, batch_size=2, max_length=200),
        tokenizer=tok,
        model=tiny_llama(vocab_size=len(tok)),
    )
    losses = [e["loss"] for e in result["epochs"]]
    assert losses[-1] < losses[0] - 0.3, losses
    assert result["examples"] == 4 and result["dropped_too_long"] == 0
    assert AutoTokenizer.from_pretrained(tmp_path / "out").decode([256]) == "<|im_start|>"
    assert AutoModelForCausalLM.from_pretrained(tmp_path / "out").config.vocab_size == len(tok)


def test_too_long_examples_are_dropped_not_truncated(tmp_path):
    tok = byte_tokenizer()
    with pytest.raises(ValueError, match="longer than max_length=20"):
        run_sft(
            PolicyConfig(device="cpu"),
            EXAMPLES,
            str(tmp_path / "o"),
            SFTConfig(max_length=20),
            tokenizer=tok,
            model=tiny_llama(vocab_size=len(tok)),
        )


def test_read_examples_reports_the_bad_line(tmp_path):
    path = tmp_path / "pairs.jsonl"
    path.write_text(
        json.dumps({"messages": [{"role": "user", "content": "q"}], "completion": "a"})
        + "\n"
        + json.dumps({"messages": "q", "completion": "a"})
        + "\n"
    )
    with pytest.raises(ValueError, match=r"pairs.jsonl:2: messages must be a list"):
        read_examples(str(path))


@pytest.mark.integration
def test_the_cli_trains_and_exports_an_adapter(tmp_path):
    tok = byte_tokenizer()
    model_dir = tmp_path / "model"
    tiny_llama(vocab_size=len(tok)).save_pretrained(model_dir)
    tok.save_pretrained(model_dir)
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps({"messages": e.messages, "completion": e.completion}) + "\n" for e in EXAMPLES))
    out = tmp_path / "adapter"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "rl.sft",
            "--model",
            str(model_dir),
            "--data",
            str(data),
            "--output",
            str(out),
            "--export",
            "lora",
            "--epochs",
            "1",
            "--device",
            "cpu",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1])["examples"] == 4
    assert (out / "adapter_config.json").is_file()
    bad = subprocess.run(
        [sys.executable, "-m", "rl.sft", "--model", str(tmp_path / "none"), "--data", str(data), "--output", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode == 2 and "error:" in bad.stderr
