"""Output comparison: shapes and dtypes must match, values agree within dtype-aware tolerances.

Runs inside the worker. The verdict is float64's: a float32 pass settles outputs that are inside their
bounds by a margin its rounding cannot cross, and everything else (a mismatch, an element near its
bound, a non-finite value) is judged, and reported, in float64. Large outputs are compared in chunks
so the copies never exceed a few hundred MB however big the output is.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from envs import fused_compare

# |out - ref| <= atol + rtol * |ref|, chosen by the reference output's dtype. A problem may override
# them with TOLERANCE (docs/problem-format.md); everything else is exact.
DEFAULT_TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float32: (1e-4, 1e-4),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (2e-2, 2e-2),
    torch.float64: (1e-7, 1e-7),
    torch.complex64: (1e-4, 1e-4),  # per real and imaginary part, as float32's
    torch.complex128: (1e-7, 1e-7),
}
CHUNK_ELEMENTS = 1 << 25  # elements per float64 chunk (256 MB)


class ReferenceNotFinite(RuntimeError):
    """The problem's own output holds NaN or Inf, so no candidate can be judged against it."""


def tolerance_for(dtype: torch.dtype, override: dict[str, float] | None = None) -> tuple[float, float]:
    atol, rtol = DEFAULT_TOLERANCES.get(dtype, (0.0, 0.0))
    if override:
        atol, rtol = override.get("atol", atol), override.get("rtol", rtol)
    return atol, rtol


def as_output_list(out: Any) -> list[Any]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _describe(x: Any) -> str:
    if isinstance(x, torch.Tensor):
        return f"Tensor(shape={tuple(x.shape)}, dtype={x.dtype})"
    return type(x).__name__


@dataclasses.dataclass
class TensorComparison:
    """One output against its reference: the first mismatch (None: within tolerance) and, for floating
    tensors that could be compared elementwise, the largest and root-mean-square |difference|."""

    mismatch: dict[str, Any] | None
    max_abs: float | None = None
    rms: float | None = None


def compare_outputs(ref: Any, out: Any, tolerance: dict[str, float] | None = None) -> dict[str, Any] | None:
    """None when `out` matches `ref`; otherwise a dict describing the first mismatch."""
    return first_mismatch(compare_each(ref, out, tolerance))


def outputs_match(ref: Any, out: Any, tolerance: dict[str, float] | None = None) -> bool:
    """Whether `out` matches `ref` as compare_outputs judges, without describing a mismatch: the judging stops
    at the first chunk of an output that holds one. For checks that need only the answer (the stale-memory
    probe, the problem's degeneracy checks): a wrong full-size output costs one chunk, not a float64 pass over
    all of it."""
    return first_mismatch(compare_each(ref, out, tolerance, first_only=True)) is None


def compare_each(
    ref: Any,
    out: Any,
    tolerance: dict[str, float] | None = None,
    atol_scales: list[float] | None = None,
    first_only: bool = False,
) -> list[TensorComparison]:
    """Every output against its reference (one entry when the outputs' structure already differs).
    `atol_scales[i]` multiplies output i's atol (input families that scale the outputs up scale it).
    `first_only`: a mismatch describes only the first chunk that holds one (outputs_match)."""
    refs, outs = as_output_list(ref), as_output_list(out)
    if len(refs) != len(outs):
        return [TensorComparison({"reason": f"expected {len(refs)} output(s), got {len(outs)}"})]
    results = []
    for i, (r, o) in enumerate(zip(refs, outs)):
        atol, rtol = tolerance_for(r.dtype, tolerance) if isinstance(r, torch.Tensor) else (0.0, 0.0)
        result = compare_tensor(r, o, atol * (atol_scales[i] if atol_scales else 1.0), rtol, first_only)
        if result.mismatch is not None and len(refs) > 1:
            result.mismatch = {"output_index": i, **result.mismatch}
        results.append(result)
    return results


def first_mismatch(results: list[TensorComparison]) -> dict[str, Any] | None:
    return next((r.mismatch for r in results if r.mismatch is not None), None)


def _describe_structure(ref: Any, out: Any) -> dict[str, Any] | None:
    if not isinstance(ref, torch.Tensor):
        return None if type(ref) is type(out) and ref == out else {"reason": f"expected {ref!r}, got {_describe(out)}"}
    if not isinstance(out, torch.Tensor):
        return {"reason": f"expected {_describe(ref)}, got {_describe(out)}"}
    if out.shape != ref.shape:
        return {"reason": f"shape mismatch: expected {tuple(ref.shape)}, got {tuple(out.shape)}"}
    if out.dtype != ref.dtype:
        return {"reason": f"dtype mismatch: expected {ref.dtype}, got {out.dtype}"}
    if out.device != ref.device:
        return {"reason": f"device mismatch: expected {ref.device}, got {out.device}"}
    return None


def compare_tensor(ref: Any, out: Any, atol: float, rtol: float, first_only: bool = False) -> TensorComparison:
    """|out - ref| <= atol + rtol * |ref| elementwise; shapes, dtypes and devices equal. An output that is
    clearly inside its bounds is settled by a float32 pass; anything else is judged in float64 chunks, up to
    the first chunk with a mismatch where `first_only` (that mismatch then describes that chunk alone)."""
    structural = _describe_structure(ref, out)
    if structural is not None or not isinstance(ref, torch.Tensor):
        return TensorComparison(structural)
    if ref.is_complex():  # real and imaginary parts as a trailing pair (.double() would drop the imaginary)
        ref, out = torch.view_as_real(ref.resolve_conj()), torch.view_as_real(out.resolve_conj())
    r_flat, o_flat = ref.detach().reshape(-1), out.detach().reshape(-1)
    if ref.dtype in _FLOAT32_EXACT and _FLOAT32_ATOL[0] <= atol <= _FLOAT32_ATOL[1] and 0.0 <= rtol <= 1.0:
        inside = _clearly_inside(r_flat, o_flat, atol, rtol)
        if inside is not None:
            max_abs, square_sum = inside
            return TensorComparison(None, max_abs, (square_sum / max(1, r_flat.numel())) ** 0.5)
        described = None if first_only else _described_in_float32(ref.shape, r_flat, o_flat, atol, rtol)
        if described is not None:
            return described
    return _compare_float64(ref, r_flat, o_flat, atol, rtol, first_only)


# The float32 pass: dtypes that float32 holds exactly, and tolerances for which its bound stays a normal
# finite number (atol >= 2^-100 keeps the rounding of rtol*|ref| absolute and negligible; atol <= 1e30 and
# rtol <= 1 keep atol + rtol*|ref| below float32's largest value once rounded).
_FLOAT32_EXACT = (torch.float32, torch.float16, torch.bfloat16)
_FLOAT32_ATOL = (2.0**-100, 1e30)
# Each float32 operation rounds by at most 2^-24 relative; the test below takes five roundings (the difference,
# rtol and its product with |ref|, the subtraction, atol; the fused kernel a sixth, atol's), so shrinking rtol and
# atol by 2^-20 makes "inside in float32" imply "inside in exact arithmetic".
_FLOAT32_MARGIN = 1.0 - 2.0**-20


def _clearly_inside(r_flat: torch.Tensor, o_flat: torch.Tensor, atol: float, rtol: float) -> tuple[float, float] | None:
    """(max |out - ref|, sum of squares) when every element is inside its bound with the margin to spare
    and the reference is finite; None otherwise (the float64 path then judges it all). The maximum is exact:
    rounding keeps order, so the largest exact difference is among the elements whose float32 difference is the
    largest. The squares, of float32's differences, sum in float64. On a GPU one Triton kernel makes the pass
    (envs/fused_compare.py: two passes over the operands; it rounds the shrunk bounds to float32 too, a sixth
    rounding the margin covers), elsewhere torch operations in chunks (`_clearly_inside_in_chunks`)."""
    rtol_in, atol_in = rtol * _FLOAT32_MARGIN, atol * _FLOAT32_MARGIN
    if fused_compare.eligible(r_flat, o_flat):
        return fused_compare.clearly_inside_fused(r_flat, o_flat, atol_in, rtol_in)
    return _clearly_inside_in_chunks(r_flat, o_flat, atol_in, rtol_in)


def _clearly_inside_in_chunks(
    r_flat: torch.Tensor, o_flat: torch.Tensor, atol_in: float, rtol_in: float
) -> tuple[float, float] | None:
    """`_clearly_inside` with torch operations, the bounds already shrunk; None as soon as a chunk is not inside.
    A chunk costs about 14 passes over its float32 size in memory traffic: the bound is never a tensor, the test
    is a maximum (no tensor of booleans) and the squares are summed in float64 as they are read."""
    max_abs = square_sum = 0.0
    for start in range(0, r_flat.numel(), CHUNK_ELEMENTS):
        r, o = r_flat[start : start + CHUNK_ELEMENTS].float(), o_flat[start : start + CHUNK_ELEMENTS].float()
        diff = torch.sub(o, r).abs_()
        # |out - ref| - rtol*|ref| <= atol, written over |ref|: NaN or Inf in the output or the reference makes
        # it NaN or +Inf (inf - inf, 0 * inf), and the maximum NaN or +Inf (amax propagates NaN), never <= atol
        excess = r.abs()
        torch.sub(diff, excess, alpha=rtol_in, out=excess)
        if not float(excess.amax()) <= atol_in:
            return None
        del excess
        largest, squares = _largest_and_squares(diff, r, o)
        max_abs, square_sum = max(max_abs, largest), square_sum + squares
    return max_abs, square_sum


def _largest_and_squares(diff: torch.Tensor, r: torch.Tensor, o: torch.Tensor) -> tuple[float, float]:
    """A chunk's largest |out - ref|, exact (float64's, among the elements tied for float32's largest: rounding
    keeps order), and the sum of its float32 differences' squares in float64."""
    largest = diff.amax()
    if float(largest) == 0.0:
        return 0.0, 0.0
    exact = float(_diff64(r, o, (diff == largest).nonzero().squeeze(1))[0].max())
    return exact, float(torch.linalg.vector_norm(diff, dtype=torch.float64)) ** 2


# The float32 description: an element whose float32 excess over the bound widened by 2^-20 is positive is outside
# its bound in exact arithmetic (the same five roundings as the float32 pass); one inside the shrunk bound is
# inside; the rest, and each maximum's candidates, are recomputed with the float64 path's own formulas.
_FLOAT32_WIDE = 1.0 + 2.0**-20
# Below this largest relative difference float32's relative rounding bounds fail (subnormal quotients).
_FLOAT32_SMALLEST_REL = 2.0**-100
# At most this many candidates for a chunk's largest relative difference are recomputed in float64.
_REL_CANDIDATES = 1 << 12


def _described_in_float32(
    shape: torch.Size, r_flat: torch.Tensor, o_flat: torch.Tensor, atol: float, rtol: float
) -> TensorComparison | None:
    """The float64 path's verdict and report for a finite output against a finite reference, from float32
    passes: the count of elements outside their bounds, the largest absolute difference and the worst element
    (the largest excess, the first of equals) are those the float64 path finds; the largest relative
    difference is too unless thousands of elements tie for it (then float32's, within 2^-21; it decides
    nothing); the rms sums float32's differences in float64 (within 2^-23 of it). None where a value is not
    finite or too small for float32's bounds: the float64 path then judges it all. A wrong answer's description
    costs about 30 passes over its float32 size against about 68 in float64."""
    rtol_in, atol_in = rtol * _FLOAT32_MARGIN, atol * _FLOAT32_MARGIN
    rtol_out, atol_out = rtol * _FLOAT32_WIDE, atol * _FLOAT32_WIDE
    bad_count = 0
    max_abs = max_rel = square_sum = 0.0
    worst: dict[str, Any] = {"excess": -1.0}
    for start in range(0, r_flat.numel(), CHUNK_ELEMENTS):
        r, o = r_flat[start : start + CHUNK_ELEMENTS].float(), o_flat[start : start + CHUNK_ELEMENTS].float()
        diff = torch.sub(o, r).abs_()
        a = r.abs()
        largest_ref = float(a.amax())
        excess = torch.sub(diff, a, alpha=rtol_in)  # |out - ref| - rtol*|ref|, as the float32 pass computes it
        top = float(excess.amax())
        if not (top == top and abs(top) != float("inf") and largest_ref != float("inf")):
            return None  # NaN or Inf in the output or the reference: the float64 path says which
        largest, squares = _largest_and_squares(diff, r, o)
        max_abs, square_sum = max(max_abs, largest), square_sum + squares
        if top > atol_in:  # some element may be outside its bound
            maybe = excess > atol_in
            sure = torch.sub(diff, a, alpha=rtol_out) > atol_out
            n_sure, n_maybe = int(sure.sum()), int(maybe.sum())
            bad_count += n_sure
            if n_maybe > n_sure:  # near their bound: judged by the float64 formula
                bad_count += int((_excess64(r, o, (maybe & ~sure).nonzero().squeeze(1), atol, rtol) > 0).sum())
            del maybe, sure
            # Each element's float32 excess is within 2^-19 (|out - ref| + rtol*|ref|) of its exact value, so the
            # largest exact excess (and float64's, a hair from it) is among those within three such bounds.
            margin = 3.0 * 2.0**-19 * (largest * (1.0 + 2.0**-22) + rtol * largest_ref)
            candidates = (excess >= top - margin).nonzero().squeeze(1)
            values = _excess64(r, o, candidates, atol, rtol)
            j = int(values.argmax())
            if float(values[j]) > worst["excess"] and float(values[j]) > 0:
                k = int(candidates[j])
                worst = {"excess": float(values[j]), "index": start + k, "value": float(o[k]), "expected": float(r[k])}
        del excess
        rel = torch.div(diff, a.clamp_min_(1e-12), out=a)
        top_rel = float(rel.amax())
        if top_rel < _FLOAT32_SMALLEST_REL:
            return None
        # float32's quotient is within 2^-21 of float64's: the largest is among those within 2^-20 of the top,
        # recomputed in float64 unless too many tie there (an output off by a constant factor): then float32's
        near = (rel >= top_rel * (1.0 - 2.0**-20)).nonzero().squeeze(1)
        if near.numel() <= _REL_CANDIDATES:
            d64, a64 = _diff64(r, o, near)
            max_rel = max(max_rel, float((d64 / a64.clamp_min(1e-12)).max()))
        else:
            max_rel = max(max_rel, top_rel)
        del diff, a, rel
    rms = (square_sum / max(1, r_flat.numel())) ** 0.5
    if bad_count == 0:
        return TensorComparison(None, max_abs, rms)
    return _mismatch_report(shape, r_flat.numel(), bad_count, max_abs, max_rel, worst, atol, rtol, rms)


def _diff64(r: torch.Tensor, o: torch.Tensor, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """|out - ref| and |ref| in float64, as the float64 path computes them, for the elements `idx` of a chunk."""
    r64 = r[idx].double()
    return (o[idx].double() - r64).abs(), r64.abs()


def _excess64(r: torch.Tensor, o: torch.Tensor, idx: torch.Tensor, atol: float, rtol: float) -> torch.Tensor:
    """The float64 path's excess over the bound for the elements `idx` of a chunk."""
    d64, a64 = _diff64(r, o, idx)
    return d64 - (atol + rtol * a64)


def _compare_float64(
    ref: torch.Tensor, r_flat: torch.Tensor, o_flat: torch.Tensor, atol: float, rtol: float, first_only: bool = False
) -> TensorComparison:
    worst = {"excess": -1.0}
    bad_count = 0
    max_abs = max_rel = square_sum = 0.0
    judged = ""
    for start in range(0, r_flat.numel(), CHUNK_ELEMENTS):
        r = r_flat[start : start + CHUNK_ELEMENTS].double()
        o = o_flat[start : start + CHUNK_ELEMENTS].double()
        if not torch.isfinite(r).all():
            raise ReferenceNotFinite("the reference output holds NaN or Inf at this size")
        finite = torch.isfinite(o)
        if not finite.all():
            idx = start + int((~finite).nonzero()[0])
            return TensorComparison(
                {
                    "reason": f"output holds {int((~finite).sum())} NaN/Inf value(s)",
                    "index": unravel_index(idx, ref.shape),
                    "value": float(o_flat[idx]),
                    "expected": float(r_flat[idx]),
                }
            )
        diff = (o - r).abs()
        rel = diff / r.abs().clamp_min(1e-12)
        max_abs, max_rel = max(max_abs, float(diff.max())), max(max_rel, float(rel.max()))
        square_sum += float(diff.square().sum())
        excess = diff - (atol + rtol * r.abs())
        bad = excess > 0
        n_bad = int(bad.sum())
        if n_bad:
            bad_count += n_bad
            j = int(excess.argmax())
            if float(excess[j]) > worst["excess"]:
                worst = {"excess": float(excess[j]), "index": start + j, "value": float(o[j]), "expected": float(r[j])}
            if first_only:
                judged = f" (of elements up to {start + r.numel()}: judging stopped there)"
                break
    rms = (square_sum / max(1, r_flat.numel())) ** 0.5
    if bad_count == 0:
        return TensorComparison(None, max_abs, rms)
    return _mismatch_report(ref.shape, ref.numel(), bad_count, max_abs, max_rel, worst, atol, rtol, rms, judged)


def _mismatch_report(
    shape: torch.Size,
    total: int,
    bad_count: int,
    max_abs: float,
    max_rel: float,
    worst: dict[str, Any],
    atol: float,
    rtol: float,
    rms: float,
    judged: str = "",
) -> TensorComparison:
    return TensorComparison(
        {
            "reason": f"{bad_count} of {total} element(s) differ beyond atol={atol:g}, rtol={rtol:g}{judged}",
            "max_abs_diff": max_abs,
            "max_rel_diff": max_rel,
            "worst_index": unravel_index(worst["index"], shape),
            "value": worst["value"],
            "expected": worst["expected"],
            "mismatched": bad_count,
            "total": total,
        },
        max_abs,
        rms,
    )


def unravel_index(flat: int, shape: torch.Size) -> list[int]:
    index = []
    for dim in reversed(shape):
        index.append(flat % dim)
        flat //= dim
    return index[::-1]


def output_rms(x: Any) -> float:
    """Root mean square of a floating tensor, its squares summed in float64 as they are read (no float64 copy of
    the tensor; chunked, so a backend that casts before it reduces copies one chunk at most); 0 for anything
    else."""
    if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.numel() == 0:
        return 0.0
    flat = x.detach().reshape(-1)
    total = sum(
        float(torch.linalg.vector_norm(flat[s : s + CHUNK_ELEMENTS], dtype=torch.float64)) ** 2
        for s in range(0, flat.numel(), CHUNK_ELEMENTS)
    )
    return (total / flat.numel()) ** 0.5


def format_mismatch(m: dict[str, Any]) -> str:
    text = m["reason"]
    if "max_abs_diff" in m:
        text += f"; max abs diff {m['max_abs_diff']:.4g}, max rel diff {m['max_rel_diff']:.4g}"
    if "candidate_vs_truth_rms" in m:
        text += (
            f"; against the float64 truth: candidate max {m['candidate_vs_truth_max']:.4g} "
            f"(rms {m['candidate_vs_truth_rms']:.3g}), reference max {m['reference_vs_truth_max']:.4g} "
            f"(rms {m['reference_vs_truth_rms']:.3g})"
        )
    if "worst_index" in m:
        truth = "truth" if "candidate_vs_truth_rms" in m else "expected"
        text += f"; worst at index {m['worst_index']}: got {m['value']:.6g}, {truth} {m['expected']:.6g}"
    elif "index" in m:
        text += f"; first at index {m['index']}: got {m['value']}, expected {m['expected']:.6g}"
    if "output_index" in m:
        text = f"output {m['output_index']}: {text}"
    return text
