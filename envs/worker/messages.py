"""What crosses the pipe between a `WorkerSet` and a worker process: one `WorkerRequest`, one `WorkerResult`.

Both are checked where they are read (the harness checks a request, the parent a result), so a malformed
message is a `MalformedMessage` with the field it is about, never a KeyError deep inside an evaluation.
On the wire they stay the JSON objects of envs/worker/protocol.py.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from envs.verdict import Accuracy, HackFinding, Status, TimingStats
from envs.worker.protocol import ProtocolError

MODES = ("evaluate", "check_problem", "profile")


class MalformedMessage(ProtocolError):
    """A request or result that does not have the shape both sides agreed on."""


def _need(message: dict, key: str, types: type | tuple[type, ...], what: str, optional: bool = False) -> Any:
    value = message.get(key)
    if value is None and optional:
        return None
    # bool is an int to isinstance: a flag where a number belongs is still malformed
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in _as_tuple(types)):
        raise MalformedMessage(f"{what}: {key!r} must be {_names(types)}, not {type(value).__name__}")
    return value


def _as_tuple(types: type | tuple[type, ...]) -> tuple[type, ...]:
    return types if isinstance(types, tuple) else (types,)


def _names(types: type | tuple[type, ...]) -> str:
    return " or ".join(t.__name__ for t in _as_tuple(types))


@dataclasses.dataclass(frozen=True)
class WorkerRequest:
    """One request to a worker: evaluate a candidate, check a problem's reference, or profile a candidate."""

    nonce: str
    device: str
    problem: dict[str, Any]  # id, source, tolerance, sizes
    solution: str | None  # None: the reference alone (check_problem, baselines)
    # runs, warmup_ms, anchor_runs, placements, precision, min_placements, launch_allowance_ms,
    # drift_test and anchor_reference_ms (the cached anchor reference's median, None where not known yet); None off CUDA
    timing: dict[str, Any] | None
    max_torch_share: float
    baselines: list[str]  # baselines to measure before the candidate runs
    cpu_rechecks: int
    floor_fraction: float
    correctness: dict[str, Any]  # families, probe, truth
    init_seed: int
    timing_seed: int
    seeds: list[int]
    mode: str = "evaluate"
    profile_calls: int | None = None
    # What one worker may hold on its GPU, {"bytes": n} or {"share": s} of the device's memory; None: unknown, every
    # out-of-memory error is the candidate's (envs/worker/oom.py)
    memory_budget: dict[str, float] | None = None

    def to_message(self) -> dict[str, Any]:
        """The JSON object sent on the pipe (the harness reads it back with `from_message`)."""
        message = {"type": "evaluate", **dataclasses.asdict(self)}
        if self.mode == "evaluate":
            del message["mode"]  # the harness reads a missing mode as an evaluation
        if self.profile_calls is None:
            del message["profile_calls"]
        if self.memory_budget is None:
            del message["memory_budget"]
        return message

    @classmethod
    def from_message(cls, message: dict[str, Any]) -> WorkerRequest:
        what = "worker request"
        if message.get("type") != "evaluate":
            raise MalformedMessage(f"{what}: type must be 'evaluate', not {message.get('type')!r}")
        problem = _need(message, "problem", dict, what)
        _need(problem, "id", str, "worker request problem")
        _need(problem, "source", str, "worker request problem")
        _need(problem, "tolerance", dict, "worker request problem", optional=True)
        _need(problem, "sizes", dict, "worker request problem")
        timing = _need(message, "timing", dict, what, optional=True)
        if timing is not None:
            for key in ("runs", "warmup_ms", "anchor_runs", "placements"):
                _need(timing, key, (int, float), "worker request timing")
            for key in ("precision", "min_placements", "launch_allowance_ms", "anchor_reference_ms"):
                _need(timing, key, (int, float), "worker request timing", optional=True)
            _need(timing, "drift_test", bool, "worker request timing", optional=True)
        correctness = _need(message, "correctness", dict, what)
        _need(correctness, "families", list, "worker request correctness")
        seeds = _need(message, "seeds", list, what)
        if not seeds or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
            raise MalformedMessage(f"{what}: 'seeds' must be a non-empty list of integers")
        baselines = _need(message, "baselines", list, what)
        if not all(isinstance(b, str) for b in baselines):
            raise MalformedMessage(f"{what}: 'baselines' must name baselines")
        memory_budget = _need(message, "memory_budget", dict, what, optional=True)
        if memory_budget is not None:
            for key in ("bytes", "share"):
                _need(memory_budget, key, (int, float), "worker request memory_budget", optional=True)
        mode = message.get("mode") or "evaluate"
        if mode not in MODES:
            raise MalformedMessage(f"{what}: mode must be one of {list(MODES)}, not {mode!r}")
        return cls(
            nonce=_need(message, "nonce", str, what),
            device=_need(message, "device", str, what),
            problem=problem,
            solution=_need(message, "solution", str, what, optional=True),
            timing=timing,
            max_torch_share=_need(message, "max_torch_share", (int, float), what),
            baselines=baselines,
            cpu_rechecks=_need(message, "cpu_rechecks", int, what),
            floor_fraction=_need(message, "floor_fraction", (int, float), what),
            correctness=correctness,
            init_seed=_need(message, "init_seed", int, what),
            timing_seed=_need(message, "timing_seed", int, what),
            seeds=seeds,
            mode=mode,
            profile_calls=_need(message, "profile_calls", int, what, optional=True),
            memory_budget=memory_budget,
        )


def _finite_number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _stats(value: Any, what: str) -> TimingStats | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise MalformedMessage(f"worker result: {what} must be timing statistics, not {type(value).__name__}")
    try:
        return TimingStats(**value)
    except TypeError as e:
        raise MalformedMessage(f"worker result: {what} is not timing statistics ({e})") from None


def _samples(result: dict, name: str) -> tuple[list[float], list[Any] | None]:
    """One callable's timing samples, positive finite numbers only ([] if malformed), and the placement block
    of each kept sample (None when not reported or not one per sample; envs.speedup.group_runs checks the ids)."""
    values, blocks = result.get(f"{name}_samples"), result.get(f"{name}_blocks")
    if not isinstance(values, list):
        return [], None
    if not isinstance(blocks, list) or len(blocks) != len(values):
        blocks = None
    good = [i for i, v in enumerate(values) if isinstance(v, (int, float)) and 0 < v < float("inf")]
    return [float(values[i]) for i in good], None if blocks is None else [blocks[i] for i in good]


# Steps a result may report: the baselines' (up to 5), the correctness phase's (4), the timing phase's (6), and the
# parts (envs.timing BLOCK_PARTS) of the anchor reference's and the candidate's placement blocks: 25, and room to
# spare; more are left out.
MOST_STEPS = 32


def _named_numbers(reported: Any, most: int = 16) -> dict[str, float]:
    """Non-negative numbers by name (at most `most`, names cut at 40 characters): the seconds of the steps inside
    phases ("phase.step"), the most GiB reserved in each phase and step. A report, so what is malformed is left
    out."""
    if not isinstance(reported, dict):
        return {}
    numbers = {str(k)[:40]: _finite_number(v) for k, v in list(reported.items())[:most]}
    return {k: v for k, v in numbers.items() if v is not None and math.isfinite(v) and v >= 0}


def _accuracy(reported: Any) -> Accuracy | None:
    """The worker's accuracy record, or None when it is missing or malformed (it is a report, not a gate)."""
    try:
        return Accuracy.from_dict(reported) if isinstance(reported, dict) else None
    except (TypeError, ValueError):
        return None


def _oom(reported: Any) -> dict[str, Any] | None:
    """The worker's out-of-memory report (envs/worker/oom.py), or None when missing or malformed."""
    if not isinstance(reported, dict) or reported.get("owner") not in ("candidate", "environment"):
        return None
    report: dict[str, Any] = {"owner": reported["owner"], "reason": str(reported.get("reason") or "")[:500]}
    for key in ("held", "request", "budget", "device_free"):
        report[key] = int(v) if (v := _finite_number(reported.get(key))) is not None and math.isfinite(v) else None
    return report


@dataclasses.dataclass(frozen=True)
class WorkerResult:
    """A worker's answer to one request, as the parent may trust it.

    Facts that are reports (accuracy, shares, the floor, samples) fall back to None or [] when malformed; what
    a verdict stands on (timing statistics, measured baselines, notes) makes the whole result malformed. An
    unknown status or a malformed hack report is a `crash`, as a worker that cannot say what happened."""

    status: Status
    healthy: bool = False  # the worker may serve another request
    error: str | None = None
    notes: list[str] = dataclasses.field(default_factory=list)
    hack: HackFinding | None = None
    kernel: TimingStats | None = None
    anchor: TimingStats | None = None
    kernel_samples: list[float] = dataclasses.field(default_factory=list)
    kernel_blocks: list[Any] | None = None
    anchor_samples: list[float] = dataclasses.field(default_factory=list)
    anchor_blocks: list[Any] | None = None
    anchor_seconds: float | None = None
    mismatch: Any = None
    own_kernel_share: float | None = None
    torch_share: float | None = None
    suspicious: str | None = None
    accuracy: Accuracy | None = None
    floor_ms: float | None = None
    # measured now: {"eager": stats dict, "inductor": stats dict or None, "anchor_reference": stats dict where asked}
    baselines: dict[str, Any] | None = None
    degenerate: str | None = None  # check_problem: why the problem is degenerate
    profile: Any = None  # profile mode: the profiler's facts
    steps: dict[str, float] = dataclasses.field(default_factory=dict)  # seconds of steps inside phases, "phase.step"
    # CUDA: the most GiB reserved in each phase and step ("<name>.allocated": held by tensors)
    memory_gib: dict[str, float] = dataclasses.field(default_factory=dict)
    oom: dict[str, Any] | None = None  # the run ended in an out-of-memory error: whose (envs/worker/oom.py)

    @property
    def reserved_peak_gib(self) -> float | None:
        """The most GiB the worker's allocator reserved in any phase (CUDA), or None."""
        reserved = [gib for phase, gib in self.memory_gib.items() if not phase.endswith(".allocated")]
        return max(reserved) if reserved else None

    @property
    def environment_oom(self) -> bool:
        """The run failed on an out-of-memory error that is the environment's (the device full of others)."""
        return self.status in (Status.RUNTIME_ERROR, Status.COMPILE_ERROR) and (self.oom or {}).get("owner") == (
            "environment"
        )

    @classmethod
    def from_message(cls, message: dict[str, Any]) -> WorkerResult:
        try:
            status = Status(message.get("status"))
        except ValueError:
            status = Status.CRASH
        notes = message.get("notes") or []
        if not isinstance(notes, list):
            raise MalformedMessage(f"worker result: notes must be a list, not {type(notes).__name__}")
        hack = message.get("hack") if status is Status.HACK else None
        if status is Status.HACK and not (isinstance(hack, dict) and set(hack) == {"category", "reason"}):
            status, hack = Status.CRASH, None  # a malformed report is not a verdict
        baselines = message.get("baselines") or None
        if baselines is not None:
            if not isinstance(baselines, dict):
                raise MalformedMessage("worker result: baselines must map a baseline to its timing statistics")
            for name, stats in baselines.items():
                _stats(stats, f"the {name} baseline")
        error, suspicious, floor = message.get("error"), message.get("suspicious"), message.get("floor_ms")
        kernel_samples, kernel_blocks = _samples(message, "kernel")
        anchor_samples, anchor_blocks = _samples(message, "anchor")
        return cls(
            status=status,
            healthy=bool(message.get("healthy", False)),
            error=str(error)[:8000] if error else None,
            notes=[str(n)[:500] for n in notes][:10],
            hack=HackFinding(str(hack["category"]), str(hack["reason"])[:2000]) if hack else None,
            kernel=_stats(message.get("kernel") or None, "kernel"),
            anchor=_stats(message.get("anchor") or None, "anchor"),
            kernel_samples=kernel_samples,
            kernel_blocks=kernel_blocks,
            anchor_samples=anchor_samples,
            anchor_blocks=anchor_blocks,
            anchor_seconds=_finite_number(message.get("anchor_seconds")),
            mismatch=message.get("mismatch"),
            own_kernel_share=_finite_number(message.get("own_kernel_share")),
            torch_share=_finite_number(message.get("torch_share")),
            suspicious=str(suspicious)[:500] if suspicious else None,
            accuracy=_accuracy(message.get("accuracy")),
            floor_ms=float(floor) if _finite_number(floor) is not None and 0 < floor < math.inf else None,
            baselines=baselines,
            degenerate=message.get("degenerate"),
            profile=message.get("profile"),
            steps=_named_numbers(message.get("steps"), most=MOST_STEPS),
            memory_gib=_named_numbers(message.get("memory_gib"), most=64),  # phases and steps, each twice
            oom=_oom(message.get("oom")),
        )
