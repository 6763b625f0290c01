"""The typed result of evaluating one candidate: what the trainer, the CLI and the cache exchange.

A verdict says what happened, never what it is worth: the reward is rewards/'s to compute from it."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any


class Status(str, enum.Enum):
    CORRECT = "correct"
    INCORRECT = "incorrect"
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    CRASH = "crash"
    HACK = "hack"
    # The driver's CPU stage could not judge the candidate (envs/guard.py): over one of its bounds (size,
    # nesting, analysis time), or a stage failed on it, our bug that the candidate found (kept for triage).
    REJECTED = "rejected"
    INTERNAL_ERROR = "internal_error"


# The steps of `Verdict.phase_seconds` timed under the GPU's exclusive lock (a candidate's, and the baselines' in
# a cold pass): one GPU runs them one evaluation at a time, so their sum over a batch is the least time the batch's
# rewards can take there, however many workers judge it.
EXCLUSIVE_STEPS = (
    "timing.timed_runs",
    "timing.tail_check",
    "baseline.eager",
    "baseline.inductor",
    "baseline.anchor_reference",
)


@dataclasses.dataclass(frozen=True)
class HackFinding:
    category: str
    reason: str


@dataclasses.dataclass(frozen=True)
class TimingStats:
    """Milliseconds over `runs` timed runs of one callable."""

    median_ms: float
    mean_ms: float
    std_ms: float
    min_ms: float
    max_ms: float
    p10_ms: float
    p90_ms: float
    runs: int

    @classmethod
    def from_samples(cls, samples_ms: list[float]) -> TimingStats:
        if not samples_ms:
            raise ValueError("no timing samples")
        s = sorted(samples_ms)
        n = len(s)
        mean = sum(s) / n
        var = sum((x - mean) ** 2 for x in s) / n

        def pct(q: float) -> float:
            return s[min(n - 1, int(round(q * (n - 1))))]

        return cls(pct(0.5), mean, var**0.5, s[0], s[-1], pct(0.1), pct(0.9), n)


@dataclasses.dataclass(frozen=True)
class Timings:
    """Kernel and baseline times measured by the same method on the same device. `eager` and `inductor`
    are the cached first measurements of the problem; `anchor` is eager PyTorch timed again in the same
    window as the kernel, its runs interleaved with the kernel's (re-anchoring); `anchor_reference` is what
    such an anchor read when the baselines were measured (eager in the same placement blocks, as the timed
    callable and as the anchor), cached with them: None where they were measured without it (cached before it
    existed, or with re-anchoring off)."""

    kernel: TimingStats | None = None
    eager: TimingStats | None = None
    inductor: TimingStats | None = None
    anchor: TimingStats | None = None
    anchor_reference: TimingStats | None = None


@dataclasses.dataclass(frozen=True)
class SpeedupInterval:
    """How sure `speedup` is: a bootstrap interval over the timed runs it was derived from."""

    low: float
    high: float
    confidence: float  # e.g. 0.95
    anchored: bool  # the baseline was timed in the kernel's window (re-anchored), not only taken from the cache
    # anchor median now / what an anchor read when the baselines were cached (Timings.anchor_reference; the
    # cached eager median where there is none): how far the GPU moved since. None without an anchor.
    drift: float | None
    resamples: int
    # Placement blocks resampled as units before the runs inside them (two-level bootstrap); 1: the runs
    # resampled as one sample, as in every verdict cached before blocks were reported.
    blocks: int = 1
    # Each placement block's median of the kernel's runs and of the anchor's, in block order (None in verdicts
    # cached before them, and for the anchor without one): how one evaluation's runs lie block by block, the
    # data to compare point estimators on (scripts/bench_spread.py --estimators).
    kernel_block_ms: list[float] | None = None
    anchor_block_ms: list[float] | None = None


@dataclasses.dataclass(frozen=True)
class ErrorStats:
    """How far one set of outputs is from another: the largest elementwise |difference| and its root mean square."""

    max_abs: float
    rms: float


@dataclasses.dataclass(frozen=True)
class Accuracy:
    """How the outputs were judged (envs/truth.py), worst over every comparison of the evaluation.

    rule: "reference" when every comparison passed the plain tolerance against the PyTorch reference;
    "fp64_truth" when one failed it and the float64 truth rule decided (accepted or rejected). The errors
    against the truth are known when the truth was computed (always with `fp64_truth: always`)."""

    rule: str
    candidate_vs_reference: ErrorStats | None = None
    candidate_vs_truth: ErrorStats | None = None
    reference_vs_truth: ErrorStats | None = None
    truth_multiple: float | None = None  # the candidate may miss the truth by this many times the reference's error
    families: list[str] = dataclasses.field(default_factory=list)  # input families the trials ran
    probe: str | None = None  # the sensitivity probe: "passed|failed (Nx)", "off", "not run", "skipped: why"

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Accuracy:
        d = dict(d)
        for key in ("candidate_vs_reference", "candidate_vs_truth", "reference_vs_truth"):
            if d.get(key) is not None:
                d[key] = ErrorStats(**{k: float(v) for k, v in d[key].items()})
        return cls(**d)


@dataclasses.dataclass(frozen=True)
class Verdict:
    status: Status
    problem_id: str
    device: str  # "cpu" or the GPU model name, e.g. "NVIDIA H200"
    error: str | None = None  # text an LLM can act on
    hack: HackFinding | None = None
    timings: Timings | None = None
    speedup: float | None = None  # t_baseline / t_kernel; None when not measured (CPU)
    baseline: str | None = None  # which baseline `speedup` divides by
    cached: bool = False
    phase_seconds: dict[str, float] = dataclasses.field(default_factory=dict)
    # GPU: the most GiB the worker's allocator reserved during each phase (the worker's own tensors and the
    # candidate's), and as "<phase>.allocated" the most its tensors held; empty on CPU and in verdicts cached
    # before it existed
    phase_memory_gib: dict[str, float] = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)
    mismatch: dict[str, Any] | None = None  # where and by how much outputs differed
    own_kernel_share: float | None = None  # GPU: share of device time in the candidate's own kernels
    judge: dict[str, Any] | None = None  # the optional LLM judge's opinion, recorded beside the checks
    suspicious: str | None = None  # why a timing looked physically implausible (then re-measured)
    speedup_interval: SpeedupInterval | None = None  # GPU: bootstrap interval of `speedup`
    torch_share: float | None = None  # cost of the candidate's own PyTorch compute / the reference's (ATen ops)
    accuracy: Accuracy | None = None  # which rule judged the outputs, and the errors behind it
    # GPU: the anti-hack's physical floor of the problem, ms: the longer of its minimum bytes at peak DRAM bandwidth
    # and its FLOPs at peak (envs/antihack/runtime.py floor_ms). None on CPU and in verdicts cached before it existed.
    floor_ms: float | None = None
    traceback: str | None = None  # internal_error: the stage's traceback (its last frames), for triage

    @property
    def correct(self) -> bool:
        return self.status is Status.CORRECT

    @property
    def outcome(self) -> str:
        """The verdict in a word or two, as the corpus and the measurement sets' manifests name it: `correct`,
        `hack <category>` or the status."""
        return f"hack {self.hack.category}" if self.hack else self.status.value

    @property
    def exclusive_seconds(self) -> float:
        """Seconds this evaluation held its GPU exclusively (EXCLUSIVE_STEPS); 0 on CPU and for a cached verdict's
        own lookup (its phases are those of the evaluation that produced it)."""
        return sum(self.phase_seconds.get(step, 0.0) for step in EXCLUSIVE_STEPS)

    @property
    def speed_of_light(self) -> float | None:
        """floor_ms / the kernel's median time: 1.0 is a kernel at the physical floor, 0.25 four times slower.
        None unless the verdict is correct and both times are known (never on CPU)."""
        t = self.timings
        if not self.correct or self.floor_ms is None or t is None or t.kernel is None or t.kernel.median_ms <= 0:
            return None
        return self.floor_ms / t.kernel.median_ms

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["status"] = self.status.value
        d["correct"] = self.correct
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Verdict:
        d = dict(d)
        d.pop("correct", None)
        d.pop("reward", None)  # verdicts cached before the reward left them
        hack = d.pop("hack", None)
        timings = d.pop("timings", None)
        interval = d.pop("speedup_interval", None)
        accuracy = d.pop("accuracy", None)
        if timings is not None:
            timings = Timings(**{k: TimingStats(**v) if v else None for k, v in timings.items()})
        return cls(
            status=Status(d.pop("status")),
            hack=HackFinding(**hack) if hack else None,
            timings=timings,
            speedup_interval=SpeedupInterval(**interval) if interval else None,
            accuracy=Accuracy.from_dict(accuracy) if accuracy else None,
            **d,
        )
