"""A GPU's concurrent evaluations: halved after the environment's out-of-memory error, grown back one at a time
(envs/worker/gpu_concurrency.py), with real threads."""

import threading
import time

import pytest

from envs.worker.gpu_concurrency import GpuConcurrency


def test_a_crowd_failing_together_halves_the_limit_once():
    gpu = GpuConcurrency(ceiling=4)
    for _ in range(4):  # four evaluations admitted under 4, all out of memory
        gpu.out_of_memory(admitted_under=4)
    assert (gpu.limit, gpu.cuts) == (2, 1)
    gpu.out_of_memory(admitted_under=2)
    gpu.out_of_memory(admitted_under=1)  # never below one
    assert (gpu.limit, gpu.cuts) == (1, 2)


def test_the_limit_grows_back_by_one_after_a_streak_and_an_oom_restarts_the_streak():
    gpu = GpuConcurrency(ceiling=4, recover_after=3)
    gpu.out_of_memory(admitted_under=4)
    gpu.out_of_memory(admitted_under=2)
    assert gpu.limit == 1
    gpu.got_through()
    gpu.got_through()
    gpu.out_of_memory(admitted_under=1)  # the streak starts again
    for _ in range(2):
        gpu.got_through()
    assert gpu.limit == 1
    gpu.got_through()
    assert gpu.limit == 2
    for _ in range(3 * 5):
        gpu.got_through()
    assert gpu.limit == 4  # not past the ceiling


def test_admission_waits_at_the_limit_and_resumes_when_one_leaves():
    gpu = GpuConcurrency(ceiling=2)
    gpu.out_of_memory(admitted_under=2)  # limit 1
    inside = threading.Event()
    leave = threading.Event()
    admitted = []

    def first():
        with gpu.admit() as (under, waited):
            admitted.append(("first", under, waited))
            inside.set()
            leave.wait(5)

    def second():
        with gpu.admit() as (under, waited):
            admitted.append(("second", under, waited))

    a = threading.Thread(target=first)
    a.start()
    assert inside.wait(5)
    b = threading.Thread(target=second)
    b.start()
    time.sleep(0.2)
    assert [name for name, *_ in admitted] == ["first"]  # the second waits while the first holds the GPU
    leave.set()
    a.join(5)
    b.join(5)
    assert [name for name, *_ in admitted] == ["first", "second"]
    assert admitted[0][1:] == (1, pytest.approx(0.0, abs=0.05))
    assert admitted[1][1] == 1 and admitted[1][2] >= 0.15


def test_a_raised_limit_admits_a_waiting_evaluation_at_once():
    gpu = GpuConcurrency(ceiling=2, recover_after=1)
    gpu.out_of_memory(admitted_under=2)
    holding = threading.Event()
    release = threading.Event()
    second_in = threading.Event()

    def hold():
        with gpu.admit():
            holding.set()
            release.wait(5)

    def wait_then_enter():
        with gpu.admit():
            second_in.set()

    a = threading.Thread(target=hold)
    a.start()
    assert holding.wait(5)
    b = threading.Thread(target=wait_then_enter)
    b.start()
    assert not second_in.wait(0.2)
    gpu.got_through()  # another evaluation got through: the limit is 2 again, while the first still runs
    assert second_in.wait(5)
    release.set()
    a.join(5)
    b.join(5)


def test_an_exception_inside_still_releases_the_place():
    gpu = GpuConcurrency(ceiling=1)
    with pytest.raises(RuntimeError):
        with gpu.admit():
            raise RuntimeError("the worker died")
    with gpu.admit() as (under, waited):  # would block forever if the place were kept
        assert under == 1 and waited < 0.05


@pytest.mark.parametrize("ceiling,recover_after", [(0, 8), (4, 0)])
def test_nonsense_settings_are_refused(ceiling, recover_after):
    with pytest.raises(ValueError, match=">= 1"):
        GpuConcurrency(ceiling, recover_after)
