"""The population store: rows round-trip with their verdicts, problems are bound to their source, resume reads back."""

import dataclasses

import pytest

from envs.problems import resolve_problem
from rl.agent.records import Proposal, source_key
from rl.agent.store import PopulationStore, StoreError
from tests.unit.agent_helpers import verdict


def test_candidates_round_trip_with_verdict_prompt_and_cost(tmp_path):
    store = PopulationStore(tmp_path / "pop.sqlite")
    prompt = [{"role": "user", "content": "write relu"}]
    p = Proposal("mutate", "```python\nx = 1\n```", "", "smollm2 (vllm)", (3,), prompt, 120, 40, 0.002, 1.5, "stop")
    v = verdict("correct", 1.7)
    added = store.add(
        "L0_02_relu", p, source_key(p.text), v, island=1, cell="k1-dot0-loop0-auto0", eval_seconds=2.5, reward=0.77
    )
    store.close()
    again = PopulationStore(tmp_path / "pop.sqlite")  # a new process would see the same
    [back] = again.candidates("L0_02_relu")
    assert back == added
    assert back.proposal.prompt == prompt and back.proposal.parents == (3,) and back.proposal.cost_usd == 0.002
    assert back.verdict == v and back.speedup == 1.7 and back.reward == 0.77
    assert again.find("L0_02_relu", source_key("x = 1")) == back  # canonical code: formatting does not matter
    assert again.find("L0_02_relu", source_key("x = 2")) is None
    assert again.candidates("other") == []


def test_duplicates_are_stored_but_never_found_as_the_original(tmp_path):
    store = PopulationStore(tmp_path / "pop.sqlite")
    p = Proposal("fresh", "x = 1")
    first = store.add("p", p, "s", verdict("incorrect"), 0, "c", 1.0)
    dup = store.add("p", p, "s", first.verdict, 1, "c", 0.0, duplicate_of=first.id)
    assert store.find("p", "s").id == first.id
    assert [r.duplicate_of for r in store.candidates("p")] == [None, first.id]
    assert store.get(dup.id) == dup
    with pytest.raises(StoreError):
        store.get(999)


def test_problem_bound_to_its_source(tmp_path):
    store = PopulationStore(tmp_path / "pop.sqlite")
    problem = resolve_problem("L0_02_relu")
    store.bind(problem)
    store.bind(problem)  # same source: fine
    changed = dataclasses.replace(problem, source=problem.source + "\n# changed\n")
    with pytest.raises(StoreError, match="changed since its population was stored"):
        store.bind(changed)
    assert store.problem_ids() == ["L0_02_relu"]


def test_migrations_in_order(tmp_path):
    store = PopulationStore(tmp_path / "pop.sqlite")
    assert store.add_migration("p", 5, 1, after_id=8)
    assert store.add_migration("p", 2, 0, after_id=4)
    assert not store.add_migration("p", 2, 0, after_id=9)  # already there
    assert store.migrations("p") == [(2, 0, 4), (5, 1, 8)]


def test_unknown_operator_refused():
    with pytest.raises(ValueError, match="operator must be one of"):
        Proposal("guess", "x")
