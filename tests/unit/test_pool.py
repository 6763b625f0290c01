"""The evaluation pool's driver logic without Ray: an in-process fake backend whose behaviour each
candidate chooses with a `MODE = "..."` constant (correct, incorrect, timeout, crash, block, die)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import re
import threading
import time

import pytest

from envs import EvalSettings, Status, Verdict, resolve_problem
from envs.pool import EvaluationPool, PoolClosedError, PoolConfig, PoolFullError
from envs.pool.core import Backend
from envs.pool.scheduler import PRIORITIES, Admission, Job, JobQueue, JobState, Request
from envs.speedup import ANCHOR_REFERENCE
from envs.worker.worker_set import EvaluatorError
from rewards.kernel_reward import reward_for_verdict

RELU = resolve_problem("L0_02_relu")
ADD = resolve_problem("L0_01_vector_add")
TIMING = {
    "median_ms": 1.0,
    "mean_ms": 1.0,
    "std_ms": 0.0,
    "min_ms": 1.0,
    "max_ms": 1.0,
    "p10_ms": 1.0,
    "p90_ms": 1.0,
    "runs": 100,
}


KERNEL = """
import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def _relu(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)

class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        _relu[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
        return out
"""


def code(mode: str = "correct", tag: int = 0) -> str:
    """A candidate that passes the CPU stage; the fake backend reads MODE and TAG, it runs nothing."""
    return f"{KERNEL}\nMODE = {mode!r}\nTAG = {tag}\n"


class FakeDied(Exception):
    pass


class FakeActor:
    def __init__(self, n: int):
        self.id = n
        self.killed = threading.Event()


class FakeBackend(Backend):
    def __init__(self, device: str = "cpu", actors: int = 1):
        self.device = device
        self.actors = actors
        self.gate = threading.Event()
        self.gate.set()
        self.log: list[tuple[int, str, int, str, bool]] = []  # actor, mode, tag, problem, measured baselines
        self.launched = 0
        self._exec = concurrent.futures.ThreadPoolExecutor(32)
        self._lock = threading.Lock()

    def default_num_actors(self) -> int:
        return self.actors

    def launch(self, settings):
        with self._lock:
            self.launched += 1
            n = self.launched
        return FakeActor(n), {"device_kind": f"fake-{self.device}|v1", "workers": settings.workers}

    def execute(self, handle, problem, solution, baselines):
        if handle.killed.is_set():
            raise FakeDied("actor is dead")
        return self._exec.submit(self._run, handle, problem, solution, baselines)

    def _run(self, actor, problem, solution, baselines):
        if solution is None:  # a baselines-only job (EvaluationPool.prepare_baselines)
            with self._lock:
                self.log.append((actor.id, "baselines", -1, problem.id, baselines is None))
            measured = {"eager": TIMING, "inductor": TIMING} if baselines is None else None
            return Verdict(Status.CORRECT, problem.id, "fake"), measured, {}
        mode = re.search(r"MODE = '(\w+)'", solution.source).group(1)
        tag = int(re.search(r"TAG = (\d+)", solution.source).group(1))
        with self._lock:
            self.log.append((actor.id, mode, tag, problem.id, baselines is None))
        if mode == "block":
            while not self.gate.is_set() and not actor.killed.is_set():
                time.sleep(0.005)
        if mode == "die":
            actor.killed.set()
        if actor.killed.is_set():
            raise FakeDied(f"actor {actor.id} died")
        if mode == "raise":  # the actor lives, but its code failed on this candidate
            raise KeyError("a bug the candidate found")
        status = Status.CORRECT if mode in ("correct", "block", "nobaseline") else Status(mode)
        measured = None
        if self.device == "cuda" and baselines is None and mode != "nobaseline":
            measured = {"eager": TIMING, "inductor": TIMING}
        # Each actor reports its own busy fraction (0.1 x its number), so the pool's mean is checkable.
        stats = {"busy_fraction": 0.1 * actor.id, "worker_utilization": 0.5}
        return Verdict(status, problem.id, "fake"), measured, stats

    def is_actor_failure(self, exc):
        return isinstance(exc, FakeDied)

    def kill(self, handle):
        handle.killed.set()

    def close(self, infos):
        self._exec.shutdown(wait=True)

    def order(self) -> list[tuple[str, int]]:
        return [(mode, tag) for _, mode, tag, _, _ in self.log]


def make_pool(backend=None, *, workers=1, cache=None, **config) -> tuple[EvaluationPool, FakeBackend]:
    backend = backend or FakeBackend(actors=config.pop("actors", 1))
    config.setdefault("ray_metrics", False)
    pool = EvaluationPool(backend, EvalSettings(device="cpu"), PoolConfig(workers_per_actor=workers, **config), cache)
    return pool, backend


def wait_for(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        time.sleep(0.005)


def queued(pool: EvaluationPool) -> int:
    m = pool.metrics()
    return m["pool/queued"] + m["pool/parked"]


# --- admission and queue alone ----------------------------------------------------------------------
def test_admission_blocks_raises_and_releases():
    gate = Admission(2)
    gate.acquire()
    gate.acquire()
    with pytest.raises(PoolFullError, match="max_pending=2"):
        gate.acquire(block=False)
    t0 = time.monotonic()
    with pytest.raises(PoolFullError, match="stayed full"):
        gate.acquire(timeout=0.05)
    assert time.monotonic() - t0 >= 0.05
    threading.Timer(0.05, gate.release).start()
    gate.acquire()  # blocks until the timer releases one
    assert gate.pending == 2
    with pytest.raises(PoolFullError):
        gate.acquire(3, block=False)
    gate.close()
    with pytest.raises(PoolClosedError):
        gate.acquire()


class _Cand:
    def __init__(self, key, bkey="b", baselines_only=False):
        self.verdict_key, self.baseline_key = key, bkey
        self.problem = RELU
        self.solution = None if baselines_only else "code"


def _job(key, rank, seq, bkey="b", baselines_only=False):
    return Job(_Cand(key, bkey, baselines_only), Request(RELU, "", rank, seq))


BASELINE, TRAIN, VALIDATION = PRIORITIES["baseline"], PRIORITIES["train"], PRIORITIES["validation"]


def test_job_queue_priority_fifo_promotion_and_parking():
    q = JobQueue()
    jobs = {k: _job(k, r, s) for k, r, s in [("t1", 1, 1), ("t2", 1, 2), ("v1", 0, 3), ("t3", 1, 4)]}
    for j in jobs.values():
        q.push(j)
    q.attach(jobs["t3"], Request(RELU, "", 0, 5))  # a validation duplicate promotes t3
    assert q.get("t3") is jobs["t3"]
    order = [q.pop()[0].key for _ in range(4)]
    assert order == ["v1", "t3", "t1", "t2"] and q.pop() is None

    q = JobQueue()
    a, b, c = _job("a", 1, 1), _job("b", 1, 2), _job("c", 1, 3, bkey="other")
    for j in (a, b, c):
        q.push(j)
    known = {}
    first, baselines = q.pop(lambda j: known.get(j.baseline_key))
    assert first is a and baselines is None and a.measuring
    second, _ = q.pop(lambda j: known.get(j.baseline_key))
    assert second is c and b.state is JobState.PARKED  # b waits for a's measurement
    known["b"] = {"eager": 1}
    q.finish(a)
    job, baselines = q.pop(lambda j: known.get(j.baseline_key))
    assert job is b and baselines == {"eager": 1}


def test_baseline_jobs_run_after_candidates_except_the_ones_a_candidate_waits_for():
    q = JobQueue()
    known = {"k": {"eager": 1}}
    lookup = lambda j: known.get(j.baseline_key)  # noqa: E731
    b1, b2, b3 = (_job(f"base{i}", BASELINE, i, bkey=f"p{i}", baselines_only=True) for i in (1, 2, 3))
    for j in (b1, b2, b3):
        q.push(j)
    assert b1.measuring and b2.measuring and b3.measuring  # each is its problem's measurer while queued
    unrelated, waiting = _job("u", TRAIN, 4, bkey="k"), _job("t", TRAIN, 5, bkey="p3")
    q.push(unrelated)
    q.push(waiting)  # on arrival it lends its rank to p3's queued job, which goes ahead of it
    assert (b3.rank, b1.rank, b2.rank) == (TRAIN, BASELINE, BASELINE)
    assert q.pop(lookup) == (b3, None)
    assert q.pop(lookup)[0] is unrelated
    assert q.pop(lookup)[0] is b1 and waiting.state is JobState.PARKED  # it waits for b3 only, not b1
    known["p3"] = {"eager": 2}
    q.finish(b3)
    assert q.pop(lookup) == (waiting, {"eager": 2})
    assert q.pop(lookup)[0] is b2 and q.pop(lookup) is None


def test_a_parked_candidate_and_a_promoted_duplicate_lend_their_rank():
    q = JobQueue()
    first = _job("c", VALIDATION, 1, bkey="p")
    q.push(first)
    base = _job("base", BASELINE, 2, bkey="p", baselines_only=True)
    q.push(base)  # queued after the candidate: the candidate parks on it when popped, and lends its rank
    job, baselines = q.pop(lambda j: None)
    assert job is base and baselines is None and first.state is JobState.PARKED
    assert (base.rank, base.seq) == (VALIDATION, 1)

    q = JobQueue()
    base = _job("base", BASELINE, 1, bkey="p", baselines_only=True)
    train = _job("t", TRAIN, 2, bkey="p")
    other = _job("o", TRAIN, 3, bkey="q")
    for j in (base, train, other):
        q.push(j)
    assert base.rank == TRAIN
    q.attach(train, Request(RELU, "", VALIDATION, 4))  # a validation duplicate promotes the candidate and its measurer
    assert base.rank == VALIDATION
    assert [q.pop()[0] for _ in range(3)] == [base, train, other]


def test_a_requeued_baseline_job_stays_its_problems_measurer():
    q = JobQueue()
    base = _job("base", BASELINE, 1, bkey="p", baselines_only=True)
    cand = _job("c", TRAIN, 2, bkey="p")
    q.push(base)
    q.push(cand)
    assert q.pop(lambda j: None)[0] is base
    q.requeue(base)  # its actor died
    assert base.measuring and q.pop(lambda j: None)[0] is base
    assert q.pop(lambda j: None) is None and cand.state is JobState.PARKED
    q.finish(base)  # it ended without baselines (its reference failed): the candidate measures for itself
    assert q.pop(lambda j: None)[0] is cand and cand.measuring


# --- the pool with a fake backend -------------------------------------------------------------------
def test_mixed_batch_in_input_order():
    pool, backend = make_pool(actors=2, workers=2)
    with pool:
        modes = ["correct", "incorrect", "timeout", "crash", "runtime_error", "correct"]
        items = [(RELU, code(m, i)) for i, m in enumerate(modes)] + [(ADD, "def f(:\n")]
        verdicts = pool.evaluate_many(items)
    assert [v.status.value for v in verdicts] == [*modes, "compile_error"]
    assert reward_for_verdict(verdicts[0]) > reward_for_verdict(verdicts[1]) == 0.0
    assert all("total" in v.phase_seconds for v in verdicts)


def test_priority_validation_first_then_fifo():
    pool, backend = make_pool(actors=1, workers=1)
    with pool:
        backend.gate.clear()
        futures = [pool.submit(RELU, code("block", 0))]
        wait_for(lambda: backend.log)
        futures += [pool.submit(RELU, code("correct", t)) for t in (1, 2, 3)]
        futures += [pool.submit(RELU, code("correct", t), priority="validation") for t in (4, 5)]
        wait_for(lambda: queued(pool) == 5)
        backend.gate.set()
        assert all(f.result(10).correct for f in futures)
    assert backend.order() == [
        ("block", 0),
        ("correct", 4),
        ("correct", 5),
        ("correct", 1),
        ("correct", 2),
        ("correct", 3),
    ]
    with pytest.raises(ValueError, match="priority"):
        pool.submit(RELU, code(), priority="urgent")


def test_identical_in_flight_candidates_share_one_execution():
    pool, backend = make_pool(actors=1, workers=1)
    with pool:
        backend.gate.clear()
        blocker = pool.submit(RELU, code("block", 0))
        wait_for(lambda: backend.log)
        other = pool.submit(RELU, code("correct", 1))
        # Same code up to comments and formatting: same verdict key.
        dupes = [pool.submit(RELU, code("correct", 2) + "\n# variant %d\n" % i) for i in range(3)]
        dupes.append(pool.submit(RELU, code("correct", 2), priority="validation"))  # promotes the job
        wait_for(lambda: queued(pool) == 2)
        running_dupe = pool.submit(RELU, code("block", 0))  # attaches to the running blocker
        wait_for(lambda: pool.metrics()["pool/dedup_hits"] == 4)
        backend.gate.set()
        verdicts = [f.result(10) for f in [blocker, running_dupe, other, *dupes]]
        assert all(v.correct for v in verdicts)
        m = pool.metrics()
    assert backend.order() == [("block", 0), ("correct", 2), ("correct", 1)]
    assert m["pool/dedup_hits"] == 4 and m["pool/executions"] == 3 and m["pool/answered"] == 7


def test_backpressure_blocks_or_raises():
    pool, backend = make_pool(actors=1, workers=1, max_pending=2)
    with pool:
        backend.gate.clear()
        first = pool.submit(RELU, code("block", 0))
        second = pool.submit(RELU, code("correct", 1))
        with pytest.raises(PoolFullError, match="max_pending=2"):
            pool.submit(RELU, code("correct", 2), block=False)
        with pytest.raises(PoolFullError):
            pool.submit(RELU, code("correct", 2), timeout=0.05)
        with pytest.raises(PoolFullError):
            pool.submit_batch([(RELU, code("correct", t)) for t in (3, 4, 5)], block=False)
        assert pool.metrics()["pool/pending"] == 2
        late: list = []
        submitter = threading.Thread(target=lambda: late.append(pool.submit(RELU, code("correct", 6))))
        submitter.start()
        time.sleep(0.1)
        assert submitter.is_alive()  # blocked on backpressure
        backend.gate.set()
        submitter.join(5)
        assert first.result(5).correct and second.result(5).correct and late[0].result(5).correct
        assert len(pool.submit_batch([(RELU, code("correct", t)) for t in (7, 8)], block=False)) == 2


def test_cancelled_request_never_runs():
    pool, backend = make_pool(actors=1, workers=1, max_pending=2)
    with pool:
        backend.gate.clear()
        blocker = pool.submit(RELU, code("block", 0))
        wait_for(lambda: backend.log)
        doomed = pool.submit(RELU, code("correct", 1))
        wait_for(lambda: queued(pool) == 1)
        assert doomed.cancel()
        assert pool.metrics()["pool/pending"] == 1 and queued(pool) == 0
        assert not blocker.cancel()  # running already
        backend.gate.set()
        assert blocker.result(5).correct
    assert backend.order() == [("block", 0)]


def test_dead_actor_is_replaced_and_its_request_retried():
    pool, backend = make_pool(actors=2, workers=1)
    with pool:
        backend.gate.clear()
        futures = [pool.submit(RELU, code("block", t)) for t in (0, 1)]
        wait_for(lambda: len(backend.log) == 2)
        victim = next(a for a in pool.actors.live() if a.id == 0)
        backend.kill(victim.handle)
        wait_for(lambda: pool.metrics()["pool/actor_restarts"] == 1)
        backend.gate.set()
        assert all(f.result(5).correct for f in futures)
        m = pool.metrics()
    assert m["pool/retries"] == 1 and m["pool/actor_failures"] == 1 and m["pool/answered"] == 2
    assert m["pool/actors_alive"] == 2 and backend.launched == 3
    # The killed one ran twice (which request the victim ran depends on the CPU stage's order).
    killed = next(tag for actor, _, tag, _, _ in backend.log if actor == victim.handle.id)
    assert sorted(tag for _, _, tag, _, _ in backend.log) == sorted([0, 1, killed])


def test_request_that_kills_actors_twice_gets_a_crash_verdict():
    pool, backend = make_pool(actors=2, workers=1)
    with pool:
        verdicts = pool.evaluate_many([(RELU, code("die", 0)), (RELU, code("correct", 1)), (ADD, code("correct", 2))])
        # a replacement counts once it is up, in the background: the crash verdict can return before the second
        deadline = time.monotonic() + 30
        while (m := pool.metrics())["pool/actor_restarts"] < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert [v.status for v in verdicts] == [Status.CRASH, Status.CORRECT, Status.CORRECT]
    assert "died 2 times" in verdicts[0].error and reward_for_verdict(verdicts[0]) == 0.0
    assert m["pool/retries"] == 1 and m["pool/crashes_after_retry"] == 1 and m["pool/actor_restarts"] == 2


def test_an_actor_failing_on_one_candidate_gives_that_candidate_an_internal_error():
    pool, backend = make_pool(actors=1, workers=1)
    with pool:
        verdicts = pool.evaluate_many([(RELU, code("raise", 0)), (RELU, code("correct", 1))])
        m = pool.metrics()
    assert [v.status for v in verdicts] == [Status.INTERNAL_ERROR, Status.CORRECT]
    assert verdicts[0].error.startswith("execute: KeyError") and "tests/unit/test_pool.py" in verdicts[0].error
    assert "a bug the candidate found" in verdicts[0].traceback and reward_for_verdict(verdicts[0]) == 0.0
    assert m["pool/actor_restarts"] == 0 and m["pool/errors"] == 0


def test_no_actor_left_fails_requests_with_an_error():
    pool, backend = make_pool(actors=1, workers=1, max_actor_restarts=0)
    with pool:
        future = pool.submit(RELU, code("die", 0))
        with pytest.raises(EvaluatorError, match="no evaluation actor is alive"):
            future.result(5)
        with pytest.raises(EvaluatorError):
            pool.evaluate(RELU, code("correct", 1))


def test_close_without_draining_answers_pending_with_an_error():
    pool, backend = make_pool(actors=1, workers=1)
    backend.gate.clear()
    # The blocker first, running, then the rest (submitted together, the CPU stage's threads may
    # queue a later one first, which the free actor then answers before the blocker starts).
    futures = [pool.submit(RELU, code("block", 0))]
    wait_for(lambda: backend.log)
    futures += [pool.submit(RELU, code("correct", t)) for t in range(1, 4)]
    pool.close(drain=False)
    assert backend.order() == [("block", 0)]
    for f in futures:
        with pytest.raises(PoolClosedError, match="drain=False"):
            f.result(1)
    with pytest.raises(PoolClosedError):
        pool.submit(RELU, code())
    assert pool.metrics()["pool/pending"] == 0


def test_close_drains_in_flight_work():
    pool, backend = make_pool(actors=1, workers=1)
    backend.gate.clear()
    futures = [pool.submit(RELU, code("block" if t == 0 else "correct", t)) for t in range(4)]
    threading.Timer(0.2, backend.gate.set).start()
    pool.close()
    assert all(f.result(0).correct for f in futures)
    pool.close()  # idempotent


def test_cuda_baselines_measured_once_per_problem():
    backend = FakeBackend(device="cuda", actors=2)
    pool, _ = make_pool(backend, workers=2)
    with pool:
        backend.gate.clear()
        first = [pool.submit(RELU, code("block", 0)), pool.submit(ADD, code("nobaseline", 1))]
        wait_for(lambda: len(backend.log) >= 2)  # both run first: the CPU stage's threads may reorder submissions
        rest = [pool.submit(p, code("correct", t)) for t in range(2, 8) for p in (RELU, ADD)]
        wait_for(lambda: len(backend.log) >= 3)
        backend.gate.set()
        assert all(f.result(5).correct for f in first + rest)
    measured = [(problem, mode) for _, mode, _, problem, measure in backend.log if measure]
    # RELU: the first job measures, the rest wait for it. ADD: the first job returns no baselines,
    # so exactly one later job measures them.
    assert sorted(measured) == [
        ("L0_01_vector_add", "correct"),
        ("L0_01_vector_add", "nobaseline"),
        ("L0_02_relu", "block"),
    ]


REFERENCE = {**TIMING, "median_ms": 2.0}  # an anchor reads eager 2x its back-to-back time (a launch-bound problem)


class ReferenceBackend(FakeBackend):
    """Measures the anchor reference with the baselines (as workers do since issue 32) and records the baselines
    each job was given."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.given: list[tuple[str, dict | None]] = []

    def _run(self, actor, problem, solution, baselines):
        verdict, measured, stats = super()._run(actor, problem, solution, baselines)
        with self._lock:
            self.given.append((problem.id, baselines))
        return verdict, measured and {**measured, ANCHOR_REFERENCE: REFERENCE}, stats


def test_cached_baselines_carry_the_anchor_reference_and_entries_from_before_it_still_serve(tmp_cache):
    old_pool, _ = make_pool(FakeBackend(device="cuda"), cache=tmp_cache)
    with old_pool:  # RELU's baselines measured before the reference existed
        assert old_pool.evaluate(RELU, code("correct", 0)).correct
    backend = ReferenceBackend(device="cuda")
    pool, _ = make_pool(backend, cache=tmp_cache)
    with pool:
        verdicts = pool.evaluate_many([(p, code("correct", t)) for t in (1, 2) for p in (RELU, ADD)])
    assert all(v.correct for v in verdicts) and tmp_cache.count("baselines") == 2
    given = {p: [b for q, b in backend.given if q == p] for p in (RELU.id, ADD.id)}
    # the old entry is served as it is, never measured again: drift is judged against eager's median there
    assert given[RELU.id] == [{"eager": TIMING, "inductor": TIMING}] * 2
    # ADD's first job measured them; the next got them from the cache, the reference with them
    assert given[ADD.id] == [None, {"eager": TIMING, "inductor": TIMING, ANCHOR_REFERENCE: REFERENCE}]


def test_prepare_baselines_measures_each_problem_once_ahead_of_its_candidates():
    backend = FakeBackend(device="cuda", actors=2)
    pool, _ = make_pool(backend, workers=1)
    with pool:
        jobs = pool.prepare_baselines([RELU, ADD, RELU])  # the repeated problem joins the job in flight
        candidates = [pool.submit(p, code("correct", t)) for t in range(3) for p in (RELU, ADD)]
        assert all(f.result(5).correct for f in jobs + candidates)
        assert pool.prepare_baselines([RELU, ADD]) == []  # known now: nothing queued
        m = pool.metrics()
    measured = sorted((problem, mode) for _, mode, _, problem, measure in backend.log if measure)
    assert measured == [("L0_01_vector_add", "baselines"), ("L0_02_relu", "baselines")]
    for problem in (RELU.id, ADD.id):  # each problem's baselines ran before any of its candidates
        modes = [mode for _, mode, _, p, _ in backend.log if p == problem]
        assert modes[0] == "baselines" and modes.count("baselines") == 1
    # baseline jobs are not verdicts: the pool's verdict counts hold the six candidates only
    assert m["pool/baseline_jobs"] == 3 and m["pool/verdicts/correct"] == 6 and m["pool/answered"] == 6


def test_prepare_baselines_in_the_background_behind_the_candidates_it_does_not_serve():
    """One slot: the baseline jobs run in the order given, except the ones a queued candidate waits for, which run
    first at that candidate's priority; the candidates never measure, and wait for their own problem's job only."""
    backend = FakeBackend(device="cuda", actors=1)
    pool, _ = make_pool(backend, workers=1)
    ids = ["L0_03_scale_shift", "L0_04_sigmoid", "L0_05_leaky_relu", "L0_06_clamp", "L0_07_elementwise_mul_add"]
    problems = [resolve_problem(i) for i in ids]
    scale, sigmoid, leaky, clamp, mul_add = problems
    with pool:
        backend.gate.clear()
        blocker = pool.submit(ADD, code("block", 0))  # holds the one slot while the rest is queued
        wait_for(lambda: backend.log)
        jobs = pool.prepare_baselines(problems)
        train = pool.submit(clamp, code("correct", 1))
        validation = pool.submit(sigmoid, code("correct", 2), priority="validation")
        wait_for(lambda: queued(pool) == 7)
        backend.gate.set()
        assert all(f.result(10).correct for f in [blocker, train, validation, *jobs])
    runs = [(mode, problem, measure) for _, mode, _, problem, measure in backend.log[1:]]
    baselines = [problem for mode, problem, _ in runs if mode == "baselines"]
    assert baselines == [sigmoid.id, clamp.id, scale.id, leaky.id, mul_add.id]
    assert not any(measure for mode, _, measure in runs if mode != "baselines")  # no candidate measured
    position = {(mode, problem): i for i, (mode, problem, _) in enumerate(runs)}
    for problem in (sigmoid, clamp):
        assert position[("baselines", problem.id)] < position[("correct", problem.id)]


def test_prepare_baselines_is_a_no_op_where_nothing_is_timed():
    pool, backend = make_pool(actors=1)
    with pool:
        assert pool.prepare_baselines([RELU, ADD]) == []
    assert backend.log == []


def test_evaluate_async_and_cache_hits(tmp_cache):
    pool, backend = make_pool(actors=1, workers=2, cache=tmp_cache)

    async def main():
        return await asyncio.gather(*[pool.evaluate_async(RELU, code("correct", t)) for t in range(3)])

    with pool:
        assert all(v.correct for v in asyncio.run(main()))
        again = pool.evaluate(RELU, code("correct", 0))
        m = pool.metrics()
    assert again.cached and len(backend.log) == 3
    assert m["pool/cache_hits"] == 1 and m["pool/cache_hit_rate"] == pytest.approx(0.25)


def test_metrics_are_flat_and_sane():
    pool, backend = make_pool(actors=2, workers=1)
    with pool:
        # Both actors must run a request to have reported their stats: the first is held on one actor, so
        # the others go to the second (left alone, the first actor may be free again for each of them).
        backend.gate.clear()
        held = pool.submit(RELU, code("block", 0))  # a held request ends correct
        wait_for(lambda: backend.log)
        pool.evaluate_many([(RELU, code(m, i)) for i, m in [(1, "incorrect"), (2, "correct")]])
        backend.gate.set()
        assert held.result(10).correct
        m = pool.metrics()
    assert {actor for actor, *_ in backend.log} == {1, 2}
    for stage in ("cpu_stage", "queue_wait", "execution", "total"):
        assert (
            0
            <= m[f"pool/latency/{stage}_p50_s"]
            <= m[f"pool/latency/{stage}_p90_s"]
            <= m[f"pool/latency/{stage}_p99_s"]
        )
        assert m[f"pool/latency/{stage}_count"] == 3
    assert m["pool/verdicts/correct"] == 2 and m["pool/verdicts/incorrect"] == 1
    assert m["pool/verdict_frac/correct"] == pytest.approx(2 / 3)
    assert m["pool/queue_depth"] == m["pool/pending"] == m["pool/in_flight"] == 0
    per_actor = sorted(v for k, v in m.items() if k.startswith("pool/gpu_busy_fraction/"))
    assert per_actor == pytest.approx([0.1, 0.2]) and m["pool/gpu_busy_fraction"] == pytest.approx(0.15)
    assert m["pool/worker_utilization"] == pytest.approx(0.5) and m["pool/actors_alive"] == 2
    assert all(isinstance(v, (int, float)) for v in m.values())


def test_request_overrunning_execution_timeout_kills_its_actor():
    pool, backend = make_pool(actors=1, workers=1, execution_timeout=0.3)
    with pool:
        backend.gate.clear()  # "block" never returns by itself: the watchdog must step in
        verdict = pool.submit(RELU, code("block", 0)).result(20)
        assert pool.evaluate(RELU, code("correct", 1)).correct  # on a replacement actor
        m = pool.metrics()
    assert verdict.status is Status.CRASH and "execution_timeout=0.3" in verdict.error
    assert m["pool/actor_failures"] == 2 and m["pool/actor_restarts"] == 2
