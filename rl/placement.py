"""Waiting for a Ray placement group, the one way the rollout engines and the learner group do it.

A group that cannot be placed (the cluster lacks the CPUs or GPUs it asks for) would otherwise wait silently
until its startup timeout (15 minutes by default): after `warn_after` seconds it says what it waits for and what
the cluster has free, and at the timeout it raises with the same facts."""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("kernelrl.placement")


def wait_for_placement(group: Any, what: str, timeout: float, warn_after: float = 30.0) -> None:
    """Block until `group` (a ray.util.placement_group) is placed; RuntimeError after `timeout` seconds.
    `what` names the request in messages, e.g. "a rollout engine ({'CPU': 1.0, 'GPU': 1.0})"."""
    import ray

    first = min(warn_after, timeout)
    try:
        ray.get(group.ready(), timeout=first)
        return
    except ray.exceptions.GetTimeoutError:
        if first >= timeout:
            raise RuntimeError(f"no room for {what} in the Ray cluster within {timeout:g} s; free resources: "
                               f"{ray.available_resources()}") from None
    log.warning("still waiting for room for %s after %g s (free resources: %s); giving up after %g s", what, first,
                ray.available_resources(), timeout)
    try:
        ray.get(group.ready(), timeout=timeout - first)
    except ray.exceptions.GetTimeoutError:
        raise RuntimeError(f"no room for {what} in the Ray cluster within {timeout:g} s; free resources: "
                           f"{ray.available_resources()}") from None
