"""What PyTorch ops cost: FLOPs and bytes of ATen ops, and the share of the reference's cost a candidate spends
in PyTorch outside its own kernels.

Every op the worker's recorder sees is priced at the evaluated sizes (FLOPs by PyTorch's formulas for matmuls,
convolutions and attention, one per element otherwise; bytes of every operand and result), and so is the
reference. The candidate's PyTorch share is the smaller of its FLOP share and its byte share: PyTorch doing the
main computation is heavy in both, honest glue (an epilogue, a final reduction of partial sums) is light in at
least one. Layout ops are left out unless the reference only moves data. Worked examples: docs/antihack.md."""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable

import torch

# ATen ops that allocate, move or re-view memory: everything else is computation.
LAYOUT_OPS = {
    "empty",
    "empty_like",
    "empty_strided",
    "new_empty",
    "new_empty_strided",
    "zeros",
    "zeros_like",
    "ones",
    "ones_like",
    "full",
    "full_like",
    "new_zeros",
    "new_ones",
    "new_full",
    "fill_",
    "zero_",
    "arange",
    "scalar_tensor",
    "lift_fresh",
    "lift_fresh_copy",
    "view",
    "_unsafe_view",
    "reshape",
    "_reshape_alias",
    "view_as",
    "permute",
    "transpose",
    "transpose_",
    "t",
    "expand",
    "expand_as",
    "contiguous",
    "clone",
    "copy_",
    "_to_copy",
    "to",
    "slice",
    "select",
    "unsqueeze",
    "unsqueeze_",
    "squeeze",
    "squeeze_",
    "as_strided",
    "detach",
    "detach_",
    "alias",
    "split",
    "split_with_sizes",
    "chunk",
    "unbind",
    "narrow",
    "unfold",
    "diagonal",
    "movedim",
    "flatten",
    "unflatten",
    "_local_scalar_dense",
    "item",
    "cat",
    "stack",
    "resize_",
    "set_",
    "sym_size",
    "sym_stride",
    "sym_numel",
    "sym_storage_offset",
    "is_same_size",
    "_has_compatible_shallow_copy_type",
    "record_stream",
    "_copy_from",
    "_copy_from_and_resize",
    "_pin_memory",
    "is_pinned",
}


@dataclasses.dataclass(frozen=True)
class OpCost:
    name: str  # the ATen op, e.g. "addmm"
    flops: float
    bytes: float
    layout: bool  # allocation, view, copy or cast: no arithmetic


@dataclasses.dataclass(frozen=True)
class TorchShare:
    """The candidate's PyTorch compute against the reference's, on the same inputs."""

    share: float  # min(flop_share, byte_share): what max_torch_share is compared with
    flop_share: float
    byte_share: float
    top_ops: tuple[str, ...]  # the candidate's most expensive ops, for the reason


def _tensors(values: Iterable[Any]) -> list[torch.Tensor]:
    out: list[torch.Tensor] = []
    stack = list(values)
    while stack:
        v = stack.pop()
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v.values())
    return out


def op_cost(func: Any, args: tuple, kwargs: dict, out: Any) -> OpCost:
    """The FLOPs and bytes of one ATen call (`func` an OpOverload) that returned `out`."""
    from torch.utils.flop_counter import flop_registry

    packet = func.overloadpacket
    name = packet.__name__
    operands, results = _tensors([args, kwargs]), _tensors([out])
    moved = float(sum(t.numel() * t.element_size() for t in operands + results))
    flops = None
    if packet in flop_registry:
        try:
            flops = float(flop_registry[packet](*args, **kwargs, out_val=out))
        except Exception:  # a formula that does not fit this overload: fall back to the element count
            flops = None
    if flops is None:
        flops = float(max((t.numel() for t in operands + results), default=0))
    return OpCost(name, flops, moved, name in LAYOUT_OPS)


def totals(ops: Iterable[OpCost], include_layout: bool = False) -> tuple[float, float]:
    flops = moved = 0.0
    for op in ops:
        if include_layout or not op.layout:
            flops += op.flops
            moved += op.bytes
    return flops, moved


def torch_share(candidate: list[OpCost], reference: list[OpCost]) -> TorchShare | None:
    """The candidate's PyTorch cost as a share of the reference's; None when the reference costs nothing."""
    ref_flops, ref_bytes = totals(reference)
    include_layout = ref_flops == 0 and ref_bytes == 0  # a data-movement problem: moving data is the work
    if include_layout:
        ref_flops, ref_bytes = totals(reference, include_layout=True)
    if ref_flops <= 0 or ref_bytes <= 0:
        return None
    flops, moved = totals(candidate, include_layout)
    by_op: dict[str, float] = {}
    for op in candidate:
        if include_layout or not op.layout:
            by_op[op.name] = by_op.get(op.name, 0.0) + min(op.flops / ref_flops, op.bytes / ref_bytes)
    top = tuple(sorted(by_op, key=by_op.get, reverse=True)[:5])
    flop_share, byte_share = flops / ref_flops, moved / ref_bytes
    return TorchShare(min(flop_share, byte_share), flop_share, byte_share, top)
