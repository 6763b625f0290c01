"""policy.model as a Hugging Face Hub id: served from the local HF cache, never downloaded. The cache
here is huggingface_hub's own layout (refs/main -> snapshots/<commit>), read by the real library offline."""

import pytest
from hydra import compose, initialize_config_dir

from rl.config import ConfigError, RunConfig
from rl.models import ModelSpecError, resolve_model, validate_model_spec
from tests.conftest import ROOT


def _cache(root, repo_id="org/tiny-model", commit="0123abcd", weights=True):
    repo = root / ("models--" + repo_id.replace("/", "--"))
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    snap = repo / "snapshots" / commit
    snap.mkdir(parents=True)
    (snap / "config.json").write_text("{}")
    if weights:
        (snap / "model.safetensors").write_bytes(b"")
    return snap


def test_a_cached_hub_id_resolves_to_its_snapshot(tmp_path, monkeypatch):
    snap = _cache(tmp_path)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    validate_model_spec("org/tiny-model")
    assert resolve_model("org/tiny-model") == snap.resolve()
    assert resolve_model("org/tiny-model@main") == snap.resolve()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=["policy=tiny_random", "policy.model=org/tiny-model"])
    assert RunConfig.from_hydra(cfg).policy.model == "org/tiny-model"


def test_hf_home_is_honoured(tmp_path, monkeypatch):
    snap = _cache(tmp_path / "hub")
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    assert resolve_model("org/tiny-model") == snap.resolve()


def test_an_uncached_hub_id_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    message = r"'org/absent'.*cached in .*fetch it first with `huggingface-cli download"
    with pytest.raises(ModelSpecError, match=message):
        validate_model_spec("org/absent")
    _cache(tmp_path, "org/no-weights", weights=False)
    with pytest.raises(ModelSpecError, match="has no weights"):
        validate_model_spec("org/no-weights")
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=["policy=tiny_random", "policy.model=org/absent"])
    with pytest.raises(ConfigError, match="policy.model: model 'org/absent'"):
        RunConfig.from_hydra(cfg)


def test_an_existing_relative_directory_wins_over_a_hub_id(tmp_path, monkeypatch):
    (tmp_path / "models" / "mine").mkdir(parents=True)
    (tmp_path / "models" / "mine" / "config.json").write_text("{}")
    (tmp_path / "models" / "mine" / "model.safetensors").write_bytes(b"")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    assert resolve_model("models/mine") == (tmp_path / "models" / "mine").resolve()
