"""Workers die with their owner: SIGKILL the process that owns them while a kernel hangs, and within a few
seconds no worker, and nothing a candidate started, is left. Real processes, the Triton interpreter."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from envs.worker.sandbox import why_unsandboxed
from tests.conftest import ROOT
from envs import EvalSettings
from tests.faults import (
    SPIN,
    start_cli,
    start_owner,
    processes_matching,
    sandbox_wrappers,
    still_running,
    wait_gone,
    wait_until_spinning,
    worker_under,
    zygotes,
)

pytestmark = pytest.mark.integration

# The owner must die while the kernel still hangs, not after the derived deadline cut it.
NO_STEP_DEADLINE = "deadlines=StepDeadlines(cpu=StepBudget(600.0, 1.0))"
SANDBOXED = why_unsandboxed("auto") is None  # what the default settings (sandbox: auto) give on this host
FORKED = EvalSettings().forks_workers("cpu")  # harnesses forked from a zygote (fork_workers: auto)


def worker_processes(harness: int, sandboxed: bool) -> list[int]:
    """The harness, its zygote and, sandboxed, bubblewrap's processes around them: all must go with the owner."""
    wrappers = [p.pid for p in sandbox_wrappers(harness)]
    assert len(wrappers) == (2 if sandboxed else 0), f"expected sandboxed={sandboxed}, found bwrap {wrappers}"
    zygote = [p.pid for p in zygotes(harness)]
    assert len(zygote) == FORKED, f"expected forked={FORKED}, found zygote {zygote}"
    return [harness, *zygote, *wrappers]


def test_sigkilled_cli_leaves_no_worker_behind(tmp_path):
    """With the default settings: inside bubblewrap where it works here, so no harness and no bwrap is left."""
    solution = tmp_path / "spin.py"
    solution.write_text(SPIN)
    cli = start_cli(tmp_path, "cpu", solution)
    try:
        harness = worker_under(tmp_path)
        wait_until_spinning(harness, cpu_seconds=0.5)  # the step deadline cuts it after 10 s
        worker = worker_processes(harness, SANDBOXED)
        cli.kill()
        cli.wait()
        seconds = wait_gone(
            lambda: still_running(worker) + processes_matching(str(tmp_path), (f"{cli.pid}-",)), timeout=10
        )
        print(
            f"no worker process ({'sandboxed: ' if SANDBOXED else ''}{worker}) left {seconds:.2f} s after "
            "the CLI was SIGKILLed"
        )
    finally:
        cli.kill()


@pytest.mark.parametrize("sandbox", ["auto", "off"])
def test_sigkilled_owner_takes_what_the_candidate_started_along(tmp_path, sandbox):
    """A child in the worker's process group, and a daemon that left it through setsid with an empty
    environment (no worker tag): both die once the owner is gone. Sandboxed, the pid namespace ends them;
    unsandboxed, the worker's subreaper and the owner's reaper must find the daemon."""
    marker = f"kernelrl-lifeline-{os.getpid()}-{time.time_ns()}"
    spawn = (
        f"import subprocess\n"
        f"subprocess.Popen(['sh', '-c', 'sleep 600; : {marker}-child'])\n"
        f"subprocess.Popen(['setsid', 'sh', '-c', 'sleep 600; : {marker}-daemon'], env={{}},"
        f" start_new_session=True)\n"
    )
    candidate = SPIN.replace(
        "        out = torch.empty_like(x)\n", textwrap.indent(spawn, " " * 8) + "        out = torch.empty_like(x)\n"
    )
    owner = start_owner(tmp_path, "cpu", f"{NO_STEP_DEADLINE}, sandbox={sandbox!r}", candidate)
    try:
        harness = worker_under(tmp_path)
        wait_until_spinning(harness)
        worker = worker_processes(harness, SANDBOXED and sandbox == "auto")
        assert len(processes_matching(marker)) >= 2  # both started (a sh each, the daemon's after setsid forks)
        time.sleep(0.5)  # the reaper polls the owner's descendants every 0.2 s
        owner.kill()
        owner.wait()
        seconds = wait_gone(
            lambda: (
                still_running(worker)
                + processes_matching(str(tmp_path), (f"{owner.pid}-",))
                + processes_matching(marker)
            ),
            timeout=10,
        )
        print(f"nothing left {seconds:.2f} s after the owner was SIGKILLed")
    finally:
        owner.kill()


RAY_DRIVER = """
import json, sys, time
import ray
ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
from envs import EvalSettings, resolve_problem
from envs.pool import PoolConfig, RayEvaluationPool
from envs.settings import StepBudget, StepDeadlines
settings = EvalSettings(device="cpu", deadlines=StepDeadlines(cpu=StepBudget(600.0, 1.0)))
pool = RayEvaluationPool(settings, PoolConfig(num_actors=1, workers_per_actor=1))
future = pool.submit(resolve_problem("L0_02_relu"), sys.stdin.read())
print(json.dumps({"workers": pool.worker_pids(), "processes": pool.worker_pids(wrappers=True),
                  "actors": pool.actor_infos()}), flush=True)
future.result()
"""


def test_sigkilled_ray_driver_leaves_no_worker_behind(tmp_path):
    pytest.importorskip("ray")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    driver = subprocess.Popen(
        [sys.executable, "-c", RAY_DRIVER],
        env=env,
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    ray_processes: list[psutil.Process] = []
    try:
        driver.stdin.write(SPIN)
        driver.stdin.close()
        line = driver.stdout.readline()
        assert line, "the driver exited before its pool started"
        started = json.loads(line)
        workers = [pid for pids in started["workers"].values() for pid in pids]
        processes = [pid for pids in started["processes"].values() for pid in pids]  # bwrap's too
        actors = [info["pid"] for info in started["actors"]]
        assert len(workers) == 1 and actors
        assert len(processes) == (3 if SANDBOXED else 1) + FORKED and set(workers) <= set(processes)
        wait_until_spinning(workers[0])  # the only worker's harness: it runs the kernel
        ray_processes = psutil.Process(driver.pid).children(recursive=True)
        driver.kill()
        driver.wait()

        def left() -> list[psutil.Process]:
            return still_running(processes) + processes_matching(None, tuple(f"{pid}-" for pid in actors))

        seconds = wait_gone(left, timeout=20)
        print(f"no worker left {seconds:.2f} s after the Ray driver was SIGKILLed")
    finally:
        driver.kill()
        for p in ray_processes:  # whatever of Ray's own processes outlived its driver
            try:
                p.send_signal(signal.SIGKILL)
            except psutil.Error:
                pass


def test_workers_outlive_the_thread_that_built_their_pool():
    """The parent-death signal fires when the *thread* that started a worker exits: workers are started by
    the pool's long-lived spawner threads, never by the caller's thread, which may be short-lived."""
    import threading

    from envs import EvalSettings, Evaluator
    from tests.conftest import builtin

    built = {}
    maker = threading.Thread(target=lambda: built.setdefault("ev", Evaluator(EvalSettings(device="cpu"))))
    maker.start()
    maker.join()
    ev = built["ev"]
    try:
        pids = ev.pool.worker_pids(wrappers=True)  # sandboxed, bwrap's die-with-parent is tied to the thread too
        assert len(pids) == (3 if SANDBOXED else 1) + FORKED
        info = ev.pool._worker(ev.pool._slots[0]).info
        assert info["lifeline"] == {"pdeathsig": True, "subreaper": True, "watchdog": True}
        time.sleep(1.0)
        assert all(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in pids)
        problem, good = builtin("L0_02_relu")
        assert ev.evaluate(problem, good).correct
    finally:
        ev.close()
