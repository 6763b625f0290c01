"""The harness's end of its link to the parent: framed messages carrying the request's nonce, phase
announcements and the GPU lock the parent arbitrates (envs/worker/protocol.py frames them).

Separate from the harness's entry point (envs/worker/harness.py) and its evaluation
(envs/worker/evaluation.py) because both use it: the entry point says hello and answers, the
evaluation announces phases and holds the GPU.
"""

from __future__ import annotations

import contextlib
import time
from typing import Iterator

from envs.worker.protocol import read_frame, write_frame


class ParentLink:
    def __init__(self, req_fd: int, res_fd: int):
        self.req_fd, self.res_fd = req_fd, res_fd
        self.nonce: str | None = None
        self.held: str | None = None  # the GPU hold the parent granted: "shared", "exclusive" or None
        self.lent_seconds = 0.0  # spent with a shared hold lent back (envs/worker/compile_lend.py)

    def send(self, message: dict) -> None:
        write_frame(self.res_fd, {**message, "nonce": self.nonce})

    def phase(self, name: str) -> None:
        self.send({"type": "phase", "name": name})

    def quiet(self, seconds: float) -> None:
        """Memory went back to the driver: the parent's GPU lock starts no exclusive hold for `seconds`."""
        self.send({"type": "quiet", "seconds": seconds})

    @contextlib.contextmanager
    def gpu(self, mode: str) -> Iterator[None]:
        """Hold the GPU shared (correctness) or exclusive (timing); the parent arbitrates."""
        self._lock(mode)
        try:
            yield
        finally:
            self._unlock()

    @contextlib.contextmanager
    def lent(self) -> Iterator[None]:
        """Give a shared hold back for CPU-only work (a Triton compile) and take it again after, so a timing
        window waiting for the GPU need not wait for that work; a no-op without a shared hold."""
        if self.held != "shared":
            yield
            return
        import torch

        if torch.cuda.is_initialized():
            torch.cuda.synchronize()  # what this worker already queued on the GPU ends inside its hold
        self._unlock()
        began = time.perf_counter()
        try:
            yield
        finally:
            self.lent_seconds += time.perf_counter() - began
            self._lock("shared")

    def _lock(self, mode: str) -> None:
        self.send({"type": "lock", "mode": mode})
        reply = read_frame(self.req_fd)
        if reply.get("type") != "granted":
            raise RuntimeError(f"expected a lock grant, got {reply!r}")
        self.held = mode

    def _unlock(self) -> None:
        self.held = None
        self.send({"type": "unlock"})
