"""scripts/train.py as a user runs it, on a tiny random model: real Ray, the hf engine in a Ray actor, the
evaluation pool's CPU actors (Triton interpreter), the LoRA learner, W&B offline, checkpoints and resume.

The tiny model writes no valid kernel (every reward is 0): these tests check the loop's mechanics, not
learning (scripts/bench_train.py measures learning with SmolLM2).
"""

import json
import os
import subprocess
import sys

import pytest

from rl.metrics import LEARNER_KEYS
from rl.tracking import read_metrics
from tests.conftest import ROOT
from tests.wandb_records import offline_runs

pytestmark = pytest.mark.integration

# plain GRPO at temperature 1: a random model's rewards are all equal, and the default run's grpo_cpu would drop
# those flat groups (no update to test)
TINY = [
    "policy=tiny_random",
    "algorithm=grpo",
    "rollout.temperature=1.0",
    "data.levels=[0]",
    "data.validation_ids=[L0_02_relu]",
    "loop.problems_per_step=2",
    "rollout.n=2",
    "rollout.max_tokens=24",
    "loop.checkpoint_every=1",
    "pool.num_actors=1",
    "cache_path=null",
    "eval.device=cpu",
    "wandb.table_every=1",
    "validation.n=4",
]
ENV = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "WANDB_MODE": "offline"}


def train(run_dir, *overrides, timeout=600):
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "train.py"), *TINY, *overrides, f"hydra.run.dir={run_dir}"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=ENV,
        timeout=timeout,
    )


def test_a_sweep_is_one_w_and_b_group_with_runs_named_by_their_overrides(tmp_path):
    """`train.py -m`, two one-step jobs (Ray started and stopped twice in one process): one W&B group, the sweep
    directory; each run named by the value it sweeps (not by the overrides common to both) and configured by it."""
    sweep = tmp_path / "multirun"
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "train.py"),
            "-m",
            *TINY,
            "delta=1.2,1.8",
            "loop.steps=1",
            "loop.checkpoint_every=0",
            "validation.at_start=false",
            "validation.at_end=false",
            f"hydra.sweep.dir={sweep}",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=ENV,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    runs = {job: offline_runs(sweep / job) for job in ("0", "1")}
    assert [len(r) for r in runs.values()] == [1, 1]  # one W&B run per job, in the job's own directory
    a, b = runs["0"][0], runs["1"][0]
    assert a.group == b.group == str(sweep)
    assert (a.name, b.name) == ("delta=1.2", "delta=1.8") and a.run_id != b.run_id
    assert a.config["delta"] == 1.2 and b.config["delta"] == 1.8 and a.config["loop"]["steps"] == 1
    for run in (a, b):  # each logged its training step
        assert any(h.get("_step") == 1 and "train/reward_mean" in h for h in run.history)


def _problems_at(run_dir, step):
    rows = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    return sorted((r["problem_id"], r["index"]) for r in rows if r["step"] == step and r["split"] == "train")


def _state(run_dir, step):
    return json.loads((run_dir / "checkpoints" / f"step_{step:06d}" / "loop_state.json").read_text())


def test_two_steps_then_resume_continues_from_the_checkpoint(tmp_path):
    straight, first, resumed = tmp_path / "straight", tmp_path / "first", tmp_path / "resumed"
    # compiled decoding (torch.compile on the CPU): the engine compiles its first shapes before validation
    result = train(straight, "loop.steps=3", "+policy.engine.hf_decode=compiled")
    assert result.returncode == 0, result.stderr[-3000:]
    bench = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench_train.py"), "--from-run", str(straight)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert bench.returncode == 0, bench.stderr[-3000:]
    books = json.loads(bench.stdout)["accounting"]  # the soak's evidence: every sample written with a verdict
    assert books["samples_generated"] == books["samples_written"] == 3 * 2 * 2 + 2 * 4  # train, and val at 0 and 3
    assert books["steps_with_missing_rows"] == {} and books["rows_without_status"] == 0
    assert books["deaths_survived"]["engine_restarts"] == 0
    assert books["out_of_memory"] == {"oom_retries": 0, "gpu_concurrency_cuts": 0}  # a CPU run: none
    report = json.loads(bench.stdout)  # validation with its interval, and each training problem per step
    assert set(report["val/correct_rate_low"]) == set(report["val/correct_rate_high"]) == {"0", "3"}  # JSON keys
    assert report["validate_generate_s"]["max"] <= report["validate_s"]["max"]
    assert report["engine_warm_up_s"] > 0 and "time/engine_warm_up" in read_metrics(straight / "metrics.jsonl")[0]
    assert all(len(per_step) == 3 for per_step in report["train/problem_correct_rate"].values())
    result = train(first, "loop.steps=2")
    assert result.returncode == 0, result.stderr[-3000:]

    rows = read_metrics(first / "metrics.jsonl")
    assert [r["step"] for r in rows] == [0, 1, 2]  # one row per step; step 0 = validation of the initial policy
    # engine and pool both on the CPU: a round's samples are judged once the engine has finished the round
    assert all(r["time/evaluate"] <= r["time/wait_for_rewards"] for r in rows[1:])
    assert "time/engine_warm_up" not in rows[0]  # the static decode loop has nothing to compile
    train_row = rows[1]
    for key in (
        "train/reward_mean",
        "train/reward_std",
        "train/reward_max",
        "train/correct_rate",
        "train/status/compile_error",
        "train/speedup_geomean",
        "train/speedup_median",
        "train/fast_1",
        "train/zero_variance_group_frac",
        "train/response_len_mean",
        "train/response_len_max",
        "train/truncation_rate",
        "time/generate",
        "time/evaluate",
        "time/wait_for_rewards",
        "time/train",
        "time/sync",
        "time/step",
        "perf/rollout_tokens_per_s",
        "perf/learner_tokens_per_s",
        "pool/cache_hit_rate",
        *(f"train/{k}" for k in LEARNER_KEYS),
        "train/advantage_mean",
        "train/prompt_len_mean",
        "perf/step_tokens_per_s",
        # verl's names beside ours (rl.metrics.VERL_ALIASES)
        "actor/pg_loss",
        "actor/grad_norm",
        "critic/score/mean",
        "critic/advantages/min",
        "response_length/clip_ratio",
        "prompt_length/max",
        "timing_s/gen",
        "timing_s/step",
    ):
        assert key in train_row, key
    assert train_row["critic/score/mean"] == train_row["train/reward_mean"]
    # what the step's evaluations cost (rl.metrics.evaluation_costs); no exclusive time or GPU memory on a CPU
    assert train_row["train/evaluations"] >= 1 and train_row["train/eval_s/total"] > 0
    assert train_row["train/eval_s/exclusive"] == 0.0 and not [k for k in train_row if "/eval_gib/" in k]
    # the pool's summary only (wandb.pool_metrics=summary): no per-actor or p99 keys
    assert "pool/latency/total_p90_s" in train_row and "pool/latency/total_p99_s" not in train_row
    assert not [k for k in train_row if k.startswith("pool/gpu_busy_fraction/")]
    assert "val/reward_mean" in rows[0] and "val/reward_mean" in rows[2]  # at start and at the end
    parts = rows[0]["time/validate_generate"] + rows[0]["time/validate_wait_for_rewards"]
    assert 0 < parts <= rows[0]["time/validate"]
    assert (first / "final_policy" / "config.json").is_file()
    assert list((first / "wandb").glob("offline-run-*"))
    summary = json.loads((first / "summary.json").read_text())
    assert summary["steps"] == 2 and "val/reward_mean_step0" in summary
    low, high = summary["val/correct_rate_low_step2"], summary["val/correct_rate_high_step2"]
    assert 0.0 <= low <= summary["val/correct_rate_step2"] <= high <= 1.0
    assert isinstance(summary["train/problems_gained"], int) and "train/problems_gained_ids" in summary

    result = train(resumed, "loop.steps=3", f"resume={first}")
    assert result.returncode == 0, result.stderr[-3000:]
    logs = result.stdout + result.stderr  # Hydra's job log goes to stdout
    assert "resumed from" in logs and "at step 2" in logs
    assert [r["step"] for r in read_metrics(resumed / "metrics.jsonl")] == [0, 1, 2, 3]  # carried over + step 3
    # the same data position: step 3 after a resume draws what the uninterrupted run drew
    assert _problems_at(resumed, 3) == _problems_at(straight, 3)
    assert (
        _state(resumed, 3)["sampler"]["draws"]
        == _state(straight, 3)["sampler"]["draws"]
        == _state(first, 2)["sampler"]["draws"] + 2
    )
    assert _state(resumed, 3)["step"] == 3 and _state(resumed, 3)["policy_version"] == 3

    # W&B: the table and the count of a step both kept; the resumed run continues the same W&B run
    [first_run], [resumed_run] = offline_runs(first), offline_runs(resumed)
    step1 = next(h for h in first_run.history if h["_step"] == 1)
    assert step1["train/samples"] == 4 and step1["train/samples_table/_type"] == "table-file"
    assert resumed_run.run_id == first_run.run_id == _state(first, 2)["wandb_run_id"]
    # samples.jsonl: the first run's samples up to the checkpoint, then the resumed step's
    earlier = [json.loads(line) for line in (first / "samples.jsonl").read_text().splitlines()]
    carried = [json.loads(line) for line in (resumed / "samples.jsonl").read_text().splitlines()]
    assert carried[: len(earlier)] == earlier and {r["step"] for r in carried[len(earlier) :]} == {3}

    # the checkpoint is a peft adapter over a base named portably; exported merged, transformers loads it
    learner = resumed / "checkpoints" / "step_000003" / "learner"
    assert (learner / "adapter_config.json").is_file() and (learner / "adapter_model.safetensors").is_file()
    assert json.loads((learner / "meta.json").read_text())["model"] == "random-tiny-llama"
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "export_checkpoint.py"),
            str(resumed),
            "--out",
            str(tmp_path / "exported"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**ENV, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    from transformers import AutoModelForCausalLM

    assert AutoModelForCausalLM.from_pretrained(tmp_path / "exported").config.model_type == "llama"


def test_the_learnability_sampler_is_told_every_group_and_checkpoints_it(tmp_path):
    """data.sampler=learnability: every training group's outcome reaches the sampler (a tiny random model
    solves nothing, so each group is 0 of rollout.n correct), and the checkpoint carries the counts."""
    run = tmp_path / "learnability"
    result = train(run, "loop.steps=2", "data.sampler=learnability", "validation.at_start=false", "validation.every=0")
    assert result.returncode == 0, result.stderr[-3000:]
    outcomes = _state(run, 2)["sampler"]["outcomes"]
    groups: dict[str, int] = {}
    for problem_id, _ in _problems_at(run, 1) + _problems_at(run, 2):
        groups[problem_id] = groups.get(problem_id, 0) + 1
    groups = {k: v // 2 for k, v in groups.items()}  # rollout.n=2 samples a group
    assert set(outcomes) == set(groups) and all(correct == 0 for correct, _ in outcomes.values())
    decay = 0.8  # data.learnability.decay's default: a problem drawn twice counts 2 * 0.8 + 2 samples
    assert {k: n for k, (_, n) in outcomes.items()} == pytest.approx(
        {k: 2 + 2 * decay * (g - 1) for k, g in groups.items()}
    )


@pytest.mark.parametrize("mode", ["sync", "one_step_off"])
def test_max_minutes_makes_the_step_that_reaches_it_the_last_one(tmp_path, mode):
    """A budget shorter than one step: step 1 ends the run, validates as the last step does (validation.at_end)
    and exports; one_step_off's step 2, generating meanwhile, is dropped with nothing logged for it."""
    run = tmp_path / mode
    result = train(run, "loop.steps=4", "loop.max_minutes=0.001", f"loop.mode={mode}", "validation.at_start=false")
    assert result.returncode == 0, result.stderr[-3000:]
    rows = read_metrics(run / "metrics.jsonl")
    assert [r["step"] for r in rows] == [1] and "val/correct_rate" in rows[0] and "train/reward_mean" in rows[0]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["steps"] == 1 and summary["stopped_by_max_minutes"] is True
    assert (run / "checkpoints" / "step_000001" / "loop_state.json").is_file() and (run / "final_policy").is_dir()
    assert "loop.max_minutes (0.001) reached" in result.stdout + result.stderr


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["policy.model=/no/such/model"], "policy.model"),
        (["data.levels=[9]", "data.validation_ids=null", "data.include_ids=null"], "no usable problems"),
        (["+loop.stepz=3"], "unknown loop settings"),
        (["resume=/no/such/run"], "resume=/no/such/run: no such file"),
        (["policy=gpt5"], "OPENAI_API_KEY"),
    ],
)
def test_bad_configs_exit_2_before_anything_starts(tmp_path, overrides, message):
    result = train(tmp_path, *overrides, timeout=120)
    assert result.returncode == 2, result.stderr[-2000:]
    assert message in result.stderr
    assert not (tmp_path / "metrics.jsonl").exists()


def test_unknown_choices_and_keys_are_refused_by_hydra(tmp_path):
    for override, message in (("algorithm=ppo2", "algorithm/ppo2"), ("loop.stepz=3", "stepz")):
        result = train(tmp_path, override, timeout=120)
        assert result.returncode != 0 and message in result.stderr, result.stderr[-2000:]


def _trainer(tmp_path, *overrides):
    from hydra import compose, initialize_config_dir

    from rl.components import build_components
    from rl.config import RunConfig
    from rl.data import ProblemData
    from rl.loop import Trainer
    from rl.tracking import RunLogger, WandbConfig

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=[*TINY, *overrides])
    run = RunConfig.from_hydra(cfg)
    data = ProblemData.load(run.data)
    logger = RunLogger(tmp_path, WandbConfig(mode="disabled"))
    return Trainer(run, tmp_path, build_components(run, data), data, logger), logger


def test_a_dead_rollout_actor_is_replaced_or_the_run_stops_with_the_reason(tmp_path, monkeypatch):
    import asyncio

    import ray

    from rl.components import close_components
    from rl.loop import RunError

    monkeypatch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    trainer, logger = _trainer(tmp_path, "loop.steps=3", "loop.max_engine_restarts=1")

    async def steps():
        trainer.engine, trainer.components.engine = trainer.components.engine, None
        await trainer.train_step()
        ray.kill(trainer.engine.actors[0])  # as a node failure would
        await trainer.train_step()  # rebuilt, weights re-synced, the step retried
        assert trainer.engine_restarts == 1 and trainer.step == 2
        ray.kill(trainer.engine.actors[0])
        with pytest.raises(RunError, match=r"(?s)failed 2 times.*last checkpoint: .*step_000002"):
            await trainer.train_step()

    try:
        asyncio.run(steps())
    finally:
        trainer.close()
        close_components(trainer.components)
        logger.close()
    assert [r["step"] for r in read_metrics(tmp_path / "metrics.jsonl")] == [1, 2]
    assert (tmp_path / "checkpoints" / "step_000002" / "loop_state.json").is_file()


def test_one_step_off_with_a_two_rank_learner_group_logs_staleness(tmp_path):
    """loop.mode=one_step_off on the real stack: hf engine actor, the pool's CPU actor, 2 FSDP2 learner ranks."""
    run = tmp_path / "async"
    result = train(
        run,
        "loop.steps=3",
        "loop.mode=one_step_off",
        "+policy.learner.world_size=2",
        "validation.at_start=false",
        "pool.init_kwargs.num_cpus=6",
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [r for r in read_metrics(run / "metrics.jsonl") if "train/reward_mean" in r]
    assert [r["step"] for r in rows] == [1, 2, 3]
    # step 1 trains on the initial weights' samples (lag 0); later steps on samples one version behind
    assert rows[0]["async/staleness_max"] == 0
    assert rows[1]["async/staleness_max"] == 1 and rows[2]["async/staleness_mean"] == 1
    assert all(r["async/dropped_stale_groups"] == 0 for r in rows)
    assert all(r["train/grad_norm"] >= 0 for r in rows)  # the group trained every step
    assert "time/wait_for_rollouts" in rows[1] and "time/sync" in rows[1]
    assert (run / "final_policy" / "model.safetensors").is_file()
    assert _state(run, 3)["policy_version"] == 3
