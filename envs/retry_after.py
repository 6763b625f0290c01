"""How long an HTTP server asked a client to wait: one reading of `Retry-After` for every client here (the
evaluation service's client, the LLM judge, the OpenAI engine)."""

from __future__ import annotations

import email.utils
import time
from typing import Mapping


def retry_after_seconds(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds from `retry-after-ms`, or `retry-after` in seconds or as an HTTP date; None if absent or unreadable."""
    if not headers:
        return None
    value = headers.get("retry-after-ms")
    try:
        if value is not None:
            return max(0.0, float(value) / 1000.0)
    except (TypeError, ValueError):
        pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except (TypeError, ValueError):
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))
