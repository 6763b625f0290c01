"""Hosted RFT end to end on this machine: the real openai SDK against a local server speaking the OpenAI files +
fine_tuning REST schema (tests/servers/fine_tuning.py), which calls the endpoint grader we give it; the grader is
the REAL KernelRL service (envs/service/ in rl.hosted.service) on the CPU evaluator (Triton interpreter)
scoring real built-in reference kernels. Nothing here reaches OpenAI."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from envs import EvalSettings
from envs.evaluator import Evaluator
from envs.problems import resolve_problem
from rewards.kernel_reward import kernel_reward
from rl.hosted.grader import REQUEST_TEMPLATE, render_request, self_check
from rl.hosted.service import HostedService
from tests.servers.fine_tuning import API_KEY, FineTuningServer

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "grader-token-integration-0123456789"
TRAIN = ("L0_01_vector_add", "L0_02_relu")
VALIDATION = ("L0_04_sigmoid",)
CPU_REWARD = kernel_reward(True, None, 1.8)  # correct, no speedup measured on the CPU: sigmoid(1 - 1.8)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _reference_answer(row: dict) -> str:
    """The stand-in policy: each problem's verified reference kernel, as a model would answer (markdown)."""
    kernel = Path(resolve_problem(row["problem_id"]).reference_solution).read_text()
    return f"Here is the kernel.\n```python\n{kernel}```"


class _Shared:
    """The module's evaluator for every service (one set of warm workers); the module closes it."""

    def __init__(self, evaluator):
        self.evaluator = evaluator

    def evaluate(self, problem, answer):
        return self.evaluator.evaluate(problem, answer)

    def close(self):
        pass


@pytest.fixture(scope="module")
def evaluator():
    with Evaluator(EvalSettings(device="cpu")) as ev:
        yield ev


def _compose(ft: FineTuningServer, port: int, *overrides: str):
    from hydra import compose, initialize_config_dir

    from rl.config import RunConfig
    from rl.data import ProblemData

    with initialize_config_dir(str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(
            "config",
            overrides=[
                "+experiment=gpt5_triton",
                "data=builtin",
                f"data.include_ids=[{','.join(TRAIN + VALIDATION)}]",
                f"data.validation_ids=[{','.join(VALIDATION)}]",
                "eval.device=cpu",
                "wandb.mode=disabled",
                f"++policy.engine.base_url={ft.base_url}",
                f"hosted.grader.url=http://127.0.0.1:{port}/reward",
                "hosted.grader.allow_private_url=true",
                f"hosted.grader.listen_port={port}",
                "hosted.poll_interval_s=0.01",
                *overrides,
            ],
        )
    run = RunConfig.from_hydra(cfg)
    return run, ProblemData.load(run.data)


def _hosted(
    tmp_path, monkeypatch, ft, *overrides, evaluator=None, monitor_options=None, default_backend=False, api_factory=None
):
    from rl.hosted.driver import run_hosted
    from rl.tracking import RunLogger, WandbConfig

    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    port = _free_port()
    run, data = _compose(ft, port, *overrides)
    logger = RunLogger(tmp_path, WandbConfig(mode="disabled"))
    environ = {"OPENAI_API_KEY": API_KEY, "KERNELRL_SERVICE_TOKEN": TOKEN}

    def backend(service_run):
        assert service_run.eval.device == "cpu"
        return _Shared(evaluator)

    extra = {} if default_backend else {"backend_factory": backend}
    if api_factory is not None:
        extra["api_factory"] = api_factory
    try:
        return run_hosted(run, data, tmp_path, logger, environ=environ, monitor_options=monitor_options, **extra)
    finally:
        logger.close()


def test_rft_job_graded_by_the_kernelrl_service(tmp_path, monkeypatch, evaluator):
    with FineTuningServer(answer=_reference_answer) as ft:
        assert _hosted(tmp_path, monkeypatch, ft, evaluator=evaluator) == 0
        (job,) = ft.jobs.values()
        grades = list(ft.grades)
        uploaded = {f: [json.loads(x) for x in v["content"].decode().splitlines()] for f, v in ft.files.items()}

    # the job OpenAI received: RFT of gpt-5 with KernelRL's /reward as its grader (the token only in that header)
    assert job["model"] == "gpt-5" and job["status"] == "succeeded"
    reinforcement = job["method"]["reinforcement"]
    assert job["method"]["type"] == "reinforcement"
    assert reinforcement["hyperparameters"] == {"reasoning_effort": "medium"}
    grader = reinforcement["grader"]
    assert grader["headers"]["Authorization"] == f"Bearer {TOKEN}" and grader["request_body"] == REQUEST_TEMPLATE
    train_rows, validation_rows = uploaded[job["training_file"]], uploaded[job["validation_file"]]
    assert [r["problem_id"] for r in train_rows] == list(TRAIN)
    assert [r["problem_id"] for r in validation_rows] == list(VALIDATION)

    # every grading call went through the real service and came back as rewards/kernel_reward.py computes it
    assert len(grades) == 3
    for g in grades:
        assert g["status_code"] == 200 and g["response"]["status"] == "correct"
        assert g["score"] == pytest.approx(CPU_REWARD)

    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    graded = [r for r in rows if "train/reward_mean" in r]
    assert len(graded) == 1 and graded[0]["step"] == 1
    row = graded[0]
    assert row["train/reward_mean"] == pytest.approx(CPU_REWARD) and row["train/correct_rate"] == 1.0
    assert row["train/samples"] == 2 and row["train/status/correct"] == 1.0
    assert row["val/reward_mean"] == pytest.approx(CPU_REWARD) and row["val/samples"] == 1
    assert row["openai/train_reward_mean"] == pytest.approx(CPU_REWARD)
    assert any("openai/checkpoint/train_loss" in r for r in rows)

    model = json.loads((tmp_path / "hosted_model.json").read_text())
    assert model["fine_tuned_model"].startswith("ft:gpt-5:") and model["fine_tuned_model"] in model["benchmark_command"]
    assert model["checkpoints"][0]["step"] == 1 and model["files"]["training_file"] == job["training_file"]
    verdicts = [json.loads(x) for x in (tmp_path / "verdicts.jsonl").read_text().splitlines()]
    assert len(verdicts) == 4 and {v["status"] for v in verdicts} == {"correct"}  # the self-check + 3 grades
    events = (tmp_path / "events.jsonl").read_text()
    assert "Fine-tuning job started" in events and "successfully completed" in events
    saved = json.loads((tmp_path / "job.json").read_text())["method"]["reinforcement"]["grader"]
    assert saved["url"] == grader["url"] and saved["headers"]["Authorization"] == "Bearer <redacted>"
    for name in ("grader.json", "job.json", "metrics.jsonl", "hosted_model.json", "summary.json"):
        assert TOKEN not in (tmp_path / name).read_text(), name


def test_rft_job_graded_on_the_runs_ray_pool(tmp_path, monkeypatch):
    """The default backend: the run's own RayEvaluationPool (rl.components.build_pool) behind the service."""
    with FineTuningServer(answer=_reference_answer) as ft:
        code = _hosted(
            tmp_path,
            monkeypatch,
            ft,
            "pool.address=null",
            "pool.num_actors=1",
            f"cache_path={tmp_path / 'cache.sqlite'}",
            default_backend=True,
        )
        grades = list(ft.grades)
    assert code == 0 and len(grades) == 3
    assert all(g["response"]["status"] == "correct" and g["score"] == pytest.approx(CPU_REWARD) for g in grades)


def test_403_training_not_available_deletes_the_uploads(tmp_path, monkeypatch, capsys):
    with FineTuningServer() as ft:
        ft.refuse_create = (403, "training_not_available")
        code = _hosted(tmp_path, monkeypatch, ft, "hosted.grader.serve=false", "hosted.grader.self_check=false")
        assert code == 3 and not ft.jobs
        assert len(ft.deleted) == 2 and not ft.files  # training and validation files, both deleted again
    err = capsys.readouterr().err
    assert "training_not_available" in err and "January 2027" in err and "were deleted" in err
    assert "policy=qwen2_5_coder_7b" in err and TOKEN not in err and API_KEY not in err


@pytest.mark.parametrize(
    "setup, message",
    [
        (lambda ft: setattr(ft, "grader_types", ("python", "string_check")), "gated preview"),
        (lambda ft: setattr(ft, "refuse_access", (403, "training_not_available")), "training_not_available"),
        (lambda ft: setattr(ft, "models", ("o4-mini",)), "not available to this account"),
    ],
)
def test_account_refusals_come_before_any_upload(tmp_path, monkeypatch, capsys, setup, message):
    with FineTuningServer() as ft:
        setup(ft)
        assert _hosted(tmp_path, monkeypatch, ft, "hosted.grader.serve=false", "hosted.grader.self_check=false") == 3
        assert not [r for r in ft.requests if r[1] == "/v1/files"] and not ft.jobs
    assert message in capsys.readouterr().err


def test_a_busy_grader_port_is_refused_before_any_upload(tmp_path, monkeypatch, capsys, evaluator):
    with socket.socket() as busy, FineTuningServer() as ft:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code = _hosted(tmp_path, monkeypatch, ft, f"hosted.grader.listen_port={port}", evaluator=evaluator)
        assert code == 4 and not [r for r in ft.requests if r[1] == "/v1/files"]
    assert f"cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err


def test_monitoring_polls_through_transient_api_failures(tmp_path, monkeypatch):
    from rl.hosted.api import FineTuningAPI

    slept = []
    with FineTuningServer() as ft:
        ft.failing_polls = 2
        code = _hosted(
            tmp_path,
            monkeypatch,
            ft,
            "hosted.grader.serve=false",
            "hosted.grader.self_check=false",
            api_factory=lambda key, url: FineTuningAPI(key, url, max_retries=0),
            monitor_options={"sleep": slept.append},
        )
        assert code == 0 and ft.failing_polls == 0 and next(iter(ft.jobs.values()))["status"] == "succeeded"
    assert len(slept) >= 2


def test_a_failed_job_exits_1_with_its_error(tmp_path, monkeypatch, capsys):
    with FineTuningServer() as ft:
        ft.fail_with = ("grader_error", "too many grader requests failed")
        assert _hosted(tmp_path, monkeypatch, ft, "hosted.grader.serve=false", "hosted.grader.self_check=false") == 1
    assert "ended failed: grader_error: too many grader requests failed" in capsys.readouterr().err
    record = json.loads((tmp_path / "hosted_model.json").read_text())
    assert record["status"] == "failed" and record["fine_tuned_model"] is None and "benchmark_command" not in record


@pytest.mark.parametrize("answer, cancelled", [("y", True), ("n", False)])
def test_resume_a_job_and_ctrl_c_asks_before_cancelling(tmp_path, monkeypatch, answer, cancelled):
    import openai

    with FineTuningServer() as ft:
        client = openai.OpenAI(api_key=API_KEY, base_url=ft.base_url)
        file_id = client.files.create(file=("t.jsonl", b'{"messages": []}\n'), purpose="fine-tune").id
        job = client.fine_tuning.jobs.create(
            model="gpt-5",
            training_file=file_id,
            method={"type": "reinforcement", "reinforcement": {"grader": {"type": "string_check"}}},
        )
        asked = []

        def interrupt(seconds):
            raise KeyboardInterrupt

        code = _hosted(
            tmp_path,
            monkeypatch,
            ft,
            f"hosted.job_id={job.id}",
            "hosted.grader.serve=false",
            "hosted.grader.self_check=false",
            monitor_options={"sleep": interrupt, "is_tty": lambda: True, "ask": lambda q: asked.append(q) or answer},
        )
        assert code == 130 and len(asked) == 1 and job.id in asked[0]
        assert (ft.jobs[job.id]["status"] == "cancelled") is cancelled
        assert len(ft.jobs) == 1  # resumed, not re-created


def test_grader_round_trip_through_the_real_service(evaluator):
    problem = resolve_problem("L0_02_relu")
    item = {"problem_id": problem.id, "problem_sha256": problem.sha256}
    reference = Path(problem.reference_solution).read_text()
    with HostedService(_Shared(evaluator), [problem, resolve_problem("L0_01_vector_add")], TOKEN) as service:
        url = service.url + "/reward"
        result = self_check(url, TOKEN, item, reference)  # also asserts 401 without the token
        assert result["status"] == "correct" and result["reward"] == pytest.approx(CPU_REWARD)
        headers = {"Authorization": f"Bearer {TOKEN}"}
        stale = httpx.post(url, json=render_request({**item, "problem_sha256": "0" * 64}, reference), headers=headers)
        assert stale.status_code == 409 and "SHA-256" in stale.json()["detail"]
        # a relu kernel is no vector add: graded by the evaluator, reward 0
        vector_add = resolve_problem("L0_01_vector_add")
        wrong = httpx.post(
            url,
            json=render_request({"problem_id": vector_add.id, "problem_sha256": vector_add.sha256}, reference),
            headers=headers,
            timeout=300,
        ).json()
        assert wrong["status"] != "correct" and wrong["reward"] == 0.0
        graded = service.recorder.drain()
        assert [g.problem_id for g in graded] == ["L0_02_relu", "L0_01_vector_add"]  # the 409 never evaluated


def test_train_py_runs_the_hosted_path_for_the_api_policy(tmp_path):
    """scripts/train.py +experiment=gpt5_triton with policy=gpt5: the hosted driver, its refusal and exit code."""
    with FineTuningServer() as ft:
        ft.refuse_create = (403, "training_not_available")
        env = {**os.environ, "OPENAI_API_KEY": API_KEY, "KERNELRL_SERVICE_TOKEN": TOKEN, "WANDB_MODE": "disabled"}
        proc = subprocess.run(
            [
                sys.executable,
                str(ROOT / "scripts/train.py"),
                "+experiment=gpt5_triton",
                "data=builtin",
                "data.levels=[0]",
                "wandb.mode=disabled",
                f"++policy.engine.base_url={ft.base_url}",
                "hosted.grader.url=http://127.0.0.1:9/reward",
                "hosted.grader.allow_private_url=true",
                "hosted.grader.serve=false",
                "hosted.grader.self_check=false",
                f"hydra.run.dir={tmp_path}",
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 3, proc.stderr[-3000:]
        assert "training_not_available" in proc.stderr and TOKEN not in proc.stderr + proc.stdout
        assert [r[1] for r in ft.requests].count("/v1/files") == 2 and len(ft.deleted) == 2
    assert (tmp_path / "rft_train.jsonl").is_file() and (tmp_path / "grader.json").is_file()
