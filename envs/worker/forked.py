"""A worker whose harnesses are forked from a zygote (envs/worker/zygote.py): recycling costs a fork.

A plain `WorkerProcess` pays for its imports (torch, triton) at every start, and the pool replaces workers after
every failing candidate. A `ForkedWorker` starts the zygote once, in the same sandbox, and asks it for a fresh
harness child instead: `end_child()` kills the old child's processes without waiting; `refork()` (the spawner
thread) waits for them, checks that nothing is left that could reach the next child, and forks. Any doubt raises
`ForkRefused` and the pool starts a whole new worker. The child is a harness like any other; only its start
differs. The checks in full: docs/sandbox.md."""

from __future__ import annotations

import json
import os
import select
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil

from envs.worker.process import WorkerFailure, WorkerProcess, describe_exit, kill_tree, wait_ended
from envs.worker.progress import ProgressBoard
from envs.worker.protocol import MAX_CONTROL_MESSAGE


FORK_REPLY_S = 30.0  # for the zygote's answer to a fork request (it reaps up to 5 s, restores, forks)


class ForkRefused(WorkerFailure):
    """The zygote cannot (or must not) fork another child: replace the whole worker."""

    def __init__(self, message: str):
        super().__init__("crash", message, "startup", {})


def _ns_pid(pid: int) -> int | None:
    """The pid of `pid` in the innermost pid namespace it lives in (NSpid's last field)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("NSpid:"):
                return int(line.split()[-1])
    except (OSError, ValueError):
        pass
    return None


def _running(p: psutil.Process | None) -> bool:
    try:
        return p is not None and p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


class ForkedWorker(WorkerProcess):
    def __init__(self, *args, max_forks: int = 100, **kwargs):
        self.max_forks, self.forks = max_forks, 0
        self.zygote_pid: int | None = None
        self.harness_pid = None
        self._child: psutil.Process | None = None
        self._child_ns_pid: int | None = None
        self._victims: list[psutil.Process] = []
        self._suspect: str | None = None  # why the next fork must not happen (seen when the child ended)
        self._clean = False  # the child's last evaluation ended with a confirmed result
        self._ctrl: socket.socket | None = None
        super().__init__(*args, **kwargs)

    # --- the zygote -------------------------------------------------------------------------------
    def _start(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        self._ctrl, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._req_w = self._res_r = -1
        self.board = None
        env = self._environment()
        env["OPENBLAS_NUM_THREADS"] = "1"  # numpy's OpenBLAS starts a thread pool at import: no fork then
        scratch = ["/dev/shm", *self.sandbox.masks()] if self.sandbox is not None else []
        argv = [
            sys.executable,
            "-m",
            "envs.worker.zygote",
            str(theirs.fileno()),
            "1" if self.sandbox is not None else "0",
            self.root,
            self.device,
            *scratch,
        ]
        try:
            self._spawn(argv, (theirs.fileno(),), env)
        except WorkerFailure:
            self._ctrl.close()
            shutil.rmtree(self.root, ignore_errors=True)
            raise
        finally:
            theirs.close()
        try:
            ready = self._control(deadline, "ready")
            zygote = self._find_zygote()
            if zygote is None:
                raise WorkerFailure("crash", "the zygote process could not be found", "startup", {})
            self.zygote_pid = zygote.pid
            self.wrapper_pids = (self.proc.pid, zygote.ppid()) if self.sandbox is not None else ()
            if ready.get("why_not_fork"):
                raise ForkRefused(f"the zygote cannot fork: {ready['why_not_fork']}")
            self._fork(deadline)
        except WorkerFailure:
            self.kill()
            raise

    def _find_zygote(self) -> psutil.Process | None:
        return WorkerProcess._harness(self)  # where a plain worker's harness sits

    def _control(self, deadline: float, expected: str) -> dict:
        """The zygote's next message, which must be of type `expected`; ForkRefused on anything else."""
        while True:
            now = time.monotonic()
            if now >= deadline:
                raise ForkRefused(f"the zygote did not answer ({expected}) in time")
            ready, _, _ = select.select([self._ctrl], [], [], min(0.1, deadline - now))
            if not ready:
                if self.proc.poll() is not None:
                    raise ForkRefused(
                        f"the zygote exited ({describe_exit(self.proc.returncode)}); its output:\n{self.output_tail()}"
                    )
                continue
            data = self._ctrl.recv(MAX_CONTROL_MESSAGE)
            if not data:
                raise ForkRefused(f"the zygote closed its socket; its output:\n{self.output_tail()}")
            try:
                message = json.loads(data)
            except ValueError:
                raise ForkRefused("the zygote sent a malformed message") from None
            if not isinstance(message, dict) or message.get("type") != expected:
                why = message.get("why") if isinstance(message, dict) and message.get("type") == "refused" else None
                raise ForkRefused(
                    f"the zygote refused to fork: {why}"
                    if why
                    else f"the zygote sent {str(message)[:200]} instead of {expected}"
                )
            return message

    # --- children ---------------------------------------------------------------------------------
    def _fork(self, deadline: float) -> None:
        req_r, req_w = os.pipe()
        res_r, res_w = os.pipe()
        board = ProgressBoard.create()
        fds = [req_r, res_w] + ([board.fd] if board is not None else [])
        try:
            socket.send_fds(self._ctrl, [json.dumps({"type": "fork"}).encode()], fds)
        except OSError as e:
            for fd in (req_w, res_r):
                os.close(fd)
            if board is not None:
                board.close()
            raise ForkRefused(f"the zygote stopped listening ({e})") from None
        finally:
            os.close(req_r)
            os.close(res_w)
            if board is not None:
                board.close_fd()
        self._req_w, self._res_r, self.board = req_w, res_r, board
        self._buf = bytearray()
        # Restoring the scratch directories and forking take well under a second; a zygote that does not
        # answer soon (stopped by a child's SIGSTOP, say) is replaced rather than waited for.
        reply = self._control(min(deadline, time.monotonic() + FORK_REPLY_S), "forked")
        self._child_ns_pid = reply.get("pid")
        self._child = self._find_child(self._child_ns_pid)
        if self._child is None:
            self.kill()
            raise WorkerFailure("crash", "the forked harness could not be found", "startup", {})
        self.harness_pid = self._child.pid
        self.forks += 1
        self.evaluations = 0
        self._suspect, self._clean = None, False
        self._await_hello(max(deadline - time.monotonic(), 1.0))

    def _find_child(self, ns_pid: object) -> psutil.Process | None:
        if not isinstance(ns_pid, int):
            return None
        try:
            for child in psutil.Process(self.zygote_pid).children():
                if (child.pid if self.sandbox is None else _ns_pid(child.pid)) == ns_pid:
                    return child
        except psutil.Error:
            pass
        return None

    def end_child(self) -> None:
        """SIGKILL the current child and everything it started; returns at once (refork waits)."""
        child = self._child
        victims = []
        if child is not None:
            try:
                victims = [child, *child.children(recursive=True)]
            except psutil.Error:
                victims = [child]
            kill_tree(child.pid, victims)
        if self._clean and (self._buf or select.select([self._res_r], [], [], 0)[0]):
            self._suspect = "the harness wrote more after its confirmed result"
        for fd in (self._req_w, self._res_r):
            if fd >= 0:
                os.close(fd)
        self._req_w = self._res_r = -1
        if self.board is not None:
            self.board.close()
            self.board = None
        self._victims, self._child = victims, None

    def refork(self, timeout: float) -> None:
        """A fresh child after end_child(); ForkRefused (or WorkerFailure) when the worker must start whole."""
        if self._child is not None:
            self.end_child()
        why = self._suspect
        if wait_ended(self._victims, timeout=5):
            why = why or "a process of the previous child survived SIGKILL"
        self._victims = []
        zygote = _process(self.zygote_pid) if self.zygote_pid is not None else None
        if not _running(zygote) or self.proc.poll() is not None:
            why = why or "the zygote died"
        elif _status(zygote) in (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP, "gone"):
            why = why or f"the zygote is {_status(zygote)}"  # a child's SIGSTOP, say
        if why is None and (strays := self.stray_processes()):
            why = f"{len(strays)} process(es) were left in the worker beside the zygote"
        if why is None:
            keep = set(self.pids())
            if [pid for pid in self._tagged() if pid not in keep and _running(_process(pid))]:
                why = "a process carrying the worker's tag was left running"
        if why is None:
            try:
                if zygote.memory_info().rss > self.memory_limit_bytes:
                    why = "the zygote is over the memory limit"
            except psutil.Error:
                why = "the zygote died"
        if why is None and self.forks >= self.max_forks:
            why = f"the zygote forked its {self.max_forks} children (max_forks_per_zygote)"
        if why is None and select.select([self._ctrl], [], [], 0)[0]:
            why = "the zygote sent a message nobody asked for"
        if why is not None:
            raise ForkRefused(why)
        with self._tail_lock:
            self._tail.clear()
        self._fork(time.monotonic() + timeout)

    # --- what differs from a plain worker ---------------------------------------------------------
    def alive(self) -> bool:
        return self.proc.poll() is None and (self.harness_pid is None or _running(self._child))

    def pids(self) -> list[int]:
        """bubblewrap's two processes (sandboxed), the zygote, the harness."""
        return [
            *self.wrapper_pids,
            *([self.zygote_pid] if self.zygote_pid else []),
            *([self.harness_pid] if self.harness_pid else []),
        ]

    def stray_processes(self) -> list[psutil.Process]:
        """Any process in the worker but bubblewrap's, the zygote and the harness."""
        try:
            keep = set(self.pids())
            return [p for p in self._descendants() if p.pid not in keep and p.status() != psutil.STATUS_ZOMBIE]
        except psutil.Error:
            return []

    def _accounted(self) -> list[psutil.Process]:
        """The zygote's memory is mostly the children's too (copy-on-write), so it is not counted twice."""
        return [p for p in super()._accounted() if p.pid != self.zygote_pid]

    def _how_it_ended(self) -> str:
        """The child's exit status, from the zygote that collects it."""
        wait_ended([self._child] if self._child is not None else [], timeout=1.0)
        if self._ctrl is None or self.proc.poll() is not None or self._child_ns_pid is None:
            return "exit status unknown (the zygote is gone)"
        try:
            self._ctrl.send(json.dumps({"type": "status", "pid": self._child_ns_pid}).encode())
            reply = self._control(time.monotonic() + 5.0, "status")
        except (OSError, WorkerFailure):
            self._suspect = "the zygote did not report how its child ended"
            return "exit status unknown"
        return describe_exit(reply.get("code"))

    def evaluate(self, *args, **kwargs):
        self._clean = False
        result = super().evaluate(*args, **kwargs)
        self._clean = True
        return result

    def shutdown(self) -> None:
        if self.alive():
            self._signalled += self._descendants()  # as WorkerProcess.shutdown: waited for by kill()
            try:
                self._ctrl.send(json.dumps({"type": "shutdown"}).encode())
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()

    def kill(self, wait: bool = True) -> None:
        super().kill(wait)
        if wait and self._ctrl is not None:
            self._ctrl.close()
            self._ctrl = None


def _status(p: psutil.Process) -> str:
    try:
        return p.status()
    except psutil.Error:
        return "gone"


def _process(pid: int) -> psutil.Process | None:
    try:
        return psutil.Process(pid)
    except psutil.Error:
        return None
