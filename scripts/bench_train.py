#!/usr/bin/env python
"""Run the default training job (or any overrides) and report what the issue's targets ask about.

  python scripts/bench_train.py                          # the default run: conf/experiment/local_cpu.yaml
  python scripts/bench_train.py --out docs/bench_train_cpu.json -- loop.steps=4   # overrides after --
  python scripts/bench_train.py --from-run outputs/2026-12-01/08-00-00           # report an existing run

Reports: wall time of the whole job (process start to exit, model conversion and engine start included)
and of the loop; per step the time the loop waited for rewards after the last sample left the engine,
as a share of the step (target <= 10%); adapter/weight sync seconds per step; learner tokens/s; rollout
tokens/s; training reward over the first and last steps (also per problem, averaged over the problems drawn at
both ends, since a sampler that favours some problems changes the mix between them) and each problem's correct
rate per step; validation
(with its 95% interval, and per problem) at step 0 and at the end; GPU utilisation
and memory per step where nvidia-smi ran; and the run's accounting (a soak's evidence): every generated sample
has a row with a verdict in samples.jsonl, the statuses, the crashers kept, the deaths survived.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from rl.tracking import read_metrics

ROOT = Path(__file__).resolve().parents[1]


def _values(rows: list[dict], key: str) -> list[float]:
    return [float(r[key]) for r in rows if isinstance(r.get(key), (int, float))]


def _stats(xs: list[float]) -> dict[str, float] | None:
    if not xs:
        return None
    return {"mean": statistics.fmean(xs), "median": statistics.median(xs), "min": min(xs), "max": max(xs)}


def read_samples(run_dir: Path) -> list[dict] | None:
    """samples.jsonl's rows, read once for every part of the report that needs them; None without the file."""
    path = run_dir / "samples.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else None


def accounting(run_dir: Path, rows: list[dict], samples: list[dict] | None) -> dict:
    """Samples the loop says it generated (`<split>/samples` per logged step) against samples.jsonl's rows,
    rows without a status, statuses, crashers kept and the failures the run outlived."""
    written: collections.Counter = collections.Counter()
    statuses: collections.Counter = collections.Counter()
    missing_status = 0
    for sample in samples or []:
        written[(sample.get("split"), sample.get("step"))] += 1
        statuses[sample.get("status") or ""] += 1
        missing_status += not sample.get("status")
    generated = {
        (split, r["step"]): int(r[f"{split}/samples"])
        for r in rows
        for split in ("train", "val")
        if isinstance(r.get(f"{split}/samples"), (int, float))
    }
    short = {
        f"{split}@{step}": [n, written.get((split, step), 0)]
        for (split, step), n in sorted(generated.items())
        if written.get((split, step), 0) != n
    }
    last = rows[-1] if rows else {}
    crashers = run_dir / "crashers"
    summary = json.loads((run_dir / "summary.json").read_text()) if (run_dir / "summary.json").exists() else {}
    return {
        "samples_generated": sum(generated.values()),
        "samples_written": sum(written.values()),
        "steps_with_missing_rows": short,
        "rows_without_status": missing_status,
        "statuses": dict(statuses.most_common()),
        "crashers_kept": len(list(crashers.iterdir())) if crashers.is_dir() else 0,
        "deaths_survived": {
            k.removeprefix("pool/"): last.get(k)
            for k in ("pool/actor_failures", "pool/actor_restarts", "pool/retries", "pool/crashes_after_retry")
            if k in last
        }
        | {"engine_restarts": summary.get("engine_restarts")},
        # the GPU full of other processes: evaluations retried, and how often the pool ran fewer at once
        "out_of_memory": {
            k.removeprefix("pool/"): last.get(k) for k in ("pool/oom_retries", "pool/gpu_concurrency_cuts") if k in last
        },
    }


def same_problem_rewards(samples: list[dict] | None, k: int) -> dict | None:
    """Training reward in the first and the last `k` steps, each problem's mean first, then the mean over the
    problems drawn in both windows: the same mix at both ends, whatever the sampler drew more often."""
    rewards: dict[int, dict[str, list[float]]] = collections.defaultdict(lambda: collections.defaultdict(list))
    for sample in samples or []:
        if sample.get("split") == "train" and isinstance(sample.get("reward"), (int, float)):
            rewards[sample["step"]][sample["problem_id"]].append(float(sample["reward"]))
    steps = sorted(rewards)
    if len(steps) < 2:
        return None
    k = min(k, len(steps) // 2)

    def window(chosen: list[int]) -> dict[str, float]:
        per: dict[str, list[float]] = collections.defaultdict(list)
        for step in chosen:
            for problem, values in rewards[step].items():
                per[problem] += values
        return {problem: statistics.fmean(values) for problem, values in per.items()}

    first, last = window(steps[:k]), window(steps[-k:])
    common = sorted(set(first) & set(last))
    if not common:
        return {"steps": k, "problems": 0}
    a, b = statistics.fmean(first[p] for p in common), statistics.fmean(last[p] for p in common)
    return {"steps": k, "problems": len(common), "first": a, "last": b, "ratio": b / a if a > 0 else None}


def report(run_dir: Path, job_wall_s: float | None, k: int) -> dict:
    rows = read_metrics(run_dir / "metrics.jsonl")
    samples = read_samples(run_dir)
    train = [r for r in rows if "train/reward_mean" in r]
    val = [r for r in rows if "val/reward_mean" in r]
    wait_share = [
        r["time/wait_for_rewards"] / r["time/step"]
        for r in train
        if isinstance(r.get("time/wait_for_rewards"), (int, float)) and r.get("time/step")
    ]
    summary_path = run_dir / "summary.json"
    out: dict = {
        "run_dir": str(run_dir),
        "job_wall_s": job_wall_s,
        "loop_wall_s": json.loads(summary_path.read_text()).get("wall_s") if summary_path.exists() else None,
        "steps": len(train),
        "step_s": _stats(_values(train, "time/step")),
        "generate_s": _stats(_values(train, "time/generate")),
        "generate_gate_wait_s": _stats(_values(train, "time/generate_gate_wait")),  # paused for timing windows
        "train_s": _stats(_values(train, "time/train")),
        "wait_for_rewards_s": _stats(_values(train, "time/wait_for_rewards")),
        "wait_for_rewards_share_of_step": _stats(wait_share),
        # the step's evaluations' seconds under the GPU's exclusive lock: one GPU runs them one at a time
        "eval_exclusive_s_per_step": _stats(_values(train, "train/eval_s/exclusive")),
        # the most GPU memory one evaluation worker reserved in each phase, over the run's steps
        "eval_gib_max": {
            key.rsplit("/", 1)[1]: max(_values(train, key))
            for key in sorted({k for r in train for k in r if k.startswith("train/eval_gib/")})
        },
        "sync_s_per_step": _stats(_values(train, "time/sync")),
        "learner_tokens_per_s": _stats(_values(train, "perf/learner_tokens_per_s")),
        "rollout_tokens_per_s": _stats(_values(train, "perf/rollout_tokens_per_s")),
        "step_s_steps3_20": _stats(_values([r for r in train if 3 <= r["step"] <= 20], "time/step")),
        # the engine compiling its first shapes while the pool measured baselines (hf engine, compiled decoding)
        "engine_warm_up_s": next((r["time/engine_warm_up"] for r in rows if "time/engine_warm_up" in r), None),
        "validate_s": _stats(_values(val, "time/validate")),
        "validate_generate_s": _stats(_values(val, "time/validate_generate")),
        "validate_wait_for_rewards_s": _stats(_values(val, "time/validate_wait_for_rewards")),
        "gpu_util_mean": _stats(_values(train, "gpu/util_mean")),
        "gpu_mem_used_gib_max": _stats(_values(train, "gpu/mem_used_gib_max")),
        "learner_max_memory_allocated_gb": _stats(_values(train, "train/max_memory_allocated_gb")),  # CUDA only
        "step_tokens_per_s": _stats(_values(train, "perf/step_tokens_per_s")),
        "accounting": accounting(run_dir, rows, samples),
    }
    for key in ("train/reward_mean", "train/kernel_reward_mean", "train/correct_rate"):
        xs = _values(train, key)
        if xs:
            out[f"{key}_first{k}"] = statistics.fmean(xs[:k])
            out[f"{key}_last{k}"] = statistics.fmean(xs[-k:])
            out[f"{key}_per_step"] = xs
    out["train/reward_same_problems"] = same_problem_rewards(samples, k)
    for key in ("val/reward_mean", "val/correct_rate", "val/correct_rate_low", "val/correct_rate_high", "val/samples"):
        out[key] = {r["step"]: r.get(key) for r in val}
    for split, split_rows in (("train", train), ("val", val)):  # each problem's correct rate per step
        ids = sorted(
            {
                k.split("/")[2]
                for r in split_rows
                for k in r
                if k.startswith(f"{split}/problem/") and k.endswith("/correct_rate")
            }
        )
        if ids:
            out[f"{split}/problem_correct_rate"] = {
                i: {r["step"]: r.get(f"{split}/problem/{i}/correct_rate") for r in split_rows} for i in ids
            }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run-dir", type=Path, default=None, help="where the run writes (default: a new dir)")
    parser.add_argument("--from-run", type=Path, default=None, help="report an existing run instead of running")
    parser.add_argument("--out", type=Path, default=None, help="also write the report as JSON here")
    parser.add_argument("--first-last", type=int, default=3, help="steps averaged at each end")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides for scripts/train.py (after --)")
    args = parser.parse_args()
    if args.from_run:
        run_dir, wall = args.from_run, None
    else:
        run_dir = args.run_dir or ROOT / "outputs" / "bench_train" / time.strftime("%Y-%m-%d_%H-%M-%S")
        env = {**os.environ, "WANDB_MODE": os.environ.get("WANDB_MODE", "offline")}
        t0 = time.perf_counter()
        result = subprocess.run(
            [sys.executable, str(ROOT / "scripts" / "train.py"), *args.overrides, f"hydra.run.dir={run_dir}"],
            cwd=ROOT,
            env=env,
        )
        wall = time.perf_counter() - t0
        if result.returncode != 0:
            print(f"bench_train: the run failed with exit code {result.returncode} ({run_dir})", file=sys.stderr)
            return result.returncode
    if not (run_dir / "metrics.jsonl").is_file():
        print(f"bench_train: {run_dir}/metrics.jsonl: no such file", file=sys.stderr)
        return 2
    out = report(run_dir, wall, args.first_last)
    text = json.dumps(out, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
