"""`run_hosted`: OpenAI reinforcement fine-tuning of an API policy, graded by KernelRL. scripts/train.py calls it
for `+experiment=gpt5_triton` with an API policy (hosted.mode=rft).

Order (every refusal before any upload, each with its message and exit code, rl/hosted/errors.py):
  1. a python grader; the API key; a model OpenAI lists for RFT; the grader token; the grader URL
  2. the API: fine-tuning access (403 training_not_available), the model (404), the grader (validate)
  3. the grader service (in this process unless hosted.grader.serve=false) and its self-check through the URL
  4. dataset export and upload, job creation (a refusal deletes the uploaded files), or hosted.job_id to resume
  5. monitoring into metrics.jsonl / W&B until the job ends (Ctrl-C asks before cancelling), registration
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any, Callable, Mapping

from rl.hosted.api import FineTuningAPI
from rl.hosted.errors import (
    EXIT_ACCOUNT,
    EXIT_CONFIG,
    EXIT_GRADER,
    EXIT_INTERRUPTED,
    EXIT_JOB_FAILED,
    HostedError,
    explain_api_error,
)
from rl.hosted.grader import (
    PYTHON_GRADER_REFUSAL,
    check_grader_url,
    endpoint_grader,
    grader_token,
    redacted,
    self_check,
)
from rl.hosted.monitor import JobMonitor, JobOutcome
from rl.hosted.registry import register
from rl.hosted.service import HostedService, is_loopback

__all__ = ["run_hosted"]

log = logging.getLogger("kernelrl.hosted")

# reasoning_effort values of ReinforcementHyperparametersParam (openai 3.57).
_RFT_EFFORTS = ("default", "low", "medium", "high")


def _default_backend(run: Any) -> Any:
    from rl.components import build_pool

    return build_pool(run)


def _hyperparameters(run: Any) -> dict[str, Any]:
    hyper = dict(run.hosted.hyperparameters)
    effort = run.policy.engine.get("reasoning_effort")
    if "reasoning_effort" not in hyper and effort in _RFT_EFFORTS:
        hyper["reasoning_effort"] = effort  # the effort the recipe samples with, also for training
    return hyper


def _self_check_item(data: Any) -> tuple[dict[str, str], str | None]:
    """A training problem with a verified reference (the easiest), else any problem (KernelBench has none)."""
    with_reference = sorted(
        (p for p in data.train if p.reference_solution), key=lambda p: (p.level if p.level is not None else 99, p.id)
    )
    problem = with_reference[0] if with_reference else sorted(data.train, key=lambda p: p.id)[0]
    solution = Path(problem.reference_solution).read_text() if problem.reference_solution else None
    return {"problem_id": problem.id, "problem_sha256": problem.sha256}, solution


def _service_run(run: Any) -> Any:
    """The run as the in-process service evaluates it: the workers' sandbox required on a public bind."""
    host = run.hosted.grader.listen_host
    if is_loopback(host):
        return run
    if run.eval.sandbox == "off":
        raise HostedError(
            f"hosted.grader.listen_host={host} with eval.sandbox=off: untrusted kernels would run "
            "without the OS sandbox on a public address; enable it or bind to 127.0.0.1 behind a "
            "TLS proxy",
            EXIT_CONFIG,
        )
    return dataclasses.replace(run, eval=dataclasses.replace(run.eval, sandbox="required"))


class _Redactor:
    def __init__(self, *secrets: str):
        self.secrets = [s for s in secrets if s]

    def __call__(self, text: str) -> str:
        for s in self.secrets:
            text = text.replace(s, "<redacted>")
        return text


def run_hosted(
    run: Any,
    data: Any,
    run_dir: Path,
    logger: Any,
    *,
    environ: Mapping[str, str] | None = None,
    api_factory: Callable[..., FineTuningAPI] = FineTuningAPI,
    backend_factory: Callable[[Any], Any] = _default_backend,
    today: dt.date | None = None,
    monitor_options: Mapping[str, Any] | None = None,
) -> int:
    """The exit code: 0 succeeded, 1 failed/cancelled, 2/3/4 refused (message on stderr), 130 Ctrl-C."""
    try:
        outcome = _run(
            run,
            data,
            Path(run_dir),
            logger,
            os.environ if environ is None else environ,
            api_factory,
            backend_factory,
            today or dt.date.today(),
            dict(monitor_options or {}),
        )
    except HostedError as e:
        print(f"kernelrl hosted: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:  # before monitoring began (the monitor asks about cancelling once it runs)
        created = (Path(run_dir) / "job.json").is_file()
        print(
            "kernelrl hosted: interrupted "
            + (
                "after the job was created (its id is in job.json; resume with hosted.job_id=...)"
                if created
                else "before any job was created"
            ),
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    if outcome.interrupted:
        return EXIT_INTERRUPTED
    if outcome.status != "succeeded":
        print(
            f"kernelrl hosted: job {outcome.job_id} ended {outcome.status}"
            f"{': ' + outcome.error if outcome.error else ''}",
            file=sys.stderr,
        )
        return EXIT_JOB_FAILED
    return 0


def _run(run, data, run_dir, logger, environ, api_factory, backend_factory, today, monitor_options) -> JobOutcome:
    import openai

    cfg = run.hosted
    # 1. what can be refused without the network
    if cfg.grader.kind == "python":
        raise HostedError(PYTHON_GRADER_REFUSAL, EXIT_CONFIG)
    engine = run.policy.engine
    key_env = engine.get("api_key_env", "OPENAI_API_KEY") or "OPENAI_API_KEY"
    api_key = environ.get(key_env, "").strip()
    if not api_key:
        raise HostedError(
            f"no OpenAI API key: set {key_env} (policy.engine.api_key_env names the variable)", EXIT_CONFIG
        )
    base_model = cfg.base_model or engine.get("model") or run.policy.model
    if not cfg.job_id and base_model not in cfg.rft_models and not base_model.startswith("ft:"):
        raise HostedError(
            f"model {base_model!r} is not one OpenAI offers for reinforcement fine-tuning "
            f"({', '.join(cfg.rft_models)}); if your account can, add it to hosted.rft_models. "
            "Nothing was uploaded",
            EXIT_ACCOUNT,
        )
    if today < cfg.new_jobs_end:
        log.warning(
            "OpenAI has announced that new fine-tuning jobs end in January 2027 (and refuses them "
            "earlier for some organizations with 403 training_not_available)"
        )
    else:
        log.warning(
            "today (%s) is past OpenAI's announced end of new fine-tuning jobs (%s); asking the API anyway",
            today,
            cfg.new_jobs_end,
        )
    token = grader_token(cfg.grader, environ)
    url = check_grader_url(cfg.grader.url, cfg.grader.allow_private_url)
    redact = _Redactor(api_key, token)
    service_run = _service_run(run) if cfg.grader.serve else run

    def explain(e: Exception, stage: str, uploaded: bool = False) -> HostedError:
        return explain_api_error(
            e, stage, model=base_model, uploaded=uploaded, new_jobs_end=cfg.new_jobs_end, today=today, redact=redact
        )

    # 2. what the API can refuse before anything is uploaded
    api = api_factory(api_key, engine.get("base_url"))
    grader = endpoint_grader(cfg.grader, url, token)
    (run_dir / "grader.json").write_text(json.dumps(redacted(grader, token), indent=2) + "\n")
    try:
        api.check_access()
    except openai.OpenAIError as e:
        raise explain(e, "preflight: fine-tuning access") from None
    if not cfg.job_id:
        try:
            api.check_model(base_model)
        except openai.OpenAIError as e:
            raise explain(e, "preflight: model") from None
    if cfg.grader.validate_with_api and not cfg.job_id:
        try:
            api.validate_grader(grader)
        except openai.BadRequestError as e:
            raise HostedError(
                f"the OpenAI API refused KernelRL's endpoint grader ({redact(str(getattr(e, 'message', e)))}). "
                "Endpoint graders are a gated preview that OpenAI enables per organization; without it a kernel "
                "cannot be graded (a python grader has no GPU or network). Ask OpenAI for access, or train the "
                "open-model recipe: python scripts/train.py +experiment=gpt5_triton policy=qwen2_5_coder_7b. "
                "Nothing was uploaded",
                EXIT_ACCOUNT,
            ) from None
        except openai.OpenAIError as e:
            raise explain(e, "preflight: grader") from None

    # 3. the grader, then 4. the job
    with contextlib.ExitStack() as stack:
        service = None
        if cfg.grader.serve:
            problems = [*data.train, *data.validation]
            try:
                backend = backend_factory(service_run)
            except Exception as e:  # Ray, the sandbox, a GPU: whatever stops the pool, said before any upload
                raise HostedError(
                    f"the grader's evaluation pool did not start: {type(e).__name__}: {e}. Nothing was uploaded",
                    EXIT_GRADER,
                ) from e
            try:
                service = stack.enter_context(
                    HostedService(
                        backend,
                        problems,
                        token,
                        cfg.grader.listen_host,
                        cfg.grader.listen_port,
                        journal=run_dir / "verdicts.jsonl",
                        delta=run.reward.delta,
                        baseline=run.eval.baseline,
                    )
                )
            except (OSError, RuntimeError) as e:
                getattr(backend, "close", lambda: None)()
                raise HostedError(
                    f"the grader service cannot listen on {cfg.grader.listen_host}:"
                    f"{cfg.grader.listen_port} ({e}); set hosted.grader.listen_port. Nothing was "
                    "uploaded",
                    EXIT_GRADER,
                ) from None
            log.info("grader service on %s; OpenAI calls it at %s", service.url, url)
        if cfg.grader.self_check:
            item, solution = _self_check_item(data)
            result = self_check(url, token, item, solution, timeout_s=cfg.grader.timeout_s)
            log.info(
                "grader self-check through %s: %s %s reward %.4f",
                url,
                item["problem_id"],
                result["status"],
                float(result["reward"]),
            )
            if service is not None:
                service.recorder.discard_one(item["problem_id"])  # the self-check is not a training sample
        files: dict[str, Any] = {}
        if cfg.job_id:
            try:
                job = api.retrieve(cfg.job_id)
            except openai.OpenAIError as e:
                raise explain(e, f"resume {cfg.job_id}") from None
            log.info("monitoring existing job %s (%s, %s)", job.id, job.model, job.status)
        else:
            job, files = _submit(run, data, run_dir, api, grader, base_model, token, explain)
        # The SDK parses an endpoint grader as the first member of its grader union (extra fields kept); the
        # dump is the job as the API returned it, without pydantic's warnings about that.
        job_record = redacted(job.model_dump(mode="json", warnings=False), token)
        (run_dir / "job.json").write_text(json.dumps(job_record, indent=2) + "\n")
        monitor = JobMonitor(
            api,
            job.id,
            logger,
            run_dir,
            recorder=service.recorder if service else None,
            validation_ids=tuple(p.id for p in data.validation),
            poll_interval_s=cfg.poll_interval_s,
            confirm_cancel=cfg.confirm_cancel,
            **monitor_options,
        )
        try:
            outcome = monitor.run()
        except openai.OpenAIError as e:
            error = explain(e, f"monitor {job.id}")
            raise HostedError(
                f"{error} (the job keeps running on OpenAI's side; monitor it again with hosted.job_id={job.id})",
                error.exit_code,
            ) from None

    # 5. register
    record = register(run_dir, outcome, job.model, files)
    logger.summary(
        {
            "job_id": outcome.job_id,
            "status": outcome.status,
            "fine_tuned_model": outcome.fine_tuned_model,
            "step": outcome.step,
            "graded": outcome.graded,
            "checkpoints": len(outcome.checkpoints),
        }
    )
    if outcome.fine_tuned_model:
        log.info("fine-tuned model %s; benchmark it with: %s", outcome.fine_tuned_model, record["benchmark_command"])
    return outcome


def _submit(run, data, run_dir, api, grader, base_model, token, explain) -> tuple[Any, dict[str, Any]]:
    import openai

    from rl.components import build_prompts
    from rl.hosted.dataset import export_dataset

    cfg = run.hosted
    exported = export_dataset(data, build_prompts(run, data), run_dir, cfg.max_validation_rows)
    log.info(
        "RFT dataset: %d training and %d validation rows -> %s",
        len(exported.train_ids),
        len(exported.validation_ids),
        exported.train_path.parent,
    )
    uploaded: list[str] = []

    def clean_up() -> None:
        if not cfg.delete_files_on_refusal:
            return
        for file_id in uploaded:
            with contextlib.suppress(openai.OpenAIError):
                api.delete_file(file_id)

    try:
        uploaded.append(api.upload(exported.train_path))
        if exported.validation_path is not None:
            uploaded.append(api.upload(exported.validation_path))
    except openai.OpenAIError as e:
        clean_up()
        raise explain(e, "upload", uploaded=bool(uploaded) and cfg.delete_files_on_refusal) from None
    files = {"training_file": uploaded[0], "validation_file": uploaded[1] if len(uploaded) > 1 else None}
    try:
        job = api.create_job(
            model=base_model,
            training_file=files["training_file"],
            validation_file=files["validation_file"],
            grader=grader,
            hyperparameters=_hyperparameters(run),
            suffix=cfg.suffix,
            seed=cfg.seed,
            metadata={"kernelrl_run": str(run_dir.name)[:512], "kernelrl_problems": str(len(exported.train_ids))},
        )
    except openai.OpenAIError as e:
        clean_up()
        raise explain(e, "create", uploaded=cfg.delete_files_on_refusal) from None
    log.info("created fine-tuning job %s (%s)", job.id, job.status)
    return job, files
