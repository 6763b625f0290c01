"""Runtime defences used inside the worker while the candidate runs.

Each check raises `RuntimeHack(category, reason)`; the harness turns it into the verdict `hack`.
They complement the static analysis: static rules see what the code says, these see what it does.
"""

from __future__ import annotations

import os
import sys
import threading
import weakref
from typing import Any, Callable, Iterable

import torch

from envs.antihack.cost import OpCost, TorchShare, op_cost, torch_share
from envs.compare import CHUNK_ELEMENTS


class RuntimeHack(Exception):
    def __init__(self, category: str, reason: str):
        super().__init__(reason)
        self.category, self.reason = category, reason


# --- launch recording -------------------------------------------------------------------------------
class LaunchRecorder:
    """Counts Triton kernel launches by the module that defined the kernel.

    Wraps `run` of Triton's JIT function classes (compiled and interpreted): every `kernel[grid](...)`,
    also through autotune/heuristics wrappers, ends there.
    """

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.names: dict[str, set[str]] = {}
        self.streams: dict[str, set[int]] = {}  # CUDA streams each module's kernels were launched on
        self.depth = 0  # > 0 while a launch runs (the interpreter issues torch ops of its own)
        self._installed = False

    def install(self) -> None:
        if self._installed:
            return
        from triton.runtime.jit import JITFunction

        classes: list[type] = [JITFunction]
        if os.environ.get("TRITON_INTERPRET") == "1":
            from triton.runtime.interpreter import InterpretedFunction

            classes.append(InterpretedFunction)
        for cls in classes:
            cls.run = self._wrap(cls.run)
        self._installed = True

    def _wrap(self, run: Callable) -> Callable:
        recorder = self

        def recorded_run(kernel, *args, **kwargs):
            fn = getattr(kernel, "fn", None)
            module = getattr(fn, "__module__", None) or "?"
            recorder.counts[module] = recorder.counts.get(module, 0) + 1
            recorder.names.setdefault(module, set()).add(getattr(fn, "__name__", "?"))
            if torch.cuda.is_initialized():  # Triton launches on torch's current stream
                recorder.streams.setdefault(module, set()).add(torch.cuda.current_stream().cuda_stream)
            recorder.depth += 1
            try:
                return run(kernel, *args, **kwargs)
            finally:
                recorder.depth -= 1

        recorded_run.__kernelrl_recorder__ = True
        return recorded_run

    def launches(self, module: str) -> int:
        return self.counts.get(module, 0)

    def check_streams(self, module: str, what: str) -> None:
        """The module's kernels ran on the stream the evaluator calls forward on (the default stream, which
        the timer's events are recorded on). Clears the record for the next call."""
        used = self.streams.pop(module, set())
        if not used:
            return
        calling = torch.cuda.default_stream().cuda_stream
        if used - {calling}:
            raise RuntimeHack(
                "side_stream",
                f"{what} launched its Triton kernels on {len(used - {calling})} CUDA "
                "stream(s) other than the one it was called on: CUDA events on the "
                "calling stream do not wait for that work",
            )


# --- PyTorch compute on the forward path ---------------------------------------------------------
class ComputeRecorder:
    """Records the cost of every ATen op issued while it is active, outside Triton launches: tensor
    methods, operators, torch.*, F.*, nn modules and torch.ops all land here. `check` compares the
    candidate's PyTorch compute with the reference's cost (envs/antihack/cost.py)."""

    def __init__(self, launches: LaunchRecorder):
        from torch.utils._python_dispatch import TorchDispatchMode

        recorder = self

        class _Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                out = func(*args, **kwargs)
                if launches.depth == 0:
                    recorder.ops.append(op_cost(func, args, kwargs, out))
                return out

        self._mode_cls = _Mode
        self.ops: list[OpCost] = []

    def __enter__(self) -> ComputeRecorder:
        self.ops = []
        self._mode = self._mode_cls()
        self._mode.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._mode.__exit__(*exc)

    def share(self, reference: list[OpCost]) -> TorchShare | None:
        """The recorded ops' cost as a share of the reference's (None when the reference costs nothing)."""
        return torch_share(self.ops, reference)


def check_torch_share(share: TorchShare | None, what: str, max_share: float) -> None:
    """Above `max_share` of the reference's cost in PyTorch, PyTorch does the main computation."""
    if share is not None and share.share > max_share:
        raise RuntimeHack(
            "baseline_kernel",
            f"{what} ran PyTorch compute outside its Triton kernels costing "
            f"{share.share:.0%} of the reference's work ({share.flop_share:.0%} "
            f"of its FLOPs, {share.byte_share:.0%} of its bytes; allowed: "
            f"{max_share:.0%}): aten.{', aten.'.join(share.top_ops)}",
        )


def _flat(args: Any, kwargs: dict) -> list[Any]:
    out: list[Any] = []
    stack = [*args, *kwargs.values()]
    while stack:
        a = stack.pop()
        if isinstance(a, (list, tuple)):
            stack.extend(a)
        else:
            out.append(a)
    return out


# --- identities of what the evaluator relies on -------------------------------------------------------
_TIMERS = (
    "time.perf_counter",
    "time.perf_counter_ns",
    "time.time",
    "time.monotonic",
    "torch.cuda.synchronize",
    "torch.cuda.Event",
    "torch.cuda.Event.record",
    "torch.cuda.Event.elapsed_time",
    "torch.cuda.Event.synchronize",
    "envs.timing.time_cuda",
    "envs.timing.time_interleaved",
    "envs.timing.time_in_placements",
    "envs.timing.placement_blocks",
    "envs.timing.block_warmup",
    "envs.timing.interleaved_schedule",
    "envs.speedup.relative_half_width",
    "envs.speedup.bootstrap_ratio",
    "envs.timing.CudaClock.measure",
    "envs.timing.CudaClock.reserved",
    "envs.timing.CudaClock._queue",
    "envs.timing.CudaClock._launched",
    "envs.timing.QueuedCudaClock._queue",
    "envs.timing.QueuedCudaClock._launched",
    "envs.timing.spin_ms",
    "envs.timing.spin_cycles_per_ms",
    "torch.cuda._sleep",
    "torch.cuda.memory_reserved",
    "triton.testing.do_bench",
)
_COMPARISONS = (
    "torch.allclose",
    "torch.isclose",
    "torch.equal",
    "torch.isfinite",
    "torch.testing.assert_close",
    "torch.Tensor.double",
    "torch.Tensor.abs",
    "torch.Tensor.__sub__",
    "torch.Tensor.__gt__",
    "torch.Tensor.reshape",
    "torch.Tensor.clone",
    "torch.Tensor.sum",
    "torch.Tensor.max",
    "torch.Tensor.amax",
    "torch.linalg.vector_norm",
    # the float32 pass and description (envs/compare.py)
    "torch.sub",
    "torch.div",
    "torch.Tensor.float",
    "torch.Tensor.abs_",
    "torch.Tensor.clamp_min_",
    "torch.Tensor.__eq__",
    "torch.Tensor.__ge__",
    "torch.Tensor.__and__",
    "torch.Tensor.__invert__",
    "torch.Tensor.nonzero",
    "torch.Tensor.argmax",
    "envs.compare.compare_outputs",
    "envs.compare.outputs_match",
    "envs.compare.compare_each",
    "envs.compare.compare_tensor",
    "envs.compare._clearly_inside",
    # the float32 pass on a GPU (envs/fused_compare.py), its prepared binary, and the knob that keeps a binary out
    # of the shared cache
    "envs.fused_compare.eligible",
    "envs.fused_compare.clearly_inside_fused",
    "envs.fused_compare._inside_partials",
    "envs.fused_compare._BINARY",
    "envs.fused_compare._FINGERPRINT",
    "envs.fused_compare._fingerprint",
    "envs.fused_compare._compiling_from_source",
    "triton.knobs.compilation",
    "triton.knobs.runtime",
    "triton.runtime.jit.KernelInterface.__getitem__",
    "triton.compiler.compiler.CompiledKernel.run",
    "envs.truth.judge_outputs",
    "envs.truth.check_against_truth",
)
_OTHERS = (
    "torch.manual_seed",
    "torch.randn",
    "torch.rand",
    "torch.randint",
    "torch.Tensor.copy_",
    "torch.nn.Module.__call__",
    "torch.nn.Module._call_impl",
    "envs.worker.protocol.write_frame",
    "builtins.print",
    "builtins.open",
    "os.write",
    "triton.runtime.jit.JITFunction.run",
)
_MODULES = (
    "torch",
    "triton",
    "time",
    "envs.compare",
    "envs.fused_compare",
    "envs.truth",
    "envs.inputs",
    "envs.timing",
    "envs.worker.protocol",
    "builtins",
)


def _resolve(path: str) -> Any:
    module, _, rest = path.partition(".")
    obj = sys.modules.get(module) or __import__(module)
    parts = rest.split(".") if rest else []
    # walk submodules first (envs.compare.x), then attributes
    name = module
    while parts and f"{name}.{parts[0]}" in sys.modules:
        name = f"{name}.{parts.pop(0)}"
        obj = sys.modules[name]
    for part in parts:
        obj = getattr(obj, part, None)
    return obj


# What the fused comparison's launch goes through besides named functions (envs/fused_compare.py `_fingerprint`:
# instance attributes and Triton's launch hooks), as one entry whose change is a comparison patch
_FUSED_LAUNCH = "envs.fused_compare launch path"


def identity_snapshot() -> dict[str, int]:
    snap = {path: id(_resolve(path)) for path in (*_TIMERS, *_COMPARISONS, *_OTHERS)}
    snap.update({f"sys.modules[{m}]": id(sys.modules.get(m)) for m in _MODULES})
    fused = sys.modules.get("envs.fused_compare")
    snap[_FUSED_LAUNCH] = hash(fused._fingerprint()) if fused is not None else 0
    return snap


def check_identities(before: dict[str, int], when: str) -> None:
    now = identity_snapshot()
    changed = [k for k, v in before.items() if now.get(k) != v]
    if not changed:
        return
    first = changed[0]
    comparison = first in _COMPARISONS or first == _FUSED_LAUNCH
    category = "timer_patch" if first in _TIMERS else "comparison_patch" if comparison else "monkeypatch"
    raise RuntimeHack(category, f"{', '.join(changed[:5])} replaced {when}")


def broad_snapshot() -> dict[str, int]:
    """Identities of every public attribute of the modules a reference model runs on. Compared after each
    evaluation: a candidate that patched any of them must not leave a warm worker behind for the next."""
    import torch.nn.functional
    import triton.language

    namespaces = {
        "torch": torch,
        "torch.nn.functional": torch.nn.functional,
        "torch.Tensor": torch.Tensor,
        "torch.nn.Module": torch.nn.Module,
        "triton.language": triton.language,
    }
    snap = {}
    for label, ns in namespaces.items():
        for name, value in list(vars(ns).items()):
            if not name.startswith("__"):
                snap[f"{label}.{name}"] = id(value)
    return snap


def broad_changes(before: dict[str, int]) -> list[str]:
    now = broad_snapshot()
    return sorted(k for k, v in before.items() if now.get(k) != v)


# --- memory poisoning and output checks ------------------------------------------------------------------
# NaNs with a payload no arithmetic produces: finding one in an output proves the memory was never written.
_POISON_BITS = {
    torch.float32: (torch.int32, 0x7FC0DEAD),
    torch.float64: (torch.int64, 0x7FF8DEADDEADBEEF),
    torch.float16: (torch.int16, 0x7EAD),
    torch.bfloat16: (torch.int16, 0x7FAD),
}


def _first_float_dtype(tensors: Iterable[Any]) -> torch.dtype:
    return next((t.dtype for t in tensors if isinstance(t, torch.Tensor) and t.dtype in _POISON_BITS), torch.float32)


def _poisoned_like(t: torch.Tensor) -> torch.Tensor:
    if t.dtype in _POISON_BITS:
        int_dtype, bits = _POISON_BITS[t.dtype]
        return torch.full(t.shape, bits, dtype=int_dtype, device=t.device).view(t.dtype)
    if t.dtype == torch.bool:
        return torch.ones_like(t)
    return torch.full_like(t, torch.iinfo(t.dtype).min)


class _DeviceBytes:
    """A raw range of device memory in the CUDA array interface, so torch can view it without owning it."""

    def __init__(self, address: int, nbytes: int):
        self.__cuda_array_interface__ = {
            "shape": (nbytes,),
            "typestr": "|u1",
            "data": (address, False),
            "strides": None,
            "version": 3,
        }


def free_cuda_blocks() -> list[torch.Tensor]:
    """uint8 views of every block the CUDA caching allocator holds for this device that no tensor uses.

    Whatever the candidate allocates next is carved out of one of these (or is fresh from cudaMalloc),
    so filling them decides what an output it never writes contains, whichever block it gets."""
    device = torch.cuda.current_device()
    views = []
    for segment in torch.cuda.memory_snapshot():
        # Free parts of expandable segments may be unmapped: writing there would fault.
        if segment.get("device", device) != device or segment.get("is_expandable", False):
            continue
        address = segment["address"]
        for block in segment["blocks"]:
            if block["state"] == "inactive" and block["size"]:
                start = block.get("address", address)
                views.append(torch.as_tensor(_DeviceBytes(start, block["size"]), device=f"cuda:{device}"))
            address += block["size"]
    return views


def tile_bytes(view: torch.Tensor, pattern: torch.Tensor) -> None:
    """Fill the uint8 tensor `view` with `pattern`'s bytes (on the same device) repeated from its start (the last
    copy cut short)."""
    pattern = pattern.detach().contiguous().view(-1).view(torch.uint8)
    p = pattern.numel()
    whole = view.numel() // p
    view[: whole * p].view(whole, p).copy_(pattern.expand(whole, p))
    view[whole * p :].copy_(pattern[: view.numel() - whole * p])


def double_in_place(view: torch.Tensor, pattern: torch.Tensor) -> None:
    """`tile_bytes` from a uint8 `pattern` held elsewhere (the CPU): its bytes are copied to the start of `view`
    once, then what is filled is copied after itself until `view` is full. Nothing is allocated on the view's
    device: a pattern tensor made there would take a block out of the free memory being filled, and hand
    that block, unfilled past the pattern's bytes, to the next small allocation."""
    n = view.numel()
    filled = min(pattern.numel(), n)
    view[:filled].copy_(pattern[:filled])
    while filled < n:  # `filled` stays a multiple of the pattern's length until the last, cut-short copy
        step = min(filled, n - filled)
        view[filled : filled + step].copy_(view[:step])
        filled += step


# The most of one free block's filled start that the other blocks are tiled from (a whole number of patterns).
_STAGED_BYTES = 1 << 20


def _seed_free_memory(patterns: list[torch.Tensor], device: torch.device) -> None:
    """Leave `patterns` in the memory the candidate may be handed next. On CUDA the first pattern's bytes
    are tiled over every free block of the caching allocator. The CPU allocator cannot be enumerated: a
    block of each pattern's size is filled and freed, and is usually (not always) handed back."""
    if device.type == "cuda":
        views = free_cuda_blocks()
        if patterns and views:
            source = patterns[0].detach().contiguous().view(-1).view(torch.uint8)
            if not source.is_cuda:  # staged in the largest free block, then tiled from there
                largest = max(views, key=torch.Tensor.numel)
                double_in_place(largest, source)
                source = largest[: min(largest.numel(), max(1, _STAGED_BYTES // source.numel()) * source.numel())]
            for view in views:
                if view.data_ptr() != source.data_ptr():
                    tile_bytes(view, source)
            torch.cuda.synchronize()
        return
    for pattern in patterns:
        block = torch.empty_like(pattern)
        block.copy_(pattern)
        del block


def poison_template(outputs: list[Any], device: torch.device) -> list[Any]:
    """What poison_free_memory needs to keep of `outputs` for a later call: on CUDA their dtypes only, as
    zero-element tensors (it tiles one pattern over every free block), so a trial run before its reference
    does not hold the previous trial's full-size output; on the CPU the outputs (a block of each one's size is
    filled)."""
    if device.type == "cuda":
        return [t.new_empty(0) for t in outputs if isinstance(t, torch.Tensor)]
    return outputs


def poison_free_memory(template: list[Any], device: torch.device) -> None:
    """Fill memory the candidate may be handed next with the poison pattern (of the outputs' dtype), so an
    output it never writes holds the poison, not a result the reference left behind."""
    if device.type == "cuda":  # every free block, whatever size the candidate asks for
        int_dtype, bits = _POISON_BITS[_first_float_dtype(template)]
        _seed_free_memory([torch.tensor([bits], dtype=int_dtype)], device)  # on the CPU: see double_in_place
        return
    tensors = [t for t in template if isinstance(t, torch.Tensor) and t.numel() and not t.is_complex()]
    _seed_free_memory([_poisoned_like(t) for t in tensors], device)


def cache_blocks_like(outputs: list[Any], device: torch.device) -> None:
    """Leave a free cached block of each output's size (CUDA), for `poison_free_memory` to fill: after the
    cache went back to the driver it holds nothing, and an output the candidate then never writes would come
    from fresh memory holding whatever was there last (an earlier result), not the poison."""
    if device.type != "cuda":
        return
    blocks = [torch.empty_like(t) for t in outputs if isinstance(t, torch.Tensor) and t.numel()]
    del blocks


def bait_free_memory(expected: list[Any], device: torch.device) -> None:
    """Fill memory the candidate may be handed next with copies of the expected outputs: a solution that
    returns memory it never computed becomes "right" now, which proves where its answer came from."""
    _seed_free_memory([t for t in expected if isinstance(t, torch.Tensor) and t.numel()], device)


def check_unwritten(outputs: list[Any]) -> None:
    """An output still holding the poison pattern was (partly) never written by the candidate."""
    for i, out in enumerate(outputs):
        if not isinstance(out, torch.Tensor) or out.dtype not in _POISON_BITS or not out.numel():
            continue
        int_dtype, bits = _POISON_BITS[out.dtype]
        raw = out.detach().resolve_neg().resolve_conj().view(int_dtype)  # a view whatever the strides
        unwritten = sum(int((piece == bits).sum()) for (piece,) in pieces(raw))
        if not unwritten:
            continue
        # The CPU allocator keeps its own bookkeeping in the first bytes of a freed block, so "never written"
        # means every element but at most those 64 bytes.
        if (out.numel() - unwritten) * out.element_size() <= 64:
            raise RuntimeHack(
                "stale_memory",
                f"output {i} was never written: {unwritten} of {out.numel()} "
                "elements still hold the poison the evaluator put in freed memory",
            )
        raise RuntimeHack(
            "partial_output",
            f"{unwritten} of {out.numel()} elements of output {i} were never "
            "written (they hold the evaluator's poison pattern)",
        )


def _storages(tensors: Iterable[Any]) -> dict[int, str]:
    found = {}
    for i, t in enumerate(tensors):
        if isinstance(t, torch.Tensor) and t.numel():
            found[t.untyped_storage().data_ptr()] = f"input {i}"
    return found


def check_outputs(outputs: list[Any], inputs: list[Any], model: torch.nn.Module) -> None:
    input_storage = _storages(inputs)
    param_storage = {p.untyped_storage().data_ptr() for p in [*model.parameters(), *model.buffers()] if p.numel()}
    for i, out in enumerate(outputs):
        if isinstance(out, torch.Tensor) and type(out) is not torch.Tensor:
            raise RuntimeHack(
                "lazy_tensor",
                f"output {i} is a {type(out).__module__}.{type(out).__qualname__}, "
                "a torch.Tensor subclass; outputs must be plain tensors",
            )
        if not isinstance(out, torch.Tensor) or not out.numel():
            continue
        ptr = out.untyped_storage().data_ptr()
        if ptr in input_storage:
            raise RuntimeHack("identity_kernel", f"output {i} shares storage with {input_storage[ptr]}")
        if ptr in param_storage:
            raise RuntimeHack("output_caching", f"output {i} shares storage with a parameter or buffer of ModelNew")


def pieces(*tensors: torch.Tensor, elements: int | None = None) -> Iterable[tuple[torch.Tensor, ...]]:
    """Matching views of equally shaped `tensors`, each piece at most about `elements` elements (one slice of
    the longest dimension where a slice alone is larger): a check then builds its boolean temporaries piece
    by piece. One full-size mask per operand beside a full-size output kept whole cached segments reserved
    (docs/gpu-notes.md, session 34)."""
    elements = elements or CHUNK_ELEMENTS  # the comparisons' chunk: 32 MB of boolean mask
    first = tensors[0]
    if first.dim() == 0 or first.numel() <= elements:
        yield tensors
        return
    if all(t.is_contiguous() for t in tensors):
        flats = [t.view(-1) for t in tensors]
        for start in range(0, first.numel(), elements):
            yield tuple(f[start : start + elements] for f in flats)
        return
    dim = max(range(first.dim()), key=lambda d: first.shape[d])
    length = first.shape[dim]
    step = max(1, elements // (first.numel() // length))
    for start in range(0, length, step):
        yield tuple(t.narrow(dim, start, min(step, length - start)) for t in tensors)


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal elementwise, NaN matching NaN (`torch.equal` counts NaN as different from itself). A piece whose
    elements all compare equal needs no NaN masks: the usual case (every input of every checked call) then
    reads both operands once, not three times."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_complex():  # NaN matches NaN component by component, not nan+1j against 2+nanj
        a, b = torch.view_as_real(a.resolve_conj()), torch.view_as_real(b.resolve_conj())
    for x, y in pieces(a, b):
        same = x == y
        if bool(same.all()):
            continue
        if not a.is_floating_point():
            return False
        same |= x.isnan() & y.isnan()
        if not bool(same.all()):
            return False
    return True


def check_inputs_unchanged(pristine: list[Any], used: list[Any]) -> None:
    for i, (a, b) in enumerate(zip(pristine, used)):
        if isinstance(a, torch.Tensor) and not _same(a, b):
            raise RuntimeHack("input_mutation", f"ModelNew.forward modified input {i} in place")


def check_not_identity(outputs: list[Any], inputs: list[Any]) -> None:
    """A wrong output that is bit-for-bit one of the inputs was copied, not computed."""
    for i, out in enumerate(outputs):
        for j, x in enumerate(inputs):
            if isinstance(out, torch.Tensor) and isinstance(x, torch.Tensor) and _same(out, x):
                raise RuntimeHack("identity_kernel", f"output {i} is an exact copy of input {j}")


class ReturnedOutputs:
    """The tensors a candidate's checked calls returned, each by object and by content (its sum): a later wrong
    answer that is one of them, untouched, is a result kept from other inputs (`output_caching`), where a cache
    keyed on part of the input hit, not a wrong computation. Weak references: nothing is kept alive here."""

    def __init__(self) -> None:
        self._seen: list[tuple[weakref.ref, float]] = []
        self._kept: list[weakref.ref] = []  # of the last call's outputs, those an earlier call returned untouched

    def add(self, outputs: list[Any]) -> None:
        """Record one checked call's `outputs`."""
        self._kept = []
        for t in outputs:
            if not isinstance(t, torch.Tensor):
                continue
            total = _content_sum(t)
            if any(ref() is t and seen == total for ref, seen in self._seen):
                self._kept.append(weakref.ref(t))
            self._seen.append((weakref.ref(t), total))

    def kept_in(self, outputs: list[Any]) -> bool:
        """Whether `outputs` include a tensor the last call returned that an earlier call had returned, with the
        same content."""
        return any(ref() is t for ref in self._kept for t in outputs)


def _content_sum(t: torch.Tensor) -> float:
    """The sum of `t`'s elements in its own dtype (no wider copy of a full-size output; the same content sums to
    the same value); NaN where there is none."""
    try:
        return float(t.detach().sum())
    except (RuntimeError, TypeError):  # a sum that is no real number (complex): never judged kept
        return float("nan")


# --- concurrency --------------------------------------------------------------------------------------------
def concurrency_snapshot() -> tuple[set[int], set[int]]:
    import psutil

    threads = {t.ident for t in threading.enumerate() if t.ident is not None}
    try:
        children = {p.pid for p in psutil.Process().children(recursive=True)}
    except psutil.Error:
        children = set()
    return threads, children


def check_concurrency(before: tuple[set[int], set[int]]) -> None:
    import psutil

    threads, children = concurrency_snapshot()
    new_threads = [t for t in threading.enumerate() if t.ident in threads - before[0] and t.is_alive()]
    if new_threads:
        raise RuntimeHack(
            "concurrency", f"forward left {len(new_threads)} thread(s) running: {[t.name for t in new_threads][:3]}"
        )
    new_children = []
    for pid in children - before[1]:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                new_children.append(pid)
        except psutil.Error:
            pass
    if new_children:
        raise RuntimeHack("concurrency", f"forward started {len(new_children)} child process(es)")


# --- physical limits --------------------------------------------------------------------------------------------
# Vendor peaks (SXM parts, dense: no structured sparsity): DRAM bandwidth in bytes/s, and FLOP/s by the math
# a kernel runs: float32 on CUDA cores, tf32 / bfloat16 / float16 / float8 on tensor cores. The physical floor
# (nothing is faster) uses the dense bf16 rate; the profile tool compares a kernel with its own dtype's rate.
_PEAKS = {
    "H200": (4.8e12, {"float32": 67e12, "tf32": 494.7e12, "bfloat16": 989e12, "float16": 989e12, "float8": 1979e12}),
    "H100": (3.35e12, {"float32": 67e12, "tf32": 494.7e12, "bfloat16": 989e12, "float16": 989e12, "float8": 1979e12}),
    "A100": (2.04e12, {"float32": 19.5e12, "tf32": 156e12, "bfloat16": 312e12, "float16": 312e12}),
    "L40S": (0.864e12, {"float32": 91.6e12, "tf32": 183e12, "bfloat16": 362e12, "float16": 362e12, "float8": 733e12}),
    "B200": (8.0e12, {"float32": 75e12, "tf32": 1125e12, "bfloat16": 2250e12, "float16": 2250e12, "float8": 4500e12}),
}
_FALLBACK_PEAK = (10e12, 5000e12)
_FLOAT8 = ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")


def _device_peaks(device_name: str) -> tuple[float, dict[str, float]] | None:
    for key, rates in _PEAKS.items():
        if key in device_name:
            return rates
    return None


def peak_rates(device_name: str) -> tuple[float, float]:
    """(DRAM bytes/s, dense bf16 FLOP/s): the rates of the physical floor."""
    peaks = _device_peaks(device_name)
    return (peaks[0], peaks[1]["bfloat16"]) if peaks is not None else _FALLBACK_PEAK


def peak_flops(device_name: str, dtype: str | None) -> tuple[float, str]:
    """(FLOP/s, label) a kernel computing in `dtype` (a torch dtype name such as "bfloat16") is compared with:
    that dtype's dense peak on this GPU. float32 is the CUDA-core rate (a float32 problem's tolerance needs
    float32 math; the label gives the tf32 tensor-core rate too); an unknown GPU or dtype, the bf16 rate."""
    peaks = _device_peaks(device_name)
    name = "float8" if dtype in _FLOAT8 else dtype
    if peaks is None:
        return _FALLBACK_PEAK[1], "dense bf16 (unknown GPU: an upper bound)"
    rates = peaks[1]
    if name == "float32":
        return rates["float32"], f"float32 on CUDA cores (tf32 tensor cores: {rates['tf32'] / 1e12:.0f} TFLOP/s)"
    if name in rates:
        return rates[name], f"dense {name} tensor cores"
    return rates["bfloat16"], f"dense bfloat16 tensor cores ({dtype or 'no floating'} inputs)"


def tensor_bytes(values: Iterable[Any]) -> int:
    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))


def floor_ms(min_bytes: int, flops: float, device_name: str) -> float:
    """The least time the work can take: read inputs and write outputs once, at peak rates."""
    bandwidth, throughput = peak_rates(device_name)
    return 1e3 * max(min_bytes / bandwidth, flops / throughput)


def count_flops(fn: Callable[[], Any]) -> float:
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter:
        fn()
    return float(counter.get_total_flops())


def own_kernel_share(fn: Callable[[], Any], kernel_names: set[str]) -> float | None:
    """Fraction of device time in one call spent in kernels named like the candidate's own."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    total = own = 0.0
    for event in prof.key_averages():
        t = getattr(event, "self_device_time_total", None)
        if t is None:
            t = getattr(event, "self_cuda_time_total", 0.0)
        if not t:
            continue
        total += t
        if any(event.key.startswith(n) for n in kernel_names):
            own += t
    return own / total if total else None
