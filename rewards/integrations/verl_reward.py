"""KernelRL's reward as a verl custom reward function.

verl loads this file by path (`custom_reward_function.path`, or `reward.custom_reward_function.path` in the
newer config layout) and calls the function named by `.name` once per response:

    compute_score(data_source, solution_str, ground_truth, extra_info=None, **reward_kwargs) -> float

`compute_score_async` is the same as a coroutine, for verl versions that await an async reward function.
The problem id comes from `extra_info["problem_id"]` or `ground_truth` (rewards.integrations.common.problem_ref);
`reward_kwargs` from verl's config may set `url`, `delta`, `timeout` and `token_env` (the name of the
environment variable holding the bearer token; default KERNELRL_SERVICE_TOKEN: tokens stay out of configs).
Without `url`, $KERNELRL_SERVICE_URL, else http://127.0.0.1:8000. Example: conf/integrations/verl.yaml.

A response the service cannot score (the service down after the client's retries, an unknown problem id) raises
rather than scoring 0: verl stops with the reason instead of training on a false reward.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Any

try:  # verl imports this file by path: make KernelRL importable when it is not installed as a package
    import rewards.integrations.common  # noqa: F401
except ImportError:  # pragma: no cover - depends on how the caller was started
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from envs.service.client import TOKEN_ENV, URL_ENV  # noqa: E402
from rewards.integrations.common import KernelRewardScorer, problem_ref  # noqa: E402
from rewards.kernel_reward import DEFAULT_DELTA  # noqa: E402

__all__ = ["compute_score", "compute_score_async"]

_scorers: dict[tuple, KernelRewardScorer] = {}
_lock = threading.Lock()


def _scorer(url: str | None, delta: float, timeout: float, token_env: str) -> KernelRewardScorer:
    key = (url, float(delta), float(timeout), token_env, os.environ.get(URL_ENV), os.environ.get(token_env))
    with _lock:
        scorer = _scorers.get(key)
        if scorer is None:
            scorer = _scorers[key] = KernelRewardScorer(url, delta=delta, timeout=timeout, token_env=token_env)
        return scorer


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict | None = None,
    *,
    url: str | None = None,
    delta: float = DEFAULT_DELTA,
    timeout: float = 600.0,
    token_env: str = TOKEN_ENV,
    **_: Any,
) -> float:
    """The reward of one response: 0 unless correct, else sigmoid(1 + max(0, speedup) - delta)."""
    problem_id, sha = problem_ref(ground_truth, extra_info)
    return _scorer(url, delta, timeout, token_env).score(problem_id, solution_str, sha).reward


async def compute_score_async(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict | None = None,
    *,
    url: str | None = None,
    delta: float = DEFAULT_DELTA,
    timeout: float = 600.0,
    token_env: str = TOKEN_ENV,
    **_: Any,
) -> float:
    problem_id, sha = problem_ref(ground_truth, extra_info)
    return (await _scorer(url, delta, timeout, token_env).score_async(problem_id, solution_str, sha)).reward
