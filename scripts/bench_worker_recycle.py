#!/usr/bin/env python
"""What recycling a worker costs, with harnesses forked from a zygote (fork_workers on) and without (off).

In RL most candidates fail, and the pool replaces the worker after every runtime error, timeout, crash or
hack (on CPU after every non-correct verdict), so the replacement dominates evaluation cost. For each
(fork_workers, workers) pair this evaluates, through the full evaluator (static analysis, worker, no
verdict cache), two streams of ReLU candidates, each candidate a fresh copy:
  errors - every candidate raises in forward (runtime_error: the worker is recycled each time);
  mix    - 3 failing (runtime_error) : 1 correct.
and reports evaluations per minute, plus the latency of one recycle: from the verdict of a failing
candidate to the moment the slot's replacement harness said hello (pool.worker_pids waits for it).

  python scripts/bench_worker_recycle.py                         # cpu, workers 1 2, fork off on
  python scripts/bench_worker_recycle.py --count 24 --workers 2 --out recycle.json
  python scripts/bench_worker_recycle.py --device cuda --workers 1   # on a GPU node
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from envs import EvalSettings, Evaluator, Status, resolve_problem

PROBLEM = "L0_02_relu"


def candidates(kind: str, count: int, good: str) -> list[str]:
    # Conditional, so that the static analysis lets it through to a worker (an unconditional raise is refused).
    failing = good.replace(
        "-> torch.Tensor:",
        "-> torch.Tensor:\n        if x.numel() > 0:\n            raise AttributeError('no such thing')",
        1,
    )
    assert failing != good, "the reference solution's forward signature changed"
    out = []
    for i in range(count):
        code = good if kind == "mix" and i % 4 == 3 else failing
        out.append(f"{code}\n# copy {kind}-{i}\n")  # distinct text: no deduplication can answer it
    return out


def recycle_latency(ev: Evaluator, failing: str, repeats: int) -> list[float]:
    problem = resolve_problem(PROBLEM)
    seconds = []
    for i in range(repeats):
        verdict = ev.evaluate(problem, f"{failing}\n# latency {i}\n")
        assert verdict.status is Status.RUNTIME_ERROR, verdict.error
        started = time.perf_counter()
        ev.pool.worker_pids()  # waits for every slot's replacement
        seconds.append(time.perf_counter() - started)
    return seconds


def measure(device: str, fork: str, workers: int, count: int) -> dict:
    problem = resolve_problem(PROBLEM)
    good = Path(problem.reference_solution).read_text()
    settings = EvalSettings(device=device, workers=workers, fork_workers=fork)
    result: dict = {"fork_workers": fork, "workers": workers}
    started = time.perf_counter()
    with Evaluator(settings) as ev:
        ev.pool.worker_pids()
        result["start_s"] = round(time.perf_counter() - started, 2)
        for kind in ("errors", "mix"):
            codes = candidates(kind, count, good)
            t0 = time.perf_counter()
            verdicts = ev.evaluate_many([(problem, c) for c in codes])
            ev.pool.worker_pids()  # the last replacements count too
            wall = time.perf_counter() - t0
            expected = [Status.CORRECT if kind == "mix" and i % 4 == 3 else Status.RUNTIME_ERROR for i in range(count)]
            wrong = [(v.status.value, (v.error or "")[:200]) for v, e in zip(verdicts, expected) if v.status is not e]
            assert not wrong, wrong
            queue = [v.phase_seconds.get("queue", 0.0) for v in verdicts]  # waiting for a (replacement) worker
            worked = [
                sum(t for k, t in v.phase_seconds.items() if "." not in k and k not in ("queue", "total"))
                for v in verdicts
            ]  # the phases, not their steps (`queue.slot`, `gpu_wait.shared`, `timing.timed_runs`) a second time
            result[kind] = {
                "evals_per_min": round(60 * count / wall, 1),
                "wall_s": round(wall, 1),
                "mean_phases_s": round(statistics.mean(worked), 2),
                "mean_queue_s": round(statistics.mean(queue), 2),
            }
        latency = recycle_latency(ev, candidates("errors", 1, good)[0], repeats=3) if workers == 1 else []
        if latency:
            result["recycle_s"] = {"median": round(statistics.median(latency), 3), "max": round(max(latency), 3)}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--fork", nargs="+", default=["off", "on"], choices=["off", "on"])
    parser.add_argument("--count", type=int, default=12, help="candidates per stream")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rows = []
    for workers in args.workers:
        for fork in args.fork:
            load = os.getloadavg()[0]
            row = {
                **measure(args.device, fork, workers, args.count),
                "load_before": round(load, 2),
                "load_after": round(os.getloadavg()[0], 2),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    print(f"\n{'workers':>7} {'fork':>4} {'errors/min':>10} {'mix/min':>8} {'recycle s':>9} {'load':>9}")
    for r in rows:
        recycle = r.get("recycle_s", {}).get("median", "")
        print(
            f"{r['workers']:>7} {r['fork_workers']:>4} {r['errors']['evals_per_min']:>10} "
            f"{r['mix']['evals_per_min']:>8} {recycle!s:>9} {r['load_before']:>4}-{r['load_after']:<4}"
        )
    if args.out:
        args.out.write_text(json.dumps({"device": args.device, "cpus": os.cpu_count(), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
