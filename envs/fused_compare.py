"""The comparison's float32 pass (envs/compare.py `_clearly_inside`) as one Triton kernel, for CUDA tensors.

The pass made of torch operations reads and writes about 14 times an output's float32 size (the difference, its
absolute value, the bound's excess, the maxima, the squares); in a correctness trial that is more memory traffic
than the reference's and the candidate's runs together. One kernel reads the reference and the output once and
writes a few numbers per program: whether every element is inside its (shrunk) bound, the largest |out - ref|
in float64 (what the float64 path computes), and the sum of float32 differences' squares in float64.

The kernel runs in the worker, after candidate code has run in the same process, so its binary must be the one
this process compiled from this file before any problem or candidate code (`prepare`, called by the harness on
CUDA): compiled with Triton's `always_compile` on (never a binary from the cache directory a sandbox's workers
share) and loaded into the GPU's context there, kept in `_BINARY`, which the identity checks watch
(envs/antihack/runtime.py). A launch settles an output only where it reports that binary, and the attributes a
launch goes through (the JIT function's and the binary's own, where an instance attribute would shadow a method,
and Triton's launch hooks) are those `prepare` saw: a binary swapped into Triton's in-memory cache since, or a
launcher of one's own, makes the pass answer "not settled", and the float64 path judges the output. Results
start as NaN, so a launch that ran nothing settles nothing either. Only float32 outputs under 2^31 elements take
it (one variant, one compile at each worker's start); the others keep the torch pass.
"""

from __future__ import annotations

import contextlib
import math
from typing import Iterator

import torch
import triton
import triton.language as tl

BLOCK = 1024  # elements a program reads per step
MAX_PROGRAMS = 1024  # programs (each strides over the tensor): one partial result each
_BINARY: object | None = None  # the float32 variant `prepare` compiled; None: not prepared, the torch pass
_FINGERPRINT: tuple | None = None  # what a launch goes through, as `prepare` left it (`_fingerprint`)


@triton.jit(do_not_specialize=["n"], do_not_specialize_on_alignment=["ref", "out"])
def _inside_partials(ref, out, n, rtol_in, atol_in, partials, BLOCK: tl.constexpr):
    """Per program: [elements not inside their bound (NaN and Inf included), largest |out - ref| in float64,
    sum of the float32 differences' squares in float64], over the elements it strides over."""
    pid = tl.program_id(0)
    step = tl.num_programs(0) * BLOCK
    lanes = tl.arange(0, BLOCK)
    outside = tl.zeros([BLOCK], dtype=tl.int32)
    largest = tl.zeros([BLOCK], dtype=tl.float64)
    squares = tl.zeros([BLOCK], dtype=tl.float64)
    for i in range(0, tl.cdiv(n, step)):  # n < 2^31 (`eligible`), so the count is an int32; offsets are int64
        offs = tl.cast(i, tl.int64) * step + pid * BLOCK + lanes
        mask = offs < n
        r = tl.load(ref + offs, mask=mask, other=0.0).to(tl.float32)
        o = tl.load(out + offs, mask=mask, other=0.0).to(tl.float32)
        diff = tl.abs(o - r)
        # as the torch pass: |out - ref| - rtol*|ref| <= atol; NaN or Inf anywhere makes the test false
        excess = diff - rtol_in * tl.abs(r)
        outside += tl.where(mask & ~(excess <= atol_in), 1, 0)
        largest = tl.maximum(largest, tl.abs(o.to(tl.float64) - r.to(tl.float64)))
        wide = diff.to(tl.float64)
        squares += wide * wide
    tl.store(partials + pid * 3, tl.sum(outside, axis=0).to(tl.float64))
    tl.store(partials + pid * 3 + 1, tl.max(largest, axis=0))
    tl.store(partials + pid * 3 + 2, tl.sum(squares, axis=0))


def prepare() -> None:
    """Compile the float32 variant and load it into the GPU's context (without launching it) before any problem
    or candidate code runs in this process; CUDA must be initialised."""
    global _BINARY, _FINGERPRINT
    with _compiling_from_source():
        binary = _inside_partials.warmup(
            torch.float32, torch.float32, 1, 1.0, 1.0, torch.float64, grid=(1,), BLOCK=BLOCK
        )
    binary.run  # noqa: B018  (loads it now: its bytes never sit unloaded while candidate code runs)
    _BINARY = binary
    _FINGERPRINT = _fingerprint()


@contextlib.contextmanager
def _compiling_from_source() -> Iterator[None]:
    """Triton's `always_compile` on: a binary compiled meanwhile comes from this file, never from the cache
    directory a sandbox's workers share."""
    with triton.knobs.compilation.scope():
        triton.knobs.compilation.always_compile = True
        yield


# The instance attributes a launch reads: on the JIT function (one of its own would shadow the class's method),
# and on the binary (its launcher, loaded module and bytes, set by `prepare`)
_JIT_ATTRIBUTES = ("run", "__getitem__", "warmup", "device_caches")
_BINARY_ATTRIBUTES = ("_run", "run", "launch_metadata", "function", "module", "kernel", "packed_metadata")


def _fingerprint() -> tuple:
    """The identities of what a launch of `_BINARY` goes through besides the classes' methods: the instance
    attributes it reads and Triton's launch hooks. The identity checks watch it too, so a change made by candidate
    code is a comparison patch there, besides settling nothing here."""
    jit, binary = getattr(_inside_partials, "__dict__", {}), getattr(_BINARY, "__dict__", {})
    hooks = (triton.knobs.runtime.launch_enter_hook, triton.knobs.runtime.launch_exit_hook)
    return (
        tuple(id(jit.get(name)) for name in _JIT_ATTRIBUTES),
        tuple(id(binary.get(name)) for name in _BINARY_ATTRIBUTES),
        # a hook, or a chain of them (its calls)
        tuple((id(hook), tuple(map(id, getattr(hook, "calls", ())))) for hook in hooks),
    )


def eligible(r_flat: torch.Tensor, o_flat: torch.Tensor) -> bool:
    """Whether the prepared kernel takes these flat tensors: float32 on a GPU, dense, under 2^31 elements."""
    return (
        _BINARY is not None
        and r_flat.is_cuda
        and o_flat.device == r_flat.device
        and r_flat.is_contiguous()
        and o_flat.is_contiguous()
        and r_flat.dtype == o_flat.dtype == torch.float32
        and r_flat.numel() < 1 << 31
    )


def clearly_inside_fused(
    r_flat: torch.Tensor, o_flat: torch.Tensor, atol_in: float, rtol_in: float
) -> tuple[float, float] | None:
    """(max |out - ref|, sum of squares) when every element satisfies |out - ref| - rtol_in*|ref| <= atol_in in
    float32 and nothing is NaN or Inf; None otherwise. The bounds come already shrunk by the caller's margin,
    which also covers their rounding to float32 here (envs/compare.py). The maximum is float64's |out - ref|, as
    the float64 path computes it (float32's largest among the tied, recomputed, gives the same: rounding keeps
    order); the squares are summed in another order than torch's, so the sum may differ in its last bits."""
    n = r_flat.numel()
    if n == 0:
        return 0.0, 0.0
    programs = min(MAX_PROGRAMS, triton.cdiv(n, BLOCK))
    partials = torch.full((programs, 3), math.nan, dtype=torch.float64, device=r_flat.device)
    with _compiling_from_source():  # a variant compiled now comes from this file too
        binary = _inside_partials[(programs,)](r_flat, o_flat, n, rtol_in, atol_in, partials, BLOCK=BLOCK)
    rows = partials.tolist()
    if binary is not _BINARY or (_BINARY is not None and _fingerprint() != _FINGERPRINT):
        return None  # not what `prepare` compiled and loaded: the float64 path judges
    if not all(row[0] == 0.0 for row in rows):  # an element outside, or a program that wrote nothing
        return None
    return max(row[1] for row in rows), math.fsum(row[2] for row in rows)
