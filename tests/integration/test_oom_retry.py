"""The environment's CUDA out-of-memory errors are retried, not judged (envs/worker/oom.py), on CPU: real worker
processes, the candidate raising a real torch.OutOfMemoryError. On CPU the worker holds no device memory and the
device's free memory is unknown, so the budget (`worker_memory_gib`) alone decides: a request within it stands
for "the GPU was full of other processes", one beyond it for a candidate asking for more than its share."""

import textwrap

import pytest

from envs import EvalSettings, Evaluator, PhaseTimeouts, Status
from envs.source import prepare_solution
from envs.worker.worker_set import QUEUE_STEPS
from tests.conftest import builtin

pytestmark = pytest.mark.integration

RELU = builtin("L0_02_relu")
RETRIES = 2


def flaky(attempts_file, failures: int, request: str, error: str | None = None) -> str:
    """The relu reference solution, but each evaluation (one ModelNew built) is logged to `attempts_file`, and
    the first `failures` evaluations raise CUDA's out-of-memory error asking for `request` in their forward
    (or `error`, an expression for the exception to raise)."""
    message = f"CUDA out of memory. Tried to allocate {request}. GPU 0 has a total capacity of 139.72 GiB"
    error = error or f"torch.OutOfMemoryError({message!r})"
    return textwrap.dedent(
        f"""
        import torch, triton, triton.language as tl
        import torch.nn as nn

        @triton.jit
        def _relu(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            m = offs < n
            tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=m), 0.0), mask=m)

        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                with open({str(attempts_file)!r}, "a") as f:
                    f.write("attempt\\n")
                with open({str(attempts_file)!r}) as f:
                    self.attempt = len(f.readlines())

            def forward(self, x):
                if self.attempt <= {failures}:
                    raise {error}
                out = torch.empty_like(x)
                _relu[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
                return out
        """
    )


@pytest.fixture(scope="module")
def evaluator():
    settings = EvalSettings(
        device="cpu",
        sandbox="off",  # the candidates count their attempts in a file of the test's
        timeouts=PhaseTimeouts(load=60, compile=30, correctness=60, timing=30),
        worker_memory_gib=4.0,
        oom_retries=RETRIES,
        oom_backoff_s=0.05,
    )
    with Evaluator(settings) as ev:
        yield ev


def run(evaluator, code):
    """The execution stage (the static analysis would refuse a candidate writing files)."""
    problem, _ = RELU
    return evaluator.pool.execute(problem, prepare_solution(code), None)[0]


def attempts(path) -> int:
    return len(path.read_text().splitlines())


def test_a_transient_oom_within_the_budget_is_retried_to_the_real_verdict(evaluator, tmp_path):
    log = tmp_path / "attempts"
    verdict = run(evaluator, flaky(log, failures=1, request="2.00 GiB"))
    assert verdict.status is Status.CORRECT, verdict.error
    assert attempts(log) == 2
    assert any("other processes" in n for n in verdict.notes)
    phases = verdict.phase_seconds
    assert phases["oom_backoff"] >= 0.05
    # the waits of both attempts, by cause; the retry's fresh worker had to start first
    assert phases["queue"] == pytest.approx(sum(phases[k] for k in QUEUE_STEPS))
    assert phases["queue.worker_start"] > 0
    assert evaluator.pool.oom_retries >= 1
    assert evaluator.metrics()["pool/oom_retries"] == evaluator.pool.oom_retries
    assert evaluator.metrics()["pool/worker_replacements"] >= 1


def test_cudas_own_out_of_memory_error_is_retried_too(evaluator, tmp_path):
    """torch.AcceleratorError "CUDA error: out of memory" (cudaErrorMemoryAllocation outside the allocator) on
    a device with no room known: the environment's, retried to the real verdict."""
    log = tmp_path / "attempts"
    code = flaky(log, failures=1, request="", error='torch.AcceleratorError("CUDA error: out of memory")')
    verdict = run(evaluator, code)
    assert verdict.status is Status.CORRECT, verdict.error
    assert attempts(log) == 2


def test_an_oom_that_persists_ends_as_the_environments_failure_after_bounded_retries(evaluator, tmp_path):
    log = tmp_path / "attempts"
    failures_before = evaluator.pool.oom_failures
    verdict = run(evaluator, flaky(log, failures=100, request="2.00 GiB"))
    assert verdict.status is Status.INTERNAL_ERROR
    assert "out of memory because of other processes" in verdict.error and "not its fault" in verdict.error
    assert attempts(log) == 1 + RETRIES
    assert evaluator.pool.oom_failures == failures_before + 1


def test_an_oom_over_the_budget_is_the_candidates_runtime_error_at_once(evaluator, tmp_path):
    log = tmp_path / "attempts"
    verdict = run(evaluator, flaky(log, failures=100, request="8.00 GiB"))
    assert verdict.status is Status.RUNTIME_ERROR
    assert "over its budget of 4.00 GiB" in verdict.error
    assert attempts(log) == 1
    assert not any("other processes" in n for n in verdict.notes)


def test_an_oom_before_any_candidate_code_ran_is_retried_whatever_it_asked_for(evaluator, tmp_path):
    """The reference itself runs out of memory (on a GPU the colocated engine and learner filled): no candidate
    code has run, so the request is not the candidate's even though it is over the budget."""
    from envs.problems import parse_problem

    log = tmp_path / "reference_attempts"
    problem_source, solution = RELU[0].source, RELU[1]
    flaky_reference = problem_source.replace(
        "        return torch.relu(x)",
        textwrap.indent(
            textwrap.dedent(
                f"""
                with open({str(log)!r}, "a") as f:
                    f.write("call\\n")
                with open({str(log)!r}) as f:
                    if len(f.readlines()) == 1:
                        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB.")
                return torch.relu(x)"""
            ).strip("\n"),
            "        ",
        ),
    )
    assert flaky_reference != problem_source
    problem = parse_problem(flaky_reference, "L0_02_relu_flaky_reference", str(tmp_path / "p.py"), level=0)
    verdict = evaluator.pool.execute(problem, prepare_solution(solution), None)[0]
    assert verdict.status is Status.CORRECT, verdict.error
    assert any("before any of the candidate's code ran" in n for n in verdict.notes), verdict.notes


def test_an_oom_of_the_environment_runs_fewer_evaluations_at_once_on_that_gpu(tmp_path):
    """With two workers, an evaluation that ran out of memory because of other processes halves how many run at
    once (envs/worker/gpu_concurrency.py); its retry still reaches the real verdict."""
    settings = EvalSettings(
        device="cpu",
        sandbox="off",
        workers=2,
        timeouts=PhaseTimeouts(load=60, compile=30, correctness=60, timing=30),
        worker_memory_gib=4.0,
        oom_retries=RETRIES,
        oom_backoff_s=0.05,
    )
    log = tmp_path / "attempts"
    with Evaluator(settings) as ev:
        assert ev.pool.concurrency_cuts == 0
        verdict = run(ev, flaky(log, failures=1, request="2.00 GiB"))
        assert verdict.status is Status.CORRECT, verdict.error
        assert ev.pool.concurrency_cuts == 1
        verdict = run(ev, flaky(tmp_path / "again", failures=1, request="2.00 GiB"))
        assert verdict.status is Status.CORRECT, verdict.error
        assert ev.pool.concurrency_cuts == 1  # already at one: nothing left to cut
