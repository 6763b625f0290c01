"""The evaluation service's HTTP contract: the request and response models (pydantic, so FastAPI validates
requests and writes the OpenAPI schema from them) and the translation between a `Verdict` and a response:
per-request overrides (`apply_overrides`) and JSON-safe verdicts (`verdict_response`).

Separate from the app (envs/service/app.py) so that the contract reads in one place and clients (the hosted
grader, tests) can import it without the app's routes.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from envs.speedup import rebase_speedup
from envs.verdict import Accuracy, HackFinding, SpeedupInterval, Status, Timings, Verdict


# --- API models ----------------------------------------------------------------------------------
class EvalOverrides(BaseModel):
    """Per-request settings. Only these: they re-derive speedup and reward from what was measured, so a
    client cannot make evaluations costlier (trials, runs, timeouts) or predictable (seeds)."""

    model_config = ConfigDict(extra="forbid")
    baseline: Literal["inductor", "eager"] | None = Field(
        None, description="what speedup divides by (re-derived from the measured timings; no effect on CPU)"
    )
    delta: float | None = Field(
        None,
        ge=-10.0,
        le=10.0,
        allow_inf_nan=False,
        description="reward shift: V = sigmoid(1 + max(0, speedup) - delta)",
    )


class EvaluateRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "problem_id": "L0_02_relu",
                    "solution": "```python\nimport torch\n...\n```",
                    "settings": {"delta": 1.8},
                }
            ]
        },
    )
    problem_id: str | None = Field(None, min_length=1, max_length=256, description="id from GET /problems")
    problem_source: str | None = Field(None, min_length=1, description="a problem file's text (KernelBench format)")
    solution: str = Field(..., description="the model's answer: markdown with a fenced python block, or bare code")
    settings: EvalOverrides | None = None
    # A hosted grader forwards the dataset row's hash: grading against another version of the problem is a
    # 409, not a silently different reward (rl/hosted/grader.py).
    problem_sha256: str | None = Field(
        None, pattern="^[0-9a-f]{64}$", description="SHA-256 of the problem's source the client expects (optional)"
    )

    @model_validator(mode="after")
    def _one_problem(self) -> EvaluateRequest:
        if (self.problem_id is None) == (self.problem_source is None):
            raise ValueError("give exactly one of problem_id and problem_source")
        return self


class VerdictResponse(BaseModel):
    """envs.verdict.Verdict.to_dict() and its reward, in the order scripts/eval_kernel.py prints it. A field
    Verdict gains before it is typed here still passes through (extra="allow"); tests/unit/test_service_app.py
    notices."""

    model_config = ConfigDict(extra="allow")
    status: Status
    correct: bool
    hack: HackFinding | None = None  # pydantic validates the dataclasses of envs.verdict directly
    speedup: float | None = None
    reward: float
    timings: Timings | None = None
    error: str | None = None
    cached: bool
    problem_id: str
    device: str
    baseline: str | None = None
    phase_seconds: dict[str, float] = {}
    phase_memory_gib: dict[str, float] = {}  # GPU: the most memory the worker reserved (<phase>.allocated: held)
    notes: list[str] = []
    mismatch: dict[str, Any] | None = None
    own_kernel_share: float | None = None
    judge: dict[str, Any] | None = None
    suspicious: str | None = None
    speedup_interval: SpeedupInterval | None = None
    torch_share: float | None = None
    accuracy: Accuracy | None = None
    floor_ms: float | None = None
    traceback: str | None = None  # internal_error: where the evaluator failed on this candidate


class RewardResponse(BaseModel):
    reward: float
    status: Status
    cached: bool


class ProblemInfo(BaseModel):
    id: str
    level: int | None
    has_reference: bool
    small_sizes: dict[str, Any]


class ProblemDetail(ProblemInfo):
    source: str


class ProblemList(BaseModel):
    problems: list[ProblemInfo]


class Health(BaseModel):
    status: Literal["ok"] = "ok"


class ErrorResponse(BaseModel):
    detail: str


class InvalidRequestResponse(BaseModel):
    detail: str | list[dict[str, Any]] = Field(
        ..., description="pydantic's list of field errors, or a problem_source's ProblemError message"
    )


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {code: {"model": InvalidRequestResponse if code == 422 else ErrorResponse} for code in codes}


# --- verdict post-processing ---------------------------------------------------------------------
def apply_overrides(verdict: Verdict, overrides: EvalOverrides | None, default_baseline: str) -> Verdict:
    """Re-derive speedup (other baseline) from what the backend measured. A `delta` override is the reward
    function's to apply (the app passes it on), since a verdict carries no reward."""
    if overrides is None or overrides.baseline in (None, default_baseline):
        return verdict
    t = verdict.timings
    if (
        overrides.baseline
        and overrides.baseline != verdict.baseline
        and t is not None
        and t.kernel is not None
        and t.kernel.median_ms > 0
    ):
        if getattr(t, overrides.baseline) is not None:
            speedup, interval = rebase_speedup(verdict, overrides.baseline)
            verdict = dataclasses.replace(
                verdict, speedup=speedup, speedup_interval=interval, baseline=overrides.baseline
            )
        else:
            verdict = dataclasses.replace(
                verdict,
                notes=[
                    *verdict.notes,
                    (f"{overrides.baseline} baseline unavailable; speedup is against {verdict.baseline}"),
                ],
            )
    return verdict


def _finite(obj: Any, non_finite: Any) -> Any:
    """JSON has no NaN/Infinity: replace them (recursively) by `non_finite(x)`."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return non_finite(obj)
    if isinstance(obj, dict):
        return {k: _finite(v, non_finite) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v, non_finite) for v in obj]
    return obj


def verdict_response(verdict: Verdict, reward: float) -> VerdictResponse:
    """The verdict on the wire, with the reward the service's reward function gave it."""
    d = verdict.to_dict()
    d["reward"] = reward
    mismatch = d.pop("mismatch")
    d = _finite(d, lambda x: None)
    d["mismatch"] = _finite(mismatch, str)  # e.g. "value": "nan" where the candidate produced NaN
    return VerdictResponse.model_validate(d)
