"""What the evaluation service checks before any route reads a request's body: bearer-token authentication
(constant-time), a per-client token-bucket rate limit (429 + Retry-After) and the body size limit (413).

`GuardMiddleware` is a plain ASGI middleware, separate from the app (envs/service/app.py) because it is the
service's security boundary: it holds no route logic and can be read and tested on its own.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import time
from typing import Iterable

from starlette.responses import JSONResponse

OPEN_PATHS = frozenset({"/healthz"})  # reachable without a token


# --- rate limit -----------------------------------------------------------------------------------
class TokenBucketLimiter:
    """One bucket of `burst` requests per client key, refilled at `rate` per second. Used from the
    event loop only (no locking needed)."""

    def __init__(self, rate: float, burst: int, clock=time.monotonic, max_keys: int = 100_000):
        self.rate, self.burst, self.clock, self.max_keys = rate, burst, clock, max_keys
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, last refill time)

    def take(self, key: str) -> float:
        """0.0 if a request may pass now (and count it), else the seconds until one may."""
        if self.rate <= 0:
            return 0.0
        now = self.clock()
        tokens, last = self._buckets.get(key, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - last) * self.rate)
        if tokens >= 1.0:
            self._buckets[key] = (tokens - 1.0, now)
            if len(self._buckets) > self.max_keys:
                self._forget_full(now)
            return 0.0
        self._buckets[key] = (tokens, now)
        return (1.0 - tokens) / self.rate

    def _forget_full(self, now: float) -> None:
        """Drop buckets that have refilled (their clients are idle): they would start full anyway."""
        for key, (tokens, last) in list(self._buckets.items()):
            if tokens + (now - last) * self.rate >= self.burst:
                del self._buckets[key]


# --- authentication, rate limit and body limit, before any route reads the body --------------------
def _digest(token: str | bytes) -> bytes:
    return hashlib.sha256(token.encode() if isinstance(token, str) else token).digest()


class GuardMiddleware:
    """Pure ASGI middleware (not BaseHTTPMiddleware, which would hide the body stream from us)."""

    def __init__(
        self,
        app,
        tokens: Iterable[str],
        limiter: TokenBucketLimiter,
        max_body_bytes: int,
        open_paths: frozenset[str] = OPEN_PATHS,
    ):
        self.app, self.limiter, self.max_body_bytes, self.open_paths = app, limiter, max_body_bytes, open_paths
        self._digests = [_digest(t) for t in tokens]

    def _client(self, scope) -> tuple[str, bool]:
        """(rate-limit key, authenticated). A valid token is the client; otherwise its address is."""
        header = dict(scope.get("headers") or ()).get(b"authorization", b"")
        scheme, _, presented = header.partition(b" ")
        if self._digests and scheme.lower() == b"bearer" and presented.strip():
            # Hashing first makes every comparison the same length; compare_digest is constant-time,
            # and every configured token is compared so timing does not tell which one matched.
            presented_digest = _digest(presented.strip())
            match = None
            for i, d in enumerate(self._digests):
                if hmac.compare_digest(presented_digest, d):
                    match = i
            if match is not None:
                return f"token:{match}", True
        host = (scope.get("client") or ("unknown", 0))[0]
        return f"ip:{host}", not self._digests

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        open_path = scope["path"] in self.open_paths
        if not open_path:
            key, authenticated = self._client(scope)
            scope.setdefault("state", {})["client"] = key
            wait = self.limiter.take(key)
            if wait > 0:
                return await _reply(
                    scope,
                    receive,
                    send,
                    429,
                    "rate limit exceeded; retry later",
                    {"Retry-After": str(max(1, math.ceil(wait)))},
                )
            if not authenticated:
                return await _reply(
                    scope,
                    receive,
                    send,
                    401,
                    "missing or invalid bearer token",
                    {"WWW-Authenticate": 'Bearer realm="kernelrl"'},
                )
        # Body limit: refuse by the declared length first, then count what actually arrives (a chunked
        # body declares none), never reading past the limit.
        length = dict(scope.get("headers") or ()).get(b"content-length")
        if length is not None:
            try:
                declared = int(length)
            except ValueError:
                return await _reply(scope, receive, send, 400, "invalid Content-Length")
            if declared > self.max_body_bytes:
                return await _reply(scope, receive, send, 413, self._too_large(), {"Connection": "close"})
        buffered, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            size += len(message.get("body", b""))
            if size > self.max_body_bytes:
                return await _reply(scope, receive, send, 413, self._too_large(), {"Connection": "close"})
            buffered.append(message)
            if not message.get("more_body", False):
                break

        async def replay():
            return buffered.pop(0) if buffered else await receive()

        await self.app(scope, replay, send)

    def _too_large(self) -> str:
        return f"request body exceeds the limit of {self.max_body_bytes} bytes"


async def _reply(scope, receive, send, status: int, detail: str, headers: dict[str, str] | None = None) -> None:
    await JSONResponse({"detail": detail}, status, headers=headers)(scope, receive, send)
