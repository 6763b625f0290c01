"""The physical floor in the verdict (typed, serialised, cached, in the service's JSON, old verdicts still load),
the agent's stop near the floor, the GPU profile of a mutation parent in its prompt (once per kernel, within
the profile budget, skipped on CPU; both parents' in a crossover prompt), and that the tuner's concurrent
variants are recorded in the order proposed.

The search tests answer from `RecordedPool`: verdicts with a floor and profiles exist only on a GPU, which this
machine lacks; tests/gpu/test_agent_cuda.py runs the same paths on a real GPU pool."""

import ast
import asyncio
import json

import pytest

from envs.antihack import runtime as guard
from envs.cache import SqliteCache
from envs.problems import resolve_problem
from envs.service import verdict_response
from envs.tools.feedback import verdict_feedback
from envs.verdict import Status, Timings, TimingStats, Verdict
from rl.agent.archive import SelectionConfig
from rl.agent.budget import Budget, BudgetConfig
from rl.agent.operators import mutate_messages
from rl.agent.policies import Policy
from rl.agent.profiles import CPU_NOTE
from rl.agent.report import build_report
from rl.agent.search import Search, SearchConfig
from rl.agent.store import PopulationStore
from rl.agent.verify import Verified
from rl.prompts import PromptBuilder, PromptConfig
from rl.types import SamplingConfig
from tests.conftest import ROOT
from tests.unit.agent_helpers import ScriptedEngine, record

RELU = resolve_problem("L0_02_relu")
H200 = "NVIDIA H200"


def gpu_verdict(kernel_ms: float, floor_ms: float | None = 0.05, status: str = "correct") -> Verdict:
    if status != "correct":
        return Verdict(Status(status), RELU.id, H200, error="boom", floor_ms=floor_ms)
    base = TimingStats.from_samples([0.2] * 5)
    timings = Timings(TimingStats.from_samples([kernel_ms] * 5), base, base)
    return Verdict(
        Status.CORRECT, RELU.id, H200, timings=timings, speedup=0.2 / kernel_ms, baseline="inductor", floor_ms=floor_ms
    )


def h200_profile() -> dict:
    """A profile as envs/worker/profiling.py's profile_candidate returns it, with the anti-hack table's rates."""
    moved, flops = 240_000_000, 0.0
    bandwidth, _ = guard.peak_rates(H200)
    rate, label = guard.peak_flops(H200, "float32")
    return {
        "device": H200,
        "calls": 10,
        "kernels": [
            {"name": "_relu_kernel", "calls_per_forward": 1.0, "us_per_forward": 90.0, "own": True},
            {
                "name": "void at::native::vectorized_elementwise_kernel",
                "calls_per_forward": 1.0,
                "us_per_forward": 10.0,
                "own": False,
            },
        ],
        "kernels_omitted": 0,
        "device_us_per_forward": 100.0,
        "min_bytes": moved,
        "flops": flops,
        "peak_bytes_per_s": bandwidth,
        "peak_flops_per_s": rate,
        "dtype": "float32",
        "peak_flops_label": label,
        "floor_ms": guard.floor_ms(moved, flops, H200),
    }


def test_the_profile_structure_is_the_workers():
    tree = ast.parse((ROOT / "envs/worker/profiling.py").read_text())
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "profile_candidate")
    facts = fn.body[-1]  # the closing `return {...}`: the facts (the early return is an error)
    assert isinstance(facts, ast.Return) and isinstance(facts.value, ast.Dict)
    keys = {k.value for k in facts.value.keys if isinstance(k, ast.Constant)}
    assert keys == set(h200_profile())


# ---------------------------------------------------------------------------------- floor in the verdict
def test_floor_is_typed_serialised_cached_and_in_the_service_json(tmp_path):
    v = gpu_verdict(0.1)
    assert v.speed_of_light == pytest.approx(0.5)
    assert Verdict.from_dict(json.loads(json.dumps(v.to_dict()))) == v
    cache = SqliteCache(tmp_path / "verdicts.sqlite")
    cache.put_verdict("k", RELU.id, v.to_dict())
    assert Verdict.from_dict(cache.get_verdict("k")).floor_ms == 0.05
    cache.close()
    assert verdict_response(v, 0.6).model_dump(mode="json")["floor_ms"] == 0.05
    old = v.to_dict()
    del old["floor_ms"]  # a verdict cached before the field existed
    assert Verdict.from_dict(old).floor_ms is None and Verdict.from_dict(old).speed_of_light is None


def test_speed_of_light_only_for_correct_timed_verdicts():
    assert gpu_verdict(0.1, status="incorrect").speed_of_light is None
    assert gpu_verdict(0.1, floor_ms=None).speed_of_light is None
    assert Verdict(Status.CORRECT, RELU.id, "cpu").speed_of_light is None  # CPU: nothing timed


def test_feedback_says_how_near_the_floor_a_kernel_is():
    text = verdict_feedback(gpu_verdict(0.1))
    assert "physical floor: 0.05 ms" in text and "reaches 50% of it" in text
    assert "physical floor" not in verdict_feedback(Verdict(Status.CORRECT, RELU.id, "cpu"))


# ---------------------------------------------------------------------------------- the search
class RecordedPool:
    """The pool interface (evaluate_async, profile, device) answering with given verdicts and one profile."""

    def __init__(self, device: str, verdicts: dict[str, Verdict], profile: dict | None = None):
        self.device, self.verdicts, self.facts = device, verdicts, profile
        self.profiled: list[str] = []

    async def evaluate_async(self, problem, answer, priority="train"):
        return self.verdicts.get(answer, gpu_verdict(1.0, status="incorrect"))

    def profile(self, problem, answer):
        self.profiled.append(answer)
        return {"profile": self.facts} if self.facts else {"error": "profile needs a GPU"}


def code(k: int) -> str:
    return (
        f"```python\nimport torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
        f"        return x * {k}\n```"
    )


def run_search(tmp_path, pool, answers, budget, weights=None, store=None):
    engine = ScriptedEngine(answers)
    config = SearchConfig(
        proposers=1,
        initial_fresh=1,
        budget=budget,
        operator_weights=weights or {"fresh": 1.0, "mutate": 0.0, "crossover": 0.0, "retrieval": 0.0, "tune": 0.0},
        selection=SelectionConfig(islands=1, exploit=1.0),
    )
    store = store or PopulationStore(tmp_path / "pop.sqlite")
    search = Search(
        config,
        store,
        pool,
        [Policy("scripted", engine, SamplingConfig(n=1))],
        PromptBuilder(PromptConfig(one_shot=False)),
    )
    [outcome] = asyncio.run(search.run([RELU]))
    return search, outcome, engine


def test_search_stops_once_a_kernel_is_near_the_floor(tmp_path):
    verdicts = {code(1): gpu_verdict(0.1), code(2): gpu_verdict(0.0556), code(3): gpu_verdict(0.05)}
    budget = BudgetConfig(per_problem=Budget(llm_calls=3, evaluations=3), stop_at_floor_fraction=0.8)
    search, outcome, _ = run_search(tmp_path, RecordedPool("cuda", verdicts), [code(1), code(2), code(3)], budget)
    assert len(outcome.records) == 2  # 50% of the floor's speed goes on, 90% stops
    assert outcome.stop_reason.startswith("physical floor near: #2 runs at 90% of the floor's speed")
    assert "stop_at_floor_fraction 0.8" in outcome.stop_reason and search.notes == []
    verified = [Verified(RELU.id, outcome.best, outcome.best.verdict)]
    report = build_report([outcome], verified, "inductor", {})
    assert report["run"]["floor_stops"] == 1
    floor = report["per_problem"][0]["floor"]
    assert floor["floor_ms"] == 0.05 and floor["search_nearest"]["id"] == 2
    assert floor["verified_speed_of_light"] == pytest.approx(0.05 / 0.0556)

    off = BudgetConfig(per_problem=Budget(llm_calls=3, evaluations=3), stop_at_floor_fraction=None)
    _, outcome, _ = run_search(tmp_path / "off", RecordedPool("cuda", verdicts), [code(1), code(2), code(3)], off)
    assert len(outcome.records) == 3 and outcome.stop_reason.startswith("per problem evaluations 3")


def test_the_floor_rule_is_a_no_op_on_cpu(tmp_path):
    cpu = {code(k): Verdict(Status.CORRECT, RELU.id, "cpu") for k in (1, 2)}
    budget = BudgetConfig(per_problem=Budget(llm_calls=2, evaluations=2), stop_at_floor_fraction=0.01)
    search, outcome, _ = run_search(tmp_path, RecordedPool("cpu", cpu), [code(1), code(2)], budget)
    assert len(outcome.records) == 2 and "floor" not in outcome.stop_reason
    assert any("stop_at_floor_fraction has no effect" in n for n in search.notes)
    report = build_report([outcome], [Verified(RELU.id, outcome.best, None)], "inductor", {})
    assert report["per_problem"][0]["floor"] is None and report["run"]["floor_stops"] == 0


MUTATE = {"fresh": 0.0, "mutate": 1.0, "crossover": 0.0, "retrieval": 0.0, "tune": 0.0}


def test_mutation_prompts_carry_the_parents_profile_once_per_kernel(tmp_path):
    pool = RecordedPool("cuda", {code(1): gpu_verdict(0.5)}, h200_profile())
    budget = BudgetConfig(per_problem=Budget(llm_calls=3, evaluations=3, profiles=4), stop_at_floor_fraction=None)
    search, outcome, engine = run_search(tmp_path, pool, [code(1), code(2), code(3)], budget, MUTATE)
    assert [r.proposal.operator for r in outcome.records] == ["fresh", "mutate", "mutate"]
    assert pool.profiled == [code(1)]  # the parent twice, profiled once
    for prompt in engine.prompts[1:]:
        text = prompt[-1]["content"]
        assert "Where its device time goes:" in text and "device time per forward: 100.0 us" in text
        assert "90.0 us  x1   90.0%  _relu_kernel (yours)" in text and "Make it faster" in text
    assert search.total.profiles == 1 and search.notes == []
    # resume: the stored profile is reused and counted, nothing is profiled again
    store = PopulationStore(tmp_path / "pop.sqlite")
    again = RecordedPool("cuda", {code(1): gpu_verdict(0.5)}, h200_profile())
    more = BudgetConfig(per_problem=Budget(llm_calls=4, evaluations=4, profiles=4), stop_at_floor_fraction=None)
    search, _, engine = run_search(tmp_path, again, [code(4)], more, MUTATE, store=store)
    assert again.profiled == [] and search.total.profiles == 1
    assert "device time per forward: 100.0 us" in engine.prompts[0][-1]["content"]


def test_profile_budget_and_cpu_skip(tmp_path):
    pool = RecordedPool("cuda", {code(1): gpu_verdict(0.5)}, h200_profile())
    budget = BudgetConfig(per_problem=Budget(llm_calls=2, evaluations=2, profiles=0), stop_at_floor_fraction=None)
    _, _, engine = run_search(tmp_path, pool, [code(1), code(2)], budget, MUTATE)
    assert pool.profiled == [] and "Where its device time goes" not in engine.prompts[1][-1]["content"]

    cpu = RecordedPool("cpu", {code(1): Verdict(Status.CORRECT, RELU.id, "cpu")}, h200_profile())
    budget = BudgetConfig(per_problem=Budget(llm_calls=2, evaluations=2))
    search, outcome, engine = run_search(tmp_path / "cpu", cpu, [code(1), code(2)], budget, MUTATE)
    assert outcome.records[1].proposal.operator == "mutate" and cpu.profiled == []
    assert "Where its device time goes" not in engine.prompts[1][-1]["content"] and CPU_NOTE in search.notes


def test_mutation_prompt_renders_a_profile_and_works_without_one():
    parent = record(3, "correct", 1.5, text="```python\nPARENT\n```")
    with_profile = mutate_messages(PromptBuilder(PromptConfig(one_shot=False)), RELU, parent, h200_profile())
    text = with_profile[-1]["content"]
    assert text.index("speedup vs TorchInductor: 1.5x") < text.index("Where its device time goes:")
    assert "achieved memory bandwidth: 2400.0 GB/s = 50.0% of peak 4.80 TB/s" in text
    without = mutate_messages(PromptBuilder(PromptConfig(one_shot=False)), RELU, parent)
    assert "Where its device time goes" not in without[-1]["content"]
    assert without[:-1] == with_profile[:-1]


class SlowFirstPool(RecordedPool):
    """Each evaluation finishes sooner than the one asked before it: completion order is the reverse of the
    proposal order."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.asked = 0

    async def evaluate_async(self, problem, answer, priority="train"):
        self.asked += 1
        await asyncio.sleep(0.05 * (10 - self.asked))
        return await super().evaluate_async(problem, answer, priority)


TUNABLE = (
    "```python\nimport torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
    "        BLOCK = 1024\n        return x * 1\n```"
)
TUNE = {"fresh": 0.0, "mutate": 0.0, "crossover": 0.0, "retrieval": 0.0, "tune": 1.0}


def test_concurrent_tuner_variants_are_recorded_in_the_order_proposed(tmp_path):
    pool = SlowFirstPool("cpu", {TUNABLE: Verdict(Status.CORRECT, RELU.id, "cpu")})
    budget = BudgetConfig(per_problem=Budget(llm_calls=1, evaluations=3))
    engine = ScriptedEngine([TUNABLE])
    config = SearchConfig(
        proposers=1,
        initial_fresh=1,
        budget=budget,
        operator_weights=TUNE,
        tune_variants=2,
        selection=SelectionConfig(islands=1, exploit=1.0),
    )
    search = Search(
        config,
        PopulationStore(tmp_path / "pop.sqlite"),
        pool,
        [Policy("scripted", engine, SamplingConfig(n=1))],
        PromptBuilder(PromptConfig(one_shot=False)),
    )
    [outcome] = asyncio.run(search.run([RELU]))
    tuned = [r for r in outcome.records if r.proposal.operator == "tune"]
    assert [r.proposal.strategy for r in tuned] == ["BLOCK 1024->2048 (line 4)", "BLOCK 1024->512 (line 4)"]
    assert [r.id for r in outcome.records] == sorted(r.id for r in outcome.records)


JIT = (
    "```python\nimport torch, triton\n@triton.jit\ndef k(x):\n    pass\nclass ModelNew(torch.nn.Module):\n"
    "    def forward(self, x):\n        return x * 2\n```"
)  # another MAP-Elites cell than code(k)


def test_crossover_prompts_carry_both_parents_profiles(tmp_path):
    pool = RecordedPool("cuda", {code(1): gpu_verdict(0.5), JIT: gpu_verdict(0.4)}, h200_profile())
    budget = BudgetConfig(per_problem=Budget(llm_calls=3, evaluations=3, profiles=4), stop_at_floor_fraction=None)
    engine = ScriptedEngine([code(1), JIT, code(3)])
    config = SearchConfig(
        proposers=1,
        initial_fresh=2,
        budget=budget,
        selection=SelectionConfig(islands=1, exploit=1.0),
        operator_weights={"fresh": 0.0, "mutate": 0.0, "crossover": 1.0, "retrieval": 0.0, "tune": 0.0},
    )
    search = Search(
        config,
        PopulationStore(tmp_path / "pop.sqlite"),
        pool,
        [Policy("scripted", engine, SamplingConfig(n=1))],
        PromptBuilder(PromptConfig(one_shot=False)),
    )
    [outcome] = asyncio.run(search.run([RELU]))
    assert [r.proposal.operator for r in outcome.records] == ["fresh", "fresh", "crossover"]
    assert sorted(pool.profiled) == sorted([code(1), JIT]) and search.total.profiles == 2
    text = engine.prompts[2][-1]["content"]
    assert text.count("Where its device time goes:") == 2 and "### solution B" in text
