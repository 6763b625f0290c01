"""`_Scope`: one scope of an indexed module (the module, a class, a function or lambda) and what it binds.

Its own module because every part of the analysis passes scopes around: the index builds them
(index.py), name resolution (resolve.py) and the call references (calls.py) read them.
"""

from __future__ import annotations

import ast
import dataclasses


@dataclasses.dataclass(eq=False, repr=False)
class _Scope:
    kind: str  # "module", "class" or "function" (lambdas are functions)
    node: ast.AST
    name: str  # used in reasons: "ModelNew.forward", "_launch.go"
    parent: _Scope | None  # lexical parent; a method's parent skips its class, as Python does
    outer: _Scope | None = None  # where the def statement runs (decorators, defaults)
    owner: _Scope | None = None  # for methods: the class
    self_name: str | None = None  # for methods: the first parameter
    kernel: bool = False
    defs: dict = dataclasses.field(default_factory=dict)  # nested functions/classes by name
    values: dict = dataclasses.field(default_factory=dict)  # name -> [(expr, scope)] assigned to it
    imports: dict = dataclasses.field(default_factory=dict)  # name -> dotted path
    stars: list = dataclasses.field(default_factory=list)  # `from m import *`
    locals: set = dataclasses.field(default_factory=set)  # other local names (parameters, loop vars)
    global_names: set = dataclasses.field(default_factory=set)
    attrs: dict = dataclasses.field(default_factory=dict)  # classes: self.X / class-body X -> [(expr, scope)]
    bases: list = dataclasses.field(default_factory=list)  # classes: [(expr, scope)]

    def __repr__(self) -> str:
        return f"_Scope({self.kind} {self.name})"

    def methods(self) -> dict[str, _Scope]:
        return {n: s for n, s in self.defs.items() if s.kind == "function"}
