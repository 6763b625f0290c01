"""Synthetic solved problems for the SFT warm start: KernelBench-format programs with Triton solutions.

Small models cold-start on kernels: SmolLM2-135M writes no parsable Triton kernel for the easiest built-in
problems (docs/training-notes.md), so group-relative RL has no reward spread to learn from. The warm start
teaches the answer's shape on problems the RL run never sees: elementwise maps of one, two and three inputs
(ReLU-named ones written with tl.maximum, since Triton has no tl.relu), maps whose module holds scalar
parameters (`get_init_inputs()` non-empty: the solution keeps them in `__init__` and passes them to its kernel
as arguments) and row reductions, generated from templates here, each with a Triton solution written in the
built-in references' style. Every pair is verified by the evaluator before it is used (rl.warmstart.stage), so
a template mistake drops the pair instead of teaching a wrong kernel.

Decontamination: no op here is one of the built-in problems, and none differs from a held-out validation
problem of the default run (leaky_relu, gelu_tanh, swish, softplus, row_sum, row_max) by a constant: no
leaky/elu/threshold variants, no x*sigmoid(a*x), no log(1 + exp(a*x)), no tanh-GELU, no plain row sum, row min
or absmax. The ReLU-named ops (max(x, 0)^2, max(-x, 0), max(x + y, 0)) are none of them leaky_relu
(max(x, 0) + a * min(x, 0)) for any slope a, and no op is a training problem's own computation (the
three-input ops teach the shape of x * y + z without computing it; the parameterised ones teach how a module's
scalar reaches the kernel, which scale_shift, clamp and leaky_relu need, without computing any of them).
tests/unit/test_warmstart.py measures the held-out half: no one-input op equals c0 + c1 * held_out(a * x)
(+ c2 * x) for any input scale a or held-out parameter near its default. `CONTAMINATION_NOTE` says so in the
warm start's record.
"""

from __future__ import annotations

import dataclasses
import random

__all__ = ["CONTAMINATION_NOTE", "SyntheticSolved", "synthetic_solved"]

CONTAMINATION_NOTE = (
    "synthetic ops exclude the built-in problems and constant variants of the default "
    "validation problems (leaky_relu, gelu_tanh, swish, softplus, row_sum, row_max)"
)


@dataclasses.dataclass(frozen=True)
class SyntheticSolved:
    problem_id: str
    source: str  # KernelBench-format problem (class Model, sizes, get_inputs, get_init_inputs)
    solution: str  # a module defining ModelNew with its own @triton.jit kernel


# (name, what it computes, PyTorch expression, Triton expression); both over `x` (and `y` for two inputs).
_UNARY = [
    ("abs", "Elementwise absolute value", "torch.abs(x)", "tl.abs(x)"),
    ("negate", "Elementwise negation", "-x", "-x"),
    ("square", "Elementwise square", "x * x", "x * x"),
    ("cube", "Elementwise cube", "x * x * x", "x * x * x"),
    ("exp", "Elementwise exponential", "torch.exp(x)", "tl.exp(x)"),
    ("tanh", "Elementwise hyperbolic tangent", "torch.tanh(x)", "2.0 / (1.0 + tl.exp(-2.0 * x)) - 1.0"),
    ("relu6", "ReLU capped at 6", "torch.clamp(x, 0.0, 6.0)", "tl.minimum(tl.maximum(x, 0.0), 6.0)"),
    ("hardtanh", "Clip to [-1, 1]", "torch.clamp(x, -1.0, 1.0)", "tl.minimum(tl.maximum(x, -1.0), 1.0)"),
    ("softsign", "Softsign: x / (1 + |x|)", "x / (1.0 + torch.abs(x))", "x / (1.0 + tl.abs(x))"),
    (
        "hardsigmoid",
        "Hard sigmoid: clip(x / 6 + 0.5, 0, 1)",
        "torch.clamp(x / 6.0 + 0.5, 0.0, 1.0)",
        "tl.minimum(tl.maximum(x / 6.0 + 0.5, 0.0), 1.0)",
    ),
    ("sqrt_abs", "Square root of the absolute value", "torch.sqrt(torch.abs(x))", "tl.sqrt(tl.abs(x))"),
    ("sin", "Elementwise sine", "torch.sin(x)", "tl.sin(x)"),
    ("cos", "Elementwise cosine", "torch.cos(x)", "tl.cos(x)"),
    ("gaussian", "Gaussian bump: exp(-x^2)", "torch.exp(-x * x)", "tl.exp(-x * x)"),
    ("inverse_quadratic", "1 / (1 + x^2)", "1.0 / (1.0 + x * x)", "1.0 / (1.0 + x * x)"),
    ("affine", "x * 0.5 - 2.0", "x * 0.5 - 2.0", "x * 0.5 - 2.0"),
    # torch.relu has no tl.relu: written with tl.maximum (the model wrote tl.relu for every ReLU-named op)
    (
        "relu_squared",
        "Squared ReLU: max(x, 0)^2",
        "torch.relu(x) * torch.relu(x)",
        "tl.maximum(x, 0.0) * tl.maximum(x, 0.0)",
    ),
    ("relu_negated", "ReLU of the negation: max(-x, 0)", "torch.relu(-x)", "tl.maximum(-x, 0.0)"),
]
_BINARY = [
    ("subtract", "Elementwise difference x - y", "x - y", "x - y"),
    ("multiply", "Elementwise product x * y", "x * y", "x * y"),
    ("maximum", "Elementwise maximum of two tensors", "torch.maximum(x, y)", "tl.maximum(x, y)"),
    ("minimum", "Elementwise minimum of two tensors", "torch.minimum(x, y)", "tl.minimum(x, y)"),
    ("squared_difference", "Elementwise (x - y)^2", "(x - y) * (x - y)", "(x - y) * (x - y)"),
    ("average", "Elementwise mean of two tensors", "(x + y) * 0.5", "(x + y) * 0.5"),
    ("lerp", "Linear interpolation x + 0.25 * (y - x)", "x + 0.25 * (y - x)", "x + 0.25 * (y - x)"),
    ("positive_gap", "max(x - y, 0)", "torch.clamp(x - y, min=0.0)", "tl.maximum(x - y, 0.0)"),
    ("relu_of_sum", "ReLU of the sum: max(x + y, 0)", "torch.relu(x + y)", "tl.maximum(x + y, 0.0)"),
]
# three same-shape inputs (x, y, z): the kernel's pointer list, loads and launch grow by one
_TERNARY = [
    ("sum_of_three", "Elementwise sum of three tensors x + y + z", "x + y + z", "x + y + z"),
    ("product_of_three", "Elementwise product of three tensors x * y * z", "x * y * z", "x * y * z"),
    ("sum_then_scale", "Elementwise (x + y) * z", "(x + y) * z", "(x + y) * z"),
    (
        "select_by_sign",
        "Elementwise select: y where x > 0, else z",
        "torch.where(x > 0, y, z)",
        "tl.where(x > 0, y, z)",
    ),
    ("maximum_plus", "Elementwise max(x, y) + z", "torch.maximum(x, y) + z", "tl.maximum(x, y) + z"),
]
# Elementwise maps with scalar parameters held by the module: (name, what it computes, inputs, parameters and
# their values, PyTorch expression over self.<parameter>, Triton expression over the kernel's scalar argument).
# Without them no pair had init inputs, and the warm-started model never passed a module's scalar to a kernel
# (docs/gpu-notes.md, session 25).
_SCALAR = [
    ("axpy", "x + alpha * y", 2, {"alpha": 0.75}, "x + self.alpha * y", "x + alpha * y"),
    (
        "weighted_mix",
        "Interpolation x + w * (y - x) by a weight",
        2,
        {"w": 0.3},
        "x + self.w * (y - x)",
        "x + w * (y - x)",
    ),
    (
        "linear_combination",
        "a * x + b * y",
        2,
        {"a": 1.5, "b": -0.5},
        "self.a * x + self.b * y",
        "a * x + b * y",
    ),
    ("scaled_difference", "alpha * (x - y)", 2, {"alpha": 2.0}, "self.alpha * (x - y)", "alpha * (x - y)"),
    ("sine_frequency", "sin(omega * x)", 1, {"omega": 2.5}, "torch.sin(self.omega * x)", "tl.sin(omega * x)"),
    ("cosine_phase", "cos(x + phi)", 1, {"phi": 0.4}, "torch.cos(x + self.phi)", "tl.cos(x + phi)"),
    (
        "offset_square",
        "Squared distance from c: (x - c)^2",
        1,
        {"c": 0.25},
        "(x - self.c) * (x - self.c)",
        "(x - c) * (x - c)",
    ),
    (
        "exp_decay",
        "Exponential decay exp(-rate * |x|)",
        1,
        {"rate": 1.5},
        "torch.exp(-self.rate * torch.abs(x))",
        "tl.exp(-rate * tl.abs(x))",
    ),
    (
        "gaussian_width",
        "Gaussian bump of width sigma: exp(-x^2 / (2 sigma^2))",
        1,
        {"sigma": 1.25},
        "torch.exp(-x * x / (2.0 * self.sigma * self.sigma))",
        "tl.exp(-x * x / (2.0 * sigma * sigma))",
    ),
    (
        "soft_shrink",
        "Soft shrinkage towards 0 by lambd: x - lambd above it, x + lambd below -lambd, else 0",
        1,
        {"lambd": 0.5},
        "torch.nn.functional.softshrink(x, self.lambd)",
        "tl.where(x > lambd, x - lambd, tl.where(x < -lambd, x + lambd, 0.0))",
    ),
]
# (name, what it computes, PyTorch expression, per-element Triton term summed over a row, finish of the sum)
_ROWS = [
    ("row_sum_squares", "Sum of squares of each row", "(x * x).sum(dim=-1)", "x * x", "total"),
    ("row_l2_norm", "Euclidean norm of each row", "torch.sqrt((x * x).sum(dim=-1))", "x * x", "tl.sqrt(total)"),
    ("row_abs_sum", "Sum of absolute values of each row", "torch.abs(x).sum(dim=-1)", "tl.abs(x)", "total"),
    ("row_mean_abs", "Mean absolute value of each row", "torch.abs(x).mean(dim=-1)", "tl.abs(x)", "total / n_cols"),
    ("row_mean_square", "Mean of squares of each row", "(x * x).mean(dim=-1)", "x * x", "total / n_cols"),
    ("row_sum_exp", "Sum of exponentials of each row", "torch.exp(x).sum(dim=-1)", "tl.exp(x)", "total"),
]

# Small sizes (the CPU interpreter's) that vary and are not powers of two, so BLOCK is never a size of the
# problem: with dim 1000 in every pair the model copied a problem's small dim into BLOCK (swish's 1337), which
# tl.arange rejects. None is a built-in problem's small size.
_SMALL_COLS = [513, 900, 999, 1234, 1555, 1800, 2047, 3000]

_HEADER = '"""{doc}."""\nimport torch\nimport torch.nn as nn\n'
_MODEL = """

class Model(nn.Module):
    def __init__(self{init_args}):
        super().__init__(){init_body}

    def forward(self, {args}) -> torch.Tensor:
        return {expr}


{sizes}

SMALL_SIZES = {small}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return [{init_inputs}]
"""
_ELEMENTWISE_SOLUTION = '''"""Triton {name} over the flattened tensor{s}."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _{name}_kernel({ptrs}, out_ptr, {params}n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
{loads}
    tl.store(out_ptr + offs, {expr}, mask=mask)


class ModelNew(nn.Module):
    def __init__(self{init_args}):
        super().__init__(){init_body}

    def forward(self, {args}) -> torch.Tensor:
        {contiguous}
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        n = x.numel()
        BLOCK = {block}
        _{name}_kernel[(triton.cdiv(n, BLOCK),)]({names}, out, {self_params}n, BLOCK=BLOCK, num_warps={warps})
        return out
'''
_ROW_SOLUTION = '''"""{doc}: one Triton program per row, looping over the row in blocks."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _{name}_kernel(x_ptr, out_ptr, n_cols, stride_row, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    row_ptr = x_ptr + row.to(tl.int64) * stride_row
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        idx = start + cols
        x = tl.load(row_ptr + idx, mask=idx < n_cols, other=0.0)
        acc += tl.where(idx < n_cols, {term}, 0.0)
    total = tl.sum(acc, axis=0)
    tl.store(out_ptr + row, {finish})


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n_rows, n_cols = x.shape
        out = torch.empty(n_rows, dtype=x.dtype, device=x.device)
        _{name}_kernel[(n_rows,)](x, out, n_cols, x.stride(0), BLOCK={block}, num_warps={warps})
        return out
'''


def _init(params: dict[str, float]) -> dict[str, str]:
    """The template fields of a module's scalar parameters (all empty without any)."""
    return {
        "init_args": "".join(f", {k}: float" for k in params),
        "init_body": "".join(f"\n        self.{k} = {k}" for k in params),
    }


def _elementwise(
    name: str,
    doc: str,
    torch_expr: str,
    tl_expr: str,
    inputs: int,
    rng: random.Random,
    index: int,
    params: dict[str, float] | None = None,
) -> SyntheticSolved:
    names = ["x", "y", "z"][:inputs]
    params = params or {}
    rows, cols = rng.choice([(8192, 8192), (16384, 4096), (4096, 16384), (16384, 16384)])
    small_rows, small_cols = rng.randint(3, 9), rng.choice(_SMALL_COLS)
    args = ", ".join(f"{n}: torch.Tensor" for n in names)
    source = _HEADER.format(doc=doc) + _MODEL.format(
        args=args,
        expr=torch_expr,
        sizes=f"batch_size = {rows}\ndim = {cols}" + "".join(f"\n{k} = {v}" for k, v in params.items()),
        small=f'{{"batch_size": {small_rows}, "dim": {small_cols}}}',
        inputs=", ".join(["torch.randn(batch_size, dim)"] * inputs),
        init_inputs=", ".join(params),
        **_init(params),
    )
    block = rng.choice([1024, 2048, 4096])
    solution = _ELEMENTWISE_SOLUTION.format(
        name=name,
        s="s" if inputs > 1 else "",
        ptrs=", ".join(f"{n}_ptr" for n in names),
        params="".join(f"{k}, " for k in params),
        loads="\n".join(f"    {n} = tl.load({n}_ptr + offs, mask=mask)" for n in names),
        expr=tl_expr,
        args=args,
        contiguous=(", ".join(names) + " = " + ", ".join(f"{n}.contiguous()" for n in names)),
        block=block,
        names=", ".join(names),
        self_params="".join(f"self.{k}, " for k in params),
        warps=rng.choice([4, 8]),
        **_init(params),
    )
    return SyntheticSolved(f"S{index:02d}_{name}", source, solution)


def _row(
    name: str, doc: str, torch_expr: str, term: str, finish: str, rng: random.Random, index: int
) -> SyntheticSolved:
    rows, cols = rng.choice([(8192, 65536), (4096, 131072), (16384, 32768)])
    small_rows, small_cols = rng.randint(3, 9), rng.choice(_SMALL_COLS) * 4
    source = _HEADER.format(doc=doc) + _MODEL.format(
        args="x: torch.Tensor",
        expr=torch_expr,
        sizes=f"rows = {rows}\ncols = {cols}",
        small=f'{{"rows": {small_rows}, "cols": {small_cols}}}',
        inputs="torch.randn(rows, cols)",
        init_inputs="",
        **_init({}),
    )
    solution = _ROW_SOLUTION.format(
        doc=doc, name=name, term=term, finish=finish, block=rng.choice([1024, 2048]), warps=rng.choice([4, 8])
    )
    return SyntheticSolved(f"S{index:02d}_{name}", source, solution)


def synthetic_solved(seed: int = 0) -> list[SyntheticSolved]:
    """Every template once; sizes, block sizes and warps drawn from `seed` (the same seed, the same set)."""
    rng = random.Random(seed)
    out: list[SyntheticSolved] = []
    for spec in _UNARY:
        out.append(_elementwise(*spec, inputs=1, rng=rng, index=len(out) + 1))
    for spec in _BINARY:
        out.append(_elementwise(*spec, inputs=2, rng=rng, index=len(out) + 1))
    for spec in _TERNARY:
        out.append(_elementwise(*spec, inputs=3, rng=rng, index=len(out) + 1))
    for spec in _ROWS:
        out.append(_row(*spec, rng=rng, index=len(out) + 1))
    for name, doc, inputs, params, torch_expr, tl_expr in _SCALAR:
        out.append(_elementwise(name, doc, torch_expr, tl_expr, inputs, rng, len(out) + 1, params))
    return out
