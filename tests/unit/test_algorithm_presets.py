"""The algorithm presets live in conf/algorithm/*.yaml. tests/unit/data/algorithm_presets_before.json holds the
resolved AlgorithmConfig of every preset and recipe as computed by the Python presets the YAML replaced (commit
"algorithm presets: snapshot the resolved values"): moving the values must not change a single one."""

import dataclasses
import json

import pytest
from hydra import compose, initialize_config_dir

from rl.config import RunConfig
from rl.learner.config import AlgorithmConfig
from tests.conftest import ROOT

BEFORE = json.loads((ROOT / "tests" / "unit" / "data" / "algorithm_presets_before.json").read_text())


def _compose(*overrides):
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose("config", overrides=list(overrides))


@pytest.fixture
def cluster_env(monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"")
    monkeypatch.setenv("KERNELRL_QWEN7B_DIR", str(tmp_path))


@pytest.mark.parametrize("case", sorted(BEFORE))
def test_resolved_algorithm_is_unchanged(case, cluster_env):
    kind, _, name = case.partition("=") if "=" in case else case.partition(":")
    if kind == "algorithm":
        temperature = "0.7" if name == "grpo_cpu" else "1.0"
        algorithm = RunConfig.from_hydra(_compose(case, f"rollout.temperature={temperature}")).algorithm
    elif kind == "+experiment":
        algorithm = RunConfig.from_hydra(_compose(case)).algorithm
    else:
        algorithm = AlgorithmConfig.from_mapping({"name": name})
    assert json.loads(json.dumps(dataclasses.asdict(algorithm))) == BEFORE[case]
