"""Step deadlines (envs/worker/progress.py) on a real progress board, driven through the worker-side API."""

import pytest

from envs.settings import EvalSettings, StepBudget, StepDeadlines
from envs.worker.progress import ProgressBoard, StepWatch

BUDGET = StepBudget(fixed_s=5.0, multiple=100.0, compile_s=60.0)


@pytest.fixture
def board():
    board = ProgressBoard.create()
    if board is None:
        pytest.skip("no memfd on this platform")
    yield board
    board.close()


def test_the_step_deadline_is_fixed_plus_a_multiple_of_the_reference_and_moves_with_each_call(board):
    watch = StepWatch(board, BUDGET, reference_s=0.002, allow_compile=True, now=100.0)
    assert watch.deadline(101.0) == pytest.approx(100.0 + 5.0 + 0.2)
    board.call_done()
    assert watch.deadline(103.0) == pytest.approx(103.0 + 5.2)  # progress seen at 103 starts a new step
    assert watch.deadline(107.0) == pytest.approx(108.2)  # no progress since: the deadline stays
    assert "5.2 s" in watch.describe() and "2.000 ms" in watch.describe()


def test_a_long_launch_is_excused_as_compilation_up_to_compile_s_on_cuda(board):
    watch = StepWatch(board, BUDGET, reference_s=0.0, allow_compile=True, now=0.0)
    seen = []

    def compiling(*args, **kwargs):  # observed by the parent while Triton's launcher runs
        seen.extend(watch.deadline(t) for t in (1.0, 20.0, 70.0))

    board.flagged(compiling)()
    assert seen == pytest.approx([5.0, 5.0 + 19.0, 5.0 + 60.0])  # the clock stops while compiling, up to 60 s
    assert watch.deadline(71.0) == pytest.approx(65.0)  # after the launch: the excused 60 s remain, no more


def test_a_stream_of_short_launches_earns_no_allowance(board):
    """A host loop that never ends but keeps launching kernels must still be cut."""
    watch = StepWatch(board, BUDGET, reference_s=0.0, allow_compile=True, now=0.0)
    launch = board.flagged(lambda t: watch.deadline(t))
    deadlines = [launch(t / 10) for t in range(1, 100)]  # each launch seen once, at a different number
    assert watch.deadline(10.0) == pytest.approx(5.0) and max(deadlines) == pytest.approx(5.0)


def test_the_interpreter_gets_no_compile_allowance_and_gpu_waits_are_not_charged(board):
    watch = StepWatch(board, StepBudget(10.0, 100.0, compile_s=60.0), reference_s=0.01, allow_compile=False, now=0.0)
    assert board.flagged(lambda: watch.deadline(30.0))() == pytest.approx(11.0)  # inside the launch the kernel runs
    watch.pause(4.0)
    assert watch.deadline(12.0) == pytest.approx(15.0)


def test_deadlines_are_configurable_per_device_and_typos_are_refused():
    settings = EvalSettings.from_mapping({"deadlines": {"cpu": {"fixed_s": 2.0}}})
    assert settings.deadlines.cpu == StepBudget(2.0, StepDeadlines().cpu.multiple)
    assert settings.deadlines.for_device("cuda") == StepDeadlines().cuda
    with pytest.raises(ValueError, match="fixd_s"):
        EvalSettings.from_mapping({"deadlines": {"cpu": {"fixd_s": 2.0}}})
    with pytest.raises(ValueError, match="tpu"):
        EvalSettings.from_mapping({"deadlines": {"tpu": {"fixed_s": 2.0}}})
