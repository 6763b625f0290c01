"""The agent on a GPU: the built-in reference solutions replayed as seeds, then only the launch-configuration
tuner, at full size. Every variant gets a measured speedup, the winner is re-verified with a speedup, and the
winner's lineage starts at the reference (how much the tuner gained is a measurement: docs/gpu-notes.md).
Then the physical floor in the verdict, the parent's profile in the mutation prompt, and the stop near the floor."""

from __future__ import annotations

import asyncio

import pytest

from envs import EvalSettings, Evaluator
from envs.cache import SqliteCache
from envs.problems import resolve_problem
from rl.agent.archive import SelectionConfig
from rl.agent.budget import Budget, BudgetConfig
from rl.agent.policies import Policy, ReplayEngine
from rl.agent.search import FLOOR_STOP, Search, SearchConfig
from rl.agent.store import PopulationStore
from rl.agent.verify import VerifyConfig, verify_winners
from rl.prompts import PromptBuilder, PromptConfig
from rl.bench.policies import answer_files
from rl.types import SamplingConfig
from tests.conftest import ROOT
from tests.unit.agent_helpers import ScriptedEngine

pytestmark = pytest.mark.gpu


def test_tuner_measures_variants_and_the_winner_is_reverified(tmp_path):
    problems = [resolve_problem(i) for i in ("L0_02_relu", "L2_01_softmax")]
    settings = EvalSettings(device="cuda", workers=1)
    config = SearchConfig(
        proposers=1,
        initial_fresh=1,
        tune_variants=2,  # a fast reference must not stop it early
        budget=BudgetConfig(per_problem=Budget(llm_calls=1, evaluations=5), stop_at_floor_fraction=None),
    )
    store = PopulationStore(tmp_path / "pop.sqlite")
    with Evaluator(settings) as evaluator:
        policy = Policy("references", ReplayEngine(ROOT / "envs/builtin/solutions", problems), SamplingConfig(n=1))
        outcomes = asyncio.run(
            Search(config, store, evaluator, [policy], PromptBuilder(PromptConfig(one_shot=False))).run(problems)
        )
    verified = verify_winners(outcomes, settings, VerifyConfig(candidates=1, timed_runs=100, anchor_runs=50), 1.8)
    for o, v in zip(outcomes, verified):
        assert o.records[0].proposal.operator == "fresh" and o.records[0].correct
        tuned = [r for r in o.records if r.proposal.operator == "tune"]
        assert len(tuned) == 4
        assert all(r.verdict.speedup is not None for r in tuned if r.correct)
        assert v.record is not None and v.verdict.correct and v.verdict.speedup is not None
        assert v.record.id == o.best.id


def test_floor_reaches_the_verdict_profiles_feed_mutation_and_the_floor_stops_a_problem(tmp_path):
    """floor_ms from the worker's timing checks is in the verdict (and in the cached copy), a correct parent's
    real profile is in its mutation prompt (profiled once), and a low stop_at_floor_fraction stops the search
    after the first correct kernel. About a minute on an H200 (relu's baselines compile once)."""
    problem = resolve_problem("L0_02_relu")
    reference = answer_files(ROOT / "envs/builtin/solutions", problem)[0].read_text()
    mutate_only = {"fresh": 0.0, "mutate": 1.0, "crossover": 0.0, "retrieval": 0.0, "tune": 0.0}
    cache = SqliteCache(tmp_path / "verdicts.sqlite")
    with Evaluator(EvalSettings(device="cuda", workers=1), cache=cache) as evaluator:
        pool = evaluator
        engine = ScriptedEngine([reference, reference])  # the mutation repeats it: a duplicate, not evaluated
        config = SearchConfig(
            proposers=1,
            initial_fresh=1,
            operator_weights=mutate_only,
            selection=SelectionConfig(islands=1, exploit=1.0),
            budget=BudgetConfig(
                per_problem=Budget(llm_calls=2, evaluations=2, profiles=1), stop_at_floor_fraction=None
            ),
        )
        store = PopulationStore(tmp_path / "profiled.sqlite")
        search = Search(
            config,
            store,
            pool,
            [Policy("scripted", engine, SamplingConfig(n=1))],
            PromptBuilder(PromptConfig(one_shot=False)),
        )
        [o] = asyncio.run(search.run([problem]))
        first = o.records[0].verdict
        assert first.correct and first.floor_ms is not None and first.floor_ms > 0
        assert 0 < first.speed_of_light < 1.2, first  # below the floor would have been re-measured / a hack
        mutation = engine.prompts[1][-1]["content"]
        assert "Where its device time goes:" in mutation and "device time per forward" in mutation, mutation
        assert "(yours)" in mutation and search.total.profiles == 1
        assert store.profile(problem.id, o.records[0].source_sha256)["profile"]["floor_ms"] > 0

        stop = BudgetConfig(
            per_problem=Budget(llm_calls=3, evaluations=3), stop_at_floor_fraction=first.speed_of_light / 2
        )
        engine = ScriptedEngine([reference, reference, reference])
        config = SearchConfig(proposers=1, initial_fresh=3, budget=stop, selection=SelectionConfig(islands=1))
        [o] = asyncio.run(
            Search(
                config,
                PopulationStore(tmp_path / "stopped.sqlite"),
                pool,
                [Policy("scripted", engine, SamplingConfig(n=1))],
                PromptBuilder(PromptConfig(one_shot=False)),
            ).run([problem])
        )
        assert len(o.records) == 1 and o.stop_reason.startswith(FLOOR_STOP), o.stop_reason
        assert o.records[0].verdict.cached and o.records[0].verdict.floor_ms == first.floor_ms  # from the cache
    cache.close()
