"""rl.hosted without the network: config, grader JSON and URL checks, dataset export, metrics, refusals."""

from __future__ import annotations

import datetime as dt
import json
import math
import socket
from pathlib import Path

import pytest

from envs.verdict import HackFinding, Status, Verdict
from rl.data import DataConfig, ProblemData
from rl.hosted.config import GraderConfig, HostedConfig
from rl.hosted.dataset import export_dataset
from rl.hosted.errors import EXIT_CONFIG, HostedError
from rl.hosted.grader import REQUEST_TEMPLATE, check_grader_url, endpoint_grader, grader_token, redacted, render_request
from rl.hosted.metrics import checkpoint_metrics, event_metrics, split_graded, verdict_metrics
from rl.hosted.registry import benchmark_overrides
from rl.hosted.service import GradedSample
from rl.metrics import rollout_metrics
from rl.prompts import PromptBuilder, PromptConfig
from rl.types import Group, Sample, ScoredSample

TOKEN = "grader-token-0123456789abcdef"


def _resolver(*addresses):
    return lambda host, port, *a: [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port)) for ip in addresses]


# --- config -----------------------------------------------------------------------------------------
def test_config_from_mapping_types_and_refusals():
    cfg = HostedConfig.from_mapping(
        {
            "new_jobs_end": "2027-01-15",
            "rft_models": ["gpt-5"],
            "hyperparameters": {"n_epochs": 2},
            "grader": {"url": "https://g.example/reward"},
        }
    )
    assert cfg.new_jobs_end == dt.date(2027, 1, 15) and cfg.rft_models == ("gpt-5",)
    assert cfg.grader.url == "https://g.example/reward" and cfg.grader.kind == "endpoint"
    with pytest.raises(ValueError, match="unknown"):
        HostedConfig.from_mapping({"hyperparameters": {"epochs": 2}})
    with pytest.raises(ValueError, match="hosted.grader"):
        HostedConfig.from_mapping({"grader": {"adress": "x"}})
    with pytest.raises(ValueError, match="endpoint or python"):
        HostedConfig.from_mapping({"grader": {"kind": "score_model"}})


# --- grader -----------------------------------------------------------------------------------------
def test_grader_url_must_be_public_https_reward():
    public = _resolver("93.184.216.34")
    assert check_grader_url("https://grader.example.org/reward", resolve=public)
    for url, why in [
        (None, "not set"),
        ("http://grader.example.org/reward", "https"),
        ("https://grader.example.org/evaluate", "/reward"),
        ("https://user:pw@grader.example.org/reward", "credentials"),
        ("https://grader.example.org/reward?token=x", "query"),
    ]:
        with pytest.raises(HostedError, match=why) as e:
            check_grader_url(url, resolve=public)
        assert e.value.exit_code == EXIT_CONFIG
    for ip in ("127.0.0.1", "10.1.2.3", "192.168.0.5", "169.254.169.254", "::1"):
        with pytest.raises(HostedError, match="non-public"):
            check_grader_url("https://grader.example.org/reward", resolve=_resolver("93.184.216.34", ip))
    assert check_grader_url("http://127.0.0.1:8000/reward", allow_private=True)


def test_grader_token_comes_from_the_environment():
    config = GraderConfig()
    assert grader_token(config, {"KERNELRL_SERVICE_TOKEN": f" {TOKEN} "}) == TOKEN
    with pytest.raises(HostedError, match="no grader token"):
        grader_token(config, {})
    with pytest.raises(HostedError, match="16 characters"):
        grader_token(config, {"KERNELRL_SERVICE_TOKEN": "short"})


def test_endpoint_grader_maps_reward_and_redacts_the_token():
    spec = endpoint_grader(
        GraderConfig(spec_overrides={"name": "kr", "rate_limit": 8}), "https://g.example/reward", TOKEN
    )
    assert spec["headers"]["Authorization"] == f"Bearer {TOKEN}" and spec["score_field"] == "reward"
    assert spec["request_body"] == REQUEST_TEMPLATE and spec["name"] == "kr" and spec["rate_limit"] == 8
    shown = json.dumps(redacted(spec, TOKEN)) + json.dumps(redacted(f"sent {TOKEN} here", TOKEN))
    assert TOKEN not in shown and "<redacted>" in shown
    body = render_request({"problem_id": "L0_02_relu", "problem_sha256": "ab" * 32}, "```python\nx\n```")
    assert body == {"problem_id": "L0_02_relu", "problem_sha256": "ab" * 32, "solution": "```python\nx\n```"}
    # exactly the fields envs.service.EvaluateRequest accepts (it forbids others)
    from envs.service import EvaluateRequest

    EvaluateRequest.model_validate(body)
    with pytest.raises(HostedError, match="problem_sha256"):
        render_request({"problem_id": "x"}, "answer")


# --- dataset ----------------------------------------------------------------------------------------
def test_export_uses_the_loops_split_and_prompts(tmp_path):
    data = ProblemData.load(DataConfig(problems="builtin", levels=(0, 1), validation_fraction=0.3))
    prompts = PromptBuilder(PromptConfig(one_shot=False))
    exported = export_dataset(data, prompts, tmp_path)
    train = [json.loads(line) for line in exported.train_path.read_text().splitlines()]
    validation = [json.loads(line) for line in exported.validation_path.read_text().splitlines()]
    assert {r["problem_id"] for r in train} == {p.id for p in data.train}
    assert {r["problem_id"] for r in validation} == {p.id for p in data.validation} != set()
    by_id = {p.id: p for p in [*data.train, *data.validation]}
    for row in train + validation:
        problem = by_id[row["problem_id"]]
        assert row["problem_sha256"] == problem.sha256
        assert row["messages"] == prompts.build(problem).messages and row["messages"][-1]["role"] == "user"
        assert set(row) == {"messages", "problem_id", "problem_sha256"}
    no_val = export_dataset(
        ProblemData.load(DataConfig(problems="builtin", levels=(0,), validation_fraction=0.0)), prompts, tmp_path / "b"
    )
    assert no_val.validation_path is None and no_val.validation_ids == ()


# --- metrics ----------------------------------------------------------------------------------------
def _verdicts():
    return [
        Verdict(Status.CORRECT, "a", "cpu"),
        Verdict(Status.CORRECT, "a", "gpu", speedup=2.0),
        Verdict(Status.HACK, "b", "cpu", hack=HackFinding("baseline_kernel", "torch")),
        Verdict(Status.COMPILE_ERROR, "b", "cpu"),
    ]


def test_verdict_metrics_match_the_open_loops_keys_and_values():
    verdicts = _verdicts()
    rewards = [0.31, 0.77, 0.0, 0.0]
    ours = verdict_metrics([GradedSample(0.0, v.problem_id, v, r) for v, r in zip(verdicts, rewards)], "train")
    samples = [
        ScoredSample(Sample("r", v.problem_id, i, [], [1], "", None, "stop", 0), v, r)
        for i, (v, r) in enumerate(zip(verdicts, rewards))
    ]
    theirs = rollout_metrics([Group("r", "a", samples)], "train", max_tokens=100)
    assert ours["train/hack/baseline_kernel"] == 0.25 and ours["train/correct_rate"] == 0.5
    for key, value in ours.items():
        assert key in theirs, key
        assert value == theirs[key] or (math.isnan(value) and math.isnan(theirs[key])), key
    graded = [GradedSample(0.0, pid, Verdict(Status.CORRECT, pid, "cpu"), 0.31) for pid in ("a", "b", "c")]
    split = split_graded(graded, ["b"])
    assert [g.problem_id for g in split["train"]] == ["a", "c"] and [g.problem_id for g in split["val"]] == ["b"]


def test_event_and_checkpoint_metrics_from_sdk_objects():
    from openai.types.fine_tuning import FineTuningJobEvent
    from openai.types.fine_tuning.jobs import FineTuningJobCheckpoint

    events = [
        FineTuningJobEvent(
            id="1", created_at=0, level="info", message="m", object="fine_tuning.job.event", type="message"
        ),
        FineTuningJobEvent(
            id="2",
            created_at=0,
            level="info",
            message="s",
            object="fine_tuning.job.event",
            type="metrics",
            data={"step": 3, "train_reward_mean": 0.4, "valid": {"reward": 0.2}},
        ),
        FineTuningJobEvent(
            id="3",
            created_at=0,
            level="info",
            message="s",
            object="fine_tuning.job.event",
            type="metrics",
            data={"step": 4, "train_reward_mean": 0.5},
        ),
    ]
    assert event_metrics(events) == (4, {"openai/train_reward_mean": 0.5, "openai/valid/reward": 0.2})
    assert event_metrics(events[:1]) == (None, {})
    checkpoint = FineTuningJobCheckpoint(
        id="c",
        created_at=0,
        fine_tuned_model_checkpoint="ft:x",
        step_number=3,
        fine_tuning_job_id="j",
        object="fine_tuning.job.checkpoint",
        metrics={"step": 3.0, "train_loss": 0.25},
    )
    assert checkpoint_metrics(checkpoint) == {"openai/checkpoint/train_loss": 0.25}


def test_benchmark_overrides_compose_into_an_openai_engine_config():
    from hydra import compose, initialize_config_dir

    from rl.rollout.openai_config import OpenAIEngineConfig

    model = "ft:gpt-5-2025-08-07:org:kernelrl:abc123"
    with initialize_config_dir(str(Path(__file__).resolve().parents[2] / "conf"), version_base="1.3"):
        cfg = compose("benchmark", overrides=[*benchmark_overrides(model), "attempts=3"])
    engine = OpenAIEngineConfig.from_mapping({k: v for k, v in cfg.policy.engine.items() if k != "kind"})
    assert engine.model == model and engine.reasoning_model is True and cfg.attempts == 3


# --- refusals before the network ----------------------------------------------------------------------
def _run(tmp_path, monkeypatch, overrides, environ):
    from hydra import compose, initialize_config_dir

    from rl.config import RunConfig
    from rl.hosted.driver import run_hosted

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-unit-0123456789")
    with initialize_config_dir(str(Path(__file__).resolve().parents[2] / "conf"), version_base="1.3"):
        cfg = compose(
            "config",
            overrides=[
                "+experiment=gpt5_triton",
                "data=builtin",
                "data.levels=[0]",
                "hosted.grader.url=https://grader.example.org/reward",
                *overrides,
            ],
        )
    run = RunConfig.from_hydra(cfg)
    data = ProblemData.load(run.data)

    def no_api(*a, **k):
        raise AssertionError("the API must not be called")

    return run_hosted(run, data, tmp_path, logger=None, environ=environ, api_factory=no_api, backend_factory=no_api)


@pytest.mark.parametrize(
    "overrides, environ, code, message",
    [
        (["hosted.grader.kind=python"], {"OPENAI_API_KEY": "k", "KERNELRL_SERVICE_TOKEN": TOKEN}, 2, "python graders"),
        ([], {"KERNELRL_SERVICE_TOKEN": TOKEN}, 2, "no OpenAI API key"),
        ([], {"OPENAI_API_KEY": "k"}, 2, "no grader token"),
        (
            ["policy.engine.model=gpt-4.1-nano"],
            {"OPENAI_API_KEY": "k", "KERNELRL_SERVICE_TOKEN": TOKEN},
            3,
            "not one OpenAI offers",
        ),
        (
            ["hosted.grader.url=http://grader.example.org/reward"],
            {"OPENAI_API_KEY": "k", "KERNELRL_SERVICE_TOKEN": TOKEN},
            2,
            "must be https",
        ),
    ],
)
def test_refusals_before_any_request(tmp_path, monkeypatch, capsys, overrides, environ, code, message):
    assert _run(tmp_path, monkeypatch, overrides, environ) == code
    err = capsys.readouterr().err
    assert message in err and TOKEN not in err


def test_the_recipe_selects_hosted_rft_only_for_an_api_policy(monkeypatch):
    from hydra import compose, initialize_config_dir

    from rl.config import RunConfig

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-unit-0123456789")

    def run(*overrides):
        with initialize_config_dir(str(Path(__file__).resolve().parents[2] / "conf"), version_base="1.3"):
            return RunConfig.from_hydra(compose("config", overrides=list(overrides)))

    assert run("+experiment=gpt5_triton").runs_hosted_rft
    assert not run("+experiment=gpt5_triton", "hosted.mode=measure").runs_hosted_rft
    assert not run("+experiment=gpt5_triton", "policy=tiny_random").runs_hosted_rft  # the same recipe, open model
    assert not run("policy=gpt5").runs_hosted_rft and run("policy=gpt5").hosted is None  # no recipe: no RFT
    from rl.config import ConfigError

    with pytest.raises(ConfigError, match="hosted"):
        run("+experiment=gpt5_triton", "+hosted.typo=1")


def _api_error(cls, status, code, message="refused"):
    import httpx

    response = httpx.Response(status, request=httpx.Request("POST", "http://127.0.0.1/v1/fine_tuning/jobs"))
    return cls(message, response=response, body={"message": message, "code": code, "type": "x", "param": None})


def test_api_errors_become_one_message_and_exit_code():
    import openai

    from rl.hosted.errors import EXIT_ACCOUNT, explain_api_error

    e = explain_api_error(
        _api_error(openai.PermissionDeniedError, 403, "training_not_available"), "create", uploaded=True
    )
    assert e.exit_code == EXIT_ACCOUNT and "training_not_available" in str(e) and "were deleted" in str(e)
    assert "January 2027" in str(e) and "policy=qwen2_5_coder_7b" in str(e)
    end = dt.date(2027, 1, 1)
    after = explain_api_error(
        _api_error(openai.BadRequestError, 400, "invalid_request"),
        "create",
        new_jobs_end=end,
        today=dt.date(2027, 1, 20),
    )
    before = explain_api_error(
        _api_error(openai.BadRequestError, 400, "invalid_request"),
        "create",
        new_jobs_end=end,
        today=dt.date(2026, 12, 1),
    )
    assert "new fine-tuning jobs end in January 2027" in str(after) and "January 2027" not in str(before)
    key = explain_api_error(
        _api_error(openai.AuthenticationError, 401, "invalid_api_key", "bad key sk-abc123"),
        "preflight",
        redact=lambda s: s.replace("sk-abc123", "<redacted>"),
    )
    assert key.exit_code == EXIT_CONFIG and "sk-abc123" not in str(key)
    model = explain_api_error(
        _api_error(openai.NotFoundError, 404, "model_not_found"), "preflight: model", model="gpt-5"
    )
    assert model.exit_code == EXIT_ACCOUNT and "'gpt-5' is not available" in str(model)
