"""Tensor-type inference: which expressions on the forward path hold tensors.

Rules need it to tell PyTorch compute (`x + y` on tensors, `x.sum()`) from plain Python arithmetic on
ints, shapes and strides.
"""

from __future__ import annotations

import ast

from envs.antihack.static.index import _Scope
from envs.antihack.static.names import (
    _CPU_LIBRARIES,
    _META_METHODS,
    _NN_MODULE_CALL,
    _OP_KEYS,
    _PARAM_ATTRS,
    _TENSOR_ATTRS,
    _is_module_path,
    _torch_returns_tensor,
    _under,
)
from envs.antihack.static.reach import _Reachability


class _Tensors:
    """A flow-insensitive guess of which names on the forward path hold tensors: forward's inputs, what
    torch calls and tensor methods return, and what flows from those through assignments, loops, calls
    into the solution's own functions and their returns. Shapes, strides and sizes are ints, not tensors."""

    def __init__(self, a: _Reachability):
        self.a = a
        self.names: dict[_Scope, set[str]] = {f: self._tensor_params(f, f in a.roots) for f in a.forward}
        self.returns: set[_Scope] = set()
        self._busy: set[tuple] = set()
        changed = True
        while changed:
            changed = False
            for f in a.forward:
                before = (sum(map(len, self.names.values())), len(self.returns))
                self._step(f)
                changed |= before != (sum(map(len, self.names.values())), len(self.returns))

    @staticmethod
    def _tensor_params(f: _Scope, is_root: bool) -> set[str]:
        if isinstance(f.node, ast.Lambda):
            return set()
        args = f.node.args
        positional = args.posonlyargs + args.args
        defaults = {a.arg: d for a, d in zip(reversed(positional), reversed(args.defaults))}
        defaults.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None})
        out = set()
        for a in positional + args.kwonlyargs + ([args.vararg] if args.vararg else []):
            if a.arg == f.self_name:
                continue
            note = ast.unparse(a.annotation) if a.annotation is not None else None
            default = defaults.get(a.arg)
            if note is not None and "Tensor" in note:
                out.add(a.arg)
            elif (
                is_root
                and f.node.name in ("forward", "__call__")
                and note is None
                and not (isinstance(default, ast.Constant) and default.value is not None)
            ):
                out.add(a.arg)  # forward's inputs are tensors unless annotated or defaulted otherwise
        return out

    def _step(self, f: _Scope) -> None:
        for n in self.a.live(f):
            if isinstance(n, ast.Assign):
                for target in n.targets:
                    self._bind(target, n.value, f)
            elif isinstance(n, (ast.AnnAssign, ast.NamedExpr)) and n.value is not None:
                self._bind(n.target, n.value, f)
            elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name) and self.is_tensor(n.value, f):
                self.names[f].add(n.target.id)
            elif isinstance(n, (ast.For, ast.AsyncFor, ast.comprehension)):
                self._bind_loop(n.target, n.iter, f)
            elif isinstance(n, ast.withitem) and n.optional_vars is not None:
                self._bind(n.optional_vars, n.context_expr, f)
            elif isinstance(n, ast.Return) and n.value is not None and self.is_tensor(n.value, f):
                self.returns.add(f)
            elif isinstance(n, ast.Call):
                self._bind_call(n, f)

    def _bind(self, target: ast.AST, value: ast.AST, f: _Scope) -> None:
        if isinstance(target, ast.Name):
            if self.is_tensor(value, f):
                self.names[f].add(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
                for t, v in zip(target.elts, value.elts):
                    self._bind(t, v, f)
            elif self.is_tensor(value, f):  # q, k, v = x.chunk(3)
                self.names[f].update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(target, ast.Starred):
            self._bind(target.value, value, f)

    def _bind_loop(self, target: ast.AST, iterable: ast.AST, f: _Scope) -> None:
        paths = self.a.quals(iterable.func, f) if isinstance(iterable, ast.Call) else set()
        if "builtins.enumerate" in paths and iterable.args and isinstance(target, ast.Tuple) and len(target.elts) == 2:
            self._bind_loop(target.elts[1], iterable.args[0], f)
        elif "builtins.zip" in paths and isinstance(target, ast.Tuple) and len(target.elts) == len(iterable.args):
            for t, it in zip(target.elts, iterable.args):
                self._bind_loop(t, it, f)
        elif self.is_tensor(iterable, f):
            self.names[f].update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))

    def _bind_call(self, call: ast.Call, f: _Scope) -> None:
        """Tensor arguments make the callee's parameters tensors."""
        for callee, shift in self._callees(call, f):
            if callee not in self.names or isinstance(callee.node, ast.Lambda):
                continue
            params = [a.arg for a in callee.node.args.posonlyargs + callee.node.args.args]
            for i, arg in enumerate(call.args):
                if isinstance(arg, ast.Starred) or not self.is_tensor(arg, f):
                    continue
                if i + shift < len(params):
                    self.names[callee].add(params[i + shift])
                elif callee.node.args.vararg:
                    self.names[callee].add(callee.node.args.vararg.arg)
            for kw in call.keywords:
                if kw.arg and self.is_tensor(kw.value, f):
                    self.names[callee].add(kw.arg)

    def _callees(self, call: ast.Call, f: _Scope) -> list[tuple[_Scope, int]]:
        """(function, index of the first argument among its parameters) for the solution's functions that
        `call` runs: plain functions, bound methods, constructors and instances' forward/__call__."""
        func, out = call.func, self.a.direct_callees(call, f)
        if isinstance(func, ast.Name):
            kind, what = self.a.lookup(func.id, f)
            if kind == "values":
                out += [
                    (s, 0)
                    for v, w in what
                    if isinstance(v, (ast.Name, ast.Attribute))
                    for s in self.a.refs(v, w)
                    if not isinstance(s.node, ast.Lambda)
                ]
        elif isinstance(func, ast.Attribute):
            cls, skip = self.a.member_owner(func.value, f)
            for c in self.a.mro(cls)[1 if skip else 0 :] if cls is not None else []:
                for value, where in c.attrs.get(func.attr, []):
                    out += self._instance_calls(value, where)
        return out

    def _instance_calls(self, value: ast.AST, where: _Scope) -> list[tuple[_Scope, int]]:
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
            kind, cls = self.a.lookup(value.func.id, where)
            if kind == "scope" and cls.kind == "class":
                return [(m, 1) for c in self.a.mro(cls) for n, m in c.methods().items() if n in ("forward", "__call__")]
        if isinstance(value, (ast.Name, ast.Attribute)):
            return [(s, 0) for s in self.a.refs(value, where)]
        return []

    def _named(self, name: str, f: _Scope) -> bool:
        s = f
        while s is not None and s.kind == "function":
            if name in self.names.get(s, ()):
                return True
            if name in s.values or name in s.locals or name in s.defs:
                return False
            s = s.parent
        return False

    def is_tensor(self, e: ast.AST, f: _Scope) -> bool:
        if isinstance(e, ast.Name):
            return self._named(e.id, f)
        if isinstance(e, ast.Attribute):
            if e.attr in _TENSOR_ATTRS:
                return self.is_tensor(e.value, f)
            cls, skip = self.a.member_owner(e.value, f)
            if cls is not None:  # self.weight = nn.Parameter(...), register_buffer("scale", ...)
                key = (id(cls), e.attr)
                if key in self._busy:  # self.x = self.x * 2
                    return False
                self._busy.add(key)
                try:
                    return any(
                        self.is_tensor(v, w)
                        for c in self.a.mro(cls)[1 if skip else 0 :]
                        for v, w in c.attrs.get(e.attr, [])
                    )
                finally:
                    self._busy.discard(key)
            if e.attr in _PARAM_ATTRS:  # self.linear.weight
                return any(_NN_MODULE_CALL.match(q) for q in self.a.quals(e.value, f))
            return False
        if isinstance(e, (ast.Subscript, ast.Starred, ast.NamedExpr)):
            return self.is_tensor(e.value, f)
        if isinstance(e, ast.Call):
            return self._returns_tensor(e, f)
        if isinstance(e, ast.BinOp):
            return self.is_tensor(e.left, f) or self.is_tensor(e.right, f)
        if isinstance(e, ast.UnaryOp):
            return not isinstance(e.op, ast.Not) and self.is_tensor(e.operand, f)
        if isinstance(e, ast.Compare):
            return all(type(op) in _OP_KEYS for op in e.ops) and any(
                self.is_tensor(x, f) for x in [e.left, *e.comparators]
            )
        if isinstance(e, ast.IfExp):
            return self.is_tensor(e.body, f) or self.is_tensor(e.orelse, f)
        if isinstance(e, (ast.BoolOp, ast.Tuple, ast.List, ast.Set)):
            return any(self.is_tensor(v, f) for v in getattr(e, "values", None) or e.elts)
        return False

    def _returns_tensor(self, call: ast.Call, f: _Scope) -> bool:
        func = call.func
        if isinstance(func, ast.Attribute) and self.is_tensor(func.value, f):
            return func.attr not in _META_METHODS
        for q in self.a.quals(func, f):
            if _NN_MODULE_CALL.match(q):
                return True
            if q.startswith("torch.") and _is_module_path(q) and _torch_returns_tensor(q[len("torch.") :]):
                return True
            if _under(q, _CPU_LIBRARIES) and any(self.is_tensor(a, f) for a in call.args):
                return True
        return any(s in self.returns for s, _ in self._callees(call, f))
