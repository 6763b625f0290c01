"""Ray placement groups, the one way the rollout engines and the learner (one actor or a group) get theirs.

A group that cannot be placed (the cluster lacks the CPUs or GPUs it asks for) would otherwise wait silently
until its startup timeout (15 minutes by default): after `warn_after` seconds it says what it waits for and what
the cluster has free, and at the timeout it raises with the same facts."""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("kernelrl.placement")


def resource_bundle(num_cpus: float, num_gpus: float) -> dict[str, float]:
    """One placement-group bundle; no GPU key when none is asked for (Ray refuses nothing, but logs read better)."""
    return {"CPU": num_cpus, **({"GPU": num_gpus} if num_gpus else {})}


def placed_group(
    bundles: list[dict[str, float]], strategy: str, what: str, timeout: float, warn_after: float = 30.0
) -> Any:
    """A ray.util.placement_group of `bundles`, returned once placed; removed again and RuntimeError after
    `timeout` seconds (or when the wait is interrupted). `what` names the request in messages, e.g.
    "a rollout engine ({'CPU': 1.0, 'GPU': 1.0})"."""
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group

    group = placement_group(bundles, strategy=strategy)
    try:
        first = min(warn_after, timeout)
        try:
            ray.get(group.ready(), timeout=first)
            return group
        except ray.exceptions.GetTimeoutError:
            pass
        if first < timeout:
            log.warning(
                "still waiting for room for %s after %g s (free resources: %s); giving up after %g s",
                what,
                first,
                ray.available_resources(),
                timeout,
            )
            try:
                ray.get(group.ready(), timeout=timeout - first)
                return group
            except ray.exceptions.GetTimeoutError:
                pass
        raise RuntimeError(
            f"no room for {what} in the Ray cluster within {timeout:g} s; free resources: {ray.available_resources()}"
        )
    except BaseException:
        remove_placement_group(group)
        raise
