"""The evaluation environment on one machine: a candidate's text in, a Verdict out (its reward is rewards/'s
business).

    CPU stage (envs/cpu_stage.py): extract code -> canonicalize -> static checks and anti-hack analysis
                                   -> cache lookup -> Candidate
    execute (envs/worker/):        load problem, [baselines], import candidate, correctness, timing
    finish (CpuStage.finish):      phase times, cache, judge

`Evaluator` runs both stages here with a `WorkerSet`; the Ray pool (envs/pool/) runs the `CpuStage` in the driver
and `WorkerSet`s inside its actors.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import time
from typing import Any, Iterable, Iterator

from envs.antihack.judge import LLMJudge
from envs.cache import SqliteCache, cache_key
from envs.cpu_stage import Candidate, CpuStage, profile_target
from envs.problems import Problem, ProblemError
from envs.settings import EvalSettings
from envs.verdict import Verdict
from envs.worker.worker_set import EvaluatorError, WorkerSet

__all__ = ["Candidate", "CpuStage", "Evaluator", "EvaluatorError"]


class Evaluator:
    """Both stages on this machine: what the CLI, the main job and the tests use; a KernelEvaluator."""

    def __init__(
        self,
        settings: EvalSettings | None = None,
        cache: SqliteCache | None = None,
        gpu_ids: list[int] | None = None,
        judge: LLMJudge | None = None,
    ):
        self.settings = (settings or EvalSettings()).hiding(cache.path if cache is not None else None)
        self.pool = WorkerSet(self.settings, gpu_ids)
        self.device = self.pool.device
        self.cache = cache
        try:
            self.cpu_stage = CpuStage(self.settings, self.pool.device_kind, cache, judge)
        except BaseException:
            self.pool.close()
            raise

    @property
    def device_kind(self) -> str:
        return self.cpu_stage.device_kind

    @property
    def device_name(self) -> str:
        return self.cpu_stage.device_name

    def evaluate(self, problem: Problem, answer: str) -> Verdict:
        """Evaluate a model's answer (markdown with a fenced python block, or bare code)."""
        started = time.monotonic()
        prepared = self.cpu_stage.prepare(problem, answer)
        if isinstance(prepared, Verdict):
            return prepared
        first = self.device == "cuda" and self.cpu_stage.baselines(prepared) is None
        # The first evaluation of a problem on this device measures its baselines, once: others wait.
        with self.cpu_stage.baseline_lock(prepared) if first else contextlib.nullcontext():
            baselines = self.cpu_stage.baselines(prepared)
            verdict, measured = self.pool.execute(prepared.problem, prepared.solution, baselines)
        return self.cpu_stage.finish(prepared, verdict, measured, started)

    async def evaluate_async(self, problem: Problem, answer: str, priority: str = "train") -> Verdict:
        """`evaluate` on a thread, for callers on an event loop; `priority` has no queue to order here."""
        return await asyncio.to_thread(self.evaluate, problem, answer)

    def prepare_baselines(
        self, problems: Iterable[Problem], priority: str = "baseline"
    ) -> list[concurrent.futures.Future]:
        """Measure the problems' baselines now, on every worker at once (CUDA; known ones are skipped), so
        their first candidates do not wait for them. Futures of Verdicts, done: `correct` when the reference
        ran (like the Ray pool's)."""
        jobs = [job for p in problems if (job := self.cpu_stage.baseline_job(p)) is not None]

        def measure(job) -> Verdict:
            started = time.monotonic()
            with self.cpu_stage.baseline_lock(job):
                verdict, measured = self.pool.execute(job.problem, None, self.cpu_stage.baselines(job))
            return self.cpu_stage.finish(job, verdict, measured, started)

        with concurrent.futures.ThreadPoolExecutor(max(1, self.pool.size)) as threads:
            futures = [threads.submit(measure, job) for job in jobs]
        return futures

    def metrics(self) -> dict[str, Any]:
        """Its workers' counters, under the Ray pool's names: OOM retries and failures, the GPU concurrency's
        cuts, and worker replacements (it keeps no queue or actors to report)."""
        return {
            "pool/oom_retries": self.pool.oom_retries,
            "pool/oom_failures": self.pool.oom_failures,
            "pool/gpu_concurrency_cuts": self.pool.concurrency_cuts,
            "pool/worker_replacements": self.pool.replacements,
        }

    def profile(self, problem: Problem, answer: str, calls: int = 10) -> dict:
        """Per-kernel device time of an answer that passes the CPU stage (the `profile` tool). Returns
        {"profile": facts}, or {"error": why} (static findings and compile errors included)."""
        solution = profile_target(self.cpu_stage, problem, answer)
        if isinstance(solution, str):
            return {"error": solution}
        return self.pool.profile(problem, solution, calls)

    def validate_problems(self, problems: list[Problem]) -> None:
        """Reject degenerate problems (outputs constant, independent of the inputs, or within tolerance of
        zero), where a trivial answer would pass. Raises ProblemError naming each; results are cached."""

        def check(problem: Problem) -> str | None:
            # rule 2: the check also re-runs the same inputs from another random state (nondeterminism), so
            # answers cached by the earlier rule are not reused
            key = cache_key(
                problem=problem.sha256,
                check="degenerate",
                rule=2,
                size=self.cpu_stage.size,
                device=self.device_kind,
                families=list(self.settings.input_families),
            )
            if self.cache is not None and (hit := self.cache.get_verdict(key)) is not None:
                return hit.get("degenerate")
            reason = self.pool.check_problem(problem)
            if self.cache is not None:
                self.cache.put_verdict(key, problem.id, {"degenerate": reason})
            return reason

        with concurrent.futures.ThreadPoolExecutor(self.pool.size) as pool:
            reasons = list(pool.map(check, problems))
        bad = [f"{p.id}: {r}" for p, r in zip(problems, reasons) if r]
        if bad:
            raise ProblemError("degenerate problem(s) rejected:\n  " + "\n  ".join(bad))

    def iter_evaluate(
        self, items: Iterable[tuple[Problem, str]], progress: bool = False, desc: str = "evaluating"
    ) -> Iterator[Verdict]:
        """Evaluate concurrently on every worker; yield verdicts in input order as they are ready."""
        items = list(items)
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=len(items), desc=desc, unit="eval", dynamic_ncols=True)
        with concurrent.futures.ThreadPoolExecutor(self.pool.size, thread_name_prefix="evaluate") as pool:
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

    def evaluate_many(
        self, items: Iterable[tuple[Problem, str]], progress: bool = False, desc: str = "evaluating"
    ) -> list[Verdict]:
        return list(self.iter_evaluate(items, progress, desc))

    def close(self) -> None:
        self.pool.close()

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
