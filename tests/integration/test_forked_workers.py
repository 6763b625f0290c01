"""Harnesses forked from a zygote (fork_workers, envs/worker/zygote.py) on CPU: real sandboxed workers, the
Triton interpreter. What one candidate leaves behind (files in the scratch directories, processes, threads)
is gone before the next child starts; a child killed mid-evaluation and a dead zygote leave a clean
state; the zygote cannot be read or traced from a child; verdicts are the same with and without forking."""

from __future__ import annotations

import logging
import os
import signal
import textwrap
import time
from collections import Counter

import psutil
import pytest

from envs import EvalSettings, Evaluator, Status
from envs.settings import StepBudget, StepDeadlines
from envs.source import canonicalize
from envs.worker.forked import ForkedWorker
from envs.worker.sandbox import why_unsandboxed
from tests.conftest import builtin
from tests.integration.test_evaluator_cpu import solution
from tests.integration.test_hack_corpus import HACKS

pytestmark = pytest.mark.integration

RELU = builtin("L0_02_relu")
SANDBOXED = why_unsandboxed("auto") is None
MARK = f"kernelrl-forktest-{os.getpid()}"
# Places a candidate can write that outlive it: the private root (HOME, TMPDIR) always, /dev/shm inside the
# sandbox (unsandboxed it is the host's, which a worker never cleans).
PLANT_DIRS = "[os.environ['HOME']" + (", '/dev/shm'" if SANDBOXED else "") + "]"
HELPERS = """
def _cmdlines():
    found = []
    for pid in os.listdir('/proc'):
        try:
            found.append(open(f'/proc/{pid}/cmdline', 'rb').read().decode(errors='replace'))
        except OSError:
            continue
    return found


def _readable(path):
    try:
        with open(path, 'rb') as f:
            f.read(1)
        return True
    except OSError:
        return False
"""


def run(ev: Evaluator, code: str):
    """The execution stage alone (these candidates start processes and threads on purpose)."""
    return ev.pool.execute(RELU[0], canonicalize(code), None)[0]


def worker(ev: Evaluator) -> ForkedWorker:
    w = ev.pool._worker(ev.pool._slots[0])
    assert isinstance(w, ForkedWorker)
    return w


def leftovers_fail(check: str) -> str:
    """A correct relu that raises if `check` (an expression) finds something a previous candidate left."""
    return solution(f"found = {check}\nif found:\n    raise RuntimeError(f'left behind: {{found}}')", prelude=HELPERS)


PLANT = solution(
    textwrap.dedent(f"""
    import subprocess, threading
    for d in {PLANT_DIRS}:
        open(os.path.join(d, '{MARK}.so'), 'w').write('planted')
        os.makedirs(os.path.join(d, '{MARK}-dir', 'sub'), exist_ok=True)
    subprocess.Popen(['sleep', '600', '{MARK}'])
    subprocess.Popen(['setsid', 'sh', '-c', 'sleep 600; : {MARK}'], start_new_session=True)
    threading.Thread(target=time.sleep, args=(600,), name='{MARK}', daemon=True).start()
    raise RuntimeError('planted and failed')
""")
)

CLEAN = leftovers_fail(
    f"[p for d in {PLANT_DIRS} for p in os.listdir(d) if '{MARK}' in p]"
    f" + [t.name for t in __import__('threading').enumerate() if t.name == '{MARK}']"
    f" + [c for c in _cmdlines() if '{MARK}' in c]"
)


def marked_processes() -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if MARK in " ".join(p.info["cmdline"] or []) and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except psutil.Error:
            continue
    return found


@pytest.fixture(scope="module")
def ev():
    settings = EvalSettings(
        device="cpu", workers=1, fork_workers="on", deadlines=StepDeadlines(cpu=StepBudget(fixed_s=4.0, multiple=100.0))
    )
    with Evaluator(settings) as evaluator:
        yield evaluator
    assert not marked_processes()


def test_what_a_candidate_leaves_is_gone_before_the_next_child(ev):
    zygote = worker(ev).zygote_pid
    planted = run(ev, PLANT)
    assert planted.status is Status.RUNTIME_ERROR and "planted and failed" in planted.error, planted.error
    after = run(ev, CLEAN)
    assert after.status is Status.CORRECT, after.error
    assert worker(ev).zygote_pid == zygote  # a fork replaced the harness, not a new sandbox
    assert not marked_processes()


def test_a_child_killed_mid_evaluation_leaves_a_clean_state(ev):
    zygote, harness = worker(ev).zygote_pid, worker(ev).harness_pid
    hang = solution(f"subprocess.Popen(['sleep', '600', '{MARK}'])\nwhile True: pass", prelude="import subprocess")
    v = run(ev, hang)
    assert v.status is Status.TIMEOUT and "derived step deadline" in v.error, v.error
    after = run(ev, CLEAN)
    assert after.status is Status.CORRECT, after.error
    w = worker(ev)
    assert w.zygote_pid == zygote and w.harness_pid != harness
    assert not psutil.pid_exists(harness) or psutil.Process(harness).status() == psutil.STATUS_ZOMBIE
    assert not marked_processes()


def test_the_zygote_cannot_be_read_or_traced_from_a_child(ev):
    """Not dumpable: candidate code (same uid) can neither open its memory nor its environment, so it cannot
    plant anything in the process that forks the next candidates' harnesses."""
    probe = leftovers_fail(
        "[p for p in (f'/proc/{os.getppid()}/mem', f'/proc/{os.getppid()}/environ') "
        "if _readable(p)] + ([] if _readable('/proc/self/environ') else ['its own /proc'])"
    )
    if not SANDBOXED and os.geteuid() == 0:
        pytest.skip("unsandboxed, a root evaluator's candidates run as root (CAP_SYS_PTRACE reads anything)")
    v = run(ev, probe)
    assert v.status is Status.CORRECT, v.error


def test_a_zygote_that_died_is_replaced(ev):
    w = worker(ev)
    zygote = w.zygote_pid
    os.kill(zygote, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while w.alive() and time.monotonic() < deadline:  # its child dies with it (parent-death signal)
        time.sleep(0.05)
    v = run(ev, RELU[1])
    assert v.status is Status.CORRECT, v.error
    assert worker(ev).zygote_pid != zygote


def test_state_the_zygote_cannot_restore_replaces_the_whole_sandbox(ev):
    """A System V shared memory segment outlives its creator in the sandbox's IPC namespace: no fork then,
    a new sandbox instead."""
    if not SANDBOXED:
        pytest.skip("unsandboxed, workers share the host's IPC namespace")
    zygote = worker(ev).zygote_pid
    leave = solution("import ctypes\nctypes.CDLL(None).shmget(0, 4096, 0o1000 | 0o600)\nraise RuntimeError('left')")
    assert run(ev, leave).status is Status.RUNTIME_ERROR
    after = run(ev, leftovers_fail("open('/proc/sysvipc/shm').read().splitlines()[1:]"))
    assert after.status is Status.CORRECT, after.error
    assert worker(ev).zygote_pid != zygote


def test_a_zygote_stopped_by_a_child_is_replaced_not_waited_for(ev):
    zygote = worker(ev).zygote_pid
    stop = solution("import signal\nos.kill(os.getppid(), signal.SIGSTOP)\nraise RuntimeError('stopped it')")
    assert run(ev, stop).status is Status.RUNTIME_ERROR
    started = time.monotonic()
    after = run(ev, RELU[1])
    assert after.status is Status.CORRECT, after.error
    assert worker(ev).zygote_pid != zygote and time.monotonic() - started < 60
    assert not psutil.pid_exists(zygote) or psutil.Process(zygote).status() == psutil.STATUS_ZOMBIE


def test_max_forks_per_zygote_bounds_a_zygote_life(caplog):
    settings = EvalSettings(device="cpu", workers=1, fork_workers="on", max_forks_per_zygote=2)
    failing = solution("raise ValueError('boom')")
    with caplog.at_level(logging.INFO, logger="envs.worker.worker_set"), Evaluator(settings) as ev:
        zygotes = [worker(ev).zygote_pid]
        for _ in range(3):
            assert run(ev, failing).status is Status.RUNTIME_ERROR
            zygotes.append(worker(ev).zygote_pid)
    why = [r.getMessage() for r in caplog.records if "restarts whole" in r.getMessage()]
    # fork 1 at the start, fork 2 after the first failure, then the zygote is spent and a new one starts. A zygote
    # may also be replaced sooner for a reason of its own (a slow CI host: a child outliving SIGKILL by 5 s), which
    # the log names; no zygote may fork more than 2.
    assert zygotes[0] == zygotes[1] != zygotes[2], (zygotes, why)
    changes = sum(a != b for a, b in zip(zygotes, zygotes[1:]))
    assert max(Counter(zygotes).values()) <= 2 and len(set(zygotes)) == changes + 1, (zygotes, why)  # none comes back
    assert why and "forked its 2 children (max_forks_per_zygote)" in why[0], why


CANDIDATES = {
    "correct": (RELU[1], Status.CORRECT),
    "incorrect": (solution("", shift="1.0"), Status.INCORRECT),
    "runtime_error": (solution("raise ValueError('boom in forward')"), Status.RUNTIME_ERROR),
    "hack": ((HACKS / "hack_monkeypatch_torch_relu.py").read_text(), Status.HACK),
    "crash": (solution("os._exit(3)"), Status.CRASH),
}


def test_verdicts_are_the_same_with_and_without_forking():
    verdicts = {}
    for mode in ("off", "on"):
        with Evaluator(EvalSettings(device="cpu", workers=1, fork_workers=mode, seed=7)) as ev:
            assert isinstance(ev.pool._worker(ev.pool._slots[0]), ForkedWorker) == (mode == "on")
            verdicts[mode] = {name: run(ev, code) for name, (code, _) in CANDIDATES.items()}
    for name, (_, status) in CANDIDATES.items():
        off, on = verdicts["off"][name], verdicts["on"][name]
        assert off.status is on.status is status, (name, off.error, on.error)
        assert (off.hack and off.hack.category) == (on.hack and on.hack.category), name
        assert (off.error or "").splitlines()[:1] == (on.error or "").splitlines()[:1], name
