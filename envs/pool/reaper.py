"""Sidecar that kills an evaluation actor's worker processes once the actor is gone.

Workers run in their own sessions (see envs/worker/process.py), so when an actor process is killed
abruptly (ray.kill, the OOM killer, a node agent) nothing kills them: an idle worker exits on EOF of
its request pipe, but one busy with a hanging candidate would run forever. Each actor therefore
starts this script, detached (double fork, new session), watching the actor's pid. While the actor
lives it records the actor's descendants that carry KERNELRL_WORKER_TAG; when the actor is gone it
kills their process groups, the processes themselves, and any process still carrying one of their
tags, then exits. Self-contained (psutil only) so it starts fast and imports nothing of the project.

    python reaper.py WATCH_PID [INTERVAL_S]      # prints the detached reaper's pid and returns
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

TAG_VAR = b"KERNELRL_WORKER_TAG="


def start(watch_pid: int, interval: float = 0.2) -> int:
    """Start a detached reaper for `watch_pid`; return its pid."""
    launcher = subprocess.Popen([sys.executable, os.path.abspath(__file__), str(watch_pid), str(interval)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                start_new_session=True, close_fds=True)
    out, _ = launcher.communicate(timeout=60)
    return int(out.split()[0])


def _tag(pid: int) -> bytes | None:
    try:
        for item in (Path("/proc") / str(pid) / "environ").read_bytes().split(b"\0"):
            if item.startswith(TAG_VAR):
                return item[len(TAG_VAR):]
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
        actor = psutil.Process(watch_pid)
    except psutil.Error:
        return
    seen: dict[tuple[int, float], bytes] = {}  # (pid, create time) -> tag, for tagged descendants
    untagged: set[tuple[int, float]] = set()
    last_prune = time.monotonic()
    while True:
        try:
            if not actor.is_running() or actor.status() == psutil.STATUS_ZOMBIE:
                break
            children = actor.children(recursive=True)
        except psutil.Error:
            break
        current = set()
        for child in children:
            try:
                key = (child.pid, child.create_time())
            except psutil.Error:
                continue
            current.add(key)
            if key in seen or key in untagged:
                continue
            tag = _tag(child.pid)
            if tag:
                seen[key] = tag
            else:
                untagged.add(key)
        if time.monotonic() - last_prune > 10:  # forget processes that are gone (workers recycle)
            last_prune = time.monotonic()
            seen = {k: v for k, v in seen.items() if k in current}
            untagged &= current
        time.sleep(interval)
    tags = set(seen.values())
    for (pid, created), _ in seen.items():
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
