"""What the candidate is told when its code raises: its own frames and the final error, bounded in size.

Separate from the evaluation (envs/worker/evaluation.py) because it is pure text work on an exception,
shared by every phase that runs candidate code.
"""

from __future__ import annotations

import os
import traceback

_MAX_ERROR_CHARS = 4000


def describe_exception(exc: BaseException, solution_path: str | None) -> str:
    """The solution's own frames and the final error: what an LLM needs to fix its code."""
    frames = traceback.extract_tb(exc.__traceback__)
    lines = [
        f"  solution line {f.lineno}, in {f.name}: {(f.line or '').strip()}"
        for f in frames
        if solution_path and f.filename == solution_path
    ]
    if frames and (not lines or frames[-1].filename != solution_path):
        last = frames[-1]
        lines.append(f"  raised in {os.path.basename(last.filename)}:{last.lineno} ({last.name})")
    chain = exc
    message = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    # Triton wraps the real error; show the cause too.
    while chain.__cause__ is not None and len(message) < _MAX_ERROR_CHARS:
        chain = chain.__cause__
        message += "\ncaused by: " + "".join(traceback.format_exception_only(type(chain), chain)).strip()
    text = ("Traceback (most relevant calls):\n" + "\n".join(lines) + "\n" if lines else "") + message
    return text if len(text) <= _MAX_ERROR_CHARS else text[:_MAX_ERROR_CHARS] + "\n... (truncated)"


def is_compile_error(exc: BaseException) -> bool:
    """Whether Triton failed to build the candidate's kernel: its front end's `CompilationError`, or an error
    raised inside Triton's compiler (triton/compiler/, a backend's compiler.py: an MLIR pass failing on a kernel
    the front end accepted, "PassManager::run failed"; a binary needing more shared memory than the GPU has).
    Launch errors (the backend's driver.py) and the kernel's own faults stay runtime errors, also where an earlier
    launch's asynchronous CUDA error surfaces while Triton loads a binary."""
    import triton
    from triton.compiler.errors import CompilationError

    root = os.path.dirname(os.path.abspath(triton.__file__))
    while exc is not None:
        if isinstance(exc, CompilationError):
            return True
        frames = traceback.extract_tb(exc.__traceback__)
        if frames and _in_triton_compiler(os.path.abspath(frames[-1].filename), root) and not _cuda_error(exc):
            return True
        exc = exc.__cause__
    return False


def _in_triton_compiler(path: str, root: str) -> bool:
    relative = os.path.relpath(path, root).split(os.sep)
    return relative[0] == "compiler" or (relative[0] == "backends" and relative[-1] == "compiler.py")


def _cuda_error(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "cuda error" in text or "out of memory" in text or "illegal" in text
