"""Whose CUDA out-of-memory error it is: the candidate's, or the environment's.

Processes sharing a GPU (the colocated recipe: learner, generation engine and the evaluation workers; or two
evaluators) can fill it, and then an allocation of an honest reference or candidate fails with
torch.OutOfMemoryError (or CUDA's own "out of memory", `is_oom`): the environment's bad luck, which must not
become the candidate's verdict (a false zero reward). So when an evaluation ends in an OOM the worker decides
whose it is (`attribute`):

- the environment's when no candidate code had run yet (the reference, the baselines, the truth): the parent
  retries the request after a backoff in a fresh worker (envs/worker/worker_set.py); after
  `EvalSettings.oom_retries` retries the verdict is `internal_error`, saying that the GPU was out of memory
  because of other processes. Each such error also lowers how many evaluations the GPU runs at once
  (envs/worker/gpu_concurrency.py).
- the candidate's when its own code held more than its budget: the peak of device memory a candidate call
  held above what was in use when the call began (`CandidateMemory`), plus the failed request when the call
  itself raised it. Its verdict stays `runtime_error`, with the numbers in the error. What the harness holds
  (inputs, reference outputs, the float64 truth, the checks' buffers) is never counted against the candidate:
  at full size it can exceed a worker's whole budget, and counting it made honest kernels the owners of OOMs
  on a full GPU (docs/gpu-notes.md).
- the candidate's, too, when its call raised the OOM while the device still had room for the request (it
  raised OutOfMemoryError itself); otherwise the environment's, retried as above.

The budget (`EvalSettings.worker_memory_gib`; auto: the device's memory x the pool's GPU share / the workers
on the GPU) is what one worker's candidate may hold, and never less than `REFERENCE_ALLOWANCE` times what one
call of the reference held: an honest kernel may need what the reference needs, and a problem whose tensors
are large must not make every honest candidate over budget. "The device had room": its free memory
(torch.cuda.mem_get_info, read when the error is caught) is at least the request plus `FREE_SLACK_BYTES`
(memory others freed meanwhile, the allocator's rounding); where it is unknown (CPU) it is not checked.
Timed runs are not measured (the allocator's statistics would sit inside the timed window); an OOM there is
judged by the peaks of the candidate's earlier, checked calls.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import re
from typing import Any, Iterator

FREE_SLACK_BYTES = 1 << 30
REFERENCE_ALLOWANCE = 2
CUDA_OOM = "CUDA error: out of memory"
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
    held: int,
    request: int | None,
    budget: int | None,
    error: str = "",
    device_free: int | None = None,
    *,
    candidate_ran: bool = True,
    in_candidate: bool = True,
) -> OomAttribution:
    """Whose OOM it is, from the most the candidate's code held (bytes), the failed request (None: parsed from
    `error`, else 0), the budget (None: unknown, so the candidate's as before), the device's free bytes when
    the error was caught (None: unknown, not checked), whether any candidate code had run, and whether the
    request was the candidate call's own (then it counts toward what the candidate held)."""
    if request is None:
        request = requested_bytes(error) or 0
    asked = request if in_candidate else 0
    if in_candidate:
        held_text = f"the candidate's code held {_gib(held)} and asked for {_gib(request)} more"
    else:
        held_text = f"the candidate's code held at most {_gib(held)}; the evaluation asked for {_gib(request)} more"
    if budget is None:
        return OomAttribution("candidate", f"{held_text}; no memory budget is known for it")
    if not candidate_ran:
        return OomAttribution(
            "environment",
            f"the evaluation asked for {_gib(request)} before any of the candidate's code ran: the GPU was full"
            f"{_free(device_free)} because of other processes",
        )
    if held + asked > budget:
        return OomAttribution("candidate", f"{held_text}, over its budget of {_gib(budget)} on this GPU")
    if in_candidate and device_free is not None and device_free >= request + FREE_SLACK_BYTES:
        return OomAttribution(
            "candidate", f"{held_text}, within its budget of {_gib(budget)}, but the GPU had {_gib(device_free)} free"
        )
    return OomAttribution(
        "environment",
        f"{held_text}, within its budget of {_gib(budget)}: the GPU was full{_free(device_free)} because of "
        "other processes",
    )


def _free(device_free: int | None) -> str:
    return f" ({_gib(device_free)} free)" if device_free is not None else ""


class CandidateMemory:
    """What the candidate's own code held on the GPU during one evaluation, measured around its calls: per call,
    the allocator's peak above the memory in use when the call began (outputs and temporaries, not the
    harness's tensors). Also what one reference call held, for the budget's floor, and the most the worker's
    allocator reserved and allocated in each phase (`phase_peaks`): the allocator's peak statistics are read here
    only, since reading a call's peak means resetting them."""

    def __init__(self, device: Any):
        self.cuda = getattr(device, "type", device) == "cuda"
        self.device = device
        self.ran = False  # any candidate code (its import, its build, a call) has started
        self.raised_in_candidate = False  # the last exception left a candidate call
        self.peak = 0
        self.reference_peak = 0
        # the allocator's reserved and allocated peaks before the last reset, since phase_peaks()
        self._phase_peaks = (0, 0)

    def _fold_peaks(self) -> tuple[int, int]:
        import torch

        reserved, allocated = self._phase_peaks
        return (
            max(reserved, int(torch.cuda.max_memory_reserved(self.device))),
            max(allocated, int(torch.cuda.max_memory_allocated(self.device))),
        )

    def phase_peaks(self) -> tuple[int, int] | None:
        """Bytes: the most the allocator reserved, and the most its tensors held (allocated), since the last
        call; then both start over from what is reserved and allocated now. Reserved above allocated is the
        cache's fragmentation, except across a guarded call, whose poison allocates every free block to fill it.
        None on CPU, or where the statistics cannot be read (a broken CUDA context)."""
        if not self.cuda:
            return None
        import torch

        try:
            peaks = self._fold_peaks()
            torch.cuda.reset_peak_memory_stats(self.device)
        except Exception:  # the allocator's statistics unreadable: not measured
            return None
        self._phase_peaks = (0, 0)
        return peaks

    def _start(self) -> int | None:
        if not self.cuda:
            return None
        import torch

        try:
            self._phase_peaks = self._fold_peaks()
            torch.cuda.reset_peak_memory_stats(self.device)
            return int(torch.cuda.memory_allocated(self.device))
        except Exception:  # the allocator's statistics unreadable: this call is not measured
            return None

    def _above(self, start: int | None) -> int:
        if start is None:
            return 0
        import torch

        try:
            return max(0, int(torch.cuda.max_memory_allocated(self.device)) - start)
        except Exception:
            return 0

    def begin(self, measure: bool = True) -> int | None:
        """Candidate code starts; returns what `end` needs (None: not measured, e.g. a timed run, where the
        allocator's statistics would be read inside the timed window)."""
        self.ran = True
        return self._start() if measure else None

    def end(self, start: int | None, raised: bool) -> None:
        self.raised_in_candidate = raised
        self.peak = max(self.peak, self._above(start))

    @contextlib.contextmanager
    def candidate(self) -> Iterator[None]:
        """Around candidate code that is not a call (its import)."""
        start, returned = self.begin(), False
        try:
            yield
            returned = True
        finally:
            self.end(start, raised=not returned)

    @contextlib.contextmanager
    def reference(self) -> Iterator[None]:
        start = self._start()
        try:
            yield
        finally:
            self.reference_peak = max(self.reference_peak, self._above(start))


def is_oom(exc: BaseException) -> bool:
    """torch.OutOfMemoryError (the caching allocator's), or CUDA's own allocation failure outside it
    (cudaErrorMemoryAllocation: a module load, a library's workspace, a context), which PyTorch raises as
    torch.AcceleratorError "CUDA error: out of memory" with no request size."""
    import torch

    if isinstance(exc, torch.OutOfMemoryError):
        return True
    accelerator_error = getattr(torch, "AcceleratorError", None)
    return accelerator_error is not None and isinstance(exc, accelerator_error) and CUDA_OOM in str(exc)


def find_oom(exc: BaseException | None) -> BaseException | None:
    """The out-of-memory error (`is_oom`) in `exc`'s chain (causes and contexts: the worker re-raises a
    candidate's error as its verdict `from None`, which keeps it as the context), or None."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if is_oom(exc):
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


def oom_report(
    exc: BaseException, spec: dict[str, Any] | None, device: Any, memory: CandidateMemory | None = None
) -> dict[str, Any] | None:
    """What the worker reports beside its status when `exc` came from an OOM (None otherwise): the facts read
    now, on this process, what the candidate's code held (`memory`; None: nothing measured, as if no
    candidate code held anything but the request was its own), and whose it is."""
    oom = find_oom(exc)
    if oom is None:
        return None
    free = None
    if getattr(device, "type", device) == "cuda":
        import torch

        try:
            free = int(torch.cuda.mem_get_info(device)[0])
        except Exception:  # a broken context: the number stays unknown
            pass
    budget = worker_budget(spec, device)
    if budget is not None and memory is not None:
        budget = max(budget, REFERENCE_ALLOWANCE * memory.reference_peak)
    request = requested_bytes(str(oom))
    held = memory.peak if memory is not None else 0
    ran = memory.ran if memory is not None else True
    inside = memory.raised_in_candidate if memory is not None else True
    verdict = attribute(held, request, budget, str(oom), free, candidate_ran=ran, in_candidate=inside)
    return {
        "owner": verdict.owner,
        "reason": verdict.reason,
        "held": held,
        "request": request,
        "budget": budget,
        "device_free": free,
    }
