"""The worker's timing phase: the baselines and the anchors' drift reference (before any candidate code exists),
the candidate's timed runs (GPU) or repeated calls (CPU), then the re-checks of what those runs returned and the
timing checks.

A mixin of `envs.worker.evaluation.Evaluation`, like its correctness phase (envs/worker/correctness.py),
whose helpers it calls (`_inputs`, `_reference`, `_guarded_call`, `_run_candidate`, `_compare`, `_gpu`,
`_sync`, `_release_cached`, `_step`, `_add_step`, `_note_memory`). How runs are timed is
envs/timing.py; how the speedup and its interval come from the samples, envs/speedup.py.
"""

from __future__ import annotations

import random
import time
from typing import Any, Callable

import torch
import torch._dynamo  # noqa: F401  (time_baselines resets it; the harness imported it before any snapshot)

from envs import inputs as families
from envs.antihack import runtime as guard
from envs.antihack.runtime import RuntimeHack
from envs.compare import as_output_list
from envs.speedup import ANCHOR_REFERENCE, drift_detected, group_runs, relative_half_width
from envs.timing import (
    ALLOCATING_NOTE,
    ANCHOR,
    EXPOSED_NOTE,
    KERNEL,
    PlacedRuns,
    host_tail_ms,
    placement_blocks,
    time_in_placements,
)
from envs.verdict import TimingStats
from envs.worker.harness_state import LAUNCHES
from envs.worker.messages import WorkerRequest
from envs.worker.oom import is_oom
from envs.worker.outcome import clone_args as _clone
from envs.worker.outcome import allocating_in_placement, move_to_fresh_placement


class TimingPhase:
    request: WorkerRequest  # set by Evaluation
    measured_reference_ms: float | None = None  # the anchor reference's median, where this request measured it

    def _time(
        self,
        fn: Callable[[], Any],
        keep: tuple[int, ...] = (),
        anchor: Callable[[], Any] | None = None,
        replace_inputs: Callable[[], None] | None = None,
        step: str = "timing.timed_runs",
        then: Callable[[], None] | None = None,
    ) -> tuple[dict, dict[int, Any]]:
        """Time `fn`; with `anchor` (the candidate's timing, re-anchoring on) eager PyTorch is timed in the
        same window, its runs interleaved with fn's, and the raw samples of both are reported for the
        speedup and its interval (envs/speedup.py). With `replace_inputs` the runs are split into
        `timing["placements"]` blocks, the inputs copied to fresh addresses before each block after the first.
        `then` runs in the same exclusive hold after the runs."""
        anchor_runs = self.request.timing.get("anchor_runs", 0) if anchor is not None else 0
        fns = {KERNEL: fn, **({ANCHOR: anchor} if anchor_runs else {})}
        enough = self._precise_enough if anchor is not None else None  # the candidate's runs, not baselines
        timed = self._in_placements(fns, replace_inputs, keep=keep, enough=enough, step=step, then=then)
        samples, kept = timed.samples, timed.kept
        if anchor is not None:
            if timed.exposed.get(KERNEL):
                self.notes.append(
                    f"{timed.exposed[KERNEL]} of {len(samples[KERNEL])} timed runs {EXPOSED_NOTE}: their host "
                    "time past the spin is in their samples"
                )
            self.facts["kernel_samples"] = samples[KERNEL]
            self.facts["kernel_blocks"] = timed.blocks[KERNEL]  # the placement block of each sample
        if anchor_runs:
            self.facts["anchor"] = TimingStats.from_samples(samples[ANCHOR]).__dict__
            self.facts["anchor_samples"] = samples[ANCHOR]
            self.facts["anchor_blocks"] = timed.blocks[ANCHOR]
            self.facts["anchor_seconds"] = timed.seconds[ANCHOR]
            if timed.allocating[ANCHOR]:  # the warm-up should have left the pools what these runs need
                self.notes.append(
                    f"{timed.allocating[ANCHOR]} of {len(samples[ANCHOR])} anchor runs "
                    f"{ALLOCATING_NOTE}: the re-anchored baseline may read slow"
                )
        return TimingStats.from_samples(samples[KERNEL]).__dict__, kept

    def _in_placements(
        self,
        fns: dict[str, Callable[[], Any]],
        replace_inputs: Callable[[], None] | None,
        keep: tuple[int, ...] = (),
        enough: Callable[[int, dict[str, list[float]], dict[str, list[int]]], bool] | None = None,
        step: str = "timing.timed_runs",
        then: Callable[[], None] | None = None,
    ) -> PlacedRuns:
        """`fns` timed under one exclusive GPU hold in the blocks the request's timing asks for: `runs` of
        fns[KERNEL] and, where fns has ANCHOR, `anchor_runs` of it; over `placements` blocks with
        `replace_inputs`, else in one. The seconds held are reported as `step`, and each part of the blocks as
        `step.<part>` (envs.timing BLOCK_PARTS), which bench_eval prints. One hold for all blocks: taken per
        block, each block queued behind the other workers' correctness trials (docs/gpu-notes.md, session 47).
        `then` runs inside the same hold after the blocks: what else needs the GPU alone takes no hold of its own,
        each of which first waits for the trials in flight to end."""
        timing = self.request.timing
        anchor_runs = timing.get("anchor_runs", 0) if ANCHOR in fns else 0
        placements = timing.get("placements", 1) if replace_inputs is not None else 1
        with self._gpu("exclusive"):
            began = time.perf_counter()
            timed = time_in_placements(
                fns,
                placement_blocks(timing["runs"], anchor_runs, placements),
                replace_inputs,
                warmup_ms=timing["warmup_ms"],
                keep=keep,
                enough=enough,
                launch_allowance_ms=timing.get("launch_allowance_ms", 0.0),
            )
            self._step(step, began)
            if then is not None:
                then()
        if placements > 1:  # the candidate's blocks and the anchor reference's
            for part, seconds in timed.parts.items():
                self._add_step(f"{step}.{part}", seconds)
        return timed

    def _placements(self, placed: dict[str, Any], inputs: list[Any], phase: str) -> Callable[[], float]:
        """Gives `placed` the anchor's own copy of `inputs` beside the timed callable's (`placed["inputs"]`),
        and returns what moves both to fresh addresses before each placement block after the first (behind
        a spacer drawn from the request's seed: the same request, the same shifts). The moves run inside the
        timing's exclusive hold; each returns the settling its release needs (envs/gpu_lock.py), which the next
        block's warm-up runs through (envs.timing.time_in_placements) and the step `<phase>.release_settle`
        adds up. Called inside a shared hold (the copy is GPU work)."""
        placed["anchor"] = _clone(inputs)
        spacers = random.Random(self.request.timing_seed)

        def replace_inputs() -> float:
            settling = move_to_fresh_placement(placed, inputs, spacer_bytes=spacers.randint(1, 32) << 21)
            self._add_step(f"{phase}.release_settle", settling)
            return settling

        return replace_inputs

    def _precise_enough(self, blocks: int, samples: dict[str, list[float]], ids: dict[str, list[int]]) -> bool:
        """Sequential timing (envs.settings `timing_precision`): after `min_placements` blocks, and every
        `CHECK_EVERY` blocks from there, stop once the speedup's interval is within ± the precision. Where the
        drift test will keep the anchor out of the speedup (envs/speedup.py), the kernel's runs alone decide."""
        precision = self.request.timing.get("precision", 0.0)
        first = self.request.timing.get("min_placements", 0)
        if not precision or blocks < first or (blocks - first) % CHECK_EVERY:
            return False
        anchor = samples.get(ANCHOR)
        reference = self._anchor_reference_ms()
        if anchor and reference and not drift_detected(group_runs(anchor, ids.get(ANCHOR)), reference):
            anchor = None
        width = relative_half_width(samples[KERNEL], ids[KERNEL], anchor, ids.get(ANCHOR) if anchor else None)
        return width <= precision

    def _anchor_reference_ms(self) -> float | None:
        """The cached anchor reference's median the drift test judges the anchor by: the driver's (in the
        request), or the one this request measured with the baselines; None while the test is off or before
        any reference exists (while the reference itself is timed)."""
        timing = self.request.timing or {}
        if not timing.get("drift_test"):
            return None
        return timing.get("anchor_reference_ms") or self.measured_reference_ms

    def time_baselines(self) -> dict[str, Any]:
        wanted = self.request.baselines
        results: dict[str, Any] = {}
        if not wanted:
            return results
        self._enter_phase("baseline")
        with self._gpu("shared"):
            inputs = self._inputs(self.request.timing_seed)
        referenced = ANCHOR_REFERENCE in wanted and bool(self.request.timing.get("anchor_runs"))
        with torch.no_grad():
            if "eager" in wanted:
                results["eager"] = self._time(lambda: self.model(*inputs), step="baseline.eager")[0]
            compiled = self._compiled_reference(inputs) if "inductor" in wanted else None
            try:
                reference, inductor = self._time_inductor(inputs, compiled, referenced)
            finally:
                torch._dynamo.reset()
        if referenced:
            results[ANCHOR_REFERENCE] = reference
            self.measured_reference_ms = reference["median_ms"] if reference else None
        if "inductor" in wanted:
            results["inductor"] = inductor
        return results

    def _time_inductor(
        self, inputs: list[Any], compiled: Callable[..., Any] | None, referenced: bool
    ) -> tuple[dict | None, dict | None]:
        """(the anchor reference or None, TorchInductor's stats or None): Inductor timed beside the reference
        where there is one (`_time_anchor_reference`), in a block of its own otherwise. Where Inductor's runs
        fail, a note and None, and the reference is timed with eager alone; the environment's OOM and the
        reference's own failure are raised (the first is retried)."""
        try:
            if referenced:
                return self._time_anchor_reference(inputs, compiled)
            if compiled is None:
                return None, None
            return None, self._time(lambda: compiled(*inputs), step="baseline.inductor")[0]
        except Exception as e:
            if compiled is None or is_oom(e):
                raise
            self._note_inductor_failure(e)
            return self._time_anchor_reference(inputs) if referenced else (None, None)

    def _compiled_reference(self, inputs: list[Any]) -> Callable[..., Any] | None:
        """The reference compiled by TorchInductor and run once (the compile, and Inductor's autotuning in that
        first run), or None with a note where TorchInductor fails on it."""
        try:
            began = time.perf_counter()
            compiled = torch.compile(self.model, backend=self._inductor_lending_the_gpu())
            with self._gpu("shared"):
                compiled(*inputs)  # compile outside the exclusive section
                self._sync()
            self._step("baseline.inductor_compile", began)
            return compiled
        except Exception as e:
            self._note_inductor_failure(e)
            return None

    def _note_inductor_failure(self, e: Exception) -> None:
        self.notes.append(f"TorchInductor baseline failed: {type(e).__name__}: {e}"[:500])

    def _time_anchor_reference(
        self, inputs: list[Any], compiled: Callable[..., Any] | None = None
    ) -> tuple[dict, dict | None]:
        """What an anchor reads when nothing drifted: eager PyTorch timed as a candidate's anchor is, in the
        same placement blocks and with the same stopping rule. One anchor run per block after the block's
        warm-up reads above eager's 100 runs back to back, up to 3x for launch-bound problems: envs/speedup.py
        judges an anchor's drift against this, not against those. The timed callable beside it is `compiled`
        (TorchInductor's graph), which is then timed as a candidate is and divided by this reference in
        envs/speedup.py, rather than by eager's single back-to-back block, whose placement moves it from run to
        run (docs/gpu-notes.md, session 29). Without it, eager is the timed callable too. Returns (the
        reference's stats, the timed callable's stats or None)."""
        with self._gpu("shared"):
            placed: dict[str, Any] = {"inputs": _clone(inputs)}  # placed as a candidate's timed runs are
            replace_inputs = self._placements(placed, inputs, "baseline")
        timed_fn = compiled if compiled is not None else self.model

        def on(fn: Callable[..., Any], copy: str) -> Callable[[], Any]:
            def run() -> Any:
                with allocating_in_placement(placed):
                    return fn(*placed[copy])

            return run

        fns = {KERNEL: on(timed_fn, "inputs"), ANCHOR: on(self.model, "anchor")}
        step = "baseline.anchor_reference"  # its cost, beside the phase (scripts/bench_eval.py)
        timed = self._in_placements(fns, replace_inputs, enough=self._precise_enough, step=step)
        placed.clear()  # the last block's copies and pool
        reference = TimingStats.from_samples(timed.samples[ANCHOR]).__dict__
        return reference, TimingStats.from_samples(timed.samples[KERNEL]).__dict__ if compiled is not None else None

    def _inductor_lending_the_gpu(self) -> Callable[..., Any]:
        """TorchInductor's backend, lending the shared GPU hold back while it lowers the traced graph and
        compiles its Triton kernels (seconds of CPU work): a timing window waiting for the GPU need not wait
        for them. Dynamo's trace and the first run of the compiled graph (Inductor's autotuning benchmarks
        among them) stay inside the hold. The reference's own code only: no candidate exists yet."""
        from torch._dynamo.backends.inductor import inductor

        def backend(graph: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
            with self.link.lent():
                return inductor(graph, example_inputs)

        return backend

    def exercise_candidate(self) -> dict | None:
        """Time the candidate (GPU) or call it repeatedly (CPU), then re-check what those calls returned:
        a kernel that counts calls, detects the timing phase or caches outputs by pointer fails here."""
        # the correctness phase's trials back to the driver before waiting for the exclusive hold, and before
        # the phase starts: its memory peaks then count from what stays reserved, not from the trials' cache
        self._release_cached()
        self._enter_phase("timing")
        timing = self.request.timing
        with self._gpu("shared"):
            inputs = self._inputs(self.request.timing_seed + 1)  # inputs the correctness phase never showed
            # The copy the timed runs (or CPU re-check calls) use, replaced by a fresh one in each placement
            # block (envs.settings `placements`). Never `inputs` itself: the anchor's copies and the re-checks'
            # expected outputs are made from those, so whatever the candidate writes into its inputs must not
            # reach them.
            placed = {"inputs": _clone(inputs)}
            # with the re-anchoring baseline: the trusted reference on its own copy of the same inputs
            replace_inputs = self._placements(placed, inputs, "timing") if timing else None
        runs = timing["runs"] if timing else self.request.cpu_rechecks
        probe = self.request.timing_seed % (guaranteed_runs(timing) if timing else runs)  # one it cannot predict
        idle_calls: list[int] = []

        def call() -> Any:
            before = LAUNCHES.launches(self.solution_module)
            with allocating_in_placement(placed):
                out = self._run_candidate(lambda: self.candidate(*placed["inputs"]), "timed run", sync=not timing)
            if LAUNCHES.launches(self.solution_module) == before:
                idle_calls.append(len(idle_calls))
            LAUNCHES.check_streams(self.solution_module, "a timed run")
            return out

        stats = None
        with torch.no_grad():
            if timing:

                def anchor() -> Any:
                    with allocating_in_placement(placed):
                        return self.model(*placed["anchor"])

                tail: list[tuple[float, float]] = []  # the side-stream check's clock, judged after the re-checks
                stats, kept = self._time(
                    call,
                    keep=(probe, -1),
                    anchor=anchor,
                    replace_inputs=replace_inputs,
                    then=lambda: tail.append(self._measure_tail(call)),
                )
                runs = stats["runs"]  # fewer than asked where sequential timing stopped early
                placed["inputs"], placed["anchor"] = inputs, None
                placed.pop("pool", None)
                self._release_cached()  # the placement blocks' copies, before the re-checks
                self._note_memory()  # the re-checks' peak then counts from what stays reserved
            else:
                kept = {}
                with self._gpu("shared"):  # a no-op on the CPU, where these calls replace the timed runs
                    for i in range(runs):
                        out = call()
                        if i in (probe, runs - 1):
                            kept[i] = out
            with self._gpu("shared"):
                began = time.perf_counter()  # after the lock's grant: waiting for it is the parent's gpu_wait
                if timing:
                    # Back to back, nothing in between (the CPU re-checks already run so): a solution that
                    # recognises rapid repeats, as in a benchmark loop, must still launch its kernels each time.
                    for _ in range(5):
                        call()
                    self._run_candidate(lambda: None, "back-to-back runs")  # their asynchronous errors
                if idle_calls:
                    raise RuntimeHack(
                        "output_caching",
                        f"{len(idle_calls)} repeated call(s) on the same inputs "
                        "returned without launching any of the solution's own kernels",
                    )
                expected = self._reference(inputs)
                for i, out in sorted(kept.items()):
                    self._compare(expected, out, f"output of timed run {i + 1} of {runs}", inputs, "phase_detection")
                kept = expected = None  # judged: full-size outputs the refill and the last call need not share
                self._release_cached()  # their blocks (the kept ones in placement pools no one else can use)
                # Same tensors, new values: a result cached by pointer, shape or call count is now stale.
                for x in inputs:
                    if isinstance(x, torch.Tensor) and x.is_floating_point():
                        std, mean = x.std().clamp_min(1e-3), x.mean()
                        x.copy_(torch.randn_like(x).mul_(std).add_(mean))  # one temporary, not three
                expected = self._reference(inputs)
                pristine = _clone(inputs)  # before the blocks below, which the candidate's output is to take
                guard.cache_blocks_like(as_output_list(expected), self.device)
                got = self._guarded_call(inputs, "ModelNew.forward on refilled inputs", expected, pristine=pristine)
                self._compare(expected, got, "after the inputs were refilled in place", inputs, "output_caching")
                got = None
                self._moved_in_place(inputs, pristine, expected)
                if timing:
                    self._step("timing.rechecks", began)
                    self._timing_reports(call, inputs, expected, stats)  # in the same hold: no wait for another
            guard.check_identities(self.identities, "during the timed runs")
            if timing:
                self._judge_tail(*tail[0], stats)
        return stats

    def _moved_in_place(self, inputs: list[Any], pristine: list[Any], before: Any) -> None:
        """A few elements of the same input tensors moved in place, as far as the sensitivity probe moved them, and
        the candidate called on them again: a result cached under a key that reads only part of the inputs (their
        addresses and shapes and a checksum of some elements, computed by a kernel of its own so no call is idle)
        is stale now, where the dense refill changed the key. `before`: the reference's output before the move.
        Skipped where the probe did not pass (nothing says how far to move), the moved reference output holds NaN
        or Inf, or the output barely moves here."""
        if self.probe_times is None:
            return
        tolerance = self.request.problem.get("tolerance")
        g = families.generator(self.request.seeds[0] ^ _IN_PLACE_SALT, self.device)
        with families.perturbed(inputs, self.probe_times, g) as (moved_inputs, where):
            if not where:  # no floating-point input
                return
            moved = self._reference(moved_inputs)
            if not families.is_finite(moved):  # as the probe: no verdict stands on such an output
                return
            scales = families.atol_scales(moved, self.base_rms)
            if families.response_ratio(before, moved, tolerance, scales) < families.PROBE_RESPONSE:
                return
            for copy, x in zip(pristine, moved_inputs):  # what the input-mutation check compares with
                if isinstance(copy, torch.Tensor):
                    copy.copy_(x)
            what = "ModelNew.forward after a few input elements moved in place"
            got = self._guarded_call(moved_inputs, what, moved, pristine=pristine)
            label = f"after {families.PROBE_ELEMENTS} element(s) of each floating input moved in place ({where[0]})"
            self._compare(moved, got, label, moved_inputs, "output_caching", atol_scales=scales)

    def _measure_tail(self, call: Callable[[], Any]) -> tuple[float, float]:
        """How long the device stays busy after forward returns, and the platform's own latency (host_tail_ms):
        inside the timed runs' exclusive hold, after them."""
        began = time.perf_counter()
        measured = host_tail_ms(call)
        self._step("timing.tail_check", began)
        return measured

    def _judge_tail(self, tail: float, latency: float, stats: dict) -> None:
        """side_stream where the device stayed busy after forward returned for longer than the events measured;
        judged after the re-checks, so a hack they catch keeps their category."""
        kernel = stats["median_ms"]
        # Honest kernels: what is still running when forward returns is at most what the events measured,
        # plus the launch-to-sync latency a one-element kernel shows. Work on a stream the events do not
        # wait for keeps the device busy long after the events' end.
        if tail > latency + kernel + max(1.0, kernel):
            raise RuntimeHack(
                "side_stream",
                f"CUDA events measured {kernel:.3f} ms per call but the device was "
                f"still busy {tail:.3f} ms after forward returned (host clock to a "
                f"full synchronization; {latency:.3f} ms for a one-element kernel): "
                "work runs outside the timed stream",
            )

    def _timing_reports(self, call: Callable[[], Any], inputs: list[Any], expected: Any, stats: dict) -> None:
        """The problem's physical floor (`suspicious` where the kernel reads below a share of it) and the share of
        device time in the candidate's own kernels: reports, not gates. Called inside a shared hold (both run
        kernels: the FLOP count the reference, the profiler the candidate)."""
        kernel = stats["median_ms"]
        began = time.perf_counter()
        flops = guard.count_flops(lambda: self.model(*inputs))
        moved = guard.tensor_bytes(inputs) + guard.tensor_bytes(as_output_list(expected))
        floor = guard.floor_ms(moved, flops, torch.cuda.get_device_name())
        self.facts["floor_ms"] = floor
        self._step("timing.floor", began)
        if kernel < self.request.floor_fraction * floor:
            self.facts["suspicious"] = (
                f"median {kernel:.4f} ms is below the physical floor {floor:.4f} ms "
                f"({moved / 1e9:.2f} GB moved, {flops / 1e9:.1f} GFLOP at peak rates)"
            )
        names = LAUNCHES.names.get(self.solution_module, set())
        began = time.perf_counter()
        try:
            self.facts["own_kernel_share"] = guard.own_kernel_share(call, names)
        except Exception as e:  # the profiler is a report, not a gate
            self.notes.append(f"kernel time share not measured: {type(e).__name__}: {e}"[:300])
        self._step("timing.kernel_share", began)


# The in-place check's positions come from another stream than the sensitivity probe's
_IN_PLACE_SALT = 0xCAC4E

# Sequential timing asks whether the interval is tight enough every this many blocks (each ask is a
# bootstrap of the runs so far, a few milliseconds inside the exclusive window).
CHECK_EVERY = 4


def guaranteed_runs(timing: dict[str, Any]) -> int:
    """The candidate's runs that sequential timing always makes (those of its first `min_placements`
    blocks): the unpredictable probe run is drawn among them, so it is never skipped."""
    if not timing.get("precision"):
        return timing["runs"]
    blocks = placement_blocks(timing["runs"], timing.get("anchor_runs", 0), timing.get("placements", 1))
    return sum(b.runs for b in blocks[: max(1, timing.get("min_placements", 1))])
