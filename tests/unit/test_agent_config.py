"""conf/generate.yaml composes, with every policy kind, into the agent's typed settings (typos refused)."""

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from envs.settings import EvalSettings
from rl.agent.search import SearchConfig
from rl.agent.verify import VerifyConfig
from tests.conftest import ROOT


def plain(*overrides):
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return OmegaConf.to_container(compose("generate", overrides=list(overrides)), resolve=True)


def test_defaults_and_overrides_become_typed_settings():
    cfg = plain(
        "policy=files",
        "policy.dir=tests/agent_answers",
        "agent.proposers=3",
        "agent.budget.per_problem.evaluations=5",
        "agent.selection.islands=4",
    )
    search = SearchConfig.from_mapping(cfg["agent"])
    assert search.proposers == 3 and search.selection.islands == 4
    assert search.budget.per_problem.evaluations == 5 and search.budget.per_problem.llm_calls == 16
    assert search.strategies == ("plain", "fused", "tiled", "autotuned")
    assert VerifyConfig(**cfg["verify"]).timed_runs == 300
    EvalSettings.from_mapping(cfg["eval"])
    assert cfg["solutions"]["split"] == "train" and cfg["policy"]["kind"] == "files"


def test_model_policies_compose_with_extra_policies():
    cfg = plain("policy=smollm2_135m", "extra_policies=[{name: seeds, kind: files, dir: d}]")
    assert cfg["policy"]["engine"]["kind"] == "vllm"
    assert cfg["extra_policies"] == [{"name": "seeds", "kind": "files", "dir": "d"}]


def test_typos_are_refused():
    with pytest.raises(ValueError, match="unknown"):
        SearchConfig.from_mapping({**plain()["agent"], "proposer": 2})
    with pytest.raises(ValueError, match="unknown"):
        SearchConfig.from_mapping({**plain()["agent"], "selection": {"island": 2}})
