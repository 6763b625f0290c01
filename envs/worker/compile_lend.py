"""Triton compiles a kernel on its first launch, on the CPU. In a correctness trial the worker holds the
GPU shared, and a timing window waiting for the GPU would wait for that compile as well: the compile
lends the hold back (envs/worker/parent_link.py `ParentLink.lent`) and the launch takes it again.

Installed by the harness before the identity snapshot (envs/worker/harness.py `prepare`), like the
launch recorder, so the wrapper is part of what the snapshot calls trusted.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from envs.worker.parent_link import ParentLink


def install(link: Callable[[], ParentLink | None]) -> bool:
    """Wrap Triton's per-specialisation compile; False on a Triton without that entry point (the hold is
    then kept through compiles, as before)."""
    from triton.runtime.jit import JITFunction

    compile_ = getattr(JITFunction, "_do_compile", None)
    if compile_ is None or getattr(compile_, "__kernelrl_lent__", False):
        return compile_ is not None

    @functools.wraps(compile_)
    def lent_compile(self: Any, *args: Any, **kwargs: Any) -> Any:
        current = link()
        if current is None:
            return compile_(self, *args, **kwargs)
        with current.lent():
            return compile_(self, *args, **kwargs)

    lent_compile.__kernelrl_lent__ = True  # type: ignore[attr-defined]
    JITFunction._do_compile = lent_compile
    return True
