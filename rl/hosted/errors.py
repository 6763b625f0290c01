"""Refusals as one clear message and an exit code each (scripts/train.py exits with `HostedError.exit_code`).

2  configuration: fixed here (no API key, no grader token, a python grader, a grader URL OpenAI cannot reach)
3  the account or the API refused (403 training_not_available, fine-tuning ended, model not fine-tunable,
   endpoint graders not enabled for the organization)
4  the grader failed: its pool or service did not start, or its self-check (/reward not answered as it must)
1  the job ended failed or was cancelled by OpenAI
130 stopped by Ctrl-C (the job cancelled on confirmation, else still running and resumable)
"""

from __future__ import annotations

import datetime as dt
from typing import Any

__all__ = [
    "EXIT_ACCOUNT",
    "EXIT_CONFIG",
    "EXIT_GRADER",
    "EXIT_INTERRUPTED",
    "EXIT_JOB_FAILED",
    "HostedError",
    "explain_api_error",
]

EXIT_JOB_FAILED, EXIT_CONFIG, EXIT_ACCOUNT, EXIT_GRADER, EXIT_INTERRUPTED = 1, 2, 3, 4, 130

# The announcement the issue cites: OpenAI ends new fine-tuning jobs in January 2027 and refuses them earlier
# for some organisations with HTTP 403 `training_not_available`. Both reach us as API errors; the date only
# chooses the wording (the API, not our clock, decides whether a job may start).
_ENDED = (
    "OpenAI has announced that new fine-tuning jobs end in January 2027; from {end} on a refusal of "
    "job creation is read as that end. "
)
_NOT_AVAILABLE = (
    "OpenAI refused to start fine-tuning for this organization (HTTP 403 training_not_available): "
    "new fine-tuning jobs are no longer offered to it (OpenAI announced that new fine-tuning jobs "
    "end in January 2027 and stop earlier for some organizations). Nothing was trained{cleanup}. "
    "The open-model alternative runs the same recipe here: python scripts/train.py "
    "+experiment=gpt5_triton policy=qwen2_5_coder_7b"
)


class HostedError(RuntimeError):
    def __init__(self, message: str, exit_code: int = EXIT_CONFIG):
        super().__init__(message)
        self.exit_code = exit_code


def _error_code(e: Any) -> str | None:
    code = getattr(e, "code", None)
    if code:
        return str(code)
    body = getattr(e, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("code"):
            return str(inner["code"])
    return None


def _message(e: Any) -> str:
    body = getattr(e, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
    return str(getattr(e, "message", None) or e)


def explain_api_error(
    e: Exception,
    stage: str,
    *,
    model: str = "",
    uploaded: bool = False,
    new_jobs_end: dt.date | None = None,
    today: dt.date | None = None,
    redact=lambda s: s,
) -> HostedError:
    """The HostedError for an openai SDK exception raised during `stage` (preflight, upload, create, ...)."""
    import openai

    cleanup = " and the uploaded files were deleted" if uploaded else ""
    code, status = _error_code(e), getattr(e, "status_code", None)
    detail = redact(_message(e))
    today = today or dt.date.today()
    if code == "training_not_available":
        return HostedError(_NOT_AVAILABLE.format(cleanup=cleanup), EXIT_ACCOUNT)
    if isinstance(e, openai.AuthenticationError):
        return HostedError(f"{stage}: the OpenAI API refused the API key (401): {detail}", EXIT_CONFIG)
    if isinstance(e, (openai.APIConnectionError,)):
        return HostedError(f"{stage}: cannot reach the OpenAI API: {detail}", EXIT_ACCOUNT)
    ended = _ENDED.format(end=new_jobs_end) if new_jobs_end and today >= new_jobs_end else ""
    if isinstance(e, openai.PermissionDeniedError):
        return HostedError(
            f"{stage}: {ended}the OpenAI API denied access (403{', ' + code if code else ''}): "
            f"{detail}. Nothing was trained{cleanup}.",
            EXIT_ACCOUNT,
        )
    if isinstance(e, openai.NotFoundError) and stage in ("preflight: model", "create"):
        return HostedError(
            f"{stage}: model {model!r} is not available to this account for fine-tuning (404): "
            f"{detail}{cleanup and '; ' + cleanup.strip()}",
            EXIT_ACCOUNT,
        )
    if isinstance(e, openai.BadRequestError) and stage == "create" and ended:
        return HostedError(
            f"create: {ended}OpenAI refused the job (400{', ' + code if code else ''}): {detail}. "
            f"Nothing was trained{cleanup}.",
            EXIT_ACCOUNT,
        )
    if isinstance(e, openai.BadRequestError) and code in (
        "model_not_available",
        "invalid_model",
        "model_not_fine_tunable",
    ):
        return HostedError(
            f"{stage}: model {model!r} cannot be reinforcement-fine-tuned by this account "
            f"({code}): {detail}{cleanup and '; ' + cleanup.strip()}",
            EXIT_ACCOUNT,
        )
    if isinstance(e, openai.APIStatusError):
        return HostedError(
            f"{stage}: the OpenAI API answered {status}{' ' + code if code else ''}: {detail}"
            f"{cleanup and '; ' + cleanup.strip()}",
            EXIT_ACCOUNT,
        )
    return HostedError(f"{stage}: {type(e).__name__}: {redact(str(e))}", EXIT_ACCOUNT)
