"""The Ray evaluation pool on GPUs: one actor per GPU, each actor's workers on its own GPU, baselines
measured once per problem and shared by every candidate, nothing left running after close."""

from __future__ import annotations

import os
import time
from pathlib import Path

import psutil
import pytest

from envs import EvalSettings, Status
from envs.pool import PoolConfig
from tests.conftest import builtin

pytestmark = [pytest.mark.gpu, pytest.mark.integration]
ray = pytest.importorskip("ray")


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode(errors="replace").split("=", 1) for item in raw if b"=" in item)


def _tagged() -> list[int]:
    found = []
    for d in Path("/proc").glob("[0-9]*"):
        try:
            if b"KERNELRL_WORKER_TAG=" in (d / "environ").read_bytes():
                found.append(int(d.name))
        except OSError:
            pass
    return found


def test_one_actor_per_gpu_with_shared_baselines():
    import torch
    from envs.pool import RayEvaluationPool

    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    before = set(_tagged())
    config = PoolConfig(workers_per_actor=2, init_kwargs={"include_dashboard": False}, shutdown_timeout=20)
    pool = RayEvaluationPool(EvalSettings(device="auto"), config)
    try:
        infos = pool.actor_infos()
        assert pool.device == "cuda" and len(infos) == torch.cuda.device_count()
        assert len({i["gpu"] for i in infos}) == len(infos)  # each actor has its own GPU
        relu, relu_ref = builtin("L0_02_relu")
        sigmoid, sigmoid_ref = builtin("L0_04_sigmoid")
        items = [(relu, relu_ref + f"\nVARIANT = {i}\n") for i in range(3)] + [
            (sigmoid, sigmoid_ref + f"\nVARIANT = {i}\n") for i in range(3)
        ]
        started = time.monotonic()
        verdicts = pool.evaluate_many(items)
        print(f"\n{len(items)} evaluations in {time.monotonic() - started:.1f} s")
        for v in verdicts:
            print(v.problem_id, v.status.value, v.speedup, {k: round(s, 2) for k, s in v.phase_seconds.items()})
        for problem_verdicts in (verdicts[:3], verdicts[3:]):
            # One baseline measurement per problem, shared: identical eager and inductor statistics,
            # and only the first evaluation of each problem has a baseline phase.
            timed = [v for v in problem_verdicts if v.timings is not None]
            assert timed and len({(v.timings.eager, v.timings.inductor) for v in timed}) == 1
            assert sum("baseline" in v.phase_seconds for v in problem_verdicts) == 1
        # Each actor's workers run on that actor's GPU only.
        for actor_id, pids in pool.worker_pids().items():
            gpu = next(i["gpu"] for i in infos if i["id"] == actor_id)
            assert pids and all(_environ(pid)["CUDA_VISIBLE_DEVICES"] == gpu for pid in pids)
        m = pool.metrics()
        print({k: round(v, 3) for k, v in m.items() if "busy" in k or "p50" in k})
        assert 0 < m["pool/gpu_busy_fraction"] <= 1 and m["pool/answered"] == len(items)
    finally:
        pool.close()
    deadline = time.monotonic() + 15
    while (
        left := [
            p
            for p in set(_tagged()) - before
            if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
        ]
    ) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left
    assert not ray.is_initialized()  # the pool started Ray, so it shut it down
    assert all(v.status is Status.CORRECT for v in verdicts), [v.error for v in verdicts]
    assert all(v.speedup and v.timings.kernel.runs == 100 for v in verdicts)


def test_prepare_baselines_ahead_of_candidates():
    """Baselines measured up front, one job per problem on the workers at once; the candidates that follow
    have no baseline phase of their own and share those measurements."""
    from envs.pool import RayEvaluationPool

    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    config = PoolConfig(workers_per_actor=4, init_kwargs={"include_dashboard": False}, shutdown_timeout=20)
    pool = RayEvaluationPool(EvalSettings(device="cuda"), config)
    try:
        pairs = [builtin(pid) for pid in ("L0_02_relu", "L0_04_sigmoid", "L2_01_softmax")]
        started = time.monotonic()
        jobs = pool.prepare_baselines([p for p, _ in pairs])
        done = [f.result(300) for f in jobs]
        print(f"\nbaselines of {len(jobs)} problems in {time.monotonic() - started:.1f} s")
        assert len(jobs) == 3 and all(v.correct for v in done), [v.error for v in done]
        assert pool.prepare_baselines([p for p, _ in pairs]) == []  # known now
        verdicts = pool.evaluate_many([(p, ref + "\nVARIANT = 'after'\n") for p, ref in pairs])
        for v in verdicts:
            print(v.problem_id, v.status.value, v.speedup, {k: round(s, 2) for k, s in v.phase_seconds.items()})
            assert v.correct and v.speedup and "baseline" not in v.phase_seconds
        assert pool.metrics()["pool/baseline_jobs"] == 3
    finally:
        pool.close()


def test_prepare_baselines_in_order_with_the_waiting_candidates_problem_first():
    """One worker slot: the baseline jobs run at the background rank in the order given, except the one a training
    candidate waits for, which takes the candidate's rank and runs ahead of the unrelated ones; the candidate then
    runs before them too, with no baseline phase of its own."""
    from envs.pool import RayEvaluationPool

    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    config = PoolConfig(
        num_actors=1, workers_per_actor=1, init_kwargs={"include_dashboard": False}, shutdown_timeout=20
    )
    pool = RayEvaluationPool(EvalSettings(device="cuda"), config)
    try:
        ids = ["L0_02_relu", "L0_04_sigmoid", "L0_05_leaky_relu", "L0_06_clamp", "L2_01_softmax"]
        pairs = [builtin(pid) for pid in ids]
        ended: list[str] = []  # completion order (callbacks run on the pool's threads; append is atomic)
        jobs = pool.prepare_baselines([p for p, _ in pairs])
        assert len(jobs) == len(ids)
        for pid, job in zip(ids, jobs):
            job.add_done_callback(lambda _, pid=pid: ended.append(pid))
        problem, ref = pairs[-1]
        candidate = pool.submit(problem, ref + "\nVARIANT = 'waiting'\n")  # train: above the background rank
        candidate.add_done_callback(lambda _: ended.append("candidate"))
        verdict = candidate.result(300)
        assert all(f.result(300).correct for f in jobs)
        print(f"\ncompletion order: {ended}")
        at = {name: i for i, name in enumerate(ended)}
        assert at["L0_04_sigmoid"] < at["L0_05_leaky_relu"] < at["L0_06_clamp"]  # unrelated: in the order given
        assert at["L2_01_softmax"] < at["L0_04_sigmoid"]  # lent the candidate's rank
        # the candidate is re-queued when its problem's job finishes; one unrelated job may start in between
        assert at["candidate"] < at["L0_05_leaky_relu"]
        assert verdict.correct and "baseline" not in verdict.phase_seconds
    finally:
        pool.close()
