"""Retrieval of solved kernels: the most similar solved problem, by BM25 over identifier tokens.

The prompt's one-shot example (rl.prompts) and the `kernel_search` tool search the same store of `SolvedKernel`
records. Leakage rules are enforced here, not by callers: held-out problems are never indexed, and a search for
a problem never returns a solution of that problem (by id or source hash). BM25 is written out (twenty lines)
because we need a deterministic tie order and these exclusions, which neither rank-bm25 nor bm25s gives."""

from __future__ import annotations

import dataclasses
import hashlib
import keyword
import math
import re
from collections import Counter
from pathlib import Path
from typing import Callable, Collection, Iterable, Sequence

from envs.problems import Problem, load_builtin

__all__ = ["Hit", "KernelIndex", "SolvedKernel", "builtin_solutions", "tokenize"]

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
# Python keywords and the names every problem file has carry no signal about the computation.
_STOP = frozenset(keyword.kwlist) | {
    "self",
    "torch",
    "nn",
    "model",
    "module",
    "init",
    "super",
    "forward",
    "get",
    "inputs",
    "get_inputs",
    "get_init_inputs",
    "return",
    "def",
    "import",
    "tensor",
    "small_sizes",
    "sizes",
    "small",
}


def tokenize(text: str) -> list[str]:
    """Lower-case identifier tokens of `text` (code, comments and docstrings alike): each identifier
    and, for compound ones, its snake_case / camelCase parts ("layer_norm" -> layer_norm, layer, norm)."""
    tokens: list[str] = []
    for ident in _IDENTIFIER.findall(text):
        parts = [p.lower() for piece in ident.split("_") for p in _CAMEL.findall(piece)]
        whole = ident.strip("_").lower()
        for token in [whole] if len(parts) <= 1 else [whole, *parts]:
            if len(token) > 1 and token not in _STOP and not token.isdigit():
                tokens.append(token)
    return tokens


@dataclasses.dataclass(frozen=True)
class SolvedKernel:
    """A verified solution of a problem, as the store keeps it."""

    problem_id: str
    problem_source: str
    solution: str
    speedup: float | None = None  # measured against the run's baseline; None when not measured (CPU, references)
    provenance: str = ""  # where it came from, e.g. "builtin reference", "train step 12 sample 3"

    @property
    def problem_sha256(self) -> str:
        return hashlib.sha256(self.problem_source.encode()).hexdigest()


@dataclasses.dataclass(frozen=True)
class Hit:
    record: SolvedKernel
    score: float


class KernelIndex:
    """BM25 (Robertson/Sparck Jones idf with Lucene's +1, k1, b) over the problem sources of solved
    kernels. Immutable after construction, deterministic, cheap (42 records index in milliseconds)."""

    def __init__(
        self,
        records: Iterable[SolvedKernel],
        *,
        held_out_ids: Collection[str] = (),
        held_out_sha256: Collection[str] = (),
        k1: float = 1.5,
        b: float = 0.75,
    ):
        if k1 < 0 or not 0 <= b <= 1:
            raise ValueError("BM25 needs k1 >= 0 and 0 <= b <= 1")
        held_ids, held_sha = set(held_out_ids), set(held_out_sha256)
        self.records: tuple[SolvedKernel, ...] = tuple(
            r for r in records if r.problem_id not in held_ids and r.problem_sha256 not in held_sha
        )
        self.k1, self.b = k1, b
        self._tf = [Counter(tokenize(r.problem_source)) for r in self.records]
        self._length = [sum(tf.values()) for tf in self._tf]
        self._avg_length = (sum(self._length) / len(self._length)) if self._length else 0.0
        df = Counter(term for tf in self._tf for term in tf)
        n = len(self.records)
        self._idf = {term: math.log(1.0 + (n - d + 0.5) / (d + 0.5)) for term, d in df.items()}

    def __len__(self) -> int:
        return len(self.records)

    def _score(self, i: int, terms: Sequence[str]) -> float:
        tf, norm = self._tf[i], self.k1 * (1 - self.b + self.b * self._length[i] / (self._avg_length or 1.0))
        score = 0.0
        for term in terms:  # sorted unique query terms: a fixed summation order keeps scores bit-identical
            f = tf.get(term, 0)
            if f:
                score += self._idf[term] * f * (self.k1 + 1) / (f + norm)
        return score

    def search(
        self, query: str, k: int = 5, *, exclude_ids: Collection[str] = (), exclude_sha256: Collection[str] = ()
    ) -> list[Hit]:
        """The k best records for `query` (free text or a problem's source), best first; records with
        no query term in common are not returned. Ties: faster solutions first, then by problem id."""
        terms = sorted(set(tokenize(query)))
        hits = []
        for i, record in enumerate(self.records):
            if record.problem_id in exclude_ids or record.problem_sha256 in exclude_sha256:
                continue
            score = self._score(i, terms)
            if score > 0:
                hits.append(Hit(record, score))
        hits.sort(
            key=lambda h: (
                -h.score,
                -(h.record.speedup or 0.0),
                h.record.problem_id,
                h.record.provenance,
                h.record.solution,
            )
        )
        return hits[:k]

    def most_similar(
        self, problem: Problem, *, accept: Callable[[SolvedKernel], bool] | None = None
    ) -> SolvedKernel | None:
        """The solved kernel of ANOTHER problem most similar to `problem` (never `problem` itself,
        under any id), optionally the best one that `accept` admits (e.g. short enough); None if none."""
        for hit in self.search(
            problem.source, k=len(self.records), exclude_ids={problem.id}, exclude_sha256={problem.sha256}
        ):
            if accept is None or accept(hit.record):
                return hit.record
        return None


def builtin_solutions(levels: list[int] | None = None) -> list[SolvedKernel]:
    """The built-in problems' reference solutions as store records (verified by CI's evaluator tests)."""
    records = []
    for problem in load_builtin(levels):
        if problem.reference_solution is None:
            continue
        records.append(
            SolvedKernel(
                problem.id,
                problem.source,
                Path(problem.reference_solution).read_text(),
                speedup=None,
                provenance="builtin reference solution",
            )
        )
    return records
