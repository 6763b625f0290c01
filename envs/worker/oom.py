"""Whose CUDA out-of-memory error it is: the candidate's, or the environment's.

Processes sharing a GPU (the colocated recipe: learner, generation engine and the evaluation workers; or two
evaluators) can fill it, and then an allocation of an honest reference or candidate fails with
torch.OutOfMemoryError: the environment's bad luck, which must not become the candidate's verdict (a false
zero reward). So when an evaluation ends in an OOM the worker decides whose it is (`attribute`):

- the candidate's when its worker process holds more than its budget (`torch.cuda.memory_reserved` plus the
  failed request): the candidate asked for more than its share of the device. Its verdict stays
  `runtime_error`, with the numbers in the error.
- the environment's when the process stays within its budget and the device really had no room: the parent
  retries the request after a backoff in a fresh worker (envs/worker/worker_set.py); after
  `EvalSettings.oom_retries` retries the verdict is `internal_error`, saying that the GPU was out of memory
  because of other processes.

The budget (`EvalSettings.worker_memory_gib`; auto: the device's memory x the pool's GPU share / the workers
on the GPU) is what one worker may hold. "The device had no room": its free memory (torch.cuda.mem_get_info,
read when the error is caught) is below the request plus `FREE_SLACK_BYTES` (memory others freed meanwhile,
the allocator's rounding). That check keeps a candidate from raising an OutOfMemoryError of its own on a
device with room to spare to be retried; where the device's free memory is unknown (CPU) it is skipped.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any

FREE_SLACK_BYTES = 1 << 30
_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
_REQUEST = re.compile(r"Tried to allocate ([0-9]+(?:\.[0-9]+)?) ?(B|KiB|MiB|GiB|TiB)")


def requested_bytes(error: str) -> int | None:
    """The failed request's size from PyTorch's message ("Tried to allocate 2.00 GiB"), or None. The message
    may be a candidate's own (it can raise OutOfMemoryError with any text): a size no float holds is None."""
    m = _REQUEST.search(error or "")
    if m is None:
        return None
    size = float(m.group(1)) * _UNITS[m.group(2)]
    return int(size) if math.isfinite(size) else None


@dataclasses.dataclass(frozen=True)
class OomAttribution:
    owner: str  # "candidate" | "environment"
    reason: str  # one sentence with the numbers

    @property
    def environment(self) -> bool:
        return self.owner == "environment"


def _gib(n: int | float) -> str:
    return f"{n / 2**30:.2f} GiB"


def attribute(
    reserved: int, request: int | None, budget: int | None, error: str = "", device_free: int | None = None
) -> OomAttribution:
    """Whose OOM it is, from the worker process's reserved bytes, the failed request (None: parsed from
    `error`, else 0), the worker's budget (None: unknown, so the candidate's as before) and the device's free
    bytes when the error was caught (None: unknown, not checked)."""
    if request is None:
        request = requested_bytes(error) or 0
    held = f"the evaluation's process held {_gib(reserved)} and asked for {_gib(request)} more"
    if budget is None:
        return OomAttribution("candidate", f"{held}; no memory budget is known for it")
    if reserved + request > budget:
        return OomAttribution("candidate", f"{held}, over its budget of {_gib(budget)} on this GPU")
    if device_free is not None and device_free >= request + FREE_SLACK_BYTES:
        return OomAttribution(
            "candidate", f"{held}, within its budget of {_gib(budget)}, but the GPU had {_gib(device_free)} free"
        )
    free = f" ({_gib(device_free)} free)" if device_free is not None else ""
    return OomAttribution(
        "environment",
        f"{held}, within its budget of {_gib(budget)}: the GPU was full{free} because of other processes",
    )


def find_oom(exc: BaseException | None) -> BaseException | None:
    """The torch.OutOfMemoryError in `exc`'s chain (causes and contexts: the worker re-raises a candidate's
    error as its verdict `from None`, which keeps it as the context), or None."""
    import torch

    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, torch.OutOfMemoryError):
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def worker_budget(spec: dict[str, Any] | None, device: Any) -> int | None:
    """The worker's budget in bytes from the request's `memory_budget` ({"bytes": n} or {"share": s}, s of the
    device's total memory), or None (no spec, or a share off CUDA)."""
    if not spec:
        return None
    if spec.get("bytes") is not None:
        return int(spec["bytes"])
    if spec.get("share") is not None and getattr(device, "type", device) == "cuda":
        import torch

        return int(torch.cuda.get_device_properties(device).total_memory * float(spec["share"]))
    return None


def oom_report(exc: BaseException, spec: dict[str, Any] | None, device: Any) -> dict[str, Any] | None:
    """What the worker reports beside its status when `exc` came from an OOM (None otherwise): the facts read
    now, on this process, and whose it is."""
    oom = find_oom(exc)
    if oom is None:
        return None
    reserved, free = 0, None
    if getattr(device, "type", device) == "cuda":
        import torch

        try:
            reserved = int(torch.cuda.memory_reserved(device))
            free = int(torch.cuda.mem_get_info(device)[0])
        except Exception:  # a broken context: the numbers stay unknown
            pass
    budget = worker_budget(spec, device)
    request = requested_bytes(str(oom))
    verdict = attribute(reserved, request, budget, str(oom), free)
    return {
        "owner": verdict.owner,
        "reason": verdict.reason,
        "reserved": reserved,
        "request": request,
        "budget": budget,
        "device_free": free,
    }
