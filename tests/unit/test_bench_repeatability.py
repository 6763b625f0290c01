"""scripts/bench_eval.py's repeatability report over a manifest of several kernels per problem and kernel classes
(issue 32): kernels keyed by candidate, spreads per class, labels in the warm records, manifest paths."""

import json
from pathlib import Path

import pytest

from envs import Status, load_problem_set
from envs.verdict import SpeedupInterval, TimingStats, Timings, Verdict

REPEATABILITY = Path(__file__).resolve().parents[1] / "repeatability" / "manifest.jsonl"


@pytest.fixture(scope="module")
def bench():
    from scripts import bench_eval

    return bench_eval


def _verdict(pid: str, speedup: float, kernel_ms: float = 1.0) -> Verdict:
    stats = TimingStats.from_samples([kernel_ms])
    return Verdict(
        Status.CORRECT,
        pid,
        "NVIDIA H200",
        speedup=speedup,
        timings=Timings(kernel=stats),
        speedup_interval=SpeedupInterval(0.9 * speedup, 1.1 * speedup, 0.95, True, 1.0, 1000, blocks=3),
    )


# Four candidates, two of them kernels of one problem ("mse"), measured in three warm passes.
LABELS = [
    {"key": "0:mse_two_pass", "class": "reduction_two_pass"},
    {"key": "1:mse_atomic", "class": "atomic"},
    {"key": "2:row_sum_atomic", "class": "atomic"},
    {"key": "3:relu", "class": None},
]
PROBLEMS = ["mse", "mse", "row_sum", "relu"]
SPEEDUPS = [
    [1.00, 1.02, 0.99],  # spread 0.03
    [2.00, 2.20, 2.10],  # spread 0.2 / 2.1
    [0.50, 0.55, 0.50],  # spread 0.05 / 0.5 = 0.1
    [1.00, 1.00, 1.00],
]  # spread 0


def _warm():
    """The warm pass's verdicts in warm_copies' order: every candidate of repeat 0, then of repeat 1, ..."""
    return [_verdict(PROBLEMS[c], SPEEDUPS[c][r], kernel_ms=1 / SPEEDUPS[c][r]) for r in range(3) for c in range(4)]


def test_warm_labels_follow_warm_copies_order(bench):
    items = [(pid, f"src{i}") for i, pid in enumerate(PROBLEMS)]
    copies = bench.warm_copies(items, 3)
    labels = bench.warm_labels(LABELS, 3)
    assert len(copies) == len(labels) == 12
    for (pid, src), label in zip(copies, labels):
        assert src.startswith(f"src{int(label['key'][0])}\n") and pid == PROBLEMS[int(label["key"][0])]


def test_kernels_of_one_problem_are_not_mixed(bench):
    verdicts, keys = _warm(), [label["key"] for label in bench.warm_labels(LABELS, 3)]
    by_problem = bench.speedup_repeatability(verdicts)
    # keyed by problem the two mse kernels merge: range 2.2 - 0.99 over a median near 1.5
    assert by_problem["kernels"] == 3 and by_problem["max_spread"] > 0.5
    rep = bench.speedup_repeatability(verdicts, keys)
    assert rep["kernels"] == 4
    assert rep["per_kernel"] == pytest.approx(
        {"1:mse_atomic": 0.2 / 2.1, "2:row_sum_atomic": 0.1, "0:mse_two_pass": 0.03, "3:relu": 0.0}
    )
    assert list(rep["per_kernel"])[:2] == ["2:row_sum_atomic", "1:mse_atomic"]  # worst first
    assert rep["interval_coverage"]["kernels"] == 4 and rep["interval_coverage"]["later_repeats"] == 8
    assert set(bench.kernel_times(verdicts, keys)) == set(rep["per_kernel"])
    assert bench.timing_spread(verdicts, keys)["max_cv"] > 0
    with pytest.raises(ValueError):
        bench.speedup_repeatability(verdicts, keys[:-1])


def test_spread_per_class_and_overall(bench):
    verdicts, keys = _warm(), [label["key"] for label in bench.warm_labels(LABELS, 3)]
    classes = {label["key"]: label["class"] for label in LABELS}
    by_class = bench.speedup_repeatability(verdicts, keys, classes)["by_class"]
    assert list(by_class) == ["atomic", "reduction_two_pass", "unclassified", "overall"]
    atomic = by_class["atomic"]
    assert atomic["kernels"] == 2 and atomic["max_spread"] == pytest.approx(0.1)
    assert atomic["median_spread"] == pytest.approx((0.1 + 0.2 / 2.1) / 2)
    assert by_class["reduction_two_pass"] == pytest.approx(
        {"kernels": 1, "median_spread": 0.03, "p95_spread": 0.03, "max_spread": 0.03}
    )
    assert by_class["unclassified"]["max_spread"] == 0.0
    overall = by_class["overall"]
    assert overall["kernels"] == 4 and overall["median_spread"] == pytest.approx((0.03 + 0.2 / 2.1) / 2)
    assert "by_class" not in bench.speedup_repeatability(verdicts, keys)


def test_warm_records_carry_candidate_and_class(bench):
    records = [bench.repeat_record(v, label) for v, label in zip(_warm(), bench.warm_labels(LABELS, 3))]
    assert records[1]["candidate"] == "1:mse_atomic" and records[1]["class"] == "atomic"
    assert records[5]["problem_id"] == "mse" and records[5]["class"] == "atomic"
    assert records[3]["class"] is None
    json.dumps(records)
    plain = bench.repeat_record(_verdict("relu", 1.0))
    assert plain["candidate"] is None and plain["class"] is None
    assert plain["anchored"] and plain["drift"] == 1.0 and plain["anchor_reference_ms"] is None


def test_manifest_paths_classes_and_problem_files(bench, tmp_path, monkeypatch):
    problems = load_problem_set("builtin")
    items, labels = bench.load_candidates(REPEATABILITY, problems)
    rows = [json.loads(line) for line in REPEATABILITY.read_text().splitlines()]
    assert len(items) == len(labels) == len(rows)  # read beside the manifest, from any working directory
    assert [label["class"] for label in labels] == [row["class"] for row in rows]
    assert len({label["key"] for label in labels}) == len(rows)
    assert {p.id for p, _ in items if p.id.startswith("tiny_")} == {"tiny_vector_add", "tiny_softmax", "tiny_matmul"}
    assert all("class ModelNew" in answer for _, answer in items)
    only_builtin, _ = bench.load_candidates(REPEATABILITY, problems, wanted=lambda p: False)
    assert len(only_builtin) == len(rows) - 3
    # a manifest with paths relative to the working directory still loads (the older convention)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "k.py").write_text("class ModelNew: pass\n")
    old = tmp_path / "sub" / "m.jsonl"
    old.parent.mkdir()
    old.write_text(json.dumps({"problem": "L0_02_relu", "solution": "k.py"}) + "\n")
    items, labels = bench.load_candidates(old, problems)
    assert items[0][1] == "class ModelNew: pass\n" and labels == [{"key": "0:k", "class": None, "expect": None}]


def test_a_runs_gzipped_samples_give_their_training_answers(bench, tmp_path):
    """docs/runs/ keeps a run's answers gzipped: its training rows are the candidates, validation rows are not."""
    import gzip

    problems = load_problem_set("builtin")
    rows = [
        {"split": "train", "step": 1, "problem_id": "L0_02_relu", "completion": "class ModelNew: pass  # a\n"},
        {"split": "val", "step": 0, "problem_id": "L1_02_swish", "completion": "class ModelNew: pass  # b\n"},
        {"split": "train", "step": 2, "problem_id": "not_a_problem", "completion": "x"},
    ]
    path = tmp_path / "train_samples.jsonl.gz"
    path.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in rows).encode()))
    items, labels = bench.load_candidates(path, problems)
    assert [(p.id, answer) for p, answer in items] == [("L0_02_relu", "class ModelNew: pass  # a\n")]
    assert labels == [{"key": "0:L0_02_relu", "class": None, "expect": None}]


def test_verdicts_are_checked_against_what_the_manifest_expects(bench):
    """A manifest's "expect" names a verdict as `correct`, `hack <category>` or its status; a pass reports how
    many verdicts say that and lists the others, so a faster evaluator is also seen to judge the same."""
    from envs.verdict import HackFinding

    hack = Verdict(Status.HACK, "relu", "cpu", hack=HackFinding("identity_kernel", "returns its input"))
    verdicts = [_verdict("relu", 1.0), hack, Verdict(Status.INCORRECT, "relu", "cpu"), _verdict("mse", 1.0)]
    labels = [
        {"key": "0:a", "class": "legit", "expect": "correct"},
        {"key": "1:b", "class": "hack", "expect": "hack identity_kernel"},
        {"key": "2:c", "class": "hack", "expect": "hack partial_input"},
        {"key": "3:d", "class": None, "expect": None},  # nothing expected: not counted
    ]
    check = bench.unexpected(verdicts, labels)
    assert check == {"checked": 3, "as_expected": 2, "unexpected": {"2:c": "incorrect (expected hack partial_input)"}}
    assert bench.unexpected(verdicts, [{**label, "expect": None} for label in labels]) is None
    result = {"verdicts": verdicts}
    bench.print_expected(result, labels)
    assert result["expected"] == check
