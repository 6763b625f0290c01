"""docs/architecture.md (and envs/pool/README.md) cannot go stale: every file path, `module.symbol`, `Class.member`
and class name they put in backticks must exist in the code, read statically (nothing is imported).

A symbol is looked up in the .py files (or directories) named in the same paragraph, list item or table row; a
paragraph that names none may use any module. In the two path sections of architecture.md every backticked
identifier is a symbol, lowercase function names included; elsewhere lowercase words may be config keys."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

from tests.unit.test_layers import PACKAGES, ROOT, _modules

DOCS = ("docs/architecture.md", "envs/pool/README.md")
TOP = ("envs", "rl", "rewards", "scripts", "conf", "docs", "tests")
PATH = re.compile(rf"^({'|'.join(TOP)})/[\w./-]*$")
MODULE_SYMBOL = re.compile(rf"^({'|'.join(PACKAGES)})(\.\w+)+$")
CLASS_SYMBOL = re.compile(r"^[A-Z]\w*(\.\w+)?$")
IDENTIFIER = re.compile(r"^_?[a-z]\w*$")
BARE_FILE = re.compile(r"^[\w-]+\.(py|md|yaml)$")
STRICT_SECTIONS = ("## The path of one candidate", "## The path of one RL step")


@functools.cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def _top_names(path: Path) -> set[str]:
    """What a module defines or imports at its top level, and what its __all__ promises (lazy __getattr__)."""
    names: set[str] = set()
    for node in _tree(path).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    names.add(target.id)
                    if target.id == "__all__" and isinstance(node.value, (ast.List, ast.Tuple)):
                        names.update(e.value for e in node.value.elts if isinstance(e, ast.Constant))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


@functools.cache
def _classes() -> dict[str, list[ast.ClassDef]]:
    out: dict[str, list[ast.ClassDef]] = {}
    for path in _modules().values():
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ClassDef):
                out.setdefault(node.name, []).append(node)
    return out


def _has_member(cls: str, member: str, seen: frozenset = frozenset()) -> bool:
    """Whether some class named `cls` defines `member` (method, class attribute, annotation), or a base does."""
    for node in _classes().get(cls, []):
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and item.name == member:
                return True
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and item.target.id == member:
                return True
            if isinstance(item, ast.Assign) and any(isinstance(t, ast.Name) and t.id == member for t in item.targets):
                return True
        for base in node.bases:
            name = base.id if isinstance(base, ast.Name) else base.attr if isinstance(base, ast.Attribute) else None
            if name and name not in seen and _has_member(name, member, seen | {cls}):
                return True
    return False


def _module_symbol_exists(token: str) -> bool:
    modules = _modules()
    parts = token.split(".")
    for cut in range(len(parts), 0, -1):
        module = ".".join(parts[:cut])
        if module in modules:
            rest = parts[cut:]
            if not rest:
                return True
            if rest[0] not in _top_names(modules[module]):
                return False
            return len(rest) == 1 or (len(rest) == 2 and _has_member(rest[0], rest[1]))
    return False


def _python_files(paths: list[str]) -> list[Path]:
    files: list[Path] = []
    for p in paths:
        full = ROOT / p
        if full.is_dir():
            files += sorted(full.rglob("*.py"))
        elif full.suffix == ".py" and full.exists():
            files.append(full)
    return files


def _symbol_exists(token: str, files: list[Path]) -> bool:
    name, _, member = token.partition(".")
    scope = files or list(_modules().values())
    if not any(name in _top_names(f) for f in scope) and not (
        files and name in _classes() and _defined_under(name, files)
    ):
        return False
    return not member or _has_member(name, member)


def _defined_under(cls: str, files: list[Path]) -> bool:
    """A class defined anywhere in the named files' trees (a method of a class of a sibling file)."""
    dirs = {f.parent for f in files}
    return any((ROOT / p).parent in dirs for p in _class_files(cls))


@functools.cache
def _class_files(cls: str) -> tuple[Path, ...]:
    return tuple(
        p.relative_to(ROOT)
        for p in _modules().values()
        if any(isinstance(n, ast.ClassDef) and n.name == cls for n in ast.walk(_tree(p)))
    )


def _blocks(text: str) -> list[tuple[bool, str]]:
    """(in a path section, text) per paragraph, list item or table row."""
    blocks, current, strict = [], [], False

    def flush():
        if current:
            blocks.append((strict, "\n".join(current)))
            current.clear()

    for line in text.splitlines():
        if line.startswith("#"):
            flush()
            strict = line.startswith(STRICT_SECTIONS)
            continue
        if not line.strip() or re.match(r"^\s*(\d+\.|-|\|)\s", line):
            flush()
        if line.strip():
            current.append(line)
    flush()
    return blocks


def problems(doc: str) -> list[str]:
    out = []
    here = (ROOT / doc).parent
    text = (ROOT / doc).read_text()
    every_file = {p.name for top in TOP for p in (ROOT / top).rglob("*")}
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
        if "://" not in target and not (here / target).exists():
            out.append(f"link {target}")
    for strict, block in _blocks(text):
        tokens = re.findall(r"`([^`\n]+)`", block)
        paths = [t.rstrip("/") for t in tokens if PATH.match(t)]
        for p in paths:
            if not (ROOT / p).exists():
                out.append(f"path {p}")
        files = _python_files(paths)
        for t in tokens:
            if PATH.match(t):
                continue
            if BARE_FILE.match(t):
                if t not in every_file:
                    out.append(f"file {t}")
            elif MODULE_SYMBOL.match(t):
                if not _module_symbol_exists(t):
                    out.append(f"symbol {t}")
            elif CLASS_SYMBOL.match(t) or (strict and IDENTIFIER.match(t)):
                if not _symbol_exists(t, files):
                    out.append(f"symbol {t} (looked in {[str(f.relative_to(ROOT)) for f in files] or 'every module'})")
    return out


def test_the_checker_notices_what_is_gone():
    assert _module_symbol_exists("rl.loop.Trainer.train_step")
    assert not _module_symbol_exists("rl.loop.Trainer.no_such_method")
    assert _symbol_exists("CpuStage.prepare", _python_files(["envs/cpu_stage.py"]))
    assert not _symbol_exists("CpuStage.prepare", _python_files(["rewards/shaping.py"]))
    assert not _symbol_exists("LocalEvaluation", [])


def test_architecture_doc_names_only_what_exists():
    assert problems("docs/architecture.md") == []


def test_pool_readme_names_only_what_exists():
    assert problems("envs/pool/README.md") == []
