"""Name resolution: what each name, attribute and call in a module may denote.

`_Index` parses a module once into scopes (`_Scope`: the module, classes, functions, lambdas) with
what each name is bound to, and answers "which dotted paths may this expression be" (`quals`) and
"which of the module's own functions may this expression call into" (`refs`). It is used on the
solution (through `_Analysis`) and on the reference problem (`reference.py`).
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
from typing import Callable

from envs.antihack.static.names import _AUTOGRAD_ONLY, _CONSTRUCTION, _JIT, _plain


@dataclasses.dataclass(eq=False, repr=False)
class _Scope:
    kind: str                          # "module", "class" or "function" (lambdas are functions)
    node: ast.AST
    name: str                          # used in reasons: "ModelNew.forward", "_launch.go"
    parent: _Scope | None               # lexical parent; a method's parent skips its class, as Python does
    outer: _Scope | None = None         # where the def statement runs (decorators, defaults)
    owner: _Scope | None = None         # for methods: the class
    self_name: str | None = None       # for methods: the first parameter
    kernel: bool = False
    defs: dict = dataclasses.field(default_factory=dict)      # nested functions/classes by name
    values: dict = dataclasses.field(default_factory=dict)    # name -> [(expr, scope)] assigned to it
    imports: dict = dataclasses.field(default_factory=dict)   # name -> dotted path
    stars: list = dataclasses.field(default_factory=list)     # `from m import *`
    locals: set = dataclasses.field(default_factory=set)      # other local names (parameters, loop vars)
    global_names: set = dataclasses.field(default_factory=set)
    attrs: dict = dataclasses.field(default_factory=dict)     # classes: self.X / class-body X -> [(expr, scope)]
    bases: list = dataclasses.field(default_factory=list)     # classes: [(expr, scope)]

    def __repr__(self) -> str:
        return f"_Scope({self.kind} {self.name})"

    def methods(self) -> dict[str, _Scope]:
        return {n: s for n, s in self.defs.items() if s.kind == "function"}


def _fold_str(e: ast.AST) -> str | None:
    """The value of a string built from constants ("comp" + "ile", "".join(["mat", "mul"]), f"{'x'}"), else None."""
    if isinstance(e, ast.Constant):
        return e.value if isinstance(e.value, str) else None
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add):
        left, right = _fold_str(e.left), _fold_str(e.right)
        return None if left is None or right is None else left + right
    if isinstance(e, ast.JoinedStr):
        parts = [_fold_str(v.value if isinstance(v, ast.FormattedValue) else v) for v in e.values]
        return None if None in parts else "".join(parts)
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr == "join" \
            and len(e.args) == 1 and isinstance(e.args[0], (ast.List, ast.Tuple)):
        sep, parts = _fold_str(e.func.value), [_fold_str(x) for x in e.args[0].elts]
        return None if sep is None or None in parts else sep.join(parts)
    return None


class _LiteralGetattr(ast.NodeTransformer):
    """getattr(x, "name") -> x.name, so spelling an attribute as a (constant) string does not hide it."""

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id == "getattr" and len(node.args) in (2, 3):
            name = _fold_str(node.args[1])
            if name is not None and name.isidentifier():
                return ast.copy_location(ast.Attribute(node.args[0], name, ast.Load()), node)
        return node


_NOISE = (ast.expr_context, ast.operator, ast.cmpop, ast.unaryop, ast.boolop)
_BINDINGS = (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign, ast.NamedExpr, ast.For, ast.AsyncFor,
             ast.comprehension, ast.withitem, ast.AugAssign, ast.ExceptHandler, ast.Global, ast.Nonlocal, ast.Call)


def _is_main_guard(node: ast.AST) -> bool:
    """`if __name__ == "__main__":`"""
    test = node.test if isinstance(node, ast.If) else None
    return isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq) and \
        {ast.dump(test.left), ast.dump(test.comparators[0])} == \
        {ast.dump(ast.Name("__name__", ast.Load())), ast.dump(ast.Constant("__main__"))}


class _Index:
    def __init__(self, source: str):
        tree = ast.parse(source)
        if "getattr" in source:
            tree = _LiteralGetattr().visit(tree)
        self.module = _Scope("module", tree, "module level", None)
        self.nodes: list[tuple[ast.AST, _Scope]] = []   # every node with the scope it runs in, in source order
        self.parents: dict[int, ast.AST] = {}
        self.functions: list[_Scope] = []
        self.classes: list[_Scope] = []
        self.lambdas: dict[int, _Scope] = {}            # module/class-level lambdas, which are scopes of their own
        self._quals: dict[tuple, set[str]] = {}
        # Any mention of __name__ besides the guards themselves may rebind it.
        self._name_is_fixed = source.count("__name__") == sum(map(_is_main_guard, tree.body))
        self._visit_all(tree.body, self.module)
        self._bind_arguments()
        self._mark_kernels()

    def _visit(self, node: ast.AST, scope: _Scope) -> None:
        if scope.kind == "module" and self._main_guard(node):
            return self._visit_all(node.orelse, scope)  # the harness imports the solution under another name
        self.nodes.append((node, scope))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or \
                (isinstance(node, ast.Lambda) and scope.kind != "function"):
            return self._function(node, scope)
        if isinstance(node, ast.ClassDef):
            return self._class(node, scope)
        if isinstance(node, _BINDINGS):
            self._bind(node, scope)
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, _NOISE):
                self.parents[id(child)] = node
                self._visit(child, scope)

    def _visit_all(self, nodes: list[ast.AST], scope: _Scope) -> None:
        for node in nodes:
            self._visit(node, scope)

    def _main_guard(self, node: ast.AST) -> bool:
        return self._name_is_fixed and _is_main_guard(node)

    def _function(self, node: ast.AST, scope: _Scope) -> None:
        is_lambda = isinstance(node, ast.Lambda)
        name = "<lambda>" if is_lambda else node.name
        f = _Scope("function", node, name if scope.kind == "module" else f"{scope.name}.{name}",
                  parent=scope.parent if scope.kind == "class" else scope, outer=scope,
                  owner=scope if scope.kind == "class" else None)
        self.functions.append(f)
        if is_lambda:
            self.lambdas[id(node)] = f
        else:
            scope.defs[node.name] = f
        args = node.args
        positional = args.posonlyargs + args.args
        decorators = getattr(node, "decorator_list", [])
        for expr in decorators + args.defaults + [d for d in args.kw_defaults if d is not None] + \
                [a.annotation for a in positional + args.kwonlyargs if a.annotation is not None]:
            self.parents[id(expr)] = node
            self._visit(expr, scope)  # these run where the def statement runs
        for a, d in list(zip(reversed(positional), reversed(args.defaults))) + \
                [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]:
            f.values[a.arg] = [(d, scope)]
        for a in positional + args.kwonlyargs + [x for x in (args.vararg, args.kwarg) if x]:
            if a.arg not in f.values:
                f.locals.add(a.arg)
        static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in decorators)
        if f.owner is not None and positional and not static:
            f.self_name = positional[0].arg
        for stmt in [node.body] if is_lambda else node.body:
            self.parents[id(stmt)] = node
            self._visit(stmt, f)

    def _class(self, node: ast.ClassDef, scope: _Scope) -> None:
        c = _Scope("class", node, node.name if scope.kind == "module" else f"{scope.name}.{node.name}", scope)
        scope.defs[node.name] = c
        self.classes.append(c)
        for expr in node.decorator_list + node.bases + [k.value for k in node.keywords]:
            self.parents[id(expr)] = node
            self._visit(expr, scope)
        c.bases = [(b, scope) for b in node.bases]
        for stmt in node.body:
            self.parents[id(stmt)] = node
            self._visit(stmt, c)

    # Bindings: what each name may hold, recorded per scope. Flow-insensitive on purpose.
    def _bind(self, node: ast.AST, scope: _Scope) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    scope.imports[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    scope.imports[top] = top
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            for alias in node.names:
                if alias.name == "*":
                    scope.stars.append(base)
                else:
                    scope.imports[alias.asname or alias.name] = f"{base}.{alias.name}" if base else alias.name
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                self._assign(target, node.value, scope)
        elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
            self._assign(node.target, node.value, scope)
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            # A loop variable holds an element of what it iterates over.
            self._assign(node.target, ast.Subscript(node.iter, ast.Constant(0), ast.Load()), scope)
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            self._assign(node.optional_vars, node.context_expr, scope)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            scope.locals.add(node.target.id)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            scope.locals.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            scope.global_names.update(node.names)
        elif isinstance(node, ast.Call) and len(node.args) >= 2:
            # self.register_buffer("name", value) and setattr(obj, "name", value) set attributes too.
            if isinstance(node.func, ast.Attribute) and node.func.attr == "register_buffer":
                obj, (name, value) = node.func.value, node.args[:2]
            elif isinstance(node.func, ast.Name) and node.func.id == "setattr" and len(node.args) == 3:
                obj, name, value = node.args
            else:
                return
            owner = self._class_of(obj, scope)
            if owner is not None and isinstance(name, ast.Constant) and isinstance(name.value, str):
                owner.attrs.setdefault(name.value, []).append((value, scope))

    def _assign(self, target: ast.AST, value: ast.expr, scope: _Scope) -> None:
        if isinstance(target, ast.Name):
            home = self.module if target.id in scope.global_names else scope
            home.values.setdefault(target.id, []).append((value, scope))
            if home.kind == "class":
                home.attrs.setdefault(target.id, []).append((value, scope))
        elif isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts) \
                    and not any(isinstance(e, ast.Starred) for e in target.elts + value.elts):
                for t, v in zip(target.elts, value.elts):
                    self._assign(t, v, scope)
            else:
                for t in target.elts:
                    self._assign(t, ast.Subscript(value, ast.Constant(0), ast.Load()), scope)
        elif isinstance(target, ast.Starred):
            self._assign(target.value, value, scope)
        elif isinstance(target, ast.Attribute):
            owner = self._class_of(target.value, scope)
            if owner is not None:
                owner.attrs.setdefault(target.attr, []).append((value, scope))

    def _class_of(self, expr: ast.AST, scope: _Scope) -> _Scope | None:
        """The solution's class whose attributes `expr.x = ...` sets: self/cls in a method, or the class by name."""
        cls = self.self_class(expr, scope)
        if cls is None and isinstance(expr, ast.Name):
            kind, what = self.lookup(expr.id, scope)
            cls = what if kind == "scope" and what.kind == "class" else None
        return cls

    def self_class(self, expr: ast.AST, scope: _Scope) -> _Scope | None:
        """The class when `expr` is the `self` (or `cls`) of an enclosing method."""
        if not isinstance(expr, ast.Name):
            return None
        s = scope
        while s is not None and s.kind == "function":
            if s.self_name == expr.id:
                return s.owner
            if expr.id in s.values or expr.id in s.locals or expr.id in s.defs:
                return None
            s = s.parent
        return None

    def _bind_arguments(self) -> None:
        """A parameter may hold what any call site passes (a kernel handed to a launcher, torch.relu to a helper)."""
        for node, scope in self.nodes:
            if not isinstance(node, ast.Call):
                continue
            for callee, shift in self.direct_callees(node, scope):
                args = callee.node.args
                positional = [a.arg for a in args.posonlyargs + args.args]
                named = set(positional) | {a.arg for a in args.kwonlyargs}
                for i, arg in enumerate(node.args):
                    if isinstance(arg, ast.Starred):
                        break
                    if i + shift < len(positional):
                        callee.values.setdefault(positional[i + shift], []).append((arg, scope))
                for kw in node.keywords:
                    if kw.arg in named:
                        callee.values.setdefault(kw.arg, []).append((kw.value, scope))

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
            for c in self.mro(cls)[1 if skip else 0:] if cls is not None else []:
                m = c.defs.get(func.attr)
                if m is not None and m.kind == "function":
                    out.append((m, 1 if bound and m.self_name else 0))
        return out

    def _mark_kernels(self) -> None:
        for f in self.functions:
            for d in getattr(f.node, "decorator_list", []):
                if self.quals(d.func if isinstance(d, ast.Call) else d, f.outer) & _JIT:
                    f.kernel = True
        # kernel = triton.jit(_impl), possibly inside triton.autotune(...)(...)
        for node, scope in self.nodes:
            if isinstance(node, ast.Call) and node.args and self.quals(node.func, scope) & _JIT:
                for s in self.refs(node.args[0], scope):
                    s.kernel = True

    # --- resolution ------------------------------------------------------------------------------
    def lookup(self, name: str, scope: _Scope) -> tuple[str, object]:
        s = scope
        while s is not None:
            if name in s.defs:
                return "scope", s.defs[name]
            if name in s.values:
                return "values", s.values[name]
            if name in s.imports:
                return "path", s.imports[name]
            if name in s.locals:
                return "local", None
            s = s.parent
        if name == "__builtins__":
            return "path", "builtins"
        if hasattr(builtins, name):
            return "path", f"builtins.{name}"
        if self.module.stars:
            return "paths", [f"{m}.{name}" for m in self.module.stars]
        return "path", f"?{name}"

    def quals(self, expr: ast.AST, scope: _Scope) -> set[str]:
        """Dotted paths `expr` may denote (see the module docstring for the markers)."""
        if isinstance(expr, ast.Name):
            return self._memo(("name", id(scope), expr.id), lambda: self._name_quals(expr.id, scope))
        if isinstance(expr, ast.Attribute):
            cls, skip = self.member_owner(expr.value, scope)
            if cls is not None:
                return self._memo(("member", id(cls), expr.attr, skip),
                                  lambda: self._member_quals(cls, expr.attr, skip))
            return {f"{q}.{expr.attr}" for q in self.quals(expr.value, scope)}
        if isinstance(expr, ast.Call):
            func = self.quals(expr.func, scope)
            if func & {"builtins.__import__", "importlib.import_module"} and expr.args \
                    and _fold_str(expr.args[0]) is not None:
                return {_fold_str(expr.args[0])}
            out = {q + "()" for q in func}
            for f in self._local_functions(expr.func, scope):  # what the solution's own function returns
                out |= self._memo(("returns", id(f)), lambda f=f: set().union(
                    *(self.quals(r.value, f) for r in ast.walk(f.node) if isinstance(r, ast.Return) and r.value)))
            return out
        if isinstance(expr, ast.Subscript):
            base = self.quals(expr.value, scope)
            key = _fold_str(expr.slice)
            if key is not None and base & {"sys.modules", "builtins"}:  # dict-style module lookups
                return {key} if "sys.modules" in base else {f"builtins.{key}"}
            elements = set().union(*(self.quals(e, s) for e, s in self._elements(expr.value, scope, set())))
            return {q + "[]" for q in base} | elements
        if isinstance(expr, ast.IfExp):
            return self.quals(expr.body, scope) | self.quals(expr.orelse, scope)
        if isinstance(expr, ast.BoolOp):
            return set().union(*(self.quals(v, scope) for v in expr.values))
        if isinstance(expr, ast.NamedExpr):
            return self.quals(expr.value, scope)
        return set()

    def origins(self, expr: ast.AST, scope: _Scope, seen: set | None = None) -> set[str]:
        """Paths of everything `expr` is computed from, through local names (`for m in sys.modules.values()`)."""
        seen = set() if seen is None else seen
        out: set[str] = set()
        for node in ast.walk(expr):
            if isinstance(node, (ast.Name, ast.Attribute)):
                out |= self.quals(node, scope)
            if isinstance(node, ast.Name):
                kind, what = self.lookup(node.id, scope)
                for value, where in what if kind == "values" else []:
                    if id(value) not in seen:
                        seen.add(id(value))
                        out |= self.origins(value, where, seen)
        return out

    def _local_functions(self, expr: ast.AST, scope: _Scope) -> list[_Scope]:
        if isinstance(expr, ast.Name):
            kind, what = self.lookup(expr.id, scope)
            if kind == "scope" and what.kind == "function":
                return [what]
        return []

    def strings(self, expr: ast.AST, scope: _Scope) -> set[str]:
        """The constant strings `expr` may hold: a literal, or a name bound to literals or looping over them."""
        folded = _fold_str(expr)
        if folded is not None:
            return {folded}
        if not isinstance(expr, ast.Name):
            return set()
        kind, what = self.lookup(expr.id, scope)
        values = [(v, w) for v, w in what] if kind == "values" else []
        out = {_fold_str(v) for v, _ in values} | {_fold_str(e) for v, w in values if isinstance(v, ast.Subscript)
                                                    for e, _ in self._elements(v.value, w, set())}
        return out - {None}

    def _elements(self, expr: ast.AST, scope: _Scope, seen: set) -> list[tuple[ast.expr, _Scope]]:
        """The elements of the list/tuple/set/dict literals `expr` may be (ops = [torch.relu]; ops[0](x))."""
        if id(expr) in seen:
            return []
        seen.add(id(expr))
        if isinstance(expr, (ast.List, ast.Tuple, ast.Set)):
            return [(e, scope) for e in expr.elts]
        if isinstance(expr, ast.Dict):
            return [(e, scope) for e in expr.values]
        values = []
        if isinstance(expr, ast.Name):
            kind, what = self.lookup(expr.id, scope)
            values = what if kind == "values" else []
        elif isinstance(expr, ast.Attribute):
            cls, skip = self.member_owner(expr.value, scope)
            values = [v for c in self.mro(cls)[1 if skip else 0:] for v in c.attrs.get(expr.attr, [])] if cls else []
        return [e for v, w in values for e in self._elements(v, w, seen)]

    def _memo(self, key: tuple, compute: Callable[[], set[str]]) -> set[str]:
        if key not in self._quals:
            self._quals[key] = set()  # what a cycle (x = x.view(...)) sees while x is being resolved
            self._quals[key] = compute()
        return self._quals[key]

    def _name_quals(self, name: str, scope: _Scope) -> set[str]:
        kind, what = self.lookup(name, scope)
        if kind == "path":
            return {what}
        if kind == "paths":
            return set(what)
        if kind == "values":
            return set().union(*(self.quals(value, where) for value, where in what))
        return set()

    def member_owner(self, expr: ast.AST, scope: _Scope) -> tuple[_Scope | None, bool]:
        """(class, skip_it) when `expr` is self/cls (look up from the class) or super() (from its bases)."""
        cls = self.self_class(expr, scope)
        if cls is not None:
            return cls, False
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "super":
            s = scope
            while s is not None and s.kind == "function" and s.owner is None:
                s = s.parent
            if s is not None and s.owner is not None:
                return s.owner, True
        if isinstance(expr, ast.Name):
            kind, what = self.lookup(expr.id, scope)
            if kind == "scope" and what.kind == "class":
                return what, False
        return None, False

    def mro(self, cls: _Scope) -> list[_Scope]:
        order, todo = [], [cls]
        while todo:
            c = todo.pop(0)
            if c in order:
                continue
            order.append(c)
            for base, where in c.bases:
                if isinstance(base, ast.Name):
                    kind, what = self.lookup(base.id, where)
                    if kind == "scope" and what.kind == "class":
                        todo.append(what)
        return order

    def external_bases(self, cls: _Scope) -> set[str]:
        return {q for c in self.mro(cls) for base, where in c.bases for q in self.quals(base, where)}

    def _member_quals(self, cls: _Scope, attr: str, skip: bool) -> set[str]:
        out, found = set(), False
        for c in self.mro(cls)[1 if skip else 0:]:
            found = found or attr in c.defs
            for value, where in c.attrs.get(attr, []):
                found = True
                out |= self.quals(value, where)
        if not found:  # inherited from a class outside the module, e.g. nn.Module.register_buffer
            out |= {f"{q}.{attr}" for q in self.external_bases(cls)}
        return out

    # --- references between functions -------------------------------------------------------------
    def refs(self, expr: ast.AST, scope: _Scope, seen: set | None = None) -> set[_Scope]:
        """Functions the value of `expr` may call into, through names, aliases, attributes, containers and
        the return values of the solution's own functions. Classes stand for their (non-constructor) methods."""
        seen = set() if seen is None else seen
        out: set[_Scope] = set()
        for node in ast.walk(expr):
            out |= self.node_refs(node, scope, seen)
        return out

    def node_refs(self, node: ast.AST, scope: _Scope, seen: set) -> set[_Scope]:
        out: set[_Scope] = set()
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            kind, what = self.lookup(node.id, scope)
            if kind == "scope":
                out |= {what} if what.kind == "function" else self.class_refs(what, seen)
            elif kind == "values":
                for value, where in what:
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
        for c in self.mro(cls)[1 if skip else 0:]:
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
        autograd = any(_plain(q) in ("torch.autograd.Function", "torch.autograd.function.Function")
                       for q in self.external_bases(cls))
        out: set[_Scope] = set()
        for c in self.mro(cls):
            for name, m in c.methods().items():
                if name not in _CONSTRUCTION and not (autograd and name in _AUTOGRAD_ONLY):
                    out.add(m)
            for name, values in c.attrs.items():
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
