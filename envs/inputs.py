"""Input families and the sensitivity probe's perturbation: inputs that iid Gaussian draws never show.

iid `randn` inputs are the easiest case for shortcuts: a reduction that reads only part of its input lands
within tolerance by the law of large numbers. Each family (outliers, block_scale, alternating, ramp,
large_magnitude) derives a new input set from a fresh `get_inputs()` draw with the same shapes; integer
tensors and floating tensors of whole numbers (labels, masks) are left as they are. A family that makes the
reference output NaN or Inf is skipped.

The probe (`perturbed`) moves `PROBE_ELEMENTS` random elements of every floating input away from zero until the
reference's output moves by `PROBE_RESPONSE` times its tolerance; the candidate must follow it there.
What each family does: docs/evaluation.md."""

from __future__ import annotations

import contextlib
import math
from typing import Any, Callable, Iterator

import torch

from envs.compare import CHUNK_ELEMENTS, as_output_list, output_rms, tolerance_for, unravel_index
from envs.settings import INPUT_FAMILIES

PROBE_ELEMENTS = 8  # perturbed elements per floating input tensor
PROBE_SIZES = (16.0, 256.0, 4096.0, 65536.0)  # moves, in multiples of the tensor's magnitude, tried in turn
PROBE_RESPONSE = 100.0  # the reference's output must move by this many times its tolerance somewhere

_OUTLIER_DENSITY = 1e-3
_OUTLIER_TIMES = 100.0
_SCALE_LOG2_RANGE = 4.0  # block_scale factors in [2^-4, 2^4]
_BLOCK = 256
_INTEGRAL_SAMPLE = 4096


def trial_plan(trials: int, families: list[str] | tuple[str, ...]) -> list[str | None]:
    """The family of each correctness trial (None: the problem's own get_inputs()). The first trial is
    always plain (its outputs set the magnitude that families' atol is scaled against); each family gets
    one trial after it; the rest are plain."""
    plan: list[str | None] = [None, *families]
    return plan + [None] * (trials - len(plan))


def is_varied(x: Any) -> bool:
    """Whether families and the probe may change this input: a floating tensor that holds more than
    whole numbers (judged on an evenly spaced sample, so the check is cheap at any size)."""
    if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.numel() == 0:
        return False
    flat = x.detach().reshape(-1)
    sample = flat[:: max(1, flat.numel() // _INTEGRAL_SAMPLE)]
    return not bool(torch.all(sample == sample.round()))


def generator(seed: int, device: torch.device) -> torch.Generator:
    g = torch.Generator(device=device)
    g.manual_seed(seed % (1 << 63))
    return g


def _scale_of(x: torch.Tensor) -> tuple[float, float, float]:
    """(mean, standard deviation, magnitude) of a tensor; the magnitude sqrt(mean^2 + std^2) sizes outliers
    and probe moves, so that they matter also for values near a large constant."""
    if x.numel() > 1:
        std, mean = (float(v) for v in torch.std_mean(x.detach().float()))
    else:
        std, mean = 0.0, float(x.detach().float().reshape(-1)[0])
    if not math.isfinite(std) or not math.isfinite(mean):
        std, mean = 1.0, 0.0
    magnitude = math.hypot(mean, std)
    return mean, std, magnitude if magnitude > 0 else 1.0


def _rows(x: torch.Tensor) -> torch.Tensor:
    """A (rows, row length) view of a contiguous tensor: rows are the last dimension (0-d and 1-D: one row)."""
    return x.view(-1, x.shape[-1]) if x.dim() >= 2 else x.view(1, -1)


def _outliers(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    _, _, magnitude = _scale_of(x)
    flat = x.view(-1)
    k = max(4, int(flat.numel() * _OUTLIER_DENSITY))
    idx = torch.randint(0, flat.numel(), (k,), generator=g, device=x.device)
    picked = flat[idx]
    flat[idx] = picked + torch.where(picked < 0, -1.0, 1.0).to(x.dtype) * (_OUTLIER_TIMES * magnitude)
    return x


def _block_scale(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """Blocks of _BLOCK consecutive elements of every row (the last dimension), each with its own factor."""
    rows = _rows(x)
    n_rows, length = rows.shape
    n_blocks = -(-length // _BLOCK)
    log2 = (torch.rand(n_rows, n_blocks, generator=g, device=x.device) * 2 - 1) * _SCALE_LOG2_RANGE
    factors = torch.exp2(log2).to(x.dtype)
    if length % _BLOCK == 0:
        rows.view(n_rows, n_blocks, _BLOCK).mul_(factors.unsqueeze(-1))
    else:
        rows.mul_(factors.repeat_interleave(_BLOCK, dim=1)[:, :length])
    return x


def _alternating(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    rows = _rows(x)
    signs = 1.0 - 2.0 * (torch.arange(rows.shape[1], device=x.device) % 2)
    rows.abs_().mul_(signs.to(x.dtype))
    return x


def _ramp(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    mean, std, _ = _scale_of(x)
    rows = _rows(x)
    n_rows, length = rows.shape
    line = torch.linspace(-math.sqrt(3.0), math.sqrt(3.0), length, device=x.device, dtype=torch.float64)
    slope = torch.rand(n_rows, 1, generator=g, device=x.device, dtype=torch.float64) + 0.5
    slope *= torch.where(torch.rand(n_rows, 1, generator=g, device=x.device) < 0.5, -1.0, 1.0).double()
    offset = torch.randn(n_rows, 1, generator=g, device=x.device, dtype=torch.float64) * 0.5
    rows.copy_(mean + std * (slope * line + offset))
    return x


def _large_magnitude(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    max_exponent = math.frexp(torch.finfo(x.dtype).max)[1]  # 128 for float32 and bfloat16, 16 for float16
    return x.mul_(2.0 ** (max_exponent // 8))


_FAMILIES: dict[str, Callable[[torch.Tensor, torch.Generator], torch.Tensor]] = {
    "outliers": _outliers,
    "block_scale": _block_scale,
    "alternating": _alternating,
    "ramp": _ramp,
    "large_magnitude": _large_magnitude,
}
assert tuple(_FAMILIES) == INPUT_FAMILIES, "envs.settings.INPUT_FAMILIES names the families implemented here"


def _like(x: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """`values` laid out with the strides of `x` (a candidate may rely on its inputs' layout)."""
    if x.is_contiguous():
        return values
    y = torch.empty_like(x)
    y.copy_(values)
    return y


def derive(inputs: list[Any], family: str, g: torch.Generator) -> list[Any]:
    """A new input set of `family` from `inputs` (left untouched): same shapes, dtypes, devices and layouts."""
    transform = _FAMILIES[family]
    return [_like(x, transform(x.detach().contiguous().clone(), g)) if is_varied(x) else x for x in inputs]


@contextlib.contextmanager
def perturbed(inputs: list[Any], times: float, g: torch.Generator) -> Iterator[tuple[list[Any], list[str]]]:
    """`inputs` with PROBE_ELEMENTS random elements of every varied tensor moved `times` times that tensor's
    magnitude away from zero (values that would leave the dtype's range are clamped to it), and where (for
    messages); the moved elements are put back on leaving. The tensors are changed in place, not copied: the
    probe then holds no second input set on the GPU. A tensor whose storage an earlier input shares is perturbed
    in a copy instead, so each argument moves as if it were perturbed alone."""
    # Every input's magnitude and copy are taken before any of them moves, as if each were perturbed alone.
    plan, seen = [], set()
    for x in inputs:
        if not is_varied(x):
            plan.append(None)
            continue
        storage = x.untyped_storage().data_ptr()
        target = x.detach() if storage not in seen else x.detach().contiguous().clone()
        seen.add(storage)
        plan.append((_scale_of(x)[2], target))
    args, where, undo = [], [], []
    try:
        for i, (x, planned) in enumerate(zip(inputs, plan)):
            if planned is None:
                args.append(x)
                continue
            magnitude, target = planned
            idx = torch.randint(0, x.numel(), (min(PROBE_ELEMENTS, x.numel()),), generator=g, device=x.device)
            if target.is_contiguous():
                view, at = target.view(-1), (idx,)
            else:  # moved through its own strides, at the same elements as its contiguous copy would be
                view, at = target, torch.unravel_index(idx, x.shape)
            old = view[at]
            picked = old.double()
            limit = torch.finfo(x.dtype).max / 4
            moved = (picked + torch.where(picked < 0, -1.0, 1.0).double() * (times * magnitude)).clamp(-limit, limit)
            view[at] = moved.to(x.dtype)
            undo.append((view, at, old))
            args.append(x if target.data_ptr() == x.data_ptr() else _like(x, target))
            where.append(f"input {i} at {unravel_index(int(idx[0]), x.shape)}")
        yield args, where
    finally:
        for view, at, old in reversed(undo):
            view[at] = old


def atol_scales(outputs: Any, base_rms: list[float]) -> list[float]:
    """How far above the first (plain) trial's magnitude each output is: atol is a rounding allowance at
    the problem's own scale, so it grows with outputs that a family or the probe scaled up (never shrinks).
    An rms beyond float64's range (float64 outputs near 1e154) gives 1: an infinite atol would admit anything."""
    scales = [output_rms(t) / b if b > 0 else 1.0 for t, b in zip(as_output_list(outputs), base_rms)]
    return [max(1.0, s) if math.isfinite(s) else 1.0 for s in scales]


def response_ratio(before: Any, after: Any, tolerance: dict[str, float] | None, scales: list[float]) -> float:
    """The largest change of the reference's floating outputs, in units of each element's tolerance. Only the
    elements that changed at all are weighed in float64: the probe moves a few input elements, so most outputs
    keep their value (and would add a ratio of 0), and the float64 work shrinks to what moved."""
    ratio = 0.0
    for b, a, s in zip(as_output_list(before), as_output_list(after), scales):
        if not isinstance(b, torch.Tensor) or not b.is_floating_point() or b.shape != a.shape:
            continue
        atol, rtol = tolerance_for(b.dtype, tolerance)
        fb, fa = b.detach().reshape(-1), a.detach().reshape(-1)
        for start in range(0, fb.numel(), CHUNK_ELEMENTS):
            xb, ya = fb[start : start + CHUNK_ELEMENTS], fa[start : start + CHUNK_ELEMENTS]
            moved = torch.ne(xb, ya).nonzero().squeeze(1)  # NaN != NaN, so a NaN is weighed as before
            if not moved.numel():
                continue
            x, y = xb[moved].double(), ya[moved].double()
            allowed = atol * s + rtol * torch.maximum(x.abs(), y.abs())
            ratio = max(ratio, float(((y - x).abs() / allowed.clamp_min(1e-300)).max()))
    return ratio


def is_finite(outputs: Any) -> bool:
    return all(
        bool(torch.isfinite(t).all())
        for t in as_output_list(outputs)
        if isinstance(t, torch.Tensor) and t.is_floating_point()
    )
