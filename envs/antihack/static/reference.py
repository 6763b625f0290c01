"""The reference problem: which ops `Model.forward` computes with.

`_reference` indexes the problem's source and records the normalised names of the ops its `Model`
uses, so that reasons can say a solution's PyTorch call is the problem's main computation, and so that
copies and casts count as compute when moving data is the whole problem (a concat or transpose-copy).
"""

from __future__ import annotations

import ast
import dataclasses
import functools

from envs.antihack.static.index import _Index
from envs.antihack.static.names import (
    _CONSTRUCTION,
    _MOVEMENT_KEYS,
    _NN_MODULE_CALL,
    _OP_KEYS,
    _is_module_path,
    _norm_key,
)


# Ops whose cost grows faster than their data (GEMMs, convolutions, attention, recurrences): where the
# reference has one, it is the main computation and the reference's other ops are cheap beside it.
_HEAVY = frozenset(
    {
        "matmul",
        "conv",
        "conv_transpose1d",
        "conv_transpose2d",
        "conv_transpose3d",
        "convtranspose1d",
        "convtranspose2d",
        "convtranspose3d",
        "scaled_dot_product_attention",
        "multiheadattention",
        "bilinear",
        "tensordot",
        "lstm",
        "gru",
        "rnn",
        "transformer",
        "transformerencoderlayer",
        "transformerdecoderlayer",
    }
)


@dataclasses.dataclass(frozen=True)
class _Reference:
    ops: frozenset[str]  # normalised names of what Model.forward computes with
    pure_movement: bool  # it only allocates, views, copies or casts

    @property
    def main_ops(self) -> frozenset[str]:
        """The reference's heavy ops if it has any, else all of its ops."""
        return (self.ops & _HEAVY) or self.ops

    @property
    def heavy(self) -> bool:
        return bool(self.ops & _HEAVY)


@functools.lru_cache(maxsize=256)  # asked once per candidate, of a problem set's few sources
def _reference(problem_source: str | None) -> _Reference | None:
    if not problem_source:
        return None
    try:
        a = _Index(problem_source)
    except (SyntaxError, ValueError):
        return None
    kind, cls = a.lookup("Model", a.module)
    if kind != "scope" or cls.kind != "class":
        return None
    keys: set[str] = set()
    for name, m in cls.methods().items():
        if name in _CONSTRUCTION:
            continue
        for node in ast.walk(m.node):
            if isinstance(node, (ast.BinOp, ast.UnaryOp)) and type(node.op) in _OP_KEYS:
                keys.add(_OP_KEYS[type(node.op)])
            elif isinstance(node, ast.Call):
                paths = a.quals(node.func, m)
                for q in paths:
                    match = _NN_MODULE_CALL.match(q)
                    if match:
                        keys.add(match.group(1))
                    elif q.startswith("torch.") and _is_module_path(q):
                        keys.add(q)
                if isinstance(node.func, ast.Attribute):
                    keys.add(node.func.attr)  # also tensor methods: x.sum(), torch.ones(...).triu(1)
    ops = frozenset(_norm_key(k) for k in keys)
    return _Reference(ops, bool(ops) and ops <= {_norm_key(k) for k in _MOVEMENT_KEYS})
