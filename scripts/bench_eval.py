#!/usr/bin/env python
"""Evaluator throughput on the built-in problem set's reference solutions (or a run's samples, `--candidates`).

A cold pass (each problem's first evaluation; on GPU it also measures the baselines), then `--repeats` warm
passes with baselines known, the steady state RL sees: evaluations per minute, latency percentiles, wall time
per phase, and with `--repeats` >= 2 the repeatability of each kernel's speedup. Every pass evaluates fresh
copies, so neither the verdict cache nor the pool's deduplication answers without running them. `--backend ray`
measures the Ray pool (`--vs-fresh-process`, `--scale 1 2 4`). Every option: docs/evaluation.md.
A `--candidates` manifest's optional "class" field groups the repeatability by kernel class, keyed by
candidate (tests/repeatability/manifest.jsonl); its optional "expect" field (`correct`, `hack <category>`,
`incorrect`, ...) is checked against every pass's verdicts (tests/throughput/manifest.jsonl), so a faster
evaluator is also shown to say the same things.

  python scripts/bench_eval.py --device cpu --workers 2
  python scripts/bench_eval.py --device cuda --backend ray --workers 4 --vs-fresh-process --out bench.json
  python scripts/bench_eval.py --device cuda --backend ray --workers 4 --scale 1 2 4 --repeats 3"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gzip
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from envs import EvalSettings, Evaluator, ProblemError, load_problem_set, resolve_problem
from envs.cache import SqliteCache
from envs.pool.metrics import percentile
from envs.report import markdown_table, verdict_table
from envs.timing import ALLOCATING_NOTE, BLOCK_PARTS, EXPOSED_NOTE
from rewards import reward_for_verdict
from rl.gpu_monitor import GpuMonitor

GPU_PHASES = ("correctness", "timing")


class BaselineOnlyCache(SqliteCache):
    """Shares measured baselines but never answers with a stored verdict: every evaluation really runs."""

    def get_verdict(self, key: str) -> dict | None:
        return None

    def put_verdict(self, key: str, problem_id: str, verdict: dict) -> None:
        pass


def tagged(items, tag: str):
    """The same candidates as new sources (a module-level constant appended): no cache or dedup hit."""
    return [(problem, f"{answer}\n_KERNELRL_BENCH_PASS = {tag!r}\n") for problem, answer in items]


def warm_copies(items, repeats: int):
    return [c for r in range(repeats) for c in tagged(items, f"warm {r}")]


def warm_labels(labels: list[dict], repeats: int) -> list[dict]:
    """The label of each of warm_copies(items, repeats), in its order (candidate by candidate, repeat after repeat)."""
    return [label for _ in range(repeats) for label in labels]


def percentiles(xs: list[float]) -> dict[str, float]:
    s = sorted(xs)
    return {"p50_s": percentile(s, 0.5), "p90_s": percentile(s, 0.9), "p99_s": percentile(s, 0.99)}


def phase_summary(verdicts) -> dict[str, dict[str, float]]:
    phases: dict[str, list[float]] = {}
    for v in verdicts:
        for name, seconds in v.phase_seconds.items():
            phases.setdefault(name, []).append(seconds)
    return {
        name: {"mean_s": statistics.fmean(xs), "median_s": statistics.median(xs), "max_s": max(xs)}
        for name, xs in phases.items()
    }


def phase_memory(verdicts) -> dict[str, dict[str, float]]:
    """Per phase, the GPU memory a worker reserved at most in it, and (`<phase>.allocated`) the most its tensors
    held (GiB, median and max over the verdicts that report it; none on CPU): which phase, and which step of it
    (`<phase>.<step>`), makes a worker as large as it is. Allocated reaches reserved wherever the candidate
    was called, since the poison fills every free cached block by allocating it."""
    gib: dict[str, list[float]] = {}
    for v in verdicts:
        for name, value in v.phase_memory_gib.items():
            gib.setdefault(name, []).append(value)
    return {name: {"median_gib": statistics.median(xs), "max_gib": max(xs)} for name, xs in gib.items()}


def phases_by_status(verdicts) -> dict[str, dict]:
    """Per verdict status: how many, and the mean seconds of each phase (where failures spend their time)."""
    out: dict[str, dict] = {}
    for status in sorted({v.status.value for v in verdicts}):
        group = [v for v in verdicts if v.status.value == status]
        names = sorted({n for v in group for n in v.phase_seconds})
        out[status] = {
            "n": len(group),
            **{n: statistics.fmean(v.phase_seconds.get(n, 0.0) for v in group) for n in names},
        }
    return out


def _manifest_path(manifest: Path, spec: str) -> Path | None:
    """A manifest's file: beside the manifest first (as scripts/eval_kernel.py reads it), else from the
    working directory; None when neither exists."""
    for path in (manifest.parent / spec, Path(spec)):
        if path.is_file():
            return path
    return None


def load_candidates(path: Path, problems, wanted=None) -> tuple[list[tuple], list[dict]]:
    """(problem, answer) pairs from a run's samples.jsonl or samples.jsonl.gz (train split; docs/runs/ keeps runs'
    answers gzipped) or a {"problem", "solution"} manifest,
    and for each its label: {"key": the candidate (its index, and its file's stem or problem id), "class": the
    manifest's "class" or None}. A manifest's problem is a loaded problem's id or a problem file (loaded
    where `wanted(problem)` allows, default always); rows of other problems are skipped with a count."""
    by_id = {p.id: p for p in problems}
    items, labels, skipped = [], [], 0
    text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
    for line in text.splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        name = None
        if "completion" in row:
            if row.get("split", "train") != "train":
                continue
            pid, answer = row["problem_id"], row["completion"]
        else:
            pid, answer = row["problem"], row["solution"]
            solution = _manifest_path(path, answer)
            if solution is not None:
                answer, name = solution.read_text(), solution.stem
            problem_file = _manifest_path(path, pid) if pid not in by_id and pid.endswith(".py") else None
            if problem_file is not None:
                try:
                    problem = resolve_problem(str(problem_file))
                except ProblemError as e:
                    print(f"bench_eval: {e}")
                else:
                    if wanted is None or wanted(problem):
                        by_id[pid] = problem
        if pid in by_id:
            labels.append(
                {"key": f"{len(items)}:{name or by_id[pid].id}", "class": row.get("class"), "expect": row.get("expect")}
            )
            items.append((by_id[pid], answer))
        else:
            skipped += 1
    if skipped:
        print(f"bench_eval: skipped {skipped} candidate(s) of problems not in the loaded set")
    return items, labels


def unexpected(verdicts, labels: list[dict]) -> dict | None:
    """How many verdicts say what the manifest's "expect" does, and those that do not (None: nothing expected)."""
    checked = [(v, label) for v, label in zip(verdicts, labels) if label.get("expect")]
    if not checked:
        return None
    wrong = {
        label["key"]: f"{v.outcome} (expected {label['expect']})"
        for v, label in checked
        if v.outcome != label["expect"]
    }
    return {"checked": len(checked), "as_expected": len(checked) - len(wrong), "unexpected": wrong}


def print_expected(result: dict, labels: list[dict]) -> None:
    result["expected"] = check = unexpected(result["verdicts"], labels)
    if check:
        print(f"  verdicts as the manifest expects: {check['as_expected']} of {check['checked']}")
        for key, what in check["unexpected"].items():
            print(f"    {key}: {what}")


def summarize(verdicts, wall: float, devices: int = 1, workers: int | None = None) -> dict:
    gpu_s = statistics.fmean(sum(v.phase_seconds.get(p, 0.0) for p in GPU_PHASES) for v in verdicts)
    # Wall time one device spends per evaluation (the pool's steady-state cost of an evaluation),
    # against the time the evaluation's correctness and timing phases need on that device.
    per_eval = wall * devices / len(verdicts)
    return {
        "verdicts": verdicts,
        "wall_s": wall,
        "evals": len(verdicts),
        "devices": devices,
        "evals_per_min": 60 * len(verdicts) / wall,
        "phases": phase_summary(verdicts),
        "phase_memory": phase_memory(verdicts),
        "latency": percentiles([v.phase_seconds.get("total", 0.0) for v in verdicts]),
        "wall_per_eval_s": per_eval,
        "gpu_phases_s": gpu_s,
        "wall_over_gpu": per_eval / gpu_s if gpu_s else None,
        # share of each device's wall time inside exclusive timing windows: timing's physical limit is 1
        "exclusive_share": sum(v.exclusive_seconds for v in verdicts) / (wall * devices),
        "placement_blocks": statistics.fmean(blocks) if (blocks := placement_blocks_used(verdicts)) else None,
        "block_parts_ms": block_parts_ms(verdicts),
        "statuses": {s: sum(v.status.value == s for v in verdicts) for s in {v.status.value for v in verdicts}},
        "phases_by_status": phases_by_status(verdicts),
        # evaluations whose anchor runs still paid for driver allocations (0 once the warm-up is right)
        "anchor_allocating": sum(any(ALLOCATING_NOTE in n for n in v.notes) for v in verdicts),
        "host_exposed": sum(any(EXPOSED_NOTE in n for n in v.notes) for v in verdicts),
        # share of the workers' time spent evaluating: below 1 while answers waited (the queue's steps say why)
        "workers_busy": sum(map(worker_busy_seconds, verdicts)) / (wall * devices * workers) if workers else None,
    }


def placement_blocks_used(verdicts) -> list[int]:
    """Placement blocks behind each timed verdict's speedup (fewer than `placements` where sequential
    timing stopped early)."""
    return [v.speedup_interval.blocks for v in verdicts if v.speedup_interval is not None]


def block_parts_ms(verdicts) -> dict[str, float]:
    """Milliseconds a placement block of a candidate's timing spends on each of its parts (envs.timing
    BLOCK_PARTS), the mean over the pass's timed verdicts: what another block costs, and where."""
    timed = [v for v in verdicts if v.speedup_interval is not None and v.speedup_interval.blocks]
    if not timed:
        return {}
    return {
        part: 1e3
        * statistics.fmean(
            v.phase_seconds.get(f"timing.timed_runs.{part}", 0.0) / v.speedup_interval.blocks for v in timed
        )
        for part in BLOCK_PARTS
    }


# The evaluator's cumulative counters a pass reports the increase of: what cost the pass evaluations it had to
# run again, workers it had to start again, or concurrency it lost.
POOL_COUNTERS = ("pool/oom_retries", "pool/oom_failures", "pool/gpu_concurrency_cuts", "pool/worker_replacements")


def run_pass(
    evaluator, items, desc: str, devices: int = 1, workers: int | None = None, monitor: GpuMonitor | None = None
) -> dict:
    """One pass over `items`; with `monitor`, nvidia-smi's utilisation and memory of the device(s) during it
    (`result["gpu"]`): whether the GPU itself, not the evaluator's scheduling, is what the pass waits for."""
    before = evaluator.metrics()
    if monitor is not None:
        monitor.take()  # what it sampled before the pass
    start = time.monotonic()
    verdicts = evaluator.evaluate_many(items, progress=True, desc=desc)
    result = summarize(verdicts, time.monotonic() - start, devices, workers)
    if monitor is not None and (gpu := monitor.take()):
        result["gpu"] = gpu
    after = evaluator.metrics()
    result["pool_counters"] = {
        k.removeprefix("pool/"): after[k] - before.get(k, 0) for k in POOL_COUNTERS if k in after
    }
    return result


def worker_busy_seconds(v) -> float:
    """Seconds a worker spent on this evaluation: its wall less the driver's checks, the waits before a worker
    ran it (the Ray pool's own queue, `pool_queue`, included) and the backoffs between attempts (a failed
    attempt's time stays in: it held a worker)."""
    p = v.phase_seconds
    waits = ("static", "pool_queue", "queue", "oom_backoff")
    return max(0.0, p.get("total", 0.0) - sum(p.get(k, 0.0) for k in waits))


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
        verdicts.append(
            dataclasses.replace(verdict, phase_seconds={**verdict.phase_seconds, "total": time.monotonic() - t0})
        )
    return summarize(verdicts, time.monotonic() - start)


def agreement(a, b) -> str:
    same = sum(x.status is y.status and x.hack == y.hack for x, y in zip(a, b))
    return f"{same}/{len(b)}"


def _keys(verdicts, keys) -> list[str]:
    """The kernel each verdict measured: `keys` (one per verdict, e.g. a candidate's index) or its problem."""
    if keys is None:
        return [v.problem_id for v in verdicts]
    if len(keys) != len(verdicts):
        raise ValueError(f"{len(keys)} keys for {len(verdicts)} verdicts")
    return list(keys)


def kernel_times(verdicts, keys=None) -> dict[str, list[float]]:
    """Each kernel's measured kernel medians (ms), one per evaluation (kernels keyed as `_keys`)."""
    out: dict[str, list[float]] = {}
    for v, k in zip(verdicts, _keys(verdicts, keys)):
        if v.timings is not None and v.timings.kernel is not None:
            out.setdefault(k, []).append(v.timings.kernel.median_ms)
    return out


def timing_spread(verdicts, keys=None) -> dict[str, float]:
    """How much the same kernel's measured time varies between its evaluations (coefficient of variation
    per kernel, then the median and worst over kernels)."""
    cvs = [statistics.pstdev(xs) / statistics.fmean(xs) for xs in kernel_times(verdicts, keys).values() if len(xs) > 1]
    return {"median_cv": statistics.median(cvs), "max_cv": max(cvs)} if cvs else {}


def spread_stats(spreads: list[float]) -> dict[str, float]:
    s = sorted(spreads)
    return {
        "kernels": len(s),
        "median_spread": statistics.median(s),
        "p95_spread": percentile(s, 0.95),
        "max_spread": s[-1],
    }


def spread_by_class(per_kernel: dict[str, float], classes: dict[str, str | None]) -> dict[str, dict]:
    """The spread statistics of each kernel class (kernels without a class under "unclassified"), and
    "overall" over every kernel: whether the target holds on kernels other than those it was tuned on."""
    groups: dict[str, list[float]] = {}
    for k, spread in per_kernel.items():
        groups.setdefault(classes.get(k) or "unclassified", []).append(spread)
    out = {c: spread_stats(xs) for c, xs in sorted(groups.items())}
    if per_kernel:
        out["overall"] = spread_stats(list(per_kernel.values()))
    return out


def speedup_repeatability(verdicts, keys=None, classes: dict[str, str | None] | None = None) -> dict:
    """How far the same kernel's speedup moves between its evaluations: per kernel the relative range
    (max - min) / median over the repeats, then the median and p95 over kernels; and the median relative
    width of the verdicts' bootstrap 95% intervals. A kernel is `keys[i]` for verdicts[i] (a candidate), by
    default its problem; with `classes` (kernel -> class) also the spread per class ("by_class")."""
    keys = _keys(verdicts, keys)
    speedups: dict[str, list[float]] = {}
    widths: list[float] = []
    for v, k in zip(verdicts, keys):
        if v.speedup:
            speedups.setdefault(k, []).append(v.speedup)
            if v.speedup_interval is not None:
                widths.append((v.speedup_interval.high - v.speedup_interval.low) / v.speedup)
    per_kernel = {k: (max(xs) - min(xs)) / statistics.median(xs) for k, xs in speedups.items() if len(xs) > 1}
    spreads = sorted(per_kernel.values())
    if not spreads:
        return {}
    out = {
        **spread_stats(spreads),
        "median_interval_width": statistics.median(widths) if widths else None,
        # worst first: which kernels drift, to find the mechanism rather than average it away
        "per_kernel": dict(sorted(per_kernel.items(), key=lambda kv: -kv[1])),
        "interval_coverage": interval_coverage(verdicts, keys),
    }
    if classes:
        out["by_class"] = spread_by_class(per_kernel, classes)
    return out


def interval_coverage(verdicts, keys=None) -> dict:
    """Does one evaluation's interval hold what later evaluations of the same kernel measure? Per kernel
    the interval of its first repeat and how many of the speedups of repeats 2..k lie inside; then the
    share over all of them. An exact 95% interval of the expected speedup holds a later repeat's speedup
    less often (~83% with normal errors: that repeat has noise of its own); runs resampled as
    independent (blocks 1) held far fewer (docs/speedup-interval.md)."""
    first: dict = {}
    later: dict[str, list[float]] = {}
    for v, k in zip(verdicts, _keys(verdicts, keys)):
        if not v.speedup:
            continue
        if k in first:
            later[k].append(v.speedup)
        else:
            first[k], later[k] = v, []
    per_kernel = {}
    for k, v in first.items():
        if v.speedup_interval is None or not later[k]:
            continue
        low, high = v.speedup_interval.low, v.speedup_interval.high
        per_kernel[k] = {
            "interval": [low, high],
            "blocks": v.speedup_interval.blocks,
            "later": later[k],
            "covered": sum(low <= x <= high for x in later[k]),
        }
    repeats = sum(len(r["later"]) for r in per_kernel.values())
    covered = sum(r["covered"] for r in per_kernel.values())
    return {
        "kernels": len(per_kernel),
        "later_repeats": repeats,
        "covered": covered,
        "coverage": covered / repeats if repeats else None,
        # uncovered first: the kernels whose interval claims too much
        "per_kernel": dict(sorted(per_kernel.items(), key=lambda kv: kv[1]["covered"] - len(kv[1]["later"]))),
    }


def repeat_record(v, label: dict | None = None) -> dict:
    """What one warm evaluation measured, enough to see why a kernel's speedup moved between repeats;
    `label`: the candidate's {"key", "class"} (which kernel, of which class)."""
    t = v.timings
    med = lambda s: None if s is None else round(s.median_ms, 5)  # noqa: E731
    return {
        "problem_id": v.problem_id,
        "candidate": label and label["key"],
        "class": label and label["class"],
        "status": v.status.value,
        "speedup": v.speedup,
        "baseline": v.baseline,
        "interval": None if v.speedup_interval is None else [v.speedup_interval.low, v.speedup_interval.high],
        "interval_blocks": None if v.speedup_interval is None else v.speedup_interval.blocks,
        "kernel_ms": med(t and t.kernel),
        "kernel_cv": None if not (t and t.kernel) else round(t.kernel.std_ms / t.kernel.mean_ms, 4),
        "eager_ms": med(t and t.eager),
        "inductor_ms": med(t and t.inductor),
        "anchor_ms": med(t and t.anchor),
        # what an anchor read when the baselines were measured, and the anchor's drift from it (issue 32)
        "anchor_reference_ms": med(t and t.anchor_reference),
        "anchored": None if v.speedup_interval is None else v.speedup_interval.anchored,
        "drift": None if v.speedup_interval is None else v.speedup_interval.drift,
        # each placement block's median: whether a spread is blocks landing in two modes (bench_spread --estimators)
        "kernel_block_ms": None if v.speedup_interval is None else v.speedup_interval.kernel_block_ms,
        "anchor_block_ms": None if v.speedup_interval is None else v.speedup_interval.anchor_block_ms,
        "notes": v.notes[-3:],
    }


def time_shift(reference, other, keys=None) -> dict[str, float]:
    """Relative change of each kernel's median kernel time between two runs of the same candidates in the same
    order (median and worst)."""
    a, b = kernel_times(reference, keys), kernel_times(other, keys)
    shifts = [abs(statistics.median(b[k]) / statistics.median(a[k]) - 1) for k in a if k in b]
    return {"median_shift": statistics.median(shifts), "max_shift": max(shifts)} if shifts else {}


def print_summary(name: str, result: dict) -> None:
    lat = result["latency"]
    print(
        f"\n[{name}] {result['evals']} evaluations in {result['wall_s']:.1f} s = "
        f"{result['evals_per_min']:.1f} evaluations/min; latency p50 {lat['p50_s']:.2f} s, "
        f"p90 {lat['p90_s']:.2f} s, p99 {lat['p99_s']:.2f} s; statuses {result['statuses']}"
    )
    if result["anchor_allocating"]:
        print(f"  {result['anchor_allocating']} evaluation(s) whose anchor runs {ALLOCATING_NOTE}")
    if result.get("host_exposed"):
        print(f"  {result['host_exposed']} evaluation(s) with timed runs that {EXPOSED_NOTE}")
    if result["exclusive_share"]:
        blocks = result["placement_blocks"]
        print(
            f"  exclusive timing {100 * result['exclusive_share']:.1f}% of each device's wall time"
            + (f"; {blocks:.1f} placement blocks per timed kernel" if blocks is not None else "")
        )
    if result.get("block_parts_ms"):
        parts = ", ".join(f"{part} {ms:.1f}" for part, ms in result["block_parts_ms"].items())
        print(f"  a placement block's ms: {parts} (all inside the exclusive hold)")
    counters, busy = result.get("pool_counters"), result.get("workers_busy")
    if counters or busy is not None:
        print(
            "  "
            + ", ".join(f"{k.replace('_', ' ')} {n}" for k, n in (counters or {}).items())
            + (f"; workers busy {100 * busy:.0f}% of the pass" if busy is not None else "")
        )
    gpu = result.get("gpu")
    if gpu:
        each = [f"{k.rsplit('/', 1)[1]}: {v:.0f}%" for k, v in gpu.items() if k.startswith("gpu/util_mean/")]
        print(
            f"  GPU busy (nvidia-smi utilization, {gpu['gpu/samples'] / gpu['gpu/count']:.0f} samples): mean "
            f"{gpu['gpu/util_mean']:.0f}%"
            + (f" (by GPU {', '.join(each)})" if each else "")
            + f", max {gpu['gpu/util_max']:.0f}%; memory used at most "
            f"{gpu['gpu/mem_used_gib_max']:.1f} of {gpu['gpu/mem_total_gib']:.1f} GiB"
        )
    if result["wall_over_gpu"] is not None:
        print(
            f"  wall per evaluation and device {result['wall_per_eval_s']:.2f} s vs correctness+timing "
            f"{result['gpu_phases_s']:.2f} s: {result['wall_over_gpu']:.2f}x"
        )
    print(f"  {'phase':<12} {'mean s':>8} {'median s':>9} {'max s':>8}")
    for phase, s in result["phases"].items():
        print(f"  {phase:<12} {s['mean_s']:8.3f} {s['median_s']:9.3f} {s['max_s']:8.3f}")
    if result["phase_memory"]:
        print(
            "  GPU memory reserved per phase (`.allocated`: held by tensors), GiB (median / max): "
            + ", ".join(
                f"{phase} {m['median_gib']:.1f} / {m['max_gib']:.1f}" for phase, m in result["phase_memory"].items()
            )
        )
    by_status = result["phases_by_status"]
    names = sorted({n for row in by_status.values() for n in row if n != "n"})
    print("  mean s by status: " + " ".join(f"{n:>11}" for n in ["n", *names]))
    for status, row in by_status.items():
        print(f"  {status:<17} {row['n']:>11} " + " ".join(f"{row.get(n, 0.0):>11.3f}" for n in names))


def make_evaluator(args, settings: EvalSettings, cache: SqliteCache, actors: int | None = None):
    if args.backend == "local":
        return Evaluator(settings, cache=cache)
    from envs.pool import PoolConfig, RayEvaluationPool

    config = PoolConfig(num_actors=actors or args.actors, init_kwargs={"include_dashboard": False})
    return RayEvaluationPool(settings, config, cache=cache)


def prepare_baselines(evaluator, problems) -> dict:
    """Every loaded problem's baselines measured up front (what a training run does when it starts), timed."""
    started = time.monotonic()
    verdicts = [f.result() for f in evaluator.prepare_baselines(problems)]
    out = {
        "problems": len(verdicts),
        "wall_s": time.monotonic() - started,
        "failed": [f"{v.problem_id}: {v.error}" for v in verdicts if not v.correct],
    }
    print(f"\nbaselines of {out['problems']} problems up front in {out['wall_s']:.1f} s ({len(out['failed'])} failed)")
    return out


def print_by_class(by_class: dict[str, dict]) -> None:
    print(f"  {'class':<20} {'kernels':>7} {'median':>8} {'p95':>8} {'max':>8}")
    for name, row in by_class.items():
        print(
            f"  {name:<20} {row['kernels']:>7} {row['median_spread']:>8.4f} {row['p95_spread']:>8.4f} "
            f"{row['max_spread']:>8.4f}"
        )


def single(args, settings, problems, items, cache, labels: list[dict]) -> dict:
    """One evaluator: cold pass, warm passes, optionally the fresh-process harness on the same candidates."""
    t0 = time.monotonic()
    # nvidia-smi sampled during each pass; inactive where it is missing (no `gpu` in the results)
    with contextlib.closing(GpuMonitor(interval_ms=200)) as monitor, make_evaluator(args, settings, cache) as evaluator:
        device_kind = evaluator.device_kind  # waits for the first worker: startup is reported apart
        startup = time.monotonic() - t0
        devices = len(evaluator.actor_infos()) if hasattr(evaluator, "actor_infos") else 1
        # the loaded problems and those a manifest brought as files (tests/repeatability/problems/)
        wanted = list({p.id: p for p in [*problems, *(p for p, _ in items)]}.values())
        prepared = prepare_baselines(evaluator, wanted) if args.prepare_baselines else None
        cold = run_pass(evaluator, tagged(items, "cold"), "cold pass", devices, settings.workers, monitor)
        if not args.candidates:  # a table of one row per problem: the references' view
            print(verdict_table(problems, cold["verdicts"], reward_for_verdict))
        if args.markdown and not args.candidates:
            print("\n" + markdown_table(problems, cold["verdicts"]))
        print(f"\nstartup {startup:.1f} s; device {device_kind}; backend {args.backend}")
        print_summary("cold", cold)
        print_expected(cold, labels)
        warm_items = warm_copies(items, args.repeats)
        warm = run_pass(evaluator, warm_items, "warm pass", devices, settings.workers, monitor) if warm_items else None
        if warm:
            print_summary("warm", warm)
            repeated = warm_labels(labels, args.repeats)
            print_expected(warm, repeated)
            keys = [label["key"] for label in repeated]
            spread = timing_spread(warm["verdicts"], keys)
            if spread:
                print(
                    f"  kernel time spread between repeats: median CV {spread['median_cv']:.4f}, "
                    f"max {spread['max_cv']:.4f}"
                )
            classes = {label["key"]: label["class"] for label in labels}
            warm["speedup_repeatability"] = rep = speedup_repeatability(
                warm["verdicts"], keys, classes if any(classes.values()) else None
            )
            if rep:
                width = rep["median_interval_width"]
                print(
                    f"  speedup spread between repeats ({rep['kernels']} kernels, re-anchoring "
                    f"{'on' if settings.reanchor else 'off'}): median {rep['median_spread']:.4f}, "
                    f"p95 {rep['p95_spread']:.4f}, max {rep['max_spread']:.4f}; median 95% interval width "
                    f"{width if width is None else f'{width:.4f}'} (target: median <= 0.02, p95 <= 0.05)"
                )
                cov = rep["interval_coverage"]
                if "by_class" in rep:
                    print("  speedup spread between repeats by kernel class:")
                    print_by_class(rep["by_class"])
                if cov["later_repeats"]:
                    print(
                        f"  interval coverage: the first repeat's 95% interval holds {cov['covered']} of "
                        f"{cov['later_repeats']} later repeats' speedups ({cov['coverage']:.0%}, "
                        f"{cov['kernels']} kernels; ~83% is what an exact interval gives)"
                    )
        metrics = evaluator.metrics() if hasattr(evaluator, "metrics") else None
    fresh = None
    if args.vs_fresh_process and warm:
        picked = list(range(0, len(warm_items), args.fresh_every))
        fresh = fresh_process_pass(settings, [warm_items[i] for i in picked], cache)
        print_summary("fresh process per evaluation", fresh)
        fresh["agreement"] = agreement([warm["verdicts"][i] for i in picked], fresh["verdicts"])
        fresh["speedup"] = warm["evals_per_min"] / fresh["evals_per_min"]
        print(
            f"\n{args.backend} warm vs fresh process ({len(picked)} of the warm candidates): "
            f"{fresh['speedup']:.2f}x evaluations/min; verdicts agree {fresh['agreement']}"
        )
    return {
        "device": device_kind,
        "startup_s": startup,
        "prepare_baselines": prepared,
        "cold": cold,
        "warm": warm,
        "fresh_process": fresh,
        "metrics": metrics,
    }


def scaling(args, settings, problems, items, cache, labels: list[dict]) -> dict:
    """The Ray pool at each actor count in turn, same candidates; baselines measured once and shared."""
    import ray

    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    ray.init(include_dashboard=False)  # one Ray instance for every pool size
    runs: dict[int, dict] = {}
    cold = None
    monitor = GpuMonitor(interval_ms=200)  # inactive where nvidia-smi is missing: no `gpu` in the results
    try:
        for n in args.scale:
            with make_evaluator(args, settings, cache, actors=n) as pool:
                device_kind = pool.device_kind
                if cold is None:
                    cold = run_pass(pool, tagged(items, "cold"), f"cold pass, {n} actor(s)", n, monitor=monitor)
                    print(verdict_table(problems, cold["verdicts"], reward_for_verdict))
                    print_summary("cold", cold)
                # Unmeasured: starts every worker and loads every kernel once on this pool's devices.
                pool.evaluate_many(tagged(items, f"prime {n}"), progress=True, desc=f"prime, {n} actor(s)")
                run = run_pass(pool, warm_copies(items, args.repeats), f"warm, {n} actor(s)", n, monitor=monitor)
                run["metrics"] = pool.metrics()
            run["device"] = device_kind
            runs[n] = run
            print_summary(f"{n} actor(s)", run)
    finally:
        monitor.close()
        ray.shutdown()
    keys = [label["key"] for label in warm_labels(labels, args.repeats)]
    first = min(runs)  # efficiency and agreement are against the smallest pool
    base = runs[first]
    print(
        f"\n{'actors':>6} {'evals/min':>10} {'efficiency':>10} {'p50 s':>7} {'p90 s':>7} {'p99 s':>7} "
        f"{'agree':>8} {'median CV':>10} {'max CV':>8} {'time shift':>10} {'busy':>6}"
    )
    for n, run in runs.items():
        run["efficiency"] = run["evals_per_min"] / (base["evals_per_min"] * n / first)
        run["agreement"] = agreement(base["verdicts"], run["verdicts"])
        run["spread"] = timing_spread(run["verdicts"], keys)
        run["shift_vs_first"] = time_shift(base["verdicts"], run["verdicts"], keys)
        lat, sp = run["latency"], run["spread"]
        print(
            f"{n:>6} {run['evals_per_min']:>10.1f} {run['efficiency']:>10.2f} {lat['p50_s']:>7.2f} "
            f"{lat['p90_s']:>7.2f} {lat['p99_s']:>7.2f} {run['agreement']:>8} {sp.get('median_cv', 0):>10.4f} "
            f"{sp.get('max_cv', 0):>8.4f} {run['shift_vs_first'].get('median_shift', 0):>10.4f} "
            f"{run['metrics'].get('pool/gpu_busy_fraction', 0):>6.2f}"
        )
    return {"device": base["device"], "cold": cold, "scaling": {str(n): r for n, r in runs.items()}}


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
    ap.add_argument(
        "--sandbox",
        choices=["auto", "required", "off"],
        default="auto",
        help="run the workers inside the OS sandbox (bubblewrap); compare on and off",
    )
    ap.add_argument(
        "--vs-fresh-process",
        action="store_true",
        help="also run the warm candidates through a fresh-process-per-evaluation harness",
    )
    ap.add_argument("--fresh-every", type=int, default=1, help="fresh-process harness on every k-th warm candidate")
    ap.add_argument("--scale", type=int, nargs="+", help="Ray pool sizes (actors; one GPU each on cuda) to compare")
    ap.add_argument(
        "--reanchor",
        choices=["on", "off"],
        help="time eager PyTorch beside every kernel (default: "
        "the settings' default, on); compare speedup repeatability with --repeats 3 or more",
    )
    ap.add_argument(
        "--drift-test",
        choices=["on", "off"],
        help="let the anchor divide the speedup only where it shows drift from its cached reference "
        "(default: the settings' default, on); compare repeatability and evaluations/min with --repeats 3",
    )
    ap.add_argument(
        "--placements",
        type=int,
        help="input placement blocks per timing (default: the settings' "
        "default); the interval resamples them, compare its coverage with --repeats 3 or more",
    )
    ap.add_argument(
        "--timing-precision",
        type=float,
        help="sequential timing: stop the placement blocks once the speedup's interval is within ± this "
        "share (default: the settings' default; 0 times every block)",
    )
    ap.add_argument(
        "--min-placements",
        type=int,
        help="sequential timing: never stop before this many placement blocks (default: the settings' default); "
        "compare repeatability and interval coverage with --repeats 3",
    )
    ap.add_argument(
        "--launch-allowance-ms",
        type=float,
        help="host time per call left out of the timing: the start event queued behind a spin of up to this "
        "many ms (default: the settings' default, 0: launch overhead counted)",
    )
    ap.add_argument(
        "--warmup-ms",
        type=float,
        help="each callable's warm-up before a timing's first placement block, in ms of calls (default: the "
        "settings' default); the block's share of the exclusive hold, compare repeatability with --repeats 3",
    )
    ap.add_argument(
        "--fork-workers",
        choices=["auto", "on", "off"],
        help="replace workers by forking a pre-imported zygote (default: the settings' default, auto: on)",
    )
    ap.add_argument(
        "--fidelity",
        choices=["on", "off"],
        help="input families and the sensitivity probe (default: "
        "the settings' default, on); compare the correctness phase's seconds",
    )
    ap.add_argument(
        "--fp64-truth",
        choices=["on_mismatch", "always", "off"],
        help="when the float64 truth is computed (default: the settings' default, on_mismatch)",
    )
    ap.add_argument(
        "--candidates",
        type=Path,
        help="measure these candidates instead of the references: a run's "
        'samples.jsonl(.gz) (train split) or a JSONL manifest of {"problem", "solution"}',
    )
    ap.add_argument(
        "--prepare-baselines",
        action="store_true",
        help="measure every loaded problem's baselines up "
        "front, as a training run does, before the cold pass (timed apart)",
    )
    ap.add_argument("--limit", type=int, help="only the first N candidates")
    ap.add_argument("--markdown", action="store_true", help="also print the per-problem table as markdown")
    ap.add_argument("--out", type=Path, help="write results as JSON here")
    args = ap.parse_args()
    if args.scale and args.backend != "ray":
        ap.error("--scale measures the Ray pool: add --backend ray")
    if args.fresh_every < 1 or args.repeats < 0 or (args.scale and min(args.scale) < 1):
        ap.error("--fresh-every and --scale counts must be >= 1, --repeats >= 0")

    problems = [p for p in load_problem_set("builtin", args.levels) if not args.problems or p.id in args.problems]
    if not problems:
        ap.error("no problem matches --levels/--problems")
    if args.candidates:
        # a problem file of the manifest's (e.g. tests/repeatability/problems/) is in unless --levels or
        # --problems leave it out
        wanted = lambda p: not args.levels and (not args.problems or p.id in args.problems)  # noqa: E731
        items, labels = load_candidates(args.candidates, problems, wanted)
        items, labels = items[: args.limit], labels[: args.limit]
        if not items:
            ap.error(f"{args.candidates}: no candidate of a loaded problem")
    else:
        items = [(p, Path(p.reference_solution).read_text()) for p in problems][: args.limit]
        labels = [{"key": p.id, "class": None} for p, _ in items]
    fidelity = {} if args.fidelity in (None, "on") else {"input_families": (), "sensitivity_probe": False}
    if args.fp64_truth:
        fidelity["fp64_truth"] = args.fp64_truth
    if args.reanchor:
        fidelity["reanchor"] = args.reanchor == "on"
    if args.drift_test:
        fidelity["drift_test"] = args.drift_test == "on"
    if args.placements:
        fidelity["placements"] = args.placements
    if args.fork_workers:
        fidelity["fork_workers"] = args.fork_workers
    if args.timing_precision is not None:
        fidelity["timing_precision"] = args.timing_precision
    if args.min_placements is not None:
        fidelity["min_placements"] = args.min_placements
    if args.launch_allowance_ms is not None:
        fidelity["launch_allowance_ms"] = args.launch_allowance_ms
    if args.warmup_ms is not None:
        fidelity["warmup_ms"] = args.warmup_ms
    settings = EvalSettings(device=args.device, workers=args.workers, size=args.size, sandbox=args.sandbox, **fidelity)
    with tempfile.TemporaryDirectory() as tmp:
        cache = BaselineOnlyCache(Path(tmp) / "baselines.sqlite")
        try:
            result = (scaling if args.scale else single)(args, settings, problems, items, cache, labels)
        finally:
            cache.close()
    if args.out:

        def strip(r):
            if not isinstance(r, dict):
                return r
            return {k: strip(v) for k, v in r.items() if k != "verdicts"}

        report = {
            "backend": args.backend,
            "workers": args.workers,
            "repeats": args.repeats,
            **strip(result),
            "candidates": str(args.candidates) if args.candidates else "references",
            "problems": [v.to_dict() for v in result["cold"]["verdicts"]],
            "labels": labels,  # per candidate, in the order of `problems`: its key and class (scripts/bench_spread.py)
        }
        if isinstance(result.get("warm"), dict) and result["warm"].get("verdicts"):
            report["warm_repeats"] = [
                repeat_record(v, label)
                for v, label in zip(result["warm"]["verdicts"], warm_labels(labels, args.repeats))
            ]
        args.out.write_text(json.dumps(report, indent=1, default=str))


if __name__ == "__main__":
    main()
