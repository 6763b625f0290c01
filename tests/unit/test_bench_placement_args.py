"""bench_placement refuses windows without an anchor run before it touches a GPU."""

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_placement.py"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "L0_02_relu", *args], capture_output=True, text=True,
                          timeout=120)


def test_one_run_per_window_is_refused_with_the_reason():
    # --runs 1 gives each window runs // 2 = 0 anchor runs: it used to crash on an empty median (session 13)
    done = run("--runs", "1")
    assert done.returncode == 2
    assert "--runs must be >= 2" in done.stderr


def test_two_runs_per_window_pass_the_check():
    done = run("--runs", "2")
    assert "--runs must be" not in done.stderr  # on this machine it stops at the CUDA check instead
