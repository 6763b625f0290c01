"""Client-side limits for API rollout engines: token buckets (requests/min, tokens/min), retry delays.

Async counterparts of what envs.antihack.judge does with threads: the rollout engine runs many
requests on one event loop, so waiting must not block the loop.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Awaitable, Callable


__all__ = ["AsyncTokenBucket", "backoff_delay"]


class AsyncTokenBucket:
    """`per_minute` units per minute, at most `burst_s` seconds' worth saved up (at least one unit).
    Waiters are served in arrival order. A request larger than the capacity waits
    for a full bucket and leaves a debt that later requests wait out, so the long-run rate holds.
    `per_minute` None or 0: unlimited."""

    def __init__(
        self,
        per_minute: float | None,
        burst_s: float = 10.0,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ):
        self.rate = (per_minute or 0.0) / 60.0
        self.capacity = max(1.0, self.rate * burst_s)
        self.tokens = self.capacity
        self._clock, self._sleep = clock, sleep
        self._last = clock()
        self._lock: asyncio.Lock | None = None

    @property
    def unlimited(self) -> bool:
        return self.rate <= 0

    def _refill(self) -> None:
        now = self._clock()
        self.tokens = min(self.capacity, self.tokens + (now - self._last) * self.rate)
        self._last = now

    async def acquire(self, amount: float = 1.0) -> float:
        """Take `amount` units, waiting until they are there; returns the seconds waited."""
        if self.unlimited:
            return 0.0
        if self._lock is None:
            self._lock = asyncio.Lock()
        waited = 0.0
        async with self._lock:  # held while sleeping: later arrivals queue behind, in order
            self._refill()
            need = min(amount, self.capacity)
            if self.tokens < need:
                delay = (need - self.tokens) / self.rate
                await self._sleep(delay)
                waited = delay
                self._refill()
            self.tokens -= amount
        return waited

    def adjust(self, amount: float) -> None:
        """Charge (positive) or refund (negative) units once the true cost is known."""
        if not self.unlimited:
            self._refill()
            self.tokens = min(self.capacity, self.tokens - amount)

    def __getstate__(self):  # an asyncio.Lock belongs to one event loop: a copy gets its own
        return {**self.__dict__, "_lock": None}

    def __setstate__(self, state):  # monotonic clocks differ between processes: restart the refill clock
        self.__dict__.update(state)
        self._last = self._clock()


def backoff_delay(
    attempt: int,
    base_s: float,
    max_s: float,
    retry_after: float | None = None,
    max_retry_after_s: float = 300.0,
    rng: random.Random | None = None,
) -> float:
    """Delay before retry `attempt` (0 = the first retry): exponential with "equal jitter" (half fixed,
    half random, so concurrent clients spread out but never retry at once), and never shorter than
    the server's Retry-After (itself capped at `max_retry_after_s`)."""
    rng = rng or random
    delay = min(max_s, base_s * 2**attempt) * (0.5 + 0.5 * rng.random())
    if retry_after is not None:
        delay = max(delay, min(retry_after, max_retry_after_s))
    return delay
