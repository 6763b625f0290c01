"""rl.tracking with real W&B in offline mode, read back from the offline run files (tests/wandb_records.py):
the sample table and the sample count of a step both survive, a resumed run continues the same W&B run and
samples.jsonl, and a Hydra multirun becomes one W&B group with runs named by their swept overrides."""

import importlib.util
import json
import os
import subprocess
import sys
import types

import pytest

pytest.importorskip("wandb")

from envs.verdict import Status, Verdict  # noqa: E402
from rl.loop_checkpoints import LoopState, find_checkpoint, save_checkpoint  # noqa: E402
from rl.loop import Trainer  # noqa: E402
from rl.metrics import rollout_metrics  # noqa: E402
from rl.tracking import RUN_ID_FILE, RunLogger, WandbConfig, read_metrics, wandb_run_id_of  # noqa: E402
from rl.types import Group, Sample, ScoredSample  # noqa: E402
from tests.conftest import ROOT  # noqa: E402
from tests.wandb_records import offline_runs  # noqa: E402

OFFLINE = WandbConfig(mode="offline", project="kernelrl-test", table_every=1)


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")


def _groups(step, n=3):
    def scored(i):
        sample = Sample(f"p{step}/0", "L0_02_relu", i, [1, 2], [3, 4, 5], f"answer {step}.{i}", None, "stop", 0)
        status = Status.CORRECT if i == 0 else Status.COMPILE_ERROR
        return ScoredSample(sample, Verdict(status, "L0_02_relu", "cpu"), 0.5 if i == 0 else 0.0, {})

    return [Group(f"p{step}/0", "L0_02_relu", [scored(i) for i in range(n)])]


def _log_step(logger, step, split="train"):
    """What Trainer.train_step does with a step's samples and numbers: the loop's own _record_samples (samples.jsonl
    and the W&B table), then the row with the count (rl.metrics.rollout_metrics)."""
    groups = _groups(step)
    Trainer._record_samples(types.SimpleNamespace(logger=logger), groups, step, split)
    logger.log(step, rollout_metrics(groups, split, max_tokens=16))


def _samples(run_dir):
    return [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]


def test_the_sample_table_and_the_sample_count_both_survive(tmp_path):
    logger = RunLogger(tmp_path, OFFLINE)
    _log_step(logger, 0, "val")
    _log_step(logger, 1)
    logger.close()
    [run] = offline_runs(tmp_path)
    step1 = next(h for h in run.history if h["_step"] == 1)
    assert step1["train/samples"] == 3  # the count, a number
    assert step1["train/samples_table/_type"] == "table-file" and step1["train/samples_table/nrows"] == 3
    step0 = next(h for h in run.history if h["_step"] == 0)
    assert step0["val/samples"] == 3 and step0["val/samples_table/_type"] == "table-file"
    assert run.summary["train/samples"] == 3 and run.summary["train/samples_table/_type"] == "table-file"
    assert run.summary["val/samples"] == 3 and run.summary["val/samples_table/nrows"] == 3
    table = next(tmp_path.glob("wandb/offline-run-*/files/media/table/train/samples_table_*.table.json"))
    assert len(json.loads(table.read_text())["data"]) == 3


def test_a_table_key_that_could_collide_with_a_metric_is_refused(tmp_path):
    logger = RunLogger(tmp_path, WandbConfig(mode="disabled"))
    with pytest.raises(ValueError, match="_table"):
        logger.table(1, "train/samples", [{"a": 1}])
    logger.close()


def _load_train_script():
    spec = importlib.util.spec_from_file_location("kernelrl_train_script", ROOT / "scripts" / "train.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _checkpoint(run_dir, step, wandb_run_id):
    state = LoopState(
        step=step, policy_version=step, sampler={}, rng=[], run_dir=str(run_dir), wandb_run_id=wandb_run_id
    )
    return save_checkpoint(run_dir / "checkpoints", state, lambda path: os.makedirs(path))


def test_a_resumed_run_continues_the_w_and_b_run_and_samples_jsonl(tmp_path):
    first, resumed = tmp_path / "first", tmp_path / "resumed"
    logger = RunLogger(first, OFFLINE)
    for step in (1, 2):
        _log_step(logger, step)
    _checkpoint(first, 2, logger.wandb_run_id)
    _log_step(logger, 3)  # after the checkpoint: a resumed run does step 3 again
    run_id = logger.wandb_run_id
    logger.close()
    assert json.loads((first / RUN_ID_FILE).read_text())["id"] == run_id

    # what scripts/train.py passes the logger for resume=<first run>
    continued = _load_train_script().resume_logging(str(first))
    assert continued["wandb_run_id"] == run_id and continued["resume_step"] == 2
    logger = RunLogger(resumed, OFFLINE, **continued)
    assert logger.wandb_run_id == run_id
    _log_step(logger, 3)
    logger.close()

    runs = offline_runs(first) + offline_runs(resumed)
    assert [r.run_id for r in runs] == [run_id, run_id]  # `wandb sync` uploads both into one run
    assert [h["_step"] for h in runs[1].history] == [3]
    rows = _samples(resumed)
    assert [r["step"] for r in rows] == [1] * 3 + [2] * 3 + [3] * 3  # carried over up to step 2, then appended
    assert rows[:6] == _samples(first)[:6] and rows[6]["completion"] == "answer 3.0"
    assert [r["step"] for r in read_metrics(resumed / "metrics.jsonl")] == [1, 2, 3]


def test_resuming_into_the_same_directory_cuts_the_files_back_to_the_checkpoint(tmp_path):
    logger = RunLogger(tmp_path, WandbConfig(mode="disabled"))
    for step in (1, 2, 3):
        _log_step(logger, step)
    logger.close()
    logger = RunLogger(tmp_path, WandbConfig(mode="disabled"), resume_from=tmp_path, resume_step=2)
    _log_step(logger, 3)
    logger.close()
    assert [r["step"] for r in _samples(tmp_path)] == [1] * 3 + [2] * 3 + [3] * 3
    assert [r["step"] for r in read_metrics(tmp_path / "metrics.jsonl")] == [1, 2, 3]


def test_an_older_checkpoint_without_a_run_id_continues_the_run_wandb_last_wrote(tmp_path):
    logger = RunLogger(tmp_path, OFFLINE)
    run_id = logger.wandb_run_id
    logger.close()
    (tmp_path / RUN_ID_FILE).unlink()  # as a run written before wandb_run.json existed
    assert wandb_run_id_of(tmp_path) == run_id  # from wandb/latest-run -> offline-run-<time>-<id>
    directory = _checkpoint(tmp_path, 1, "")
    assert find_checkpoint(directory)[1].wandb_run_id == ""
    (tmp_path / "metrics.jsonl").write_text('{"step": 1}\n')
    assert _load_train_script().resume_logging(str(directory))["wandb_run_id"] == run_id
    assert wandb_run_id_of(tmp_path / "nothing") is None


SWEEP_APP = """
import hydra
from hydra.core.hydra_config import HydraConfig
from rl.tracking import RunLogger, WandbConfig, hydra_run_names

@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def main(cfg):
    wandb = hydra_run_names(WandbConfig(mode="offline", project="kernelrl-test"), HydraConfig.get())
    logger = RunLogger(HydraConfig.get().runtime.output_dir, wandb)
    logger.log(1, {"delta": cfg.delta})
    logger.close()

main()
"""


def test_a_hydra_sweep_is_one_w_and_b_group_with_runs_named_by_their_overrides(tmp_path):
    (tmp_path / "conf" / "policy").mkdir(parents=True)
    (tmp_path / "conf" / "config.yaml").write_text("defaults:\n  - policy: small\n  - _self_\ndelta: 1.8\nsteps: 1\n")
    for name in ("small", "large"):
        (tmp_path / "conf" / "policy" / f"{name}.yaml").write_text(f"model: {name}\n")
    (tmp_path / "app.py").write_text(SWEEP_APP)
    sweep = tmp_path / "multirun"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WANDB_MODE": "offline"}
    result = subprocess.run(
        [sys.executable, "app.py", "-m", "delta=1.2,1.5", "policy=small,large", "steps=2", f"hydra.sweep.dir={sweep}"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    runs = [run for job in sorted(sweep.glob("[0-9]*")) for run in offline_runs(job)]
    assert len(runs) == 4 and {r.group for r in runs} == {str(sweep)}
    # named by what the sweep varies (steps=2 is common to every run); then the run's own numbers
    assert sorted(r.name for r in runs) == [
        "delta=1.2,policy=large",
        "delta=1.2,policy=small",
        "delta=1.5,policy=large",
        "delta=1.5,policy=small",
    ]
    assert len({r.run_id for r in runs}) == 4
    for r in runs:
        assert r.summary["delta"] == float(r.name.split(",")[0].split("=")[1])


def test_a_single_run_keeps_its_configured_names():
    from hydra.types import RunMode

    single = types.SimpleNamespace(mode=RunMode.RUN)
    config = WandbConfig(mode="disabled", name="mine")
    from rl.tracking import hydra_run_names

    assert hydra_run_names(config, single) is config
