#!/usr/bin/env python
"""Coverage of the speedup's bootstrap interval (envs/speedup.py) on synthetic evaluations, CPU only.

Each simulated evaluation times a kernel (0.5 ms) and the eager anchor (1.0 ms, true speedup 2.0) in
`--blocks` placement blocks (100 and 50 runs split as the harness splits them): every block moves the
kernel's and the anchor's time by its own factor 1 + N(0, between) (where their inputs landed), every
run by 1 + N(0, within). For the first evaluation of each trial the interval is computed twice, runs
resampled as one sample (flat) and blocks then runs (two-level); reported: how often it holds the true
speedup, how often it holds the speedups of `--later` further evaluations (what
`scripts/bench_eval.py --repeats` checks on a GPU), and its mean half-width.

  python scripts/bench_interval.py --blocks 3 --between 0.01 --within 0.01 --trials 150
"""

from __future__ import annotations

import argparse
import random

from envs.speedup import bootstrap_ratio, group_runs
from envs.timing import placement_blocks


def evaluation(rng: random.Random, blocks: int, between: float, within: float):
    """(kernel runs, anchor runs, kernel block ids, anchor block ids) of one simulated evaluation."""
    kernel, anchor, kernel_ids, anchor_ids = [], [], [], []
    for b, block in enumerate(placement_blocks(100, 50, blocks)):
        shift_kernel, shift_anchor = rng.gauss(0, between), rng.gauss(0, between)
        kernel += [0.5 * (1 + shift_kernel) * (1 + rng.gauss(0, within)) for _ in range(block.runs)]
        anchor += [1.0 * (1 + shift_anchor) * (1 + rng.gauss(0, within)) for _ in range(block.anchor_runs)]
        kernel_ids += [b] * block.runs
        anchor_ids += [b] * block.anchor_runs
    return kernel, anchor, kernel_ids, anchor_ids


def median(xs: list[float]) -> float:
    return sorted(xs)[int(round(0.5 * (len(xs) - 1)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--blocks", type=int, default=3, help="placement blocks per evaluation")
    ap.add_argument("--between", type=float, default=0.01, help="sd of a block's relative shift")
    ap.add_argument("--within", type=float, default=0.01, help="sd of a run's relative noise")
    ap.add_argument("--trials", type=int, default=150)
    ap.add_argument("--later", type=int, default=2, help="further evaluations whose speedups the interval should hold")
    args = ap.parse_args()
    rng = random.Random(0)
    totals = {"flat": [0, 0, 0.0], "two-level": [0, 0, 0.0]}
    for trial in range(args.trials):
        kernel, anchor, kernel_ids, anchor_ids = evaluation(rng, args.blocks, args.between, args.within)
        later = [evaluation(rng, args.blocks, args.between, args.within) for _ in range(args.later)]
        intervals = {
            "flat": bootstrap_ratio(anchor, kernel, seed=trial),
            "two-level": bootstrap_ratio(group_runs(anchor, anchor_ids), group_runs(kernel, kernel_ids), seed=trial),
        }
        for name, (low, high) in intervals.items():
            totals[name][0] += low <= 2.0 <= high
            totals[name][1] += sum(low <= median(a) / median(k) <= high for k, a, _, _ in later)
            totals[name][2] += (high - low) / 2
    print(f"blocks {args.blocks}, between {args.between}, within {args.within}, {args.trials} trials:")
    for name, (truth, held, half) in totals.items():
        print(
            f"  {name:<9} holds the true speedup {truth / args.trials:.0%}, later evaluations' speedups "
            f"{held / (args.trials * args.later):.0%}; mean half-width {half / args.trials / 2.0:.2%}"
        )


if __name__ == "__main__":
    main()
