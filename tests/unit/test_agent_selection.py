"""Selection: fitness order, MAP-Elites cells per island, parent choice, ring migration, cells from features."""

import random
from pathlib import Path

import pytest

from rl.agent.archive import Archive, SelectionConfig
from rl.agent.features import UNPARSED_CELL, fitness, kernel_cell
from tests.unit.agent_helpers import fake_reward, record, verdict

ROOT = Path(__file__).resolve().parents[2]


def test_fitness_orders_correct_over_failures_and_faster_over_slower():
    order = ["hack", "compile_error", "runtime_error", "incorrect"]

    def fit(status: str, speedup: float | None = None) -> float:
        return fitness(verdict(status, speedup), fake_reward(status, speedup))

    values = [fit(s) for s in order]
    assert values == sorted(values) and values[0] == 0.0
    assert fit("correct") > fit("incorrect")
    assert fit("correct", 2.0) > fit("correct", 1.1) > fit("correct")


def test_cells_keep_the_best_per_cell_and_ties_go_to_the_earlier():
    a = Archive(SelectionConfig(islands=1, migration_interval=0))
    assert a.add(record(1, "incorrect", cell="x"))
    assert a.add(record(2, "correct", cell="x"))  # replaces the failure
    assert not a.add(record(3, "correct", cell="x"))  # a tie: the earlier stays
    assert a.add(record(4, "correct", 1.5, cell="x"))
    assert a.add(record(5, "incorrect", cell="y"))  # a new cell keeps even a failure (diversity)
    assert not a.add(record(6, "correct", 9.0, cell="x", duplicate_of=4))  # duplicates never enter
    assert [e.id for e in a.elites()] == [4, 5]
    assert a.best().id == 4


def test_islands_are_separate_until_migration():
    a = Archive(SelectionConfig(islands=2, migration_interval=2))
    a.add(record(1, "correct", 1.2, cell="x", island=0))
    assert not a.migration_due()
    a.add(record(2, "correct", 3.0, cell="y", island=1))
    assert [e.id for e in a.elites(0)] == [1] and [e.id for e in a.elites(1)] == [2]
    assert a.migration_due()
    moves = a.migrations()
    assert [(m.id, dest) for m, dest in moves] == [(1, 1), (2, 0)]
    for m, dest in moves:
        assert a.migrate_into(dest, m)
    assert [e.id for e in a.elites(0)] == [2, 1] and [e.id for e in a.elites(1)] == [2, 1]


def test_parent_choice_exploits_or_explores_and_is_seeded():
    a = Archive(SelectionConfig(islands=1, exploit=1.0))
    for i, cell in enumerate("abc", 1):
        a.add(record(i, "correct", float(i), cell=cell))
    assert a.select_parent(0, random.Random(0)).id == 3
    explore = Archive(SelectionConfig(islands=1, exploit=0.0))
    for e in a.elites():
        explore.add(e)
    picks = [explore.select_parent(0, random.Random(s)).id for s in range(30)]
    assert set(picks) == {1, 2, 3}
    assert picks == [explore.select_parent(0, random.Random(s)).id for s in range(30)]
    assert explore.select_parent(0, random.Random(0), correct_only=True).correct


def test_pairs_come_from_different_cells_and_empty_islands_borrow():
    a = Archive(SelectionConfig(islands=2, exploit=1.0))
    assert a.select_parent(0, random.Random(0)) is None and a.select_pair(0, random.Random(0)) is None
    a.add(record(1, "correct", 2.0, cell="x", island=0))
    assert a.select_pair(0, random.Random(0)) is None  # one cell: nothing to cross with
    assert a.select_parent(1, random.Random(0)).id == 1  # island 1 is empty: borrows island 0's
    a.add(record(2, "incorrect", cell="y", island=1))
    first, second = a.select_pair(0, random.Random(0))
    assert (first.id, second.id) == (1, 2)


def test_config_validation():
    with pytest.raises(ValueError):
        SelectionConfig(islands=0)
    with pytest.raises(ValueError):
        SelectionConfig(exploit=1.5)


def test_kernel_cells_from_features():
    read = lambda name: (ROOT / "envs/builtin/solutions" / f"{name}.py").read_text()  # noqa: E731
    assert kernel_cell(read("L0_02_relu")) == "k1-dot0-loop0-auto0"
    assert kernel_cell(read("L3_01_matmul")) == "k1-dot1-loop1-auto0"
    autotuned = "```python\nimport triton\n@triton.autotune(configs=[], key=[])\n@triton.jit\ndef k(x):\n    pass\n```"
    assert kernel_cell(autotuned) == "k1-dot0-loop0-auto1"
    assert kernel_cell("def broken(:") == UNPARSED_CELL
