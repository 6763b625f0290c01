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
from pathlib import Path

import psutil
import pytest

from tests.conftest import ROOT
from tests.faults import SPIN, processes_matching, wait_gone, wait_until_spinning

pytestmark = pytest.mark.integration

def _worker_under(tmp_path: Path, timeout: float = 120.0) -> int:
    """The pid of the worker whose private root lies under tmp_path, once it has a candidate to run."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if list(tmp_path.glob("kernelrl-worker-*/eval-*/solution.py")):
            for proc in processes_matching(str(tmp_path)):
                if "envs.worker.harness" in proc.cmdline():
                    return proc.pid
        time.sleep(0.2)
    raise AssertionError("no worker started evaluating the candidate")


def test_sigkilled_cli_leaves_no_worker_behind(tmp_path):
    solution = tmp_path / "spin.py"
    solution.write_text(SPIN)
    # TMPDIR puts the worker's private root, which is on its command line, under tmp_path: our marker.
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    cli = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "eval_kernel.py"), "--device", "cpu", "--no-cache",
                            "--problem", "L0_02_relu", "--solution", str(solution)],
                           env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until_spinning(_worker_under(tmp_path))
        cli.kill()
        cli.wait()
        seconds = wait_gone(lambda: processes_matching(str(tmp_path), (f"{cli.pid}-",)), timeout=10)
        print(f"no worker left {seconds:.2f} s after the CLI was SIGKILLed")
    finally:
        cli.kill()


OWNER = """
import sys, time
from envs import EvalSettings, Evaluator, resolve_problem
from envs.source import prepare_solution
code = sys.stdin.read()
with Evaluator(EvalSettings(device="cpu")) as ev:
    ev.pool.execute(resolve_problem("L0_02_relu"), prepare_solution(code), None)  # no static analysis: it spawns
"""


def test_sigkilled_owner_takes_what_the_candidate_started_along(tmp_path):
    """A child in the worker's process group, and a daemon that left it through setsid with an empty
    environment (no worker tag): both die once the owner is gone."""
    marker = f"kernelrl-lifeline-{os.getpid()}-{time.time_ns()}"
    spawn = (f"import subprocess\n"
             f"subprocess.Popen(['sh', '-c', 'sleep 600; : {marker}-child'])\n"
             f"subprocess.Popen(['setsid', 'sh', '-c', 'sleep 600; : {marker}-daemon'], env={{}},"
             f" start_new_session=True)\n")
    candidate = SPIN.replace("        out = torch.empty_like(x)\n",
                             textwrap.indent(spawn, " " * 8) + "        out = torch.empty_like(x)\n")
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    owner = subprocess.Popen([sys.executable, "-c", OWNER], env=env, cwd=ROOT, stdin=subprocess.PIPE,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
    try:
        owner.stdin.write(candidate)
        owner.stdin.close()
        wait_until_spinning(_worker_under(tmp_path))
        assert len(processes_matching(marker)) >= 2  # both started (a sh each, the daemon's after setsid forks)
        time.sleep(0.5)  # the reaper polls the owner's descendants every 0.2 s
        owner.kill()
        owner.wait()
        seconds = wait_gone(lambda: processes_matching(str(tmp_path), (f"{owner.pid}-",))
                            + processes_matching(marker), timeout=10)
        print(f"nothing left {seconds:.2f} s after the owner was SIGKILLed")
    finally:
        owner.kill()


RAY_DRIVER = """
import json, sys, time
import ray
ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
from envs import EvalSettings, resolve_problem
from envs.pool import PoolConfig, RayEvaluationPool
pool = RayEvaluationPool(EvalSettings(device="cpu"), PoolConfig(num_actors=1, workers_per_actor=1))
future = pool.submit(resolve_problem("L0_02_relu"), sys.stdin.read())
print(json.dumps({"workers": pool.worker_pids(), "actors": pool.actor_infos()}), flush=True)
future.result()
"""


def test_sigkilled_ray_driver_leaves_no_worker_behind(tmp_path):
    pytest.importorskip("ray")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    driver = subprocess.Popen([sys.executable, "-c", RAY_DRIVER], env=env, cwd=ROOT, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    ray_processes: list[psutil.Process] = []
    try:
        driver.stdin.write(SPIN)
        driver.stdin.close()
        line = driver.stdout.readline()
        assert line, "the driver exited before its pool started"
        started = json.loads(line)
        workers = [pid for pids in started["workers"].values() for pid in pids]
        actors = [info["pid"] for info in started["actors"]]
        assert workers and actors
        deadline = time.monotonic() + 120
        while not any(sum(psutil.Process(w).cpu_times()[:2]) > 3 for w in workers):  # one runs the kernel
            assert time.monotonic() < deadline, "no worker started spinning"
            time.sleep(0.5)
        ray_processes = psutil.Process(driver.pid).children(recursive=True)
        driver.kill()
        driver.wait()

        def left() -> list[psutil.Process]:
            found = []
            for pid in workers:
                try:
                    p = psutil.Process(pid)
                    if p.status() != psutil.STATUS_ZOMBIE:
                        found.append(p)
                except psutil.Error:
                    pass
            return found + processes_matching(None, tuple(f"{pid}-" for pid in actors))
        seconds = wait_gone(left, timeout=20)
        print(f"no worker left {seconds:.2f} s after the Ray driver was SIGKILLed")
    finally:
        driver.kill()
        for p in ray_processes:  # whatever of Ray's own processes outlived its driver
            try:
                p.send_signal(signal.SIGKILL)
            except psutil.Error:
                pass
