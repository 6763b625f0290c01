"""A seeded generator of fusion problems in the spirit of KernelBench level 2: an optional heavy op (GEMM,
batched matmul, convolution, transposed convolution) followed by a chain of epilogue ops (activations,
scalar and per-channel arithmetic, norms, softmax, reductions, pooling), over realistic shapes and dtypes.

Everything is drawn from `random.Random(f"{seed}:{index}")`, so problem `index` of a seed is the same file on
every machine and run, independent of how many are generated. Shapes are tracked symbolically while the
chain grows, so every op is applied where it is defined (a norm over a dimension a reduction collapsed, or a
softmax over a size-1 dimension, would be constant: such ops are not drawn). Full sizes aim at >= 1 ms of
eager PyTorch on an H100-class GPU (the runtime stage measures it); SMALL_SIZES keep the largest input near
`max_small_elements` for the CPU interpreter. The level is `envs.data.difficulty.structural_level` of the
generated source: the same estimate every other problem gets.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Callable, Iterator

from envs.data.difficulty import structural_level
from envs.data.records import CandidateProblem, Origin

__all__ = ["SyntheticConfig", "generate", "generate_one"]

GENERATOR_VERSION = "synthetic-v1"


@dataclasses.dataclass(frozen=True)
class SyntheticConfig:
    count: int = 1000
    seed: int = 0
    min_ops: int = 1  # epilogue ops after the heavy op (or on the input when there is none)
    max_ops: int = 4
    float16_share: float = 0.15  # the rest float32; bfloat16 is left out: the CPU interpreter computes it wrong
    heads: tuple[str, ...] = ("none", "linear", "bmm", "conv1d", "conv2d", "conv3d", "conv_transpose2d")

    def __post_init__(self) -> None:
        if self.count < 0 or not 1 <= self.min_ops <= self.max_ops:
            raise ValueError("synthetic: count >= 0 and 1 <= min_ops <= max_ops")
        if not 0 <= self.float16_share <= 1:
            raise ValueError("synthetic: float16_share must be in [0, 1]")


@dataclasses.dataclass
class _Dim:
    const: str | None  # the module constant holding it, None for a collapsed (size 1) dimension
    full: int
    small: int


@dataclasses.dataclass
class _Build:
    """The problem being written: constants, __init__ lines, forward lines, the current tensor's shape."""

    rng: random.Random
    consts: dict[str, tuple[int | float, int | float | None]] = dataclasses.field(default_factory=dict)
    init_args: list[str] = dataclasses.field(default_factory=list)
    init: list[str] = dataclasses.field(default_factory=list)
    forward: list[str] = dataclasses.field(default_factory=list)
    inputs: list[str] = dataclasses.field(default_factory=list)
    shape: list[_Dim] = dataclasses.field(default_factory=list)
    names: list[str] = dataclasses.field(default_factory=list)  # the chain, for the file name and docstring
    has_params: bool = False

    def const(self, name: str, full: int | float, small: int | float | None = None, init_arg: bool = False) -> str:
        self.consts[name] = (full, small)
        if init_arg and name not in self.init_args:
            self.init_args.append(name)
        return name

    def attr(self, stem: str) -> str:
        n = sum(1 for line in self.init if line.startswith(f"self.{stem}"))
        return f"{stem}{n + 1}" if n else stem


def _pick(rng: random.Random, options: list):
    return options[rng.randrange(len(options))]


# ----------------------------------------------------------------------------------------- heavy ops


def _head_none(b: _Build) -> None:
    rank = b.rng.choice([2, 3, 4])
    # ~2^27 elements: an eager elementwise op moves ~1 GB, a chain of them >= 1 ms on an H100-class GPU.
    if rank == 2:
        dims = [("batch_size", _pick(b.rng, [8192, 16384]), 64), ("dim", _pick(b.rng, [8192, 16384]), 512)]
    elif rank == 3:
        dims = [
            ("batch_size", _pick(b.rng, [64, 128]), 4),
            ("seq_len", _pick(b.rng, [1024, 2048]), 64),
            ("hidden", _pick(b.rng, [1024, 2048]), 128),
        ]
    else:
        dims = [
            ("batch_size", _pick(b.rng, [32, 64]), 2),
            ("channels", _pick(b.rng, [64, 128]), 8),
            ("height", _pick(b.rng, [128, 256]), 32),
            ("width", _pick(b.rng, [128, 256]), 32),
        ]
    for name, full, small in dims:
        b.const(name, full, small)
    b.shape = [_Dim(n, f, s) for n, f, s in dims]
    b.inputs.append(f"torch.randn({', '.join(n for n, _, _ in dims)}, dtype=DTYPE)")


def _head_linear(b: _Build) -> None:
    batch = b.const("batch_size", _pick(b.rng, [1024, 2048, 4096]), _pick(b.rng, [64, 128]))
    fin = b.const("in_features", _pick(b.rng, [2048, 4096, 8192]), _pick(b.rng, [64, 96, 128]), init_arg=True)
    fout = b.const("out_features", _pick(b.rng, [2048, 4096, 8192]), _pick(b.rng, [64, 80, 128]), init_arg=True)
    bias = b.rng.random() < 0.8
    b.init.append(f"self.gemm = nn.Linear({fin}, {fout}{'' if bias else ', bias=False'})")
    b.forward.append("x = self.gemm(x)")
    b.has_params = True
    b.shape = [_Dim(batch, *b.consts[batch]), _Dim(fout, *b.consts[fout])]
    b.inputs.append(f"torch.randn({batch}, {fin}, dtype=DTYPE)")
    b.names.append("Gemm")


def _head_bmm(b: _Build) -> None:
    batch = b.const("batch_size", _pick(b.rng, [64, 128, 256]), _pick(b.rng, [2, 4]))
    m = b.const("m", _pick(b.rng, [512, 1024]), _pick(b.rng, [32, 48]))
    k = b.const("k", _pick(b.rng, [512, 1024]), _pick(b.rng, [32, 64]))
    n = b.const("n", _pick(b.rng, [512, 1024]), _pick(b.rng, [32, 40]))
    b.forward.append("x = torch.bmm(x, y)")
    b.shape = [_Dim(batch, *b.consts[batch]), _Dim(m, *b.consts[m]), _Dim(n, *b.consts[n])]
    b.inputs += [f"torch.randn({batch}, {m}, {k}, dtype=DTYPE)", f"torch.randn({batch}, {k}, {n}, dtype=DTYPE)"]
    b.names.append("Matmul")


def _head_conv(b: _Build, spatial: int, transposed: bool = False) -> None:
    batch = b.const("batch_size", _pick(b.rng, [16, 32, 64] if spatial < 3 else [8, 16]), 2)
    cin = b.const("in_channels", _pick(b.rng, [16, 32, 64]), _pick(b.rng, [3, 4, 8]), init_arg=True)
    cout = b.const("out_channels", _pick(b.rng, [64, 128]), _pick(b.rng, [8, 16]), init_arg=True)
    ks = b.const("kernel_size", _pick(b.rng, [3, 5] if not transposed else [3]), None, init_arg=True)
    spatial_names = {1: ["length"], 2: ["height", "width"], 3: ["depth", "height", "width"]}[spatial]
    full = {1: [4096, 8192], 2: [64, 128], 3: [16, 32]}[spatial]
    small = {1: [256, 512], 2: [16, 24], 3: [8]}[spatial]
    side_full, side_small = _pick(b.rng, full), _pick(b.rng, small)
    for name in spatial_names:
        b.const(name, side_full, side_small)
    cls = f"nn.Conv{'Transpose' if transposed else ''}{spatial}d"
    # Padding kernel_size // 2 (odd kernels) keeps the spatial size, so later ops know the shape statically.
    b.init.append(f"self.conv = {cls}({cin}, {cout}, {ks}, padding={ks} // 2)")
    b.forward.append("x = self.conv(x)")
    b.has_params = True
    b.shape = [_Dim(batch, *b.consts[batch]), _Dim(cout, *b.consts[cout])] + [
        _Dim(n, *b.consts[n]) for n in spatial_names
    ]
    b.inputs.append(f"torch.randn({batch}, {cin}, {', '.join(spatial_names)}, dtype=DTYPE)")
    b.names.append(f"Conv{'Transpose' if transposed else ''}{spatial}d")


_HEADS: dict[str, Callable[[_Build], None]] = {
    "none": _head_none,
    "linear": _head_linear,
    "bmm": _head_bmm,
    "conv1d": lambda b: _head_conv(b, 1),
    "conv2d": lambda b: _head_conv(b, 2),
    "conv3d": lambda b: _head_conv(b, 3),
    "conv_transpose2d": lambda b: _head_conv(b, 2, transposed=True),
}

# ----------------------------------------------------------------------------------------- epilogue ops

_ACTIVATIONS = [
    ("ReLU", "torch.relu(x)"),
    ("GELU", "F.gelu(x)"),
    ("GELUTanh", "F.gelu(x, approximate='tanh')"),
    ("Sigmoid", "torch.sigmoid(x)"),
    ("Tanh", "torch.tanh(x)"),
    ("SiLU", "F.silu(x)"),
    ("Mish", "F.mish(x)"),
    ("Softplus", "F.softplus(x)"),
    ("ELU", "F.elu(x)"),
    ("HardSwish", "F.hardswish(x)"),
    ("HardSigmoid", "F.hardsigmoid(x)"),
]


def _live(b: _Build) -> list[int]:
    """Dimensions (not the batch) an op may act along: not collapsed, more than one element even small."""
    return [i for i, d in enumerate(b.shape) if i > 0 and d.small > 1]


def _op_activation(b: _Build) -> bool:
    name, expr = _pick(b.rng, _ACTIVATIONS)
    b.forward.append(f"x = {expr}")
    b.names.append(name)
    return True


def _op_leaky(b: _Build) -> bool:
    slope = b.const(b.attr("negative_slope"), _pick(b.rng, [0.01, 0.05, 0.1, 0.2]), None, init_arg=True)
    b.init.append(f"self.{slope} = {slope}")
    b.forward.append(f"x = F.leaky_relu(x, self.{slope})")
    b.names.append("LeakyReLU")
    return True


def _op_scalar(b: _Build) -> bool:
    kind = _pick(b.rng, ["Multiply", "Add", "Divide", "Subtract"])
    name = b.attr(kind.lower() + "_value")
    value = round(b.rng.uniform(0.25, 3.0), 2)
    b.const(name, value, None, init_arg=True)
    b.init.append(f"self.{name} = {name}")
    op = {"Multiply": "*", "Add": "+", "Divide": "/", "Subtract": "-"}[kind]
    b.forward.append(f"x = x {op} self.{name}")
    b.names.append(kind)
    return True


def _op_clamp(b: _Build) -> bool:
    lo = round(-b.rng.uniform(0.5, 2.0), 2)
    hi = round(b.rng.uniform(0.5, 2.0), 2)
    b.forward.append(f"x = torch.clamp(x, min={lo}, max={hi})")
    b.names.append("Clamp")
    return True


def _op_channel_param(b: _Build) -> bool:
    """A learned per-feature bias or scale, broadcast over the rest (a conv's epilogue in KernelBench L2)."""
    if len(b.shape) < 2 or b.shape[1].const is None:
        return False
    channel = b.shape[1].const
    trailing = len(b.shape) - 2
    shape = f"({channel},{' 1,' * trailing})".replace(",)", ")") if trailing else f"({channel},)"
    kind = _pick(b.rng, ["bias", "scale"])
    name = b.attr(kind)
    init = "torch.randn" if kind == "bias" else "1.0 + 0.1 * torch.randn"
    b.init.append(f"self.{name} = nn.Parameter({init}{shape})")
    b.forward.append(f"x = x + self.{name}" if kind == "bias" else f"x = x * self.{name}")
    b.has_params = True
    b.names.append("BiasAdd" if kind == "bias" else "Scale")
    return True


def _op_residual(b: _Build) -> bool:
    """x = x + act(x) style: the chain reads its own intermediate twice (a fusion must keep it in registers)."""
    name, expr = _pick(b.rng, _ACTIVATIONS[:6])
    b.forward += ["residual = x", f"x = {expr}", "x = x + residual"]
    b.names.append(f"Residual{name}")
    return True


def _op_softmax(b: _Build) -> bool:
    dims = _live(b)
    if not dims:
        return False
    dim = dims[-1] if b.rng.random() < 0.7 else _pick(b.rng, dims)
    fn = _pick(b.rng, ["softmax", "log_softmax"])
    b.forward.append(f"x = torch.{fn}(x, dim={dim})")
    b.names.append("Softmax" if fn == "softmax" else "LogSoftmax")
    return True


def _op_reduce(b: _Build) -> bool:
    dims = _live(b)
    if not dims:
        return False
    dim = _pick(b.rng, dims)
    fn = _pick(b.rng, ["sum", "mean", "amax", "logsumexp"])
    b.forward.append(f"x = torch.{fn}(x, dim={dim}, keepdim=True)")
    b.shape[dim] = _Dim(None, 1, 1)
    b.names.append({"sum": "Sum", "mean": "Mean", "amax": "Max", "logsumexp": "LogSumExp"}[fn])
    return True


def _op_norm(b: _Build) -> bool:
    rank = len(b.shape)
    if rank == 2 or rank == 3:
        last = b.shape[-1]
        if last.const is None or last.small < 8:
            return False
        b.init.append(f"self.{b.attr('norm')} = nn.LayerNorm({last.const})")
        b.names.append("LayerNorm")
    else:
        channel = b.shape[1]
        if channel.const is None:
            return False
        kind = _pick(b.rng, ["batch", "group", "instance"])
        if kind == "group":
            groups = b.const("num_groups", _pick(b.rng, [2, 4]), None, init_arg=True)  # divides every channel count
            b.init.append(f"self.{b.attr('norm')} = nn.GroupNorm({groups}, {channel.const})")
            b.names.append("GroupNorm")
        else:
            cls = f"nn.{'BatchNorm' if kind == 'batch' else 'InstanceNorm'}{rank - 2}d"
            b.init.append(f"self.{b.attr('norm')} = {cls}({channel.const})")
            b.names.append("BatchNorm" if kind == "batch" else "InstanceNorm")
    attr = b.init[-1].split(" =")[0]
    b.forward.append(f"x = {attr}(x)")
    b.has_params = True
    return True


def _op_pool(b: _Build) -> bool:
    rank = len(b.shape)
    if rank not in (3, 4, 5) or any(d.small < 4 for d in b.shape[2:]):
        return False
    spatial = rank - 2
    kind = _pick(b.rng, ["max", "avg"])
    b.forward.append(f"x = F.{kind}_pool{spatial}d(x, 2)")
    for d in b.shape[2:]:  # halved: the constant's name no longer states the size, so no op may use it
        d.full, d.small, d.const = d.full // 2, d.small // 2, None
    b.names.append("MaxPool" if kind == "max" else "AvgPool")
    return True


_OPS: list[tuple[Callable[[_Build], bool], float]] = [
    (_op_activation, 3.0),
    (_op_leaky, 0.5),
    (_op_scalar, 2.0),
    (_op_clamp, 0.7),
    (_op_channel_param, 1.0),
    (_op_residual, 0.7),
    (_op_softmax, 1.0),
    (_op_reduce, 1.2),
    (_op_norm, 1.2),
    (_op_pool, 0.6),
]


def _file_name(index: int, names: list[str]) -> str:
    return f"syn_{index:05d}_" + "_".join(n.lower() for n in names)[:80]


def generate_one(index: int, config: SyntheticConfig = SyntheticConfig()) -> CandidateProblem:
    rng = random.Random(f"{config.seed}:{index}")
    b = _Build(rng)
    head = _pick(rng, list(config.heads))
    _HEADS[head](b)
    wanted = rng.randint(config.min_ops, config.max_ops)
    applied, attempts = 0, 0
    ops, weights = zip(*_OPS)
    while applied < wanted and attempts < 50:
        attempts += 1
        if rng.choices(ops, weights)[0](b):
            applied += 1
    dtype = "float16" if rng.random() < config.float16_share else "float32"
    return _render(index, config, b, head, dtype)


def _render(index: int, config: SyntheticConfig, b: _Build, head: str, dtype: str) -> CandidateProblem:
    chain = " -> ".join(b.names)
    args = ", ".join(b.init_args)
    init_body = b.init + ([f"self.to({'torch.' + dtype})"] if b.has_params and dtype != "float32" else [])
    lines = [
        f'"""Synthetic fusion problem ({GENERATOR_VERSION}, seed {config.seed}, index {index}): {chain}."""',
        "import torch",
        "import torch.nn as nn",
        "import torch.nn.functional as F",
        "",
        "",
        "class Model(nn.Module):",
        f"    def __init__(self{', ' + args if args else ''}):",
        "        super().__init__()",
    ]
    lines += [f"        {line}" for line in init_body]
    forward_args = "x, y" if head == "bmm" else "x"
    lines += (
        ["", f"    def forward(self, {forward_args}):"]
        + [f"        {line}" for line in b.forward]
        + ["        return x", "", ""]
    )
    lines.append(f"DTYPE = torch.{dtype}")
    small: dict[str, int | float] = {}
    for name, (full, small_value) in b.consts.items():
        lines.append(f"{name} = {full}")
        if small_value is not None:
            small[name] = small_value
    lines += [
        "",
        f"SMALL_SIZES = {small!r}",
        "",
        "",
        "def get_inputs():",
        f"    return [{', '.join(b.inputs)}]",
        "",
        "",
        "def get_init_inputs():",
        f"    return [{args}]",
        "",
    ]
    source = "\n".join(lines)
    name = _file_name(index, b.names)
    origin = Origin(
        "synthetic",
        f"synthetic:{config.seed}/{index}",
        package="kernelrl",
        version=GENERATOR_VERSION,
        license="same as KernelRL",
        symbol=chain,
    )
    return CandidateProblem(
        name,
        source,
        origin,
        level=structural_level(source),
        facts={"synthetic": {"head": head, "chain": b.names, "dtype": dtype}},
    )


def generate(config: SyntheticConfig = SyntheticConfig()) -> Iterator[CandidateProblem]:
    for index in range(config.count):
        yield generate_one(index, config)
