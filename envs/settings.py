"""Evaluation settings: one typed record shared by the evaluator, the CLI, the Hydra configs and the cache key."""

from __future__ import annotations

import dataclasses
from typing import Any


# Input families the correctness trials can derive from get_inputs() (implemented in envs/inputs.py;
# named here so that settings are checked without importing torch). The default three keep the
# candidate's correctness calls at 5 with the probe; `alternating` and `ramp` are there to add.
INPUT_FAMILIES = ("outliers", "block_scale", "alternating", "ramp", "large_magnitude")


@dataclasses.dataclass(frozen=True)
class PhaseTimeouts:
    """Wall-clock seconds allowed per phase of one evaluation (waiting for the GPU lock excluded)."""

    load: float = 120.0  # import the problem, build the reference model
    baseline: float = 900.0  # time eager and TorchInductor (includes torch.compile)
    compile: float = 120.0  # import the solution, build ModelNew
    correctness: float = 300.0  # all trials, including Triton JIT compilation on first launch
    timing: float = 180.0

    def as_dict(self) -> dict[str, float]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class StepBudget:
    """Seconds one step of a candidate phase (a call of the candidate's code and the harness's work around
    it) may take: fixed_s + multiple x the reference model's seconds per call, plus up to compile_s per
    Triton launch still compiling. The phase timeouts stay upper bounds. Why: envs/worker/progress.py."""

    fixed_s: float
    multiple: float
    compile_s: float = 0.0

    def step_seconds(self, reference_s: float) -> float:
        return self.fixed_s + self.multiple * max(reference_s, 0.0)


@dataclasses.dataclass(frozen=True)
class StepDeadlines:
    """Step budgets per device. GPU: honest calls take milliseconds (full size: eager >= 1 ms), so 5 s
    covers the harness's work (the profiler's start is the slowest) and 100x eager a slow but correct
    kernel; compiling is excused. CPU (Triton interpreter): a call costs a fixed overhead per launch and
    program, 2-900 ms for the built-in references at the small size against 0.005-110 ms for eager
    PyTorch, so the fixed part dominates, with room for a loaded machine."""

    cuda: StepBudget = StepBudget(fixed_s=5.0, multiple=100.0, compile_s=60.0)
    cpu: StepBudget = StepBudget(fixed_s=10.0, multiple=100.0)

    def for_device(self, device: str) -> StepBudget:
        return self.cuda if device == "cuda" else self.cpu

    @classmethod
    def from_mapping(cls, m: dict[str, Any]) -> StepDeadlines:
        reject_unknown(cls, m, "deadlines")
        budgets = {}
        for device, budget in m.items():
            reject_unknown(StepBudget, dict(budget), f"deadlines.{device}")
            budgets[device] = dataclasses.replace(getattr(cls(), device), **budget)
        return cls(**budgets)


@dataclasses.dataclass(frozen=True)
class CpuStageLimits:
    """Bounds of the driver's CPU stage (extraction, canonicalisation, static analysis) for one candidate.
    A candidate over one is `rejected` with the bound named. Honest kernels stay far inside: the built-in
    references and the red-team corpus are 0.5-4 KB, 55-1,100 AST nodes, nested at most 18 deep."""

    max_answer_chars: int = 1_000_000  # the model's whole answer
    max_code_chars: int = 200_000  # the extracted code
    max_ast_nodes: int = 50_000
    max_ast_depth: int = 100  # the analysis walks nested code recursively, a few frames a level
    max_resolution_depth: int = 100  # names resolved through names (aliases, containers, returns)
    analysis_seconds: float = 5.0  # wall time of the static analysis

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            if not getattr(self, f.name) > 0:
                raise ValueError(f"cpu_stage.{f.name} must be > 0, not {getattr(self, f.name)!r}")


@dataclasses.dataclass(frozen=True)
class EvalSettings:
    device: str = "auto"  # cpu | cuda | auto (cuda when available)
    size: str | None = None  # full | small; None: full on cuda, small on cpu
    baseline: str = "inductor"  # what speedup divides by: inductor | eager
    correctness_trials: int = 5
    timed_runs: int = 100
    warmup_ms: float = 25.0
    seed: int | None = None  # None: fresh unpredictable seeds for every evaluation
    timeouts: PhaseTimeouts = PhaseTimeouts()  # upper bounds per phase
    deadlines: StepDeadlines = StepDeadlines()  # derived from the problem's reference time, within them
    cpu_stage: CpuStageLimits = CpuStageLimits()  # bounds of the driver-side stage (envs/guard.py)
    memory_limit_gb: float = 16.0  # host RSS of one worker and its children
    # CPU-time backstop (envs/worker/cpu_backstop.py): each phase may use cpu_cores x its timeout in CPU
    # seconds over the worker's process tree; an honest worker keeps about one core busy, far inside it.
    cpu_cores: float = 2.0
    workers: int = 1  # worker processes (per GPU on cuda)
    # CUDA out-of-memory errors (envs/worker/oom.py): a worker holding more than `worker_memory_gib` of its GPU
    # when one is raised is the candidate's (runtime_error); within it, the device was full of other processes:
    # the request is retried in a fresh worker after `oom_backoff_s` (doubling), at most `oom_retries` times,
    # then the verdict is internal_error. None: auto, the device's memory x `gpu_share` / `workers`, on cuda
    # only (on cpu: no budget, every OOM is the candidate's). `gpu_share` is the evaluator's share of its GPU:
    # the pool sets it from pool.gpus_per_actor; 1.0 for a lone evaluator.
    worker_memory_gib: float | None = None
    gpu_share: float = 1.0
    oom_retries: int = 2
    oom_backoff_s: float = 2.0
    max_evals_per_worker: int = 200  # recycle warm workers now and then
    # auto | on | off: replace a worker's harness by forking it from a pre-imported zygote in the same
    # sandbox (envs/worker/zygote.py) instead of starting a new sandbox (seconds of imports). auto: on, on cpu
    # and on cuda (3.8x the evaluations/min of fresh sandboxes on model samples on an H200, the same verdicts:
    # docs/gpu-notes.md). A zygote is itself replaced after max_forks_per_zygote forks.
    fork_workers: str = "auto"
    max_forks_per_zygote: int = 100
    startup_timeout: float = 180.0
    cpu_rechecks: int = 3  # extra calls on CPU whose outputs are re-checked (GPU re-checks timed runs)
    max_speedup: float = 50.0  # above this a measurement is repeated in a fresh worker; if it persists: hack
    floor_fraction: float = 0.9  # kernel median below this share of the physical floor: same treatment
    # Re-anchoring (GPU): time eager PyTorch again in the kernel's window, `anchor_runs` runs interleaved
    # with the kernel's, and derive the speedup from that (envs/speedup.py) instead of the cached baseline.
    reanchor: bool = True
    anchor_runs: int = 50
    # The drift test (envs.speedup.drift_detected): the anchor divides the speedup only where its runs show the GPU
    # reading differently from when the anchor reference was cached (their median more than 2% from it, or the
    # 99% interval of the ratio leaving out 1); elsewhere the cached reference does, and sequential timing judges
    # the kernel's runs alone, so the anchor's own placement noise neither moves the speedup nor keeps the blocks
    # running. It never moves a speedup more than 2% from the anchored one.
    drift_test: bool = True
    # The candidate's timed runs (and the anchor's) split over this many copies of the inputs in new device
    # memory (envs.worker.outcome.move_to_fresh_placement): where a tensor lands moves a kernel's time by a
    # few percent, so one placement per evaluation makes the speedup depend on an allocation accident. The
    # block means average that spread out as 1/sqrt(blocks); 48 is the fewest that kept repeated evaluations'
    # speedups within the reproducibility target on the H200, at about a quarter less throughput than 8
    # (docs/gpu-notes.md has the measurements).
    placements: int = 48
    # Sequential timing: after `min_placements` blocks (and every 4 more), stop once the speedup's 95%
    # interval is within ± this share of the speedup (0: always all `placements` blocks). GPU time goes to
    # the kernels whose speedup is still uncertain; docs/evaluation.md has what it saved and what it cost.
    timing_precision: float = 0.01
    min_placements: int = 12
    # Host time per call left out of the timing (envs.timing.QueuedCudaClock): > 0 queues the start event behind
    # a spin kernel of up to this many ms, so the events measure the call's device work, and host time only beyond
    # it: speedups are device-time speedups. 0 times a call as the host launches it, Python and launch overhead
    # included (KernelBench's way): for a kernel well under 0.1 ms that overhead is most of the sample, and it
    # moves with the host's load (docs/evaluation.md has what each way measured).
    launch_allowance_ms: float = 0.5
    # PyTorch compute the candidate may run outside its kernels, as a share of the reference's cost
    # (FLOPs and bytes of the ATen ops at the problem's size, envs/antihack/cost.py); above it: baseline_kernel.
    max_torch_share: float = 0.25
    # Correctness fidelity (envs/inputs.py, envs/truth.py; docs/evaluation.md, "How a candidate is evaluated"):
    input_families: tuple[str, ...] = ("outliers", "block_scale", "large_magnitude")
    sensitivity_probe: bool = True  # perturb a few input elements; the output must follow the reference's
    fp64_truth: str = "on_mismatch"  # on_mismatch | always | off: when the float64 truth is computed
    sandbox: str = "auto"  # auto | required | off: run workers inside bubblewrap (envs/worker/sandbox.py)
    sandbox_hide: tuple[str, ...] = ()  # more paths the sandboxed worker must not see (the cache's is added)

    def __post_init__(self) -> None:
        if self.device not in ("cpu", "cuda", "auto"):
            raise ValueError(f"device must be cpu, cuda or auto, not {self.device!r}")
        if self.size not in (None, "full", "small"):
            raise ValueError(f"size must be full or small, not {self.size!r}")
        if self.baseline not in ("inductor", "eager"):
            raise ValueError(f"baseline must be inductor or eager, not {self.baseline!r}")
        if self.sandbox is False:  # YAML 1.1 reads a bare `off` as false
            object.__setattr__(self, "sandbox", "off")
        if self.sandbox not in ("auto", "required", "off"):
            raise ValueError(f"sandbox must be auto, required or off, not {self.sandbox!r}")
        if isinstance(self.sandbox_hide, str) or not all(isinstance(p, str) for p in self.sandbox_hide):
            raise ValueError("sandbox_hide must be a list of paths")
        object.__setattr__(self, "sandbox_hide", tuple(self.sandbox_hide))
        if isinstance(self.fork_workers, bool):  # YAML 1.1 reads bare on/off as booleans
            object.__setattr__(self, "fork_workers", "on" if self.fork_workers else "off")
        if self.fork_workers not in ("auto", "on", "off"):
            raise ValueError(f"fork_workers must be auto, on or off, not {self.fork_workers!r}")
        if self.max_forks_per_zygote < 1:
            raise ValueError("max_forks_per_zygote must be >= 1")
        if not self.cpu_cores > 0:
            raise ValueError(f"cpu_cores must be > 0, not {self.cpu_cores!r}")
        if self.correctness_trials < 1 or self.timed_runs < 1 or self.workers < 1:
            raise ValueError("correctness_trials, timed_runs and workers must be >= 1")
        if self.worker_memory_gib is not None and not self.worker_memory_gib > 0:
            raise ValueError(f"worker_memory_gib must be > 0 or null, not {self.worker_memory_gib!r}")
        if not 0 < self.gpu_share <= 1:
            raise ValueError(f"gpu_share must be in (0, 1], not {self.gpu_share!r}")
        if self.oom_retries < 0 or self.oom_backoff_s < 0:
            raise ValueError("oom_retries and oom_backoff_s must be >= 0")
        if self.placements < 1:
            raise ValueError("placements must be >= 1")
        if not 0 <= self.timing_precision < 1:
            raise ValueError(f"timing_precision must be in [0, 1), not {self.timing_precision!r}")
        if self.min_placements < 1:
            raise ValueError("min_placements must be >= 1")
        if not 0 <= self.launch_allowance_ms <= 10:
            raise ValueError(f"launch_allowance_ms must be in [0, 10], not {self.launch_allowance_ms!r}")
        if self.reanchor and self.anchor_runs < 1:
            raise ValueError("anchor_runs must be >= 1 when reanchor is on")
        if not 0 <= self.max_torch_share:
            raise ValueError(f"max_torch_share must be >= 0, not {self.max_torch_share!r}")
        families = (self.input_families,) if isinstance(self.input_families, str) else tuple(self.input_families or ())
        unknown = [f for f in families if f not in INPUT_FAMILIES]
        if unknown or len(set(families)) != len(families):
            raise ValueError(f"input_families must be distinct names from {list(INPUT_FAMILIES)}, not {list(families)}")
        object.__setattr__(self, "input_families", families)  # a Hydra list becomes a hashable tuple
        if self.fp64_truth not in ("on_mismatch", "always", "off"):
            raise ValueError(f"fp64_truth must be on_mismatch, always or off, not {self.fp64_truth!r}")

    def trial_count(self) -> int:
        """Correctness trials per evaluation: the first draws get_inputs(), each family gets one of the next.
        The sensitivity probe (a candidate call on moved get_inputs()) takes the place of a later
        get_inputs() trial where there is one, so the candidate is called correctness_trials times."""
        families = 1 + len(self.input_families)
        trials = max(self.correctness_trials, families)
        return trials - 1 if self.sensitivity_probe and trials > families else trials

    def hiding(self, *paths: str | None) -> EvalSettings:
        """These settings with `paths` (None skipped) added to what the sandbox hides from workers."""
        extra = tuple(str(p) for p in paths if p is not None and str(p) not in self.sandbox_hide)
        return dataclasses.replace(self, sandbox_hide=self.sandbox_hide + extra) if extra else self

    def forks_workers(self, device: str) -> bool:
        """Whether workers on `device` (cpu | cuda) are forked from a zygote."""
        return self.fork_workers != "off"

    def memory_budget(self, device: str) -> dict[str, float] | None:
        """What one worker may hold on its GPU, as the worker request carries it: {"bytes": n}, {"share": s} of
        the device's memory (the worker reads the total), or None (cpu without worker_memory_gib)."""
        if self.worker_memory_gib is not None:
            return {"bytes": int(self.worker_memory_gib * 2**30)}
        return {"share": self.gpu_share / self.workers} if device == "cuda" else None

    def resolved_size(self, device: str) -> str:
        return self.size or ("full" if device == "cuda" else "small")

    def cache_fields(self, device: str, sandboxed: bool | None = None) -> dict[str, Any]:
        """What changes a verdict (not how the evaluator is run), and what a caller may trust: a verdict
        obtained where the sandbox was not guaranteed is never served to one that requires it. Only
        `sandbox: required` guarantees it (auto may run without), so only its verdicts carry the mark, and
        every other key is what it was before the mark existed. `sandboxed` overrides the mode's answer
        (True: the keys of guaranteed-sandboxed verdicts, which a caller not requiring it may read too)."""
        fields = {
            "size": self.resolved_size(device),
            "baseline": self.baseline,
            "trials": self.correctness_trials,
            "runs": self.timed_runs,
            "anchor_runs": self.anchor_runs if self.reanchor else 0,
            **({"drift_test": True} if self.reanchor and self.drift_test else {}),
            "max_torch_share": self.max_torch_share,
            **({"placements": self.placements} if self.placements != 1 else {}),
            **(
                {"precision": self.timing_precision, "min_placements": self.min_placements}
                if self.timing_precision
                else {}
            ),
            **({"launch_allowance_ms": self.launch_allowance_ms} if self.launch_allowance_ms else {}),
            "families": list(self.input_families),
            "probe": self.sensitivity_probe,
            "truth": self.fp64_truth,
        }
        guaranteed = self.sandbox == "required" if sandboxed is None else sandboxed
        if guaranteed:
            fields["sandbox"] = "required"
        return fields

    @classmethod
    def from_mapping(cls, m: dict[str, Any]) -> EvalSettings:
        m = dict(m)
        timeouts = m.pop("timeouts", None) or {}
        deadlines = m.pop("deadlines", None) or {}
        cpu_stage = dict(m.pop("cpu_stage", None) or {})
        reject_unknown(cls, m, "evaluation")
        reject_unknown(CpuStageLimits, cpu_stage, "cpu_stage")
        return cls(
            timeouts=PhaseTimeouts(**timeouts),
            deadlines=StepDeadlines.from_mapping(dict(deadlines)),
            cpu_stage=CpuStageLimits(**cpu_stage),
            **m,
        )


def reject_unknown(cls: type, m: dict[str, Any], what: str) -> None:
    """A config mapping may only name fields of the dataclass it becomes (a typo is an error, not ignored)."""
    unknown = set(m) - {f.name for f in dataclasses.fields(cls)}
    if unknown:
        raise ValueError(f"unknown {what} settings: {sorted(unknown)}")
