"""Judging outputs against a float64 ground truth, not only against PyTorch's own rounded result.

PyTorch's fp32 result carries rounding error like any other correct summation order, so a correct kernel
can miss it by more than the tolerance (near the zero crossings of a long cumsum). An output passes the
plain check (envs/compare.py) or, when that fails, the float64 truth `t` (`Float64Reference`: the
reference run in float64 on the inputs upcast) both elementwise, `|out - t| <= atol + rtol*|t| +
K*max|ref - t|`, and normwise, `rms(out - t) <= K*rms(ref - t) + atol`. The slack is the reference's own
error, so narrower accumulators, zero, partial or subsampled outputs still fail. K = 16: correct orders
differ from PyTorch's by a few times, narrower precisions by thousands. docs/evaluation.md ("Rule") has
the rule and when the truth is skipped.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import math
from typing import Any, Callable, Iterator

import torch

from envs.compare import (
    CHUNK_ELEMENTS,
    ReferenceNotFinite,
    TensorComparison,
    as_output_list,
    compare_each,
    first_mismatch,
    output_rms,
    tolerance_for,
    unravel_index,
)
from envs.verdict import Accuracy, ErrorStats

TRUTH_MULTIPLE = 16.0


@dataclasses.dataclass
class Judgement:
    """The outcome of one comparison of a candidate's outputs (all of them) with the reference's."""

    passed: bool
    rule: str  # "reference" | "fp64_truth": which rule decided
    mismatch: dict[str, Any] | None  # why it failed (the deciding rule's report)
    candidate_vs_reference: ErrorStats | None = None
    candidate_vs_truth: ErrorStats | None = None
    reference_vs_truth: ErrorStats | None = None
    note: str | None = None  # why the truth could not decide


def _worst(stats: list[ErrorStats | None]) -> ErrorStats | None:
    known = [s for s in stats if s is not None]
    if not known:
        return None
    return ErrorStats(max(s.max_abs for s in known), max(s.rms for s in known))


@dataclasses.dataclass
class _TruthCheck:
    passed: bool
    mismatch: dict[str, Any] | None
    candidate: ErrorStats
    reference: ErrorStats
    note: str | None = None


def _chunks(*tensors: torch.Tensor) -> Iterator[tuple[int, list[torch.Tensor]]]:
    flats = [t.detach().reshape(-1) for t in tensors]
    for start in range(0, flats[0].numel(), CHUNK_ELEMENTS):
        yield start, [f[start : start + CHUNK_ELEMENTS].double() for f in flats]


def check_against_truth(
    ref: torch.Tensor,
    out: torch.Tensor,
    truth: torch.Tensor,
    atol: float,
    rtol: float,
    multiple: float = TRUTH_MULTIPLE,
) -> _TruthCheck:
    """Rule 2 of the module docstring for one floating output (shapes already equal, all finite but truth).
    Passing it alone is not the verdict: `judge_outputs` accepts an output by rule 1 or rule 2."""
    n = max(1, ref.numel())
    if not isinstance(truth, torch.Tensor) or truth.shape != ref.shape:
        nan = ErrorStats(float("nan"), float("nan"))
        return _TruthCheck(False, None, nan, nan, note="the float64 reference's outputs are shaped differently")
    max_er = max_ec = sq_er = sq_ec = sq_tol = 0.0
    for _, (r, o, t) in _chunks(ref, out, truth):
        if not torch.isfinite(t).all():
            return _TruthCheck(
                False,
                None,
                ErrorStats(float("nan"), float("nan")),
                ErrorStats(float("nan"), float("nan")),
                note="the float64 reference holds NaN or Inf where the float32 one does not",
            )
        er, ec = (r - t).abs(), (o - t).abs()
        max_er, max_ec = max(max_er, float(er.max())), max(max_ec, float(ec.max()))
        sq_er, sq_ec = sq_er + float(er.square().sum()), sq_ec + float(ec.square().sum())
        sq_tol += float((atol + rtol * t.abs()).square().sum())
    cand, refe = ErrorStats(max_ec, (sq_ec / n) ** 0.5), ErrorStats(max_er, (sq_er / n) ** 0.5)
    rms_tol = (sq_tol / n) ** 0.5
    if not all(math.isfinite(v) for v in (rms_tol, refe.rms, cand.rms, max_er, max_ec)):
        # squares beyond float64's range (a truth near 1e154 or more, where the float32 reference saturates):
        # inf > inf is False and an infinite slack admits anything, so this truth cannot judge
        return _TruthCheck(
            False, None, cand, refe, note="the float64 truth's errors overflow float64, so the truth is not used"
        )
    if refe.rms > rms_tol:
        return _TruthCheck(
            False,
            None,
            cand,
            refe,
            note=(
                f"the float32 reference is {refe.rms:.3g} (rms) from its float64 run, more than the tolerance "
                f"({rms_tol:.3g} rms): the reference behaves differently in float64, so the truth is not used"
            ),
        )
    slack = multiple * max_er
    normwise_bound = multiple * refe.rms + atol
    errors: dict[str, Any] = {
        "candidate_vs_truth_max": cand.max_abs,
        "candidate_vs_truth_rms": cand.rms,
        "reference_vs_truth_max": refe.max_abs,
        "reference_vs_truth_rms": refe.rms,
        "truth_multiple": multiple,
    }
    if max_ec > atol + slack:  # only then can an element exceed its bound: count them
        bad = 0
        worst = (-1.0, 0, 0.0, 0.0)
        for start, (o, t) in _chunks(out, truth):
            excess = (o - t).abs() - (atol + rtol * t.abs() + slack)
            n_bad = int((excess > 0).sum())
            if n_bad:
                bad += n_bad
                j = int(excess.argmax())
                if float(excess[j]) > worst[0]:
                    worst = (float(excess[j]), start + j, float(o[j]), float(t[j]))
        if bad:
            return _TruthCheck(
                False,
                {
                    "reason": (
                        f"{bad} of {ref.numel()} element(s) differ from the float64 truth beyond atol={atol:g}, "
                        f"rtol={rtol:g} plus {multiple:g}x the reference's own worst error ({max_er:.3g})"
                    ),
                    "worst_index": unravel_index(worst[1], ref.shape),
                    "value": worst[2],
                    "expected": worst[3],
                    "mismatched": bad,
                    "total": ref.numel(),
                    **errors,
                },
                cand,
                refe,
            )
    if cand.rms > normwise_bound:
        return _TruthCheck(
            False,
            {
                "reason": (
                    f"rms error against the float64 truth {cand.rms:.4g} exceeds {multiple:g}x the reference's "
                    f"({refe.rms:.3g}) plus atol={atol:g}: less accurate throughout than the float32 "
                    "reference"
                ),
                **errors,
            },
            cand,
            refe,
        )
    return _TruthCheck(True, None, cand, refe)


TruthSource = Callable[[], "tuple[Any | None, str | None]"]


def judge_outputs(
    ref: Any,
    out: Any,
    tolerance: dict[str, float] | None,
    truth: TruthSource | None,
    mode: str = "on_mismatch",
    atol_scales: list[float] | None = None,
    multiple: float = TRUTH_MULTIPLE,
) -> Judgement:
    """Judge `out` against `ref` by the module's rule. `truth()` gives the float64 outputs, or (None, why)."""
    plain = compare_each(ref, out, tolerance, atol_scales)
    mismatch = first_mismatch(plain)
    stats = _worst([_stats(c) for c in plain])
    structural = len(plain) != len(as_output_list(ref)) or any(
        c.mismatch is not None and c.max_abs is None for c in plain
    )
    if mode == "off" or truth is None or structural or (mismatch is None and mode != "always"):
        return Judgement(mismatch is None, "reference", mismatch, stats)
    if mode != "always":
        hopeless = _beyond_the_truth(ref, plain, tolerance, atol_scales, multiple)
        if hopeless is not None:
            return Judgement(False, "reference", hopeless[0], stats, note=hopeless[1])
    truth_out, why = truth()
    if truth_out is not None and len(as_output_list(truth_out)) != len(as_output_list(ref)):
        truth_out, why = None, "no float64 truth: the float64 reference returns a different number of outputs"
    if truth_out is None:
        return Judgement(mismatch is None, "reference", mismatch, stats, note=why)
    checks: list[_TruthCheck | None] = []
    for i, (r, o, t, c) in enumerate(zip(as_output_list(ref), as_output_list(out), as_output_list(truth_out), plain)):
        if not isinstance(r, torch.Tensor) or not r.is_floating_point() or c.max_abs is None:
            checks.append(None)  # exact outputs: the plain comparison is the only one
            continue
        atol, rtol = tolerance_for(r.dtype, tolerance)
        check = check_against_truth(r, o, t, atol * (atol_scales[i] if atol_scales else 1.0), rtol, multiple)
        if check.mismatch is not None and len(plain) > 1:
            check.mismatch = {"output_index": i, **check.mismatch}
        checks.append(check)
    known = [c for c in checks if c is not None]
    note = next((c.note for c in known if c.note), None)
    versus_truth = _worst([c.candidate for c in known if c.note is None])
    reference_error = _worst([c.reference for c in known if c.note is None])
    if mismatch is None:  # `always`: recorded, and rule 1 decided
        return Judgement(True, "reference", None, stats, versus_truth, reference_error, note)
    if note is not None:
        return Judgement(False, "reference", mismatch, stats, versus_truth, reference_error, note)
    # Rule 1 failed somewhere; each output passes by rule 1 or, if floating, by rule 2.
    for c, check in zip(plain, checks):
        if c.mismatch is not None and (check is None or not check.passed):
            return Judgement(
                False,
                "fp64_truth" if check is not None else "reference",
                check.mismatch if check is not None else c.mismatch,
                stats,
                versus_truth,
                reference_error,
            )
    return Judgement(True, "fp64_truth", None, stats, versus_truth, reference_error)


def _beyond_the_truth(
    ref: Any,
    plain: list[TensorComparison],
    tolerance: dict[str, float] | None,
    atol_scales: list[float] | None,
    multiple: float,
) -> tuple[dict[str, Any], str] | None:
    """The plain mismatch of an output so far from the reference that rule 2 cannot accept it whatever the
    truth is, and why; None when the truth could decide. Rule 2 accepts only when rms(ref - t) <= tol :=
    rms(atol + rtol*|t|) and rms(out - t) <= K*rms(ref - t) + atol, so rms(out - ref) <= (K + 1)*tol + atol,
    and tol <= atol + rtol*rms(t) <= atol + rtol*(rms(ref) + tol) (Minkowski) bounds tol by
    (atol + rtol*rms(ref)) / (1 - rtol). Most wrong answers are off by far more: no float64 run for them."""
    for i, (r, c) in enumerate(zip(as_output_list(ref), plain)):
        if c.mismatch is None or c.rms is None or not isinstance(r, torch.Tensor) or not r.is_floating_point():
            continue
        atol, rtol = tolerance_for(r.dtype, tolerance)
        atol *= atol_scales[i] if atol_scales else 1.0
        if rtol >= 1.0:
            continue
        tol = (atol + rtol * output_rms(r)) / (1.0 - rtol)
        # room for float64's rounding of the rms, and for rule 2's squares that underflow below ~1e-154
        limit = ((multiple + 1.0) * tol + atol) * (1.0 + 1e-6) + 1e-150
        if c.rms > limit:
            where = f"output {i}'s" if len(plain) > 1 else "the output's"
            return c.mismatch, (
                f"float64 truth not run: {where} rms difference from the reference ({c.rms:.3g}) is beyond "
                f"the {limit:.3g} the truth rule could accept"
            )
    return None


def _stats(c: TensorComparison) -> ErrorStats | None:
    return ErrorStats(c.max_abs, c.rms) if c.max_abs is not None else None


class Float64Reference:
    """The reference model in float64, built on first use, run on the inputs upcast (`truth(inputs)`).

    `build` returns the float64 model. On CUDA it runs on the GPU; if it does not fit, the truth is
    unavailable for the rest of the evaluation (rule 1 decides, with a note) rather than moved to the CPU,
    where a full-size problem in float64 would outlast the correctness timeout. `release_cache` hands the
    allocator's cached memory back to the driver; an evaluation worker passes one that also asks its GPU lock for
    the quiet period the release needs (envs/gpu_lock.py), since other workers may time kernels meanwhile."""

    def __init__(self, build: Callable[[], torch.nn.Module], release_cache: Callable[[], None] | None = None):
        self._build = build
        self._release_cache = release_cache or _release_cuda_cache
        self._model: torch.nn.Module | None = None
        self.unavailable: str | None = None

    def __call__(self, inputs: list[Any]) -> tuple[Any | None, str | None]:
        if self.unavailable is not None:
            return None, self.unavailable
        # its float64 inputs and outputs are twice the size of the cached blocks (split by the comparisons
        # besides), which could not hold them: handed back first, they do not stay reserved beside them
        self._release_cache()
        try:
            if self._model is None:
                self._model = self._build()
            with _default_dtype(torch.float64):
                out = self._model(
                    *[
                        x.detach().double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x
                        for x in inputs
                    ]
                )
        except torch.cuda.OutOfMemoryError:
            self._give_up("the float64 reference does not fit in GPU memory")
            return None, self.unavailable
        except Exception as e:  # the problem's code, not the candidate's
            self._give_up(f"the reference does not run in float64: {type(e).__name__}: {e}"[:300])
            return None, self.unavailable
        narrow = [
            t.dtype
            for t in as_output_list(out)
            if isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype != torch.float64
        ]
        if narrow:
            self._give_up(f"the reference returns {narrow[0]} when run in float64 (it converts internally)")
            return None, self.unavailable
        return out, None

    def _give_up(self, why: str) -> None:
        self.unavailable = f"no float64 truth: {why}"
        self._model = None
        gc.collect()
        self._release_cache()


def _release_cuda_cache() -> None:
    """The allocator's cached free memory back to the driver (a no-op without an initialised CUDA context)."""
    if torch.cuda.is_available():
        with contextlib.suppress(Exception):
            torch.cuda.empty_cache()


@contextlib.contextmanager
def _default_dtype(dtype: torch.dtype) -> Iterator[None]:
    """Tensors the reference creates inside forward (torch.zeros(...), torch.tensor(0.5)) in float64 too."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(before)


class AccuracyLog:
    """What the verdict reports about its comparisons (`Accuracy`): the rule that decided any of them and
    the worst errors. Errors are taken from comparisons on the problem's own inputs, whose magnitudes mean
    something (a family at 2^16 times the scale has errors to match), and from the one that failed."""

    def __init__(self, families: list[str], probe: str | None):
        self.families, self.probe = families, probe
        self.notes: list[str] = []
        self._rule = "reference"
        self._reported: list[Judgement] = []

    def add(self, judgement: Judgement, own_inputs: bool) -> None:
        if judgement.rule == "fp64_truth":
            self._rule = "fp64_truth"
        if own_inputs or not judgement.passed:
            self._reported.append(judgement)
        if judgement.note and judgement.note not in self.notes:
            self.notes.append(judgement.note)

    def accuracy(self) -> Accuracy | None:
        if not self._reported:
            return None
        failed = [j for j in self._reported if not j.passed]
        judged = failed[-1:] or self._reported
        return Accuracy(
            rule=failed[-1].rule if failed else self._rule,
            candidate_vs_reference=_worst([j.candidate_vs_reference for j in judged]),
            candidate_vs_truth=_worst([j.candidate_vs_truth for j in judged]),
            reference_vs_truth=_worst([j.reference_vs_truth for j in judged]),
            truth_multiple=TRUTH_MULTIPLE,
            families=list(self.families),
            probe=self.probe,
        )


__all__ = [
    "AccuracyLog",
    "Float64Reference",
    "Judgement",
    "ReferenceNotFinite",
    "TRUTH_MULTIPLE",
    "check_against_truth",
    "judge_outputs",
]
