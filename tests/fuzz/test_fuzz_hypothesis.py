"""Property: grammar-generated Python (hypothesmith), alone or spliced into a correct reference, never makes
`CpuStage.prepare` raise or fail internally. Derandomized, so CI draws the same 100 programs every run;
skipped where the dev extras (hypothesis, hypothesmith) are not installed."""

from __future__ import annotations

import pytest

pytest.importorskip("hypothesis")
pytest.importorskip("hypothesmith")

from hypothesis import given, settings  # noqa: E402

from tests.fuzz.generated import SETTINGS, strategy  # noqa: E402
from tests.fuzz.harness import builtin_problems, make_preparer  # noqa: E402


@pytest.fixture(scope="module")
def stage():
    return make_preparer(), builtin_problems()


@pytest.mark.filterwarnings("ignore::SyntaxWarning")  # hypothesmith compiles what it generates
@settings(max_examples=100, derandomize=True, **SETTINGS)
@given(case=strategy())
def test_generated_code_never_makes_the_cpu_stage_raise_or_fail_internally(stage, case):
    preparer, problems = stage
    result = preparer.prepare(problems[case.problem_id], case.text)
    status = getattr(getattr(result, "status", None), "value", None)
    assert status != "internal_error", result.error
