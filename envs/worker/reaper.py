"""Sidecar that kills an owner's worker processes, and what they started, once the owner is gone.

Every process that owns workers (the CLI, the trainer, the service, a Ray pool actor: whoever builds a
`WorkerSet`) starts one of these, detached (double fork, new session), watching its pid. Workers die
with their owner by themselves (envs/worker/lifeline.py); what the candidate started does not: a
process forked by candidate code keeps running when the worker is SIGKILLed, and one that left the
worker's process group or session cannot be reached through it. While the owner lives, the reaper
records the owner's descendants that carry KERNELRL_WORKER_TAG and every descendant of those (tag or
not); when the owner is gone it kills their process groups, the processes themselves, and any process
still carrying one of their tags, then exits. Self-contained (psutil only) so it starts fast and
imports nothing of the project.

    python reaper.py WATCH_PID [INTERVAL_S]      # prints the detached reaper's pid and returns
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

TAG_VAR = b"KERNELRL_WORKER_TAG="
_started: dict[int, int] = {}  # owner pid -> its reaper's pid (per process: a fork starts its own)
_start_lock = threading.Lock()


def ensure_started(interval: float = 0.2) -> int:
    """The pid of this process's reaper, starting it on first use (or when it is no longer running)."""
    import psutil

    owner = os.getpid()
    with _start_lock:
        pid = _started.get(owner)
        try:
            if pid is not None and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                return pid
        except psutil.Error:
            pass
        _started[owner] = pid = start(owner, interval)
        return pid


def start(watch_pid: int, interval: float = 0.2) -> int:
    """Start a detached reaper for `watch_pid`; return its pid."""
    launcher = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), str(watch_pid), str(interval)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )
    out, _ = launcher.communicate(timeout=60)
    return int(out.split()[0])


def _tag(pid: int) -> bytes | None:
    try:
        for item in (Path("/proc") / str(pid) / "environ").read_bytes().split(b"\0"):
            if item.startswith(TAG_VAR):
                return item[len(TAG_VAR) :]
    except OSError:
        pass
    return None


def _kill(pid: int, group: bool) -> None:
    try:
        if group:
            os.killpg(pid, signal.SIGKILL)
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def watch(watch_pid: int, interval: float) -> None:
    import psutil

    try:
        owner = psutil.Process(watch_pid)
    except psutil.Error:
        return
    victims: dict[tuple[int, float], bytes] = {}  # (pid, create time) -> tag: workers and their descendants
    bystanders: set[tuple[int, float]] = set()  # the owner's other descendants
    last_prune = time.monotonic()
    while True:
        try:
            if not owner.is_running() or owner.status() == psutil.STATUS_ZOMBIE:
                break
            children = owner.children(recursive=True)
        except psutil.Error:
            break
        keys: dict[int, tuple[int, float]] = {}
        parents: dict[int, int] = {}
        for child in children:
            try:
                keys[child.pid] = (child.pid, child.create_time())
                parents[child.pid] = child.ppid()
            except psutil.Error:
                continue
        for pid, key in sorted(keys.items(), key=lambda kv: kv[1][1]):  # parents before their children
            if key in victims or key in bystanders:
                continue
            tag = _tag(pid) or victims.get(keys.get(parents[pid], (-1, 0.0)))
            if tag:
                victims[key] = tag
            else:
                bystanders.add(key)
        if time.monotonic() - last_prune > 10:  # forget processes that are gone (workers recycle)
            last_prune = time.monotonic()
            current = set(keys.values())
            victims = {k: v for k, v in victims.items() if k in current}
            bystanders &= current
        time.sleep(interval)
    tags = set(victims.values())
    for pid, created in victims:
        try:
            if psutil.Process(pid).create_time() == created:
                _kill(pid, group=os.getpgid(pid) == pid)
        except (psutil.Error, OSError):
            pass
    if tags:
        for proc_dir in Path("/proc").glob("[0-9]*"):
            pid = int(proc_dir.name)
            if pid != os.getpid() and _tag(pid) in tags:
                _kill(pid, group=False)


def main() -> None:
    watch_pid = int(sys.argv[1])
    interval = float(sys.argv[2]) if len(sys.argv) > 2 else 0.2
    pid = os.fork()
    if pid:  # the launcher: report the reaper's pid and let the caller reap us at once
        print(pid, flush=True)
        os._exit(0)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    watch(watch_pid, interval)


if __name__ == "__main__":
    main()
