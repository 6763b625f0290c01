"""Output comparison: shapes and dtypes must match, values agree in float64 within dtype-aware tolerances.

Runs inside the worker. Large outputs are compared in chunks so float64 copies never exceed a few
hundred MB however big the output is.
"""

from __future__ import annotations

from typing import Any

import torch

# |out - ref| <= atol + rtol * |ref|, chosen by the reference output's dtype. A problem may override
# them with TOLERANCE (docs/problem-format.md); everything else is exact.
DEFAULT_TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float32: (1e-4, 1e-4),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (2e-2, 2e-2),
    torch.float64: (1e-7, 1e-7),
}
_CHUNK = 1 << 25  # elements per float64 chunk (256 MB)


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


def compare_outputs(ref: Any, out: Any, tolerance: dict[str, float] | None = None) -> dict[str, Any] | None:
    """None when `out` matches `ref`; otherwise a dict describing the first mismatch."""
    refs, outs = as_output_list(ref), as_output_list(out)
    if len(refs) != len(outs):
        return {"reason": f"expected {len(refs)} output(s), got {len(outs)}"}
    for i, (r, o) in enumerate(zip(refs, outs)):
        mismatch = _compare_one(r, o, tolerance)
        if mismatch is not None:
            if len(refs) > 1:
                mismatch = {"output_index": i, **mismatch}
            return mismatch
    return None


def _compare_one(ref: Any, out: Any, tolerance: dict[str, float] | None) -> dict[str, Any] | None:
    if not isinstance(ref, torch.Tensor):
        return None if type(ref) is type(out) and ref == out else {
            "reason": f"expected {ref!r}, got {_describe(out)}"}
    if not isinstance(out, torch.Tensor):
        return {"reason": f"expected {_describe(ref)}, got {_describe(out)}"}
    if out.shape != ref.shape:
        return {"reason": f"shape mismatch: expected {tuple(ref.shape)}, got {tuple(out.shape)}"}
    if out.dtype != ref.dtype:
        return {"reason": f"dtype mismatch: expected {ref.dtype}, got {out.dtype}"}
    if out.device != ref.device:
        return {"reason": f"device mismatch: expected {ref.device}, got {out.device}"}
    atol, rtol = tolerance_for(ref.dtype, tolerance)
    r_flat, o_flat = ref.detach().reshape(-1), out.detach().reshape(-1)
    worst = {"excess": -1.0}
    bad_count = 0
    max_abs = max_rel = 0.0
    for start in range(0, r_flat.numel(), _CHUNK):
        r = r_flat[start:start + _CHUNK].double()
        o = o_flat[start:start + _CHUNK].double()
        if not torch.isfinite(r).all():
            raise ReferenceNotFinite("the reference output holds NaN or Inf at this size")
        finite = torch.isfinite(o)
        if not finite.all():
            idx = start + int((~finite).nonzero()[0])
            return {"reason": f"output holds {int((~finite).sum())} NaN/Inf value(s)",
                    "index": _unravel(idx, ref.shape), "value": float(o_flat[idx]),
                    "expected": float(r_flat[idx])}
        diff = (o - r).abs()
        rel = diff / r.abs().clamp_min(1e-12)
        max_abs, max_rel = max(max_abs, float(diff.max())), max(max_rel, float(rel.max()))
        excess = diff - (atol + rtol * r.abs())
        bad = excess > 0
        n_bad = int(bad.sum())
        if n_bad:
            bad_count += n_bad
            j = int(excess.argmax())
            if float(excess[j]) > worst["excess"]:
                worst = {"excess": float(excess[j]), "index": start + j,
                         "value": float(o[j]), "expected": float(r[j])}
    if bad_count == 0:
        return None
    return {
        "reason": f"{bad_count} of {ref.numel()} element(s) differ beyond atol={atol:g}, rtol={rtol:g}",
        "max_abs_diff": max_abs, "max_rel_diff": max_rel,
        "worst_index": _unravel(worst["index"], ref.shape),
        "value": worst["value"], "expected": worst["expected"],
        "mismatched": bad_count, "total": ref.numel(),
    }


def _unravel(flat: int, shape: torch.Size) -> list[int]:
    index = []
    for dim in reversed(shape):
        index.append(flat % dim)
        flat //= dim
    return index[::-1]


def format_mismatch(m: dict[str, Any]) -> str:
    text = m["reason"]
    if "max_abs_diff" in m:
        text += (f"; max abs diff {m['max_abs_diff']:.4g}, max rel diff {m['max_rel_diff']:.4g}; "
                 f"worst at index {m['worst_index']}: got {m['value']:.6g}, expected {m['expected']:.6g}")
    elif "index" in m:
        text += f"; first at index {m['index']}: got {m['value']}, expected {m['expected']:.6g}"
    if "output_index" in m:
        text = f"output {m['output_index']}: {text}"
    return text
