"""The warm-start stage end to end on CPU: every synthetic pair judged by the real evaluator (Triton
interpreter), SFT of a tiny random model on the kept ones, the merged model cached and reused."""

from __future__ import annotations

import json
import shutil

import pytest

from envs.settings import EvalSettings
from rl.models import resolve_model, smollm2_tokenizer
from rl.prompts import PromptBuilder, PromptConfig
from rl.warmstart.solved_problems import synthetic_solved
from rl.warmstart.stage import RECORD, WarmStartConfig, warm_started_model

pytestmark = pytest.mark.integration


def test_warm_start_verifies_every_pair_trains_and_is_built_once(tmp_path, monkeypatch):
    shutil.copytree(smollm2_tokenizer(), tmp_path / "smollm2-tokenizer")
    monkeypatch.setenv("KERNELRL_MODEL_CACHE", str(tmp_path))
    base = resolve_model("random:tiny-llama")
    prompts = PromptBuilder(PromptConfig(system="system_compact.j2", one_shot=False, strip_comments=True))
    config = WarmStartConfig(enabled=True, epochs=1, batch_size=8)
    settings = EvalSettings.from_mapping({"device": "cpu", "workers": 2})

    model = warm_started_model(config, base, prompts, settings, learner={"device": "cpu"})
    record = json.loads((model / RECORD).read_text())
    every_pair = len(synthetic_solved(config.seed))
    assert record["synthetic"] == every_pair and record["kept"] == every_pair, record["rejected"]  # all correct
    assert record["sft"]["examples"] == every_pair and len(record["sft"]["epochs"]) == 1
    assert (model / "config.json").is_file() and model.parent == tmp_path and model != base

    unusable = object()  # a cached model costs no evaluation: settings that cannot evaluate are never touched
    assert warm_started_model(config, base, prompts, unusable, learner={"device": "cpu"}) == model
    other = warm_started_model(
        WarmStartConfig(enabled=True, epochs=1, batch_size=8, lr=1e-4),
        base,
        prompts,
        settings,
        learner={"device": "cpu"},
    )
    assert other != model
