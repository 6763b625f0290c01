"""The OpenAI calls a hosted run makes, through the pinned SDK (openai 3.57, `client.fine_tuning`, `client.files`).

Only these calls, read from the SDK's source: files.create/delete, models.retrieve, fine_tuning.jobs
create/retrieve/cancel/list/list_events, checkpoints.list and alpha.graders.validate. The SDK's `method`
TypedDict has no endpoint-grader member; its transform passes our dict through unchanged (tested against the
local server, which records the body it receives). Each call with its REST route: docs/hosted.md."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

__all__ = ["FineTuningAPI", "TERMINAL_STATUSES"]

TERMINAL_STATUSES = ("succeeded", "failed", "cancelled")


class FineTuningAPI:
    def __init__(self, api_key: str, base_url: str | None = None, timeout_s: float = 120.0, max_retries: int = 3):
        import openai

        self.client = openai.OpenAI(api_key=api_key, base_url=base_url, timeout=timeout_s, max_retries=max_retries)
        self._seen_events: set[str] = set()

    # ------------------------------------------------------------------ checks (nothing uploaded)
    def check_access(self) -> None:
        self.client.fine_tuning.jobs.list(limit=1)

    def check_model(self, model: str) -> None:
        self.client.models.retrieve(model)

    def validate_grader(self, grader: Mapping[str, Any]) -> None:
        self.client.fine_tuning.alpha.graders.validate(grader=dict(grader))

    # ------------------------------------------------------------------ files and jobs
    def upload(self, path: Path) -> str:
        with open(path, "rb") as f:
            return self.client.files.create(file=(path.name, f.read()), purpose="fine-tune").id

    def delete_file(self, file_id: str) -> None:
        self.client.files.delete(file_id)

    def create_job(
        self,
        *,
        model: str,
        training_file: str,
        validation_file: str | None,
        grader: Mapping[str, Any],
        hyperparameters: Mapping[str, Any],
        suffix: str | None,
        seed: int | None,
        metadata: Mapping[str, str],
    ) -> Any:
        import openai

        reinforcement: dict[str, Any] = {"grader": dict(grader)}
        if hyperparameters:
            reinforcement["hyperparameters"] = dict(hyperparameters)
        omit = openai.omit
        return self.client.fine_tuning.jobs.create(
            model=model,
            training_file=training_file,
            validation_file=validation_file if validation_file else omit,
            method={"type": "reinforcement", "reinforcement": reinforcement},
            suffix=suffix if suffix else omit,
            seed=seed if seed is not None else omit,
            metadata=dict(metadata) if metadata else omit,
        )

    def retrieve(self, job_id: str) -> Any:
        return self.client.fine_tuning.jobs.retrieve(job_id)

    def cancel(self, job_id: str) -> Any:
        return self.client.fine_tuning.jobs.cancel(job_id)

    def new_events(self, job_id: str, page_size: int = 100) -> list[Any]:
        """Events not returned before, oldest first. The API lists newest first: read pages until one we saw."""
        fresh = []
        for event in self.client.fine_tuning.jobs.list_events(job_id, limit=page_size):  # auto-paginates
            if event.id in self._seen_events:
                break
            fresh.append(event)
        for event in fresh:
            self._seen_events.add(event.id)
        return fresh[::-1]

    def checkpoints(self, job_id: str) -> list[Any]:
        return list(self.client.fine_tuning.jobs.checkpoints.list(job_id, limit=100))
