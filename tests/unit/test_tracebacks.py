"""Which candidate failures count as Triton failing to build the kernel (compile_error) and which as the code
failing when it runs (runtime_error): envs/worker/tracebacks.py."""

import os

import pytest
import triton

from envs.worker.tracebacks import describe_exception, is_compile_error

TRITON_ROOT = os.path.dirname(os.path.abspath(triton.__file__))


def _raised_in(path: str, error: BaseException) -> BaseException:
    """`error` raised by code whose frame names `path`, as Triton's own modules would raise it."""
    code = compile("def fail(e):\n    raise e\n", path, "exec")
    namespace: dict = {}
    exec(code, namespace)
    try:
        namespace["fail"](error)
    except BaseException as e:  # noqa: BLE001 - the exception itself is what is returned
        return e
    raise AssertionError("fail() returned")


@pytest.mark.parametrize(
    "where, compile_error",
    [
        (("backends", "nvidia", "compiler.py"), True),  # an MLIR pass of the CUDA backend (make_ttgir)
        (("compiler", "compiler.py"), True),  # loading the binary: shared memory the GPU lacks
        (("backends", "nvidia", "driver.py"), False),  # the launch: a grid or argument the driver refuses
        (("runtime", "jit.py"), False),
    ],
)
def test_errors_raised_inside_tritons_compiler_are_compile_errors(where, compile_error):
    e = _raised_in(os.path.join(TRITON_ROOT, *where), RuntimeError("PassManager::run failed"))
    assert is_compile_error(e) is compile_error


def test_a_cuda_fault_surfacing_while_triton_loads_a_binary_stays_a_runtime_error():
    loading = os.path.join(TRITON_ROOT, "compiler", "compiler.py")
    for message in ("CUDA error: an illegal memory access was encountered", "CUDA out of memory"):
        assert not is_compile_error(_raised_in(loading, RuntimeError(message)))


def test_a_compiler_failure_wrapped_by_the_candidate_still_counts():
    inner = _raised_in(os.path.join(TRITON_ROOT, "backends", "amd", "compiler.py"), RuntimeError("pass failed"))
    try:
        raise ValueError("my wrapper") from inner
    except ValueError as outer:
        assert is_compile_error(outer)


def test_the_candidates_own_errors_are_runtime_errors(tmp_path):
    solution = str(tmp_path / "solution.py")
    e = _raised_in(solution, RuntimeError("shape mismatch"))
    assert not is_compile_error(e)
    # and a file outside Triton that happens to be called compiler.py is not Triton's compiler
    assert not is_compile_error(_raised_in(str(tmp_path / "backends" / "compiler.py"), RuntimeError("x")))
    text = describe_exception(e, solution)
    assert "solution line 2" in text and "shape mismatch" in text
