"""The evaluation environment: a candidate's text in, a Verdict (with reward) out.

    text -> extract code -> canonicalize -> static checks -> cache lookup
         -> worker process: load problem, [baselines], import candidate, correctness, timing
         -> Verdict -> reward -> cache

The Evaluator owns a small pool of warm worker processes (per GPU on CUDA). A worker that crashed,
timed out, broke its CUDA context or ran a failing candidate on the CPU interpreter (where an
out-of-bounds write can corrupt the process) is killed and replaced in the background.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import logging
import queue
import secrets
import threading
import time
import uuid
from typing import Any, Iterable, Iterator

from envs.cache import SqliteCache, cache_key
from envs.gpu_lock import DeviceLock
from envs.problems import Problem
from envs.settings import EvalSettings
from envs.source import CanonicalSolution, SourceError, prepare_solution
from envs.verdict import Status, Timings, TimingStats, Verdict
from envs.worker.process import WorkerFailure, WorkerProcess
from rewards.makora import DEFAULT_DELTA, reward_for_verdict

log = logging.getLogger(__name__)

# Verdicts that may depend on the machine's state rather than the code are not cached.
_TRANSIENT = {Status.TIMEOUT, Status.CRASH}


class EvaluatorError(RuntimeError):
    """The environment itself failed (e.g. no worker could start); not the candidate's fault."""


def resolve_device(device: str) -> str:
    if device != "auto":
        return device
    import torch
    return "cuda" if torch.cuda.is_available() else "cpu"


class _Slot:
    """A place for one worker; its process is replaced in the background when recycled."""

    def __init__(self, gpu: int | None, future: concurrent.futures.Future):
        self.gpu, self.future = gpu, future


class Evaluator:
    def __init__(self, settings: EvalSettings | None = None, cache: SqliteCache | None = None,
                 delta: float = DEFAULT_DELTA, gpu_ids: list[int] | None = None):
        self.settings = settings or EvalSettings()
        self.device = resolve_device(self.settings.device)
        self.size = self.settings.resolved_size(self.device)
        self.cache, self.delta = cache, delta
        if self.device == "cuda":
            import torch
            gpu_ids = gpu_ids if gpu_ids is not None else list(range(torch.cuda.device_count()))
            if not gpu_ids:
                raise EvaluatorError("device=cuda but no GPU is visible")
        else:
            gpu_ids = [None]
        self._locks = {gpu: DeviceLock() for gpu in gpu_ids}
        n_slots = len(gpu_ids) * self.settings.workers
        self._spawner = concurrent.futures.ThreadPoolExecutor(n_slots, thread_name_prefix="worker-start")
        self._slots = [_Slot(gpu, self._spawner.submit(self._start_worker, gpu))
                       for gpu in gpu_ids for _ in range(self.settings.workers)]
        self._idle: queue.Queue[_Slot] = queue.Queue()
        for slot in self._slots:
            self._idle.put(slot)
        self._baseline_locks: collections.defaultdict[str, threading.Lock] = collections.defaultdict(threading.Lock)
        self._baselines: dict[str, dict] = {}  # used when there is no cache
        self._device_kind: str | None = None
        self._closed = False

    # --- workers ----------------------------------------------------------------------------------
    def _start_worker(self, gpu: int | None) -> WorkerProcess:
        return WorkerProcess(self.device, gpu, int(self.settings.memory_limit_gb * 2**30),
                             self.settings.startup_timeout, self._locks[gpu])

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
        worker.kill()
        if not self._closed:
            slot.future = self._spawner.submit(self._start_worker, slot.gpu)

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

    # --- evaluation -------------------------------------------------------------------------------
    def _seeds(self) -> dict[str, Any]:
        n = self.settings.correctness_trials
        if self.settings.seed is None:
            draw = [secrets.randbits(62) for _ in range(n + 2)]
        else:
            draw = [self.settings.seed + i for i in range(n + 2)]
        return {"init_seed": draw[0], "timing_seed": draw[1], "seeds": draw[2:]}

    def _keys(self, problem: Problem, canonical: CanonicalSolution | None) -> tuple[str, str]:
        sizes = problem.small_sizes if self.size == "small" else {}
        base = dict(problem=problem.sha256, sizes=sizes, device=self.device_kind)
        verdict_key = cache_key(**base, solution=canonical.sha256 if canonical else None,
                                settings=self.settings.cache_fields(self.device))
        baseline_key = cache_key(**base, runs=self.settings.timed_runs, warmup_ms=self.settings.warmup_ms)
        return verdict_key, baseline_key

    def evaluate(self, problem: Problem, answer: str) -> Verdict:
        """Evaluate a model's answer (markdown with a fenced python block, or bare code)."""
        started = time.monotonic()
        try:
            canonical = prepare_solution(answer)
        except SourceError as e:
            verdict = Verdict(Status.COMPILE_ERROR, problem.id, self.device_name, error=str(e),
                              phase_seconds={"static": time.monotonic() - started})
            return verdict
        static_s = time.monotonic() - started
        verdict_key, baseline_key = self._keys(problem, canonical)
        if self.cache is not None and (hit := self.cache.get_verdict(verdict_key)) is not None:
            verdict = Verdict.from_dict(hit)
            return dataclasses.replace(verdict, cached=True, reward=reward_for_verdict(verdict, self.delta))
        verdict = self._run(problem, canonical, baseline_key)
        phases = {"static": static_s, **verdict.phase_seconds, "total": time.monotonic() - started}
        verdict = dataclasses.replace(verdict, phase_seconds=phases, reward=reward_for_verdict(verdict, self.delta))
        if self.cache is not None and verdict.status not in _TRANSIENT:
            self.cache.put_verdict(verdict_key, problem.id, verdict.to_dict())
        return verdict

    def _stored_baselines(self, key: str) -> dict | None:
        return self.cache.get_baselines(key) if self.cache is not None else self._baselines.get(key)

    def _run(self, problem: Problem, canonical: CanonicalSolution, baseline_key: str) -> Verdict:
        timing = self.device == "cuda"
        if not timing:
            return self._dispatch(problem, canonical, None)
        baselines = self._stored_baselines(baseline_key)
        if baselines is not None:
            return self._dispatch(problem, canonical, baselines)
        # First evaluation of this problem on this device: measure the baselines once.
        with self._baseline_locks[baseline_key]:
            baselines = self._stored_baselines(baseline_key)
            return self._dispatch(problem, canonical, baselines, baseline_key)

    def _request(self, problem: Problem, canonical: CanonicalSolution, measure_baselines: bool) -> dict:
        timing = {"runs": self.settings.timed_runs, "warmup_ms": self.settings.warmup_ms}
        return {
            "type": "evaluate", "nonce": uuid.uuid4().hex, "device": self.device,
            "problem": {"id": problem.id, "source": problem.source, "tolerance": problem.tolerance,
                        "sizes": problem.small_sizes if self.size == "small" else {}},
            "solution": canonical.source,
            "timing": timing if self.device == "cuda" else None,
            "baselines": ["eager", "inductor"] if measure_baselines else [],
            **self._seeds(),
        }

    def _dispatch(self, problem: Problem, canonical: CanonicalSolution, baselines: dict | None,
                  baseline_key: str | None = None) -> Verdict:
        request = self._request(problem, canonical, measure_baselines=baseline_key is not None)
        waited = time.monotonic()
        slot = self._idle.get()
        worker = None
        recycle = False
        try:
            worker = self._worker(slot)
            waited = time.monotonic() - waited
            result, phases = worker.evaluate(request, self.settings.timeouts.as_dict())
            phases = {"queue": waited, **phases}
        except WorkerFailure as failure:
            recycle = True
            name = "timeout" if failure.status == "timeout" else "crash"
            return Verdict(Status(name), problem.id, self.device_name, error=failure.message,
                           phase_seconds=failure.phase_seconds)
        finally:
            if worker is not None:
                if not recycle:
                    recycle = self._should_recycle(worker, locals().get("result"))
                if recycle:
                    self._recycle(slot, worker)
            self._idle.put(slot)
        if baseline_key is not None:
            baselines = result.get("baselines") or {}
            if "eager" in baselines:  # only store complete measurements
                if self.cache is not None:
                    self.cache.put_baselines(baseline_key, problem.id, baselines)
                else:
                    self._baselines[baseline_key] = baselines
        return self._verdict(problem, result, phases, baselines or {})

    def _should_recycle(self, worker: WorkerProcess, result: dict | None) -> bool:
        if result is None or not result.get("healthy", False) or not worker.alive():
            return True
        if worker.evaluations >= self.settings.max_evals_per_worker:
            return True
        status = result.get("status")
        if status in ("runtime_error", "timeout", "crash"):
            return True
        # Under the interpreter a failing kernel may have written out of bounds into the process.
        return self.device == "cpu" and status != "correct"

    def _verdict(self, problem: Problem, result: dict, phases: dict[str, float], baselines: dict) -> Verdict:
        try:
            status = Status(result.get("status"))
        except ValueError:
            status = Status.CRASH
        if status is Status.HACK:  # only the environment's own checks may say so
            status = Status.CRASH
        notes = [str(n)[:500] for n in result.get("notes") or []][:10]
        kernel = result.get("kernel")
        timings = speedup = baseline_name = None
        if self.device == "cuda" and status is Status.CORRECT:
            eager = TimingStats(**baselines["eager"]) if baselines.get("eager") else None
            inductor = TimingStats(**baselines["inductor"]) if baselines.get("inductor") else None
            timings = Timings(kernel=TimingStats(**kernel) if kernel else None, eager=eager, inductor=inductor)
            reference = inductor if self.settings.baseline == "inductor" else eager
            baseline_name = self.settings.baseline
            if reference is None and eager is not None:
                reference, baseline_name = eager, "eager"
                notes.append("TorchInductor baseline unavailable; speedup is against eager PyTorch")
            if reference is not None and timings.kernel is not None and timings.kernel.median_ms > 0:
                speedup = reference.median_ms / timings.kernel.median_ms
        elif self.device == "cpu" and status is Status.CORRECT:
            notes.append("evaluated on CPU with the Triton interpreter: correctness only, no speedup measured")
        error = result.get("error")
        return Verdict(status, problem.id, self.device_name, error=str(error)[:8000] if error else None,
                       timings=timings, speedup=speedup, baseline=baseline_name, phase_seconds=phases,
                       notes=notes, mismatch=result.get("mismatch") if status is Status.INCORRECT else None)

    def iter_evaluate(self, items: Iterable[tuple[Problem, str]], progress: bool = False,
                      desc: str = "evaluating") -> Iterator[Verdict]:
        """Evaluate concurrently on every worker; yield verdicts in input order as they are ready."""
        items = list(items)
        bar = None
        if progress:
            from tqdm import tqdm
            bar = tqdm(total=len(items), desc=desc, unit="eval", dynamic_ncols=True)
        with concurrent.futures.ThreadPoolExecutor(len(self._slots), thread_name_prefix="evaluate") as pool:
            futures = [pool.submit(self.evaluate, p, a) for p, a in items]
            if bar is not None:
                for f in futures:
                    f.add_done_callback(lambda _: bar.update())
            try:
                for f in futures:
                    yield f.result()
            finally:
                for f in futures:
                    f.cancel()
                if bar is not None:
                    bar.close()

    def evaluate_many(self, items: Iterable[tuple[Problem, str]], progress: bool = False,
                      desc: str = "evaluating") -> list[Verdict]:
        return list(self.iter_evaluate(items, progress, desc))

    # --- lifetime ---------------------------------------------------------------------------------
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

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
