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


def _enter_in_thread(gpu: GpuConcurrency, key: str, inside: list, leave: threading.Event) -> threading.Thread:
    def run():
        with gpu.admit(key):
            inside.append(key)
            leave.wait(5)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _wait_for(condition, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return False


def test_memory_holds_back_an_evaluation_that_would_not_fit_beside_the_running_ones():
    gpu = GpuConcurrency(ceiling=4)
    gpu.know_device(80 + 4 * 0.75)  # 80 GiB for evaluations
    for key, gib in (("relu", 30.0), ("sigmoid", 27.0), ("softmax", 10.0)):
        gpu.observe(key, gib)
    inside, leave = [], threading.Event()
    threads = [_enter_in_thread(gpu, key, inside, leave) for key in ("relu", "sigmoid")]
    assert _wait_for(lambda: len(inside) == 2)
    late = _enter_in_thread(gpu, "relu", inside, leave)  # 30 + 27 + 30 > 80: waits
    time.sleep(0.2)
    assert sorted(inside) == ["relu", "sigmoid"]
    leave.set()
    for t in [*threads, late]:
        t.join(5)
    assert inside[2:] == ["relu"]


def test_small_evaluations_fill_what_large_ones_leave_and_overtake_a_large_one_that_does_not_fit():
    gpu = GpuConcurrency(ceiling=4)
    gpu.know_device(80 + 4 * 0.75)
    for key, gib in (("relu", 30.0), ("softmax", 10.0)):
        gpu.observe(key, gib)
    inside, leave_big, leave_small = [], threading.Event(), threading.Event()
    big = [_enter_in_thread(gpu, "relu", inside, leave_big) for _ in range(2)]
    small = _enter_in_thread(gpu, "softmax", inside, leave_small)  # 70 of 80: fits beside two relus
    assert _wait_for(lambda: len(inside) == 3)
    third = _enter_in_thread(gpu, "relu", inside, leave_big)  # 100 > 80: waits
    time.sleep(0.1)
    behind = _enter_in_thread(gpu, "softmax", inside, leave_small)  # 80 of 80: fits, so it goes ahead
    assert _wait_for(lambda: len(inside) == 4)
    assert inside[3] == "softmax"
    leave_small.set()
    leave_big.set()
    for t in [*big, small, third, behind]:
        t.join(5)
    assert inside[4:] == ["relu"]


def test_an_evaluation_that_does_not_fit_is_overtaken_a_bounded_number_of_times():
    from envs.worker.gpu_concurrency import MAX_OVERTAKEN

    gpu = GpuConcurrency(ceiling=MAX_OVERTAKEN + 4)
    gpu.know_device(80 + (MAX_OVERTAKEN + 4) * 0.75)
    for key, gib in (("relu", 50.0), ("softmax", 20.0 / MAX_OVERTAKEN)):
        gpu.observe(key, gib)
    inside, leave_relu, leave_small = [], threading.Event(), threading.Event()
    first = _enter_in_thread(gpu, "relu", inside, leave_relu)
    assert _wait_for(lambda: len(inside) == 1)
    waiting = _enter_in_thread(gpu, "relu", inside, leave_relu)  # 100 > 80: waits for the first
    time.sleep(0.1)
    smalls = [_enter_in_thread(gpu, "softmax", inside, leave_small) for _ in range(MAX_OVERTAKEN + 1)]
    assert _wait_for(lambda: len(inside) == 1 + MAX_OVERTAKEN)
    time.sleep(0.2)
    assert inside.count("softmax") == MAX_OVERTAKEN  # 71.25 of 80 would fit, yet the last waits behind the relu
    leave_relu.set()  # both relus get in before the last softmax: the waiting one first, in order
    leave_small.set()
    for t in [first, waiting, *smalls]:
        t.join(5)
    assert inside[1 + MAX_OVERTAKEN :] == ["relu", "softmax"]


def test_an_idle_gpu_admits_one_evaluation_whatever_it_needs_and_unknown_problems_get_an_even_share():
    gpu = GpuConcurrency(ceiling=4)
    assert gpu.need("relu") == 0.0  # no worker has reported the device: memory is not counted
    gpu.know_device(43.0)
    gpu.know_device(143.0)  # the first report counts
    assert gpu.capacity_gib == pytest.approx(40.0)
    assert gpu.need("never_seen") == pytest.approx(10.0)
    gpu.observe("huge", 120.0)
    with gpu.admit("huge") as (_, waited):
        assert waited < 0.05


def test_a_problems_need_is_the_most_its_recent_evaluations_reserved():
    from envs.worker.gpu_concurrency import NEED_WINDOW

    gpu = GpuConcurrency(ceiling=2)
    gpu.know_device(100.0)
    gpu.observe("relu", 30.0)
    gpu.observe("relu", 9.0)  # a compile error that reserved only the inputs
    gpu.observe("relu", None)  # a CPU result: nothing reported
    assert gpu.need("relu") == 30.0
    for _ in range(NEED_WINDOW):
        gpu.observe("relu", 12.0)
    assert gpu.need("relu") == 12.0  # the 30 GiB evaluation has left the window


def test_the_count_limit_still_applies_beside_the_memory():
    gpu = GpuConcurrency(ceiling=2)
    gpu.know_device(1000.0)
    gpu.observe("small", 1.0)
    gpu.out_of_memory(admitted_under=2)  # limit 1
    inside, leave = [], threading.Event()
    first = _enter_in_thread(gpu, "small", inside, leave)
    assert _wait_for(lambda: len(inside) == 1)
    second = _enter_in_thread(gpu, "small", inside, leave)
    time.sleep(0.2)
    assert len(inside) == 1
    leave.set()
    first.join(5)
    second.join(5)
    assert len(inside) == 2
