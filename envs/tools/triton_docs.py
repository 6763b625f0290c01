"""An offline Triton language reference, built from the INSTALLED triton package, and its BM25 index.

The entries are the public functions and classes of `triton.language` (and `triton.language.math`) plus
the launch-side API (`triton.jit`, `autotune`, `Config`, `heuristics`, `cdiv`, `next_power_of_2`), each
with its signature and docstring from `inspect`: the reference matches the version that runs the kernel,
which is recorded (`DocsIndex.triton_version`) and shown with every answer. Ranking reuses
envs.retrieval.KernelIndex (one BM25 in the code base): an entry is indexed as a record whose "problem
source" is its name, signature and docstring.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from typing import Any

from envs.retrieval import KernelIndex, SolvedKernel

_LAUNCH_API = ("jit", "autotune", "Config", "heuristics", "cdiv", "next_power_of_2")
_MAX_DOC_CHARS = 1500


@dataclasses.dataclass(frozen=True)
class DocEntry:
    name: str  # e.g. "tl.load"
    signature: str
    doc: str

    def render(self) -> str:
        doc = self.doc if len(self.doc) <= _MAX_DOC_CHARS else self.doc[:_MAX_DOC_CHARS] + "\n... (truncated)"
        return f"{self.name}{self.signature}\n{doc}".rstrip()


def _signature(obj: Any) -> str:
    target = getattr(obj, "fn", obj)  # JITFunction-wrapped helpers keep the Python function in .fn
    try:
        sig = inspect.signature(target)
    except (TypeError, ValueError):
        return "(...)"
    # Triton's builtins take internal `_semantic`/`_builder` parameters that user code never passes.
    return str(sig.replace(parameters=[p for p in sig.parameters.values() if not p.name.startswith("_")]))


def _entries_of(module: Any, prefix: str, names: list[str] | None = None) -> list[DocEntry]:
    entries = []
    for name in names if names is not None else sorted(dir(module)):
        if name.startswith("_"):
            continue
        obj = getattr(module, name, None)
        if obj is None or inspect.ismodule(obj) or not callable(obj):
            continue
        doc = inspect.getdoc(getattr(obj, "fn", obj)) or ""
        if not doc and not inspect.isclass(obj):
            continue  # undocumented internals carry no answer
        entries.append(DocEntry(f"{prefix}.{name}", _signature(obj), doc))
    return entries


def build_entries() -> tuple[str, list[DocEntry]]:
    """(triton version, reference entries) of the installed triton."""
    import triton
    import triton.language as tl

    entries = _entries_of(tl, "tl")
    seen = {e.name for e in entries}
    math = getattr(tl, "math", None)
    if math is not None:
        entries += [e for e in _entries_of(math, "tl.math") if e.name.replace("tl.math.", "tl.") not in seen]
    entries += _entries_of(triton, "triton", [n for n in _LAUNCH_API if hasattr(triton, n)])
    return triton.__version__, entries


class DocsIndex:
    def __init__(self, triton_version: str, entries: list[DocEntry]):
        self.triton_version = triton_version
        self.entries = {e.name: e for e in entries}
        self._index = KernelIndex(
            SolvedKernel(
                e.name,
                f"{e.name} {e.name.split('.')[-1]} {e.signature}\n{e.doc}",
                e.render(),
                provenance=f"triton {triton_version}",
            )
            for e in entries
        )

    def __len__(self) -> int:
        return len(self.entries)

    def search(self, query: str, k: int = 3) -> list[DocEntry]:
        exact = query.strip().removeprefix("triton.language.").removeprefix("tl.")
        first = [self.entries[n] for n in (f"tl.{exact}", f"triton.{exact}", f"tl.math.{exact}") if n in self.entries]
        rest = [self.entries[h.record.problem_id] for h in self._index.search(query, k=k + len(first))]
        return list(dict.fromkeys(first + rest))[:k]  # an exact name first, then by BM25 score


@functools.lru_cache(maxsize=1)
def installed_docs() -> DocsIndex:
    """The index of the installed triton, built once per process (~0.1 s)."""
    return DocsIndex(*build_entries())
