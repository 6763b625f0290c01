"""The analysis of one solution that the rules query.

`_Analysis` is the solution's index and reachability (`reach.py`) plus the tensor guess
(`tensors.py`) and the reference problem (`reference.py`), with the questions rules ask: which kernels
a call launches, whether a node computes with PyTorch (`compute_op`), and the first use of a path
under some prefixes (`reference_finding`).
"""

from __future__ import annotations

import ast
from typing import Iterable

from envs.antihack.categories import check_category
from envs.antihack.static.index import _Scope
from envs.antihack.static.names import (
    _COMPUTE_METHODS,
    _HIGHER_ORDER,
    _NN_MODULE_CALL,
    _NN_NOT_MODULES,
    _OP_KEYS,
    _OP_SYMBOLS,
    _OPERATOR_MATH,
    _PY_MATH_BUILTINS,
    _TORCH_VALUES,
    _is_module_path,
    _method_kind,
    _norm_key,
    _plain,
    _short,
    _torch_kind,
    _under,
)
from envs.antihack.static.reach import _Reachability
from envs.antihack.static.reference import _Reference
from envs.antihack.static.tensors import _Tensors
from envs.guard import Budget
from envs.verdict import HackFinding


def _finding(category: str, reason: str) -> HackFinding:
    return HackFinding(check_category(category), reason)


def _params(f: _Scope) -> set[str]:
    args = f.node.args
    return {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg] if a}


class _Analysis(_Reachability):
    def __init__(self, source: str, reference: _Reference | None = None, budget: Budget | None = None):
        super().__init__(source, budget)
        self.reference = reference
        self._all_references: list | None = None
        self.method_names = {n for c in self.classes for n in c.methods()}
        self.tensors = _Tensors(self)

    # --- kernel launches ---------------------------------------------------------------------------
    def launched(self, call: ast.AST, scope: _Scope) -> set[_Scope] | str | None:
        """The solution's kernels that `call` launches (`k[grid](...)`, `k.run(..., grid=...)`), "param" for a
        launch of a kernel passed in as a parameter, None if `call` is no launch."""
        if not isinstance(call, ast.Call):
            return None
        if isinstance(call.func, ast.Subscript):
            target = call.func.value
        elif isinstance(call.func, ast.Attribute) and call.func.attr == "run":
            target = call.func.value
        else:
            return None
        kernels = {s for s in self.refs(target, scope) if s.kernel}
        if kernels:
            return kernels
        if isinstance(target, ast.Name) and scope.kind == "function" and target.id in _params(scope):
            return "param"
        return None

    # --- helpers for the rules ---------------------------------------------------------------------
    def where(self, scope: _Scope, node: ast.AST) -> str:
        line = getattr(node, "lineno", "?")
        if scope.kind == "module":
            return f"line {line} (module level)"
        if scope.kind == "class":
            return f"class {scope.name} line {line}"
        return f"{scope.name} line {line}"

    def references(self, nodes: Iterable[tuple[ast.AST, _Scope]]):
        """(node, scope, path) for every name, attribute chain or subscript, with its plain dotted path."""
        for node, scope in nodes:
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                continue
            if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)):
                parent = self.parents.get(id(node))
                if isinstance(parent, ast.Attribute) and parent.value is node:
                    continue  # only the whole chain: torch.cuda.Stream, not torch.cuda
                for q in sorted(self.quals(node, scope)):
                    yield node, scope, _plain(q)

    @property
    def all_references(self) -> list[tuple[ast.AST, _Scope, str]]:
        if self._all_references is None:
            self._all_references = list(self.references(self.nodes))
        return self._all_references

    def reference_finding(
        self, prefixes: tuple[str, ...], category: str, why: str = "", nodes=None
    ) -> HackFinding | None:
        """A finding naming the first use of anything under `prefixes`, and `why` it matters."""
        hit = self.first_reference(prefixes, nodes)
        if hit is None:
            return None
        node, scope, path = hit
        return _finding(category, f"{self.where(scope, node)} uses {path}{why}")

    def first_reference(self, prefixes: tuple[str, ...], nodes=None):
        for node, scope, path in self.all_references if nodes is None else self.references(nodes):
            if _under(path, prefixes):
                return node, scope, path
        return None

    def forward_nodes(self) -> list[tuple[ast.AST, _Scope]]:
        return [(n, f) for f in self.forward for n in self.live(f)]

    def compute_op(self, node: ast.AST, f: _Scope) -> tuple[str, str] | None:
        """(what it does, op name) when `node` computes with PyTorch, else None."""
        t = self.tensors
        if isinstance(node, ast.Call):
            return self._compute_call(node, f)
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.MatMult):
                return "uses the @ operator", "matmul"
            if t.is_tensor(node.left, f) or t.is_tensor(node.right, f):
                return f"applies {_OP_SYMBOLS[type(node.op)]} to tensors ({_short(node)})", _OP_KEYS[type(node.op)]
        if isinstance(node, ast.UnaryOp) and not isinstance(node.op, ast.Not) and t.is_tensor(node.operand, f):
            return f"applies {_OP_SYMBOLS[type(node.op)]} to a tensor ({_short(node)})", _OP_KEYS[type(node.op)]
        if (
            isinstance(node, ast.Compare)
            and all(type(op) in _OP_KEYS for op in node.ops)
            and any(t.is_tensor(x, f) for x in [node.left, *node.comparators])
        ):
            return f"compares tensors elementwise ({_short(node)})", _OP_KEYS[type(node.ops[0])]
        if isinstance(node, ast.AugAssign) and (t.is_tensor(node.target, f) or t.is_tensor(node.value, f)):
            sym = _OP_SYMBOLS[type(node.op)]
            return f"updates {_short(node.target)} with {sym}= on tensors", _OP_KEYS[type(node.op)]
        return None

    def _compute_call(self, call: ast.Call, f: _Scope) -> tuple[str, str] | None:
        func, t = call.func, self.tensors
        if isinstance(func, ast.Attribute) and t.is_tensor(func.value, f):
            return self._judge(_method_kind(func.attr), f"calls {_short(func)}()", func.attr)
        if isinstance(func, ast.Name):  # relu = x.relu; relu()
            kind, what = self.lookup(func.id, f)
            for value, where in what if kind == "values" else []:
                if isinstance(value, ast.Attribute) and where in t.names and t.is_tensor(value.value, where):
                    op = self._judge(_method_kind(value.attr), f"calls {func.id} (= {_short(value)})", value.attr)
                    if op:
                        return op
        paths = sorted(self.quals(func, f))
        for q in paths:
            m = _NN_MODULE_CALL.match(q)
            if m and m.group(1) not in _NN_NOT_MODULES:
                return f"calls {_short(func)}, an nn.{m.group(1)} module", m.group(1)
            if q.startswith("torch.") and _is_module_path(q):
                name = q[len("torch.") :]
                return self._judge(_torch_kind(name), f"calls torch.{name}", name)
            tensor_args = any(t.is_tensor(a, f) for a in call.args)
            if q.startswith("builtins.") and q[9:] in _PY_MATH_BUILTINS and tensor_args:
                return f"calls {q[9:]}() on a tensor", q[9:]
            if q.startswith("operator.") and q[9:] in _OPERATOR_MATH and tensor_args:
                return f"calls {q} on tensors", q[9:]
            if q in _HIGHER_ORDER:
                for arg in call.args + [k.value for k in call.keywords]:
                    for handed in sorted(self.quals(arg, f)):
                        name = handed[len("torch.") :]
                        if _NN_MODULE_CALL.match(handed) or (
                            handed.startswith("torch.")
                            and _is_module_path(handed)
                            and not _TORCH_VALUES.match(name)
                            and _torch_kind(name) == "compute"
                        ):
                            return f"hands {_short(arg)} to {q.split('.')[-1]}()", handed
        if (
            isinstance(func, ast.Attribute)
            and func.attr in _COMPUTE_METHODS
            and not self.quals(func.value, f)
            and func.attr not in self.method_names
        ):
            return f"calls {_short(func)}()", func.attr  # a receiver of unknown type, but only tensors have this
        return None

    def _judge(self, kind: str, what: str, key: str) -> tuple[str, str] | None:
        if kind == "ok":
            return None
        if kind == "move":  # copies/casts only count when moving data is the whole problem
            ref = self.reference
            return (what, key) if ref is not None and ref.pure_movement and _norm_key(key) in ref.ops else None
        return what, key

    def uses_main_op(self, key: str) -> bool:
        return self.reference is not None and _norm_key(key) in self.reference.main_ops

    def on_inputs(self, node: ast.AST, f: _Scope) -> bool:
        """Whether the compute `node` takes forward's own inputs (or views, slices or casts of them) as an
        operand: then it provably works on the problem's data rather than on a kernel's result."""
        if isinstance(node, ast.Call):
            operands = [*node.args, *(k.value for k in node.keywords)]
            if isinstance(node.func, ast.Attribute):
                operands.append(node.func.value)
        elif isinstance(node, ast.BinOp):
            operands = [node.left, node.right]
        elif isinstance(node, ast.UnaryOp):
            operands = [node.operand]
        elif isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
        elif isinstance(node, ast.AugAssign):
            operands = [node.target, node.value]
        else:
            return False
        flat: list[ast.AST] = []
        while operands:
            x = operands.pop()
            if isinstance(x, (ast.List, ast.Tuple)):
                operands.extend(x.elts)
            else:
                flat.append(x)
        return any(self._input_derived(x, f) for x in flat)

    def _input_derived(self, expr: ast.AST, f: _Scope, seen: frozenset[str] = frozenset()) -> bool:
        """`expr` is forward's input, or a view, slice or cast of one (through local names too)."""
        while True:
            if isinstance(expr, (ast.Subscript, ast.Starred)):
                expr = expr.value
            elif (
                isinstance(expr, ast.Call)
                and isinstance(expr.func, ast.Attribute)
                and _method_kind(expr.func.attr) in ("ok", "move")
            ):
                expr = expr.func.value  # x.view(...), x.contiguous(), x.float()
            elif isinstance(expr, ast.Attribute) and expr.attr in ("T", "mT", "data"):
                expr = expr.value
            else:
                break
        if not isinstance(expr, ast.Name) or f not in self.roots or expr.id == f.self_name:
            return False
        name = expr.id
        if name in seen:  # x = x.view(-1): as input-derived as x was
            return True
        param = name in _params(f) and name in self.tensors.names.get(f, set())
        stores = [n for n in self.live(f) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)]
        values = []
        for store in stores:  # every binding must be a plain assignment of an input-derived value
            parent = self.parents.get(id(store))
            if not (
                isinstance(parent, (ast.Assign, ast.AnnAssign))
                and parent.value is not None
                and (getattr(parent, "targets", None) or [parent.target]) == [store]
            ):
                return False
            values.append(parent.value)
        if not param and not values:
            return False
        return all(self._input_derived(v, f, seen | {name}) for v in values)
