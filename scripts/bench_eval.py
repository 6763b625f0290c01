#!/usr/bin/env python
"""Evaluator throughput on the built-in problem set's reference solutions.

Two passes over the same candidates, both without the verdict cache:
  cold  - the first evaluation of each problem (on GPU this also measures the eager and TorchInductor
          baselines, compiling the latter), printed as a per-problem table;
  warm  - `--repeats` more passes with baselines known and workers warm: the steady state that RL sees.
Reports evaluations per minute, latency percentiles and wall time per evaluation split by phase.

`--backend ray` measures the Ray evaluation pool instead of the local evaluator. `--vs-fresh-process`
then evaluates the warm pass's candidates with a KernelBench-style harness (a fresh worker process per
evaluation doing the same correctness and timing work, baselines known) and reports the speed ratio and
whether every verdict agrees.

  python scripts/bench_eval.py --device cpu --workers 2
  python scripts/bench_eval.py --device cuda --backend ray --workers 4 --vs-fresh-process --out bench.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from envs import EvalSettings, Evaluator, load_problem_set  # noqa: E402
from envs.cache import SqliteCache  # noqa: E402
from envs.report import markdown_table, verdict_table  # noqa: E402


class BaselineOnlyCache(SqliteCache):
    """Shares measured baselines but never answers with a stored verdict: every evaluation really runs."""

    def get_verdict(self, key: str) -> dict | None:
        return None

    def put_verdict(self, key: str, problem_id: str, verdict: dict) -> None:
        pass


def percentiles(xs: list[float]) -> dict[str, float]:
    s = sorted(xs)
    pick = lambda q: s[min(len(s) - 1, int(round(q * (len(s) - 1))))]  # noqa: E731
    return {"p50_s": pick(0.5), "p90_s": pick(0.9), "p99_s": pick(0.99)}


def phase_summary(verdicts) -> dict[str, dict[str, float]]:
    phases: dict[str, list[float]] = {}
    for v in verdicts:
        for name, seconds in v.phase_seconds.items():
            phases.setdefault(name, []).append(seconds)
    return {name: {"mean_s": statistics.fmean(xs), "median_s": statistics.median(xs), "max_s": max(xs)}
            for name, xs in phases.items()}


def summarize(verdicts, wall: float) -> dict:
    return {"verdicts": verdicts, "wall_s": wall, "evals": len(verdicts),
            "evals_per_min": 60 * len(verdicts) / wall, "phases": phase_summary(verdicts),
            "latency": percentiles([v.phase_seconds.get("total", 0.0) for v in verdicts]),
            "statuses": {s: sum(v.status.value == s for v in verdicts) for s in {v.status.value for v in verdicts}}}


def run_pass(evaluator, items, desc: str) -> dict:
    start = time.monotonic()
    verdicts = evaluator.evaluate_many(items, progress=True, desc=desc)
    return summarize(verdicts, time.monotonic() - start)


def fresh_process_pass(settings: EvalSettings, items, baselines: SqliteCache) -> dict:
    """KernelBench-style: one new worker process per evaluation, nothing kept warm."""
    from tqdm import tqdm
    single = dataclasses.replace(settings, workers=1)
    verdicts = []
    start = time.monotonic()
    for problem, answer in tqdm(items, desc="fresh process per evaluation", unit="eval"):
        t0 = time.monotonic()
        with Evaluator(single, cache=baselines) as evaluator:
            verdict = evaluator.evaluate(problem, answer)
        # The process start is part of what this harness costs per evaluation.
        verdicts.append(dataclasses.replace(verdict, phase_seconds={**verdict.phase_seconds,
                                                                    "total": time.monotonic() - t0}))
    return summarize(verdicts, time.monotonic() - start)


def print_summary(name: str, result: dict) -> None:
    lat = result["latency"]
    print(f"\n[{name}] {result['evals']} evaluations in {result['wall_s']:.1f} s = "
          f"{result['evals_per_min']:.1f} evaluations/min; latency p50 {lat['p50_s']:.2f} s, "
          f"p90 {lat['p90_s']:.2f} s, p99 {lat['p99_s']:.2f} s; statuses {result['statuses']}")
    print(f"  {'phase':<12} {'mean s':>8} {'median s':>9} {'max s':>8}")
    for phase, s in result["phases"].items():
        print(f"  {phase:<12} {s['mean_s']:8.3f} {s['median_s']:9.3f} {s['max_s']:8.3f}")


def make_evaluator(args, settings: EvalSettings, cache: SqliteCache):
    if args.backend == "local":
        return Evaluator(settings, cache=cache)
    from envs.pool import PoolConfig, RayEvaluationPool
    return RayEvaluationPool(settings, PoolConfig(num_actors=args.actors), cache=cache)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=["cpu", "cuda", "auto"], default="auto")
    ap.add_argument("--backend", choices=["local", "ray"], default="local")
    ap.add_argument("--actors", type=int, help="Ray actors (default: one per GPU, 2 on CPU)")
    ap.add_argument("--workers", type=int, default=2, help="worker processes (per GPU / per actor)")
    ap.add_argument("--levels", type=int, nargs="*", help="only these levels")
    ap.add_argument("--problems", nargs="*", help="only these problem ids")
    ap.add_argument("--repeats", type=int, default=1, help="warm passes")
    ap.add_argument("--size", choices=["full", "small"])
    ap.add_argument("--vs-fresh-process", action="store_true",
                    help="also run the warm candidates through a fresh-process-per-evaluation harness")
    ap.add_argument("--markdown", action="store_true", help="also print the per-problem table as markdown")
    ap.add_argument("--out", type=Path, help="write results as JSON here")
    args = ap.parse_args()

    problems = [p for p in load_problem_set("builtin", args.levels) if not args.problems or p.id in args.problems]
    items = [(p, Path(p.reference_solution).read_text()) for p in problems]
    settings = EvalSettings(device=args.device, workers=args.workers, size=args.size)
    with tempfile.TemporaryDirectory() as tmp:
        cache = BaselineOnlyCache(Path(tmp) / "baselines.sqlite")
        with make_evaluator(args, settings, cache) as evaluator:
            t0 = time.monotonic()
            device_kind = evaluator.device_kind  # waits for the first worker: startup is reported apart
            startup = time.monotonic() - t0
            cold = run_pass(evaluator, items, "cold pass")
            print(verdict_table(problems, cold["verdicts"]))
            if args.markdown:
                print("\n" + markdown_table(problems, cold["verdicts"]))
            print(f"\nstartup {startup:.1f} s; device {device_kind}; backend {args.backend}")
            print_summary("cold", cold)
            warm = run_pass(evaluator, items * args.repeats, "warm pass") if args.repeats else None
            if warm:
                print_summary("warm", warm)
            metrics = evaluator.metrics() if hasattr(evaluator, "metrics") else None
        fresh = None
        if args.vs_fresh_process and warm:
            fresh = fresh_process_pass(settings, items * args.repeats, cache)
            print_summary("fresh process per evaluation", fresh)
            agree = sum(a.status is b.status and a.hack == b.hack for a, b in zip(warm["verdicts"], fresh["verdicts"]))
            fresh["agreement"] = f"{agree}/{len(fresh['verdicts'])}"
            print(f"\n{args.backend} warm vs fresh process: {warm['evals_per_min'] / fresh['evals_per_min']:.2f}x "
                  f"evaluations/min; verdicts agree {fresh['agreement']}")
        cache.close()
    if args.out:
        def strip(r):
            return {k: v for k, v in r.items() if k != "verdicts"} if r else None
        report = {"device": device_kind, "backend": args.backend, "workers": args.workers, "startup_s": startup,
                  "cold": strip(cold), "warm": strip(warm), "fresh_process": strip(fresh), "metrics": metrics,
                  "problems": [v.to_dict() for v in cold["verdicts"]]}
        args.out.write_text(json.dumps(report, indent=1, default=str))


if __name__ == "__main__":
    main()
