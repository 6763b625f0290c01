"""Stage: clustering and sampling weights. k-means (scikit-learn) over the embedder's vectors of the kept
problems, `clusters` clusters (fewer when there are fewer problems); each problem's weight is 1/ln(n + 1),
n the size of its cluster (the paper's balancing). A cluster of n problems then draws n/ln(n + 1) of the
mass instead of n: large families of near-variants no longer dominate training, singletons are not
drowned. `data.sampler=balanced` draws by these weights."""

from __future__ import annotations

import collections
import math

from envs.data.embed import Embedder
from envs.data.records import CandidateProblem, StageResult

__all__ = ["cluster_and_weight"]


def cluster_and_weight(
    candidates: list[CandidateProblem], embedder: Embedder, clusters: int = 50, seed: int = 0
) -> StageResult:
    from sklearn.cluster import KMeans

    result = StageResult("cluster")
    if not candidates:
        return result
    k = max(1, min(clusters, len(candidates)))
    sources = [c.source for c in candidates]
    embedder.fit(sources)
    vectors = embedder.embed(sources)
    labels = KMeans(n_clusters=k, random_state=seed, n_init=4).fit_predict(vectors) if k > 1 else [0] * len(sources)
    sizes = collections.Counter(int(label) for label in labels)
    for c, label in zip(candidates, labels):
        n = sizes[int(label)]
        weight = 1.0 / math.log(n + 1)
        result.keep(
            c.with_facts(cluster=int(label), cluster_size=n, weight=round(weight, 6)),
            f"cluster {int(label)} of {n}; weight {weight:.4f}",
            weight,
        )
    return result
