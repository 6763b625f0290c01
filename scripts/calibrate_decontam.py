#!/usr/bin/env python
"""Distances the decontamination embedders give known duplicates and different problems (the basis of the
thresholds in conf/curate/config.yaml; the numbers are in docs/curation.md).

  python scripts/calibrate_decontam.py --kernelbench ../shared/kernelbench [--embedders lexical+ops tfidf ops]

Known duplicates: every KernelBench level 1-3 problem disguised (identifiers renamed, statements reordered,
comments changed: envs.data.calibration.disguise), and crawled torch.nn modules against the KernelBench
level-1 problem computing the same op (SEMANTIC_PAIRS). Different problems: each KernelBench problem's
nearest other KernelBench problem (an upper bound on what "different" looks like: KernelBench holds near
variants of its own problems, e.g. conv2d with square and asymmetric kernels)."""

from __future__ import annotations

import argparse
import json

import numpy as np

from envs.data.calibration import SEMANTIC_PAIRS, disguise
from envs.data.crawl.crawler import CrawlConfig, CrawlSkip, crawl
from envs.data.embed import l2_distances, make_embedder
from envs.data.textsim import jaccard, normalized_tokens, shingles
from envs.problems import load_kernelbench


def _quantiles(x: np.ndarray) -> dict[str, float]:
    return {
        k: round(float(v), 3)
        for k, v in zip(("min", "p05", "p50", "p95", "max"), np.quantile(x, [0, 0.05, 0.5, 0.95, 1]))
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernelbench", required=True)
    ap.add_argument("--embedders", nargs="+", default=["lexical+ops", "tfidf", "ops"])
    args = ap.parse_args()
    kb = load_kernelbench(args.kernelbench)
    disguised = [disguise(p.source, i) for i, p in enumerate(kb)]
    crawled = {c.origin.symbol.rsplit(".", 1)[-1]: c for c in crawl(CrawlConfig()) if not isinstance(c, CrawlSkip)}
    level1 = {int(p.id.rsplit("/", 1)[1]): p for p in kb if p.level == 1}
    pairs = [(crawled[name].source, level1[n].source) for name, n in SEMANTIC_PAIRS if name in crawled and n in level1]
    jac = np.array(
        [jaccard(shingles(normalized_tokens(a.source)), shingles(normalized_tokens(b))) for a, b in zip(kb, disguised)]
    )
    report = {
        "kernelbench_problems": len(kb),
        "semantic_pairs": len(pairs),
        "jaccard_disguised": _quantiles(jac),
        "embedders": {},
    }
    for spec in args.embedders:
        emb = make_embedder(spec)
        emb.fit([p.source for p in kb] + disguised + [a for a, _ in pairs])
        base = emb.embed([p.source for p in kb])
        d_dis = np.diag(l2_distances(base, emb.embed(disguised)))
        sem = np.array([l2_distances(emb.embed([a]), emb.embed([b]))[0, 0] for a, b in pairs])
        kk = l2_distances(base, base)
        np.fill_diagonal(kk, np.inf)
        nearest = kk.min(axis=1)
        report["embedders"][spec] = {
            "disguised_copies": _quantiles(d_dis),
            "semantic_pairs": _quantiles(sem),
            "kernelbench_nearest_other": _quantiles(nearest),
            "semantic_caught_at": {t: int((sem < t).sum()) for t in (0.45, 0.6, 0.7, 0.75, 0.8)},
            "kernelbench_nearest_below": {t: int((nearest < t).sum()) for t in (0.45, 0.6, 0.7, 0.75, 0.8)},
        }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
