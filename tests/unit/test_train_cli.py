"""scripts/train.py's front door: the short --help, --check, --cfg job that reports problems, and
`-m ... --cfg job`, all run as the user runs them (a subprocess; nothing starts Ray or loads a model)."""

import importlib.util
import subprocess
import sys

import yaml

from tests.conftest import ROOT

spec = importlib.util.spec_from_file_location("train_cli", ROOT / "scripts" / "train.py")
train = importlib.util.module_from_spec(spec)
spec.loader.exec_module(train)


def _train(*args):
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "train.py"), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_help_is_short_and_lists_what_conf_holds():
    out = _train("--help")
    assert out.returncode == 0 and len(out.stdout.splitlines()) < 50  # Hydra's --help printed 236 lines
    for group in ("policy", "algorithm", "data", "rollout", "prompt", "+experiment"):
        line = next(row for row in out.stdout.splitlines() if row.strip().startswith(group + "="))
        options = sorted(p.stem for p in (ROOT / "conf" / group.lstrip("+")).glob("*.yaml"))
        assert [o.rstrip("*") for o in line.strip()[len(group) + 2 : -1].split(", ")] == options
    assert "algorithm={dapo, dr_grpo, grpo, grpo_cpu*, ppo, rloo}" in out.stdout  # * marks the base config's choice
    assert "--check" in out.stdout and "docs/training.md" in out.stdout
    assert "--hydra-help" in out.stdout and "Hydra" in _train("--hydra-help").stdout


def test_check_accepts_the_default_and_names_each_problem():
    ok = _train("--check")
    assert ok.returncode == 0 and "config ok (1 job)" in ok.stderr
    bad = _train("--check", "loop.steps=-1", "rollout.temperature=abc")
    assert bad.returncode == 2 and bad.stderr.splitlines() == [
        "kernelrl: configuration error: rollout.temperature must be float, not 'abc'",
        "kernelrl: configuration error: loop: loop.steps must be >= 0 and loop.problems_per_step >= 1",
    ]
    assert _train("--check", "algorithm=ppo2").returncode == 1


def test_cfg_job_shows_the_preset_values_and_reports_problems():
    out = _train("--cfg", "job", "algorithm=dapo", "rollout.temperature=1.0")
    assert out.returncode == 0, out.stderr
    algorithm = yaml.safe_load(out.stdout)["algorithm"]
    assert algorithm["clip_eps_high"] == 0.28 and algorithm["loss_aggregation"] == "token_mean"
    bad = _train("--cfg", "job", "loop.steps=-1", "rollout.temperature=abc")  # printed the config and exited 0
    assert bad.returncode == 2 and "rollout.temperature must be float, not 'abc'" in bad.stderr
    assert yaml.safe_load(bad.stdout)["loop"]["steps"] == -1


def test_multirun_with_cfg_job_prints_every_job_without_a_traceback():
    out = _train("-m", "delta=1.2,1.8", "--cfg", "job")
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    docs = out.stdout.split("# job 1 (delta=1.8)")
    assert len(docs) == 2 and yaml.safe_load(docs[0])["delta"] == 1.2 and yaml.safe_load(docs[1])["delta"] == 1.8
    sweep = _train("--check", "-m", "delta=1.2,abc")
    assert sweep.returncode == 2 and sweep.stderr.splitlines() == [
        "kernelrl: configuration error: job 1 (delta=abc): reward: delta must be a finite number, not 'abc'"
    ]


def test_sweep_jobs_is_the_cartesian_product():
    assert train.sweep_jobs(["a=1,2", "b=x", "c=3,4"]) == [
        ["a=1", "b=x", "c=3"],
        ["a=1", "b=x", "c=4"],
        ["a=2", "b=x", "c=3"],
        ["a=2", "b=x", "c=4"],
    ]
    flags, overrides = train.split_argv(["-m", "--cfg", "job", "--resolve", "delta=1", "--check"])
    assert flags == {"-m": True, "--cfg": "job", "--resolve": True, "--check": True} and overrides == ["delta=1"]
