"""What the trainer adapters share: finding the problem a sample is about, the answer text in a completion,
and scoring answers through the evaluation service with the project's one reward function."""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from typing import Any, Iterable, Mapping, Sequence

from envs.service.client import TOKEN_ENV, AsyncKernelRLClient, KernelRLClient, RetryPolicy, ScoreRequest
from envs.verdict import Verdict
from rewards.kernel_reward import DEFAULT_DELTA, check_delta, reward_for_verdict

__all__ = ["KernelRewardScorer", "Scored", "completion_text", "problem_ref"]


def problem_ref(ground_truth: Any = None, extra_info: Mapping[str, Any] | None = None) -> tuple[str, str | None]:
    """(problem id, expected problem SHA-256 or None) of a dataset row.

    Looked up in `extra_info["problem_id"]` first, then in `ground_truth`: a problem id ("L1_01_gelu_tanh"), a
    mapping with "problem_id", or that mapping as a JSON string. "problem_sha256" beside the id (either place)
    makes the service refuse (409) a different version of the problem than the dataset was built from."""
    for source in (extra_info, ground_truth):
        if isinstance(source, str) and source.lstrip().startswith("{"):
            try:
                source = json.loads(source)
            except json.JSONDecodeError:
                raise ValueError(f"ground_truth looks like JSON but is not: {source[:80]!r}") from None
        if isinstance(source, Mapping) and source.get("problem_id"):
            pid, sha = source["problem_id"], source.get("problem_sha256")
            if not isinstance(pid, str) or (sha is not None and not isinstance(sha, str)):
                raise ValueError(f"problem_id and problem_sha256 must be strings, not {pid!r}, {sha!r}")
            return pid, sha or None
        if source is ground_truth and isinstance(source, str) and source.strip():
            return source.strip(), None
    raise ValueError(
        "no problem id in this sample: put it in extra_info['problem_id'] or ground_truth "
        f"(got ground_truth={ground_truth!r}, extra_info={extra_info!r})"
    )


def completion_text(completion: Any) -> str:
    """The answer in a completion: a string as it is; a conversation (list of {"role", "content"} messages) as
    its last assistant message's text (a content given as parts keeps the text parts)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Mapping):
        completion = [completion]
    if isinstance(completion, Sequence):
        for message in reversed(completion):
            if isinstance(message, Mapping) and message.get("role", "assistant") == "assistant":
                content = message.get("content")
                if isinstance(content, str):
                    return content
                if isinstance(content, Sequence):
                    return "".join(
                        p.get("text", "") for p in content if isinstance(p, Mapping) and p.get("type", "text") == "text"
                    )
                return ""
        return ""
    raise TypeError(f"a completion is a string or a list of messages, not {type(completion).__name__}")


@dataclasses.dataclass(frozen=True)
class Scored:
    reward: float  # rewards/kernel_reward.py on the verdict, at the scorer's delta
    verdict: Verdict


class KernelRewardScorer:
    """Answers scored through the service: the verdict from the service, the reward from rewards/.

    One per process: the HTTP clients are made on first use, and again in a forked child (a trainer's reward
    workers), since a connection pool must not be shared across fork."""

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        delta: float = DEFAULT_DELTA,
        concurrency: int = 8,
        timeout: float = 600.0,
        retry: RetryPolicy | None = None,
        token_env: str = TOKEN_ENV,
    ):
        self.url = url
        self.token = token if token is not None else (os.environ.get(token_env, "").strip() or None)
        self.delta = check_delta(delta)
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        self.concurrency, self.timeout, self.retry = concurrency, timeout, retry
        self._lock = threading.Lock()
        self._client: KernelRLClient | None = None
        self._pid = -1

    @property
    def client(self) -> KernelRLClient:
        with self._lock:
            if self._client is None or self._pid != os.getpid():
                self._client = KernelRLClient(
                    self.url,
                    self.token,
                    timeout=self.timeout,
                    retry=self.retry,
                    max_connections=max(self.concurrency, 4),
                )
                self._pid = os.getpid()
            return self._client

    def async_client(self) -> AsyncKernelRLClient:
        """A new async client (bound to the caller's event loop; close it with `aclose`)."""
        return AsyncKernelRLClient(
            self.url, self.token, timeout=self.timeout, retry=self.retry, max_connections=max(self.concurrency, 4)
        )

    def _scored(self, verdict: Verdict) -> Scored:
        return Scored(reward_for_verdict(verdict, self.delta), verdict)

    def score(self, problem_id: str, answer: str, problem_sha256: str | None = None) -> Scored:
        return self._scored(
            self.client.evaluate(ScoreRequest(problem_id, answer, problem_sha256=problem_sha256)).verdict
        )

    def score_many(self, items: Iterable[tuple[str, str, str | None]]) -> list[Scored]:
        """(problem id, answer, sha or None) each, scored `concurrency` at a time; results in order. A failure
        to get a verdict (service down after retries, a rejected request) is raised: a reward of 0 for it
        would teach the policy something false."""
        requests = [ScoreRequest(pid, answer, problem_sha256=sha) for pid, answer, sha in items]
        return [self._scored(r.verdict) for r in self.client.evaluate_many(requests, self.concurrency)]

    async def score_async(self, problem_id: str, answer: str, problem_sha256: str | None = None) -> Scored:
        async with self.async_client() as client:
            result = await client.evaluate(ScoreRequest(problem_id, answer, problem_sha256=problem_sha256))
        return self._scored(result.verdict)

    def close(self) -> None:
        with self._lock:
            if self._client is not None and self._pid == os.getpid():
                self._client.close()
            self._client = None
