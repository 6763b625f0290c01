"""scripts/bench_spread.py: repeatability across bench_eval runs (issue 32) from their --out reports."""

import gzip
import json

import pytest

from envs import Status
from envs.verdict import TimingStats, Timings, Verdict


@pytest.fixture(scope="module")
def bench_spread():
    from scripts import bench_spread

    return bench_spread


def _report(path, answers, eager_ms=2.0, anchor_reference_ms=2.4, classes=None):
    """A bench_eval --out report whose cold pass judged `answers`: (problem id, status, speedup); `classes`: the
    candidates' kernel classes, as a manifest's `class` field gives them."""
    problems = []
    for pid, status, speedup in answers:
        timings = Timings(
            kernel=TimingStats.from_samples([1.0]),
            eager=TimingStats.from_samples([eager_ms]),
            anchor_reference=TimingStats.from_samples([anchor_reference_ms]),
        )
        problems.append(Verdict(Status(status), pid, "NVIDIA H100", speedup=speedup, timings=timings).to_dict())
    labels = [{"key": f"{i}:{pid}", "class": c} for i, ((pid, _, _), c) in enumerate(zip(answers, classes or []))]
    path.write_text(json.dumps({"backend": "local", "cold": {}, "problems": problems, "labels": labels or None}))
    return path


def test_spread_per_answer_and_problem_with_each_runs_baselines(tmp_path, bench_spread, capsys):
    one = _report(tmp_path / "1.json", [("a", "correct", 2.0), ("a", "correct", 1.0), ("b", "incorrect", None)])
    two = _report(tmp_path / "2.json", [("a", "correct", 2.2), ("a", "correct", 1.01), ("b", "incorrect", None)], 2.2)
    three = _report(tmp_path / "3.json", [("a", "correct", 2.1), ("a", "correct", 1.02), ("b", "hack", None)])
    result = bench_spread.spread([bench_spread.load_report(p) for p in (one, two, three)])
    assert result["runs"] == 3 and result["answers"] == 3
    assert [d["statuses"] for d in result["status_disagreements"]] == [["incorrect", "incorrect", "hack"]]
    # each run's cold verdict is one repeat, measured as bench_eval measures warm repeats: (max - min) / median
    per_answer = result["repeatability"]["per_kernel"]
    assert per_answer == pytest.approx({"0:a": 0.2 / 2.1, "1:a": 0.02 / 1.01})
    assert result["repeatability"]["median_spread"] == pytest.approx((0.2 / 2.1 + 0.02 / 1.01) / 2)
    assert result["repeatability"]["max_spread"] == pytest.approx(0.2 / 2.1)
    assert result["by_problem"]["a"]["kernels"] == 2 and "b" not in result["by_problem"]
    assert [run["a"]["eager"] for run in result["baselines"]] == [2.0, 2.2, 2.0]
    assert result["baselines"][0]["a"]["anchor_reference"] == 2.4 and result["baselines"][0]["a"]["inductor"] is None
    bench_spread.print_spread(result)
    assert "median 0.0575" in capsys.readouterr().out


def test_reports_of_other_answers_or_other_files_are_refused_clearly(tmp_path, bench_spread, capsys):
    one = _report(tmp_path / "1.json", [("a", "correct", 2.0)])
    other = _report(tmp_path / "2.json", [("b", "correct", 2.0)])
    with pytest.raises(bench_spread.ReportError, match="different answers"):
        bench_spread.spread([bench_spread.load_report(p) for p in (one, other)])
    with pytest.raises(bench_spread.ReportError, match="at least two"):
        bench_spread.spread([bench_spread.load_report(one)])
    (tmp_path / "x.json").write_text('{"workers": 6}')
    with pytest.raises(bench_spread.ReportError, match="not a scripts/bench_eval.py --out report"):
        bench_spread.load_report(tmp_path / "x.json")
    (tmp_path / "bad.json").write_text("{")
    assert bench_spread.main([str(one), str(tmp_path / "bad.json")]) == 2
    assert "cannot read a JSON report" in capsys.readouterr().err
    assert bench_spread.main([str(one), str(one), "--json", str(tmp_path / "s.json")]) == 0
    assert json.loads((tmp_path / "s.json").read_text())["repeatability"]["max_spread"] == 0.0


def test_spread_per_kernel_class_where_the_manifest_names_them(tmp_path, bench_spread, capsys):
    classes = ["atomic", "scan", "atomic"]
    runs = [
        _report(
            tmp_path / f"{k}.json",
            [("a", "correct", 1.0 + k / 10), ("b", "correct", 2.0), ("c", "correct", 1.0)],
            classes=classes,
        )
        for k in range(3)
    ]
    result = bench_spread.spread([bench_spread.load_report(p) for p in runs])
    by_class = result["repeatability"]["by_class"]
    assert by_class["atomic"]["kernels"] == 2 and by_class["atomic"]["max_spread"] == pytest.approx(0.2 / 1.1)
    assert by_class["scan"]["max_spread"] == 0.0
    bench_spread.print_spread(result)
    assert "atomic" in capsys.readouterr().out


def _blocked(kernel_blocks, anchor_blocks, scale=1.0):
    """An anchored verdict as the worker's timing gives it: per-block medians, the pooled medians (each block
    one run here) and the speedup they make."""
    from envs.speedup import _median
    from envs.verdict import SpeedupInterval

    kernel, anchor = _median(kernel_blocks), _median(anchor_blocks)
    speedup = scale * anchor / kernel
    interval = SpeedupInterval(
        speedup * 0.98, speedup * 1.02, 0.95, True, 1.0, 1000, len(kernel_blocks), kernel_blocks, anchor_blocks
    )
    timings = Timings(
        kernel=TimingStats.from_samples(kernel_blocks),
        anchor=TimingStats.from_samples(anchor_blocks),
        eager=TimingStats.from_samples([2.0]),
    )
    return Verdict(
        Status.CORRECT, "p", "NVIDIA H100", speedup=speedup, timings=timings, speedup_interval=interval
    ).to_dict()


def test_estimators_compare_point_estimates_of_runs_whose_blocks_land_in_two_modes(tmp_path, bench_spread, capsys):
    # Placement blocks land fast (2.28 ms) or slow (2.64 ms), the anchor's alike (2.14 / 2.50): with about half
    # the blocks in each mode the pooled median jumps between the modes from run to run, the blocks' mean
    # moves by the share of blocks that changed mode.
    fast, slow = 2.28, 2.64
    runs = [(7, 6), (5, 7), (6, 5)]  # slow blocks of 12 for the kernel and for the anchor, per run
    paths = []
    for r, (k_slow, a_slow) in enumerate(runs):
        kernel = [slow] * k_slow + [fast] * (12 - k_slow)
        anchor = [2.50] * a_slow + [2.14] * (12 - a_slow)
        unblocked = Verdict(Status.CORRECT, "q", "NVIDIA H100", speedup=1.0 + r / 100).to_dict()
        problems = [_blocked(kernel, anchor), unblocked]
        labels = [{"key": "0:p", "class": "elementwise"}, {"key": "1:q", "class": "tiny"}]
        path = tmp_path / f"{r}.json"
        path.write_text(json.dumps({"problems": problems, "labels": labels}))
        paths.append(path)
    assert bench_spread.main([str(p) for p in paths] + ["--estimators", "--json", str(tmp_path / "s.json")]) == 0
    est = json.loads((tmp_path / "s.json").read_text())["estimators"]
    assert est["answers"] == 1  # the answer without per-block medians is left out
    assert est["reported"]["median_spread"] > 0.2  # both medians jump, in opposite directions
    assert est["block_mean"]["median_spread"] < 0.08
    assert set(est["block_mean"]["by_class"]) == {"elementwise", "overall"}
    assert "point estimates of the same runs, 1 answers" in capsys.readouterr().out


def test_slow_block_shares_say_where_a_step_sets_in_and_gzipped_reports_load(tmp_path, bench_spread):
    from envs.verdict import SpeedupInterval

    def verdict(kernel_blocks, anchor_blocks):
        interval = SpeedupInterval(0.9, 1.1, 0.95, True, 1.0, 1000, len(kernel_blocks), kernel_blocks, anchor_blocks)
        return Verdict(Status.CORRECT, "p", "NVIDIA H100", speedup=1.0, speedup_interval=interval)

    verdicts = [
        verdict([2.0, 2.1, 2.5, 2.5], [2.0, 2.0, 2.4, 2.0]),
        verdict([2.0, 2.0, 2.0, 2.5], None),
        verdict([2.0, 2.5], [2.0, 2.0]),  # two blocks tell no step
    ]
    shares = bench_spread.slow_block_shares(verdicts)
    assert shares == {"kernel": [0.0, 0.0, 0.5, 1.0], "anchor": [0.0, 0.0, 1.0, 0.0]}

    plain = _report(tmp_path / "1.json", [("a", "correct", 2.0)])
    zipped = tmp_path / "1.json.gz"
    zipped.write_bytes(gzip.compress(plain.read_bytes()))
    assert bench_spread.load_report(zipped)[0][0].speedup == 2.0
    (tmp_path / "bad.json.gz").write_bytes(b"not gzip")
    with pytest.raises(bench_spread.ReportError, match="cannot read"):
        bench_spread.load_report(tmp_path / "bad.json.gz")
