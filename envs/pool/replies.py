"""Where every request of the pool is answered: one place that sets futures and counts what was answered.

Whoever moves a job to DONE answers its requests here, exactly once; a caller that cancelled meanwhile is
skipped.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import time

from envs.pool.metrics import PoolMetrics
from envs.pool.scheduler import Job, Request
from envs.verdict import Verdict


class Replies:
    def __init__(self, metrics: PoolMetrics):
        self._metrics = metrics

    def send(
        self,
        requests: list[Request],
        verdict: Verdict | None = None,
        error: BaseException | None = None,
        job: Job | None = None,
    ) -> None:
        """Answer `requests` with `verdict` (its phase times completed from `job`) or with `error`."""
        now = time.monotonic()
        for request in requests:
            if error is not None:
                self._metrics.count("errors")
                try:
                    request.future.set_exception(error)
                except concurrent.futures.InvalidStateError:
                    pass  # cancelled by its caller
                continue
            answer = verdict
            if job is not None:
                phases = {**verdict.phase_seconds, "pool_queue": job.queue_wait, "total": now - request.submitted}
                answer = dataclasses.replace(verdict, phase_seconds=phases)
            if job is not None and job.candidate.solution is None:  # baselines ahead of candidates: no verdict
                self._metrics.count("baseline_jobs")
            else:
                self._metrics.observe("total", now - request.submitted)
                self._metrics.verdict(answer.status)
                self._metrics.count("answered")
            try:
                request.future.set_result(answer)
            except concurrent.futures.InvalidStateError:
                pass
