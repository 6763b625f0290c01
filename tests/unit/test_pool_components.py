"""The evaluation pool's components on their own (envs/pool/README.md): what each decides, without a whole pool."""

from __future__ import annotations

import threading
import time

import pytest

from envs import EvalSettings, Status, Verdict, resolve_problem
from envs.cpu_stage import Candidate, CpuStage
from envs.pool import PoolClosedError, PoolConfig
from envs.pool.backend import Backend
from envs.pool.dispatch import Dispatcher
from envs.pool.intake import Intake
from envs.pool.metrics import PoolMetrics
from envs.pool.replies import Replies
from envs.pool.scheduler import Admission, Job, JobQueue, JobState, Lifecycle, Request
from envs.pool.supervision import ActorSupervisor
from envs.source import CanonicalSolution
from envs.worker.worker_set import EvaluatorError

RELU = resolve_problem("L0_02_relu")
SETTINGS = EvalSettings(device="cpu")


class Launcher(Backend):
    """Starts numbered fake actors; `kinds` gives each launch its device kind, `fail` makes launches raise."""

    def __init__(self, kinds=None, fail: bool = False):
        self.kinds, self.fail, self.started, self.killed = kinds, fail, 0, []

    def launch(self, settings):
        if self.fail:
            raise RuntimeError("no room")
        self.started += 1
        kind = self.kinds[self.started - 1] if self.kinds else "cpu|v1"
        return f"actor-{self.started}", {"device_kind": kind, "workers": 2}

    def kill(self, handle):
        self.killed.append(handle)


def parts():
    metrics = PoolMetrics(100, None)
    return threading.Condition(threading.Lock()), Lifecycle(), metrics, Replies(metrics)


def supervisor(backend, taken=None, restarts=4):
    wake, lifecycle, metrics, replies = parts()
    taken = [] if taken is None else taken
    actors = ActorSupervisor(
        backend,
        SETTINGS,
        PoolConfig(max_actor_restarts=restarts, ray_metrics=False),
        wake,
        lifecycle,
        metrics,
        replies,
        take_queued=lambda: list(taken),
    )
    return actors, wake, lifecycle, metrics


def candidate(key: str = "k") -> Candidate:
    return Candidate(RELU, CanonicalSolution("code", "sha"), key, "b", 0.0)


def request(seq: int = 0, rank: int = 1) -> Request:
    return Request(RELU, "answer", rank, seq)


# --- Replies ------------------------------------------------------------------------------------------
def test_replies_answer_each_request_once_and_skip_the_cancelled():
    wake, lifecycle, metrics, replies = parts()
    done, cancelled = request(0), request(1)
    cancelled.future.cancel()
    replies.send([done, cancelled], Verdict(Status.CORRECT, RELU.id, "cpu"))
    replies.send([done], error=RuntimeError("late"))  # already answered: ignored
    assert done.future.result().correct and cancelled.future.cancelled()
    counters = metrics.snapshot({}, {}, {})
    assert counters["pool/answered"] == 2 and counters["pool/errors"] == 1  # counted as sent, as before


# --- ActorSupervisor ----------------------------------------------------------------------------------
def test_supervisor_starts_actors_of_one_device_kind_or_none():
    actors, *_ = supervisor(Launcher())
    assert actors.start(2) == "cpu|v1" and len(actors.live()) == 2
    mixed = Launcher(kinds=["cpu|v1", "cuda|v2"])
    with pytest.raises(EvaluatorError, match="different devices"):
        supervisor(mixed)[0].start(2)
    with pytest.raises(EvaluatorError, match="2 of 2 evaluation actors failed to start"):
        supervisor(Launcher(fail=True))[0].start(2)


def test_supervisor_offers_the_least_busy_free_slot():
    actors, wake, *_ = supervisor(Launcher())
    actors.start(2)
    first, second = actors.live()
    first.busy = 1
    assert actors.free() is second
    second.busy = 2  # full
    assert actors.free() is first and actors.least_busy() is first
    first.busy = 2
    assert actors.free() is None and actors.least_busy() is first


def test_supervisor_marks_overdue_actors_once():
    actors, *_ = supervisor(Launcher())
    actors.start(1)
    (actor,) = actors.live()
    job = Job(candidate(), request())
    job.dispatched = time.monotonic() - 100
    actor.jobs.add(job)
    assert actors.overdue(time.monotonic(), 10.0) == [actor] and "execution_timeout=10" in actor.killing
    assert actors.overdue(time.monotonic(), 10.0) == []


def test_a_dead_actor_is_replaced_in_the_background():
    backend = Launcher()
    actors, wake, lifecycle, metrics = supervisor(backend)
    actors.start(1)
    (dead,) = actors.live()
    with wake:
        actors.failed(dead, "gone")
        actors.failed(dead, "gone")  # once
    deadline = time.monotonic() + 10
    while not actors.live() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [a.id for a in actors.live()] == [1] and backend.killed == [dead.handle]
    counters = metrics.snapshot({}, {}, {})
    assert counters["pool/actor_failures"] == 1 and counters["pool/actor_restarts"] == 1
    assert actors.retire_all() == (["actor-2"], [{"device_kind": "cpu|v1", "workers": 2}] * 2)


def test_without_restarts_left_the_queued_requests_get_the_starvation_error():
    queued = Job(candidate(), request())
    actors, wake, *_ = supervisor(Launcher(), taken=[queued], restarts=0)
    actors.start(1)
    with wake:
        actors.failed(actors.live()[0], "gone")
    with pytest.raises(EvaluatorError, match="max_actor_restarts=0"):
        queued.requests[0].future.result(timeout=10)
    assert actors.none_left()


# --- Dispatcher ---------------------------------------------------------------------------------------
@pytest.fixture
def dispatcher():
    actors, wake, lifecycle, metrics = supervisor(Launcher())
    lifecycle.stopped = True  # its thread returns at once: enqueue and withdraw are called directly
    d = Dispatcher(
        Launcher(),
        CpuStage(SETTINGS, "cpu|v1"),
        actors,
        wake,
        lifecycle,
        metrics,
        Replies(metrics),
        JobQueue(),
        60.0,
        1,
    )
    d.join()
    yield d, wake
    d.shutdown_finisher()


def test_dispatcher_attaches_an_identical_candidate_to_the_job_in_flight(dispatcher):
    d, wake = dispatcher
    first, same, other = request(0), request(1, rank=0), request(2)
    with wake:
        assert d.enqueue(first, candidate("k")) and d.enqueue(same, candidate("k")) and d.enqueue(other, candidate("j"))
    assert first.job is same.job and first.job.requests == [first, same] and first.job.rank == 0  # promoted
    assert d.counts()["queued"] == 2


def test_a_withdrawn_request_drops_a_job_nobody_waits_for(dispatcher):
    d, wake = dispatcher
    alone = request(0)
    with wake:
        d.enqueue(alone, candidate("k"))
        d.withdraw(alone)
    assert alone.job.state is JobState.DONE and d.counts()["queued"] == 0 and d.take_queued() == []


# --- Intake -------------------------------------------------------------------------------------------
class Verdicts(CpuStage):
    """A CPU stage that answers every request itself (as for a static finding or a cache hit)."""

    def prepare(self, problem, answer):
        return Verdict(Status.HACK, problem.id, "cpu", error=answer)


def intake(stage: CpuStage, lifecycle: Lifecycle | None = None):
    actors, wake, own, metrics = supervisor(Launcher())
    actors.start(1)
    lifecycle = lifecycle or own
    admission = Admission(4)
    d = Dispatcher(Launcher(), stage, actors, wake, Lifecycle(), metrics, Replies(metrics), JobQueue(), 60.0, 1)
    return Intake(stage, admission, d, actors, wake, lifecycle, metrics, Replies(metrics), 1, False), admission, d, wake


def _stop(d, wake):
    with wake:
        d._lifecycle.stopped = True
        wake.notify_all()
    d.join()
    d.shutdown_finisher()


def test_intake_answers_what_the_cpu_stage_decides_and_releases_admission():
    take, admission, d, wake = intake(Verdicts(SETTINGS, "cpu|v1"))
    admission.acquire()
    verdict = take.accept(RELU, "a finding", 1).result(timeout=10)
    assert verdict.status is Status.HACK and verdict.error == "a finding"
    assert admission.wait_idle(5)
    take.shutdown()
    assert take.preparing == 0
    _stop(d, wake)


def test_intake_refuses_when_the_pool_is_closing_or_cancelled():
    lifecycle = Lifecycle()
    take, admission, d, wake = intake(CpuStage(SETTINGS, "cpu|v1"), lifecycle)
    lifecycle.closing = True
    admission.acquire()
    with pytest.raises(PoolClosedError):
        take.accept(RELU, "x", 1)
    assert admission.pending == 0  # its admission given back
    lifecycle.closing, lifecycle.cancelled = False, True
    admission.acquire()
    future = take.accept(RELU, "def f(:", 1)  # a compile error is answered before the cancellation matters
    assert future.result(timeout=10).status is Status.COMPILE_ERROR
    take.shutdown()
    _stop(d, wake)
