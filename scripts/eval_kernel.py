#!/usr/bin/env python
"""Score candidate kernels against problems; prints one JSON verdict per evaluation on stdout.

  python scripts/eval_kernel.py --problem P.py --solution S.py [--device cpu|cuda] [--baseline inductor|eager]
  python scripts/eval_kernel.py --manifest pairs.jsonl     # lines {"problem": ..., "solution": ...}

--problem takes a problem file or a built-in problem id (e.g. L2_01_softmax). A solution file may
be bare Python or a model's markdown answer (its first fenced python block is used). Relative paths
in a manifest are relative to the manifest. On a CPU (size small), a problem without SMALL_SIZES whose
inputs are large (KernelBench) runs at sizes derived as the benchmark derives them (envs/small_sizes.py,
cached). Usage errors (a missing or unreadable file, a file that is
not a problem, a malformed manifest line, unknown options) exit with code 2 before anything is evaluated
or cached. What a solution file holds is never a usage error: it is what is judged, so a syntax error or
a missing ModelNew gets its verdict (compile_error, reward 0) like any other candidate.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

from envs import EvalSettings, Evaluator, ProblemError, resolve_problem
from envs.cache import CacheError, SqliteCache
from envs.evaluator import EvaluatorError
from envs.small_sizes import size_large_problems
from envs.worker.worker_set import resolve_device
from rewards import DEFAULT_DELTA, reward_for_verdict
from rewards.kernel_reward import check_delta

DEFAULT_CACHE = Path(os.environ.get("KERNELRL_CACHE", Path.home() / ".cache" / "kernelrl" / "verdicts.sqlite"))


class BadInput(Exception):
    pass


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    src = ap.add_argument_group("what to evaluate (a pair or a manifest)")
    src.add_argument("--problem", help="problem file or built-in problem id")
    src.add_argument("--solution", help="solution file (Python, or markdown with a fenced python block)")
    src.add_argument("--manifest", help='JSONL file of {"problem": ..., "solution": ...} lines')
    ap.add_argument("--device", choices=["cpu", "cuda", "auto"], default="auto")
    ap.add_argument("--baseline", choices=["inductor", "eager"], default="inductor")
    ap.add_argument("--delta", type=float, default=DEFAULT_DELTA, help="reward shift (Makora: 1.8)")
    ap.add_argument("--size", choices=["full", "small"], help="problem size (default: full on cuda, small on cpu)")
    ap.add_argument("--trials", type=int, default=5, help="correctness input sets")
    ap.add_argument("--runs", type=int, default=100, help="timed runs on GPU")
    ap.add_argument("--seed", type=int, help="fixed seeds (default: fresh unpredictable seeds)")
    ap.add_argument("--workers", type=int, default=1, help="worker processes (per GPU)")
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help=f"SQLite cache (default {DEFAULT_CACHE})")
    ap.add_argument("--no-cache", action="store_true")
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)
    if args.manifest and (args.problem or args.solution):
        ap.error("give either --manifest or --problem/--solution, not both")
    if not args.manifest and not (args.problem and args.solution):
        ap.error("give --problem and --solution, or --manifest")
    return args


def _read_input(path: Path, what: str, decode_errors: str = "strict") -> str:
    """The text of an input file (`what`: what it is, for the error when there is none)."""
    try:
        return path.read_bytes().decode("utf-8", errors=decode_errors)
    except FileNotFoundError:
        raise BadInput(f"{path}: no such {what}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise BadInput(f"{path}: cannot read ({e})") from None


def _load_solution(path: Path) -> str:
    """The file's text, judged as it is: the evaluator's CPU stage turns unusable code into compile_error.
    Bytes that are not UTF-8 are content too (a model's answer saved with a stray byte, or no text at all),
    so they are replaced, not refused: one such file must not stop a manifest of valid ones."""
    return _read_input(path, "solution file", decode_errors="replace")


def _pair(problem_spec: str, solution_path: Path) -> tuple:
    try:
        problem = resolve_problem(problem_spec)
    except ProblemError as e:
        raise BadInput(str(e)) from None
    return problem, _load_solution(solution_path)


def _manifest_problem(manifest: Path, spec: str) -> str:
    """A manifest's problem: a path relative to the manifest, or a built-in id where no such file exists
    (an id is a bare name; anything with a directory or a .py suffix stays a path, so a missing file is
    reported where the manifest points, never looked up relative to the working directory)."""
    beside = manifest.parent / spec
    if beside.exists() or Path(spec).is_absolute() or spec.endswith(".py") or Path(spec).name != spec:
        return str(beside)
    return spec


def load_manifest(path: Path) -> list[tuple]:
    lines = _read_input(path, "manifest").splitlines()
    pairs = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as e:
            raise BadInput(f"{where}: not valid JSON ({e.msg})") from None
        if not isinstance(entry, dict) or not all(isinstance(entry.get(k), str) for k in ("problem", "solution")):
            raise BadInput(f'{where}: each line must be an object with string fields "problem" and "solution"')
        try:
            pairs.append(_pair(_manifest_problem(path, entry["problem"]), path.parent / entry["solution"]))
        except BadInput as e:
            raise BadInput(f"{where}: {e}") from None
    if not pairs:
        raise BadInput(f"{path}: the manifest holds no pairs")
    return pairs


def with_small_sizes(pairs: list[tuple], workers: int, cache) -> list[tuple]:
    """`pairs` with derived small sizes where needs_small_sizes (KernelBench files), as the benchmark and the
    agent derive them (envs/small_sizes.py, cached): at its full size such a problem exhausts the CPU worker's
    memory or deadline under the Triton interpreter. A problem no small size fits is a BadInput."""
    sized, _, failed = size_large_problems(
        [p for p, _ in pairs],
        cache=cache,
        workers=workers,
        announce=lambda n: print(
            f"sizing {n} problem(s) without SMALL_SIZES for the CPU (derived once, then cached)",
            file=sys.stderr,
            flush=True,
        ),
    )
    if failed:
        problem_id, reason = next(iter(failed.items()))
        raise BadInput(f"{reason}; --size full evaluates {problem_id} at its full size")
    return [(sized.get(p.sha256, p), answer) for p, answer in pairs]


def verdict_json(verdict, reward: float) -> str:
    d = {**verdict.to_dict(), "reward": reward}
    ordered = {k: d[k] for k in ("status", "correct", "hack", "speedup", "reward", "timings", "error", "cached")}
    ordered.update({k: v for k, v in d.items() if k not in ordered})
    return json.dumps(ordered)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        pairs = load_manifest(Path(args.manifest)) if args.manifest else [_pair(args.problem, Path(args.solution))]
        check_delta(args.delta)  # argparse's float takes "nan" and "inf"
        settings = EvalSettings(
            device=args.device,
            size=args.size,
            baseline=args.baseline,
            correctness_trials=args.trials,
            timed_runs=args.runs,
            seed=args.seed,
            workers=args.workers,
        )
    except (BadInput, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        cache = None if args.no_cache else SqliteCache(args.cache)
        if settings.resolved_size(resolve_device(settings.device)) == "small":
            pairs = with_small_sizes(pairs, settings.workers, cache)
    except (BadInput, CacheError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        with Evaluator(settings, cache=cache) as evaluator:
            progress = bool(args.manifest) and not args.no_progress
            for verdict in evaluator.iter_evaluate(pairs, progress=progress):
                print(verdict_json(verdict, reward_for_verdict(verdict, args.delta)), flush=True)
    except EvaluatorError as e:
        print(f"error: the evaluator failed: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
