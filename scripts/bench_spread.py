#!/usr/bin/env python
"""Repeatability across runs: the same answers evaluated by separate `scripts/bench_eval.py` runs, each of which
measured its own baselines (issue 32). bench_eval's `--repeats` compares warm passes of one run, which share
their baselines; this compares runs, where a baseline that landed on a slow placement moves every speedup of
its problem.

Reads the `--out` reports of the runs (same `--candidates` and `--limit`, so the answers are in the same order)
and prints, per answer correct in every run, the spread of its cold speedup (max over min, minus 1): median,
p90, p95 and max, overall, per kernel class (where the candidates' manifest has a `class` field) and per
problem; the answers whose status differs between runs; and each run's baselines per problem (eager,
TorchInductor and the anchor reference, median ms), where a spread comes from.

    python scripts/bench_spread.py before-1.json before-2.json before-3.json [--json spread.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from envs.pool.metrics import percentile

BASELINES = ("eager", "inductor", "anchor_reference")


class ReportError(ValueError):
    """A file that is not a bench_eval report, or reports of different answers."""


def load_report(path: Path) -> list[dict]:
    """The cold pass's verdicts of one bench_eval `--out` report, in candidate order, each with its candidate's
    `class` where the report's candidates had one (a manifest's `class` field)."""
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ReportError(f"{path}: cannot read a JSON report ({e})") from None
    verdicts = report.get("problems") if isinstance(report, dict) else None
    if not isinstance(verdicts, list) or not all(isinstance(v, dict) and "problem_id" in v for v in verdicts):
        raise ReportError(f"{path}: not a scripts/bench_eval.py --out report (no per-answer 'problems' list)")
    labels = report.get("labels")
    if isinstance(labels, list) and len(labels) == len(verdicts):
        verdicts = [
            {**v, "class": label.get("class") if isinstance(label, dict) else None}
            for v, label in zip(verdicts, labels)
        ]
    return verdicts


def _summary(spreads: list[float]) -> dict:
    ordered = sorted(spreads)
    return {
        "answers": len(ordered),
        "median": statistics.median(ordered),
        "p90": percentile(ordered, 0.9),
        "p95": percentile(ordered, 0.95),
        "max": ordered[-1],
    }


def _baselines(verdicts: list[dict]) -> dict[str, dict[str, float | None]]:
    """Per problem, the baselines' medians its first timed verdict carries (every verdict of a problem in one run
    carries the same cached baselines)."""
    out: dict[str, dict[str, float | None]] = {}
    for v in verdicts:
        timings = v.get("timings") or {}
        if v["problem_id"] in out or not (timings.get("eager") or {}).get("median_ms"):
            continue
        out[v["problem_id"]] = {b: (timings.get(b) or {}).get("median_ms") for b in BASELINES}
    return out


def spread(runs: list[list[dict]]) -> dict:
    """Cross-run spread of the cold speedups of the answers correct in every run (see the module docstring)."""
    if len(runs) < 2:
        raise ReportError("needs the reports of at least two runs")
    if len({len(r) for r in runs}) > 1 or any(
        [v["problem_id"] for v in r] != [v["problem_id"] for v in runs[0]] for r in runs
    ):
        raise ReportError("the reports hold different answers: run bench_eval with the same --candidates and --limit")
    per_answer, by_problem, by_class, disagree = [], {}, {}, []
    for i, first in enumerate(runs[0]):
        statuses = [r[i].get("status") for r in runs]
        if len(set(statuses)) > 1:
            disagree.append({"answer": i, "problem_id": first["problem_id"], "statuses": statuses})
            continue
        speedups = [r[i].get("speedup") for r in runs]
        if statuses[0] != "correct" or not all(isinstance(s, (int, float)) and s > 0 for s in speedups):
            continue
        s = max(speedups) / min(speedups) - 1
        per_answer.append({"answer": i, "problem_id": first["problem_id"], "speedups": speedups, "spread": s})
        by_problem.setdefault(first["problem_id"], []).append(s)
        if first.get("class"):
            by_class.setdefault(first["class"], []).append(s)
    return {
        "runs": len(runs),
        "answers": len(runs[0]),
        "status_disagreements": disagree,
        "overall": _summary([a["spread"] for a in per_answer]) if per_answer else None,
        "by_problem": {p: _summary(xs) for p, xs in sorted(by_problem.items())},
        "by_class": {c: _summary(xs) for c, xs in sorted(by_class.items())},  # manifests with a `class` field
        "per_answer": per_answer,
        "baselines": [_baselines(r) for r in runs],
    }


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def print_spread(result: dict) -> None:
    differ = result["status_disagreements"]
    print(f"{result['answers']} answers in {result['runs']} runs; statuses differ for {len(differ)}")
    for d in differ:
        print(f"  answer {d['answer']} ({d['problem_id']}): {d['statuses']}")
    overall = result["overall"]
    if overall is None:
        print("no answer is correct with a speedup in every run: nothing to compare")
        return
    print(
        f"cold speedup spread across runs (max/min - 1) over {overall['answers']} correct answers: median "
        f"{_pct(overall['median'])}, p90 {_pct(overall['p90'])}, p95 {_pct(overall['p95'])}, max {_pct(overall['max'])}"
    )
    for name, s in [*result["by_class"].items(), *result["by_problem"].items()]:
        print(
            f"  {name:32s} {s['answers']:3d} answers  median {_pct(s['median']):>6s}  p95 {_pct(s['p95']):>6s}  "
            f"max {_pct(s['max']):>6s}"
        )
    print("baselines per run, median ms (eager / inductor / anchor reference):")
    for pid in sorted({p for run in result["baselines"] for p in run}):
        cells = []
        for run in result["baselines"]:
            b = run.get(pid)
            cells.append(" / ".join("-" if b is None or b[k] is None else f"{b[k]:.4g}" for k in BASELINES))
        print(f"  {pid:32s} " + " | ".join(cells))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("reports", type=Path, nargs="+", help="bench_eval --out reports of the runs")
    ap.add_argument("--json", type=Path, help="also write the result here")
    args = ap.parse_args(argv)
    try:
        result = spread([load_report(p) for p in args.reports])
    except ReportError as e:
        print(f"bench_spread: {e}", file=sys.stderr)
        return 2
    print_spread(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
