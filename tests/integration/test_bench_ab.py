"""scripts/bench_ab.py: each tree's bench_eval runs that tree's code, on this machine's CPU."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "bench_ab.py"
BENCH = ["--device", "cpu", "--workers", "1", "--problems", "L0_02_relu", "--repeats", "1"]


def bench_ab(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


def test_a_tree_must_hold_the_evaluator_and_names_must_differ(tmp_path):
    done = bench_ab("--tree", f"before={tmp_path}", "--tree", "after=.", "--", *BENCH)
    assert done.returncode == 2 and "holds no scripts/bench_eval.py" in done.stderr
    done = bench_ab("--tree", "a=.", "--tree", "a=.", "--", *BENCH)
    assert done.returncode == 2 and "each once" in done.stderr
    done = bench_ab("--tree", "a=.", "--tree", "b=.", "--", *BENCH, "--out", "x.json")
    assert done.returncode == 2 and "leave it out" in done.stderr
    done = bench_ab("--tree", "a=.", "--tree", "b=.", "--args", "c=--repeats 2", "--", *BENCH)
    assert done.returncode == 2 and "for a tree named by --tree" in done.stderr


def test_one_trees_own_arguments_reach_its_runs_only(tmp_path):
    out = tmp_path / "ab"
    done = bench_ab(
        "--tree", "one=.", "--tree", "two=.", "--args", "two=--repeats 2", "--out-dir", str(out), "--", *BENCH
    )
    assert done.returncode == 0, done.stdout + done.stderr
    reports = {name: json.loads((out / f"{name}-1.json").read_text()) for name in ("one", "two")}
    assert (reports["one"]["repeats"], reports["two"]["repeats"]) == (1, 2)


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs the checkout's git history")
def test_each_tree_runs_its_own_code(tmp_path):
    tree = tmp_path / "head"
    assert bench_ab("--extract", "HEAD", "--into", str(tree)).returncode == 0
    assert (tree / "envs" / "worker" / "harness.py").is_file() and not (tree / "rl" / "warmstart" / "adapter").exists()
    out = tmp_path / "ab"
    done = bench_ab("--tree", f"head={tree}", "--tree", "here=.", "--out-dir", str(out), "--", *BENCH)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "head round 1:" in done.stdout and "here round 1:" in done.stdout and "evaluations/min" in done.stdout
    assert (out / "head-1.json").is_file() and (out / "here-1.json").is_file()
    # a later call goes on from round 2 in the same directory, and compares each tree's runs of both calls
    done = bench_ab(
        "--tree", f"head={tree}", "--tree", "here=.", "--out-dir", str(out), "--first-round", "2", "--", *BENCH
    )
    assert done.returncode == 0 and "here round 2:" in done.stdout and "here, across its 2 runs" in done.stdout
    out = tmp_path / "broken"
    # A tree whose evaluator cannot be imported fails alone: the run imported that tree, not this checkout.
    (tree / "envs" / "__init__.py").write_text("raise ImportError('the extracted tree, broken on purpose')\n")
    done = bench_ab("--tree", f"head={tree}", "--tree", "here=.", "--out-dir", str(out), "--", *BENCH)
    assert done.returncode == 1 and "head round 1: bench_eval exited 1" in done.stdout
    assert "here round 1:" in done.stdout and "evaluations/min" in done.stdout
    assert "broken on purpose" in (out / "head-1.log").read_text()
