#!/usr/bin/env python
"""Where one evaluation's device time goes: a built-in problem's reference solution evaluated in this process
under torch.profiler, its kernels (CUDA) or ops (CPU) summed per phase and per step of a phase (issue 32).

`bench_eval.py` says how long each phase takes; this says what the device does meanwhile, e.g. how many full
passes over a problem's inputs the correctness trials, the comparisons and the timed runs make. The evaluation
is the worker's own (envs/worker/evaluation.py) with the settings' fidelity checks, but run here rather than in
a sandboxed worker, so the candidate is the problem's reference solution from this repository (trusted code,
never a model's answer); the GPU holds the pool would arbitrate are granted at once (one evaluation, nothing
to share the GPU with).

  python scripts/bench_eval_ops.py --problem L0_02_relu --device cuda            # full size
  python scripts/bench_eval_ops.py --problem L1_05_row_sum --device cpu --top 5   # small size, Triton interpreter
  python scripts/bench_eval_ops.py --problem L0_04_sigmoid --wrong                # a wrong answer's evaluation

`--wrong` judges the reference solution against the problem's model with its output scaled by 1.5: the answer
then fails its first trial on almost every element, as most of a training step's answers do
(docs/runs/*/train_samples.jsonl.gz). The scale goes on the trusted model, not on the solution: PyTorch compute
in a solution's forward is refused as a hack before its outputs are compared.
"""

from __future__ import annotations

import argparse
import bisect
import collections
import dataclasses
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any


def _grant_every_hold(res_fd: int, req_fd: int) -> None:
    """Be the parent's end of the link in a thread: grant every GPU hold at once and drain everything else."""
    from envs.worker.protocol import read_frame, write_frame

    def serve() -> None:
        while True:
            try:
                message = read_frame(res_fd)
            except (EOFError, OSError):
                return
            if message.get("type") == "lock":
                write_frame(req_fd, {"type": "granted"})

    threading.Thread(target=serve, daemon=True, name="grant-every-hold").start()


def builtin_reference(problem_id: str):
    """The built-in problem and its reference solution's source; ValueError for anything else (the solution
    runs unsandboxed here, so only the repository's own)."""
    from envs import ProblemError, resolve_problem
    from envs.problems import BUILTIN_DIR

    if not problem_id.isidentifier() or not (BUILTIN_DIR / "problems" / f"{problem_id}.py").is_file():
        raise ValueError(f"{problem_id!r} is not a built-in problem id (envs/builtin/problems)")
    try:
        problem = resolve_problem(problem_id)
    except ProblemError as e:
        raise ValueError(str(e)) from None
    if not problem.reference_solution:
        raise ValueError(f"{problem_id} has no reference solution to evaluate")
    return problem, Path(problem.reference_solution).read_text()


# Appended to the problem's source by --wrong: the same model, an output 1.5 times as large.
SCALED_MODEL = """

class _Scaled(Model):
    def forward(self, *args):
        return super().forward(*args) * 1.5


Model = _Scaled
"""


def _call_without_profiler(fn: Any, kernel_names: set[str]) -> None:
    """envs.antihack.runtime.own_kernel_share's work without its profiler: one call, synchronized."""
    import torch

    fn()
    torch.cuda.synchronize()


def profiled_evaluation(problem: Any, source: str, device: str, settings: Any) -> dict[str, Any]:
    """Evaluate `source` (a built-in reference solution) on `problem` once after one unprofiled evaluation that
    compiles it and warms the allocator, under torch.profiler; returns the verdict's status, the phases' and
    steps' intervals (seconds from the first phase) and every profiled device event (CUDA) or op (CPU) as
    (start, seconds, name)."""
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile, record_function

    from envs.antihack import runtime as guard
    from envs.source import prepare_solution
    from envs.worker import harness, harness_state
    from envs.worker.evaluation import Evaluation
    from envs.worker.parent_link import ParentLink
    from envs.worker.worker_set import worker_request

    solution = prepare_solution(source)
    if device == "cuda":
        torch.cuda.init()
    harness.prepare(device)

    marks: list[tuple[str, float, float]] = []  # (phase or step, perf_counter start, end)

    class MarkedLink(ParentLink):
        """Announces each phase to the arbiter as the worker does, and opens a profiler range for it."""

        def __init__(self, req_fd: int, res_fd: int):
            super().__init__(req_fd, res_fd)
            self.range: Any = None
            self.current: tuple[str, float] | None = None

        def phase(self, name: str) -> None:
            super().phase(name)
            self.close()
            self.current = (name, time.perf_counter())
            self.range = record_function(f"phase:{name}")
            self.range.__enter__()

        def close(self) -> None:
            if self.range is not None:
                self.range.__exit__(None, None, None)
                marks.append((self.current[0], self.current[1], time.perf_counter()))
                self.range = None

    class MarkedEvaluation(Evaluation):
        def _step(self, name: str, began: float) -> None:
            marks.append((name, began, time.perf_counter()))
            super()._step(name, began)

    req_r, req_w = os.pipe()
    res_r, res_w = os.pipe()
    _grant_every_hold(res_r, req_w)
    link = harness_state.LINK = MarkedLink(req_r, res_w)
    root = os.path.realpath(os.environ.get("TMPDIR", "/tmp"))

    def evaluate() -> dict:
        request = worker_request(settings, device, problem, solution, measure_baselines=False)
        link.nonce = request.nonce
        evaluation = MarkedEvaluation(link, request, root)
        try:
            return evaluation.run()
        finally:
            link.close()
            evaluation.cleanup()

    cwd = os.getcwd()  # an evaluation changes directory (into its own, then to its root)
    try:
        evaluate()  # compiles the kernel, warms the caches: the profiled evaluation is a warm worker's
        marks.clear()
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
        # The timing phase's kernel share runs a profiler of its own, and stopping a nested torch.profiler stops
        # the outer one ("Can't disable Kineto profiler" on a GPU): here the step makes its one call
        # of the candidate, profiled by this script's profiler, and reports no share.
        share, guard.own_kernel_share = guard.own_kernel_share, _call_without_profiler
        try:
            with profile(activities=activities) as prof:
                result = evaluate()
        finally:
            guard.own_kernel_share = share
    finally:
        os.chdir(cwd)
        os.close(res_w)

    events = prof.events()
    first = next((e for e in events if e.name.startswith("phase:")), None)
    if first is None or not marks:
        raise SystemExit("bench_eval_ops: the evaluation announced no phase")
    origin = min(start for _, start, _ in marks)
    # Steps and phases are marked on the perf_counter clock, the profiler's events from its trace's start; both run
    # on the monotonic clock, so one offset, read at the first phase's start, maps one onto the other.
    offset_s = first.time_range.start / 1e6 - next(s for name, s, _ in marks if name == first.name[6:])
    intervals = [(name, start - origin, end - origin) for name, start, end in marks]
    spans: list[tuple[float, float, str]] = []
    for e in events:
        if e.name.startswith("phase:"):
            continue
        if device == "cuda":
            if e.device_type != DeviceType.CUDA:
                continue
            seconds = e.time_range.elapsed_us() / 1e6
        else:
            if e.device_type != DeviceType.CPU or e.is_user_annotation:
                continue
            seconds = e.self_cpu_time_total / 1e6
        spans.append((e.time_range.start / 1e6 - offset_s - origin, seconds, e.name))
    return {"status": result.get("status"), "error": result.get("error"), "intervals": intervals, "events": spans}


def attribute(intervals: list[tuple[str, float, float]], events: list[tuple[float, float, str]]) -> dict[str, Any]:
    """Each event to the step it started in (steps are named `phase.step`), else to its phase (`phase.other` where
    the phase has steps), else to `between` (before the first phase or between two). Returns `phases` (wall and
    device seconds of each, its steps included) and `parts` (device seconds and ops by total time, most first)."""
    phases = sorted((s, e, n) for n, s, e in intervals if "." not in n)
    steps = sorted((s, e, n) for n, s, e in intervals if "." in n)
    starts = [s for s, _, _ in steps]
    stepped = {n.split(".")[0] for _, _, n in steps}

    def part_of(t: float) -> str:
        i = bisect.bisect_right(starts, t) - 1
        if i >= 0 and steps[i][0] <= t < steps[i][1]:
            return steps[i][2]
        for s, e, n in phases:
            if s <= t < e:
                return f"{n}.other" if n in stepped else n
        return "between"

    parts: dict[str, dict[str, Any]] = collections.defaultdict(lambda: {"device_s": 0.0, "ops": {}})
    for start, seconds, name in events:
        part = parts[part_of(start)]
        part["device_s"] += seconds
        calls, total = part["ops"].get(name, (0, 0.0))
        part["ops"][name] = (calls + 1, total + seconds)
    walls = collections.Counter()
    for n, s, e in intervals:
        walls[n] += e - s
    report: dict[str, Any] = {"phases": {}, "parts": {}}
    for _, _, name in phases:
        device = sum(p["device_s"] for part, p in parts.items() if part.split(".")[0] == name)
        report["phases"][name] = {"wall_s": round(walls[name], 4), "device_s": round(device, 4)}
    for name, part in sorted(parts.items(), key=lambda kv: -kv[1]["device_s"]):
        ops = sorted(part["ops"].items(), key=lambda kv: -kv[1][1])
        report["parts"][name] = {
            "wall_s": round(walls[name], 4) if name in walls else None,
            "device_s": round(part["device_s"], 4),
            "ops": [{"name": op, "calls": calls, "seconds": round(total, 5)} for op, (calls, total) in ops],
        }
    return report


def print_report(report: dict[str, Any], device: str, top: int) -> None:
    what = "GPU kernel" if device == "cuda" else "CPU op (self)"
    total = sum(part["device_s"] for part in report["parts"].values())
    print(f"{what} seconds in all: {total:.3f}")
    for name, phase in report["phases"].items():
        print(f"  {name:12s} {phase['wall_s']:8.3f} s wall {phase['device_s']:8.3f} s {what}")
    for name, part in report["parts"].items():
        wall = f", {part['wall_s']:.3f} s wall" if part["wall_s"] is not None else ""
        print(f"\n{name}: {part['device_s']:.3f} s of {what} time{wall}")
        for op in part["ops"][:top]:
            print(f"  {op['seconds'] * 1e3:10.2f} ms {op['calls']:6d} x  {op['name'][:100]}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problem", required=True, help="a built-in problem id with a reference solution, e.g. L0_02_relu")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cuda")
    ap.add_argument("--size", choices=["full", "small"], help="default: full on cuda, small on cpu")
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="eval settings: timing_precision=0.03")
    ap.add_argument("--wrong", action="store_true", help="a wrong answer: the model's output x1.5")
    ap.add_argument("--top", type=int, default=8, help="ops listed per part")
    ap.add_argument("--out", type=Path, help="write the report as JSON here")
    args = ap.parse_args(argv)
    overrides = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep:
            ap.error(f"--set takes KEY=VALUE, not {item!r}")
        try:
            overrides[key] = json.loads(value)
        except json.JSONDecodeError:
            overrides[key] = value
    if args.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")  # before Triton is imported: kernels run on the CPU
    from envs import EvalSettings

    try:
        problem, source = builtin_reference(args.problem)
        settings = EvalSettings.from_mapping({"device": args.device, "size": args.size, "workers": 1, **overrides})
    except (ValueError, TypeError) as e:
        ap.error(str(e))
    if args.wrong:
        problem = dataclasses.replace(problem, source=problem.source + SCALED_MODEL)
    run = profiled_evaluation(problem, source, args.device, settings)
    report = attribute(run["intervals"], run["events"])
    what = f"{args.problem} (wrong by scale)" if args.wrong else args.problem
    print(f"{what} on {args.device}: {run['status']}" + (f" ({run['error'][:300]})" if run["error"] else ""))
    print_report(report, args.device, args.top)
    if args.out:
        record = {"problem": args.problem, "wrong": args.wrong, "device": args.device, **run, "report": report}
        args.out.write_text(json.dumps(record))
    return 0 if run["status"] == ("incorrect" if args.wrong else "correct") else 1


if __name__ == "__main__":
    sys.exit(main())
