"""Inside the worker: die with the owner (the process holding the other end of the request pipe).

A worker whose owner is killed abruptly would otherwise be re-parented to init and spin, holding its GPU. Two
mechanisms, because each misses cases the other covers: PR_SET_PDEATHSIG(SIGKILL), which fires even while the
worker is wedged in C code but is tied to the parent thread; and a watchdog thread waiting for POLLHUP on the
request pipe, which fires whoever the parent is. The worker is also a child subreaper, so what the candidate
daemonizes stays visible to the owner's kill and reaper (envs/worker/reaper.py). Why both: docs/sandbox.md."""

from __future__ import annotations

import ctypes
import os
import select
import signal
import sys
import threading

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


def prctl(option: int, value: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def bind_to_owner(owner_fd: int) -> dict[str, bool]:
    """Tie this process's life to the owner behind `owner_fd` (the read end of the request pipe);
    returns which mechanisms are in place (reported in the worker's hello)."""
    state = {"pdeathsig": prctl(_PR_SET_PDEATHSIG, signal.SIGKILL), "subreaper": prctl(_PR_SET_CHILD_SUBREAPER, 1)}
    watchdog = threading.Thread(target=_watch, args=(owner_fd,), name="kernelrl-owner-watchdog", daemon=True)
    watchdog.start()
    state["watchdog"] = watchdog.is_alive()
    return state


def _watch(fd: int) -> None:
    poller = select.poll()
    poller.register(fd, 0)  # no POLLIN: requests stay for the main thread; POLLHUP/ERR/NVAL always report
    while True:
        try:
            events = poller.poll()
        except InterruptedError:
            continue
        if any(mask & (select.POLLHUP | select.POLLERR | select.POLLNVAL) for _, mask in events):
            die_with_descendants()


def die_with_descendants() -> None:
    """SIGKILL everything this worker started (its descendants, its process group), then itself."""
    try:
        import psutil

        for child in psutil.Process().children(recursive=True):
            try:
                child.kill()
            except psutil.Error:
                pass
    except Exception:  # psutil missing or /proc unreadable: the process group still goes
        pass
    if os.getpgrp() == os.getpid():
        os.killpg(os.getpid(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)
