"""Budgets (usage from stored candidates, caps, the no-cap refusal), the replay policy and the UCB1 bandit."""

import asyncio
from pathlib import Path

import pytest

from envs.problems import resolve_problem
from rl.agent.budget import Budget, BudgetConfig, Usage
from rl.agent.policies import Policy, PolicyBandit, ReplayEngine
from rl.agent.records import CandidateRecord, Proposal
from rl.agent.search import SearchConfig
from rl.bench.policies import FilesPolicyError
from rl.types import RolloutRequest, SamplingConfig
from tests.unit.agent_helpers import verdict

ROOT = Path(__file__).resolve().parents[2]
ANSWERS = ROOT / "tests/agent_answers"


def candidate(cid, operator="fresh", tokens=(10, 5), cost=None, seconds=2.0, duplicate_of=None):
    p = Proposal(
        operator,
        "x",
        policy="" if operator == "tune" else "pol",
        prompt_tokens=tokens[0],
        completion_tokens=tokens[1],
        cost_usd=cost,
    )
    return CandidateRecord(cid, "p", p, f"s{cid}", verdict("incorrect"), 0, "c", seconds, duplicate_of)


def test_usage_counts_llm_steps_tokens_cost_and_evaluations():
    usage = Usage.of(
        [candidate(1, cost=0.01), candidate(2, duplicate_of=1, cost=0.02), candidate(3, "tune", (0, 0), seconds=1.0)]
    )
    assert (usage.llm_calls, usage.evaluations, usage.tokens) == (2, 2, 30)
    assert usage.cost_usd == pytest.approx(0.03) and usage.eval_seconds == pytest.approx(3.0)
    assert usage.exhausted(Budget(llm_calls=2), llm=True) == "llm_calls 2 >= 2"
    assert usage.exhausted(Budget(llm_calls=2), llm=False) is None  # the tuner calls no policy
    assert usage.exhausted(Budget(evaluations=2), llm=False) == "evaluations 2 >= 2"
    assert usage.exhausted(Budget(cost_usd=0.05, tokens=100), llm=True) is None


def test_budget_config_validation():
    cfg = BudgetConfig.from_mapping(
        {"per_problem": {"evaluations": 3}, "total": {"cost_usd": 1.5}, "target_speedup": 2.0}
    )
    assert cfg.per_problem.evaluations == 3 and cfg.per_problem.llm_calls is None and cfg.total.cost_usd == 1.5
    with pytest.raises(ValueError, match="unknown"):
        BudgetConfig.from_mapping({"per_problem": {"evals": 3}})
    with pytest.raises(ValueError, match=">= 0"):
        Budget(tokens=-1)
    with pytest.raises(ValueError, match="never ends"):  # evaluations capped, LLM steps not: repeats loop forever
        SearchConfig(budget=BudgetConfig(per_problem=Budget(evaluations=5)))
    SearchConfig(budget=BudgetConfig(per_problem=Budget(), wall_seconds=60))


def test_search_config_from_mapping():
    cfg = SearchConfig.from_mapping(
        {
            "proposers": 3,
            "strategies": ["plain", "tiled"],
            "operator_weights": {"tune": 0, "mutate": 2},
            "selection": {"islands": 3},
            "budget": {"per_problem": {"llm_calls": 2, "evaluations": 4}},
        }
    )
    assert cfg.proposers == 3 and cfg.strategies == ("plain", "tiled") and cfg.selection.islands == 3
    for bad in ({"operator_weights": {"guess": 1}}, {"strategies": ["nope"]}, {"proposers": 0}, {"typo": 1}):
        with pytest.raises(ValueError):
            SearchConfig.from_mapping(bad)


def test_replay_serves_each_file_once_in_order_and_resumes():
    relu = resolve_problem("L0_02_relu")
    engine = ReplayEngine(ANSWERS, [relu])
    policy = Policy("files", engine, SamplingConfig(n=4))
    request = RolloutRequest("r", relu.id, [], SamplingConfig(n=3))
    texts = [asyncio.run(policy.sample(request)).text for _ in range(2)]
    assert texts == [(ANSWERS / "L0_02_relu" / f"{k}.py").read_text() for k in range(2)]
    assert not policy.available(relu.id)
    assert asyncio.run(policy.sample(request)).finish_reason == "error"
    resumed = ReplayEngine(ANSWERS, [relu])
    resumed.skip(relu.id, 1)
    assert resumed.remaining(relu.id) == 1
    with pytest.raises(FilesPolicyError):
        ReplayEngine(ANSWERS / "missing", [relu])


def test_bandit_tries_every_policy_then_prefers_the_better_one():
    bandit = PolicyBandit(["a", "b"], exploration=0.5)
    assert bandit.choose(["a", "b"]) == "a"
    bandit.record("a", 0.0)
    assert bandit.choose(["a", "b"]) == "b"
    bandit.record("b", 0.9)
    picks = []
    for _ in range(20):
        name = bandit.choose(["a", "b"])
        picks.append(name)
        bandit.record(name, 0.9 if name == "b" else 0.0)
    assert picks.count("b") > 15 and "a" in picks  # exploits, still explores
    assert bandit.choose(["a"]) == "a"
    with pytest.raises(ValueError):
        bandit.choose([])
