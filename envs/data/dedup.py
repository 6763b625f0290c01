"""Stage: deduplication within the candidate set by token-shingle Jaccard (MinHash LSH finds the pairs,
exact Jaccard decides). Greedy in input order: the first of a group of near-duplicates is kept, so the
pipeline's source order (KernelBench-format directories, then crawled modules, then synthetic problems)
decides which copy survives.
"""

from __future__ import annotations

from envs.data.records import CandidateProblem, StageResult
from envs.data.textsim import ShingleIndex, normalized_tokens, shingles

__all__ = ["deduplicate"]


def deduplicate(candidates: list[CandidateProblem], threshold: float = 0.8, shingle_k: int = 3) -> StageResult:
    result = StageResult("deduplicate")
    index = ShingleIndex(threshold)
    for c in candidates:
        s = shingles(normalized_tokens(c.source), shingle_k)
        twin, score = index.nearest(s) if len(index) else (None, 0.0)
        scored = c.with_facts(dedup={"nearest_kept": twin, "jaccard": round(score, 4)})
        if twin is not None and score > threshold:
            result.reject(scored, f"token Jaccard {score:.3f} > {threshold} with kept problem {twin}", score, twin)
        else:
            index.add(c.id, s)
            result.keep(scored, f"max Jaccard {score:.3f} with a kept problem", score)
    return result
