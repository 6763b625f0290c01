"""The `hosted:` section of a recipe (conf/experiment/gpt5_triton.yaml), as typed records.

`mode: rft` with an API policy (`policy=gpt5`) makes scripts/train.py run OpenAI reinforcement fine-tuning
graded by KernelRL (rl.hosted.driver); `mode: measure` runs the ordinary loop without updates (generate,
evaluate, validate: a measurement of the hosted policy). With an open policy the section is unused and the
same recipe trains on vLLM + the learner.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any, Literal, Mapping

from envs.settings import reject_unknown

__all__ = ["GraderConfig", "HostedConfig", "RFT_HYPERPARAMETERS"]

# The fields of openai 3.57's ReinforcementHyperparametersParam (types/fine_tuning/
# reinforcement_hyperparameters_param.py); anything else is refused here rather than by the API after an upload.
RFT_HYPERPARAMETERS = (
    "batch_size",
    "compute_multiplier",
    "eval_interval",
    "eval_samples",
    "learning_rate_multiplier",
    "n_epochs",
    "reasoning_effort",
)


@dataclasses.dataclass(frozen=True)
class GraderConfig:
    # endpoint: OpenAI calls KernelRL's /reward over HTTPS (a gated preview, enabled per organization).
    # python: refused with the reason: OpenAI's python grader runs in a sandbox without GPU or network.
    kind: Literal["endpoint", "python"] = "endpoint"
    url: str | None = None  # the public https URL of the service's /reward (e.g. https://grader.example.org/reward)
    token_env: str = "KERNELRL_SERVICE_TOKEN"  # the service's bearer token: read from here, sent only to OpenAI
    name: str = "kernelrl"
    type: str = "endpoint"  # the grader type string the account's preview expects
    timeout_s: float = 900.0  # per grading request: a GPU evaluation takes seconds, a cold baseline minutes
    # Fields merged over the grader JSON we build (rl.hosted.grader.endpoint_grader): for a preview whose
    # field names differ from ours; docs/hosted.md lists what we send.
    spec_overrides: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    serve: bool = True  # start the KernelRL service in this process (else one runs already behind `url`)
    listen_host: str = "127.0.0.1"  # where the in-process service binds (a TLS proxy or tunnel forwards `url`)
    listen_port: int = 8000
    allow_private_url: bool = False  # accept a loopback/private `url` (tests; OpenAI cannot reach one)
    self_check: bool = True  # POST a reference solution to `url` before any upload: status correct, reward > 0
    # POST /fine_tuning/alpha/graders/validate before any upload: an organization without endpoint graders
    # gets its refusal here (exit 3) instead of after uploading the dataset.
    validate_with_api: bool = True

    def __post_init__(self) -> None:
        if self.kind not in ("endpoint", "python"):
            raise ValueError(f"hosted.grader.kind must be endpoint or python, not {self.kind!r}")
        if self.timeout_s <= 0 or not 0 < self.listen_port < 65536:
            raise ValueError("hosted.grader.timeout_s must be > 0 and listen_port in 1..65535")


@dataclasses.dataclass(frozen=True)
class HostedConfig:
    mode: Literal["rft", "measure"] = "rft"
    job_id: str | None = None  # monitor (and register) an existing job instead of creating one
    base_model: str | None = None  # the model to fine-tune; None: policy.engine.model (e.g. gpt-5)
    # Models OpenAI lists for reinforcement fine-tuning (o4-mini GA; gpt-5 private preview). Another name is
    # refused before any upload unless listed here (a new snapshot, an RFT-enabled fine-tuned model).
    rft_models: tuple[str, ...] = ("o4-mini", "o4-mini-2025-04-16", "gpt-5", "gpt-5-2025-08-07")
    suffix: str | None = "kernelrl"  # up to 64 characters added to the fine-tuned model's name
    seed: int | None = None
    hyperparameters: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # RFT_HYPERPARAMETERS
    poll_interval_s: float = 30.0
    max_validation_rows: int | None = None  # None: every held-out problem
    new_jobs_end: dt.date = dt.date(2027, 1, 1)  # OpenAI's announced end of new fine-tuning jobs (January 2027)
    confirm_cancel: bool = True  # Ctrl-C asks before cancelling the job (no terminal: never cancels)
    delete_files_on_refusal: bool = True  # a refused job creation deletes the files it uploaded
    grader: GraderConfig = GraderConfig()

    def __post_init__(self) -> None:
        if self.mode not in ("rft", "measure"):
            raise ValueError(f"hosted.mode must be rft or measure, not {self.mode!r}")
        unknown = set(self.hyperparameters) - set(RFT_HYPERPARAMETERS)
        if unknown:
            raise ValueError(
                f"hosted.hyperparameters: unknown {sorted(unknown)}; the reinforcement method "
                f"takes {list(RFT_HYPERPARAMETERS)}"
            )
        if self.poll_interval_s <= 0:
            raise ValueError("hosted.poll_interval_s must be > 0")
        if self.suffix is not None and len(self.suffix) > 64:
            raise ValueError("hosted.suffix: at most 64 characters")

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any] | None) -> HostedConfig:
        m = dict(m or {})
        reject_unknown(cls, m, "hosted")
        grader = dict(m.pop("grader", None) or {})
        reject_unknown(GraderConfig, grader, "hosted.grader")
        grader["spec_overrides"] = dict(grader.get("spec_overrides") or {})
        if "rft_models" in m:
            m["rft_models"] = tuple(m["rft_models"] or ())
        m["hyperparameters"] = dict(m.get("hyperparameters") or {})
        if isinstance(m.get("new_jobs_end"), str):
            m["new_jobs_end"] = dt.date.fromisoformat(m["new_jobs_end"])
        return cls(grader=GraderConfig(**grader), **m)
