"""Stage: decontamination against the evaluation sets (KernelBench levels 1-3, the built-in set, a validation
split). A candidate is dropped when it is a syntactic near-copy of an evaluation problem (token-shingle
Jaccard above `jaccard_threshold`) or when any configured embedder puts it closer than that embedder's
threshold (L2 distance of unit vectors). The manifest records, per check, the closest evaluation problem and
the score, for kept and dropped candidates alike.

Default (offline, no code-embedding model here): `tfidf` at 0.5 and `ops` at 0.45, calibrated by
scripts/calibrate_decontam.py (docs/curation.md). With a local sentence-transformers model the paper's rule
is `{"sentence_transformers:jinaai/jina-embeddings-v3": 0.45}`.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from envs.data.embed import l2_distances, make_embedder
from envs.data.records import CandidateProblem, StageResult
from envs.data.textsim import ShingleIndex, normalized_tokens, shingles
from envs.problems import Problem

__all__ = ["DecontamConfig", "decontaminate"]


@dataclasses.dataclass(frozen=True)
class DecontamConfig:
    jaccard_threshold: float = 0.8
    embedders: tuple[tuple[str, float], ...] = (("tfidf", 0.5), ("ops", 0.45))  # (embedder, L2 threshold)
    shingle_k: int = 3

    @classmethod
    def from_mapping(cls, m: dict) -> DecontamConfig:
        m = dict(m)
        if "embedders" in m:
            m["embedders"] = tuple((str(k), float(v)) for k, v in dict(m["embedders"] or {}).items())
        return cls(**m)


def decontaminate(
    candidates: list[CandidateProblem], evaluation: list[Problem], config: DecontamConfig = DecontamConfig()
) -> StageResult:
    result = StageResult("decontaminate")
    if not candidates:
        return result
    if not evaluation:
        raise ValueError("decontamination needs at least one evaluation problem (none were loaded)")
    index = ShingleIndex(config.jaccard_threshold)
    for p in evaluation:
        index.add(p.id, shingles(normalized_tokens(p.source), config.shingle_k))
    eval_sources, cand_sources = [p.source for p in evaluation], [c.source for c in candidates]
    nearest: list[dict[str, tuple[str, float]]] = [{} for _ in candidates]
    for spec, _ in config.embedders:
        embedder = make_embedder(spec)
        embedder.fit(eval_sources + cand_sources)
        distances = l2_distances(embedder.embed(cand_sources), embedder.embed(eval_sources))
        for i, row in enumerate(distances):
            j = int(np.argmin(row))
            nearest[i][spec] = (evaluation[j].id, float(row[j]))
    for c, near in zip(candidates, nearest):
        jaccard_id, jaccard_score = index.nearest(shingles(normalized_tokens(c.source), config.shingle_k))
        facts = {
            "jaccard": round(jaccard_score, 4),
            "jaccard_eval": jaccard_id,
            **{spec: {"nearest_eval": pid, "l2": round(d, 4)} for spec, (pid, d) in near.items()},
        }
        scored = c.with_facts(decontamination=facts)
        too_close = [(spec, t, *near[spec]) for spec, t in config.embedders if near[spec][1] < t]
        if jaccard_score > config.jaccard_threshold:
            result.reject(
                scored,
                f"token Jaccard {jaccard_score:.3f} > {config.jaccard_threshold} with an evaluation problem",
                jaccard_score,
                jaccard_id,
            )
        elif too_close:
            spec, t, pid, d = too_close[0]
            result.reject(scored, f"{spec} L2 distance {d:.3f} < {t} to an evaluation problem", d, pid)
        else:
            summary = ", ".join(f"{spec} {d:.3f} ({pid})" for spec, (pid, d) in near.items())
            result.keep(scored, f"nearest evaluation problems: {summary}; max Jaccard {jaccard_score:.3f}")
    return result
