"""Repeatability across runs: the same answers evaluated by separate `scripts/bench_eval.py` runs, each of which
measured its own baselines (issue 32). bench_eval's `--repeats` compares warm passes of one run, which share
their baselines; this compares runs, where a baseline that landed on a slow placement moves every speedup of
its problem.

Reads the `--out` reports of the runs (same `--candidates` and `--limit`, so the answers are in the same order)
and treats each run's cold verdict of an answer as one repeat of it, measured as bench_eval measures its warm
repeats (`speedup_repeatability`: per answer (max - min) / median of its speedups, then the median, p95 and max
over answers, per kernel class where the candidates' manifest has a `class` field, and how often the first run's
interval holds the later runs' speedups); beside it the same per problem, the answers whose status differs
between runs, and each run's baselines per problem (eager, TorchInductor and the anchor reference, median ms),
where a spread comes from.

`--estimators` also asks whether another point estimate of the same runs would repeat better: from the
verdicts' per-block medians (`speedup_interval.kernel_block_ms` / `anchor_block_ms`) it recomputes each speedup
with the anchored ratio's medians of pooled runs (as reported) replaced by the mean of the block medians, or by
the median of the blocks' own anchor/kernel ratios, the cached scale kept, and reports each one's spread as above.

`--slow-blocks` asks where in an evaluation a step change sets in: per run and placement block, the share of
evaluations whose block median (kernel's, anchor's) is `SLOW_STEP` above the faster of their first two blocks.

    python scripts/bench_spread.py before-1.json before-2.json.gz before-3.json [--estimators] [--slow-blocks]
        [--json spread.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import statistics
import sys
from pathlib import Path

from envs.verdict import Verdict
from scripts.bench_eval import print_by_class, speedup_repeatability, spread_by_class

BASELINES = ("eager", "inductor", "anchor_reference")


class ReportError(ValueError):
    """A file that is not a bench_eval report, or reports of different answers."""


def load_report(path: Path) -> tuple[list[Verdict], list[dict]]:
    """The cold pass's verdicts of one bench_eval `--out` report, in candidate order, and each candidate's label
    (`key`, and `class` where the candidates' manifest has one; the answer's index and problem otherwise)."""
    try:
        with gzip.open(path, "rt") if path.suffix == ".gz" else path.open() as f:
            report = json.load(f)
        records = report.get("problems") if isinstance(report, dict) else None
        verdicts = [Verdict.from_dict(r) for r in records] if isinstance(records, list) else None
    except (OSError, ValueError, EOFError) as e:
        raise ReportError(f"{path}: cannot read a JSON report ({e})") from None
    except (TypeError, KeyError, AttributeError) as e:
        raise ReportError(f"{path}: not a scripts/bench_eval.py --out report ({type(e).__name__}: {e})") from None
    if verdicts is None:
        raise ReportError(f"{path}: not a scripts/bench_eval.py --out report (no per-answer 'problems' list)")
    labels = report.get("labels")
    if not (isinstance(labels, list) and len(labels) == len(verdicts) and all(isinstance(x, dict) for x in labels)):
        labels = [{"key": f"{i}:{v.problem_id}", "class": None} for i, v in enumerate(verdicts)]
    return verdicts, labels


def _baselines(verdicts: list[Verdict]) -> dict[str, dict[str, float | None]]:
    """Per problem, the baselines' medians its first timed verdict carries (every verdict of a problem in one run
    carries the same cached baselines)."""
    out: dict[str, dict[str, float | None]] = {}
    for v in verdicts:
        if v.problem_id in out or v.timings is None or v.timings.eager is None:
            continue
        out[v.problem_id] = {b: getattr(getattr(v.timings, b), "median_ms", None) for b in BASELINES}
    return out


def _block_mean(v: Verdict) -> float | None:
    """The speedup with the mean of the block medians on each side in place of the pooled runs' medians."""
    iv, t = v.speedup_interval, v.timings
    if not v.speedup or iv is None or not iv.kernel_block_ms or t is None or t.kernel is None:
        return None
    kernel = v.speedup * t.kernel.median_ms / statistics.mean(iv.kernel_block_ms)
    if not iv.anchored:  # a cached baseline over the kernel: only the kernel's side changes
        return kernel
    if not iv.anchor_block_ms or t.anchor is None:
        return None
    return kernel * statistics.mean(iv.anchor_block_ms) / t.anchor.median_ms


def _block_ratio(v: Verdict) -> float | None:
    """The speedup with the median over blocks of each block's anchor/kernel ratio in place of the ratio of the
    pooled medians (anchored verdicts whose sides have the same blocks only)."""
    iv, t = v.speedup_interval, v.timings
    if not v.speedup or iv is None or not iv.anchored or t is None or t.kernel is None or t.anchor is None:
        return None
    kernel, anchor = iv.kernel_block_ms or [], iv.anchor_block_ms or []
    if not kernel or len(kernel) != len(anchor):
        return None
    scale = v.speedup * t.kernel.median_ms / t.anchor.median_ms
    return scale * statistics.median(a / k for a, k in zip(anchor, kernel))


ESTIMATORS = {"block_mean": _block_mean, "block_ratio_median": _block_ratio}


# A block whose median is this much above the faster of its evaluation's first two reads as slow (session 39's
# step on the H100 was +19%; block-to-block noise of memory-bound kernels is a few percent)
SLOW_STEP = 1.08


def slow_block_shares(verdicts: list[Verdict], step: float = SLOW_STEP) -> dict[str, list[float]]:
    """Per placement block index, the share of the verdicts with at least three blocks whose block median is
    `step` times the faster of their first two or more, for the kernel's runs and the anchor's."""
    counts: dict[str, list[list[int]]] = {"kernel": [], "anchor": []}
    for v in verdicts:
        iv = v.speedup_interval
        for side, blocks in (("kernel", iv and iv.kernel_block_ms), ("anchor", iv and iv.anchor_block_ms)):
            if not blocks or len(blocks) < 3:
                continue
            base = min(blocks[:2])
            for i, ms in enumerate(blocks):
                if len(counts[side]) <= i:
                    counts[side].append([0, 0])
                counts[side][i][0] += ms > step * base
                counts[side][i][1] += 1
    return {side: [round(slow / n, 3) for slow, n in c] for side, c in counts.items()}


def _keys_and_classes(labels: list[dict]) -> tuple[list[str], dict[str, str | None]]:
    """Each answer's key, in report order, and each key's kernel class (None where the manifest names none)."""
    return [label["key"] for label in labels], {label["key"]: label.get("class") for label in labels}


def estimator_spreads(runs: list[tuple[list[Verdict], list[dict]]]) -> dict:
    """Per estimator (`ESTIMATORS`, and "reported"), the cross-run spread of the answers every estimator can
    recompute in every run, overall and by class."""
    keys, classes = _keys_and_classes(runs[0][1])
    estimated = {
        name: [[f(v) for v in verdicts] for verdicts, _ in runs]
        for name, f in {"reported": lambda v: v.speedup, **ESTIMATORS}.items()
    }
    usable = [
        i for i in range(len(keys)) if all(run[i] is not None for per_run in estimated.values() for run in per_run)
    ]
    out = {"answers": len(usable)}
    for name, speedups in estimated.items():
        verdicts = [dataclasses.replace(run[i], speedup=s[i]) for (run, _), s in zip(runs, speedups) for i in usable]
        rep = speedup_repeatability(verdicts, [keys[i] for i in usable] * len(runs), classes)
        out[name] = {k: rep[k] for k in ("median_spread", "p95_spread", "max_spread", "by_class") if k in rep}
    return out


def spread(runs: list[tuple[list[Verdict], list[dict]]]) -> dict:
    """Cross-run repeatability of the answers' cold speedups (see the module docstring)."""
    if len(runs) < 2:
        raise ReportError("needs the reports of at least two runs")
    first, labels = runs[0]
    if any([v.problem_id for v in verdicts] != [v.problem_id for v in first] for verdicts, _ in runs):
        raise ReportError("the reports hold different answers: run bench_eval with the same --candidates and --limit")
    keys, classes = _keys_and_classes(labels)
    repeats = speedup_repeatability(
        [v for verdicts, _ in runs for v in verdicts], keys * len(runs), classes if any(classes.values()) else None
    )
    problems = {key: v.problem_id for key, v in zip(keys, first)}
    disagree = [
        {"answer": key, "statuses": [verdicts[i].status.value for verdicts, _ in runs]}
        for i, key in enumerate(keys)
        if len({verdicts[i].status for verdicts, _ in runs}) > 1
    ]
    return {
        "runs": len(runs),
        "answers": len(first),
        "status_disagreements": disagree,
        "repeatability": repeats,
        "by_problem": spread_by_class(repeats.get("per_kernel", {}), problems),
        "baselines": [_baselines(verdicts) for verdicts, _ in runs],
    }


def print_spread(result: dict) -> None:
    differ = result["status_disagreements"]
    print(f"{result['answers']} answers in {result['runs']} runs; statuses differ for {len(differ)}")
    for d in differ:
        print(f"  answer {d['answer']}: {d['statuses']}")
    rep = result["repeatability"]
    if not rep:
        print("no answer has a speedup in two runs: nothing to compare")
        return
    print(
        f"cold speedup spread across runs ((max - min) / median) over {rep['kernels']} answers: median "
        f"{rep['median_spread']:.4f}, p95 {rep['p95_spread']:.4f}, max {rep['max_spread']:.4f}"
    )
    if "by_class" in rep:
        print("by kernel class:")
        print_by_class(rep["by_class"])
    print("by problem:")
    print_by_class(result["by_problem"])
    cov = rep["interval_coverage"]
    if cov["later_repeats"]:
        print(
            f"the first run's 95% interval holds {cov['covered']} of {cov['later_repeats']} later runs' speedups "
            f"({cov['coverage']:.0%})"
        )
    if "estimators" in result:
        est = result["estimators"]
        print(f"point estimates of the same runs, {est['answers']} answers with per-block medians in every run:")
        print(f"  {'estimator':<20} {'median':>8} {'p95':>8} {'max':>8}")
        for name, row in est.items():
            if isinstance(row, dict) and "median_spread" in row:
                print(f"  {name:<20} {row['median_spread']:>8.4f} {row['p95_spread']:>8.4f} {row['max_spread']:>8.4f}")
                for cls, c in row.get("by_class", {}).items():
                    print(f"    {cls:<18} {c['median_spread']:>8.4f} {c['p95_spread']:>8.4f} {c['max_spread']:>8.4f}")
    for i, shares in enumerate(result.get("slow_blocks", [])):
        print(f"run {i + 1}: share of evaluations slow (> {SLOW_STEP}x the faster of blocks 0-1) by placement block")
        for side, row in shares.items():
            print(f"  {side:<7}" + " ".join(f"{b}:{x:.2f}" for b, x in enumerate(row)))
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
    ap.add_argument(
        "--estimators", action="store_true", help="also the spread of other point estimates of the same runs"
    )
    ap.add_argument(
        "--slow-blocks", action="store_true", help="also, per run, the share of slow evaluations by placement block"
    )
    args = ap.parse_args(argv)
    try:
        runs = [load_report(p) for p in args.reports]
        result = spread(runs)
        if args.estimators:
            result["estimators"] = estimator_spreads(runs)
        if args.slow_blocks:
            result["slow_blocks"] = [slow_block_shares(verdicts) for verdicts, _ in runs]
    except ReportError as e:
        print(f"bench_spread: {e}", file=sys.stderr)
        return 2
    print_spread(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
