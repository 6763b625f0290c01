"""rewards.shaping against hand values; rl.metrics on hand-built groups; rl.tracking's metrics.jsonl."""

import json
import math

import pytest

from envs.verdict import HackFinding, Status, Verdict
from rewards.shaping import RewardConfig, has_candidate, overlong_penalty, shaped_reward
from rl.metrics import LEARNER_KEYS, learner_metrics, rollout_metrics, sample_rows
from rl.tracking import RunLogger, WandbConfig, read_metrics
from rl.types import Group, Sample, ScoredSample

GOOD = "```python\nimport torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n```"


def test_dapo_overlong_penalty_hand_values():
    assert overlong_penalty(100, 512, 128) == 0.0
    assert overlong_penalty(384, 512, 128) == 0.0  # exactly at L - B
    assert overlong_penalty(448, 512, 128) == pytest.approx(-0.5)
    assert overlong_penalty(512, 512, 128) == -1.0
    assert overlong_penalty(480, 512, 128, penalty=0.5) == pytest.approx(-0.375)


def test_format_check():
    assert has_candidate(GOOD)
    assert not has_candidate("I think you should use a kernel.")
    assert not has_candidate("```python\nclass Model(x):\n    pass\n```")
    assert not has_candidate("```python\ndef broken(:\n```")


def test_shaped_reward_parts():
    correct = Verdict(Status.CORRECT, "p", "cpu")
    wrong = Verdict(Status.INCORRECT, "p", "cpu")
    plain = RewardConfig()
    r, parts = shaped_reward(correct, GOOD, 10, 512, plain)
    assert parts == {"kernel_reward": pytest.approx(1 / (1 + math.exp(0.8)))} and r == parts["kernel_reward"]
    shaped = RewardConfig(delta=1.0, overlong_buffer=128, format_penalty=0.1)
    r, parts = shaped_reward(correct, GOOD, 448, 512, shaped)
    assert parts["kernel_reward"] == pytest.approx(0.5) and parts["overlong"] == pytest.approx(-0.5)
    assert parts["format"] == 0.0 and r == pytest.approx(0.0)
    r, parts = shaped_reward(wrong, "no code", 10, 512, shaped)
    assert r == pytest.approx(-0.1) and parts["kernel_reward"] == 0.0
    hack = Verdict(Status.HACK, "p", "cpu", hack=HackFinding("baseline_kernel", "torch does it"))
    # a hack earns what prose earns, below an honest wrong kernel
    assert shaped_reward(hack, GOOD, 10, 512, shaped)[0] == pytest.approx(-0.1)
    assert shaped_reward(wrong, GOOD, 10, 512, shaped)[0] == 0.0
    with pytest.raises(ValueError, match=r"unknown reward settings"):
        RewardConfig.from_mapping({"format_penalti": 1})


def _scored(rid, i, status, reward, n_tokens=10, finish="stop", speedup=None, hack=None):
    sample = Sample(rid, rid.split("/")[0], i, [1, 2], list(range(n_tokens)), "text", None, finish, 0)
    verdict = Verdict(status, rid.split("/")[0], "cpu", speedup=speedup, hack=hack)
    return ScoredSample(sample, verdict, reward, {"kernel_reward": reward})


def test_rollout_metrics_hand_values():
    g1 = Group(
        "a/0",
        "a",
        [
            _scored("a/0", 0, Status.CORRECT, 0.8, speedup=2.0),
            _scored("a/0", 1, Status.CORRECT, 0.6, speedup=0.5),
            _scored("a/0", 2, Status.COMPILE_ERROR, 0.0, n_tokens=64, finish="length"),
            _scored("a/0", 3, Status.HACK, 0.0, hack=HackFinding("baseline_kernel", "x")),
        ],
    )
    g2 = Group("b/0", "b", [_scored("b/0", i, Status.INCORRECT, 0.0) for i in range(4)])
    m = rollout_metrics([g1, g2], "train", max_tokens=64)
    assert m["train/reward_mean"] == pytest.approx(1.4 / 8) and m["train/reward_max"] == 0.8
    assert m["train/kernel_reward_mean"] == pytest.approx(1.4 / 8)
    assert m["train/correct_rate"] == 0.25 and m["train/status/incorrect"] == 0.5
    assert m["train/status/hack"] == 0.125 and m["train/hack/baseline_kernel"] == 0.125
    assert m["train/speedup_geomean"] == pytest.approx(1.0) and m["train/speedup_median"] == pytest.approx(1.25)
    assert m["train/fast_1"] == 0.125  # one of eight samples is correct and faster than the baseline
    assert m["train/zero_variance_group_frac"] == 0.5
    assert m["train/response_len_max"] == 64 and m["train/truncation_rate"] == 0.125
    assert math.isnan(rollout_metrics([g2], "val", 64)["val/speedup_geomean"])
    rows = sample_rows([g1, g2], step=3, limit=5)
    assert len(rows) == 5 and rows[3]["hack"] == "baseline_kernel" and rows[0]["step"] == 3


def test_learner_metrics_always_have_the_issue_keys():
    m = learner_metrics({"pg_loss": 0.5, "grad_norm": 1.0, "note": "ignored"})
    assert m["train/pg_loss"] == 0.5 and "train/note" not in m
    assert all(f"train/{k}" in m for k in LEARNER_KEYS) and math.isnan(m["train/kl_ref"])


def test_metrics_jsonl_one_row_per_step_nan_as_null_and_carry_over(tmp_path):
    logger = RunLogger(tmp_path / "a", WandbConfig(mode="disabled"))
    logger.log(0, {"val/reward_mean": 0.1})
    logger.log(1, {"train/reward_mean": 0.2, "train/speedup_geomean": math.nan})
    logger.log(2, {"train/reward_mean": 0.3})
    logger.close()
    rows = read_metrics(tmp_path / "a" / "metrics.jsonl")
    assert [r["step"] for r in rows] == [0, 1, 2] and rows[1]["train/speedup_geomean"] is None
    with open(tmp_path / "a" / "metrics.jsonl", "a") as f:
        f.write('{"step": 3, "train/rew')  # a torn line of a killed run
    assert len(read_metrics(tmp_path / "a" / "metrics.jsonl")) == 3
    resumed = RunLogger(
        tmp_path / "b", WandbConfig(mode="disabled"), resume_from=tmp_path / "a" / "metrics.jsonl", resume_step=1
    )
    resumed.log(2, {"train/reward_mean": 0.9})
    resumed.close()
    assert [(r["step"], r.get("train/reward_mean")) for r in read_metrics(tmp_path / "b" / "metrics.jsonl")] == [
        (0, None),
        (1, 0.2),
        (2, 0.9),
    ]
    json.loads((tmp_path / "b" / "metrics.jsonl").read_text().splitlines()[0])
