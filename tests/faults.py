"""Shared by the fault-containment tests (CPU integration and GPU): a hanging kernel and process helpers."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil

# A model-written bug: the loop bound is right but the counter never advances. Passes the static analysis.
SPIN = textwrap.dedent("""
    import torch
    import torch.nn as nn
    import triton
    import triton.language as tl


    @triton.jit
    def _relu_spin(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        x = tl.load(x_ptr + offs, mask=m, other=0.0)
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        i = 0
        while i < n:  # volatile: no compiler may drop the loop
            acc += tl.load(x_ptr + offs, mask=m, other=0.0, volatile=True)
        tl.store(out_ptr + offs, tl.maximum(x, 0.0) + acc * 0.0, mask=m)


    class ModelNew(nn.Module):
        def forward(self, x):
            out = torch.empty_like(x)
            _relu_spin[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
            return out
""")


def processes_matching(marker: str | None, tag_prefixes: tuple[str, ...] = ()) -> list[psutil.Process]:
    """Live processes whose command line holds `marker` or whose worker tag starts with one of the prefixes."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            if proc.pid == os.getpid() or proc.status() == psutil.STATUS_ZOMBIE:
                continue
            hit = marker is not None and marker in " ".join(proc.info["cmdline"] or [])
            if not hit and tag_prefixes:
                tag = proc.environ().get("KERNELRL_WORKER_TAG", "")
                hit = bool(tag) and tag.startswith(tag_prefixes)
            if hit:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def wait_until_spinning(pid: int, cpu_seconds: float = 1.5, timeout: float = 180.0) -> None:
    """Until the process has burnt `cpu_seconds` more CPU time (running the hanging kernel). Counted in CPU
    time, not wall time: on a loaded machine a spinning process gets a fraction of a core."""
    deadline = time.monotonic() + timeout
    try:
        proc = psutil.Process(pid)
        start = sum(proc.cpu_times()[:2])
        while sum(proc.cpu_times()[:2]) - start < cpu_seconds:
            assert time.monotonic() < deadline, f"process {pid} never started spinning"
            time.sleep(0.2)
    except psutil.NoSuchProcess:
        raise AssertionError(f"process {pid} exited before it had spun {cpu_seconds} CPU seconds") from None


def still_running(pids) -> list[psutil.Process]:
    """Those of `pids` that still run (a zombie has ended: it only waits for its parent to collect it)."""
    found = []
    for pid in pids:
        try:
            p = psutil.Process(pid)
            if p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except psutil.Error:
            continue
    return found


def wait_gone(find, timeout: float) -> float:
    """Seconds until `find()` returns nothing; fails (and kills what is left) after `timeout`."""
    started = time.monotonic()
    while (left := find()) and time.monotonic() - started < timeout:
        time.sleep(0.1)
    if left:
        described = [(p.pid, p.cmdline()[:4]) for p in left if p.is_running()]
        for p in left:
            p.kill()
        raise AssertionError(f"left running {timeout:.0f} s after the owner was killed: {described}")
    return time.monotonic() - started


_ZYGOTE = ["-m", "envs.worker.zygote"]


def is_zygote(proc: psutil.Process) -> bool:
    """A worker's zygote (envs/worker/zygote.py), not one of the harnesses it forked (same command line)."""
    try:
        return proc.cmdline()[1:3] == _ZYGOTE and proc.parent().cmdline()[1:3] != _ZYGOTE
    except (psutil.Error, AttributeError):
        return False


def is_harness(proc: psutil.Process) -> bool:
    """The worker's harness itself (`python -m envs.worker.harness ...`, or a child forked by a zygote), not
    bubblewrap around it, whose command line holds the harness's."""
    try:
        return proc.cmdline()[1:3] == ["-m", "envs.worker.harness"] or (
            proc.cmdline()[1:3] == _ZYGOTE and is_zygote(proc.parent())
        )
    except (psutil.Error, AttributeError):
        return False


def zygotes(harness: int) -> list[psutil.Process]:
    """The zygote a harness was forked from, or [] for a harness started whole."""
    try:
        parent = psutil.Process(harness).parent()
        return [parent] if parent is not None and is_zygote(parent) else []
    except psutil.Error:
        return []


def sandbox_wrappers(harness: int) -> list[psutil.Process]:
    """bubblewrap's processes around a sandboxed harness (its init, then the bwrap outside the namespaces),
    above its zygote if it has one, or [] for an unsandboxed one."""
    found = []
    try:
        parent = psutil.Process(harness).parent()
        if parent is not None and is_zygote(parent):
            parent = parent.parent()
        while parent is not None and parent.name() == "bwrap":
            found.append(parent)
            parent = parent.parent()
    except psutil.Error:
        pass
    return found


def worker_under(tmp_path: Path, timeout: float = 120.0) -> int:
    """The pid of the harness whose private root lies under tmp_path, once it has a candidate to run. The root
    is read through the harness's own view of the filesystem: sandboxed, it is a tmpfs the host cannot see."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for proc in processes_matching(str(tmp_path)):
            try:
                if not is_harness(proc):
                    continue
                root = Path(f"/proc/{proc.pid}/root") / proc.cmdline()[5].lstrip("/")
                if list(root.glob("eval-*/solution.py")):
                    return proc.pid
            except (psutil.Error, OSError, IndexError):
                continue
        time.sleep(0.2)
    raise AssertionError("no worker started evaluating the candidate")


def owner_script(device: str, settings: str = "") -> str:
    """A process owning an Evaluator that runs the candidate read from stdin on a worker, skipping the static
    analysis (candidates here may start processes). `settings`: extra EvalSettings arguments."""
    return (
        "import sys\n"
        "from envs import EvalSettings, Evaluator, resolve_problem\n"
        "from envs.settings import StepBudget, StepDeadlines\n"
        "from envs.source import prepare_solution\n"
        "code = sys.stdin.read()\n"
        f"with Evaluator(EvalSettings(device={device!r}, {settings})) as ev:\n"
        "    ev.pool.execute(resolve_problem('L0_02_relu'), prepare_solution(code), None)\n"
    )


def _marked_env(tmp_path: Path) -> dict[str, str]:
    """TMPDIR puts the worker's private root, which is on its command line, under tmp_path: our marker."""
    root = Path(__file__).resolve().parents[1]
    return {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": str(root)}


def start_cli(tmp_path: Path, device: str, solution: Path) -> subprocess.Popen:
    """scripts/eval_kernel.py evaluating `solution` on L0_02_relu, uncached, its worker marked by tmp_path."""
    root = Path(__file__).resolve().parents[1]
    command = [sys.executable, str(root / "scripts" / "eval_kernel.py"), "--device", device, "--no-cache"]
    return subprocess.Popen(
        [*command, "--problem", "L0_02_relu", "--solution", str(solution)],
        env=_marked_env(tmp_path),
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def start_owner(tmp_path: Path, device: str, settings: str, candidate: str) -> subprocess.Popen:
    """An `owner_script` process evaluating `candidate` (sent on its stdin), its worker marked by tmp_path."""
    owner = subprocess.Popen(
        [sys.executable, "-c", owner_script(device, settings)],
        env=_marked_env(tmp_path),
        cwd=Path(__file__).resolve().parents[1],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    owner.stdin.write(candidate)
    owner.stdin.close()
    return owner
