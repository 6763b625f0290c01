"""The widened repeatability set (tests/repeatability/, issue 32): well formed, every class covered, no kernel
flagged by the static analysis, and every kernel `correct` on the CPU evaluator (Triton interpreter, small
sizes). The default selection evaluates one kernel per class; `-m slow` evaluates the whole set."""

import json
from pathlib import Path

import pytest

from envs import EvalSettings, Evaluator, PhaseTimeouts, Status, resolve_problem
from envs.antihack.static import analyze
from envs.source import canonicalize

SET = Path(__file__).resolve().parents[1] / "repeatability"
CLASSES = {
    "elementwise",
    "reduction_one_pass",
    "reduction_two_pass",
    "atomic",
    "scan",
    "gemm_splitk",
    "gemm_persistent",
    "tiny",
}


def manifest() -> list[dict]:
    return [json.loads(line) for line in (SET / "manifest.jsonl").read_text().splitlines() if line.strip()]


def header(path: Path) -> dict[str, str]:
    fields = {}
    for line in path.read_text().splitlines():
        if not line.startswith("# "):
            break
        key, _, value = line[2:].partition(":")
        fields[key.strip()] = value.strip()
    return fields


def problem_of(row: dict):
    spec = row["problem"]
    return resolve_problem(str(SET / spec) if spec.endswith(".py") else spec)


def test_manifest_covers_every_class_and_every_file():
    rows = manifest()
    files = sorted(p.name for p in (SET / "kernels").glob("*.py"))
    assert sorted(Path(r["solution"]).name for r in rows) == files
    counts = {c: sum(r["class"] == c for r in rows) for c in CLASSES}
    assert set(r["class"] for r in rows) == CLASSES and min(counts.values()) >= 3, counts
    for r in rows:
        h = header(SET / r["solution"])
        assert h["class"] == r["class"] and problem_of(r).id == h["problem"], r


@pytest.mark.parametrize("row", manifest(), ids=lambda r: Path(r["solution"]).stem)
def test_static_analysis_flags_none(row):
    problem = problem_of(row)
    assert analyze(canonicalize((SET / row["solution"]).read_text()).source, problem.source) is None


def evaluate(rows: list[dict]) -> dict:
    items = [(problem_of(r), (SET / r["solution"]).read_text()) for r in rows]
    settings = EvalSettings(device="cpu", workers=2, timeouts=PhaseTimeouts(correctness=60, timing=30))
    with Evaluator(settings) as ev:
        return {r["solution"]: v for r, v in zip(rows, ev.evaluate_many(items))}


def one_per_class() -> list[dict]:
    first: dict[str, dict] = {}
    for r in manifest():
        first.setdefault(r["class"], r)
    return list(first.values())


@pytest.mark.integration
def test_one_kernel_per_class_is_correct_on_cpu():
    for name, v in evaluate(one_per_class()).items():
        assert v.status is Status.CORRECT and v.hack is None, f"{name}: {v.status.value}: {v.error}"


@pytest.mark.integration
@pytest.mark.slow
def test_whole_set_is_correct_on_cpu():
    verdicts = evaluate(manifest())
    wrong = {n: f"{v.status.value}: {v.error}" for n, v in verdicts.items() if v.status is not Status.CORRECT or v.hack}
    assert not wrong, wrong
