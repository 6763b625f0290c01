"""The set of warm worker processes of one machine or one actor: the execution stage of the evaluator.

Slots hold one worker each (`workers` per GPU on CUDA, `workers` in all on CPU). A worker that
crashed, timed out, broke its CUDA context, reached its evaluation budget, or ran a failing
candidate under the CPU interpreter (where an out-of-bounds write can corrupt the process) is
killed and a replacement starts in the background, so the next request rarely waits for a start.

Workers die with the process that owns the set (envs/worker/lifeline.py). They are started only from
the set's spawner threads, which live until the set is closed: a worker's parent-death signal fires
when the thread that started it exits, so a short-lived thread must never start one. A per-process
reaper (envs/worker/reaper.py) kills what candidates started once the owner is gone.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import queue
import secrets
import time
import uuid
from typing import Any

from envs.gpu_lock import DeviceLock, GpuGate, host_gpu_ids
from envs.problems import Problem
from envs.settings import EvalSettings
from envs.source import CanonicalSolution
from envs.speedup import ANCHOR_REFERENCE, estimate_speedup
from envs.verdict import HackFinding, Status, Timings, TimingStats, Verdict
from envs.worker import reaper
from envs.worker.cpu_backstop import CpuBudget
from envs.worker.forked import ForkedWorker, ForkRefused
from envs.worker.gpu_concurrency import GpuConcurrency
from envs.worker.messages import MalformedMessage, WorkerRequest, WorkerResult
from envs.worker.process import WorkerFailure, WorkerProcess
from envs.worker.sandbox import resolve_sandbox

log = logging.getLogger(__name__)


# Why a request waited before its worker ran it: every worker busy (`queue.slot`), its worker still starting
# after the last one was replaced (`queue.worker_start`), or the GPU's memory spoken for by the evaluations it
# runs, or fewer admitted after running out of it (`queue.admission`, envs/worker/gpu_concurrency.py). Summed
# over a request's attempts.
QUEUE_STEPS = ("queue.slot", "queue.worker_start", "queue.admission")


def queued(waits: dict[str, float]) -> dict[str, float]:
    """A request's waits as phase seconds: `queue`, their sum, and each cause beside it as a step."""
    return {"queue": sum(waits.values()), **waits}


def _seeds(settings: EvalSettings) -> dict[str, Any]:
    n = settings.trial_count()
    if settings.seed is None:
        draw = [secrets.randbits(62) for _ in range(n + 2)]
    else:
        draw = [settings.seed + i for i in range(n + 2)]
    return {"init_seed": draw[0], "timing_seed": draw[1], "seeds": draw[2:]}


def baseline_names(settings: EvalSettings) -> list[str]:
    """What a request that measures the baselines asks for: eager, TorchInductor and, where candidates are
    re-anchored, the anchor reference their drift is judged against (envs/speedup.py)."""
    return ["eager", "inductor", *([ANCHOR_REFERENCE] if settings.reanchor else [])]


def worker_request(
    settings: EvalSettings,
    device: str,
    problem: Problem,
    solution: CanonicalSolution,
    measure_baselines: bool,
    anchor_reference_ms: float | None = None,
) -> WorkerRequest:
    """The request a worker on `device` ("cpu" or "cuda") gets to evaluate `solution` with `settings`;
    `anchor_reference_ms`: the cached anchor reference's median, which the drift test judges the anchor by."""
    small = settings.resolved_size(device) == "small"
    return WorkerRequest(
        nonce=uuid.uuid4().hex,
        device=device,
        problem={
            "id": problem.id,
            "source": problem.source,
            "tolerance": problem.tolerance,
            "sizes": problem.small_sizes if small else {},
        },
        solution=solution.source,
        timing={
            "runs": settings.timed_runs,
            "warmup_ms": settings.warmup_ms,
            "anchor_runs": min(settings.anchor_runs, settings.timed_runs) if settings.reanchor else 0,
            "placements": min(settings.placements, settings.timed_runs),
            "precision": settings.timing_precision,
            "min_placements": settings.min_placements,
            "launch_allowance_ms": settings.launch_allowance_ms,
            "drift_test": settings.reanchor and settings.drift_test,
            "anchor_reference_ms": anchor_reference_ms,
        }
        if device == "cuda"
        else None,
        max_torch_share=settings.max_torch_share,
        baselines=baseline_names(settings) if measure_baselines else [],
        cpu_rechecks=settings.cpu_rechecks,
        floor_fraction=settings.floor_fraction,
        correctness={
            "families": list(settings.input_families),
            "probe": settings.sensitivity_probe,
            "truth": settings.fp64_truth,
        },
        memory_budget=settings.memory_budget(device),
        **_seeds(settings),
    )


class EvaluatorError(RuntimeError):
    """The environment itself failed (e.g. no worker could start); not the candidate's fault."""


def resolve_device(device: str) -> str:
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class _Slot:
    def __init__(self, gpu: int | str | None, future: concurrent.futures.Future):
        self.gpu, self.future = gpu, future


class WorkerSet:
    def __init__(self, settings: EvalSettings, gpu_ids: list[int | str] | None = None, reap: bool = True):
        self.settings = settings
        self.device = resolve_device(settings.device)
        if self.device == "cuda":
            import torch

            gpu_ids = gpu_ids if gpu_ids is not None else host_gpu_ids(torch.cuda.device_count())
            if not gpu_ids:
                raise EvaluatorError("device=cuda but no GPU is visible")
        else:
            gpu_ids = [None]
        self.sandbox = resolve_sandbox(settings.sandbox, settings.sandbox_hide)  # raises when required and absent
        self._cpu_budget = CpuBudget(settings.cpu_cores, settings.timeouts.as_dict())
        # On a GPU, timing also keeps out the other processes working on it (a colocated engine and learner).
        self._locks = {gpu: DeviceLock(GpuGate(gpu) if gpu is not None else None) for gpu in gpu_ids}
        # as many of a GPU's workers at once as its memory holds, fewer after it ran out because of other processes
        self._concurrency = {gpu: GpuConcurrency(settings.workers) for gpu in gpu_ids}
        self.reaper_pid = reaper.ensure_started() if reap else None  # before any worker exists
        self._fork = settings.forks_workers(self.device)
        self._fork_refused: str | None = None  # why this host's zygotes cannot fork (then: plain workers)
        self.size = len(gpu_ids) * settings.workers
        self._spawner = concurrent.futures.ThreadPoolExecutor(self.size, thread_name_prefix="worker-start")
        self._slots = [
            _Slot(gpu, self._spawner.submit(self._start_worker, gpu))
            for gpu in gpu_ids
            for _ in range(settings.workers)
        ]
        self._idle: queue.Queue[_Slot] = queue.Queue()
        for slot in self._slots:
            self._idle.put(slot)
        self._device_kind: str | None = None
        self._closed = False
        self.oom_retries = 0  # requests run again after the environment's out-of-memory error
        self.oom_failures = 0  # requests that got no further than it in any attempt (internal_error)
        self.replacements = 0  # workers replaced (after a hack, a crash, a broken CUDA context, an OOM retry)

    @property
    def concurrency_cuts(self) -> int:
        """Times a GPU's concurrent evaluations were halved after it ran out of memory (gpu_concurrency.py)."""
        return sum(c.cuts for c in self._concurrency.values())

    def _start_worker(self, gpu: int | str | None) -> WorkerProcess:
        args = (
            self.device,
            gpu,
            int(self.settings.memory_limit_gb * 2**30),
            self.settings.startup_timeout,
            self._locks[gpu],
            self.sandbox,
            self._cpu_budget,
        )
        if self._fork and self._fork_refused is None:
            try:
                return ForkedWorker(*args, max_forks=self.settings.max_forks_per_zygote)
            except ForkRefused as e:  # this host's zygote cannot fork safely: workers start whole
                self._fork_refused = e.message
                log.warning("fork_workers: %s; workers start without a zygote", e.message)
        return WorkerProcess(*args)

    def _replace(self, gpu: int | str | None, worker: WorkerProcess) -> WorkerProcess:
        """In a spawner thread: finish killing `worker` (its signals are sent), start a new one."""
        worker.kill()
        return self._start_worker(gpu)

    def _refork(self, gpu: int | str | None, worker: ForkedWorker) -> WorkerProcess:
        """In a spawner thread: a fresh harness from the worker's zygote, else a whole new worker."""
        try:
            worker.refork(self.settings.startup_timeout)
            return worker
        except WorkerFailure as e:
            log.info("worker restarts whole: %s", e.message)
            return self._replace(gpu, worker)

    def _worker(self, slot: _Slot) -> WorkerProcess:
        for attempt in range(2):
            try:
                worker = slot.future.result()
                if worker.alive():
                    return worker
                worker.kill()
            except WorkerFailure as e:
                log.warning("worker failed to start (attempt %d): %s", attempt + 1, e.message)
                if attempt:
                    raise EvaluatorError(f"no worker could start: {e.message}") from None
            slot.future = self._spawner.submit(self._start_worker, slot.gpu)
        raise EvaluatorError("no worker could start")

    def _recycle(self, slot: _Slot, worker: WorkerProcess) -> None:
        """Kill the worker's harness now (signals only: the caller's verdict returns at once); the waiting
        and the replacement happen in the slot's spawner thread before the next request can use it."""
        if self._closed:
            worker.kill()
            return
        self.replacements += 1
        if isinstance(worker, ForkedWorker):
            worker.end_child()
            slot.future = self._spawner.submit(self._refork, slot.gpu, worker)
        else:
            worker.kill(wait=False)
            slot.future = self._spawner.submit(self._replace, slot.gpu, worker)

    def worker_pids(self, wait: bool = True, wrappers: bool = False) -> list[int]:
        """Pids of the live workers' harnesses (waiting for replacements that are still starting); with
        `wrappers`, also those of the sandbox's processes around them (WorkerProcess.pids)."""
        if wait:
            concurrent.futures.wait([s.future for s in self._slots])
        workers = [s.future.result() for s in self._slots if s.future.done() and not s.future.exception()]
        return [pid for w in workers for pid in (w.pids() if wrappers else [w.harness_pid])]

    @property
    def device_kind(self) -> str:
        """`cpu` or the GPU model, with the software versions that change timings; part of cache keys."""
        if self._device_kind is None:
            slot = self._idle.get()
            try:
                info = self._worker(slot).info
            finally:
                self._idle.put(slot)
            self._device_kind = f"{info['device_name']}|torch {info['torch']}|triton {info['triton']}"
        return self._device_kind

    @property
    def device_name(self) -> str:
        """`cpu` or the GPU model, e.g. `NVIDIA H200`."""
        return self.device_kind.split("|")[0]

    # --- one evaluation ---------------------------------------------------------------------------
    def _request(
        self, problem: Problem, solution: CanonicalSolution, measure_baselines: bool, baselines: dict | None = None
    ) -> WorkerRequest:
        reference = (baselines or {}).get(ANCHOR_REFERENCE) or {}
        return worker_request(
            self.settings, self.device, problem, solution, measure_baselines, reference.get("median_ms")
        )

    def execute(
        self, problem: Problem, solution: CanonicalSolution | None, baselines: dict | None
    ) -> tuple[Verdict, dict | None]:
        """Run one candidate on a worker. On CUDA, `baselines=None` makes the worker measure them first;
        returns (the worker's verdict, baselines measured now or None). `solution` None measures the
        baselines alone (unless known): the verdict is `correct` when the reference ran, else `internal_error`.

        A timing that is physically implausible (below the floor of the problem's bytes and FLOPs, or a
        speedup above `max_speedup`) is measured again in a fresh worker; if it persists it is a hack."""
        if solution is None:
            return self._baselines_only(problem, baselines)
        verdict, measured = self._execute_once(problem, solution, baselines)
        suspicion = self._suspicion(verdict)
        if suspicion is None:
            return verdict, measured
        again, measured_again = self._execute_once(problem, solution, measured or baselines, fresh_worker=True)
        if again.status is Status.CORRECT and self._suspicion(again) is not None:
            return dataclasses.replace(
                again,
                status=Status.HACK,
                hack=HackFinding(
                    "timing_anomaly", f"{suspicion}; the same in a fresh worker: {self._suspicion(again)}"
                ),
                error=f"timing_anomaly: {suspicion}",
            ), measured
        return dataclasses.replace(
            again, notes=[*again.notes, f"re-measured in a fresh worker: {suspicion}"]
        ), measured or measured_again

    def _baselines_only(self, problem: Problem, baselines: dict | None) -> tuple[Verdict, dict | None]:
        started = time.monotonic()
        measured, seconds = None, {}
        try:
            if not baselines:
                measured, seconds = self._measure_baselines(problem)
        except EvaluatorError as e:
            return Verdict(Status.INTERNAL_ERROR, problem.id, self.device_name, error=str(e)), None
        seconds.setdefault("baseline", time.monotonic() - started)  # the worker's phase, when it measured
        return Verdict(
            Status.CORRECT, problem.id, self.device_name, phase_seconds=seconds, notes=["baselines only"]
        ), measured or None

    def _suspicion(self, verdict: Verdict) -> str | None:
        if verdict.status is not Status.CORRECT:
            return None
        if verdict.speedup is not None and verdict.speedup > self.settings.max_speedup:
            return f"speedup {verdict.speedup:.1f}x exceeds the plausible bound {self.settings.max_speedup:g}x"
        return verdict.suspicious

    def _run_through_oom(
        self, request: WorkerRequest, fresh_worker: bool = False
    ) -> tuple[WorkerResult, dict[str, float], dict[str, float], list[str]]:
        """`_run`, again while the request fails on an out-of-memory error that is the environment's (the GPU full
        of other processes, envs/worker/oom.py): after a backoff, in a fresh worker (the failed one is recycled:
        its whole CUDA context is released), at most `oom_retries` times. Returns `_run`'s answer and a note per
        retry; the last result of a request that never got through says so (`WorkerResult.environment_oom`)."""
        notes: list[str] = []
        backoff = 0.0
        waited: dict[str, float] = {}
        for attempt in range(self.settings.oom_retries + 1):
            if attempt:
                delay = self.settings.oom_backoff_s * 2 ** (attempt - 1)
                time.sleep(delay)
                backoff += delay
                request = dataclasses.replace(request, nonce=uuid.uuid4().hex)
            result, phases, waits = self._run(request, fresh_worker=fresh_worker or attempt > 0)
            waited = {k: waited.get(k, 0.0) + v for k, v in waits.items()}  # every attempt's waits
            if backoff:
                phases = {**phases, "oom_backoff": backoff}
            if not result.environment_oom:
                return result, phases, waited, notes
            reason = result.oom["reason"] if result.oom else ""
            self.oom_retries += attempt < self.settings.oom_retries
            log.warning("environment OOM (attempt %d/%d): %s", attempt + 1, self.settings.oom_retries + 1, reason)
            notes.append(f"attempt {attempt + 1} ran out of GPU memory because of other processes: {reason}")
        self.oom_failures += 1
        return result, phases, waited, notes

    def _oom_verdict(
        self, problem: Problem, result: WorkerResult, phases: dict[str, float], notes: list[str]
    ) -> Verdict:
        """internal_error for a request that failed on the environment's OOM every time: not the candidate's."""
        return Verdict(
            Status.INTERNAL_ERROR,
            problem.id,
            self.device_name,
            error=f"the GPU was out of memory because of other processes in each of {len(notes)} attempts; the "
            f"candidate was not evaluated to completion (not its fault). Last: {result.error}",
            phase_seconds=phases,
            phase_memory_gib=result.memory_gib,  # the last attempt's: how far it got
            notes=notes,
        )

    def _run(
        self, request: WorkerRequest, fresh_worker: bool = False, recycle: bool = False
    ) -> tuple[WorkerResult, dict[str, float], dict[str, float]]:
        """One request on an idle worker: (result, wall seconds per phase, seconds waited before it ran, by
        cause: `QUEUE_STEPS`). The worker is recycled afterwards when it must be. Raises WorkerFailure, or
        MalformedMessage for a result without the agreed shape (its worker is recycled)."""
        began = time.monotonic()
        slot = self._idle.get()
        got_slot = time.monotonic()
        worker = result = None
        try:
            worker = self._worker(slot)
            if fresh_worker and worker.evaluations:
                self._recycle(slot, worker)
                worker = self._worker(slot)
            ready = time.monotonic()
            concurrency = self._concurrency[slot.gpu]
            concurrency.know_device(worker.info.get("memory_gib"))
            problem_id = request.problem["id"]
            with concurrency.admit(problem_id) as (admitted_under, held_back):
                message, phases = worker.evaluate(
                    request.to_message(),
                    self.settings.timeouts.as_dict(),
                    self.settings.deadlines.for_device(self.device),
                )
                result = WorkerResult.from_message(message)
                concurrency.observe(problem_id, result.reserved_peak_gib)
            result = self._check_strays(worker, result, request.solution is not None)
            if result.environment_oom:
                concurrency.out_of_memory(admitted_under)
            else:
                concurrency.got_through()
            waits = dict(zip(QUEUE_STEPS, (got_slot - began, ready - got_slot, held_back)))
            return result, phases, waits
        finally:
            if worker is not None and (recycle or self._should_recycle(worker, result)):
                self._recycle(slot, worker)
            self._idle.put(slot)

    @staticmethod
    def _check_strays(worker: WorkerProcess, result: WorkerResult, candidate: bool) -> WorkerResult:
        """A process the candidate started that outlived its evaluation (a daemon) could tamper with the next
        one: the worker is replaced, and a verdict that was correct becomes a hack."""
        strays = worker.stray_processes()
        if not strays:
            return result
        reason = f"{len(strays)} process(es) it started were still running after its evaluation"
        if result.status is Status.CORRECT and candidate:
            return dataclasses.replace(
                result,
                healthy=False,
                status=Status.HACK,
                error=f"concurrency: {reason}",
                hack=HackFinding("concurrency", reason),
            )
        return dataclasses.replace(result, healthy=False)

    def _execute_once(
        self, problem: Problem, solution: CanonicalSolution, baselines: dict | None, fresh_worker: bool = False
    ) -> tuple[Verdict, dict | None]:
        measure = self.device == "cuda" and baselines is None
        try:
            result, phases, waited, oom_notes = self._run_through_oom(
                self._request(problem, solution, measure, baselines), fresh_worker
            )
        except WorkerFailure as failure:
            return Verdict(
                Status(failure.status),
                problem.id,
                self.device_name,
                error=failure.message,
                phase_seconds=failure.phase_seconds,
            ), None
        except MalformedMessage as e:  # the environment's fault (or a forgery): no verdict on the candidate
            return Verdict(Status.INTERNAL_ERROR, problem.id, self.device_name, error=str(e)), None
        if result.environment_oom:
            return self._oom_verdict(problem, result, {**queued(waited), **phases}, oom_notes), None
        measured = result.baselines
        if not measure or not (measured and measured.get("eager")):
            measured = None  # store complete measurements only
        verdict = self._verdict(problem, result, {**queued(waited), **phases}, measured or baselines or {})
        if oom_notes:
            verdict = dataclasses.replace(verdict, notes=[*verdict.notes, *oom_notes])
        return verdict, measured

    def check_problem(self, problem: Problem) -> str | None:
        """Run the problem's reference on a few input sets; why it is degenerate, or None."""
        request = dataclasses.replace(
            self._request(problem, CanonicalSolution("", ""), False), mode="check_problem", solution=None, timing=None
        )
        return self._run_reference(problem, request, "checking the problem")[0].degenerate

    def measure_baselines(self, problem: Problem) -> dict:
        """Time the problem's eager and TorchInductor baselines on a worker, no candidate involved (the curation
        pipeline's runtime filter): {"eager": stats, "inductor": stats or None}, ms. CUDA only."""
        return self._measure_baselines(problem)[0]

    def _measure_baselines(self, problem: Problem) -> tuple[dict, dict[str, float]]:
        """measure_baselines, and where its time went (`_run_reference`'s seconds)."""
        if self.device != "cuda":
            raise EvaluatorError("baselines are measured on a GPU (the CPU interpreter's times mean nothing)")
        request = dataclasses.replace(self._request(problem, CanonicalSolution("", ""), True), solution=None)
        result, seconds = self._run_reference(problem, request, "measuring baselines")
        return result.baselines or {}, seconds

    def _run_reference(
        self, problem: Problem, request: WorkerRequest, what: str
    ) -> tuple[WorkerResult, dict[str, float]]:
        """A request without candidate code, and its queue wait, phases and steps in seconds; EvaluatorError when
        the worker or the reference fails."""
        try:
            result, phases, waited, oom_notes = self._run_through_oom(request)
        except WorkerFailure as failure:
            raise EvaluatorError(f"{problem.id}: {what} failed: {failure.message}") from None
        except MalformedMessage as e:
            raise EvaluatorError(f"{problem.id}: {what} failed: {e}") from None
        if result.environment_oom:
            raise EvaluatorError(f"{problem.id}: {what} failed: {'; '.join(oom_notes)}")
        if result.status is not Status.CORRECT:
            raise EvaluatorError(f"{problem.id}: the reference model does not run: {result.error}")
        return result, {**queued(waited), **phases, **result.steps}

    def profile(self, problem: Problem, solution: CanonicalSolution, calls: int = 10) -> dict:
        """Profile a candidate on a worker (envs/worker/profiling.py): {"profile": facts} or {"error": why}.
        The worker is always replaced afterwards: the candidate ran without the evaluation's checks."""
        if self.device != "cuda":
            return {"error": "profile needs a GPU"}
        request = dataclasses.replace(self._request(problem, solution, False), mode="profile", profile_calls=calls)
        try:
            result, _, _ = self._run(request, recycle=True)
        except WorkerFailure as failure:
            return {"error": f"{failure.status}: {failure.message}"}
        except MalformedMessage as e:
            return {"error": f"internal_error: {e}"}
        if result.status is not Status.CORRECT:
            return {"error": f"{result.status.value}: {result.error}"}
        return {"profile": result.profile}

    def _should_recycle(self, worker: WorkerProcess, result: WorkerResult | None) -> bool:
        if result is None or not result.healthy or not worker.alive():
            return True
        if worker.evaluations >= self.settings.max_evals_per_worker:
            return True
        headroom = worker.lifetime_cpu_headroom()
        if headroom is not None and headroom < self._cpu_budget.evaluation_seconds():
            return True  # another evaluation could run into the harness's RLIMIT_CPU: start afresh
        if result.status in (Status.RUNTIME_ERROR, Status.TIMEOUT, Status.CRASH, Status.HACK):
            return True
        # Under the interpreter a failing kernel may have written out of bounds into the process.
        return self.device == "cpu" and result.status is not Status.CORRECT

    def _verdict(self, problem: Problem, result: WorkerResult, phases: dict[str, float], baselines: dict) -> Verdict:
        """The verdict of a checked worker result; timing and speedup on CUDA, against `baselines`."""
        status, notes = result.status, list(result.notes)
        timings = speedup = baseline_name = interval = None
        if self.device == "cuda" and status is Status.CORRECT:
            eager = TimingStats(**baselines["eager"]) if baselines.get("eager") else None
            inductor = TimingStats(**baselines["inductor"]) if baselines.get("inductor") else None
            reference = TimingStats(**baselines[ANCHOR_REFERENCE]) if baselines.get(ANCHOR_REFERENCE) else None
            timings = Timings(result.kernel, eager, inductor, result.anchor, anchor_reference=reference)
            samples = result.kernel_samples
            if not samples and result.kernel:
                samples = [result.kernel.median_ms]
            estimate = estimate_speedup(
                samples,
                eager,
                inductor,
                self.settings.baseline,
                result.anchor_samples or None,
                kernel_blocks=result.kernel_blocks,
                anchor_blocks=result.anchor_blocks,
                anchor_reference=reference,
                drift_test=self.settings.drift_test,
            )
            if estimate is not None:
                speedup, baseline_name, interval = estimate.speedup, estimate.baseline, estimate.interval
                notes.extend(estimate.notes)
            if result.anchor_seconds is not None:  # part of the timing phase
                phases = {**phases, "anchor": result.anchor_seconds}
        elif self.device == "cpu" and status is Status.CORRECT:
            notes.append("evaluated on CPU with the Triton interpreter: correctness only, no speedup measured")
        phases = {**phases, **result.steps}  # "phase.step": each inside its phase (scripts/bench_eval.py)
        return Verdict(
            status,
            problem.id,
            self.device_name,
            error=result.error,
            hack=result.hack,
            timings=timings,
            speedup=speedup,
            baseline=baseline_name,
            phase_seconds=phases,
            phase_memory_gib=result.memory_gib,
            notes=notes,
            mismatch=result.mismatch if status is Status.INCORRECT else None,
            own_kernel_share=result.own_kernel_share,
            speedup_interval=interval,
            torch_share=result.torch_share,
            suspicious=result.suspicious,
            accuracy=result.accuracy,
            floor_ms=result.floor_ms,
        )

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for slot in self._slots:
            try:
                slot.future.result().shutdown()
            except Exception:  # a worker that never started has nothing to stop
                pass
        self._spawner.shutdown(wait=True)
        for slot in self._slots:  # a replacement may have started while closing
            if slot.future.done() and slot.future.exception() is None:
                slot.future.result().kill()
