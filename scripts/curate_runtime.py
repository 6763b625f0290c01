#!/usr/bin/env python
"""The curation pipeline's runtime stage on its own, for a curated set made on a CPU: time every problem's (or a
seeded sample's) eager PyTorch and TorchInductor baselines on the GPU through the evaluation workers, and keep
those whose eager median lies in [min-ms, max-ms] (envs.data.runtime). Needs no Ray, Hydra, scikit-learn or
datasketch (the GPU image has none of them).

  python scripts/curate_runtime.py data/curated --sample 64 --workers 4 --out runtime/
Writes OUT/runtime.jsonl (one line per problem: id, kind, level, eager_ms, inductor_ms, decision, reason) and
OUT/summary.json (counts kept / too fast / too slow / failed, quantiles of the eager times, per source kind).
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import time
from pathlib import Path

from envs.data.problem_set import read_manifest
from envs.data.records import CandidateProblem, Origin
from envs.data.runtime import RuntimeConfig, filter_runtime
from envs.settings import EvalSettings
from envs.worker.worker_set import WorkerSet


def _quantiles(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    v = sorted(values)
    return {
        q: round(v[min(len(v) - 1, int(f * len(v)))], 4)
        for q, f in (("min", 0), ("p10", 0.1), ("p50", 0.5), ("p90", 0.9), ("max", 1.0))
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("curated", help="a curated set directory (with manifest.jsonl)")
    ap.add_argument("--sample", type=int, default=None, help="a seeded random sample of this many problems")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2, help="worker processes on the GPU (timing is exclusive)")
    ap.add_argument("--min-ms", type=float, default=1.0)
    ap.add_argument("--max-ms", type=float, default=1000.0)
    ap.add_argument("--out", default="curate_runtime")
    args = ap.parse_args()
    directory = Path(args.curated)
    manifest = read_manifest(directory)
    ids = sorted(manifest)
    if args.sample is not None and args.sample < len(ids):
        ids = sorted(random.Random(args.seed).sample(ids, args.sample))
    candidates = [
        CandidateProblem(
            pid,
            (directory / manifest[pid]["file"]).read_text(),
            Origin(manifest[pid].get("kind") or "crawl", manifest[pid].get("source") or ""),
            level=manifest[pid].get("level"),
        )
        for pid in ids
    ]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    pool = WorkerSet(EvalSettings(device="cuda", workers=args.workers))
    try:
        result = filter_runtime(candidates, pool, RuntimeConfig(args.min_ms, args.max_ms))
    finally:
        pool.close()
    seconds = time.monotonic() - started
    kept = {c.id: c for c in result.kept}
    decisions = {d.problem: d for d in result.decisions}
    by_kind: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    eager_times: dict[str, list[float]] = collections.defaultdict(list)
    with open(out / "runtime.jsonl", "w") as f:
        for c in candidates:
            d = decisions[c.id]
            base = (kept[c.id].facts.get("baselines") if c.id in kept else None) or {}
            eager = base.get("eager_ms") if base else (d.score if d.score is not None else None)
            outcome = (
                "kept"
                if c.id in kept
                else ("too_fast" if "<" in d.reason else "too_slow" if ">" in d.reason else "failed")
            )
            by_kind[c.origin.kind][outcome] += 1
            if eager is not None:
                eager_times[c.origin.kind].append(float(eager))
            f.write(
                json.dumps(
                    {
                        "id": c.id,
                        "kind": c.origin.kind,
                        "level": c.level,
                        "eager_ms": eager,
                        "inductor_ms": base.get("inductor_ms"),
                        "decision": outcome,
                        "reason": d.reason,
                    }
                )
                + "\n"
            )
    summary = {
        "problems": len(candidates),
        "kept": len(kept),
        "seconds": round(seconds, 1),
        "device": pool.device_kind,
        "bounds_ms": [args.min_ms, args.max_ms],
        "by_kind": {k: dict(v) for k, v in by_kind.items()},
        "eager_ms": {k: _quantiles(v) for k, v in eager_times.items()},
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
