"""Extract a class with what it needs from its module: the class, the in-file classes, functions and constants
it refers to (transitively, bases included), and the imports that bind the other names it uses, with relative
imports made absolute. The result runs on its own wherever the package it imports from is installed.

Only the AST is read; nothing is imported or executed here.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses

__all__ = ["ExtractError", "ModuleClass", "module_classes", "extract_class"]

_BUILTINS = set(dir(builtins)) | {"__name__", "__file__", "__class__"}


class ExtractError(ValueError):
    """The class cannot be pulled out on its own (the message names what is missing)."""


@dataclasses.dataclass(frozen=True)
class ModuleClass:
    name: str
    init_params: tuple[tuple[str, bool], ...]  # (name, has a default) of __init__ after self (own or inherited)
    init_varargs: bool  # *args/**kwargs in __init__: the signature says nothing about the required ones
    forward_params: tuple[tuple[str, bool], ...]
    forward_varargs: bool


def _top_level(tree: ast.Module) -> dict[str, ast.stmt]:
    defs: dict[str, ast.stmt] = {}
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            defs[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        defs[n.id] = node
    return defs


def _imports(tree: ast.Module, module: str, is_package: bool) -> dict[str, ast.stmt]:
    """Top-level name -> an import statement binding only it, relative imports resolved against `module`."""
    bound: dict[str, ast.stmt] = {}
    package = module if is_package else module.rpartition(".")[0]
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                name = alias.asname or alias.name.split(".")[0]
                bound[name] = ast.Import(names=[alias])
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                if node.level - 1 >= len(parts):
                    continue
                prefix = ".".join(parts[: len(parts) - (node.level - 1)])
                base = f"{prefix}.{base}" if base else prefix
            for alias in node.names:
                if alias.name == "*":
                    continue
                bound[alias.asname or alias.name] = ast.ImportFrom(module=base, names=[alias], level=0)
    return bound


def _used_names(node: ast.AST, lazy_annotations: bool) -> set[str]:
    """Names a definition reads when it is created or run (annotations only when they are evaluated)."""
    skip: set[int] = set()
    if lazy_annotations:
        for n in ast.walk(node):
            anns = []
            if isinstance(n, ast.AnnAssign):
                anns.append(n.annotation)
            elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                anns += [
                    a.annotation
                    for a in [*n.args.args, *n.args.kwonlyargs, *n.args.posonlyargs, n.args.vararg, n.args.kwarg]
                    if a is not None and a.annotation
                ]
                if n.returns is not None:
                    anns.append(n.returns)
            for a in anns:
                skip.update(id(x) for x in ast.walk(a))
    # Names bound inside the definition (arguments, locals, nested definitions, local imports) are not free.
    # Over-approximate: a name bound anywhere inside counts as local everywhere inside.
    local: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.arg):
            local.add(n.arg)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            local.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n is not node:
            local.add(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            local.update((a.asname or a.name).split(".")[0] for a in n.names)
        elif isinstance(n, ast.ExceptHandler) and n.name:
            local.add(n.name)
    return {
        n.id
        for n in ast.walk(node)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and id(n) not in skip and n.id not in local
    }


def _is_module_base(base: ast.expr, module_classes: set[str]) -> bool:
    if isinstance(base, ast.Name):
        return base.id == "Module" or base.id in module_classes
    if isinstance(base, ast.Attribute):
        return base.attr == "Module"
    return False


def _method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    for node in cls.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None


def _params(fn: ast.FunctionDef) -> tuple[tuple[tuple[str, bool], ...], bool]:
    args = [*fn.args.posonlyargs, *fn.args.args][1:]  # after self
    first_default = len(args) - len(fn.args.defaults)
    params = [(a.arg, i >= first_default) for i, a in enumerate(args)]
    params += [(a.arg, d is not None) for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults)]
    return tuple(params), fn.args.vararg is not None or fn.args.kwarg is not None


def module_classes(tree: ast.Module) -> list[ModuleClass]:
    """Public nn.Module subclasses of a file (bases resolved within the file) that have a forward, with the
    __init__ and forward signatures they get from themselves or the nearest in-file base."""
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    modules: set[str] = set()
    changed = True
    while changed:  # bases may be defined after their subclasses' names are first seen
        changed = False
        for name, cls in classes.items():
            if name not in modules and any(_is_module_base(b, modules) for b in cls.bases):
                modules.add(name)
                changed = True

    def inherited(cls: ast.ClassDef, method: str) -> ast.FunctionDef | None:
        seen: set[str] = set()
        while cls is not None and cls.name not in seen:
            seen.add(cls.name)
            if (fn := _method(cls, method)) is not None:
                return fn
            bases = [b.id for b in cls.bases if isinstance(b, ast.Name) and b.id in classes]
            cls = classes[bases[0]] if bases else None
        return None

    found = []
    for name in sorted(modules):
        if name.startswith("_"):
            continue
        forward = inherited(classes[name], "forward")
        if forward is None:
            continue
        init = inherited(classes[name], "__init__")
        init_params, init_var = _params(init) if init is not None else ((), False)
        fwd_params, fwd_var = _params(forward)
        found.append(ModuleClass(name, init_params, init_var, fwd_params, fwd_var))
    return found


def extract_class(source: str, class_name: str, module: str, is_package: bool = False) -> str:
    """The self-contained source of `class_name` from `source` (the file of dotted module `module`)."""
    tree = ast.parse(source)
    defs, imports = _top_level(tree), _imports(tree, module, is_package)
    if class_name not in defs or not isinstance(defs[class_name], ast.ClassDef):
        raise ExtractError(f"{module}: no top-level class {class_name}")
    lazy = any(
        isinstance(n, ast.ImportFrom) and n.module == "__future__" and any(a.name == "annotations" for a in n.names)
        for n in tree.body
    )
    needed_defs: set[int] = set()
    needed_imports: dict[str, ast.stmt] = {}
    todo, seen = [class_name], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in defs:
            node = defs[name]
            if id(node) not in needed_defs:
                needed_defs.add(id(node))
                todo += sorted(_used_names(node, lazy))
        elif name in imports:
            needed_imports[name] = imports[name]
        elif name not in _BUILTINS:
            raise ExtractError(
                f"{module}.{class_name}: uses {name!r}, which the file neither defines nor imports at top level"
            )
    body = [n for n in tree.body if id(n) in needed_defs]  # original order: definitions before uses
    header = ["from __future__ import annotations"] if lazy else []
    header += [ast.unparse(needed_imports[k]) for k in sorted(needed_imports)]
    return "\n".join(header) + "\n\n\n" + "\n\n\n".join(ast.unparse(n) for n in body) + "\n"
