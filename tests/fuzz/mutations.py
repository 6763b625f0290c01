"""Deterministic mutations of known solutions, to fuzz the CPU stage of evaluation (extraction,
canonicalization, static analysis).

`cases(seed, count)` yields `FuzzCase`s: a seed (a built-in reference solution or a red-team file of
tests/hacks) with 1-3 named mutations applied, in four phases: AST rewrites (aliases, cycles, walrus,
match, ...), code-text rewrites where the AST cannot go (nesting deeper than `ast.unparse` can print,
huge literals), character-level damage (NUL, lone surrogates, CRLF, tabs) and the shape of an LLM
answer around the code (fences, prose). The same (seed, count) always gives the same cases.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import random
import re
import string
import textwrap
from pathlib import Path
from typing import Callable, Iterator

ROOT = Path(__file__).resolve().parents[2]
PHASES = ("ast", "code", "chars", "answer")


@dataclasses.dataclass(frozen=True)
class FuzzCase:
    name: str  # seed stem and mutation labels: "L0_02_relu+walrus+deep(parens,812)"
    problem_id: str  # the built-in problem the seed solves
    text: str  # the model answer handed to the CPU stage


@dataclasses.dataclass(frozen=True)
class Seed:
    name: str
    problem_id: str
    source: str


@dataclasses.dataclass(frozen=True)
class Mutation:
    name: str
    phase: str
    weight: float  # relative chance of being picked; the costly ones are rarer to keep runs short
    apply: Callable  # ast phase: (tree, rng) -> label; other phases: (text, rng) -> (text, label)


MUTATIONS: dict[str, Mutation] = {}


def mutation(phase: str, weight: float = 1.0):
    """Register a mutation under its function name."""

    def register(fn: Callable) -> Callable:
        MUTATIONS[fn.__name__] = Mutation(fn.__name__, phase, weight, fn)
        return fn

    return register


@functools.lru_cache(maxsize=1)
def seeds() -> tuple[Seed, ...]:
    """The 43 built-in reference solutions, then the red-team corpus (its `# problem:` header names the problem)."""
    out = [Seed(p.stem, p.stem, p.read_text()) for p in sorted((ROOT / "envs/builtin/solutions").glob("*.py"))]
    for path in sorted((ROOT / "tests/hacks").glob("*.py")):
        text = path.read_text()
        if match := re.search(r"^# problem: (\S+)", text, re.MULTILINE):
            out.append(Seed(path.stem, match.group(1), text))
    return tuple(out)


def _size(rng: random.Random, lo: int, hi: int) -> int:
    """Log-uniform in [lo, hi]: small sizes are common, the largest still come up."""
    return int(round(lo * (hi / lo) ** rng.random()))


# --- AST helpers ------------------------------------------------------------------------------------


def _parse(template: str, **names: str) -> list[ast.stmt]:
    return ast.parse(string.Template(textwrap.dedent(template)).substitute(names)).body


def _forward(tree: ast.Module) -> ast.FunctionDef | None:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "ModelNew":
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "forward":
                    return item
    return None


def into_forward(tree: ast.Module, template: str) -> None:
    """Insert statements at the start of forward, `$p` being its first input (module level if no forward)."""
    fn = _forward(tree)
    args = [a.arg for a in fn.args.posonlyargs + fn.args.args][1:] if fn else []
    if not args:
        tree.body.extend(_parse("_fz = None\n" + template, p="_fz"))
        return
    fn.body[0:0] = _parse(template, p=args[0])


def after_imports(tree: ast.Module, template: str) -> None:
    """Insert module-level statements after the last top-level import, before anything uses them."""
    last = max((i for i, n in enumerate(tree.body) if isinstance(n, (ast.Import, ast.ImportFrom))), default=-1)
    tree.body[last + 1 : last + 1] = _parse(template)


def before_model(tree: ast.Module, template: str) -> None:
    """Insert module-level statements just before `class ModelNew` (after the helpers it may use)."""
    index = next(
        (i for i, n in enumerate(tree.body) if isinstance(n, ast.ClassDef) and n.name == "ModelNew"), len(tree.body)
    )
    tree.body[index:index] = _parse(template)


# --- AST mutations: honest rewrites that stress name resolution, call references, reachability ---


@mutation("ast")
def self_rebind_list(tree, rng):
    """A list rebuilt from its own elements (it once made the static analysis recurse without end)."""
    into_forward(
        tree,
        rng.choice(
            [
                "_xs = [$p, $p]\n_xs = [_xs[0], _xs[-1]]\n$p = _xs[0]",
                "_xs = ($p,)\n_xs = (_xs[0],) + _xs\n$p = _xs[-1]",
                "_xs = {'a': $p}\n_xs = {'a': _xs['a'], 'b': _xs['a']}\n$p = _xs['b']",
            ]
        ),
    )
    return "self_rebind_list"


@mutation("ast")
def self_rebind_view(tree, rng):
    into_forward(
        tree,
        rng.choice(
            [
                "$p = $p.view($p.shape)",
                "$p = $p.contiguous()\n$p = $p.view_as($p)",
                "$p = $p.reshape($p.shape)\n$p = $p.reshape($p.shape)",
            ]
        ),
    )
    return "self_rebind_view"


@mutation("ast")
def swap_alias(tree, rng):
    """`a = b; b = a`: the two names resolve through each other."""
    into_forward(tree, "_a = $p\n$p = _a\n_a = $p")
    return "swap_alias"


@mutation("ast")
def mutual_alias_cycle(tree, rng):
    before_model(
        tree,
        """
        _c1 = None
        _c2 = _c1
        _c1 = _c2
        _l1 = [_c1]
        _l2 = [_l1[0]]
        _l1 = [_l2[0], _l1[0]]
    """,
    )
    into_forward(tree, "_u = [_l1[0], _l2[-1]]\n$p = $p if _u[0] is None else $p")
    return "mutual_alias_cycle"


@mutation("ast")
def module_alias(tree, rng):
    """`import torch as t; torch = t` and friends."""
    after_imports(
        tree,
        rng.choice(
            [
                "import torch as _t\ntorch = _t",
                "import torch as _t1\n_t2 = _t1\n_t1 = _t2\ntorch = _t1",
                "import triton.language as _tl\ntl = _tl",
                "import torch.nn as _nn\nnn = _nn",
                "import triton as _tr\ntriton = _tr\n_tr = triton",
            ]
        ),
    )
    return "module_alias"


@mutation("ast")
def class_alias_cycle(tree, rng):
    """Class hierarchies that loop through aliases: `class A(B)`, `B = A`; ModelNew derived from an alias of itself."""
    if rng.random() < 0.5:
        before_model(
            tree, "class _B0:\n    pass\nclass _A0(_B0):\n    pass\n_B0 = _A0\nclass _C0(_B0):\n    pass\n_B0 = _C0"
        )
    else:
        tree.body.extend(_parse("_Base = ModelNew\nclass ModelNew(_Base):\n    pass\n_Base = ModelNew"))
    return "class_alias_cycle"


@mutation("ast")
def walrus(tree, rng):
    """An assignment in forward written as a walrus expression, or a walrus in a condition/comprehension."""
    fn = _forward(tree)
    body = fn.body if fn else []
    for i, node in enumerate(body):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and rng.random() < 0.6
        ):
            body[i] = ast.Expr(ast.NamedExpr(ast.Name(node.targets[0].id, ast.Store()), node.value))
            return "walrus"
    into_forward(
        tree,
        rng.choice(
            [
                "if (_n := $p) is None:\n    pass",
                "_w = [(_y := _v) for _v in [$p]]\n$p = _y",
                "_q = [$p]\n_q = [(_q := _q)[0]]\n$p = _q[0]",
            ]
        ),
    )
    return "walrus"


@mutation("ast")
def match_stmt(tree, rng):
    """forward's final `return e` wrapped in a match statement that returns the same value."""
    fn = _forward(tree)
    if fn and isinstance(fn.body[-1], ast.Return) and fn.body[-1].value is not None:
        e = ast.unparse(fn.body[-1].value)
        fn.body[-1:] = _parse(
            rng.choice(
                [
                    "match ($e,):\n    case (_r,):\n        return _r\n    case _:\n        return $e",
                    "match $e:\n    case torch.Tensor() as _r:\n        return _r\n    case _r:\n        return _r",
                    "match [$e]:\n    case [*_rs]:\n        return _rs[0]",
                ]
            ),
            e=e,
        )
    else:
        into_forward(tree, "match $p:\n    case {'k': _v}:\n        $p = _v\n    case _:\n        pass")
    return "match_stmt"


@mutation("ast")
def nested_comprehension(tree, rng):
    into_forward(
        tree,
        rng.choice(
            [
                "_nc = [[[_z for _z in (_y,)] for _y in (_w,)] for _w in ($p,)]\n$p = _nc[0][0][0]",
                "$p = next(iter({_k: _v for _k, _v in [(0, $p)]}.values()))",
                "$p = [_v for _v in (_u for _u in [$p] if _u is not None)][0]",
                "_g = [[_v for _v in _row] for _row in [[$p]]]\n$p = _g[0][0]",
            ]
        ),
    )
    return "nested_comprehension"


@mutation("ast")
def decorators(tree, rng):
    """Identity decorators (plain, factory, self-returning) on forward and the ModelNew class."""
    after_imports(
        tree,
        """
        def _ident(f):
            return f
        def _deco(*a):
            return a[0] if a and callable(a[0]) else _deco
    """,
    )
    fn = _forward(tree)
    if fn:
        fn.decorator_list[0:0] = [ast.parse(d, mode="eval").body for d in rng.sample(["_ident", "_deco", "_deco()"], 2)]
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "ModelNew":
            node.decorator_list.append(ast.Name("_ident", ast.Load()))
    return "decorators"


@mutation("ast")
def getattr_chain(tree, rng):
    into_forward(
        tree,
        rng.choice(
            [
                "$p = getattr($p, 'view')($p.shape)",
                "$p = getattr(getattr($p, 'contiguous'), '__call__')()",
                "$p = getattr(torch, 'Tensor').contiguous($p)",
            ]
        ),
    )
    for node in ast.walk(tree):  # super().__init__() -> super(ModelNew, self).__init__()
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super" and not node.args:
            node.args = [ast.Name("ModelNew", ast.Load()), ast.Name("self", ast.Load())]
    return "getattr_chain"


@mutation("ast")
def helper_recursion(tree, rng):
    """Two helpers that call each other; forward calls one."""
    before_model(
        tree,
        """
        def _h1(v, k=2):
            return v if k <= 0 else _h2(v, k - 1)
        def _h2(v, k=2):
            return _h1(v, k - 1)
    """,
    )
    into_forward(tree, "$p = _h1($p)")
    return "helper_recursion"


@mutation("ast")
def returns_cycle(tree, rng):
    """Functions returning functions in a cycle (`_r1()()()`), and one returning itself."""
    before_model(
        tree,
        """
        def _r1():
            return _r2
        def _r2():
            return _r1
        def _me():
            return _me
    """,
    )
    into_forward(tree, "$p = _r1()()() and _me()()() and $p")
    return "returns_cycle"


@mutation("ast")
def lambda_wrap(tree, rng):
    into_forward(tree, "$p = (lambda _v: (lambda _w: _w)(_v))($p)")
    return "lambda_wrap"


@mutation("ast")
def star_import(tree, rng):
    module = rng.choice(["math", "itertools", "torch", "triton.language"])
    after_imports(tree, f"from {module} import *")
    return f"star_import({module})"


@mutation("ast")
def unicode_names(tree, rng):
    """forward's parameters and locals renamed to non-ASCII identifiers."""
    fn = _forward(tree)
    if fn is None:
        return "unicode_names"
    prefix = rng.choice(["ξ_", "ü", "变量_", "ℌ"])  # "ℌ" is NFKC-normalized to "H" by the parser
    names = {a.arg for a in fn.args.args[1:]} | {
        n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
    for node in ast.walk(fn):
        if isinstance(node, ast.arg) and node.arg in names:
            node.arg = prefix + node.arg
        elif isinstance(node, ast.Name) and node.id in names:
            node.id = prefix + node.id
    return "unicode_names"


@mutation("ast", weight=0.5)
def long_alias_chain(tree, rng):
    """a1 = a0, a2 = a1, ... a3000 = a2999, at module level or in forward; forward uses the last."""
    n = _size(rng, 50, 3000)
    chain = "\n".join(f"_a{i + 1} = _a{i}" for i in range(n))
    if rng.random() < 0.5:
        after_imports(tree, "_a0 = torch\n" + chain)
        into_forward(tree, f"_alias = _a{n}.empty_like")
    else:
        into_forward(tree, f"_a0 = torch\n{chain}\n_alias = _a{n}.empty_like")
    return f"long_alias_chain({n})"


@mutation("ast", weight=0.5)
def call_chain(tree, rng):
    """f_n calls f_{n-1} ... calls f_0; forward calls f_n."""
    n = _size(rng, 50, 3000)
    chain = "".join(f"def _f{i + 1}(v):\n    return _f{i}(v)\n" for i in range(n))
    before_model(tree, "def _f0(v):\n    return v\n" + chain)
    into_forward(tree, f"$p = _f{n}($p)")
    return f"call_chain({n})"


@mutation("ast", weight=0.3)
def huge_file(tree, rng):
    """Thousands of unrelated functions and classes."""
    n = _size(rng, 300, 5000)
    code = "".join(f"def _g{i}(v):\n    return v + {i}\nclass _K{i}:\n    k = {i}\n" for i in range(n))
    tree.body.extend(_parse(code))
    return f"huge_file({n})"


# --- code mutations: text the AST phase cannot produce ----------------------------------------------


def _into_forward_text(code: str, line: str) -> str:
    """Insert one statement as forward's first line (module level when there is no forward)."""
    match = re.search(r"^( *)def forward\(.*:\n", code, re.MULTILINE)
    if not match:
        return code + "\n" + line + "\n"
    return code[: match.end()] + match.group(1) + "    " + line + "\n" + code[match.end() :]


def _fstring(depth: int) -> str:
    """f-strings nested `depth` (<= 4) deep, each level with its own quotes as Python 3.11 requires."""
    text = "0"
    for quote in ["'", '"', "'''", '"""'][:depth]:
        text = f"f{quote}{{{text}}}{quote}"
    return text


_NESTINGS = {
    "parens": lambda d: "(" * d + "0" + ")" * d,
    "brackets": lambda d: "[" * d + "0" + "]" * d,
    "braces": lambda d: "{'k': " * d + "0" + "}" * d,
    "attributes": lambda d: "torch" + ".T" * d,
    "subscripts": lambda d: "torch" + "[0]" * d,
    "calls": lambda d: "abs(" * d + "0" + ")" * d,
    "call_results": lambda d: "torch" + "()" * d,
    "lambdas": lambda d: "lambda: " * d + "0",
    "fstrings": lambda d: _fstring(min(d, 4)) + " + f'{0}'" * d,
    "unary": lambda d: "-" * d + "1",
    "binops": lambda d: "1" + " + 1" * d,
    "not": lambda d: "not " * d + "0",
    "ifexp": lambda d: "0 if 0 else " * d + "0",
}


@mutation("code")
def deep_nesting(code, rng):
    """Brackets, attributes, lambdas, f-strings, subscripts of subscripts, calls... nested 50..5000 deep."""
    kind, depth = rng.choice(sorted(_NESTINGS)), _size(rng, 50, 5000)
    line = f"_deep = {_NESTINGS[kind](depth)}"
    code = _into_forward_text(code, line) if rng.random() < 0.5 else code + line + "\n"
    return code, f"deep_nesting({kind},{depth})"


@mutation("code", weight=0.3)
def huge_literal(code, rng):
    """A megabyte string, a 100k-element list or a large dict as a module constant."""
    kind = rng.choice(["str", "list", "dict", "bytes"])
    n = _size(rng, 10_000, 4_000_000 if kind in ("str", "bytes") else 100_000)
    literal = {
        "str": lambda: repr("a" * n),
        "bytes": lambda: repr(b"\x01" * n),
        "list": lambda: "[" + ", ".join(map(str, range(n))) + "]",
        "dict": lambda: "{" + ", ".join(f"{i}: {i}" for i in range(n // 4)) + "}",
    }[kind]()
    return code + f"_BIG = {literal}\n", f"huge_literal({kind},{n})"


@mutation("code", weight=0.3)
def long_line(code, rng):
    """One very long line: a comment, a call with many arguments, or a long chain of `and`s."""
    n = _size(rng, 1_000, 200_000)
    line = rng.choice(
        [f"# {'x' * n}", f"_t = max({', '.join(['0'] * n)})", f"_t = {' and '.join(['1'] * n)}", f"_t = {'1;' * n}1"]
    )
    return code + line + "\n", f"long_line({n})"


# --- character mutations: bytes a model (or a bad decoder) may produce ---------------------------


def _somewhere(code: str, rng: random.Random, insert: str) -> str:
    i = rng.randrange(len(code) + 1)
    return code[:i] + insert + code[i:]


@mutation("chars", weight=0.5)
def nul_byte(code, rng):
    return _somewhere(code, rng, "\x00"), "nul_byte"


@mutation("chars")
def lone_surrogate(code, rng):
    """Invalid UTF-8 decoded with surrogateescape, or a lone surrogate, in a literal, a comment or anywhere."""
    bad = rng.choice(
        [
            b"\xff\xfe".decode("utf-8", "surrogateescape"),
            b"caf\xe9".decode("utf-8", "surrogateescape"),
            "\ud800",
            "\udfff",
        ]
    )
    where = rng.choice(["string", "comment", "anywhere"])
    if where == "string":
        return _into_forward_text(code, f"_s = '{bad}'"), "lone_surrogate(string)"
    if where == "comment":
        return code + f"# {bad}\n", "lone_surrogate(comment)"
    return _somewhere(code, rng, bad), "lone_surrogate(anywhere)"


@mutation("chars")
def line_endings(code, rng):
    kind = rng.choice(["crlf", "cr", "mixed"])
    if kind == "crlf":
        return code.replace("\n", "\r\n"), "line_endings(crlf)"
    if kind == "cr":
        return code.replace("\n", "\r"), "line_endings(cr)"
    return "".join(line + rng.choice(["\n", "\r\n"]) for line in code.split("\n")), "line_endings(mixed)"


@mutation("chars")
def tabs(code, rng):
    """Indentation in tabs, everywhere (valid) or on some lines (mixed)."""
    everywhere = rng.random() < 0.5
    lines = [
        re.sub(r"^((?:    )+)", lambda m: "\t" * (len(m.group(1)) // 4), ln) if everywhere or rng.random() < 0.3 else ln
        for ln in code.split("\n")
    ]
    return "\n".join(lines), "tabs(all)" if everywhere else "tabs(mixed)"


@mutation("chars", weight=0.3)
def odd_whitespace(code, rng):
    ch = rng.choice(["\ufeff", "\x0c", "\x0b", "\u00a0", "\u2028"])
    return (ch + code if rng.random() < 0.5 else _somewhere(code, rng, ch)), f"odd_whitespace({ord(ch):#x})"


# --- answer shapes: how an LLM wraps (or fails to wrap) its code -----------------------------------


@mutation("answer")
def fenced(code, rng):
    lang = rng.choice(["python", "py", "Python3", "python "])
    return f"Here is the kernel.\n\n```{lang}\n{code}```\n\nIt fuses the ops.", "fenced"


@mutation("answer")
def several_fences(code, rng):
    first = rng.choice(["import torch\n", "print('draft')\n", code, "class ModelNew:\n    pass\n"])
    return (
        f"First attempt:\n```python\n{first}```\nShell:\n```bash\npip install triton\n```\n"
        f"Final:\n```python\n{code}```\n"
    ), "several_fences"


@mutation("answer")
def unterminated_fence(code, rng):
    return f"Sure! Here is the code:\n```python\n{code}", "unterminated_fence"


@mutation("answer")
def fence_in_prose(code, rng):
    return (
        f"Use ```python blocks``` as in ```python\nprint(1)``` or ``` python ```.\n```python\n{code}\n```\n"
        f"Trailing ```python"
    ), "fence_in_prose"


@mutation("answer", weight=0.5)
def no_code(code, rng):
    texts = ["I cannot write this kernel.", "", "   \n\t\n", "```python\n```", "```\n" + code + "```"]
    return rng.choice(texts), "no_code"


@mutation("answer", weight=0.3)
def megabytes_prose(code, rng):
    n = _size(rng, 100_000, 4_000_000)
    prose = ("Let me think step by step about the memory layout. " * (n // 52 + 1))[:n]
    return f"{prose}\n```python\n{code}```\n{prose[:1000]}", f"megabytes_prose({n})"


# --- cases ---------------------------------------------------------------------------------------------


def apply(source: str, names: list[str], rng: random.Random) -> tuple[str, list[str]]:
    """`source` with the named mutations applied in phase order; returns the text and the labels."""
    chosen = sorted((MUTATIONS[n] for n in names), key=lambda m: PHASES.index(m.phase))
    labels = []
    ast_ones = [m for m in chosen if m.phase == "ast"]
    text = source
    if ast_ones:
        tree = ast.parse(source)
        labels += [m.apply(tree, rng) for m in ast_ones]
        text = ast.unparse(tree) + "\n"
    for m in chosen:
        if m.phase != "ast":
            text, label = m.apply(text, rng)
            labels.append(label)
    return text, labels


def _pick(rng: random.Random) -> list[str]:
    """1-3 distinct mutations by weight, at most one answer shape."""
    names, weights = zip(*((m.name, m.weight) for m in MUTATIONS.values()))
    picked: list[str] = []
    for _ in range(rng.choice([1, 1, 2, 2, 3])):
        name = rng.choices(names, weights)[0]
        if name not in picked and not (
            MUTATIONS[name].phase == "answer" and any(MUTATIONS[p].phase == "answer" for p in picked)
        ):
            picked.append(name)
    return picked


def cases(seed: int, count: int) -> Iterator[FuzzCase]:
    """`count` mutated solutions; case i depends only on (seed, i), so any case can be regenerated alone."""
    references = [s for s in seeds() if s.name == s.problem_id]
    red_team = [s for s in seeds() if s.name != s.problem_id]
    for i in range(count):
        rng = random.Random(f"{seed}:{i}")
        base = rng.choice(references if rng.random() < 0.6 else red_team)  # references reach every rule
        text, labels = apply(base.source, _pick(rng), rng)
        yield FuzzCase("+".join([base.name, *labels]), base.problem_id, text)
