"""The agent's search loop for real on the CPU: the local evaluation pool (worker processes, Triton interpreter),
the replay policy over tests/agent_answers (a wrong answer first, then a correct one per problem) plus the
launch-configuration tuner, on two built-in level-0 problems. Checks that the population grows beyond the
replayed files, that the winner is the measured best (not the first or the last candidate), that a stopped run
resumes from its store without re-asking or re-evaluating, that a fixed seed repeats the run, and that
scripts/generate.py's path writes the report, the best files and the solution store (kernel_search finds it)."""

import asyncio
import json
import os
import subprocess
import sys

import pytest

from envs import EvalSettings, Evaluator
from envs.cache import SqliteCache
from envs.problems import resolve_problem
from envs.retrieval import KernelIndex
from envs.solutions import SolutionStore
from rl.agent.budget import Budget, BudgetConfig
from rl.agent.policies import Policy, ReplayEngine
from rl.agent.search import Search, SearchConfig
from rl.agent.store import PopulationStore
from rl.prompts import PromptBuilder, PromptConfig
from rl.types import SamplingConfig
from tests.conftest import ROOT

pytestmark = pytest.mark.integration

ANSWERS = ROOT / "tests" / "agent_answers"
IDS = ["L0_02_relu", "L0_04_sigmoid"]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    c = SqliteCache(tmp_path_factory.mktemp("agent") / "verdicts.sqlite")
    yield c
    c.close()


def search(store_path, cache, evaluations, seed=0):
    problems = [resolve_problem(i) for i in IDS]
    config = SearchConfig(
        proposers=1,
        seed=seed,
        tune_variants=2,
        budget=BudgetConfig(per_problem=Budget(llm_calls=4, evaluations=evaluations)),
    )
    store = PopulationStore(store_path)
    with Evaluator(EvalSettings(device="cpu", workers=2), cache=cache) as evaluator:
        policy = Policy("files", ReplayEngine(ANSWERS, problems), SamplingConfig(n=1))
        s = Search(config, store, evaluator, [policy], PromptBuilder(PromptConfig(one_shot=False)), KernelIndex([]))
        outcomes = asyncio.run(s.run(problems))
    store.close()
    return {o.problem.id: o for o in outcomes}


def trace(outcome):
    return [
        (r.proposal.operator, r.proposal.strategy, r.source_sha256, r.verdict.status.value) for r in outcome.records
    ]


def test_search_grows_picks_the_measured_best_resumes_and_repeats(tmp_path, cache):
    first = search(tmp_path / "pop.sqlite", cache, evaluations=4)
    for pid, o in first.items():
        ops = [r.proposal.operator for r in o.records]
        assert ops[:2] == ["fresh", "fresh"] and "tune" in ops, (pid, ops)
        assert len([r for r in o.records if r.duplicate_of is None]) == 4  # the evaluation cap, not more
        assert not o.records[0].correct  # the wrong/broken file came first
        assert o.best.correct and o.best.id == o.records[1].id  # the measured best, not the first or the last
        assert all(r.verdict.floor_ms is None for r in o.records)  # the interpreter measures no floor
        tuned = [r for r in o.records if r.proposal.operator == "tune"]
        assert all(r.proposal.parents == (o.records[1].id,) for r in tuned)
        assert all(r.proposal.text != o.records[1].proposal.text for r in tuned)
    sigmoid_tuned = {
        r.proposal.strategy: r.verdict.status.value
        for r in first["L0_04_sigmoid"].records
        if r.proposal.operator == "tune"
    }
    # BLOCK halved while the grid still assumes 2048 per program: half the output is never written. It fails
    # either way: as a partial_output hack where the output got the freed block the evaluator poisoned, as
    # incorrect where the CPU allocator handed it other memory (envs/antihack/runtime.py `_seed_free_memory`:
    # usually, not always; about one run in five here, before and after session 30's changes).
    assert sigmoid_tuned.keys() == {"BLOCK 2048->4096 (line 21)", "BLOCK 2048->1024 (line 21)"}
    assert sigmoid_tuned["BLOCK 2048->4096 (line 21)"] == "correct"
    assert sigmoid_tuned["BLOCK 2048->1024 (line 21)"] in ("hack", "incorrect")

    resumed = search(tmp_path / "pop.sqlite", cache, evaluations=6)
    for pid, o in resumed.items():
        assert o.resumed_from == len(first[pid].records)
        assert trace(o)[: o.resumed_from] == trace(first[pid])
        new = o.records[o.resumed_from :]
        assert new and all(r.proposal.operator == "tune" for r in new)  # the replayed files are not served again
        shas = [r.source_sha256 for r in o.records if r.duplicate_of is None]
        assert len(shas) == len(set(shas)) == 6  # nothing evaluated twice
        assert o.best.correct

    again = search(tmp_path / "again.sqlite", cache, evaluations=4)  # a fixed seed repeats the run
    assert {pid: trace(o) for pid, o in again.items()} == {pid: trace(o) for pid, o in first.items()}


def test_generate_script_writes_report_best_files_and_solution_store(tmp_path):
    out = tmp_path / "run"
    env = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "WANDB_MODE": "offline"}
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "generate.py"),
            "policy=files",
            f"policy.dir={ANSWERS}",
            f"ids=[{','.join(IDS)}]",
            "eval.device=cpu",
            "eval.workers=2",
            f"cache_path={tmp_path / 'verdicts.sqlite'}",
            "agent.proposers=2",
            "agent.tune_variants=2",
            "agent.budget.per_problem.evaluations=3",
            "verify.candidates=1",
            f"hydra.run.dir={out}",
            "name=itest",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=1200,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((out / "agent.json").read_text())
    assert report["problems"] == 2 and report["solved"] == 1.0 and report["fast_p"]["0"] == 1.0
    assert report["speedups_measured"] is False and report["faster_than_inductor"] is None  # CPU: no timings
    assert report["run"]["evaluations"] == 6 and report["curves"][-1]["evaluations"] == 3
    # CPU: no physical floor and no profiles, so the floor stop (on by default) and profile feedback are no-ops
    assert report["run"]["floor_stops"] == 0 and report["run"]["profiles"] == 0
    assert report["run"]["stop_at_floor_fraction"] == 0.8 and len(report["run"]["notes"]) == 2
    assert all(row["floor"] is None and "floor" not in row["stop_reason"] for row in report["per_problem"])
    for row in report["per_problem"]:
        assert row["winner"]["verified_status"] == "correct" and row["verification"][0]["status"] == "correct"
        assert row["winner"]["lineage"][-1]["id"] == row["winner"]["id"]
        assert (out / "best" / f"{row['problem_id']}.py").is_file()
    assert {p.name for p in out.glob("*.png")} == {"curves.png", "tree_L0_02_relu.png", "tree_L0_04_sigmoid.png"}
    assert "| L0_02_relu |" in (out / "agent.md").read_text()
    store = SolutionStore(tmp_path / "solutions.sqlite")
    found = [r for r in store.records() if r.provenance.startswith("agent itest")]
    assert sorted(r.problem_id for r in found) == IDS and report["outputs"]["solutions_added"] == 2
    # kernel_search's index over the store finds the agent's kernel for a similar problem, never for its own
    index = KernelIndex(store.records())
    hits = index.search(resolve_problem("L0_05_leaky_relu").source, k=50)
    assert any(h.record.provenance.startswith("agent itest") for h in hits)
    relu = resolve_problem("L0_02_relu")
    assert all(
        h.record.problem_id != relu.id
        for h in index.search(relu.source, k=50, exclude_ids={relu.id}, exclude_sha256={relu.sha256})
    )
    store.close()


@pytest.mark.parametrize(
    "overrides, message",
    [
        ([f"policy.dir={ROOT / 'no_such_answers'}"], "no such directory"),
        ([f"policy.dir={ANSWERS}", "delta=abc"], "delta must be a finite number, not 'abc'"),
    ],
)
def test_bad_configurations_exit_2_and_leave_no_store(tmp_path, overrides, message):
    """A missing policy.dir left an empty population.sqlite in the run directory; delta=abc ran the problems'
    screening and started the pool first."""
    out = tmp_path / "run"
    env = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "WANDB_MODE": "offline"}
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "generate.py"),
            "policy=files",
            *overrides,
            "ids=[L0_02_relu]",
            "eval.device=cpu",
            "cache_path=null",
            f"hydra.run.dir={out}",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr[-2000:]
    assert not (out / "population.sqlite").exists()
