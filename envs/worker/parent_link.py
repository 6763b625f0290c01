"""The harness's end of its link to the parent: framed messages carrying the request's nonce, phase
announcements and the GPU lock the parent arbitrates (envs/worker/protocol.py frames them).

Separate from the harness's entry point (envs/worker/harness.py) and its evaluation
(envs/worker/evaluation.py) because both use it: the entry point says hello and answers, the
evaluation announces phases and holds the GPU.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

from envs.worker.protocol import read_frame, write_frame


class ParentLink:
    def __init__(self, req_fd: int, res_fd: int):
        self.req_fd, self.res_fd = req_fd, res_fd
        self.nonce: str | None = None

    def send(self, message: dict) -> None:
        write_frame(self.res_fd, {**message, "nonce": self.nonce})

    def phase(self, name: str) -> None:
        self.send({"type": "phase", "name": name})

    @contextlib.contextmanager
    def gpu(self, mode: str) -> Iterator[None]:
        """Hold the GPU shared (correctness) or exclusive (timing); the parent arbitrates."""
        self.send({"type": "lock", "mode": mode})
        reply = read_frame(self.req_fd)
        if reply.get("type") != "granted":
            raise RuntimeError(f"expected a lock grant, got {reply!r}")
        try:
            yield
        finally:
            self.send({"type": "unlock"})
