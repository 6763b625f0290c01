"""The worker process: runs the untrusted candidate next to the trusted reference.

Started by `envs.worker.process.WorkerProcess` as `python -m envs.worker.harness REQ_FD RES_FD ROOT DEVICE
PROGRESS_FD` (PROGRESS_FD: the progress board of envs/worker/progress.py, -1 for none).
It receives evaluation requests on REQ_FD and answers on RES_FD (length-prefixed JSON). The
candidate's stdout/stderr go elsewhere, so printing cannot forge a verdict. Every message carries
the request's nonce. One request = load the problem, (optionally) time the baselines before any
candidate code is imported, import the candidate, check correctness on several fresh input sets,
then time it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import importlib.util
import os
import resource
import shutil
import sys
import tempfile
import threading
import time
import traceback
import types
from typing import Any, Callable, Iterator

import torch
# Import lazily-loaded torch machinery up front: importing it later patches torch functions (dynamo wraps
# torch.manual_seed) and would look like the candidate's doing to the identity checks.
import torch._dynamo  # noqa: F401
import torch.utils._python_dispatch  # noqa: F401
import torch.utils.flop_counter  # noqa: F401
import triton

from envs import inputs as families
from envs.antihack import runtime as guard
from envs.antihack.runtime import RuntimeHack
from envs.compare import as_output_list, compare_outputs
from envs.timing import ANCHOR, KERNEL, host_tail_ms, placement_blocks, time_in_placements
from envs.verdict import TimingStats
from envs.worker.correctness import CorrectnessPhase
from envs.worker.cpu_backstop import apply_lifetime_limit
from envs.worker.lifeline import bind_to_owner
from envs.worker.outcome import Outcome
from envs.worker.outcome import clone_args as _clone
from envs.worker.outcome import move_to_fresh_placement
from envs.worker.profiling import profile_candidate
from envs.worker.progress import ProgressBoard, install_launch_flag
from envs.worker.protocol import read_frame, write_frame

_MAX_ERROR_CHARS = 4000
LAUNCHES = guard.LaunchRecorder()  # installed in main(), before any candidate code exists
BASELINE_IDENTITIES: dict[str, int] = {}  # torch/triton as the worker started, taken in main()
PROGRESS: ProgressBoard | None = None  # completed candidate calls, read by the parent's step deadlines


class ParentLink:
    def __init__(self, req_fd: int, res_fd: int):
        self.req_fd, self.res_fd = req_fd, res_fd
        self.nonce: str | None = None

    def send(self, message: dict) -> None:
        write_frame(self.res_fd, {**message, "nonce": self.nonce})

    def phase(self, name: str) -> None:
        self.send({"type": "phase", "name": name})

    @contextlib.contextmanager
    def gpu(self, mode: str) -> Iterator[None]:
        """Hold the GPU shared (correctness) or exclusive (timing); the parent arbitrates."""
        self.send({"type": "lock", "mode": mode})
        reply = read_frame(self.req_fd)
        if reply.get("type") != "granted":
            raise RuntimeError(f"expected a lock grant, got {reply!r}")
        try:
            yield
        finally:
            self.send({"type": "unlock"})


def _load_module(name: str, path: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # Triton and dataclasses look modules up by name
    spec.loader.exec_module(module)
    return module


def describe_exception(exc: BaseException, solution_path: str | None) -> str:
    """The solution's own frames and the final error: what an LLM needs to fix its code."""
    frames = traceback.extract_tb(exc.__traceback__)
    lines = [f"  solution line {f.lineno}, in {f.name}: {(f.line or '').strip()}"
             for f in frames if solution_path and f.filename == solution_path]
    if frames and (not lines or frames[-1].filename != solution_path):
        last = frames[-1]
        lines.append(f"  raised in {os.path.basename(last.filename)}:{last.lineno} ({last.name})")
    chain = exc
    message = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    # Triton wraps the real error; show the cause too.
    while chain.__cause__ is not None and len(message) < _MAX_ERROR_CHARS:
        chain = chain.__cause__
        message += "\ncaused by: " + "".join(traceback.format_exception_only(type(chain), chain)).strip()
    text = ("Traceback (most relevant calls):\n" + "\n".join(lines) + "\n" if lines else "") + message
    return text if len(text) <= _MAX_ERROR_CHARS else text[:_MAX_ERROR_CHARS] + "\n... (truncated)"


def _is_compile_error(exc: BaseException) -> bool:
    from triton.compiler.errors import CompilationError
    while exc is not None:
        if isinstance(exc, CompilationError):
            return True
        exc = exc.__cause__
    return False


def _to_device(x: Any, device: torch.device) -> Any:
    return x.to(device) if isinstance(x, torch.Tensor) else x


class Evaluation(CorrectnessPhase):
    """One request, run inside the worker (its correctness phase: envs/worker/correctness.py)."""

    def __init__(self, link: ParentLink, request: dict, root: str):
        self.link, self.req, self.root = link, request, root
        self.device = torch.device(request["device"])
        self.workdir = tempfile.mkdtemp(prefix="eval-", dir=root)
        self.solution_path: str | None = None
        self.modules: list[str] = []
        self.notes: list[str] = []
        self.facts: dict[str, Any] = {}  # measurements reported beside the status
        self.solution_module = ""
        self.compute = guard.ComputeRecorder(LAUNCHES)
        self.reference_ops: list[guard.OpCost] | None = None
        self._init_correctness(request)

    # --- helpers ---------------------------------------------------------------------------------
    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize()

    def _gpu(self, mode: str) -> contextlib.AbstractContextManager:
        return self.link.gpu(mode) if self.device.type == "cuda" else contextlib.nullcontext()

    def _write(self, filename: str, source: str) -> str:
        path = os.path.join(self.workdir, filename)
        with open(path, "w") as f:
            f.write(source)
        return path

    def _inputs(self, seed: int) -> list[Any]:
        torch.manual_seed(seed)
        with torch.device(self.device):
            inputs = self.problem.get_inputs()
        return [_to_device(x, self.device) for x in inputs]

    def _build(self, cls: type, seed: int) -> torch.nn.Module:
        torch.manual_seed(seed)
        with torch.device(self.device):
            model = cls(*self.init_inputs)
        return model.to(self.device) if isinstance(model, torch.nn.Module) else model

    def _run_candidate(self, fn: Callable[[], Any], what: str, sync: bool = True) -> Any:
        """Run candidate code; its exceptions (and, with `sync`, its asynchronous CUDA errors) become its
        verdict. Timed runs pass sync=False: the timer records its end event before synchronizing."""
        try:
            out = fn()
            if sync:
                self._sync()
            if PROGRESS is not None:
                PROGRESS.call_done()
            return out
        except Exception as e:  # the candidate's failure, reported back to it
            status = "compile_error" if _is_compile_error(e) else "runtime_error"
            raise Outcome(status, f"{what} failed:\n{describe_exception(e, self.solution_path)}") from None

    def _time(self, fn: Callable[[], Any], keep: tuple[int, ...] = (),
              anchor: Callable[[], Any] | None = None, replace_inputs: Callable[[], None] | None = None,
              ) -> tuple[dict, dict[int, Any]]:
        """Time `fn`; with `anchor` (the candidate's timing, re-anchoring on) eager PyTorch is timed in the
        same window, its runs interleaved with fn's, and the raw samples of both are reported for the
        speedup and its interval (envs/speedup.py). With `replace_inputs` the runs are split into
        `timing["placements"]` blocks, the inputs copied to fresh addresses before each block after the first."""
        timing = self.req["timing"]
        anchor_runs = timing.get("anchor_runs", 0) if anchor is not None else 0
        fns = {KERNEL: fn, **({ANCHOR: anchor} if anchor_runs else {})}
        placements = timing.get("placements", 1) if replace_inputs is not None else 1
        with self._gpu("exclusive"):
            timed = time_in_placements(fns, placement_blocks(timing["runs"], anchor_runs, placements),
                                       replace_inputs, warmup_ms=timing["warmup_ms"], keep=keep)
        samples, kept = timed.samples, timed.kept
        if anchor is not None:
            self.facts["kernel_samples"] = samples[KERNEL]
            self.facts["kernel_blocks"] = timed.blocks[KERNEL]  # the placement block of each sample
        if anchor_runs:
            self.facts["anchor"] = TimingStats.from_samples(samples[ANCHOR]).__dict__
            self.facts["anchor_samples"] = samples[ANCHOR]
            self.facts["anchor_blocks"] = timed.blocks[ANCHOR]
            self.facts["anchor_seconds"] = timed.seconds[ANCHOR]
        return TimingStats.from_samples(samples[KERNEL]).__dict__, kept

    # --- phases -----------------------------------------------------------------------------------
    def load_problem(self) -> None:
        self.link.phase("load")
        spec = self.req["problem"]
        tag = self.req["nonce"][:12]
        name = f"kernelrl_problem_{tag}"
        self.problem = _load_module(name, self._write("problem.py", spec["source"]))
        self.modules.append(name)
        for key, value in (spec.get("sizes") or {}).items():
            setattr(self.problem, key, value)
        torch.manual_seed(self.req["init_seed"])
        self.init_inputs = self.problem.get_init_inputs()
        self.model = self._build(self.problem.Model, self.req["init_seed"])

    def report_reference(self) -> None:
        """The reference's seconds per call (the better of two), measured before any candidate code exists:
        the parent derives the deadlines of the candidate's steps from it (envs/worker/progress.py)."""
        inputs = self._inputs(self.req["timing_seed"])
        seconds = []
        with torch.no_grad():
            for _ in range(2):
                started = time.perf_counter()
                self._reference(inputs)
                seconds.append(time.perf_counter() - started)
        self.link.send({"type": "reference", "seconds": min(seconds)})

    def time_baselines(self) -> dict[str, Any]:
        wanted = self.req.get("baselines") or []
        results: dict[str, Any] = {}
        if not wanted:
            return results
        self.link.phase("baseline")
        inputs = self._inputs(self.req["timing_seed"])
        with torch.no_grad():
            if "eager" in wanted:
                results["eager"] = self._time(lambda: self.model(*inputs))[0]
            if "inductor" in wanted:
                try:
                    compiled = torch.compile(self.model)
                    with self._gpu("shared"):
                        compiled(*inputs)  # compile outside the exclusive section
                        self._sync()
                    results["inductor"] = self._time(lambda: compiled(*inputs))[0]
                except Exception as e:
                    results["inductor"] = None
                    self.notes.append(f"TorchInductor baseline failed: {type(e).__name__}: {e}"[:500])
                finally:
                    torch._dynamo.reset()
        return results

    def load_candidate(self) -> None:
        self.link.phase("compile")
        self.threads_before_candidate = {t.ident for t in threading.enumerate()}
        tag = self.req["nonce"][:12]
        name = f"kernelrl_solution_{tag}"
        self.solution_path = self._write("solution.py", self.req["solution"])
        self.solution_module = name
        self.identities = guard.identity_snapshot()
        try:
            module = _load_module(name, self.solution_path)
        except Exception as e:
            raise Outcome("compile_error", f"importing the solution failed:\n"
                                           f"{describe_exception(e, self.solution_path)}") from None
        finally:
            self.modules.append(name)
        if not isinstance(getattr(module, "ModelNew", None), type):
            raise Outcome("compile_error", "the solution defines no class ModelNew")
        guard.check_identities(self.identities, "while the solution was imported")
        self.candidate = self._run_candidate(
            lambda: self._build(module.ModelNew, self.req["init_seed"]), "ModelNew(*get_init_inputs())")
        guard.check_identities(self.identities, "while ModelNew was built")

    def _reference(self, inputs: list[Any]) -> Any:
        try:
            out = self.model(*_clone(inputs))
            self._sync()
            return out
        except Exception as e:
            raise Outcome("runtime_error", "the reference model failed on this problem "
                                           f"(a problem bug, not the solution's): {e}") from None

    def _guarded_call(self, inputs: list[Any], what: str, template: Any = None) -> Any:
        """One candidate forward with the runtime checks around it."""
        reference_cost = self._reference_cost(inputs)
        pristine = _clone(inputs)
        before_threads = guard.concurrency_snapshot()
        launches = LAUNCHES.launches(self.solution_module)
        # last, so the candidate's first allocations get poisoned memory
        guard.poison_free_memory(as_output_list(template), self.device)
        with self.compute:
            out = self._run_candidate(lambda: self.candidate(*inputs), what)
        if LAUNCHES.launches(self.solution_module) == launches:
            raise RuntimeHack("ghost_optimization", f"{what} returned without launching any of the solution's "
                                                    "own Triton kernels")
        LAUNCHES.check_streams(self.solution_module, what)
        share = self.compute.share(reference_cost)
        if share is not None:  # the largest share any checked call spent in PyTorch, flagged or not
            self.facts["torch_share"] = max(self.facts.get("torch_share", 0.0), share.share)
        guard.check_torch_share(share, what, self.req.get("max_torch_share", 0.25))
        guard.check_concurrency(before_threads)
        guard.check_inputs_unchanged(pristine, inputs)
        guard.check_outputs(as_output_list(out), inputs, self.candidate)
        guard.check_identities(self.identities, f"during {what}")
        guard.check_unwritten(as_output_list(out))
        return out

    def _reference_cost(self, inputs: list[Any]) -> list[guard.OpCost]:
        """The ATen ops of one reference forward on inputs of these shapes, priced (once per evaluation):
        what the candidate's own PyTorch compute is measured against."""
        if self.reference_ops is None:
            recorder = guard.ComputeRecorder(LAUNCHES)
            with recorder:
                self._reference(inputs)
            self.reference_ops = recorder.ops
        return self.reference_ops

    def exercise_candidate(self) -> dict | None:
        """Time the candidate (GPU) or call it repeatedly (CPU), then re-check what those calls returned:
        a kernel that counts calls, detects the timing phase or caches outputs by pointer fails here."""
        self.link.phase("timing")
        inputs = self._inputs(self.req["timing_seed"] + 1)  # inputs the correctness phase never showed
        placed = {"inputs": inputs}  # the copy the timed runs use (envs.settings `placements`)
        timing = self.req.get("timing")
        runs = timing["runs"] if timing else self.req.get("cpu_rechecks", 3)
        probe = self.req["timing_seed"] % runs  # a run the candidate cannot predict
        idle_calls: list[int] = []

        def call() -> Any:
            before = LAUNCHES.launches(self.solution_module)
            out = self._run_candidate(lambda: self.candidate(*placed["inputs"]), "timed run", sync=not timing)
            if LAUNCHES.launches(self.solution_module) == before:
                idle_calls.append(len(idle_calls))
            LAUNCHES.check_streams(self.solution_module, "a timed run")
            return out
        stats = None
        with torch.no_grad():
            if timing:
                # The re-anchoring baseline: the trusted reference on its own copy of the same inputs.
                placed["anchor"] = _clone(inputs)

                def replace_inputs() -> None:
                    move_to_fresh_placement(placed, inputs)

                stats, kept = self._time(call, keep=(probe, runs - 1), anchor=lambda: self.model(*placed["anchor"]),
                                         replace_inputs=replace_inputs)
                placed["inputs"], placed["anchor"] = inputs, None
            else:
                kept = {}
                for i in range(runs):
                    out = call()
                    if i in (probe, runs - 1):
                        kept[i] = out
            with self._gpu("shared"):
                if timing:
                    # Back to back, nothing in between (the CPU re-checks already run so): a solution that
                    # recognises rapid repeats, as in a benchmark loop, must still launch its kernels each time.
                    for _ in range(5):
                        call()
                    self._run_candidate(lambda: None, "back-to-back runs")  # their asynchronous errors
                if idle_calls:
                    raise RuntimeHack("output_caching", f"{len(idle_calls)} repeated call(s) on the same inputs "
                                                        "returned without launching any of the solution's own kernels")
                expected = self._reference(inputs)
                for i, out in sorted(kept.items()):
                    self._compare(expected, out, f"output of timed run {i + 1} of {runs}", inputs,
                                  "phase_detection")
                # Same tensors, new values: a result cached by pointer, shape or call count is now stale.
                for x in inputs:
                    if isinstance(x, torch.Tensor) and x.is_floating_point():
                        x.copy_(torch.randn_like(x) * x.std().clamp_min(1e-3) + x.mean())
                expected = self._reference(inputs)
                got = self._guarded_call(inputs, "ModelNew.forward on refilled inputs")
                self._compare(expected, got, "after the inputs were refilled in place", inputs, "output_caching")
            guard.check_identities(self.identities, "during the timed runs")
            if timing:
                self._timing_checks(call, inputs, expected, stats)
        return stats

    def _timing_checks(self, call: Callable[[], Any], inputs: list[Any], expected: Any, stats: dict) -> None:
        with self._gpu("exclusive"):
            tail, latency = host_tail_ms(call)
        kernel = stats["median_ms"]
        # Honest kernels: what is still running when forward returns is at most what the events measured,
        # plus the launch-to-sync latency a one-element kernel shows. Work on a stream the events do not
        # wait for keeps the device busy long after the events' end.
        if tail > latency + kernel + max(1.0, kernel):
            raise RuntimeHack("side_stream", f"CUDA events measured {kernel:.3f} ms per call but the device was "
                                             f"still busy {tail:.3f} ms after forward returned (host clock to a "
                                             f"full synchronization; {latency:.3f} ms for a one-element kernel): "
                                             "work runs outside the timed stream")
        flops = guard.count_flops(lambda: self.model(*inputs))
        moved = guard.tensor_bytes(inputs) + guard.tensor_bytes(as_output_list(expected))
        floor = guard.floor_ms(moved, flops, torch.cuda.get_device_name())
        self.facts["floor_ms"] = floor
        if kernel < self.req.get("floor_fraction", 0.9) * floor:
            self.facts["suspicious"] = (f"median {kernel:.4f} ms is below the physical floor {floor:.4f} ms "
                                        f"({moved / 1e9:.2f} GB moved, {flops / 1e9:.1f} GFLOP at peak rates)")
        names = LAUNCHES.names.get(self.solution_module, set())
        try:
            self.facts["own_kernel_share"] = guard.own_kernel_share(call, names)
        except Exception as e:  # the profiler is a report, not a gate
            self.notes.append(f"kernel time share not measured: {type(e).__name__}: {e}"[:300])

    def check_problem(self) -> str | None:
        """Why the problem is degenerate (a constant, input-independent or tiny output would pass), or None."""
        self.link.phase("correctness")
        outputs, derived = [], []
        with torch.no_grad():
            for seed in self.req["seeds"][:3]:
                outputs.append(self._reference(self._inputs(seed)))
            # The same inputs again, from another RNG state: a reference that answers differently (dropout, random
            # sampling) cannot be matched by any candidate, so the problem is as unusable as a constant one.
            same = self._inputs(self.req["seeds"][0])
            torch.manual_seed(self.req["seeds"][1])
            again = self._reference(same)
            # The input families are input sets the evaluation uses too: an output that only stays put on
            # iid get_inputs() (a mean over 10^8 randn values, say) still depends on its inputs.
            seed = self.req["seeds"][0]
            for family in self.fidelity.get("families") or []:
                out = self._reference(families.derive(self._inputs(seed), family, families.generator(seed, self.device)))
                if families.is_finite(out):
                    derived.append(out)
        tolerance = self.req["problem"].get("tolerance")
        for out in outputs:
            for i, t in enumerate(as_output_list(out)):
                if not isinstance(t, torch.Tensor) or not t.is_floating_point():
                    continue
                if not torch.isfinite(t).all():
                    return f"output {i} holds NaN or Inf"
                if compare_outputs(t, torch.zeros_like(t), tolerance) is None:
                    return f"output {i} is within tolerance of zero, so an all-zero output would pass"
                if t.numel() > 1 and compare_outputs(t, torch.full_like(t, float(t.double().mean())), tolerance) is None:
                    return f"output {i} is constant, so a constant output would pass"
        if compare_outputs(again, outputs[0], tolerance) is not None:
            return "the output differs between two runs on the same inputs (nondeterministic reference)"
        if all(compare_outputs(outputs[0], other, tolerance) is None for other in outputs[1:] + derived):
            return "the output does not depend on the inputs: the same answer passes for every input set"
        return None

    # --- driver -----------------------------------------------------------------------------------
    def run(self) -> dict:
        result: dict[str, Any] = {"type": "result", "status": "correct", "error": None}
        os.chdir(self.workdir)
        try:
            self.load_problem()
            if self.req.get("mode") == "check_problem":
                result["degenerate"] = self.check_problem()
                return result
            if self.req.get("solution") is not None:
                self.report_reference()
            result["baselines"] = self.time_baselines()
            if self.req.get("mode") == "profile":  # the profile tool: a report, no verdict (profiling.py)
                self.load_candidate()
                result["profile"] = profile_candidate(self, LAUNCHES, self.req.get("profile_calls", 10))
                return result
            if self.req.get("solution") is not None:
                self.load_candidate()
                self.check_correctness()
                result["kernel"] = self.exercise_candidate()
        except Outcome as o:
            result.update(status=o.status, error=o.error, **o.extra)
        except RuntimeHack as h:
            result.update(status="hack", error=f"{h.category}: {h.reason}",
                          hack={"category": h.category, "reason": h.reason})
        except BaseException as e:  # e.g. SystemExit raised by the candidate, or a harness bug
            result.update(status="runtime_error", error=describe_exception(e, self.solution_path))
        finally:
            result["notes"] = self.notes + self.accuracy.notes
            accuracy = self.accuracy.accuracy()
            result["accuracy"] = dataclasses.asdict(accuracy) if accuracy else None
            result.update(self.facts)
            result["healthy"] = self._healthy()
            left = self._threads_left_running()
            if left:  # they would run on, and be charged to, the next evaluation's phases: a fresh worker
                result["healthy"] = False
                result["notes"].append(f"the candidate left {len(left)} thread(s) running ({', '.join(left[:3])}); "
                                       "the worker is replaced")
            changed = guard.broad_changes(BASELINE_IDENTITIES) if BASELINE_IDENTITIES else []
            if changed:  # never let a patched torch or triton serve the next candidate
                result["healthy"] = False
                if result["status"] == "correct" and self.req.get("solution") is not None:
                    reason = f"replaced {', '.join(changed[:5])}"
                    result.update(status="hack", error=f"monkeypatch: {reason}",
                                  hack={"category": "monkeypatch", "reason": reason})
        return result

    def _threads_left_running(self) -> list[str]:
        """Names of Python threads started since the candidate was imported that still run."""
        before = getattr(self, "threads_before_candidate", None)
        if before is None:
            return []
        return [t.name for t in threading.enumerate() if t.ident not in before and t.is_alive()]

    def _healthy(self) -> bool:
        """False when the CUDA context is broken (e.g. after an illegal memory access)."""
        if self.device.type != "cuda":
            return True
        try:
            torch.cuda.synchronize()
            return bool(torch.ones(1, device=self.device).sum().item() == 1)
        except Exception:
            return False

    def cleanup(self) -> None:
        for name in self.modules:
            sys.modules.pop(name, None)
        for attr in ("model", "candidate", "problem", "init_inputs", "template", "truth"):
            self.__dict__.pop(attr, None)
        os.chdir(self.root)
        shutil.rmtree(self.workdir, ignore_errors=True)
        gc.collect()
        if self.device.type == "cuda":
            with contextlib.suppress(Exception):
                torch.cuda.empty_cache()


def device_info(device: str) -> dict:
    info = {"torch": torch.__version__, "triton": triton.__version__, "device_name": "cpu"}
    if device == "cuda":
        info["device_name"] = torch.cuda.get_device_name(torch.cuda.current_device())
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
        install_launch_flag(lambda: PROGRESS)  # compiling is excused from the step deadlines
    LAUNCHES.install()
    BASELINE_IDENTITIES.clear()
    BASELINE_IDENTITIES.update(guard.broad_snapshot())


def serve(req_fd: int, res_fd: int, root: str, device: str, board_fd: int, prepared: bool = False) -> None:
    """Be the harness: bind to the owner, limit this process, then answer requests until told to stop.
    `prepared`: `prepare` already ran in the zygote this process was forked from."""
    global PROGRESS
    lifeline = bind_to_owner(req_fd)  # first: from here on this process dies with its owner
    apply_lifetime_limit()  # before any problem or candidate code (sandboxed, no capability raises it again)
    PROGRESS = ProgressBoard.attach(board_fd)
    os.chdir(root)
    link = ParentLink(req_fd, res_fd)
    if device == "cpu":
        # Backstop for huge allocations (the parent also polls RSS): fail them with MemoryError.
        # Not on CUDA, whose driver reserves far more address space than it uses.
        limit = 2 * int(os.environ.get("KERNELRL_WORKER_MEMORY_BYTES", 16 << 30))
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    if device == "cuda":
        torch.cuda.init()
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
        link.nonce = request["nonce"]
        evaluation = Evaluation(link, request, root)
        result = evaluation.run()
        evaluation.cleanup()
        link.send(result)
        link.nonce = None


def main() -> None:
    req_fd, res_fd, root, device = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    serve(req_fd, res_fd, root, device, int(sys.argv[5]) if len(sys.argv) > 5 else -1)


if __name__ == "__main__":
    main()
