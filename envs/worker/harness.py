"""The worker process: runs the untrusted candidate next to the trusted reference.

Started by `envs.worker.process.WorkerProcess` as `python -m envs.worker.harness REQ_FD RES_FD ROOT DEVICE
PROGRESS_FD` (PROGRESS_FD: the progress board of envs/worker/progress.py, -1 for none).
It receives evaluation requests on REQ_FD and answers on RES_FD (length-prefixed JSON). The
candidate's stdout/stderr go elsewhere, so printing cannot forge a verdict. Every message carries
the request's nonce. One request = load the problem, (optionally) time the baselines before any
candidate code is imported, import the candidate, check correctness on several fresh input sets,
then time it.

This module is the process: its start, what runs before any problem or candidate code (`prepare`, `serve`)
and the request loop. What one request does is envs/worker/evaluation.py; the state the process keeps
across requests (launch recorder, baseline identities, progress board) is envs/worker/harness_state.py.
"""

from __future__ import annotations

import os
import resource
import sys

import torch

# Import lazily-loaded torch machinery up front: importing it later patches torch functions (dynamo wraps
# torch.manual_seed) and would look like the candidate's doing to the identity checks.
import torch._dynamo  # noqa: F401
import torch.utils._python_dispatch  # noqa: F401
import torch.utils.flop_counter  # noqa: F401
import triton

from envs import fused_compare
from envs.antihack import runtime as guard
from envs.worker import compile_lend, harness_state
from envs.worker.cpu_backstop import apply_lifetime_limit
from envs.worker.evaluation import Evaluation
from envs.worker.harness_state import BASELINE_IDENTITIES, LAUNCHES
from envs.worker.lifeline import bind_to_owner
from envs.worker.messages import MalformedMessage, WorkerRequest
from envs.worker.parent_link import ParentLink
from envs.worker.progress import ProgressBoard, install_launch_flag
from envs.worker.protocol import read_frame, write_frame


def device_info(device: str) -> dict:
    info = {"torch": torch.__version__, "triton": triton.__version__, "device_name": "cpu"}
    if device == "cuda":
        device_id = torch.cuda.current_device()
        info["device_name"] = torch.cuda.get_device_name(device_id)
        info["memory_gib"] = torch.cuda.get_device_properties(device_id).total_memory / 2**30
    return info


def prepare(device: str) -> None:
    """What must precede any problem or candidate code and needs no device: the launch recorder (and on
    CUDA the launch flag, looking its board up at each launch), fp32 settings, the identity snapshot.
    A zygote runs it before it forks (envs/worker/zygote.py), so it initialises no CUDA, starts no
    thread and runs no torch op."""
    if device == "cuda":
        # The reference must be true fp32: no TF32 in cuBLAS or cuDNN.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        install_launch_flag(lambda: harness_state.PROGRESS)  # compiling is excused from the step deadlines
        compile_lend.install(lambda: harness_state.LINK)  # a timing window need not wait for a compile
    LAUNCHES.install()
    BASELINE_IDENTITIES.clear()
    BASELINE_IDENTITIES.update(guard.broad_snapshot())


def _prepare_fused_compare() -> None:
    """The comparison's float32 kernel compiled before any problem or candidate code (envs/fused_compare.py);
    where it cannot be, the torch pass compares, as on the CPU."""
    try:
        fused_compare.prepare()
    except Exception as e:  # a slower comparison, not a wrong one: said once, on the worker's stderr
        print(f"kernelrl worker: the fused comparison is off: {type(e).__name__}: {e}", file=sys.stderr)


def serve(req_fd: int, res_fd: int, root: str, device: str, board_fd: int, prepared: bool = False) -> None:
    """Be the harness: bind to the owner, limit this process, then answer requests until told to stop.
    `prepared`: `prepare` already ran in the zygote this process was forked from."""
    lifeline = bind_to_owner(req_fd)  # first: from here on this process dies with its owner
    apply_lifetime_limit()  # before any problem or candidate code (sandboxed, no capability raises it again)
    harness_state.PROGRESS = ProgressBoard.attach(board_fd)
    os.chdir(root)
    link = harness_state.LINK = ParentLink(req_fd, res_fd)
    if device == "cpu":
        # Backstop for huge allocations (the parent also polls RSS): fail them with MemoryError.
        # Not on CUDA, whose driver reserves far more address space than it uses.
        limit = 2 * int(os.environ.get("KERNELRL_WORKER_MEMORY_BYTES", 16 << 30))
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    if device == "cuda":
        torch.cuda.init()
        _prepare_fused_compare()
    if not prepared:
        prepare(device)
    elif device == "cuda":  # initialising CUDA came after the zygote's snapshot: take it again, still trusted
        BASELINE_IDENTITIES.clear()
        BASELINE_IDENTITIES.update(guard.broad_snapshot())
    link.send({"type": "hello", "pid": os.getpid(), "lifeline": lifeline, **device_info(device)})
    while True:
        try:
            request = read_frame(req_fd)
        except EOFError:
            return
        if request.get("type") == "shutdown":
            return
        if request.get("type") == "confirm":  # the parent checks that a result really came from here
            write_frame(res_fd, {"type": "confirmed", "nonce": request.get("nonce")})
            continue
        try:
            checked = WorkerRequest.from_message(request)
        except MalformedMessage as e:  # answered, not crashed on: the parent turns it into an internal_error
            if isinstance(request.get("nonce"), str):
                write_frame(
                    res_fd,
                    {
                        "type": "result",
                        "nonce": request["nonce"],
                        "status": "internal_error",
                        "error": str(e),
                        "healthy": True,
                    },
                )
                continue
            return  # no nonce to answer with: the parent sees the worker end
        link.nonce = checked.nonce
        evaluation = Evaluation(link, checked, root)
        result = evaluation.run()
        evaluation.cleanup()
        link.send(result)
        link.nonce = None


def main() -> None:
    req_fd, res_fd, root, device = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    serve(req_fd, res_fd, root, device, int(sys.argv[5]) if len(sys.argv) > 5 else -1)


if __name__ == "__main__":
    main()
