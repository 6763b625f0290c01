"""The zygote: a sandboxed process that has paid for the harness's imports once and forks fresh harnesses.

    python -m envs.worker.zygote CTRL_FD SANDBOXED ROOT DEVICE [SCRATCH_DIR ...]

Started by `envs.worker.forked.ForkedWorker` in the same sandbox as a plain worker, it imports the harness and
runs `harness.prepare`, but runs no problem or candidate code and no torch op, starts no thread and initialises
no CUDA. It answers `fork` (restore the scratch directories, check that forking is safe, fork a child that becomes
`harness.serve`), `status` and `shutdown` on CTRL_FD, a SEQPACKET socket of JSON messages. It is not dumpable,
and a zygote that answers oddly makes the owner replace the whole sandbox. The protocol: docs/sandbox.md."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat
import sys
import time
import traceback

from envs.worker.lifeline import die_with_descendants, prctl
from envs.worker.protocol import MAX_CONTROL_MESSAGE

_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36


class Scratch:
    """The writable directories children share with the zygote, and what they held before the first fork:
    every entry on the directory's own filesystem (read-only binds inside it are not walked)."""

    def __init__(self, dirs: list[str]):
        self.dirs = [d for d in dirs if os.path.isdir(d) and os.access(d, os.W_OK)]
        self.baseline = self._listing()

    def _listing(self) -> dict[str, tuple]:
        entries: dict[str, tuple] = {}
        for top in self.dirs:
            device = os.lstat(top).st_dev
            for dirpath, dirnames, filenames in os.walk(top, onerror=lambda e: None):
                for name in list(dirnames):
                    st = os.lstat(os.path.join(dirpath, name))
                    if st.st_dev != device:  # a mount point (a read-only bind): not a child's doing
                        dirnames.remove(name)
                for name in dirnames + filenames:
                    path = os.path.join(dirpath, name)
                    try:
                        st = os.lstat(path)
                    except OSError:
                        continue
                    if stat.S_ISDIR(st.st_mode):  # its mtime moves with its entries: compared on their own
                        entries[path] = (st.st_mode, st.st_uid)
                    else:
                        entries[path] = (st.st_mode, st.st_uid, st.st_ino, st.st_size, st.st_mtime_ns)
        return entries

    def restore(self) -> str | None:
        """Remove what a child added; None when the directories are as before, else what is not."""
        for path in sorted(set(self._listing()) - set(self.baseline), reverse=True):
            try:
                st = os.lstat(path)
                if stat.S_ISDIR(st.st_mode):
                    os.chmod(path, 0o700)  # a child may have made its directory unreadable
                    shutil.rmtree(path)
                else:
                    os.unlink(path)
            except FileNotFoundError:  # inside a directory removed just before
                continue
            except OSError as e:
                return f"could not remove {path}: {e}"
        now = self._listing()
        added = sorted(set(now) - set(self.baseline))
        changed = sorted(p for p in self.baseline if now.get(p) != self.baseline[p])
        if added or changed:
            return f"the scratch directories still differ ({(added + changed)[:3]})"
        return None


def _sysv_objects() -> str | None:
    """System V shared memory, semaphores and message queues outlive their creator in the IPC namespace."""
    for kind in ("shm", "sem", "msg"):
        try:
            with open(f"/proc/sysvipc/{kind}") as f:
                if len(f.read().splitlines()) > 1:
                    return f"a System V {kind} object was left behind"
        except OSError:
            continue
    return None


def why_not_fork(sandboxed: bool) -> str | None:
    """Why forking now would hand the child a broken or shared state, or None."""
    threads = os.listdir("/proc/self/task")
    if len(threads) != 1:
        return f"the zygote runs {len(threads)} threads (a fork would copy locks they hold)"
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return "CUDA is initialised in the zygote (its state does not survive a fork)"
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("/dev/nvidia"):
                return "the zygote holds a GPU device open"
        except OSError:
            continue
    with open("/proc/self/maps") as f:
        shared = [line.split()[-1] for line in f if line.split()[1][1:] == "w-s" or line.split()[1] == "rw-s"]
    if shared:
        return f"the zygote has a shared writable mapping ({shared[0]}) a child could write"
    return _sysv_objects() if sandboxed else None


class Zygote:
    def __init__(self, ctrl_fd: int, sandboxed: bool, root: str, device: str, scratch: list[str]):
        self.sock = socket.socket(fileno=ctrl_fd)
        self.sandboxed, self.root, self.device = sandboxed, root, device
        self.scratch = Scratch([root, *scratch])
        self.exits: dict[int, int] = {}  # reaped children: pid -> exit status (Popen's convention)

    def send(self, message: dict) -> None:
        self.sock.send(json.dumps(message).encode())

    def reap(self, wait: float = 0.0) -> bool:
        """Collect every ended child (harnesses, and orphans adopted as subreaper); True if none is left.
        With `wait`, give children that are ending up to that many seconds: a killed process whose /proc
        entry already reads zombie is not collectable until its last thread has exited."""
        deadline = time.monotonic() + wait
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return True
            if pid == 0:
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.005)
                continue
            self.exits[pid] = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)

    def serve(self) -> None:
        while True:
            try:
                data, fds, _, _ = socket.recv_fds(self.sock, MAX_CONTROL_MESSAGE, 3)
            except (OSError, ValueError):
                return
            if not data:
                return  # the owner is gone
            try:
                message = json.loads(data)
            except ValueError:
                message = {}
            kind = message.get("type") if isinstance(message, dict) else None
            if kind == "fork" and len(fds) in (2, 3):
                self.fork(fds)
                continue
            for fd in fds:
                os.close(fd)
            if kind == "status" and isinstance(message.get("pid"), int):
                deadline = time.monotonic() + 2.0  # the owner asks once the child has died: its threads may still end
                while not self.reap() and message["pid"] not in self.exits and time.monotonic() < deadline:
                    time.sleep(0.005)
                self.send({"type": "status", "pid": message["pid"], "code": self.exits.get(message["pid"])})
            elif kind == "shutdown":
                return
            else:
                self.send({"type": "error", "why": f"unexpected message {str(message)[:100]}"})

    def fork(self, fds: list[int]) -> None:
        # The owner forks only once the previous child's processes have ended (it killed them).
        why = None if self.reap(wait=5.0) else "a process of the previous child is still running"
        why = why or self.scratch.restore() or why_not_fork(self.sandboxed)
        if why is not None:
            for fd in fds:
                os.close(fd)
            self.send({"type": "refused", "why": why})
            return
        pid = os.fork()
        if pid == 0:
            self._become_harness(fds)
        for fd in fds:
            os.close(fd)
        self.send({"type": "forked", "pid": pid})

    def _become_harness(self, fds: list[int]) -> None:
        """In the child: drop what is the zygote's, then serve as a harness. Never returns."""
        code = 0
        try:
            self.sock.close()
            os.setpgid(0, 0)  # its own group: the owner kills it and what it starts without the zygote
            prctl(_PR_SET_DUMPABLE, 1)  # a plain harness's default (its own /proc entries readable)
            prctl(_PR_SET_CHILD_SUBREAPER, 0)
            keep = {0, 1, 2, *fds}
            for fd in os.listdir("/proc/self/fd"):
                if int(fd) not in keep:
                    try:
                        os.close(int(fd))
                    except OSError:
                        pass
            from envs.worker import harness

            board = fds[2] if len(fds) == 3 else -1
            # What `python -m envs.worker.harness REQ RES ROOT DEVICE BOARD` would see: to the code it runs,
            # a forked harness is a started one.
            sys.argv = [harness.__file__, str(fds[0]), str(fds[1]), self.root, self.device, str(board)]
            harness.serve(fds[0], fds[1], self.root, self.device, board, prepared=True)
        except BaseException:
            traceback.print_exc()
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)


def main(argv: list[str]) -> None:
    ctrl_fd, sandboxed, root, device, scratch = int(argv[0]), argv[1] == "1", argv[2], argv[3], argv[4:]
    prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)  # dies with bubblewrap's init (or, unsandboxed, the owner)
    prctl(_PR_SET_DUMPABLE, 0)  # candidate code in a child (same uid) may not trace it or write its memory
    prctl(_PR_SET_CHILD_SUBREAPER, 1)  # what a dead child's processes leave stays visible and is reaped here
    os.chdir(root)
    from envs.worker import harness

    harness.prepare(device)
    zygote = Zygote(ctrl_fd, sandboxed, root, device, scratch)
    zygote.send({"type": "ready", "pid": os.getpid(), "why_not_fork": why_not_fork(sandboxed)})
    try:
        zygote.serve()
    finally:
        die_with_descendants()


if __name__ == "__main__":
    main(sys.argv[1:])
