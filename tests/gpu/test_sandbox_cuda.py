"""The worker sandbox on a GPU: a sandboxed worker sees exactly its own GPU (one device node, CUDA's
only device) and runs a Triton kernel there, times a built-in reference like an
unsandboxed one, and an escape attempt run without the static analysis is contained there too."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from envs import EvalSettings, Evaluator, PhaseTimeouts, Status, resolve_problem
from envs.source import canonicalize
from envs.worker import gpu_nodes
from envs.worker.process import scrubbed_environment
from envs.worker.sandbox import NOBODY, Sandbox, find_bwrap, why_unsandboxed
from tests.integration.test_hack_corpus import HACKS, header
from tests.integration.test_sandbox_containment import ESCAPES, Listener, trap  # noqa: F401 (fixture)

pytestmark = [pytest.mark.gpu, pytest.mark.integration]
_REASON = why_unsandboxed("required")
if _REASON:
    pytestmark.append(pytest.mark.skip(reason=f"the worker sandbox cannot run here: {_REASON}"))


def _settings(**kw) -> EvalSettings:
    return EvalSettings(
        device="cuda",
        workers=1,
        timed_runs=20,
        sandbox="required",
        timeouts=PhaseTimeouts(correctness=120, timing=120),
        **kw,
    )


_SEES = """
import glob, json, os, torch, triton, triton.language as tl

@triton.jit
def _add_one(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1.0, mask=offs < n)

x = torch.zeros(1000, device="cuda")
_add_one[(1,)](x, 1000, BLOCK=1024)
print(json.dumps({"count": torch.cuda.device_count(), "uuid": str(torch.cuda.get_device_properties(0).uuid),
                  "sum": float(x.sum()), "nodes": sorted(glob.glob("/dev/nvidia*")),
                  "visible": os.environ.get("CUDA_VISIBLE_DEVICES"), "uid": os.getuid()}))
"""


def test_a_sandboxed_worker_sees_exactly_its_gpu_and_runs_a_kernel_there():
    """The last GPU of the host (the only one on a 1-GPU machine), named by index as the pool names it:
    inside, CUDA sees one device, the one with that GPU's UUID, through that GPU's node only."""
    gpus = gpu_nodes.host_inventory()
    target = gpus[-1]
    root = tempfile.mkdtemp(prefix="kernelrl-gpu-probe-")
    try:
        sandbox = Sandbox(find_bwrap(), uid=NOBODY if os.geteuid() == 0 else None)
        # Triton reads a kernel's source from its file, so the probe is written inside the sandbox's private
        # root (a tmpfs there: a file written on the host side would not be visible) and run from it
        run = f"import runpy; open('probe.py', 'w').write({_SEES!r}); runpy.run_path('probe.py', run_name='__main__')"
        argv = sandbox.command([sys.executable, "-c", run], root, "cuda", str(target.index))
        env = scrubbed_environment({"HOME": root, "TMPDIR": root, "CUDA_VISIBLE_DEVICES": str(target.index)})
        proc = subprocess.run(argv, env=env, cwd=root, capture_output=True, text=True, timeout=300)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"host GPUs {[(g.index, g.minor, g.uuid) for g in gpus]}; inside: {seen}")
    assert seen["count"] == 1 and seen["sum"] == 1000.0
    assert target.uuid and target.uuid.lower().endswith(seen["uuid"].lower()), (target.uuid, seen["uuid"])
    assert seen["visible"] == target.uuid
    own = {f"/dev/nvidia{target.minor}"}
    other_gpus = {n for n in seen["nodes"] if n.removeprefix("/dev/nvidia").isdigit()} - own
    assert not other_gpus and own <= set(seen["nodes"]), seen["nodes"]
    assert "/dev/nvidiactl" in seen["nodes"] and "/dev/nvidia-uvm" in seen["nodes"]


@pytest.mark.parametrize("problem_id", ["L0_02_relu", "L3_01_matmul"])
def test_sandboxed_worker_evaluates_a_reference_on_its_gpu(problem_id):
    problem = resolve_problem(problem_id)
    with Evaluator(_settings()) as ev:
        assert ev.pool.sandbox is not None
        assert "cpu" not in ev.device_name.lower(), ev.device_name
        verdict = ev.evaluate(problem, Path(problem.reference_solution).read_text())
    print(
        f"{problem_id} sandboxed: {verdict.status.value} speedup {verdict.speedup} "
        f"kernel {verdict.timings.kernel.median_ms if verdict.timings else None} ms"
    )
    assert verdict.status is Status.CORRECT, verdict.error
    assert verdict.speedup is not None and verdict.timings.kernel.median_ms > 0


def test_escape_attempts_are_contained_on_the_gpu(trap):  # noqa: F811 (the fixture imported above)
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    listener = Listener(tcp)
    started = time.time()
    try:
        with Evaluator(_settings().hiding(str(trap["token_file"]))) as ev:
            verdicts = {}
            for name in ESCAPES:
                path = HACKS / name
                problem = resolve_problem(header(path)["problem"])
                verdicts[name] = ev.pool.execute(problem, canonicalize(path.read_text()), None)[0]
                print(f"{name}: {verdicts[name].status.value} {(verdicts[name].error or '')[:200]}")
            strays = [
                p.pid for p in psutil.process_iter(["cmdline"]) if "KERNELRL-ESCAPE-DAEMON" in (p.info["cmdline"] or [])
            ]
            after = ev.evaluate(
                resolve_problem("L0_02_relu"), Path(resolve_problem("L0_02_relu").reference_solution).read_text()
            )
    finally:
        listener.close()
    assert listener.connections == 0
    assert not strays
    assert verdicts["hack_concurrency_daemon_escape.py"].status is not Status.CORRECT
    for name, verdict in verdicts.items():
        assert not any(secret in repr(verdict.to_dict()) for secret in trap["planted"].values()), name
    assert all(listener.connections == 0 for listener in trap["listeners"])
    written = [
        p
        for root in (Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"), Path.home())
        for p in root.glob("kernelrl-escape*")
        if p.stat().st_mtime >= started
    ]
    assert not written, written
    assert after.status is Status.CORRECT, after.error
