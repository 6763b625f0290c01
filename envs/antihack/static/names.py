"""Name tables and small path helpers: the vocabulary the other modules share.

What PyTorch calls, tensor methods and operators are allowed outside the kernels (allocation, views,
metadata, copies and casts) and which are compute; which dotted paths each rule looks for; and the
helpers that compare and print dotted paths. Pure data and pure functions: nothing here knows about
a particular solution.
"""

from __future__ import annotations

import ast
import functools
import re

# --- triton and torch: what may run outside the kernels ----------------------------------------------

_JIT = {"triton.jit", "triton.runtime.jit", "triton.runtime.jit.jit", "triton.runtime.jit.JITFunction"}

# What PyTorch may do outside the kernels, as names relative to `torch.`. Everything else is compute.
_TORCH_ALLOC = {
    "empty",
    "empty_like",
    "empty_strided",
    "zeros",
    "zeros_like",
    "ones",
    "ones_like",
    "full",
    "full_like",
    "arange",
    "tensor",
    "as_tensor",
    "scalar_tensor",
}
_TORCH_VIEW = {
    "reshape",
    "view_as_real",
    "view_as_complex",
    "permute",
    "transpose",
    "swapaxes",
    "swapdims",
    "t",
    "flatten",
    "unflatten",
    "squeeze",
    "unsqueeze",
    "narrow",
    "select",
    "split",
    "tensor_split",
    "chunk",
    "unbind",
    "movedim",
    "moveaxis",
    "as_strided",
    "broadcast_to",
    "broadcast_tensors",
    "detach",
    "atleast_1d",
    "atleast_2d",
    "atleast_3d",
}
_TORCH_META = {
    "numel",
    "is_tensor",
    "is_floating_point",
    "is_complex",
    "result_type",
    "promote_types",
    "can_cast",
    "get_default_dtype",
    "broadcast_shapes",
    "finfo",
    "iinfo",
    "Size",
    "device",
    "dtype",
    "no_grad",
    "inference_mode",
    "enable_grad",
    "set_grad_enabled",
    "is_grad_enabled",
    "is_inference_mode_enabled",
    "get_device",
    "_assert",
}
# Copies and casts move memory but do no arithmetic: legal, unless the reference itself only moves data
# (a concat or transpose-copy problem), in which case the copy *is* the problem's computation.
_TORCH_MOVE = {
    "clone",
    "cat",
    "concat",
    "concatenate",
    "stack",
    "hstack",
    "vstack",
    "flip",
    "roll",
    "tile",
    "index_select",
    "gather",
    "repeat_interleave",
    "nn.functional.pad",
    "nn.functional.unfold",
}
# torch namespaces that never compute: device queries/sync, backend flags, nn.Module and autograd.Function
# plumbing (MyFn.apply runs the solution's own forward, which is checked).
_TORCH_QUIET = ("cuda.", "backends.", "nn.Module.", "autograd.Function.", "autograd.function.Function.")

_VIEW_METHODS = {
    "view",
    "view_as",
    "reshape",
    "reshape_as",
    "permute",
    "transpose",
    "swapaxes",
    "swapdims",
    "t",
    "flatten",
    "unflatten",
    "squeeze",
    "unsqueeze",
    "expand",
    "expand_as",
    "narrow",
    "select",
    "split",
    "tensor_split",
    "chunk",
    "unbind",
    "movedim",
    "moveaxis",
    "as_strided",
    "unfold",
    "detach",
    "requires_grad_",
}
_META_METHODS = {
    "size",
    "stride",
    "numel",
    "dim",
    "ndimension",
    "nelement",
    "element_size",
    "data_ptr",
    "is_contiguous",
    "storage_offset",
    "get_device",
    "item",
    "tolist",
    "is_floating_point",
    "is_complex",
    "__len__",
}
# zero_/fill_ only initialise (an accumulator for atomics, say), like torch.zeros/torch.full.
_ALLOC_METHODS = {"new_empty", "new_empty_strided", "new_zeros", "new_ones", "new_full", "new_tensor", "zero_", "fill_"}
_MOVE_METHODS = {
    "contiguous",
    "to",
    "float",
    "half",
    "bfloat16",
    "double",
    "int",
    "long",
    "short",
    "bool",
    "byte",
    "char",
    "type",
    "type_as",
    "cpu",
    "cuda",
    "clone",
    "copy_",
    "repeat",
    "flip",
    "roll",
    "tile",
    "index_select",
    "gather",
    "pin_memory",
}
# Attributes of a tensor that are tensors; every other attribute (shape, dtype, device...) is metadata.
_TENSOR_ATTRS = {"T", "mT", "H", "mH", "data", "real", "imag", "grad"}
# Attributes of an nn module that hold its tensors (self.linear.weight, self.bn.running_mean...).
_PARAM_ATTRS = {
    "weight",
    "bias",
    "running_mean",
    "running_var",
    "in_proj_weight",
    "in_proj_bias",
    "weight_ih_l0",
    "weight_hh_l0",
    "bias_ih_l0",
    "bias_hh_l0",
}
# Method names that only tensors have (no str/list/dict/set method shares them): flagged even when the
# receiver's type is unknown. Ambiguous names (add, sort, copy, index...) need a known tensor receiver.
_COMPUTE_METHODS = {
    "sum",
    "mean",
    "prod",
    "max",
    "min",
    "amax",
    "amin",
    "argmax",
    "argmin",
    "cumsum",
    "cumprod",
    "cummax",
    "cummin",
    "logsumexp",
    "norm",
    "var",
    "std",
    "median",
    "exp",
    "exp_",
    "exp2",
    "log_",
    "log2",
    "log10",
    "log1p",
    "expm1",
    "sqrt",
    "sqrt_",
    "rsqrt",
    "rsqrt_",
    "pow_",
    "abs_",
    "neg",
    "neg_",
    "reciprocal",
    "square",
    "sign",
    "floor",
    "ceil",
    "round",
    "trunc",
    "frac",
    "relu",
    "relu_",
    "sigmoid",
    "sigmoid_",
    "tanh",
    "tanh_",
    "softmax",
    "log_softmax",
    "erf",
    "erf_",
    "sin",
    "cos",
    "matmul",
    "mm",
    "bmm",
    "mv",
    "dot",
    "addmm",
    "addmm_",
    "baddbmm",
    "addmv",
    "addbmm",
    "outer",
    "clamp",
    "clamp_",
    "clip",
    "clip_",
    "clamp_min",
    "clamp_max",
    "maximum",
    "minimum",
    "mul",
    "mul_",
    "div",
    "div_",
    "add_",
    "sub",
    "sub_",
    "true_divide",
    "floor_divide",
    "remainder",
    "fmod",
    "addcmul",
    "addcdiv",
    "lerp",
    "where",
    "masked_fill",
    "masked_fill_",
    "masked_scatter",
    "scatter",
    "scatter_",
    "scatter_add",
    "scatter_add_",
    "index_add",
    "index_add_",
    "index_put_",
    "tril",
    "triu",
    "tril_",
    "triu_",
    "topk",
    "argsort",
    "nan_to_num",
    "logical_and",
    "logical_or",
    "logical_not",
    "count_nonzero",
    "float_power",
    "xlogy",
    "mish",
    "silu",
    "gelu",
    "hardtanh",
    "softplus",
    "baddbmm_",
    "addr",
    "diagonal_scatter",
}
_PY_MATH_BUILTINS = {"abs", "sum", "max", "min", "pow", "round", "divmod", "sorted"}
# Calls that run a function they are handed: functools.reduce(torch.add, xs) computes with torch.add.
_HIGHER_ORDER = {
    "builtins.map",
    "builtins.filter",
    "functools.reduce",
    "functools.partial",
    "itertools.starmap",
    "itertools.accumulate",
}
_OPERATOR_MATH = {
    "add",
    "sub",
    "mul",
    "truediv",
    "floordiv",
    "mod",
    "pow",
    "matmul",
    "neg",
    "iadd",
    "isub",
    "imul",
    "itruediv",
    "imatmul",
    "lt",
    "le",
    "gt",
    "ge",
    "eq",
    "ne",
    "and_",
    "or_",
    "xor",
    "invert",
}
_OP_KEYS = {
    ast.Add: "add",
    ast.Sub: "sub",
    ast.Mult: "mul",
    ast.Div: "div",
    ast.FloorDiv: "floor_divide",
    ast.Mod: "remainder",
    ast.Pow: "pow",
    ast.MatMult: "matmul",
    ast.BitAnd: "logical_and",
    ast.BitOr: "logical_or",
    ast.BitXor: "logical_xor",
    ast.LShift: "shift",
    ast.RShift: "shift",
    ast.USub: "neg",
    ast.UAdd: "pos",
    ast.Invert: "logical_not",
    ast.Eq: "eq",
    ast.NotEq: "ne",
    ast.Lt: "lt",
    ast.LtE: "le",
    ast.Gt: "gt",
    ast.GtE: "ge",
}
_OP_SYMBOLS = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
    ast.MatMult: "@",
    ast.BitAnd: "&",
    ast.BitOr: "|",
    ast.BitXor: "^",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.USub: "unary -",
    ast.UAdd: "unary +",
    ast.Invert: "~",
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
}
# Op names that mean the same computation, so "torch.mm in the solution" matches "@ in the reference".
_KEY_ALIASES = {
    "mm": "matmul",
    "bmm": "matmul",
    "linear": "matmul",
    "einsum": "matmul",
    "addmm": "matmul",
    "baddbmm": "matmul",
    "mv": "matmul",
    "dot": "matmul",
    "conv1d": "conv",
    "conv2d": "conv",
    "conv3d": "conv",
    "concat": "cat",
    "concatenate": "cat",
    "clip": "clamp",
    "true_divide": "div",
}
_MOVEMENT_KEYS = {
    k.rsplit(".", 1)[-1].lower()
    for k in _TORCH_ALLOC
    | _TORCH_VIEW
    | _TORCH_META
    | _TORCH_MOVE
    | _VIEW_METHODS
    | _META_METHODS
    | _ALLOC_METHODS
    | _MOVE_METHODS
} | {"cat"}
# Calling an instance of an nn module class (self.linear(x), nn.ReLU()(x), self.layers[0](x), .forward(x)).
_NN_MODULE_CALL = re.compile(r"^torch\.nn\.(?:[a-z_]\w*\.)*([A-Z]\w*)\(\)(?:\[\])*(?:\.(?:forward|__call__))?$")
_NN_NOT_MODULES = {"Parameter", "Buffer", "ParameterList", "ParameterDict", "Module"}
# torch attributes that are values, not functions (dtypes, layouts, constants).
_TORCH_VALUES = re.compile(
    r"^(u?int\d+|float\w*|bfloat16|half|double|long|int|short|bool|complex\w*|cfloat|cdouble|"
    r"chalf|q?u?int\w*|\w+_format|channels_last\w*|strided|sparse_\w+|inf|nan|pi|e)$"
)


# --- paths the rules look for ------------------------------------------------------------------------

# Paths for the reference rules. "p" matches p and p.*, "p*" matches anything starting with p.
_DYNAMIC_CODE = (
    "builtins.exec",
    "builtins.eval",
    "builtins.compile",
    "builtins.__import__",
    "importlib",
    "imp",
    "base64",
    "codecs",
    "binascii",
    "marshal",
    "pickle",
    "_pickle",
    "dill",
    "cloudpickle",
    "zlib",
    "lzma",
    "bz2",
    "gzip",
    "zipimport",
    "runpy",
    "code",
    "types.FunctionType",
    "types.CodeType",
    "types.LambdaType",
    "types.ModuleType",
)
_TIMERS = (
    "time",
    "timeit",
    "torch.cuda.Event",
    "torch.cuda.event",
    "torch.cuda.synchronize",
    "torch.cuda.Stream",
    "torch.cuda.streams",
    "torch.cuda.current_stream",
    "torch.cuda.elapsed_time",
    "torch.Event",
    "torch.accelerator.synchronize",
    "triton.testing",
    "envs.timing",
    "kernelrl.timing",
)
_COMPARISONS = (
    "torch.allclose",
    "torch.equal",
    "torch.isclose",
    "torch.testing",
    "torch.eq",
    "torch.isfinite",
    "torch.isnan",
    "torch.isinf",
    "torch.Tensor.__eq__",
    "torch.Tensor.__ne__",
    "torch.Tensor.eq",
    "torch.Tensor.allclose",
    "torch.Tensor.equal",
    "torch.Tensor.isclose",
    "numpy.allclose",
    "numpy.testing",
    "envs.compare",
    "kernelrl.compare",
)
# Calls that change how PyTorch itself computes, for the reference too.
_OP_OVERRIDES = (
    "torch.library.impl",
    "torch.library.Library",
    "torch.library.register_kernel",
    "torch.library.register_torch_dispatch",
    "torch.library.fallthrough_kernel",
    "torch.set_float32_matmul_precision",
    "torch.set_default_dtype",
    "torch.set_default_device",
    "torch.set_default_tensor_type",
    "torch.set_flush_denormal",
    "torch.use_deterministic_algorithms",
)
_MOCKS = ("unittest.mock.patch", "mock.patch")
# Names of timing/comparison functions, for patches of modules the source cannot name (found in sys.modules).
_TIMER_NAMES = {
    "time_cuda",
    "time_interleaved",
    "time_in_placements",
    "placement_blocks",
    "block_warmup",
    "relative_half_width",
    "bootstrap_ratio",
    "perf_counter",
    "perf_counter_ns",
    "monotonic",
    "elapsed_time",
    "synchronize",
    "do_bench",
    "Event",
    "memory_reserved",
}
_COMPARISON_NAMES = {
    "compare_outputs",
    "outputs_match",
    "_compare_one",
    "compare_each",
    "compare_tensor",
    "judge_outputs",
    "check_against_truth",
    "allclose",
    "isclose",
    "assert_close",
    "equal",
    "format_mismatch",
}
_EVALUATOR = {"envs", "rewards", "rl", "kernelrl"}
_PROBLEM_MODULES = {"problem", "reference", "ref", "__main__", "kernelbench", "KernelBench"}
_INTROSPECTION = (
    "gc",
    "inspect",
    "weakref",
    "sys._getframe",
    "sys._current_frames",
    "sys.modules",
    "sys.settrace",
    "sys.setprofile",
    "sys.gettrace",
    "sys.getprofile",
    "sys.meta_path",
    "sys.path_hooks",
    "sys.path_importer_cache",
    "sys.addaudithook",
    "builtins.globals",
    "builtins.locals",
    "builtins.vars",
    "traceback.extract_stack",
    "traceback.walk_stack",
    "traceback.format_stack",
    "traceback.print_stack",
    "traceback.walk_tb",
    "traceback.extract_tb",
    "threading.enumerate",
)
_FRAME_ATTRS = {
    "f_back",
    "f_globals",
    "f_locals",
    "f_builtins",
    "f_code",
    "tb_frame",
    "tb_next",
    "gi_frame",
    "gi_code",
    "cr_frame",
    "ag_frame",
    "__globals__",
    "__closure__",
    "__code__",
    "__subclasses__",
    "__bases__",
    "__mro__",
    "__base__",
}
_SYSTEM = (
    "subprocess",
    "os.system",
    "os.popen",
    "os.exec*",
    "os.spawn*",
    "os.posix_spawn*",
    "os.kill",
    "os.killpg",
    "os.abort",
    "os._exit",
    "sys.exit",
    "builtins.exit",
    "builtins.quit",
    "builtins.input",
    "builtins.breakpoint",
    "os.remove",
    "os.unlink",
    "os.rename",
    "os.renames",
    "os.replace",
    "os.rmdir",
    "os.removedirs",
    "os.mkdir",
    "os.makedirs",
    "os.chmod",
    "os.chown",
    "os.link",
    "os.symlink",
    "os.truncate",
    "os.open",
    "os.write",
    "os.fdopen",
    "os.environ",
    "os.environb",
    "os.getenv",
    "os.getenvb",
    "os.putenv",
    "os.unsetenv",
    "os.chdir",
    "os.listdir",
    "os.scandir",
    "os.walk",
    "shutil",
    "ctypes",
    "_ctypes",
    "cffi",
    "socket",
    "ssl",
    "http",
    "urllib",
    "urllib3",
    "requests",
    "httpx",
    "aiohttp",
    "ftplib",
    "smtplib",
    "telnetlib",
    "tempfile",
    "mmap",
    "fcntl",
    "pty",
    "resource",
    "posix",
    "pdb",
    "pathlib.Path.write_text",
    "pathlib.Path.write_bytes",
    "pathlib.Path.unlink",
    "pathlib.Path.rmdir",
    "pathlib.Path.touch",
    "pathlib.Path.rename",
    "pathlib.Path.replace",
)
# Calls with side effects outside the process's memory (files, downloads, native code), refused whatever
# they cost and wherever they are: saving or loading tensors, storages mapped from files, hub downloads,
# extension building and library loading, NumPy file I/O.
_SIDE_EFFECTS = (
    "torch.save",
    "torch.load",
    "torch.from_file",
    "torch.serialization",
    "torch.hub",
    "torch.utils.model_zoo",
    "torch.utils.cpp_extension",
    "torch.ops.load_library",
    "torch.classes.load_library",
    "torch._ops.load_library",
    "torch.UntypedStorage.from_file",
    "torch.TypedStorage.from_file",
    "torch.storage",
    "numpy.load",
    "numpy.save",
    "numpy.savez",
    "numpy.savez_compressed",
    "numpy.savetxt",
    "numpy.loadtxt",
    "numpy.genfromtxt",
    "numpy.fromfile",
    "numpy.memmap",
    "numpy.lib.format.open_memmap",
    "numpy.lib.npyio",
    "numpy.ndarray.tofile",
    "numpy.ndarray.dump",
)
_SIDE_EFFECT_METHODS = {"tofile", "from_file"}  # whatever the receiver: only arrays and storages have them
_RESULT_CHANNELS = (
    "os.write",
    "os.writev",
    "os.pwrite",
    "os.dup",
    "os.dup2",
    "os.fdopen",
    "os.sendfile",
    "sys.stdout.write",
    "sys.stdout.buffer",
    "sys.stdout.fileno",
    "sys.stderr.write",
    "sys.stderr.buffer",
    "sys.stderr.fileno",
    "sys.__stdout__",
    "sys.__stderr__",
)
_HEAP_SCANS = ("gc.get_objects", "gc.get_referrers", "gc.get_referents")
_REFERENCE_TARGETS = {"torch.Tensor", "torch.nn.Module", "torch.nn.modules.module.Module"}
_FILE_WRITE_METHODS = {"write_text", "write_bytes", "unlink", "rmdir", "touch", "symlink_to", "hardlink_to"}
_CONCURRENCY = (
    "threading",
    "_thread",
    "multiprocessing",
    "concurrent",
    "asyncio",
    "os.fork",
    "os.forkpty",
    "os.register_at_fork",
    "signal",
    "atexit",
    "sched",
    "torch.multiprocessing",
    "torch.jit.fork",
    "torch.jit.wait",
)
_LAZY = (
    "torch.Tensor._make_subclass",
    "torch.Tensor._make_wrapper_subclass",
    "torch.overrides",
    "torch.utils._python_dispatch",
    "torch._subclasses",
    "torch._C._TensorBase",
)
_TENSOR_CLASSES = (
    "torch.Tensor",
    "torch._tensor.Tensor",
    "torch.nn.Parameter",
    "torch.nn.parameter.Parameter",
    "torch.nn.Buffer",
    "torch.nn.parameter.Buffer",
    "torch.TensorBase",
)
_COMPILE = (
    "torch.compile",
    "torch._dynamo",
    "torch.jit",
    "torch._inductor",
    "torch.fx",
    "torch.export",
    "torch._export",
    "torch.compiler",
    "torch._functorch",
    "functorch.compile",
    "torch._lazy",
)
_LIBRARY_ANYWHERE = ("torch.ops", "torch._C", "torch._ops", "torch.utils.cpp_extension", "torch.classes", "triton.ops")
_GPU_LIBRARIES = (
    "cupy",
    "jax",
    "jaxlib",
    "flash_attn",
    "xformers",
    "apex",
    "numba",
    "pycuda",
    "cuda",
    "cutlass",
    "cublas",
    "tensorrt",
    "transformer_engine",
    "deepspeed",
    "liger_kernel",
    "flag_gems",
    "bitsandbytes",
    "fbgemm_gpu",
    "vllm",
    "sgl_kernel",
    "torchao",
    "mamba_ssm",
    "kernels",
    "einops.einsum",
    "einops.reduce",
)  # einops.rearrange/repeat are layout, like view/repeat
_CPU_LIBRARIES = ("numpy", "scipy")  # common for shape arithmetic: flagged only when handed a tensor
_STREAMS = (
    "torch.cuda.Stream",
    "torch.cuda.stream",
    "torch.cuda.set_stream",
    "torch.cuda.ExternalStream",
    "torch.cuda.StreamContext",
    "torch.cuda.streams",
    "torch.Stream",
    "torch.accelerator.set_stream",
    "torch.cuda.graph",
    "torch.cuda.CUDAGraph",
    "torch.cuda.make_graphed_callables",
)
_FORWARD_HOOKS = {
    "register_forward_hook",
    "register_forward_pre_hook",
    "register_module_forward_hook",
    "register_module_forward_pre_hook",
}
_CONSTRUCTION = {"__init__", "__new__", "__init_subclass__", "__post_init__"}
_AUTOGRAD_ONLY = {"backward", "jvp", "vjp", "setup_context"}  # never run under the evaluator's no_grad


# --- path helpers ------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def _under(path: str, prefixes: tuple[str, ...]) -> bool:
    for p in prefixes:
        if p.endswith("*"):
            if path.startswith(p[:-1]):
                return True
        elif path == p or path.startswith(p + "."):
            return True
    return False


def _plain(path: str) -> str:
    """The dotted path with the call/element markers removed: torch.cuda.Stream().wait -> torch.cuda.Stream.wait."""
    return path.replace("()", "").replace("[]", "")


def _is_module_path(path: str) -> bool:
    """A path to a module or an object inside one (not a call result, an element or an unbound name)."""
    return "()" not in path and "[]" not in path and not path.startswith("?")


def _norm_key(key: str) -> str:
    key = key.rsplit(".", 1)[-1].lower().rstrip("_")
    return _KEY_ALIASES.get(key, key)


def _short(node: ast.AST, limit: int = 60) -> str:
    text = ast.unparse(node)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _torch_kind(name: str) -> str:
    """'ok', 'move' or 'compute' for a call of torch.<name>."""
    last = name.rsplit(".", 1)[-1]
    if name in _TORCH_ALLOC or name in _TORCH_VIEW or name in _TORCH_META or name.startswith(_TORCH_QUIET):
        return "ok"
    if name in _TORCH_MOVE:
        return "move"
    if name.startswith("Tensor."):
        return _method_kind(name[len("Tensor.") :])
    if name.startswith("nn.") and "functional" not in name and (last[:1].isupper() or last in _CONSTRUCTION):
        return "ok"  # building a module or parameter; calling the module is what computes
    return "compute"


def _method_kind(name: str) -> str:
    if name in _VIEW_METHODS or name in _META_METHODS or name in _ALLOC_METHODS or name == "numpy":
        return "ok"  # .numpy() is the library rule's business
    return "move" if name in _MOVE_METHODS else "compute"


def _torch_returns_tensor(name: str) -> bool:
    last = name.rsplit(".", 1)[-1]
    if name in _TORCH_META or name.startswith(_TORCH_QUIET):
        return False
    if name.startswith("nn.") and "functional" not in name and last[:1].isupper():
        return last in ("Parameter", "Buffer")
    if name.startswith("Tensor."):
        return last not in _META_METHODS
    return True
