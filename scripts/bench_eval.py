#!/usr/bin/env python
"""Evaluator throughput on the built-in problem set's reference solutions.

Two passes over the same candidates, both without the verdict cache:
  cold  - the first evaluation of each problem (on GPU this also measures the eager and TorchInductor
          baselines, compiling the latter), printed as a per-problem table;
  warm  - `--repeats` more passes with baselines known and workers warm: the steady state that RL sees.
Reports evaluations per minute and wall time per evaluation split by phase, and writes everything
as JSON (`--out`).

  python scripts/bench_eval.py --device cpu --workers 2
  python scripts/bench_eval.py --device cuda --workers 4 --out bench.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from envs import EvalSettings, Evaluator, load_problem_set  # noqa: E402
from envs.report import markdown_table, verdict_table  # noqa: E402


def phase_summary(verdicts) -> dict[str, dict[str, float]]:
    phases: dict[str, list[float]] = {}
    for v in verdicts:
        for name, seconds in v.phase_seconds.items():
            phases.setdefault(name, []).append(seconds)
    return {name: {"mean_s": statistics.fmean(xs), "median_s": statistics.median(xs), "max_s": max(xs)}
            for name, xs in phases.items()}


def run_pass(evaluator: Evaluator, items, desc: str) -> dict:
    start = time.monotonic()
    verdicts = evaluator.evaluate_many(items, progress=True, desc=desc)
    wall = time.monotonic() - start
    return {"verdicts": verdicts, "wall_s": wall, "evals": len(verdicts),
            "evals_per_min": 60 * len(verdicts) / wall, "phases": phase_summary(verdicts),
            "statuses": {s: sum(v.status.value == s for v in verdicts) for s in {v.status.value for v in verdicts}}}


def print_summary(name: str, result: dict) -> None:
    print(f"\n[{name}] {result['evals']} evaluations in {result['wall_s']:.1f} s = "
          f"{result['evals_per_min']:.1f} evaluations/min; statuses {result['statuses']}")
    print(f"  {'phase':<12} {'mean s':>8} {'median s':>9} {'max s':>8}")
    for phase, s in result["phases"].items():
        print(f"  {phase:<12} {s['mean_s']:8.3f} {s['median_s']:9.3f} {s['max_s']:8.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=["cpu", "cuda", "auto"], default="auto")
    ap.add_argument("--workers", type=int, default=2, help="worker processes (per GPU)")
    ap.add_argument("--levels", type=int, nargs="*", help="only these levels")
    ap.add_argument("--problems", nargs="*", help="only these problem ids")
    ap.add_argument("--repeats", type=int, default=1, help="warm passes")
    ap.add_argument("--size", choices=["full", "small"])
    ap.add_argument("--out", type=Path, help="write results as JSON here")
    ap.add_argument("--markdown", action="store_true", help="also print the per-problem table as markdown")
    args = ap.parse_args()

    problems = [p for p in load_problem_set("builtin", args.levels) if not args.problems or p.id in args.problems]
    items = [(p, Path(p.reference_solution).read_text()) for p in problems]
    settings = EvalSettings(device=args.device, workers=args.workers, size=args.size)
    with Evaluator(settings, cache=None) as evaluator:
        t0 = time.monotonic()
        evaluator.device_kind  # wait for the first worker so startup is reported apart
        startup = time.monotonic() - t0
        cold = run_pass(evaluator, items, "cold pass")
        print(verdict_table(problems, cold["verdicts"]))
        if args.markdown:
            print("\n" + markdown_table(problems, cold["verdicts"]))
        print(f"\nworker startup {startup:.1f} s; device {evaluator.device_kind}")
        print_summary("cold", cold)
        warm = run_pass(evaluator, items * args.repeats, "warm pass") if args.repeats else None
        if warm:
            print_summary("warm", warm)
    if args.out:
        def strip(r):
            return {k: v for k, v in r.items() if k != "verdicts"} if r else None
        report = {"device": evaluator.device_kind, "workers": args.workers, "startup_s": startup,
                  "cold": strip(cold), "warm": strip(warm),
                  "problems": [v.to_dict() for v in cold["verdicts"]]}
        args.out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
