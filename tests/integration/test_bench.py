"""scripts/bench_eval.py as a user runs it (real subprocess, local Ray, CPU actors running the Triton
interpreter): the pool-size comparison and the fresh-process comparison report what they promise; and
scripts/bench_learner.py's plain-step anchor beside the learner's step on a tiny model."""

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.integration


def bench(tmp_path, *args, path: str | None = None):
    out = tmp_path / "bench.json"
    env = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    if path is not None:
        env["PATH"] = f"{path}{os.pathsep}{env['PATH']}"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "bench_eval.py"),
            "--device",
            "cpu",
            "--workers",
            "1",
            "--problems",
            "L0_02_relu",
            "L0_04_sigmoid",
            *args,
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=900,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(out.read_text()), proc.stdout


def test_scale_runs_each_pool_size_on_the_same_candidates(tmp_path):
    report, stdout = bench(tmp_path, "--backend", "ray", "--repeats", "2", "--scale", "2", "1")
    runs = report["scaling"]
    assert set(runs) == {"1", "2"}
    for n, run in runs.items():
        # every copy really ran (no cache or dedup answer): 2 problems x 2 repeats, all correct
        assert run["evals"] == 4 and run["statuses"] == {"correct": 4}
        assert run["agreement"] == "4/4" and run["metrics"]["pool/executions"] >= 4 + 2  # prime pass too
        assert run["devices"] == int(n) and run["evals_per_min"] > 0
    assert runs["1"]["efficiency"] == pytest.approx(1.0)
    assert "efficiency" in stdout and [p["status"] for p in report["problems"]] == ["correct", "correct"]


def fake_nvidia_smi(folder) -> str:
    """A stand-in `nvidia-smi` that streams as `--loop-ms` does (this machine has no GPU): 37% busy, 2 GiB used."""
    folder.mkdir()
    exe = folder / "nvidia-smi"
    exe.write_text(
        f"#!{sys.executable}\nimport time\nwhile True:\n    print('0, 37, 2048, 81559', flush=True); time.sleep(0.02)\n"
    )
    exe.chmod(0o755)
    return str(folder)


def test_fresh_process_comparison_reports_speed_and_agreement(tmp_path):
    smi = fake_nvidia_smi(tmp_path / "bin")
    report, stdout = bench(tmp_path, "--repeats", "1", "--vs-fresh-process", "--fresh-every", "2", path=smi)
    # each pass carries what nvidia-smi sampled during it (here the stand-in's constant 37%)
    for name in ("cold", "warm"):
        assert report[name]["gpu"]["gpu/util_mean"] == pytest.approx(37.0) and report[name]["gpu"]["gpu/samples"] >= 1
    assert "GPU busy (nvidia-smi utilization" in stdout and "mean 37%" in stdout
    fresh = report["fresh_process"]
    assert fresh["evals"] == 1 and fresh["agreement"] == "1/1" and fresh["speedup"] > 1
    assert report["warm"]["evals"] == 2 and report["warm"]["wall_over_gpu"] is not None
    assert "warm vs fresh process" in stdout
    # each answer's label beside its cold verdict, in the same order (scripts/bench_spread.py reads the classes)
    assert [label["key"] for label in report["labels"]] == [p["problem_id"] for p in report["problems"]]


def test_scale_needs_the_ray_backend(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench_eval.py"), "--scale", "1", "2"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 2 and "--backend ray" in proc.stderr


def test_bench_learner_reports_the_plain_anchor_beside_our_step():
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "bench_learner.py"),
            "--preset",
            "tiny-llama",
            "--vocab-size",
            "259",
            "--device",
            "cpu",
            "--finetune",
            "full",
            "--dtype",
            "float32",
            "--batch",
            "2",
            "--seq-len",
            "64",
            "--prompt-len",
            "16",
            "--warmup",
            "0",
            "--steps",
            "1",
            "--plain",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    plain, ours = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert plain["algorithm"] == "plain" and ours["algorithm"] == "grpo"
    assert plain["params"] == ours["params"] and plain["tokens_per_s"] > 0 and ours["tokens_per_s"] > 0


def bench_eval_ops(*args: str, cwd=ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench_eval_ops.py"), "--device", "cpu", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )


def test_bench_eval_ops_counts_the_ops_of_each_step_of_a_reference_evaluation(tmp_path):
    out = tmp_path / "ops.json"
    # --out relative to where it was started, though evaluations change directory
    proc = bench_eval_ops("--problem", "L0_02_relu", "--top", "3", "--out", "ops.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "L0_02_relu on cpu: correct" in proc.stdout
    report = json.loads(out.read_text())["report"]
    assert {"load", "compile", "correctness", "timing"} <= set(report["phases"])
    parts = report["parts"]
    trials = {op["name"]: op["calls"] for op in parts["correctness.trials"]["ops"]}
    # relu's inputs are drawn once per trial after the first: the reference's relu runs in each of them
    assert trials["aten::normal_"] >= 2 and trials["aten::relu"] >= 2
    assert parts["correctness.trials"]["device_s"] > 0 and parts["correctness.trials"]["wall_s"] > 0


def test_bench_eval_ops_wrong_profiles_an_answer_that_fails_its_first_trial(tmp_path):
    proc = bench_eval_ops("--problem", "L0_02_relu", "--wrong", "--top", "3", "--out", "ops.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "L0_02_relu (wrong by scale) on cpu: incorrect (trial 1 of" in proc.stdout
    record = json.loads((tmp_path / "ops.json").read_text())
    assert record["wrong"] and record["status"] == "incorrect"
    assert "timing" not in record["report"]["phases"]  # a wrong answer is never timed


@pytest.mark.parametrize("args", [["--problem", "../../tests/x"], ["--problem", "L0_02_relu", "--set", "bogus=1"]])
def test_bench_eval_ops_refuses_anything_but_a_built_in_reference_and_known_settings(args):
    proc = bench_eval_ops(*args)
    assert proc.returncode == 2 and "error:" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-2000:]
