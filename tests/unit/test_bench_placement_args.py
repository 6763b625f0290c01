"""bench_placement refuses windows without an anchor run before it touches a GPU."""

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_placement.py"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "L0_02_relu", *args], capture_output=True, text=True, timeout=120
    )


def test_one_run_per_window_is_refused_with_the_reason():
    # --runs 1 gives each window runs // 2 = 0 anchor runs: it used to crash on an empty median (docs/gpu-notes.md)
    done = run("--runs", "1")
    assert done.returncode == 2
    assert "--runs must be >= 2" in done.stderr


def test_two_runs_per_window_pass_the_check():
    done = run("--runs", "2")
    assert "--runs must be" not in done.stderr  # on this machine it stops at the CUDA check instead


def test_memory_trace_labels_warmup_and_timed_calls_that_grew():
    from scripts import bench_placement as bench

    # two warm-up rounds (kernel, anchor) then the timed kernel, anchor, kernel
    calls = [
        ("kernel", 2 << 20),
        ("anchor", 0),
        ("kernel", 0),
        ("anchor", 0),
        ("kernel", 0),
        ("anchor", 3 << 20),
        ("kernel", 0),
    ]
    trace = bench.growth(calls, timed=3)
    assert trace["warmup_calls"] == 4
    assert trace["grew"] == [
        {"call": 0, "name": "kernel", "phase": "warmup", "mib": 2.0},
        {"call": 5, "name": "anchor", "phase": "timed", "mib": 3.0},
    ]


def test_trace_memory_is_an_option():
    done = run("--runs", "2", "--trace-memory", "--modes", "evaluator_kept_spacer")
    assert "unrecognized" not in done.stderr and "invalid choice" not in done.stderr
    assert "no CUDA device" in done.stderr  # past the argument checks, stopped at the CUDA check on this machine


def test_the_release_diagnostics_are_options():
    done = run(
        "--modes",
        "evaluator_never_released",
        "evaluator_unsettled",
        "--later-rounds",
        "6",
        "--settle-ms",
        "20",
        "--neighbour-gib",
        "4",
    )
    assert "unrecognized" not in done.stderr and "invalid choice" not in done.stderr
    assert "no CUDA device" in done.stderr
