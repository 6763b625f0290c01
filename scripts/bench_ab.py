#!/usr/bin/env python
"""Two (or more) versions of the evaluator timed against each other on the same machine, in the same call:
`scripts/bench_eval.py` from each tree in turn, round after round, each run with fresh Triton and Inductor
caches, then one summary line per run and `scripts/bench_spread.py` over each tree's runs.

A tree is a directory holding `envs/`, `rewards/`, `rl/` and `scripts/` of one version: `.` for this checkout,
or a commit extracted here with `--extract` (the device machine has no git history; carry the directory):

    python scripts/bench_ab.py --extract 1ce97ad --into .before/1ce97ad
    python scripts/bench_ab.py --tree before=.before/1ce97ad --tree after=. --rounds 2 --out-dir ab -- \\
        --device cuda --workers 4 --candidates tests/repeatability/manifest.jsonl --repeats 3

Everything after `--` goes to bench_eval as it is, with `--out` added; paths in it are read from this
checkout's root (bench_eval runs from here, importing the tree's code). `--args NAME=ARGS` adds bench_eval
arguments for one tree only, so two settings of one version compare the same way (`--tree off=. --tree
queued=. --args "queued=--launch-allowance-ms 0.5"`). Runs that do not fit one call's time limit continue in
a later one with `--first-round 2` and the same `--out-dir`."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CODE = ("envs", "rewards", "rl", "scripts", "conf", "pyproject.toml")


def extract(commit: str, into: Path) -> None:
    """`commit`'s code (CODE, without the shipped warm-start adapter) written under `into`."""
    into.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile() as archive:
        subprocess.run(["git", "archive", commit, *CODE], cwd=ROOT, stdout=archive, check=True)
        archive.seek(0)
        with tarfile.open(fileobj=archive) as tar:
            members = [m for m in tar.getmembers() if not m.name.startswith("rl/warmstart/adapter")]
            tar.extractall(into, members=members, filter="data")


def parse_tree(text: str) -> tuple[str, Path]:
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"a tree is NAME=PATH, not {text!r}")
    tree = Path(path).resolve()
    if not (tree / "scripts" / "bench_eval.py").is_file() or not (tree / "envs").is_dir():
        raise argparse.ArgumentTypeError(f"{path} holds no scripts/bench_eval.py and envs/ (see --extract)")
    return name, tree


def run_once(tree: Path, bench_args: list[str], out: Path, caches: Path) -> int:
    """bench_eval of `tree` from this checkout's root, its output to `out` (.log beside the report)."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tree), *filter(None, [os.environ.get("PYTHONPATH")])]),
        "TRITON_CACHE_DIR": str(caches / "triton"),
        "TORCHINDUCTOR_CACHE_DIR": str(caches / "inductor"),
    }
    command = [sys.executable, str(tree / "scripts" / "bench_eval.py"), *bench_args, "--out", str(out)]
    with open(out.with_suffix(".log"), "w") as log:
        return subprocess.run(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT).returncode


def summary(result: dict) -> str:
    """One line: the warm pass's (else the cold pass's) throughput, repeatability, placement blocks and the
    moves' release settling (`release_wait` in trees that slept it, `quiet` in those before)."""
    passed = result.get("warm") or result.get("cold") or {}
    parts = []
    if passed.get("evals_per_min") is not None:
        parts.append(f"{passed['evals_per_min']:.1f} evaluations/min")
    spread = passed.get("speedup_repeatability") or {}
    if spread.get("p95_spread") is not None:
        parts.append(f"speedups p50 {100 * spread['median_spread']:.2f}% / p95 {100 * spread['p95_spread']:.2f}% apart")
    if passed.get("placement_blocks") is not None:
        parts.append(f"{passed['placement_blocks']:.1f} placement blocks")
    for step in ("timing.timed_runs", "timing.release_settle", "timing.release_wait", "timing.quiet"):
        if step in (passed.get("phases") or {}):
            parts.append(f"{step} {passed['phases'][step]['mean_s']:.3f} s")
    return "; ".join(parts) or "no pass in the report"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    bench_args = argv[argv.index("--") + 1 :] if "--" in argv else []
    own = argv[: argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--extract", metavar="COMMIT", help="write COMMIT's code under --into, then stop")
    ap.add_argument("--into", type=Path, help="with --extract: the directory")
    ap.add_argument("--tree", type=parse_tree, action="append", default=[], help="NAME=PATH (two or more)")
    ap.add_argument(
        "--args",
        action="append",
        default=[],
        metavar="NAME=ARGS",
        help="more bench_eval arguments for the tree NAME only (after the common ones)",
    )
    ap.add_argument("--rounds", type=int, default=1, help="runs of each tree, interleaved")
    ap.add_argument(
        "--first-round",
        type=int,
        default=1,
        help="the first round's number: a later call continues in the same --out-dir without overwriting",
    )
    ap.add_argument("--out-dir", type=Path, default=Path("ab"), help="reports, logs and caches")
    args = ap.parse_args(own)
    if args.extract:
        if args.into is None:
            ap.error("--extract needs --into")
        extract(args.extract, args.into)
        print(f"{args.extract} extracted into {args.into}")
        return 0
    names = [name for name, _ in args.tree]
    if len(args.tree) < 2 or len(set(names)) != len(names):
        ap.error("name two or more trees, each once: --tree before=PATH --tree after=.")
    if args.rounds < 1 or args.first_round < 1:
        ap.error("--rounds and --first-round must be >= 1")
    own_args: dict[str, list[str]] = {name: [] for name in names}
    for text in args.args:
        name, sep, extra = text.partition("=")
        if not sep or name not in own_args:
            ap.error(f"--args is NAME=ARGS for a tree named by --tree ({', '.join(names)}), not {text!r}")
        own_args[name] += shlex.split(extra)
    if any("--out" in a for a in [bench_args, *own_args.values()]):
        ap.error("bench_eval's --out is set per run (in --out-dir); leave it out of its arguments")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    rates: dict[str, list[float]] = {name: [] for name in names}
    failed = 0
    for r in range(args.first_round, args.first_round + args.rounds):
        for name, tree in args.tree:
            out = (args.out_dir / f"{name}-{r}.json").resolve()
            caches = args.out_dir.resolve() / "caches" / f"{name}-{r}"
            rc = run_once(tree, [*bench_args, *own_args[name]], out, caches)
            if rc or not out.is_file():
                failed += 1
                print(f"{name} round {r}: bench_eval exited {rc}; its log: {out.with_suffix('.log')}", flush=True)
                continue
            result = json.loads(out.read_text())
            rate = (result.get("warm") or result.get("cold") or {}).get("evals_per_min")
            if rate is not None:
                rates[name].append(rate)
            print(f"{name} round {r}: {summary(result)}", flush=True)
    for name in names:
        # this call's runs and any an earlier call left in the same --out-dir
        paths = sorted(p for p in args.out_dir.resolve().glob(f"{name}-*.json") if p.stem[len(name) + 1 :].isdigit())
        if len(paths) >= 2:
            done = subprocess.run(
                [sys.executable, str(ROOT / "scripts" / "bench_spread.py"), *map(str, paths)],
                cwd=ROOT,
                capture_output=True,
                text=True,
            )
            lines = (done.stdout or done.stderr).splitlines()
            print(f"{name}, across its {len(paths)} runs: " + " | ".join(lines[:2]))
    if any(rates.values()):
        print("median evaluations/min: " + ", ".join(f"{n} {statistics.median(x):.1f}" for n, x in rates.items() if x))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
