"""Embedders for semantic decontamination and clustering: a vector per problem source, L2-normalized, so that
the L2 distance between two problems is comparable with the paper's threshold (0.45 on normalized
jina-embeddings-v3 vectors).

- `tfidf` (offline): TF-IDF over the normalized token unigrams and bigrams of `envs.data.textsim`
  (scikit-learn), fitted on the evaluation sets plus the candidates. It is lexical: it sees that two problems
  call the same ops in the same structure, not that `x * sigmoid(x)` is `silu(x)`. Weaker than a code
  embedding model; its threshold is calibrated on known duplicates (docs/curation.md), not the paper's 0.45.
- `ops` (offline): TF-IDF over the ops the problem calls (`envs.data.ops`): what finds a crawled `nn.GELU`
  module to be KernelBench's `torch.nn.functional.gelu` problem although they share almost no tokens. It
  ignores shapes and structure, so different problems with the same ops are at distance 0 too.
- `sentence_transformers:<model>`: any sentence-transformers model available locally (e.g.
  jinaai/jina-embeddings-v3 when downloaded), with the paper's threshold. The package is optional; asking
  for it without it installed is a clear error.
"""

from __future__ import annotations

from typing import Protocol, Sequence

import numpy as np

from envs.data.textsim import normalized_tokens

__all__ = ["Embedder", "TfidfEmbedder", "OpsEmbedder", "SentenceTransformerEmbedder", "make_embedder", "l2_distances"]


class Embedder(Protocol):
    name: str

    def fit(self, sources: Sequence[str]) -> None: ...

    def embed(self, sources: Sequence[str]) -> np.ndarray: ...  # (n, d), rows of unit L2 norm


class TfidfEmbedder:
    def __init__(self, max_features: int = 20000):
        from sklearn.feature_extraction.text import TfidfVectorizer

        self.name = "tfidf"
        # Tokens are already normalized and space-joined: split on whitespace only.
        self._vectorizer = TfidfVectorizer(
            token_pattern=r"\S+",
            lowercase=False,
            ngram_range=(1, 2),
            sublinear_tf=True,
            max_features=max_features,
            norm="l2",
        )
        self._fitted = False

    @staticmethod
    def _docs(sources: Sequence[str]) -> list[str]:
        return [" ".join(normalized_tokens(s)) for s in sources]

    def fit(self, sources: Sequence[str]) -> None:
        self._vectorizer.fit(self._docs(sources))
        self._fitted = True

    def embed(self, sources: Sequence[str]) -> np.ndarray:
        if not self._fitted:
            raise RuntimeError("TfidfEmbedder.embed before fit")
        return self._vectorizer.transform(self._docs(sources)).astype(np.float32).toarray()


class OpsEmbedder:
    """TF-IDF over op tokens only (see envs.data.ops)."""

    def __init__(self):
        from sklearn.feature_extraction.text import TfidfVectorizer

        self.name = "ops"
        self._vectorizer = TfidfVectorizer(token_pattern=r"\S+", lowercase=False, sublinear_tf=True, norm="l2")
        self._fitted = False

    @staticmethod
    def _docs(sources: Sequence[str]) -> list[str]:
        from envs.data.ops import op_tokens

        return [" ".join(op_tokens(s)) or "noop" for s in sources]

    def fit(self, sources: Sequence[str]) -> None:
        self._vectorizer.fit(self._docs(sources) + ["noop"])
        self._fitted = True

    def embed(self, sources: Sequence[str]) -> np.ndarray:
        if not self._fitted:
            raise RuntimeError("OpsEmbedder.embed before fit")
        return self._vectorizer.transform(self._docs(sources)).astype(np.float32).toarray()


class SentenceTransformerEmbedder:
    def __init__(self, model: str):
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise RuntimeError(
                f"embedder sentence_transformers:{model} needs the sentence-transformers package "
                "(pip install sentence-transformers) and the model available locally"
            ) from None
        self.name = f"sentence_transformers:{model}"
        self._model = SentenceTransformer(model, trust_remote_code=True)

    def fit(self, sources: Sequence[str]) -> None:  # a pretrained model: nothing to fit
        return None

    def embed(self, sources: Sequence[str]) -> np.ndarray:
        return np.asarray(self._model.encode(list(sources), normalize_embeddings=True), dtype=np.float32)


def make_embedder(spec: str) -> Embedder:
    if spec == "tfidf":
        return TfidfEmbedder()
    if spec == "ops":
        return OpsEmbedder()
    if spec.startswith("sentence_transformers:"):
        return SentenceTransformerEmbedder(spec.split(":", 1)[1])
    raise ValueError(f"unknown embedder {spec!r}: tfidf | ops | sentence_transformers:<model>")


def l2_distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(len(a), len(b)) L2 distances between unit vectors: sqrt(2 - 2 cos)."""
    return np.sqrt(np.clip(2.0 - 2.0 * (a @ b.T), 0.0, None))
