"""The ops a problem computes with, as tokens: the offline stand-in for what a code-embedding model sees when it
calls `nn.GELU()` and `torch.nn.functional.gelu(x)` the same problem.

Every call whose name is a PyTorch op (a public name of torch, torch.Tensor, torch.nn.functional, or an
nn.Module class of torch.nn) and every arithmetic operator becomes a token, lowercased with underscores
dropped (`LeakyReLU` and `leaky_relu` -> `leakyrelu`); names ending in 1d/2d/3d also give the stem
(`batchnorm2d` -> `batchnorm`). Tensor creation, shape and dtype plumbing are not ops (they are in every
problem).
"""

from __future__ import annotations

import ast
import functools
import re

__all__ = ["op_tokens"]

_BINOPS = {
    ast.Add: "add",
    ast.Sub: "sub",
    ast.Mult: "mul",
    ast.Div: "div",
    ast.MatMult: "matmul",
    ast.Pow: "pow",
    ast.FloorDiv: "floordiv",
    ast.Mod: "remainder",
}
_NOT_OPS = {
    "randn",
    "rand",
    "randint",
    "zeros",
    "ones",
    "empty",
    "tensor",
    "full",
    "arange",
    "zeroslike",
    "oneslike",
    "emptylike",
    "randnlike",
    "size",
    "view",
    "reshape",
    "contiguous",
    "to",
    "float",
    "half",
    "double",
    "long",
    "int",
    "bool",
    "dim",
    "numel",
    "item",
    "expand",
    "expandas",
    "permute",
    "transpose",
    "unsqueeze",
    "squeeze",
    "flatten",
    "clone",
    "detach",
    "parameter",
    "module",
    "type",
    "device",
    "dtype",
    "istensor",
    "nograd",
    "manualseed",
    "registerbuffer",
    "registerparameter",
    "resetparameters",
    "extrarepr",
    "cuda",
    "cpu",
    "t",
    "get",
    "apply",
    "format",
    "join",
    "append",
    "items",
    "keys",
    "values",
    "copy",
    "fill",
    "uniform",
    "normal",
    "kaiminguniform",
    "xavieruniform",
    "calculatefaninandfanout",
    "isfloatingpoint",
    "stride",
    "dataptr",
    "new",
    "newempty",
    "newzeros",
    "requiresgrad",
    "any",
    "all",
    "where",
    "range",
    "list",
    "tuple",
    "len",
    "super",
    "init",
    "forward",
    "isinstance",
}


def _key(name: str) -> str:
    return name.replace("_", "").lower()


@functools.lru_cache(maxsize=1)
def _vocabulary() -> frozenset[str]:
    import torch
    import torch.nn.functional as F

    names = {_key(n) for n in dir(torch) if not n.startswith("_")}
    names |= {_key(n) for n in dir(torch.Tensor) if not n.startswith("_")}
    names |= {_key(n) for n in dir(F) if not n.startswith("_")}
    names |= {
        _key(n)
        for n in dir(torch.nn)
        if isinstance(getattr(torch.nn, n, None), type) and issubclass(getattr(torch.nn, n), torch.nn.Module)
    }
    return frozenset(names - _NOT_OPS)


_DIMS = re.compile(r"^(.+?)[123]d$")


def op_tokens(source: str) -> list[str]:
    vocabulary = _vocabulary()
    tokens: list[str] = []
    # The model's code only: module constants (`N = 2048 * 2`) and input builders are not the computation.
    roots = [
        n
        for n in ast.parse(source).body
        if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name not in ("get_inputs", "get_init_inputs")
    ]
    for node in (sub for root in roots for sub in ast.walk(root)):
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            tokens.append(_BINOPS[type(node.op)])
        elif isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
            if name is None or (
                isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self"
            ):
                continue
            key = _key(name)
            if key in vocabulary:
                tokens.append(key)
                if m := _DIMS.match(key):
                    tokens.append(m.group(1))
    return tokens
