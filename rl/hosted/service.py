"""The KernelRL evaluation service inside the driver's process, recording every verdict it returns.

OpenAI's grader calls `POST /reward` (envs/service/: bearer token, body limit, bounded queue); the backend
behind it is the run's evaluation pool. Each verdict is also kept here (and appended to verdicts.jsonl), so
the run's reward, correct rate and hack mix come from our own verdicts, not from OpenAI's summary.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import logging
import socket
import threading
import time
from pathlib import Path
from typing import Any, Iterable

from envs.problems import Problem
from envs.verdict import Verdict
from rewards.kernel_reward import DEFAULT_DELTA, reward_for_verdict

__all__ = ["GradedSample", "HostedService", "RecordingBackend", "is_loopback"]

log = logging.getLogger("kernelrl.hosted")


@dataclasses.dataclass(frozen=True)
class GradedSample:
    t: float  # time.time() when the verdict was returned
    problem_id: str
    verdict: Verdict
    reward: float  # rewards/kernel_reward.py at the service's delta, as the grader was answered without overrides


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


class RecordingBackend:
    """The service's backend: `evaluate` as the wrapped one, each verdict kept for `drain()` and journaled."""

    def __init__(self, backend: Any, journal: Path | None = None, delta: float = DEFAULT_DELTA):
        self.backend, self.delta = backend, delta
        self._lock = threading.Lock()
        self._pending: list[GradedSample] = []
        self.total = 0
        self._closed = False
        self._journal = open(journal, "a") if journal is not None else None

    def evaluate(self, problem: Problem, answer: str) -> Verdict:
        verdict = self.backend.evaluate(problem, answer)
        graded = GradedSample(time.time(), problem.id, verdict, reward_for_verdict(verdict, self.delta))
        with self._lock:
            self._pending.append(graded)
            self.total += 1
            if self._journal is not None:
                self._journal.write(
                    json.dumps(
                        {
                            "t": graded.t,
                            "problem_id": problem.id,
                            "status": verdict.status.value,
                            "hack": verdict.hack.category if verdict.hack else None,
                            "reward": graded.reward,
                            "speedup": verdict.speedup,
                            "cached": verdict.cached,
                        }
                    )
                    + "\n"
                )
                self._journal.flush()
        return verdict

    def discard_one(self, problem_id: str) -> bool:
        """Forget one pending verdict of `problem_id` (the grader's self-check: not a training sample; a resumed
        job's own requests may be pending beside it, so only one verdict of that problem goes)."""
        with self._lock:
            for i, graded in enumerate(self._pending):
                if graded.problem_id == problem_id:
                    del self._pending[i]
                    return True
        return False

    def drain(self) -> list[GradedSample]:
        with self._lock:
            out, self._pending = self._pending, []
        return out

    def close(self) -> None:
        """Idempotent: the app's shutdown and HostedService.__exit__ both call it."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._journal is not None:
                self._journal.close()
                self._journal = None
        close = getattr(self.backend, "close", None)
        if close is not None:
            close()


class HostedService:
    """`create_app` under uvicorn in a daemon thread. Use as a context manager; `url` is the local address."""

    def __init__(
        self,
        backend: Any,
        problems: Iterable[Problem],
        token: str,
        host: str = "127.0.0.1",
        port: int = 0,
        journal: Path | None = None,
        delta: float | None = None,
        baseline: str = "inductor",
        max_concurrent: int = 32,
        max_queued: int = 1024,
    ):
        from envs.service import ServiceSettings

        self.delta = DEFAULT_DELTA if delta is None else delta
        self.recorder = RecordingBackend(backend, journal, self.delta)
        self.problems = list(problems)
        self.host, self.port = host, port
        # One client holds the token: OpenAI's grader, which sends a whole batch at once. The per-client rate
        # limit would only turn its batch into 429s, so it is off; the bounded queue (503 beyond) still holds.
        self.settings = ServiceSettings(
            tokens=(token,),
            rate_per_second=0.0,
            max_concurrent_evaluations=max_concurrent,
            max_queued_evaluations=max_queued,
            default_baseline=baseline,
            backend_name="hosted",
        )
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.url = ""

    def __enter__(self) -> HostedService:
        import uvicorn

        from envs.service import create_app
        from rewards.kernel_reward import reward_function

        app = create_app(self.recorder, self.problems, self.settings, reward_function(self.delta))
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        self.port = sock.getsockname()[1]
        shown = f"[{self.host}]" if family == socket.AF_INET6 else self.host
        self.url = f"http://{shown}:{self.port}"
        self._server = uvicorn.Server(uvicorn.Config(app, lifespan="on", log_level="warning"))
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, daemon=True, name="kernelrl-grader"
        )
        self._thread.start()
        deadline = time.monotonic() + 60
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError(f"the grader service did not start on {self.url}")
            time.sleep(0.05)
        log.info("KernelRL grader service on %s (%d problems)", self.url, len(self.problems))
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(30)
        self.recorder.close()
