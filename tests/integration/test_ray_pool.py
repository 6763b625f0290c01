"""The Ray evaluation pool on a local Ray instance: CPU actors, real worker processes, Triton's interpreter.

Two pools share one Ray instance: `pool` (2 actors x 2 workers) for the mixed batch, dedup, async,
metrics and finally actor failures; `serial` (1 actor x 1 worker) for priority order and backpressure.
Every pool is checked to leave no worker process behind once closed.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import psutil
import pytest

from envs import EvalSettings, PhaseTimeouts, Status, resolve_problem
from envs.pool import PoolConfig, PoolFullError
from rewards.kernel_reward import reward_for_verdict

pytestmark = pytest.mark.integration

ray = pytest.importorskip("ray")

SETTINGS = EvalSettings(
    device="cpu",
    correctness_trials=2,
    startup_timeout=120,
    timeouts=PhaseTimeouts(load=60, compile=60, correctness=4, timing=60),
)

RELU = resolve_problem("L0_02_relu")
REFERENCES = [
    resolve_problem(p)
    for p in (
        "L0_01_vector_add",
        "L0_02_relu",
        "L0_03_scale_shift",
        "L0_04_sigmoid",
        "L0_05_leaky_relu",
        "L0_06_clamp",
        "L1_02_swish",
    )
]

KERNEL = """
import time
import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def _k(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    STORE

class ModelNew(nn.Module):
    def forward(self, x):
        BEFORE
        out = torch.empty_like(x)
        _k[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
        return out
"""


def relu_candidate(
    store: str = "tl.store(out_ptr + offs, tl.maximum(x, 0.0), mask=mask)", before: str = "pass", tag: int = 0
) -> str:
    return KERNEL.replace("STORE", store).replace("BEFORE", before) + f"\nTAG = {tag}\n"


INCORRECT = relu_candidate("tl.store(out_ptr + offs, x * 2.0, mask=mask)")
SEGFAULT = relu_candidate("tl.store(out_ptr + offs + (1 << 40), x)")  # kills the interpreter's process
HANG = relu_candidate(before="while True:\n            pass")
SLOW = relu_candidate(before="time.sleep(0.3)")  # correct, ~2 s in all
EXIT = relu_candidate(before="import os\n        os._exit(3)")


def reference(problem) -> str:
    return Path(problem.reference_solution).read_text()


def kernelrl_workers(since: float) -> list[int]:
    """Worker processes (KERNELRL_WORKER_TAG in their environment) that are ours: below this test
    process, or orphaned (parent init) after `since`. Other sessions' evaluators are not counted."""
    me = os.getpid()
    found = []
    for proc in psutil.process_iter(["pid", "ppid", "create_time"]):
        try:
            if b"KERNELRL_WORKER_TAG=" not in Path(f"/proc/{proc.pid}/environ").read_bytes():
                continue
            ours = any(p.pid == me for p in proc.parents())
            orphan = proc.info["ppid"] == 1 and proc.info["create_time"] >= since - 1
            if (ours or orphan) and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc.pid)
        except (OSError, psutil.Error):
            continue
    return found


def assert_no_process_left(pool, since: float) -> None:
    deadline = time.monotonic() + 10
    while (left := kernelrl_workers(since)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, f"worker processes left behind: {left}"
    reapers = [info["reaper_pid"] for info in pool.actor_infos(include_retired=True)]
    assert reapers and not [
        pid for pid in reapers if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    ]


@pytest.fixture(scope="module")
def ray_local():
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    since = time.time()
    yield since
    if started:
        ray.shutdown()
        # What Ray started (earlier tests may leave their own helpers, e.g. W&B's wandb-core service of an
        # in-process benchmark, which lives as long as this process).
        children = [
            p
            for p in psutil.Process().children(recursive=True)
            if p.status() != psutil.STATUS_ZOMBIE and p.create_time() >= since - 1
        ]
        assert not children or not psutil.wait_procs(children, timeout=20)[1], "processes left after ray.shutdown"


def _make_pool(**config):
    from envs.pool import RayEvaluationPool

    return RayEvaluationPool(SETTINGS, PoolConfig(shutdown_timeout=10, **config))


@pytest.fixture(scope="module")
def pool(ray_local):
    pool = _make_pool(num_actors=2, workers_per_actor=2)
    yield pool
    pool.close()


@pytest.fixture(scope="module")
def serial(ray_local):
    pool = _make_pool(num_actors=1, workers_per_actor=1, max_pending=4)
    yield pool
    pool.close()
    assert_no_process_left(pool, ray_local)


def test_mixed_batch_answers_every_verdict_in_input_order(pool):
    items = [(p, reference(p)) for p in REFERENCES[:4]] + [
        (RELU, INCORRECT),
        (RELU, SEGFAULT),
        (RELU, HANG),
        (RELU, EXIT),
        (RELU, "def broken(:\n"),
    ]
    started = time.monotonic()
    verdicts = pool.evaluate_many(items)
    elapsed = time.monotonic() - started
    statuses = [v.status for v in verdicts]
    assert statuses[:4] == [Status.CORRECT] * 4, [v.error for v in verdicts[:4]]
    assert [v.problem_id for v in verdicts[:4]] == [p.id for p in REFERENCES[:4]]
    assert statuses[4] is Status.INCORRECT and verdicts[4].mismatch
    assert statuses[5] is Status.CRASH and "SIGSEGV" in verdicts[5].error
    assert statuses[6] is Status.TIMEOUT and "correctness" in verdicts[6].error
    # The static analysis stops os._exit before it runs; were it let through, the worker's death is a crash.
    assert statuses[7] in (Status.HACK, Status.CRASH)
    assert statuses[8] is Status.COMPILE_ERROR
    rewards = [reward_for_verdict(v) for v in verdicts]
    assert all(r > 0 for r in rewards[:4]) and all(r == 0 for r in rewards[4:])
    assert all(v.phase_seconds["total"] <= elapsed + 1 for v in verdicts)


def test_identical_in_flight_candidates_share_one_execution(pool):
    before = pool.metrics()
    candidate = relu_candidate(before="time.sleep(0.2)", tag=7)
    futures = [pool.submit(RELU, candidate + f"\n# copy {i}\n") for i in range(4)]  # comments don't matter
    verdicts = [f.result(120) for f in futures]
    after = pool.metrics()
    assert all(v.status is Status.CORRECT for v in verdicts), verdicts[0].error
    assert after["pool/dedup_hits"] - before["pool/dedup_hits"] == 3
    assert after["pool/executions"] - before["pool/executions"] == 1
    assert after["pool/answered"] - before["pool/answered"] == 4


def test_async_and_batch_submission(pool):
    async def main():
        return await asyncio.gather(
            *[pool.evaluate_async(p, reference(p), priority="validation") for p in REFERENCES[4:7]]
        )

    assert [v.status for v in asyncio.run(main())] == [Status.CORRECT] * 3
    futures = pool.submit_batch([(p, reference(p)) for p in REFERENCES[:2]], block=False)
    assert [f.result(120).status for f in futures] == [Status.CORRECT] * 2
    assert pool.evaluate(RELU, reference(RELU)).correct


def test_metrics_have_every_key_with_sane_values(pool):
    m = pool.metrics()
    for stage in ("cpu_stage", "queue_wait", "execution", "total"):
        p50, p90, p99 = (m[f"pool/latency/{stage}_p{q}_s"] for q in (50, 90, 99))
        assert 0 <= p50 <= p90 <= p99 < 300, stage
    assert m["pool/latency/execution_p99_s"] >= 4  # the hanging candidate ran into its 4 s timeout
    for key in (
        "pool/queue_depth",
        "pool/pending",
        "pool/in_flight",
        "pool/cache_hit_rate",
        "pool/dedup_hits",
        "pool/retries",
        "pool/actor_restarts",
        "pool/verdicts/correct",
        "pool/verdict_frac/timeout",
    ):
        assert key in m, key
    assert m["pool/pending"] == m["pool/queue_depth"] == m["pool/in_flight"] == 0
    assert m["pool/verdicts/timeout"] == m["pool/verdicts/crash"] == m["pool/verdicts/incorrect"] == 1
    assert m["pool/answered"] == m["pool/submitted"]
    assert m["pool/actors_alive"] == 2 and m["pool/retries"] == m["pool/actor_restarts"] == 0
    assert 0 < m["pool/gpu_busy_fraction"] <= 1
    assert {"pool/gpu_busy_fraction/actor_0", "pool/gpu_busy_fraction/actor_1"} <= set(m)


def _actor_running(pool, future) -> int:
    """White box: the id of the actor executing the request behind `future`."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with pool._lock:
            for actor in pool.actors.live():
                if any(future in [r.future for r in job.requests] for job in actor.jobs):
                    return actor.id
        time.sleep(0.05)
    raise AssertionError("the request never started")


def test_profile_goes_through_the_cpu_stage_to_an_actor(pool):
    """The profile tool's path on the pool: the answer passes the CPU stage (a static finding is the answer),
    then an actor's worker pool profiles it; CPU actors say that profiling needs a GPU."""
    hack = relu_candidate(before="import subprocess; subprocess.run(['true'])", tag=41)
    assert pool.profile(RELU, hack)["error"].startswith("hack: ")
    assert pool.profile(RELU, "def broken(:")["error"].startswith("compile_error: ")
    assert pool.profile(RELU, relu_candidate(tag=42)) == {"error": "profile needs a GPU"}
    assert all(a.busy == 0 for a in pool.actors.live())  # the slot it took is free again


def test_killed_actor_is_replaced_and_its_requests_retried_once_then_crash(pool, ray_local):
    before = pool.metrics()
    hang = pool.submit(RELU, HANG + "\nTAG2 = 1\n")
    others = [pool.submit(p, reference(p) + "\nX = 1\n") for p in REFERENCES[:5]]
    victim = _actor_running(pool, hang)
    workers = pool.worker_pids(wrappers=True)[victim]  # sandboxed, bubblewrap's processes must go too
    pool.kill_actor(victim)
    # The hung worker of the dead actor is killed by the actor's reaper, not left running.
    deadline = time.monotonic() + 10
    while [p for p in workers if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]:
        assert time.monotonic() < deadline, f"workers {workers} of the killed actor still run"
        time.sleep(0.1)
    # The retry runs on another actor; kill that one too: no third attempt, a crash verdict.
    second = _actor_running(pool, hang)
    assert second != victim
    pool.kill_actor(second)
    verdict = hang.result(180)
    assert verdict.status is Status.CRASH and "died 2 times" in verdict.error
    # The others ran beside it: correct, unless they too were on both killed actors.
    crashed = 1
    for other in others:
        v = other.result(180)
        assert v.status is Status.CORRECT or (v.status is Status.CRASH and "died 2 times" in v.error), v
        crashed += v.status is Status.CRASH
    deadline = time.monotonic() + 120
    while pool.metrics()["pool/actors_alive"] < 2:  # both replacements started
        assert time.monotonic() < deadline
        time.sleep(0.2)
    after = pool.metrics()
    assert after["pool/actor_failures"] - before["pool/actor_failures"] == 2
    assert after["pool/actor_restarts"] - before["pool/actor_restarts"] == 2
    assert after["pool/retries"] - before["pool/retries"] >= 1
    assert after["pool/crashes_after_retry"] - before["pool/crashes_after_retry"] == crashed
    assert after["pool/answered"] == after["pool/submitted"]  # none lost, none answered twice
    assert pool.evaluate(RELU, reference(RELU) + "\nY = 2\n").correct  # the replacements work


def test_close_leaves_no_worker_process(pool, ray_local):
    pool.close()
    assert_no_process_left(pool, ray_local)


def test_validation_runs_before_training_fifo_within(serial):
    order = []
    blocker = serial.submit(RELU, SLOW)
    deadline = time.monotonic() + 60
    while serial.metrics()["pool/in_flight"] == 0:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    futures = {}
    for name, problem, priority in [
        ("t1", REFERENCES[0], "train"),
        ("t2", REFERENCES[1], "train"),
        ("v1", REFERENCES[2], "validation"),
    ]:
        futures[name] = serial.submit(problem, reference(problem) + "\nP = 1\n", priority=priority)
        futures[name].add_done_callback(lambda _, n=name: order.append(n))
    assert blocker.result(120).correct
    assert all(f.result(120).correct for f in futures.values())
    assert order == ["v1", "t1", "t2"]


def test_backpressure_blocks_or_raises(serial):
    blocker = serial.submit(RELU, SLOW + "\nQ = 1\n")
    rest = [serial.submit(p, reference(p) + "\nQ = 1\n") for p in REFERENCES[:3]]
    with pytest.raises(PoolFullError, match="max_pending=4"):
        serial.submit(RELU, reference(RELU), block=False)
    with pytest.raises(PoolFullError):
        serial.submit(RELU, reference(RELU), timeout=0.1)
    late = serial.submit(RELU, reference(RELU) + "\nQ = 2\n", timeout=120)  # waits for room
    assert all(f.result(120).correct for f in [blocker, *rest, late])
    assert serial.metrics()["pool/pending"] == 0
