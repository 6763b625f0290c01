"""One evaluation request, run inside the worker: its phases in order and the verdict they add up to.

`Evaluation` loads the problem, reports the reference's time, times the baselines, imports and builds the
candidate, checks its correctness and exercises it, each candidate call under the runtime checks
(`_guarded_call`); `run` turns how that ended into the result the harness sends, and says whether the
worker is still fit for the next request. Its correctness phase is envs/worker/correctness.py, its timing
phase envs/worker/timing_phase.py (mixins); the process around it, the protocol and what runs before any
problem or candidate code are envs/worker/harness.py.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
import shutil
import sys
import tempfile
import threading
import time
from typing import Any, Callable, Iterator

import torch

from envs import inputs as families
from envs.antihack import runtime as guard
from envs.antihack.runtime import RuntimeHack
from envs.compare import as_output_list, outputs_match
from envs.gpu_lock import release_settle_seconds
from envs.timing import NOMINAL_SPIN_CYCLES_PER_MS
from envs.worker import harness_state
from envs.worker.correctness import CorrectnessPhase
from envs.worker.harness_state import BASELINE_IDENTITIES, LAUNCHES
from envs.worker.messages import WorkerRequest
from envs.worker.oom import CandidateMemory, oom_report
from envs.worker.outcome import Outcome, load_module, released_by
from envs.worker.outcome import clone_args as _clone
from envs.worker.parent_link import ParentLink
from envs.worker.profiling import profile_candidate
from envs.worker.timing_phase import TimingPhase
from envs.worker.tracebacks import describe_exception, is_compile_error


def _to_device(x: Any, device: torch.device) -> Any:
    return x.to(device) if isinstance(x, torch.Tensor) else x


class Evaluation(CorrectnessPhase, TimingPhase):
    """One request, run inside the worker (its correctness phase: envs/worker/correctness.py; its timing
    phase: envs/worker/timing_phase.py)."""

    def __init__(self, link: ParentLink, request: WorkerRequest, root: str):
        self.link, self.request, self.root = link, request, root
        self.device = torch.device(request.device)
        self.workdir = tempfile.mkdtemp(prefix="eval-", dir=root)
        self.solution_path: str | None = None
        self.modules: list[str] = []
        self.notes: list[str] = []
        self.facts: dict[str, Any] = {}  # measurements reported beside the status
        self.solution_module = ""
        self.compute = guard.ComputeRecorder(LAUNCHES)
        self.reference_ops: list[guard.OpCost] | None = None
        self.memory = CandidateMemory(self.device)  # what the candidate's own code holds: whose an OOM is
        self._phase: str | None = None  # the phase announced last (_enter_phase)
        self.forward_launched = False  # a checked forward launched the solution's own kernels
        self.returned = guard.ReturnedOutputs()  # what the checked calls returned (a wrong answer kept from one)
        self._init_correctness(request)

    # --- helpers ---------------------------------------------------------------------------------
    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize()

    def _call_as_if_timed(self, args: list[Any]) -> Any:
        """The candidate on `args`, called from the stream state the timer leaves before a timed run
        (envs/timing.py): idle, or spinning where a launch allowance queues the runs, so asking the stream
        whether it is busy cannot tell a checked call from a timed one (tests/hacks/hack_phase_detection_*_stream.py).
        Inside `_run_candidate`'s call, after its memory statistics: host work between the spin and the call could
        outlast the spin (an H100 run of the busy-stream entry found a checked call's stream idle again)."""
        if self.device.type == "cuda":
            torch.cuda.synchronize()
            allowance = (self.request.timing or {}).get("launch_allowance_ms", 0.0)
            if allowance:  # only busy matters here: a nominal clock, not the timer's calibration (made in its hold)
                torch.cuda._sleep(int(allowance * NOMINAL_SPIN_CYCLES_PER_MS))
        return self.candidate(*args)

    def _release_cached(self) -> None:
        """Hand the allocator's cached free memory back to the driver (CUDA): until then a worker keeps what its
        last phase reserved from the other workers on the GPU, e.g. while it waits for the exclusive hold. What
        goes back slows the GPU for a while, so the parent keeps timing windows out meanwhile (`_quiet`)."""
        if self.device.type == "cuda":
            self._quiet(release_settle_seconds(released_by(self.device, lambda: None)))

    def _quiet(self, seconds: float) -> None:
        """Tell the parent that memory went back to the driver: its GPU lock starts no exclusive hold for
        `seconds`, until the release has settled (envs/gpu_lock.py)."""
        if seconds > 0:
            self.link.quiet(seconds)

    @contextlib.contextmanager
    def _gpu(self, mode: str) -> Iterator[None]:
        """Hold the GPU `mode` ("shared" or "exclusive") around GPU work; every kernel the worker launches runs
        inside one, so none overlaps another worker's timed window, and what was queued ends before the hold
        does. A no-op on the CPU."""
        if self.device.type != "cuda":
            yield
            return
        with self.link.gpu(mode):
            yield
            torch.cuda.synchronize()

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
        start, returned = self.memory.begin(measure=sync), False  # timed runs: nothing read in the window
        try:
            out = fn()
            if sync:
                self._sync()
            returned = True
        except Exception as e:  # the candidate's failure, reported back to it
            status = "compile_error" if is_compile_error(e) else "runtime_error"
            raise Outcome(status, f"{what} failed:\n{describe_exception(e, self.solution_path)}") from None
        finally:
            self.memory.end(start, raised=not returned)
        if harness_state.PROGRESS is not None:
            harness_state.PROGRESS.call_done()
        return out

    # --- phases -----------------------------------------------------------------------------------
    def load_problem(self) -> None:
        self._enter_phase("load")
        spec = self.request.problem
        tag = self.request.nonce[:12]
        name = f"kernelrl_problem_{tag}"
        self.problem = load_module(name, self._write("problem.py", spec["source"]))
        self.modules.append(name)
        for key, value in (spec.get("sizes") or {}).items():
            setattr(self.problem, key, value)
        torch.manual_seed(self.request.init_seed)
        self.init_inputs = self.problem.get_init_inputs()
        with self._gpu("shared"):  # one hold for the model and, where a candidate follows, its first runs
            self.model = self._build(self.problem.Model, self.request.init_seed)
            if self.request.solution is not None and self.request.mode != "check_problem":
                self._report_reference()

    def _report_reference(self) -> None:
        """The reference's seconds per call (the better of two), measured before any candidate code exists:
        the parent derives the deadlines of the candidate's steps from it (envs/worker/progress.py)."""
        seconds = []
        with torch.no_grad():
            inputs = self._inputs(self.request.timing_seed)
            for _ in range(2):
                started = time.perf_counter()
                with self.memory.reference():  # the floor of the candidate's memory budget
                    self._reference(inputs)
                seconds.append(time.perf_counter() - started)
        self.link.send({"type": "reference", "seconds": min(seconds)})

    def load_candidate(self) -> None:
        self._enter_phase("compile")
        self.threads_before_candidate = {t.ident for t in threading.enumerate()}
        tag = self.request.nonce[:12]
        name = f"kernelrl_solution_{tag}"
        self.solution_path = self._write("solution.py", self.request.solution)
        self.solution_module = name
        self.identities = guard.identity_snapshot()
        try:
            with self.memory.candidate():
                module = load_module(name, self.solution_path)
        except Exception as e:
            raise Outcome(
                "compile_error", f"importing the solution failed:\n{describe_exception(e, self.solution_path)}"
            ) from None
        finally:
            self.modules.append(name)
        if not isinstance(getattr(module, "ModelNew", None), type):
            raise Outcome("compile_error", "the solution defines no class ModelNew")
        guard.check_identities(self.identities, "while the solution was imported")
        with self._gpu("shared"):
            self.candidate = self._run_candidate(
                lambda: self._build(module.ModelNew, self.request.init_seed), "ModelNew(*get_init_inputs())"
            )
        guard.check_identities(self.identities, "while ModelNew was built")

    def _reference(self, inputs: list[Any]) -> Any:
        try:
            out = self.model(*_clone(inputs))
            self._sync()
            return out
        except Exception as e:
            raise Outcome(
                "runtime_error", f"the reference model failed on this problem (a problem bug, not the solution's): {e}"
            ) from None

    def _guarded_call(
        self, inputs: list[Any], what: str, template: Any = None, pristine: list[Any] | None = None
    ) -> Any:
        """One candidate forward on `inputs` with the runtime checks around it. `pristine`: an untouched copy of
        `inputs` the caller keeps anyway (the candidate then got a clone), which the input-mutation check
        compares against instead of a copy made here: one full-size copy less on the GPU."""
        reference_cost = self._reference_cost(inputs)
        pristine = _clone(inputs) if pristine is None else pristine
        before_threads = guard.concurrency_snapshot()
        launches = LAUNCHES.launches(self.solution_module)
        # last, so the candidate's first allocations get poisoned memory
        guard.poison_free_memory(as_output_list(template), self.device)
        with self.compute:
            out = self._run_candidate(lambda: self._call_as_if_timed(inputs), what)
        if LAUNCHES.launches(self.solution_module) == launches:
            if self.forward_launched:  # the path is taken, just not this time: a result kept from an earlier call
                raise RuntimeHack(
                    "output_caching",
                    f"{what} returned without launching any of the solution's own Triton kernels, which an earlier "
                    "call on other inputs launched",
                )
            raise RuntimeHack(
                "ghost_optimization", f"{what} returned without launching any of the solution's own Triton kernels"
            )
        self.forward_launched = True
        self.returned.add(as_output_list(out))
        LAUNCHES.check_streams(self.solution_module, what)
        share = self.compute.share(reference_cost)
        if share is not None:  # the largest share any checked call spent in PyTorch, flagged or not
            self.facts["torch_share"] = max(self.facts.get("torch_share", 0.0), share.share)
        guard.check_torch_share(share, what, self.request.max_torch_share)
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

    def check_problem(self) -> str | None:
        """Why the problem is degenerate (a constant, input-independent or tiny output would pass), or None."""
        self._enter_phase("correctness")
        with self._gpu("shared"):
            return self._degeneracy()

    def _degeneracy(self) -> str | None:
        outputs, derived = [], []
        with torch.no_grad():
            for seed in self.request.seeds[:3]:
                outputs.append(self._reference(self._inputs(seed)))
            # The same inputs again, from another RNG state: a reference that answers differently (dropout, random
            # sampling) cannot be matched by any candidate, so the problem is as unusable as a constant one.
            same = self._inputs(self.request.seeds[0])
            torch.manual_seed(self.request.seeds[1])
            again = self._reference(same)
            # The input families are input sets the evaluation uses too: an output that only stays put on
            # iid get_inputs() (a mean over 10^8 randn values, say) still depends on its inputs.
            seed = self.request.seeds[0]
            for family in self.fidelity.get("families") or []:
                out = self._reference(
                    families.derive(self._inputs(seed), family, families.generator(seed, self.device))
                )
                if families.is_finite(out):
                    derived.append(out)
        tolerance = self.request.problem.get("tolerance")
        for out in outputs:
            for i, t in enumerate(as_output_list(out)):
                if not isinstance(t, torch.Tensor) or not t.is_floating_point():
                    continue
                if not torch.isfinite(t).all():
                    return f"output {i} holds NaN or Inf"
                if outputs_match(t, torch.zeros_like(t), tolerance):
                    return f"output {i} is within tolerance of zero, so an all-zero output would pass"
                if t.numel() > 1 and outputs_match(t, torch.full_like(t, float(t.double().mean())), tolerance):
                    return f"output {i} is constant, so a constant output would pass"
        if not outputs_match(again, outputs[0], tolerance):
            return "the output differs between two runs on the same inputs (nondeterministic reference)"
        if all(outputs_match(outputs[0], other, tolerance) for other in outputs[1:] + derived):
            return "the output does not depend on the inputs: the same answer passes for every input set"
        return None

    # --- driver -----------------------------------------------------------------------------------
    def run(self) -> dict:
        result: dict[str, Any] = {"type": "result", "status": "correct", "error": None}
        os.chdir(self.workdir)
        try:
            self.load_problem()
            if self.request.mode == "check_problem":
                result["degenerate"] = self.check_problem()
                return result
            result["baselines"] = self.time_baselines()
            if self.request.mode == "profile":  # the profile tool: a report, no verdict (profiling.py)
                self.load_candidate()
                calls = 10 if self.request.profile_calls is None else self.request.profile_calls
                result["profile"] = profile_candidate(self, LAUNCHES, calls)
                return result
            if self.request.solution is not None:
                self.load_candidate()
                self.check_correctness()
                result["kernel"] = self.exercise_candidate()
        except Outcome as o:
            result.update(status=o.status, error=o.error, **o.extra)
            if o.status in ("runtime_error", "compile_error"):
                self._attribute_oom(o, result)
        except RuntimeHack as h:
            result.update(
                status="hack", error=f"{h.category}: {h.reason}", hack={"category": h.category, "reason": h.reason}
            )
        except BaseException as e:  # e.g. SystemExit raised by the candidate, or a harness bug
            result.update(status="runtime_error", error=describe_exception(e, self.solution_path))
            self._attribute_oom(e, result)
        finally:
            self._note_memory()
            result["notes"] = self.notes + self.accuracy.notes
            accuracy = self.accuracy.accuracy()
            result["accuracy"] = dataclasses.asdict(accuracy) if accuracy else None
            result.update(self.facts)
            result["healthy"] = self._healthy()
            left = self._threads_left_running()
            if left:  # they would run on, and be charged to, the next evaluation's phases: a fresh worker
                result["healthy"] = False
                result["notes"].append(
                    f"the candidate left {len(left)} thread(s) running ({', '.join(left[:3])}); the worker is replaced"
                )
            changed = guard.broad_changes(BASELINE_IDENTITIES) if BASELINE_IDENTITIES else []
            if changed:  # never let a patched torch or triton serve the next candidate
                result["healthy"] = False
                if result["status"] == "correct" and self.request.solution is not None:
                    reason = f"replaced {', '.join(changed[:5])}"
                    result.update(
                        status="hack",
                        error=f"monkeypatch: {reason}",
                        hack={"category": "monkeypatch", "reason": reason},
                    )
        return result

    def _attribute_oom(self, exc: BaseException, result: dict[str, Any]) -> None:
        """An evaluation that ended in a CUDA out-of-memory error (the candidate's, the reference's, the truth's,
        the timing's) says whose it is (envs/worker/oom.py): `result["oom"]`, which the parent retries when it is
        the environment's; the candidate's keeps its status, the numbers added to the error."""
        report = oom_report(exc, self.request.memory_budget, self.device, self.memory)
        if report is None:
            return
        result["oom"] = report
        if report["owner"] == "candidate":
            result["error"] = f"{result.get('error') or ''}\nout of memory: {report['reason']}".strip()

    def _threads_left_running(self) -> list[str]:
        """Names of Python threads started since the candidate was imported that still run."""
        before = getattr(self, "threads_before_candidate", None)
        if before is None:
            return []
        return [t.name for t in threading.enumerate() if t.ident not in before and t.is_alive()]

    def _enter_phase(self, name: str) -> None:
        """Announce phase `name` to the parent, noting on CUDA the memory the phase before it reserved
        (`_note_memory`). The first phase starts the count over: what the worker reserved before this
        evaluation is not this evaluation's."""
        if self._phase is None:
            self.memory.phase_peaks()
        self._note_memory()
        self._phase = name
        self.link.phase(name)

    def _note_memory(self, step: str | None = None) -> None:
        """GiB the worker's allocator reserved at most during the current phase (`facts["memory_gib"][phase]`):
        what a worker holds on its GPU, phase by phase; and beside it (`"<phase>.allocated"`) the most its
        tensors held, where a guarded call counts the poison's fill of every free cached block (allocated then
        reaches reserved: not a measure of live tensors there). With `step`, the same since the last note is
        also kept under the step's name: which step of a phase sets its peak. CUDA only."""
        peaks = self.memory.phase_peaks() if self._phase is not None else None
        if peaks is None:
            return
        memory = self.facts.setdefault("memory_gib", {})
        for name in (self._phase, step) if step else (self._phase,):
            for key, peak in zip((name, f"{name}.allocated"), peaks):
                memory[key] = max(memory.get(key, 0.0), round(peak / 2**30, 3))

    def _step(self, name: str, began: float) -> None:
        """Seconds of one step inside a phase ("phase.step", from `began` on the perf_counter clock), reported
        beside the phases: where a phase's time goes (scripts/bench_eval.py); on CUDA also its memory peak."""
        self._add_step(name, time.perf_counter() - began)
        self._note_memory(name)

    def _add_step(self, name: str, seconds: float) -> None:
        steps = self.facts.setdefault("steps", {})
        steps[name] = steps.get(name, 0.0) + seconds

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
        with contextlib.suppress(Exception):
            self._release_cached()
