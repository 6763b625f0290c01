"""The driver's CPU stage is total: every candidate gets a verdict, honest Python patterns are judged (not
rejected), and whatever goes over a bound is `rejected` with the bound named, never a pass."""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

import pytest

from envs import EvalSettings, Status, Verdict, resolve_problem
from envs.evaluator import Candidate, CpuStage
from envs.guard import Budget, LimitExceeded, guarded
from envs.settings import CpuStageLimits
from envs.source import check_tree_size, parse, prepare_solution
from rewards.kernel_reward import reward_for_verdict

RELU = resolve_problem("L0_02_relu")
REFERENCE = (Path(__file__).parents[2] / "envs/builtin/solutions/L0_02_relu.py").read_text()
FORWARD = "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n"


def with_forward_prefix(lines: str, extra_module_code: str = "") -> str:
    """The relu reference with `lines` run first in forward, and more module-level code after it."""
    assert FORWARD in REFERENCE
    body = textwrap.indent(textwrap.dedent(lines).strip() + "\n", " " * 8)
    return REFERENCE.replace(FORWARD, FORWARD + body) + textwrap.dedent(extra_module_code)


@pytest.fixture(scope="module")
def preparer() -> CpuStage:
    return CpuStage(EvalSettings(device="cpu"), "cpu")


# --- guarded ------------------------------------------------------------------------------------------
def test_guarded_returns_the_value_or_the_failure_as_a_verdict():
    assert guarded("stage", lambda x: x + 1, 1) == 2

    def recurse(n):
        return recurse(n + 1)

    failure = guarded("static", recurse, 0)
    assert failure.status is Status.INTERNAL_ERROR
    assert failure.error.startswith("static: RecursionError: maximum recursion depth exceeded at ")
    assert "tests/unit/test_guard.py" in failure.error and "in recurse" in failure.error
    assert failure.traceback.count("\n") < 200  # the last frames, not a thousand
    verdict = failure.verdict("p", "cpu")
    assert verdict.status is Status.INTERNAL_ERROR and reward_for_verdict(verdict) == 0.0 and verdict.traceback


def test_guarded_turns_memory_errors_and_limits_into_verdicts():
    def boom():
        raise MemoryError()

    assert guarded("extract", boom).error.startswith("extract: MemoryError at ")

    def over():
        raise LimitExceeded("the code is over 10 characters")

    failure = guarded("extract", over)
    assert (failure.status, failure.error, failure.traceback) == (
        Status.REJECTED,
        "extract: the code is over 10 characters",
        None,
    )


def test_budget_bounds_nesting_and_time():
    b = Budget(max_depth=3, seconds=60)
    for _ in range(3):
        b.enter()
    with pytest.raises(LimitExceeded, match="more than 3 levels deep"):
        b.enter()
    slow = Budget(max_depth=10**9, seconds=0.0)
    time.sleep(0.001)
    with pytest.raises(LimitExceeded, match="took over 0 s"):
        for _ in range(1000):
            slow.enter()
            slow.leave()


# --- limits of extraction -----------------------------------------------------------------------------
def test_size_limits_name_the_bound():
    limits = CpuStageLimits(max_answer_chars=100, max_code_chars=50)
    with pytest.raises(LimitExceeded, match="answer is over 100 characters"):
        prepare_solution("x" * 101, limits)
    with pytest.raises(LimitExceeded, match="code is over 50 characters"):
        prepare_solution("```python\n" + "x = 1\n" * 10 + "```", limits)


def test_tree_limits_are_measured_without_recursion():
    deep = parse("x = " + "[" * 150 + "]" * 150)
    with pytest.raises(LimitExceeded, match="over 100 levels deep"):
        check_tree_size(deep, CpuStageLimits())
    with pytest.raises(LimitExceeded, match="over 10 syntax nodes"):
        check_tree_size(parse("x = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]"), CpuStageLimits(max_ast_nodes=10))


def test_limits_are_settings_with_checked_values():
    settings = EvalSettings.from_mapping({"cpu_stage": {"max_ast_depth": 50}})
    assert settings.cpu_stage.max_ast_depth == 50 and settings.cpu_stage.max_ast_nodes == 50_000
    with pytest.raises(ValueError, match="unknown cpu_stage settings"):
        EvalSettings.from_mapping({"cpu_stage": {"max_depth": 50}})
    with pytest.raises(ValueError, match="analysis_seconds must be > 0"):
        CpuStageLimits(analysis_seconds=0)


# --- the preparer ---------------------------------------------------------------------------------------
HONEST = {
    # the pattern that ended a training run: a list rebuilt from its own elements
    "list_rebuilt_from_itself": "shape = list(x.shape)\nshape = [shape[0], shape[-1]]\nshape = [s for s in shape if s]",
    "walrus": "if (n0 := x.numel()) < 0:\n    raise ValueError(n0)",
    "match": "match x.dim():\n    case 1:\n        pass\n    case _:\n        pass",
    "nested_comprehension": "sizes = [[d for d in row] for row in [list(x.shape)]]",
    "rebinding_through_a_view": "x = x.view(-1)\nx = x.view(x.shape)",
    "module_alias": "import torch as t\ntorch_mod = t\ny = torch_mod.empty_like(x)",
    "mutual_names": "a = [x]\nb = [a[0]]\na = [b[0]]",
}


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_python_patterns_are_judged_not_rejected(preparer, name):
    prepared = preparer.prepare(RELU, with_forward_prefix(HONEST[name]))
    assert isinstance(prepared, Candidate), getattr(prepared, "error", None)


def test_a_cycle_of_names_still_resolves_to_what_it_holds(preparer):
    """Names that refer to each other in a cycle, one of them also bound to torch.relu: every name of the
    cycle may hold it, whichever is asked first (an answer that saw the cycle half-built is not kept)."""
    cycle = "\nops_a = [ops_b[0], torch.relu]\nops_b = [ops_a[0]]\nfirst = ops_a[0]\n"
    for use in ("return ops_b[0](x)", "y = first\nreturn ops_b[0](x)", "return first(x)"):
        verdict = preparer.prepare(RELU, with_forward_prefix(use, cycle))
        assert isinstance(verdict, Verdict) and verdict.status is Status.HACK, use


def test_long_alias_chains_are_rejected_not_crashed(preparer):
    chain = "\nalias0 = torch.relu\n" + "".join(f"alias{i + 1} = alias{i}\n" for i in range(300))
    verdict = preparer.prepare(RELU, with_forward_prefix("return alias300(x)", chain))
    assert verdict.status is Status.REJECTED and "levels deep" in verdict.error
    short = "\nalias0 = torch.relu\n" + "".join(f"alias{i + 1} = alias{i}\n" for i in range(20))
    assert preparer.prepare(RELU, with_forward_prefix("return alias20(x)", short)).status is Status.HACK


# Whether CPython's parser gives up on the first two (MemoryError or RecursionError, "nests too deeply") or
# builds a tree the depth bound then refuses ("over 100 levels deep") depends on the recursion limit in force
# (hypothesis raises it while its tests run): either way the bound is named and the verdict is `rejected`.
@pytest.mark.parametrize(
    "text, expected",
    [
        ("x = " + "not " * 5000 + "1\n", ("nests too deeply", "over 100 levels deep")),
        ("s = " + " + ".join(["'a'"] * 3000) + "\n", ("nests too deeply", "over 100 levels deep")),
        ("x = " + "[" * 150 + "]" * 150 + "\n", ("over 100 levels deep",)),
    ],
)
def test_pathological_code_is_rejected_with_its_bound(preparer, text, expected):
    verdict = preparer.prepare(RELU, REFERENCE + text)
    assert verdict.status is Status.REJECTED and reward_for_verdict(verdict) == 0.0
    assert any(bound in verdict.error for bound in expected), verdict.error


def test_a_failing_analysis_is_the_candidates_internal_error(preparer, monkeypatch):
    import envs.cpu_stage

    def broken(*args):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(envs.cpu_stage.static_analysis, "analyze", broken)
    verdict = preparer.prepare(RELU, REFERENCE)
    assert verdict.status is Status.INTERNAL_ERROR and verdict.error.startswith("static: RecursionError")
    assert "in broken" in verdict.traceback and verdict.phase_seconds["static"] >= 0


def test_verdicts_of_the_cpu_stage_are_not_cached(tmp_path):
    from envs.cache import SqliteCache

    cache = SqliteCache(tmp_path / "verdicts.sqlite")
    preparer = CpuStage(EvalSettings(device="cpu"), "cpu", cache)
    text = with_forward_prefix(
        "return alias300(x)", "\nalias0 = torch.relu\n" + "".join(f"alias{i + 1} = alias{i}\n" for i in range(300))
    )
    assert preparer.prepare(RELU, text).status is Status.REJECTED
    candidate = preparer.prepare(RELU, REFERENCE)
    rejected = Verdict(Status.REJECTED, RELU.id, "cpu", error="x")
    assert preparer.finish(candidate, rejected, None, time.monotonic()).status is Status.REJECTED
    assert isinstance(preparer.prepare(RELU, REFERENCE), Candidate)  # nothing was cached for it
