"""Parent-side handle of one worker process: start, talk, enforce limits, kill the whole tree.

Isolation, in order of defence: a separate process group with a scrubbed environment and a private temp root;
output drained into a bounded tail, results on their own framed pipe with the request's nonce; bubblewrap
(envs/worker/sandbox.py); a wall-clock deadline per phase and per step of candidate code (progress.py), CPU
budgets (cpu_backstop.py) and a memory poll. A dead, hung, over-budget or protocol-violating worker is killed
with its process group, every descendant psutil sees, and every process carrying its tag. docs/sandbox.md."""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psutil

from envs.gpu_lock import RELEASE_SETTLE_MAX_S, DeviceLock
from envs.settings import StepBudget
from envs.worker import cpu_backstop
from envs.worker.cpu_backstop import CpuBudget, PhaseCpuWatch
from envs.worker.gpu_nodes import GpuMappingError
from envs.worker.progress import ProgressBoard, StepWatch
from envs.worker.protocol import HEADER, MAX_FRAME, ProtocolError, write_frame
from envs.worker.sandbox import Sandbox

PROJECT_ROOT = str(Path(__file__).resolve().parents[2])
_ENV_ALLOW = re.compile(
    r"^(PATH|LANG|LC_\w+|TZ|LD_LIBRARY_PATH|CUDA_\w+|NVIDIA_\w+|NCCL_\w+|NVSHMEM_\w+|TRITON_\w+|"
    r"TORCH_\w+|TORCHINDUCTOR_\w+|PYTORCH_\w+|OMP_NUM_THREADS|MKL_\w+|OPENBLAS_\w+|CC|CXX)$"
)
_ENV_SECRET = re.compile(r"KEY|TOKEN|SECRET|PASS|CRED|AUTH|COOKIE|SESSION|PRIVATE|SIGNATURE", re.I)
_TAG_VAR = "KERNELRL_WORKER_TAG"
_OUTPUT_TAIL = 16 << 10
_CANDIDATE_PHASES = ("compile", "correctness", "timing")  # where candidate code runs: step deadlines apply


class WorkerFailure(Exception):
    """The worker could not answer: `status` is 'timeout' or 'crash'."""

    def __init__(self, status: str, message: str, phase: str, phase_seconds: dict[str, float]):
        super().__init__(message)
        self.status, self.message, self.phase, self.phase_seconds = status, message, phase, phase_seconds


def describe_exit(code: int | None) -> str:
    """Popen's convention (-N for signal N) in words."""
    if code is None:
        return "exit status unknown"
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


def wait_ended(processes: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Wait until each of `processes` has ended (gone, or a zombie: dead, only not yet collected by a
    parent that is not us, which psutil.wait_procs would wait for to the timeout); returns those still
    running at the timeout."""
    deadline = time.monotonic() + timeout
    while True:
        running = []
        for p in processes:
            try:
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    running.append(p)
            except psutil.Error:
                continue
        if not running or time.monotonic() >= deadline:
            return running
        time.sleep(0.01)
        processes = running


def kill_tree(group: int, victims: list[psutil.Process]) -> None:
    """SIGKILL process group `group` and each of `victims` (those that left the group too); never raises."""
    try:
        os.killpg(group, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for p in victims:
        try:
            p.kill()
        except psutil.Error:
            pass


def scrubbed_environment(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if _ENV_ALLOW.match(k) and not _ENV_SECRET.search(k)}
    env.update(extra)
    return env


# The quiet periods one request may ask its GPU lock for in all: a move before each of 48 placement blocks of the
# baselines' and of the candidate's timing, and a few releases of the allocator's cache, fit; more, from a
# candidate writing to the link, would only delay timing.
QUIET_BUDGET_S = 128 * RELEASE_SETTLE_MAX_S


def granted_quiet(asked: Any, left: float) -> float:
    """Seconds of a worker's `quiet` message that its request's remaining allowance `left` grants. Raises
    ValueError unless it asks for a number in (0, RELEASE_SETTLE_MAX_S]: no worker's own code asks for more."""
    if isinstance(asked, bool) or not isinstance(asked, (int, float)) or not 0 < asked <= RELEASE_SETTLE_MAX_S:
        raise ValueError(f"worker asked for a quiet period of {asked!r} s")
    return max(0.0, min(float(asked), left))


class WorkerProcess:
    def __init__(
        self,
        device: str,
        gpu_index: int | str | None = None,
        memory_limit_bytes: int = 16 << 30,
        startup_timeout: float = 120.0,
        lock: DeviceLock | None = None,
        sandbox: Sandbox | None = None,
        cpu_budget: CpuBudget | None = None,
    ):
        self.device, self.gpu_index, self.lock, self.sandbox = device, gpu_index, lock, sandbox
        self.memory_limit_bytes, self.cpu_budget = memory_limit_bytes, cpu_budget
        self._cpu_watch: PhaseCpuWatch | None = None
        self.tag = f"{os.getpid()}-{uuid.uuid4().hex}"  # owner pid first: tests and operators can filter
        self.root = tempfile.mkdtemp(prefix="kernelrl-worker-")
        self.evaluations = 0
        self._buf = bytearray()
        self._tail = bytearray()
        self._tail_lock = threading.Lock()
        self.info: dict[str, Any] = {}
        self._signalled: list[psutil.Process] = []  # seen by shutdown() or kill(wait=False), waited for by kill()
        self._start(startup_timeout)

    # --- lifecycle --------------------------------------------------------------------------------
    def _start(self, timeout: float) -> None:
        req_r, self._req_w = os.pipe()
        self._res_r, res_w = os.pipe()
        self.board = ProgressBoard.create()
        board_fd = self.board.fd if self.board is not None else -1
        argv = [
            sys.executable,
            "-m",
            "envs.worker.harness",
            str(req_r),
            str(res_w),
            self.root,
            self.device,
            str(board_fd),
        ]
        try:
            self._spawn(argv, (req_r, res_w) + ((board_fd,) if board_fd >= 0 else ()))
        except WorkerFailure:
            for fd in (self._req_w, self._res_r):
                os.close(fd)
            if self.board is not None:
                self.board.close()
            shutil.rmtree(self.root, ignore_errors=True)
            raise
        finally:
            os.close(req_r)
            os.close(res_w)
            if self.board is not None:
                self.board.close_fd()
        self._await_hello(timeout)
        harness = self._harness()
        if harness is None:  # it just said hello, so it runs: the process tree could not be read
            self.kill()
            raise WorkerFailure("crash", "the worker's harness process could not be found", "startup", {})
        self.harness_pid = harness.pid
        # Sandboxed: bubblewrap outside the namespaces and its init inside, around the harness.
        self.wrapper_pids = (self.proc.pid, harness.ppid()) if self.sandbox is not None else ()

    def _environment(self) -> dict[str, str]:
        extra = {
            "HOME": self.root,
            "TMPDIR": self.root,
            "PYTHONPATH": PROJECT_ROOT,
            "PYTHONFAULTHANDLER": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
            _TAG_VAR: self.tag,
            # No background pool of compile processes from TorchInductor (the eager/inductor baselines):
            # child processes appearing during a candidate's forward are a hack signal.
            "TORCHINDUCTOR_COMPILE_THREADS": "1",
            "KERNELRL_WORKER_MEMORY_BYTES": str(self.memory_limit_bytes),
            **({cpu_backstop.ENV_VAR: str(self.cpu_budget.lifetime_seconds())} if self.cpu_budget else {}),
            # Caches stay shared across workers (HOME is private), so warm compiles survive recycling.
            "TRITON_CACHE_DIR": os.environ.get("TRITON_CACHE_DIR", str(Path.home() / ".triton" / "cache")),
        }
        if self.device == "cpu":
            extra["TRITON_INTERPRET"] = "1"  # must be set before triton is imported
            extra["CUDA_VISIBLE_DEVICES"] = ""
        elif self.gpu_index is not None:
            extra["CUDA_VISIBLE_DEVICES"] = str(self.gpu_index)
        return scrubbed_environment(extra)

    def _spawn(self, argv: list[str], pass_fds: tuple[int, ...], env: dict[str, str] | None = None) -> None:
        """Start `argv` (in the sandbox when there is one) in its own session, output drained."""
        env = self._environment() if env is None else env
        try:
            if self.sandbox is not None:
                argv = self.sandbox.command(argv, self.root, self.device, env.get("CUDA_VISIBLE_DEVICES"))
        except GpuMappingError as e:
            raise WorkerFailure("crash", f"the sandbox cannot give the worker its GPU: {e}", "startup", {}) from None
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            pass_fds=pass_fds,
            cwd=self.root,
            env=env,
            start_new_session=True,
        )
        self._drain = threading.Thread(target=self._drain_output, daemon=True)
        self._drain.start()

    def _await_hello(self, timeout: float) -> None:
        try:
            hello = self._read(time.monotonic() + timeout, "startup")
        except WorkerFailure:
            self.kill()
            raise
        if hello.get("type") != "hello":
            self.kill()
            raise WorkerFailure("crash", f"worker sent {hello!r} instead of hello", "startup", {})
        self.info = hello

    def _drain_output(self) -> None:
        """Read the worker's stdout/stderr forever, keeping only the tail."""
        stream = self.proc.stdout
        while True:
            chunk = stream.read1(1 << 16) if hasattr(stream, "read1") else stream.read(1 << 16)
            if not chunk:
                return
            with self._tail_lock:
                self._tail += chunk
                del self._tail[:-_OUTPUT_TAIL]

    def output_tail(self, limit: int = 2000) -> str:
        with self._tail_lock:
            return bytes(self._tail[-limit:]).decode(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def _descendants(self) -> list[psutil.Process]:
        try:
            return psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.Error:
            return []

    def pids(self) -> list[int]:
        """The worker's own processes: the harness and, sandboxed, bubblewrap's two around it. Anything else
        carrying the worker's tag was started by the candidate."""
        return [*self.wrapper_pids, self.harness_pid]

    def _harness(self) -> psutil.Process | None:
        """The harness process: the worker itself, or in the sandbox the oldest child of bubblewrap's init
        (for a forked worker that process is the zygote)."""
        if self.sandbox is None:
            return psutil.Process(self.proc.pid) if self.proc.poll() is None else None
        try:
            descendants = self._descendants()
            init = {p.pid for p in descendants if p.ppid() == self.proc.pid}
            return min((p for p in descendants if p.ppid() in init), key=lambda p: p.create_time(), default=None)
        except psutil.Error:
            return None

    def stray_processes(self) -> list[psutil.Process]:
        """Processes still running under the worker between evaluations, which only the candidate can have
        started: any descendant of the harness, or, in the sandbox, anything in its pid namespace beside
        bubblewrap's init and the harness: daemons stay there too."""
        try:
            alive = [p for p in self._descendants() if p.status() != psutil.STATUS_ZOMBIE]
            if self.sandbox is None:
                return alive
            keep = set(self.pids())
            return [p for p in alive if p.pid not in keep]
        except psutil.Error:  # one of them ended meanwhile: look again at the next evaluation
            return []

    def _tagged(self) -> list[int]:
        """Processes that escaped the process group but still carry this worker's tag."""
        found = []
        needle = f"{_TAG_VAR}={self.tag}".encode()
        for pid_dir in Path("/proc").glob("[0-9]*"):
            try:
                if needle in (pid_dir / "environ").read_bytes():
                    found.append(int(pid_dir.name))
            except OSError:
                continue
        return found

    def kill(self, wait: bool = True) -> None:
        """Kill the worker and everything it started; idempotent. With wait=False only the signals are sent
        (the caller returns at once) and a later kill() waits for the processes and cleans up."""
        victims = self._descendants()
        kill_tree(self.proc.pid, [*self._signalled, *victims])
        for pid in self._tagged():
            try:
                tagged = psutil.Process(pid)
                tagged.kill()
                victims.append(tagged)  # waited for below: SIGKILL is sent, not yet carried out
            except psutil.Error:
                pass
        if not wait:
            self._signalled += victims  # waited for by the kill() that follows
            return
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        wait_ended([*self._signalled, *victims], timeout=5)
        self._signalled = []
        if self.device == "cuda" and self.lock is not None:
            self.lock.quiet(RELEASE_SETTLE_MAX_S)  # its CUDA context, all it held, just went back to the driver
        for fd in (self._req_w, self._res_r):
            try:
                os.close(fd)
            except OSError:
                pass
        self._req_w = self._res_r = -1
        if self.board is not None:
            self.board.close()
            self.board = None
        shutil.rmtree(self.root, ignore_errors=True)

    def shutdown(self) -> None:
        """Ask politely, then make sure."""
        if self.alive():
            # Sandboxed, bubblewrap's outer process exits with the harness, before the namespace's other
            # processes are gone: kill() waits for everything seen now, not only what is left then.
            self._signalled += self._descendants()
            try:
                write_frame(self._req_w, {"type": "shutdown"})
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()

    def lifetime_cpu_headroom(self) -> float | None:
        """CPU seconds the harness may still use before its RLIMIT_CPU kills it (None: no limit, or gone)."""
        used = cpu_backstop.own_cpu_seconds(self.harness_pid)
        if self.cpu_budget is None or used is None:
            return None
        return self.cpu_budget.lifetime_seconds() - used

    # --- talking ----------------------------------------------------------------------------------
    def _accounted(self) -> list[psutil.Process]:
        """The processes whose memory and CPU time count against the worker's limits."""
        try:
            return [psutil.Process(self.proc.pid), *self._descendants()] if self.alive() else []
        except psutil.Error:  # ended just now: the caller finds out from the pipe
            return []

    def _usage(self) -> tuple[int, float]:
        """Host memory (RSS bytes) and CPU seconds of the worker's process tree, from one look at it."""
        tree = self._accounted()
        rss = 0
        for p in tree:
            try:
                rss += p.memory_info().rss
            except psutil.Error:
                pass
        return rss, cpu_backstop.tree_cpu_seconds(tree)

    def _read(
        self, deadline: float, phase: str, phases: dict[str, float] | None = None, watch: StepWatch | None = None
    ) -> dict:
        last_memory_check = 0.0
        while True:
            if len(self._buf) >= HEADER.size:
                (size,) = HEADER.unpack(self._buf[: HEADER.size])
                if size > MAX_FRAME:
                    raise WorkerFailure("crash", f"worker sent an oversized frame ({size} bytes)", phase, phases or {})
                if len(self._buf) >= HEADER.size + size:
                    data = bytes(self._buf[HEADER.size : HEADER.size + size])
                    del self._buf[: HEADER.size + size]
                    try:
                        message = json.loads(data)
                    except ValueError:
                        raise WorkerFailure("crash", "worker sent a malformed frame", phase, phases or {})
                    if not isinstance(message, dict):
                        raise WorkerFailure("crash", "worker sent a non-object frame", phase, phases or {})
                    return message
            now = time.monotonic()
            if now >= deadline:
                raise WorkerFailure("timeout", f"the {phase} phase exceeded its time limit", phase, phases or {})
            limit = deadline
            if watch is not None and (step_end := watch.deadline(now)) < deadline:
                if now >= step_end:
                    raise WorkerFailure("timeout", f"the {phase} phase: {watch.describe()}", phase, phases or {})
                limit = step_end
            if now - last_memory_check > 0.2:
                last_memory_check = now
                used, cpu_seconds = self._usage()
                if used > self.memory_limit_bytes:
                    raise WorkerFailure(
                        "crash",
                        f"the worker exceeded the host memory limit "
                        f"({used / 2**30:.1f} GiB > {self.memory_limit_bytes / 2**30:.1f} GiB)",
                        phase,
                        phases or {},
                    )
                if self._cpu_watch is not None and (why := self._cpu_watch.over(cpu_seconds)):
                    raise WorkerFailure("timeout", why, phase, phases or {})
            ready, _, _ = select.select([self._res_r], [], [], min(0.1, limit - now))
            if ready:
                chunk = os.read(self._res_r, 1 << 16)
                if chunk:
                    self._buf += chunk
                    continue
            if not ready or not chunk:
                if not self.alive():
                    # Give the drain thread a moment to collect the last words (e.g. a faulthandler dump).
                    self._drain.join(timeout=1)
                    how = self._how_it_ended()
                    tail = self.output_tail()
                    raise WorkerFailure(
                        "crash",
                        f"the worker process died during the {phase} phase ({how})"
                        + (f"; its last output:\n{tail}" if tail.strip() else ""),
                        phase,
                        phases or {},
                    )

    def _how_it_ended(self) -> str:
        """`signal NAME` or `exit code N` of the harness, once it has ended."""
        code = self.proc.returncode
        if self.sandbox is not None:
            code = self.sandbox.returncode(code)
        return describe_exit(code)

    def _confirm(self, phase: str, phases: dict[str, float]) -> None:
        """Accept a result only once the harness is back in its request loop: it must echo a nonce that
        did not exist before the result arrived. A frame forged by candidate code (which could have found
        the request's nonce in memory) is followed by the real harness's next message instead, or by
        nothing if the forger exited."""
        nonce = uuid.uuid4().hex
        try:
            write_frame(self._req_w, {"type": "confirm", "nonce": nonce})
            reply = self._read(time.monotonic() + 10.0, phase, phases)
        except OSError as e:
            raise WorkerFailure("crash", f"the worker stopped after its result ({e})", phase, phases)
        except WorkerFailure as failure:
            raise WorkerFailure(
                "crash", f"the result was not confirmed by the worker: {failure.message}", phase, phases
            ) from None
        if reply != {"type": "confirmed", "nonce": nonce}:
            raise WorkerFailure(
                "crash", "the result was not confirmed by the worker (a forged verdict frame?)", phase, phases
            )

    def evaluate(
        self, request: dict, timeouts: dict[str, float], budget: StepBudget | None = None
    ) -> tuple[dict, dict[str, float]]:
        """Send one request; return (result message, wall seconds per phase). Raises WorkerFailure.
        `timeouts` bound each phase; with `budget`, each step of the candidate's phases has a deadline
        derived from the reference time the worker reports (envs/worker/progress.py)."""
        nonce = request["nonce"]
        phases: dict[str, float] = {}
        phase, started = "load", time.monotonic()
        deadline = started + timeouts["load"]
        order, entered = list(timeouts), set()
        if self.cpu_budget is not None:
            self._cpu_watch = PhaseCpuWatch(CpuBudget(self.cpu_budget.cores, timeouts))
            self._cpu_watch.enter(phase, self._usage()[1])
        held: str | None = None
        reference_s: float | None = None
        watch: StepWatch | None = None
        quiet_left = QUIET_BUDGET_S
        self.evaluations += 1
        try:
            write_frame(self._req_w, request)
        except OSError as e:
            raise WorkerFailure("crash", f"the worker stopped accepting requests ({e})", phase, phases)
        try:
            while True:
                message = self._read(deadline, phase, phases, watch if phase in _CANDIDATE_PHASES else None)
                if message.get("nonce") != nonce:
                    raise WorkerFailure("crash", "worker sent a message without the request's nonce", phase, phases)
                kind = message.get("type")
                now = time.monotonic()
                if kind == "phase" and message.get("name") in timeouts:
                    if message["name"] in entered or order.index(message["name"]) < order.index(phase):
                        # Phases only advance: a replayed phase message must not restart a deadline.
                        raise WorkerFailure("crash", f"worker went back to the {message['name']} phase", phase, phases)
                    entered.add(message["name"])
                    phases[phase] = phases.get(phase, 0.0) + now - started
                    phase, started = message["name"], now
                    deadline = now + timeouts[phase]
                    if self._cpu_watch is not None:
                        self._cpu_watch.enter(phase, self._usage()[1])
                    if (
                        watch is None
                        and phase in _CANDIDATE_PHASES
                        and budget is not None
                        and reference_s is not None
                        and self.board is not None
                    ):
                        watch = StepWatch(self.board, budget, reference_s, allow_compile=self.device == "cuda")
                    if watch is not None:
                        watch.restart(now)
                elif kind == "reference" and phase == "load" and reference_s is None:
                    seconds = message.get("seconds")
                    if not isinstance(seconds, (int, float)) or not 0 <= seconds < 1e6:
                        raise WorkerFailure("crash", f"worker reported a reference time of {seconds!r}", phase, phases)
                    reference_s = float(seconds)
                elif kind == "lock" and message.get("mode") in ("shared", "exclusive") and held is None:
                    if self.lock is not None:
                        waited = self.lock.acquire(message["mode"])
                        deadline += waited  # waiting for the GPU is not the candidate's time
                        started += waited
                        if watch is not None:
                            watch.pause(waited)
                        for key in ("gpu_wait", f"gpu_wait.{message['mode']}"):  # the drains apart
                            phases[key] = phases.get(key, 0.0) + waited
                    held = message["mode"]
                    write_frame(self._req_w, {"type": "granted"})
                elif kind == "quiet":
                    try:
                        granted = granted_quiet(message.get("seconds"), quiet_left)
                    except ValueError as e:
                        raise WorkerFailure("crash", str(e), phase, phases) from None
                    quiet_left -= granted
                    if granted and self.lock is not None:
                        self.lock.quiet(granted)
                elif kind == "unlock" and held is not None:
                    if self.lock is not None:
                        self.lock.release(held)
                    held = None
                elif kind == "result":
                    phases[phase] = phases.get(phase, 0.0) + now - started
                    self._confirm(phase, phases)
                    return message, phases
                else:
                    raise WorkerFailure(
                        "crash", f"worker sent an unexpected message {str(message)[:200]}", phase, phases
                    )
        except WorkerFailure as failure:
            failure.phase_seconds[phase] = failure.phase_seconds.get(phase, 0.0) + time.monotonic() - started
            raise
        except (OSError, ProtocolError) as e:
            raise WorkerFailure("crash", f"lost contact with the worker ({e})", phase, phases)
        finally:
            self._cpu_watch = None
            if held is not None and self.lock is not None:
                self.lock.release(held)
