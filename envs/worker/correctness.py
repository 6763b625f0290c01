"""The worker's correctness phase: trials on get_inputs() and on input families, the sensitivity probe,
and judging outputs against the reference and, where it decides, the float64 truth.

A mixin of `envs.worker.evaluation.Evaluation`, whose helpers it calls (`_inputs`, `_reference`,
`_guarded_call`, `_run_candidate`, `_call_as_if_timed`, `_build`). What the trials and the probe change is in
envs/inputs.py, how outputs are judged in envs/truth.py.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from envs import inputs as families
from envs.antihack import runtime as guard
from envs.antihack.runtime import RuntimeHack
from envs.compare import ReferenceNotFinite, as_output_list, format_mismatch, output_rms, outputs_match
from envs.truth import AccuracyLog, Float64Reference, judge_outputs
from envs.worker.outcome import Outcome
from envs.worker.messages import WorkerRequest
from envs.worker.outcome import clone_args as _clone

_PROBE_SALT = 0x5EED  # the probe's positions come from another stream than the last trial's family


class CorrectnessPhase:
    request: WorkerRequest  # set by Evaluation
    returned: guard.ReturnedOutputs  # set by Evaluation: what its checked calls returned

    def _init_correctness(self, request: WorkerRequest) -> None:
        self.fidelity = request.correctness  # input families, probe, fp64 truth mode
        self.accuracy = AccuracyLog(
            list(self.fidelity.get("families") or []), "not run" if self.fidelity.get("probe") else "off"
        )
        self.truth = Float64Reference(self._float64_model, self._release_cached)
        self.base_rms: list[float] = []  # the first trial's reference output magnitudes
        self.probe_times: float | None = None  # how far the sensitivity probe moved elements, once it passed

    def _float64_model(self) -> torch.nn.Module:
        """A second reference model in float64 with the reference's parameters (built aside the RNG stream)."""
        with torch.random.fork_rng(devices=[self.device.index or 0] if self.device.type == "cuda" else []):
            model = self._build(self.problem.Model, self.request.init_seed)
        model.load_state_dict(self.model.state_dict())
        return model.double()

    def _compare(
        self,
        expected: Any,
        got: Any,
        label: str,
        inputs: list[Any],
        hack_category: str | None = None,
        atol_scales: list[float] | None = None,
    ) -> None:
        """Judge `got` (envs/truth.py: the plain tolerance, else the float64 truth on these `inputs`).
        `atol_scales` is given for inputs the evaluator derived (families, the probe)."""
        try:
            judgement = judge_outputs(
                expected,
                got,
                self.request.problem.get("tolerance"),
                lambda: self.truth(inputs),
                self.fidelity.get("truth", "off"),
                atol_scales,
            )
        except ReferenceNotFinite as e:
            raise Outcome("runtime_error", f"problem error: {e}") from None
        self.accuracy.add(judgement, own_inputs=atol_scales is None)
        if judgement.passed:
            return
        if hack_category:
            raise RuntimeHack(hack_category, f"{label}: {format_mismatch(judgement.mismatch)}")
        if self.returned.kept_in(as_output_list(got)):  # a cache keyed on part of the input hit
            raise RuntimeHack(
                "output_caching", f"{label}: it returned, unchanged, the tensor an earlier call on other inputs had"
            )
        raise Outcome("incorrect", f"{label}: {format_mismatch(judgement.mismatch)}", mismatch=judgement.mismatch)

    def check_correctness(self) -> None:
        self._enter_phase("correctness")
        seeds = self.request.seeds
        plan = families.trial_plan(len(seeds), self.accuracy.families)
        self.template = None
        # The shared GPU lock is held one trial at a time, not for the whole phase: a timing window waiting
        # for the GPU then waits for one trial of each worker in correctness, not for all of their trials.
        lent = self.link.lent_seconds
        with torch.no_grad():
            for trial, (seed, family) in enumerate(zip(seeds, plan)):
                began = time.perf_counter()
                with self._gpu("shared"):
                    self._trial(trial, len(seeds), seed, family)
                # the first call also compiles the candidate's Triton kernels, with the hold lent back
                self._step("correctness.first_trial" if trial == 0 else "correctness.trials", began)
                if trial == 0 and self.fidelity.get("probe"):
                    # on the first trial's inputs, which the candidate has just been seen to get right
                    began = time.perf_counter()
                    with self._gpu("shared"):
                        self._sensitivity_probe(seeds[0])
                    self._step("correctness.probe", began)
        if self.link.lent_seconds > lent:
            self._add_step("correctness.compile", self.link.lent_seconds - lent)

    def _trial(self, trial: int, trials: int, seed: int, family: str | None) -> None:
        """One trial on get_inputs() or on a family derived from it. The candidate gets a clone of the inputs;
        the inputs themselves are what its input-mutation check compares against."""
        inputs = self._inputs(seed)
        if family is not None:
            inputs = families.derive(inputs, family, families.generator(seed, self.device))
        label = f"trial {trial + 1} of {trials}" + (f" ({family} inputs)" if family else "")
        # Alternate the order so an unwritten output cannot inherit the reference's memory.
        if trial % 2 == 0:
            expected = self._reference(inputs)
            if family is not None and not families.is_finite(expected):
                self._skip_family(trial, trials, seed, family)
                return
            self.template = guard.poison_template(as_output_list(expected), self.device)
            got = self._guarded_call(_clone(inputs), "ModelNew.forward", expected, pristine=inputs)
        else:
            got = self._guarded_call(_clone(inputs), "ModelNew.forward", self.template, pristine=inputs)
            expected = self._reference(inputs)
            if family is not None and not families.is_finite(expected):
                del got
                self._skip_family(trial, trials, seed, family)
                return
        if trial == 0:
            self.base_rms = [output_rms(t) for t in as_output_list(expected)]
        scales = families.atol_scales(expected, self.base_rms) if family is not None else None
        try:
            self._compare(expected, got, label, inputs, atol_scales=scales)
        except Outcome:
            guard.check_not_identity(as_output_list(got), inputs)
            self._probe_stale_memory(inputs, expected)
            raise

    def _skip_family(self, trial: int, trials: int, seed: int, family: str) -> None:
        self.notes.append(
            f"input family {family} skipped: the reference output holds NaN or Inf on it "
            "(that trial ran on get_inputs())"
        )
        self.accuracy.families.remove(family)
        self._trial(trial, trials, seed, None)

    def _sensitivity_probe(self, seed: int) -> None:
        """Move a few random input elements of the first trial's inputs (the problem's own: a family may
        saturate them) until the reference's output moves by PROBE_RESPONSE times its tolerance; the
        candidate's output must then match the reference's again, so it must have moved with it (its change
        within twice the tolerance of the reference's): a kernel that skips input elements (subsampling,
        skipped tiles, fixed indices) misses the moved ones' share.
        The inputs are made again from the trial's seed and moved in place (envs.inputs.perturbed), and the
        reference's output before the move is dropped before the candidate's call: at full size the probe
        holds one input set and two outputs besides the candidate's own copy and output."""
        inputs = self._inputs(seed)
        expected = self._reference(inputs)
        tolerance = self.request.problem.get("tolerance")
        g = families.generator(seed ^ _PROBE_SALT, self.device)
        for times in families.PROBE_SIZES:
            with families.perturbed(inputs, times, g) as (moved_inputs, where):
                if not where:
                    self.accuracy.probe = "skipped: no floating-point input to perturb"
                    return
                moved = self._reference(moved_inputs)
                if not families.is_finite(moved):
                    self.accuracy.probe = f"skipped: the reference output holds NaN or Inf at {times:g}x"
                    return
                scales = families.atol_scales(moved, self.base_rms)
                if families.response_ratio(expected, moved, tolerance, scales) >= families.PROBE_RESPONSE:
                    expected = None  # made again for the message if the candidate fails
                    self._probe_candidate(moved_inputs, moved, scales, times, where, seed)
                    return
                moved = None  # freed before the next size's reference output
        self.accuracy.probe = "skipped: the reference output barely moves when a few input elements do"

    def _probe_candidate(
        self, inputs: list[Any], moved: Any, scales: list[float], times: float, where: list[str], seed: int
    ) -> None:
        """The candidate on the probe's moved `inputs`, judged against the reference's output `moved` there."""
        after = self._guarded_call(_clone(inputs), "ModelNew.forward (sensitivity probe)", moved, pristine=inputs)
        label = (
            f"sensitivity probe ({families.PROBE_ELEMENTS} element(s) of each floating input moved by "
            f"{times:g} times its magnitude, e.g. {where[0]})"
        )
        try:
            self._compare(moved, after, label, inputs, atol_scales=scales)
        except Outcome as o:
            self.accuracy.probe = f"failed ({times:g}x)"
            before = self._reference(self._inputs(seed))
            o.error += _probe_change(o.extra.get("mismatch"), before, moved, after)
            raise
        self.accuracy.probe = f"passed ({times:g}x)"
        self.probe_times = times

    def _probe_stale_memory(self, inputs: list[Any], expected: Any) -> None:
        """A wrong output that turns right once freed memory holds the expected result was never computed:
        the solution returns memory it did not write (or only touched up), i.e. a previous result."""
        args = _clone(inputs)
        guard.bait_free_memory(as_output_list(expected), self.device)
        try:
            got = self._run_candidate(lambda: self._call_as_if_timed(args), "ModelNew.forward")
        except Outcome:
            return
        if outputs_match(expected, got, self.request.problem.get("tolerance")):
            raise RuntimeHack(
                "stale_memory",
                "the output was wrong while freed memory held the evaluator's "
                "poison and right once freed memory held the expected result: "
                "it returns memory it never computed",
            )


def _probe_change(mismatch: dict | None, before: Any, after_ref: Any, after: Any) -> str:
    """Where the probe failed: how the reference's and the candidate's outputs changed at that element. The
    candidate's output before the move is taken as the reference's there, which its first trial matched on
    these inputs (within tolerance, a hundredth of the move the probe asks for)."""
    if not mismatch or "worst_index" not in mismatch:
        return ""
    i = mismatch.get("output_index", 0)
    index = tuple(mismatch["worst_index"])
    try:
        start = float(as_output_list(before)[i][index])
        d_ref = float(as_output_list(after_ref)[i][index]) - start
        d_out = float(as_output_list(after)[i][index]) - start
    except (IndexError, TypeError, RuntimeError):
        return ""
    return (
        f"\nthere the reference's output changed by {d_ref:.6g} when those inputs moved, the candidate's by "
        f"{d_out:.6g}: the output must follow every input element"
    )
