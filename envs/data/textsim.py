"""Syntactic similarity of problem sources: normalized tokens, token shingles, Jaccard, MinHash LSH.

Only the computation is compared (classes and helper functions; `computation`). Normalization makes the
usual disguises of a copied problem disappear before anything is compared:
comments and docstrings are dropped (`envs.source.canonicalize`), every name the file binds itself
(classes, functions, arguments, variables, `self.<attr>` it assigns) becomes `ID`, every number `NUM` and
every string `STR`. What is left is the structure and the library calls (`torch.relu`, `nn.Conv2d`), which
is what makes two problems the same problem. Similarity is Jaccard over shingles (k consecutive
normalized tokens), so reordered statements keep most shingles and a changed op changes k of them.

At scale the pairs worth comparing come from MinHash LSH (datasketch); every decision is made on the exact
Jaccard of the pair, which is what the manifest records.
"""

from __future__ import annotations

import ast
import io
import keyword
import tokenize

from datasketch import MinHash, MinHashLSH

from envs.source import SourceError, canonicalize

__all__ = ["normalized_tokens", "shingles", "jaccard", "ShingleIndex"]

_SKIP = {
    tokenize.NEWLINE,
    tokenize.NL,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.COMMENT,
    tokenize.ENDMARKER,
    tokenize.ENCODING,
}


def bound_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
        ):
            names.add(node.attr)
    # The format's fixed names are structure, not identifiers a copier would rename.
    return names - {
        "Model",
        "forward",
        "get_inputs",
        "get_init_inputs",
        "self",
        "SMALL_SIZES",
        "TOLERANCE",
        "super",
        "__init__",
    }


_FORMAT_FUNCTIONS = {"get_inputs", "get_init_inputs"}


def computation(tree: ast.Module) -> ast.Module:
    """The part of a problem that says what it computes: its classes and helper functions. Imports, module
    constants and the input builders are the format's boilerplate, alike in every problem; left in, they make
    short problems with different computations look like copies (most shingles shared)."""
    body = [
        n
        for n in tree.body
        if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.name not in _FORMAT_FUNCTIONS
    ]
    return ast.Module(body=body or tree.body, type_ignores=[])


def normalized_tokens(source: str) -> list[str]:
    """The token stream similarity is computed on (see the module docstring). Unparsable text raises
    SourceError."""
    canonical = ast.unparse(computation(ast.parse(canonicalize(source).source)))
    bound = bound_names(ast.parse(canonical))
    out: list[str] = []
    for tok in tokenize.generate_tokens(io.StringIO(canonical).readline):
        if tok.type in _SKIP:
            continue
        if tok.type == tokenize.NAME:
            out.append("ID" if tok.string in bound and not keyword.iskeyword(tok.string) else tok.string)
        elif tok.type == tokenize.NUMBER:
            out.append("NUM")
        elif tok.type == tokenize.STRING or tok.type >= getattr(tokenize, "FSTRING_START", 10**6):
            out.append("STR")
        else:
            out.append(tok.string)
    return out


def shingles(tokens: list[str], k: int = 3) -> frozenset[str]:
    if len(tokens) < k:
        return frozenset([" ".join(tokens)])
    return frozenset(" ".join(tokens[i : i + k]) for i in range(len(tokens) - k + 1))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


class ShingleIndex:
    """Shingle sets under MinHash LSH: `nearest(s)` is the most similar indexed set among the LSH candidates,
    by exact Jaccard. LSH at `threshold` may miss a pair just above it (a probabilistic filter; with 128
    permutations the miss rate at Jaccard 0.9 is well under 1%), never reports a pair below it."""

    def __init__(self, threshold: float = 0.8, num_perm: int = 128, seed: int = 1):
        self.threshold, self.num_perm, self.seed = threshold, num_perm, seed
        self._lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
        self._sets: dict[str, frozenset[str]] = {}

    def _minhash(self, s: frozenset[str]) -> MinHash:
        m = MinHash(num_perm=self.num_perm, seed=self.seed)
        m.update_batch([x.encode() for x in sorted(s)])
        return m

    def add(self, key: str, s: frozenset[str]) -> None:
        if key in self._sets:
            raise ValueError(f"{key}: already indexed")
        self._sets[key] = s
        self._lsh.insert(key, self._minhash(s))

    def nearest(self, s: frozenset[str]) -> tuple[str | None, float]:
        best, score = None, 0.0
        for key in sorted(self._lsh.query(self._minhash(s))):
            j = jaccard(s, self._sets[key])
            if j > score:
                best, score = key, j
        return best, score

    def __len__(self) -> int:
        return len(self._sets)


def safe_tokens(source: str) -> list[str] | None:
    try:
        return normalized_tokens(source)
    except SourceError:
        return None
