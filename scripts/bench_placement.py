#!/usr/bin/env python
"""Does where a kernel's tensors lie in device memory move its time? Timing windows of one built-in reference
solution, the tensors placed differently before each window by `--modes` (same, clone, realloc, outputs,
evaluator, evaluator_kept_spacer, evaluator_full_warmup, evaluator_shared: the anchor reading the kernel's copy,
evaluator_held_pool: a block's copies never on the memory the last block's pool just gave back,
evaluator_extra_round: later windows warm up one round more, as many as the second window made,
evaluator_never_released: every window's pool kept, nothing given back to the driver, evaluator_unsettled: no
wait after a pool goes back to the driver, evaluator_slept_settle: that wait idled through before the warm-up
instead of warmed up through), as
the evaluator times (envs.timing.time_interleaved).

Per mode: the kernel's CV over the windows' medians, the range of the eager/kernel ratio, each window's first run
against its median, the runs that took memory from the driver (`--trace-memory`: every growth), and with
`--clocks` the GPU's clocks, power and throttle reasons after each window (nvidia-smi). A mode whose range is near
`same`'s does not sample placements. What each mode does and what was measured: docs/gpu-notes.md.

    python scripts/bench_placement.py L1_02_swish L0_07_elementwise_mul_add --out placement.jsonl   # ~30 s each

CUDA only."""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import torch

from envs.timing import ANCHOR, KERNEL, block_warmup, interleaved_schedule, time_interleaved
from envs.worker.outcome import allocating_in_placement, clone_args, load_module, move_to_fresh_placement

ROOT = Path(__file__).resolve().parents[1]

MODES = (
    "same",
    "clone",
    "realloc",
    "outputs",
    "evaluator",
    "evaluator_kept_spacer",
    "evaluator_full_warmup",
    "evaluator_shared",
    "evaluator_held_pool",
    "evaluator_extra_round",
    "evaluator_never_released",
    "evaluator_unsettled",
    "evaluator_slept_settle",
)
MIB = 1 << 20


def _to_cuda(args: list[Any]) -> list[Any]:
    return [a.cuda() if isinstance(a, torch.Tensor) else a for a in args]


CLOCK_FIELDS = ("clocks.sm", "clocks.mem", "power.draw", "temperature.gpu", "clocks_throttle_reasons.active")


def gpu_clocks() -> dict[str, str] | None:
    """The GPU's clocks (MHz), power (W), temperature and active throttle reasons now, or None without nvidia-smi."""
    index = str(torch.cuda.current_device())
    query = ["nvidia-smi", f"--query-gpu={','.join(CLOCK_FIELDS)}", "--format=csv,noheader,nounits", "-i", index]
    try:
        line = subprocess.run(query, capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return dict(zip(CLOCK_FIELDS, (v.strip() for v in line.split(","))))


def measure(
    problem_id: str,
    modes: tuple[str, ...],
    windows: int,
    runs: int,
    seed: int,
    trace_memory: bool = False,
    clocks: bool = False,
    later_rounds: int | None = None,
    settle_ms: float = 0.0,
) -> Iterator[dict]:
    """One row per mode, each yielded as soon as its windows are done (a call cut short keeps what finished)."""
    problem = load_module(f"problem_{problem_id}", str(ROOT / "envs/builtin/problems" / f"{problem_id}.py"))
    solution = load_module(f"solution_{problem_id}", str(ROOT / "envs/builtin/solutions" / f"{problem_id}.py"))
    init = problem.get_init_inputs()
    torch.manual_seed(seed)
    reference, kernel = problem.Model(*init).cuda(), solution.ModelNew(*init).cuda()
    for mode in modes:
        began = time.perf_counter()
        rng = random.Random(seed)
        torch.manual_seed(seed)
        inputs = _to_cuda(problem.get_inputs())
        placed = {"inputs": inputs, "anchor": inputs if mode == "evaluator_shared" else clone_args(inputs)}
        with torch.no_grad():
            example = kernel(*inputs)
        plugs: list[torch.Tensor] = []
        medians, ratios, firsts, anchor_firsts, anchor_medians = [], [], [], [], []
        allocating = dict.fromkeys((KERNEL, ANCHOR), 0)
        rounds = None  # the warm-up rounds that settled the second window's pool (envs.timing.block_warmup)
        traces, states, window_runs = [], [], []
        for w in range(windows):
            spacer = place(mode, placed, inputs, example, plugs, rng) if w else None
            if w and settle_ms:
                # the GPU left idle a while after the move: a slowness that passes with time, not with runs
                torch.cuda.synchronize()
                time.sleep(settle_ms / 1e3)
            fns: dict[str, Callable[[], Any]] = {
                KERNEL: functools.partial(placed_call, kernel, placed, "inputs"),
                ANCHOR: functools.partial(placed_call, reference, placed, "anchor"),
            }
            calls: list[tuple[str, int]] = []
            if trace_memory:
                fns = {name: traced(name, fn, calls) for name, fn in fns.items()}
            schedule = interleaved_schedule(runs, runs // 2)
            # The evaluator's modes warm their windows up as the worker's placement blocks (the other modes, and
            # evaluator_full_warmup, fully: what the evaluator's short warm-ups of later blocks change)
            short = mode.startswith("evaluator") and mode != "evaluator_full_warmup"
            # the second window made settled_after + 1 rounds (the last one confirming); the later ones make one
            # fewer, unless evaluator_extra_round
            later = rounds + 1 if mode == "evaluator_extra_round" and rounds is not None else rounds
            if later_rounds is not None and rounds is not None:
                later = later_rounds
            # the evaluator's warm-up runs through the settling the move's release asked for
            warmup = {**block_warmup(w if short else 0, 25.0, later), "busy_until": placed.pop("settle_until", 0.0)}
            with torch.no_grad():
                timed = time_interleaved(fns, schedule, **warmup)
            if trace_memory:
                traces.append({"window": w, "spacer_mib": spacer, **growth(calls, len(schedule))})
            if clocks:
                states.append(gpu_clocks())
            if w == 1:
                rounds = timed.settled_after
            k, a = statistics.median(timed.samples[KERNEL]), statistics.median(timed.samples[ANCHOR])
            medians.append(k)
            anchor_medians.append(a)
            ratios.append(a / k)
            firsts.append(timed.samples[KERNEL][0] / k)
            anchor_firsts.append(timed.samples[ANCHOR][0] / a)
            if w < 4:
                window_runs.append({n: [round(x, 4) for x in timed.samples[n]] for n in (KERNEL, ANCHOR)})
            for name, n in timed.allocating.items():
                allocating[name] += n
        row = {
            "problem": problem_id,
            "mode": mode,
            "windows": windows,
            "runs": runs,
            "kernel_cv": round(statistics.pstdev(medians) / statistics.fmean(medians), 4),
            "ratio_range": round((max(ratios) - min(ratios)) / statistics.median(ratios), 4),
            # a window's first timed run against its median: ~1 once the warm-up left the allocator
            # what the runs need; well above 1 means the first run paid for a driver allocation
            "first_run_ratio": round(statistics.median(firsts), 4),
            # the same for the anchor; with one anchor run per window (--runs 2) it is 1 by definition,
            # so read the anchor medians and the allocating counts
            "anchor_first_run_ratio": round(statistics.median(anchor_firsts), 4),
            # timed runs that took memory from the driver (0 once the warm-up left the pools warm)
            "allocating_runs": allocating,
            "warmup_rounds": rounds,
            "later_rounds": later_rounds,
            "settle_ms": settle_ms,
            # each timed run of windows 0-3 in order: does a slow window start slow and recover?
            "window_runs_ms": window_runs,
            "anchor_medians_ms": [round(x, 4) for x in anchor_medians],
            "kernel_medians_ms": [round(x, 4) for x in medians],
            **({"memory_trace": traces} if trace_memory else {}),
            **({"gpu_state": states} if clocks else {}),
            # the settling after releasing a block's pool (envs.gpu_lock.release_settle_seconds), slept or warmed
            # up through as the mode says
            "release_settle_s": round(placed.get("settle_s", 0.0), 4),
            "seconds": round(time.perf_counter() - began, 1),
        }
        del placed, inputs, example, plugs, fns
        torch.cuda.empty_cache()
        yield row


def placed_call(module: torch.nn.Module, placed: dict, key: str) -> Any:
    """Run `module` on `placed[key]`, allocating in the placement block's pool where it has one (evaluator)."""
    with allocating_in_placement(placed):
        return module(*placed[key])


def traced(name: str, fn: Callable[[], Any], calls: list[tuple[str, int]]) -> Callable[[], Any]:
    """`fn`, appending (name, bytes memory_reserved grew by) to `calls` at every call."""

    def call():
        before = torch.cuda.memory_reserved()
        out = fn()
        calls.append((name, torch.cuda.memory_reserved() - before))
        return out

    return call


def growth(calls: list[tuple[str, int]], timed: int) -> dict:
    """A window's calls that took memory from the driver: the last `timed` calls are the timed runs, the ones
    before them the warm-up (its rounds call each callable in turn)."""
    warmup = len(calls) - timed
    grew = [
        {"call": i, "name": name, "phase": "warmup" if i < warmup else "timed", "mib": round(grown / MIB, 1)}
        for i, (name, grown) in enumerate(calls)
        if grown > 0
    ]
    return {"warmup_calls": warmup, "grew": grew}


def place(
    mode: str, placed: dict, originals: list[Any], example: Any, plugs: list[torch.Tensor], rng: random.Random
) -> int | None:
    """Move the tensors of the next window as `mode` says (see the module docstring); the spacer's MiB where
    the mode places one."""
    if mode == "clone":
        placed["inputs"], placed["anchor"] = clone_args(placed["inputs"]), clone_args(placed["inputs"])
    elif mode == "realloc":
        values = [a.cpu() if isinstance(a, torch.Tensor) else a for a in placed["inputs"]]
        placed.clear()
        torch.cuda.empty_cache()
        spacer_bytes = rng.randint(1, 32) << 21
        spacer = torch.empty(spacer_bytes, dtype=torch.uint8, device="cuda")
        placed["inputs"] = _to_cuda(values)
        placed["anchor"] = clone_args(placed["inputs"])
        del spacer
        return spacer_bytes // MIB
    elif mode == "outputs" and isinstance(example, torch.Tensor):
        plugs.append(torch.empty_like(example))  # takes the free block the last outputs used
        plugs.append(torch.empty(rng.randint(1, 32) << 21, dtype=torch.uint8, device="cuda"))
        return plugs[-1].numel() // MIB
    elif mode.startswith("evaluator"):
        if mode == "evaluator_never_released":
            # every block's pool and copies kept: no memory goes back to the driver between windows
            placed.setdefault("kept", []).append([placed.get(k) for k in ("pool", "inputs", "anchor")])
        spacer_bytes = rng.randint(1, 32) << 21
        settling = move_to_fresh_placement(
            placed,
            originals,
            spacer_bytes=spacer_bytes,
            keep_spacer=mode == "evaluator_kept_spacer",
            shared_anchor=mode == "evaluator_shared",
            hold_previous=mode == "evaluator_held_pool",
        )
        if mode == "evaluator_slept_settle":
            time.sleep(settling)
        elif mode != "evaluator_unsettled":  # the window's warm-up runs until then (envs.timing.block_warmup)
            placed["settle_until"] = time.perf_counter() + settling
        placed["settle_s"] = placed.get("settle_s", 0.0) + (settling if mode != "evaluator_unsettled" else 0.0)
        return spacer_bytes // MIB
    return None


# Another process on the GPU taking memory from the driver and giving it back, launching no kernel: what an
# evaluation worker does outside its GPU holds (envs.worker.evaluation `_release_cached`), while another times
NEIGHBOUR = """
import sys, time, torch
size = int(float(sys.argv[1]) * (1 << 30))
while True:
    block = torch.empty(size, dtype=torch.uint8, device="cuda")
    del block
    torch.cuda.empty_cache()
    time.sleep(0.03)
"""


@contextlib.contextmanager
def neighbour(gib: float) -> Iterator[None]:
    """A process allocating and releasing `gib` GiB about every 30 ms while the windows are timed (none at 0)."""
    if gib <= 0:
        yield
        return
    proc = subprocess.Popen([sys.executable, "-c", NEIGHBOUR, str(gib)])
    try:
        time.sleep(5.0)  # its CUDA context up and its loop running
        yield
    finally:
        proc.kill()
        proc.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("problems", nargs="+", help="built-in problem ids with a reference solution")
    ap.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    ap.add_argument("--windows", type=int, default=8)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="also append the JSON lines to this file")
    ap.add_argument(
        "--trace-memory",
        action="store_true",
        help="per window: the spacer's size and each call during which memory_reserved grew",
    )
    ap.add_argument("--clocks", action="store_true", help="per window: the GPU's clocks, power and throttle reasons")
    ap.add_argument(
        "--later-rounds",
        type=int,
        default=None,
        help="the evaluator modes' warm-up rounds from the third window on (default: as many as the second took)",
    )
    ap.add_argument(
        "--settle-ms", type=float, default=0.0, help="idle this long after each move (beyond the evaluator's own wait)"
    )
    ap.add_argument(
        "--neighbour-gib",
        type=float,
        default=0.0,
        help="a second process allocates and releases this many GiB every ~30 ms, launching no kernel",
    )
    args = ap.parse_args()
    if args.runs < 2 or args.windows < 1:
        # a window times runs // 2 anchor runs: with fewer than 2 it has none to compare the kernel against
        ap.error(f"--runs must be >= 2 and --windows >= 1 (got --runs {args.runs}, --windows {args.windows})")
    if not torch.cuda.is_available():
        ap.error("placements are a GPU question: no CUDA device here")
    with neighbour(args.neighbour_gib):
        for pid in args.problems:
            for row in measure(
                pid,
                tuple(args.modes),
                args.windows,
                args.runs,
                args.seed,
                args.trace_memory,
                args.clocks,
                args.later_rounds,
                args.settle_ms,
            ):
                line = json.dumps({**row, "neighbour_gib": args.neighbour_gib})
                print(line, flush=True)
                if args.out:
                    with open(args.out, "a") as f:
                        f.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
