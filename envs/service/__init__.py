"""The HTTP evaluation service: the app (`app.py`), its HTTP contract (`api.py`) and the token, rate and body
guard in front of it (`guard.py`). It serves verdicts; the reward it reports comes from the reward function
its caller passes to `create_app` (built from rewards/), never from an import here."""

from envs.service.api import (
    EvalOverrides,
    EvaluateRequest,
    RewardResponse,
    VerdictResponse,
    apply_overrides,
    verdict_response,
)
from envs.service.app import BackendUnavailable, RewardFunction, ServiceSettings, create_app, make_backend
from envs.service.guard import OPEN_PATHS, GuardMiddleware, TokenBucketLimiter

__all__ = [
    "BackendUnavailable",
    "EvalOverrides",
    "EvaluateRequest",
    "GuardMiddleware",
    "OPEN_PATHS",
    "RewardFunction",
    "RewardResponse",
    "ServiceSettings",
    "TokenBucketLimiter",
    "VerdictResponse",
    "apply_overrides",
    "create_app",
    "make_backend",
    "verdict_response",
]
