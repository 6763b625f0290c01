"""Cached models are built once, atomically, even when two processes ask at the same time."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rl.models import smollm2_tokenizer

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def test_two_processes_build_one_random_model(tmp_path):
    shutil.copytree(smollm2_tokenizer(), tmp_path / "smollm2-tokenizer")  # so no GGUF read is needed here
    code = (
        "import json, os, sys; from rl.models import resolve_model; d = resolve_model('random:tiny-llama'); "
        "print(json.dumps([str(d), os.stat(d / 'model.safetensors').st_ino]))"
    )
    env = {**os.environ, "KERNELRL_MODEL_CACHE": str(tmp_path), "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    procs = [
        subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True) for _ in range(2)
    ]
    results = [json.loads(p.communicate(timeout=600)[0].strip().splitlines()[-1]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert results[0] == results[1]  # the same directory, the same weights file: built once
    final = tmp_path / "random-tiny-llama"
    assert results[0][0] == str(final)
    assert json.loads((final / "config.json").read_text())["num_hidden_layers"] == 2
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".random-tiny-llama.") and p.is_dir()]
    assert not leftovers  # no temporary build directory left behind
    assert oct(final.stat().st_mode & 0o777) == "0o755"
