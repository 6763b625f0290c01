"""The agent on a GPU: the built-in reference solutions replayed as seeds, then only the launch-configuration
tuner, at full size. Every variant gets a measured speedup, the winner is re-verified with a speedup, and the
winner's lineage starts at the reference (how much the tuner gained is a measurement: docs/gpu-notes.md)."""

from __future__ import annotations

import asyncio

import pytest

from envs import EvalSettings, Evaluator
from envs.problems import resolve_problem
from envs.tools.local import LocalEvaluation
from rl.agent.budget import Budget, BudgetConfig
from rl.agent.policies import Policy, ReplayEngine
from rl.agent.search import Search, SearchConfig
from rl.agent.store import PopulationStore
from rl.agent.verify import VerifyConfig, verify_winners
from rl.prompts import PromptBuilder, PromptConfig
from rl.types import SamplingConfig
from tests.conftest import ROOT

pytestmark = pytest.mark.gpu


def test_tuner_measures_variants_and_the_winner_is_reverified(tmp_path):
    problems = [resolve_problem(i) for i in ("L0_02_relu", "L2_01_softmax")]
    settings = EvalSettings(device="cuda", workers=1)
    config = SearchConfig(proposers=1, initial_fresh=1, tune_variants=2,
                          budget=BudgetConfig(per_problem=Budget(llm_calls=1, evaluations=5)))
    store = PopulationStore(tmp_path / "pop.sqlite")
    with Evaluator(settings) as evaluator:
        policy = Policy("references", ReplayEngine(ROOT / "envs/builtin/solutions", problems), SamplingConfig(n=1))
        outcomes = asyncio.run(Search(config, store, LocalEvaluation(evaluator), [policy],
                                      PromptBuilder(PromptConfig(one_shot=False))).run(problems))
    verified = verify_winners(outcomes, settings, VerifyConfig(candidates=1, timed_runs=100, anchor_runs=50), 1.8)
    for o, v in zip(outcomes, verified):
        assert o.records[0].proposal.operator == "fresh" and o.records[0].correct
        tuned = [r for r in o.records if r.proposal.operator == "tune"]
        assert len(tuned) == 4
        assert all(r.verdict.speedup is not None for r in tuned if r.correct)
        assert v.record is not None and v.verdict.correct and v.verdict.speedup is not None
        assert v.record.id == o.best.id
