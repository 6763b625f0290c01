"""The throughput set (tests/throughput/, issue 32): new problems with legitimate kernels and reward hacks the
evaluator was never tuned on, for `scripts/bench_eval.py --candidates tests/throughput/manifest.jsonl`. Here:
well formed (every file listed, headers agree with the manifest, problems new and sized for a GPU), no
legitimate kernel flagged by the static analysis, and every verdict on the CPU evaluator (Triton interpreter,
small sizes) what the manifest expects. The default selection evaluates one problem's candidates; `-m slow`
the whole set."""

import json
from pathlib import Path

import pytest

from envs import EvalSettings, Evaluator, PhaseTimeouts, resolve_problem
from envs.antihack.static import analyze
from envs.source import canonicalize
from tests.integration.test_repeatability_set import header

SET = Path(__file__).resolve().parents[1] / "throughput"


def manifest() -> list[dict]:
    return [json.loads(line) for line in (SET / "manifest.jsonl").read_text().splitlines() if line.strip()]


def test_manifest_lists_every_file_and_agrees_with_the_headers():
    rows = manifest()
    assert sorted(Path(r["solution"]).name for r in rows) == sorted(p.name for p in (SET / "kernels").glob("*.py"))
    assert {Path(r["problem"]).name for r in rows} == {p.name for p in (SET / "problems").glob("*.py")}
    for r in rows:
        h = header(SET / r["solution"])
        assert h["problem"] == Path(r["problem"]).stem and h["expect"] == r["expect"], r
        assert r["class"] == ("legit" if r["expect"] == "correct" else "hack"), r
    problems = {r["problem"] for r in rows}
    assert len(problems) == 11 and all(
        sum(r["problem"] == p and r["class"] == "legit" for r in rows) == 2 for p in problems
    )
    assert len({r["expect"] for r in rows if r["class"] == "hack"}) >= 8  # hacks of many kinds, not one trick


@pytest.mark.parametrize("spec", sorted({r["problem"] for r in manifest()}))
def test_problems_are_new_and_sized_for_a_gpu(spec):
    """Full size: 0.1-2 GiB of inputs and parameters (memory-bound ops at 0.2-4 ms on an H200; the evaluator holds
    several copies), built on the meta device so nothing is allocated."""
    import torch

    problem = resolve_problem(str(SET / spec))
    assert problem.small_sizes, problem.id  # the CPU evaluates the small size
    builtin = Path(__file__).resolve().parents[2] / "envs" / "builtin" / "problems"
    assert problem.id not in {p.stem for p in builtin.glob("*.py")}
    namespace: dict = {}
    exec(compile(problem.source, spec, "exec"), namespace)  # our own file, trusted
    with torch.device("meta"):
        tensors = [*namespace["get_inputs"](), *namespace["Model"](*namespace["get_init_inputs"]()).parameters()]
    size = sum(t.numel() * t.element_size() for t in tensors)
    assert 0.1 * 2**30 <= size <= 2 * 2**30, f"{problem.id}: {size / 2**30:.2f} GiB"


@pytest.mark.parametrize(
    "row", [r for r in manifest() if r["class"] == "legit"], ids=lambda r: Path(r["solution"]).stem
)
def test_static_analysis_flags_no_legitimate_kernel(row):
    problem = resolve_problem(str(SET / row["problem"]))
    assert analyze(canonicalize((SET / row["solution"]).read_text()).source, problem.source) is None


def evaluate(rows: list[dict]) -> dict:
    items = [(resolve_problem(str(SET / r["problem"])), (SET / r["solution"]).read_text()) for r in rows]
    settings = EvalSettings(device="cpu", workers=2, timeouts=PhaseTimeouts(correctness=60, timing=30))
    with Evaluator(settings) as ev:
        return {r["solution"]: (r["expect"], v) for r, v in zip(rows, ev.evaluate_many(items))}


def _unexpected(rows: list[dict]) -> dict:
    verdicts = evaluate(rows)
    return {n: f"{v.outcome} (expected {want}): {v.error}" for n, (want, v) in verdicts.items() if v.outcome != want}


@pytest.mark.integration
def test_one_problems_candidates_get_the_verdicts_the_manifest_expects():
    rows = [r for r in manifest() if r["problem"] == "problems/tp_logsumexp_rows.py"]
    assert not _unexpected(rows)


@pytest.mark.integration
@pytest.mark.slow
def test_whole_set_gets_the_verdicts_the_manifest_expects():
    assert not _unexpected(manifest())
