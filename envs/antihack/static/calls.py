"""References between functions: which of the module's own functions an expression or a call may run.

`refs` follows names, aliases, attributes, containers and the return values of the solution's own
functions (a class stands for its non-constructor methods); `direct_callees` and `constructors` are the
functions a call runs by name. A mixin of `_Index` (index.py), built on name resolution (resolve.py);
separate because reachability (reach.py) and the kernel marks are built from it, not from paths.
"""

from __future__ import annotations

import ast

from envs.antihack.static.names import _AUTOGRAD_ONLY, _CONSTRUCTION, _plain
from envs.antihack.static.scope import _Scope


class _Calls:
    def direct_callees(self, call: ast.Call, scope: _Scope) -> list[tuple[_Scope, int]]:
        """(function, index of the first argument among its parameters) for the solution's functions `call`
        runs by name: plain functions, constructors, and methods through self/super()/the class."""
        func, out = call.func, []
        if isinstance(func, ast.Name):
            kind, what = self.lookup(func.id, scope)
            if kind == "scope" and what.kind == "function" and not isinstance(what.node, ast.Lambda):
                out.append((what, 0))
            elif kind == "scope" and what.kind == "class":
                out += [(m, 1) for m in self.constructors(call, scope)]
        elif isinstance(func, ast.Attribute):
            cls, skip = self.member_owner(func.value, scope)
            bound = skip or self.self_class(func.value, scope) is not None  # not Cls.method(obj, x)
            for c in self.mro(cls)[1 if skip else 0 :] if cls is not None else []:
                m = c.defs.get(func.attr)
                if m is not None and m.kind == "function":
                    out.append((m, 1 if bound and m.self_name else 0))
        return out

    def refs(self, expr: ast.AST, scope: _Scope, seen: set | None = None) -> set[_Scope]:
        """Functions the value of `expr` may call into, through names, aliases, attributes, containers and
        the return values of the solution's own functions. Classes stand for their (non-constructor) methods."""
        seen = set() if seen is None else seen
        out: set[_Scope] = set()
        self.budget.enter()
        try:
            for node in ast.walk(expr):
                out |= self.node_refs(node, scope, seen)
        finally:
            self.budget.leave()
        return out

    def node_refs(self, node: ast.AST, scope: _Scope, seen: set) -> set[_Scope]:
        out: set[_Scope] = set()
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            home = self.home(node.id, scope)
            # every binding of the name in its scope: `def f(...)` and a later `f = torch.relu` both count
            what = home.defs.get(node.id) if home is not None else None
            if what is not None:
                out |= {what} if what.kind == "function" else self.class_refs(what, seen)
            for value, where in home.values.get(node.id, []) if home is not None else []:
                if id(value) not in seen:
                    seen.add(id(value))
                    out |= self.refs(value, where, seen)
        elif isinstance(node, ast.Attribute):
            cls, skip = self.member_owner(node.value, scope)
            if cls is not None:
                out |= self.member_refs(cls, node.attr, skip, seen)
        elif isinstance(node, ast.Lambda) and id(node) in self.lambdas:
            out.add(self.lambdas[id(node)])
        elif isinstance(node, ast.Call):  # what a helper returns, e.g. `pick_kernel(dtype)[grid](...)`
            callees = self.node_refs(node.func, scope, seen)
            out |= callees
            for f in callees:
                for ret in ast.walk(f.node):
                    if isinstance(ret, ast.Return) and ret.value is not None and id(ret) not in seen:
                        seen.add(id(ret))
                        out |= self.refs(ret.value, f, seen)
        return out

    def member_refs(self, cls: _Scope, attr: str, skip: bool, seen: set) -> set[_Scope]:
        out: set[_Scope] = set()
        for c in self.mro(cls)[1 if skip else 0 :]:
            d = c.defs.get(attr)
            if d is not None:
                out |= {d} if d.kind == "function" else self.class_refs(d, seen)
            for value, where in c.attrs.get(attr, []):
                if id(value) not in seen:
                    seen.add(id(value))
                    out |= self.refs(value, where, seen)
        return out

    def class_refs(self, cls: _Scope, seen: set) -> set[_Scope]:
        """Using a class (or an instance) can run any of its methods but not its constructor."""
        if id(cls) in seen:
            return set()
        seen.add(id(cls))
        autograd = any(
            _plain(q) in ("torch.autograd.Function", "torch.autograd.function.Function")
            for q in self.external_bases(cls)
        )
        out: set[_Scope] = set()
        for c in self.mro(cls):
            for name, m in c.methods().items():
                if name not in _CONSTRUCTION and not (autograd and name in _AUTOGRAD_ONLY):
                    out.add(m)
            for values in c.attrs.values():
                for value, where in values:
                    if id(value) not in seen:
                        seen.add(id(value))
                        out |= self.refs(value, where, seen)
        return out

    def constructors(self, call: ast.Call, scope: _Scope) -> set[_Scope]:
        """__init__/__new__ of the solution's classes that `call` instantiates."""
        out: set[_Scope] = set()
        if isinstance(call.func, ast.Name):
            kind, what = self.lookup(call.func.id, scope)
            if kind == "scope" and what.kind == "class":
                out |= {m for c in self.mro(what) for n, m in c.methods().items() if n in _CONSTRUCTION}
        return out
