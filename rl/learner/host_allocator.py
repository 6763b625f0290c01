"""glibc's allocator in a process that trains on the CPU: keep freed memory for the next micro-batch.

By default glibc serves every block above a dynamic threshold (at most 32 MiB) with its own mmap and gives it back
on free, and trims the heap's free top: each micro-batch's activations are then page-faulted in again. On the
2-core VM that cost a fifth of a learner step (docs/training-notes.md, session 21). A learner process's peak is
reached every step anyway, so holding it between steps costs no more memory than the step itself needs.
"""

from __future__ import annotations

import ctypes
import logging

log = logging.getLogger(__name__)

__all__ = ["keep_freed_memory"]

# mallopt(3) parameters
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3
_SETTINGS = (
    (_M_MMAP_THRESHOLD, 1 << 30),  # blocks up to 1 GiB come from the heap, reused after free
    (_M_TRIM_THRESHOLD, 1 << 30),  # the heap's free top goes back to the OS only beyond 1 GiB
    (_M_TOP_PAD, 64 << 20),  # and grows 64 MiB at a time
)


def keep_freed_memory() -> bool:
    """Set glibc's mallopt thresholds for this process; False (and nothing changed) where the C library is not
    glibc or refuses them. Call it early in a process that trains on the CPU, never in one that hosts others."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    ok = all(mallopt(param, value) == 1 for param, value in _SETTINGS)
    if not ok:
        log.warning("glibc refused the learner's allocator settings; the CPU learner keeps glibc's defaults")
    return ok
