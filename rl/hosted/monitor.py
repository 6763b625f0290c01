"""Follow a fine-tuning job until it ends: status, events, checkpoints, our verdicts -> one row per poll.

Rows go to metrics.jsonl and W&B through rl.tracking.RunLogger (the open loop's writer), at the job's step
(the largest `step` its metrics events reported; rows never go back in steps). Every event is also appended to
events.jsonl. Ctrl-C asks whether to cancel the job: `y` cancels it, anything else (or no terminal) leaves it
running on OpenAI's side and prints how to resume monitoring it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any, Callable

from rl.hosted.api import TERMINAL_STATUSES, FineTuningAPI
from rl.hosted.metrics import checkpoint_metrics, event_metrics, split_graded, verdict_metrics

__all__ = ["JobOutcome", "JobMonitor"]

log = logging.getLogger("kernelrl.hosted")


@dataclasses.dataclass
class JobOutcome:
    job_id: str
    status: str  # a TERMINAL_STATUSES value, or "running" when monitoring stopped first
    fine_tuned_model: str | None = None
    checkpoints: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    error: str | None = None
    interrupted: bool = False  # Ctrl-C
    cancelled_by_user: bool = False
    step: int = 0
    graded: int = 0  # grading requests our service answered while we watched


class JobMonitor:
    def __init__(
        self,
        api: FineTuningAPI,
        job_id: str,
        logger: Any,
        run_dir: Path,
        *,
        recorder: Any = None,
        validation_ids: tuple[str, ...] = (),
        poll_interval_s: float = 30.0,
        confirm_cancel: bool = True,
        ask: Callable[[str], str] = input,
        is_tty: Callable[[], bool] = lambda: sys.stdin.isatty(),
        sleep: Callable[[float], None] = time.sleep,
        max_polls: int | None = None,
        max_transient_failures: int = 20,
    ):
        self.api, self.job_id, self.logger, self.recorder = api, job_id, logger, recorder
        self.validation_ids, self.poll_interval_s, self.confirm_cancel = validation_ids, poll_interval_s, confirm_cancel
        self.ask, self.is_tty, self.sleep, self.max_polls = ask, is_tty, sleep, max_polls
        self.max_transient_failures = max_transient_failures
        self.events_path = Path(run_dir) / "events.jsonl"
        self.outcome = JobOutcome(job_id, "running")
        self._checkpoint_ids: set[str] = set()
        self._status: str | None = None
        self._started = time.monotonic()

    def poll_once(self) -> Any:
        job = self.api.retrieve(self.job_id)
        if job.status != self._status:
            log.info("job %s: %s", self.job_id, job.status)
            self._status = job.status
        events = self.api.new_events(self.job_id)
        with open(self.events_path, "a") as f:
            for e in events:
                f.write(
                    json.dumps(
                        {
                            "id": e.id,
                            "created_at": e.created_at,
                            "level": e.level,
                            "type": e.type,
                            "message": e.message,
                            "data": e.data,
                        }
                    )
                    + "\n"
                )
                if e.type != "metrics":
                    (log.warning if e.level in ("warn", "error") else log.info)("job event: %s", e.message)
        step, row = event_metrics(events)
        if step is not None:
            self.outcome.step = max(self.outcome.step, step)
        for checkpoint in self.api.checkpoints(self.job_id):
            if checkpoint.id in self._checkpoint_ids:
                continue
            self._checkpoint_ids.add(checkpoint.id)
            self.outcome.checkpoints.append(
                {"id": checkpoint.id, "step": checkpoint.step_number, "model": checkpoint.fine_tuned_model_checkpoint}
            )
            row.update(checkpoint_metrics(checkpoint))
            log.info("checkpoint at step %d: %s", checkpoint.step_number, checkpoint.fine_tuned_model_checkpoint)
        if self.recorder is not None:
            graded = self.recorder.drain()
            self.outcome.graded += len(graded)
            for split, items in split_graded(graded, self.validation_ids).items():
                if items:
                    row.update(verdict_metrics(items, split))
        if row:
            row["time/elapsed"] = time.monotonic() - self._started
            self.logger.log(self.outcome.step, row)
        self.outcome.status = job.status if job.status in TERMINAL_STATUSES else "running"
        self.outcome.fine_tuned_model = job.fine_tuned_model
        if job.error is not None and job.error.message:
            self.outcome.error = f"{job.error.code}: {job.error.message}"
        return job

    def run(self) -> JobOutcome:
        """Poll until the job ends. Transient API failures (connection, 429, 5xx: after the SDK's own retries)
        are logged and polled through, up to `max_transient_failures` in a row; anything else propagates."""
        import openai

        transient = (openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError)
        polls = failures = 0
        try:
            while True:
                try:
                    job = self.poll_once()
                    failures = 0
                except transient as e:
                    failures += 1
                    if failures > self.max_transient_failures:
                        raise
                    log.warning(
                        "polling job %s failed (%s, %d in a row); retrying", self.job_id, type(e).__name__, failures
                    )
                    self.sleep(self.poll_interval_s * min(2**failures, 32))
                    continue
                polls += 1
                if job.status in TERMINAL_STATUSES or (self.max_polls is not None and polls >= self.max_polls):
                    return self.outcome
                self.sleep(self.poll_interval_s)
        except KeyboardInterrupt:
            self.outcome.interrupted = True
            self._on_interrupt()
            return self.outcome

    def _on_interrupt(self) -> None:
        answer = ""
        if self.confirm_cancel and self.is_tty():
            try:
                answer = (
                    self.ask(
                        f"\nCancel fine-tuning job {self.job_id} on OpenAI? Otherwise it keeps running "
                        "(and billing) and can be monitored again. [y/N] "
                    )
                    .strip()
                    .lower()
                )
            except (EOFError, KeyboardInterrupt):
                answer = ""
        if answer in ("y", "yes"):
            job = self.api.cancel(self.job_id)
            self.outcome.cancelled_by_user = True
            self.outcome.status = job.status if job.status in TERMINAL_STATUSES else "cancelled"
            log.warning("job %s cancelled (status %s)", self.job_id, job.status)
        else:
            log.warning(
                "stopped monitoring; job %s keeps running on OpenAI's side, and a grader served by this "
                "process stops with it (grading requests fail until one runs again). Resume with: "
                "python scripts/train.py +experiment=gpt5_triton hosted.job_id=%s",
                self.job_id,
                self.job_id,
            )
