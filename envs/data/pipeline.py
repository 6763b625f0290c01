"""The curation pipeline: sources -> normalize -> decontaminate -> deduplicate -> validate -> difficulty ->
variants -> runtime -> cluster -> a problem-set directory with its manifest. Validation (running every
problem in a worker) comes after the similarity stages, which read sources only, so it runs on the fewest
problems; the cost is that of a group of near-duplicates the first is kept even if a later one would be
the only one that runs. Each stage is its own module
(this package); this one wires them, records every decision and writes the funnel.

    report = run_pipeline(CurateConfig.from_mapping({...}))   # or scripts/curate.py (Hydra)
"""

from __future__ import annotations

import dataclasses
import logging
import time
from pathlib import Path
from typing import Any, Mapping

from envs.cache import SqliteCache
from envs.data.cluster import cluster_and_weight
from envs.data.crawl.crawler import CrawlConfig, CrawlSkip, crawl
from envs.data.decontam import DecontamConfig, decontaminate
from envs.data.dedup import deduplicate
from envs.data.difficulty import assign_difficulty
from envs.data.embed import make_embedder
from envs.data.llm import CurationLLM
from envs.data.output import funnel, prepare_output, write_set
from envs.data.records import CandidateProblem, Decision, Origin, StageResult
from envs.data.runtime import RuntimeConfig, filter_runtime
from envs.data.fusion_problems import SyntheticConfig, generate
from envs.data.validate import normalize, validate
from envs.data.variants import shape_variants
from envs.problems import Problem, load_problem_set
from envs.settings import EvalSettings, reject_unknown
from envs.small_sizes import SizeSearch

__all__ = ["CurateConfig", "PipelineReport", "run_pipeline", "STAGES"]

log = logging.getLogger(__name__)
STAGES = ["normalize", "decontaminate", "deduplicate", "validate", "difficulty", "variants", "runtime", "cluster"]


@dataclasses.dataclass(frozen=True)
class CurateConfig:
    output: str = "curated"
    overwrite: bool = False
    sources: tuple[str, ...] = ()  # directories of KernelBench-format files (or KernelBench checkouts)
    crawl: CrawlConfig | None = CrawlConfig()  # None: no crawling
    synthetic: SyntheticConfig | None = SyntheticConfig()  # None: no synthetic problems
    decontaminate: tuple[str, ...] = ("builtin",)  # evaluation sets: problem-set specs (KernelBench, builtin, dirs)
    decontam: DecontamConfig = DecontamConfig()
    cluster_embedder: str = "tfidf"  # the vectors k-means clusters: tfidf | ops | sentence_transformers:<model>
    dedup_threshold: float = 0.8
    difficulty_llm: dict | None = None  # an OpenAI-compatible endpoint (JudgeConfig fields); None: structural
    difficulty_rubric: str | None = None  # the judge's system prompt (conf/curate/difficulty_rubric.md)
    variants_per_problem: int = 0
    runtime: RuntimeConfig = RuntimeConfig()
    clusters: int = 50
    seed: int = 0
    device: str = "cpu"  # where problems are validated and timed: cpu | cuda | auto
    workers: int = 1
    skip: tuple[str, ...] = ()  # stages to leave out: decontaminate, deduplicate, variants, runtime, cluster
    size_search: SizeSearch = SizeSearch()
    limit: int | None = None  # at most this many candidates per source kind (a quick look at a big crawl)
    cache: str | None = None  # SQLite file remembering validation results (the verdict cache); None: none

    def __post_init__(self) -> None:
        unknown = set(self.skip) - {"decontaminate", "deduplicate", "variants", "runtime", "cluster"}
        if unknown:
            raise ValueError(f"curate.skip: unknown or unskippable stages {sorted(unknown)}")
        if "decontaminate" not in self.skip and not self.decontaminate:
            raise ValueError("curate.decontaminate names no evaluation set; list one or skip=[decontaminate]")

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any]) -> CurateConfig:
        m = dict(m)
        reject_unknown(cls, m, "curate")
        if m.get("decontam") is not None:
            reject_unknown(DecontamConfig, dict(m["decontam"]), "curate.decontam")
            m["decontam"] = DecontamConfig.from_mapping(m["decontam"])
        nested = {
            "crawl": CrawlConfig,
            "synthetic": SyntheticConfig,
            "runtime": RuntimeConfig,
            "size_search": SizeSearch,
        }
        for key, kind in nested.items():
            if key in m and m[key] is not None:
                sub = dict(m[key])
                if key in ("crawl", "synthetic") and not sub.pop("enabled", True):
                    m[key] = None
                    continue
                reject_unknown(kind, sub, f"curate.{key}")
                m[key] = kind(**{k: tuple(v) if isinstance(v, list) else v for k, v in sub.items()})
        for key in ("sources", "decontaminate", "skip"):
            if key in m:
                m[key] = tuple(m[key] or ())
        return cls(**m)


@dataclasses.dataclass
class PipelineReport:
    output: Path
    kept: int
    funnel: dict[str, Any]
    seconds: dict[str, float]


def _directory_candidates(spec: str) -> list[CandidateProblem]:
    problems: list[Problem] = load_problem_set(spec)
    out = []
    for p in problems:
        name = p.id.replace("/", "_")
        out.append(CandidateProblem(f"src_{name}", p.source, Origin("kernelbench", p.path or spec, symbol=p.id)))
    return out


def _evaluation_set(specs: tuple[str, ...]) -> list[Problem]:
    problems: list[Problem] = []
    for spec in specs:
        problems += load_problem_set(spec)
    return problems


def run_pipeline(config: CurateConfig) -> PipelineReport:
    from envs.worker.worker_set import WorkerSet

    out = prepare_output(config.output, config.overwrite)
    seconds: dict[str, float] = {}
    decisions: list[Decision] = []
    skipped_sources: list[dict[str, Any]] = []
    started = time.monotonic()

    candidates: list[CandidateProblem] = []
    for spec in config.sources:
        candidates += _directory_candidates(spec)[: config.limit]
    if config.crawl is not None:
        crawled = 0
        for item in crawl(config.crawl):
            if isinstance(item, CrawlSkip):
                skipped_sources.append(
                    {
                        "problem": item.id,
                        "stage": "crawl",
                        "decision": "reject",
                        "reason": item.reason,
                        "source_path": item.path,
                    }
                )
            elif config.limit is None or crawled < config.limit:
                candidates.append(item)
                crawled += 1
    if config.synthetic is not None:
        synthetic = (
            config.synthetic
            if config.limit is None
            else dataclasses.replace(config.synthetic, count=min(config.synthetic.count, config.limit))
        )
        candidates += list(generate(synthetic))
    seconds["sources"] = time.monotonic() - started
    kinds = {c.id: c.origin.kind for c in candidates}
    entered: dict[str, int] = {}
    for c in candidates:
        entered[c.origin.kind] = entered.get(c.origin.kind, 0) + 1
    log.info("curate: %d candidates %s (%d crawled classes skipped)", len(candidates), entered, len(skipped_sources))

    def run(stage: str, fn, *args) -> list[CandidateProblem]:
        t = time.monotonic()
        result: StageResult = fn(*args)
        seconds[stage] = time.monotonic() - t
        decisions.extend(result.decisions)
        log.info("curate: %s kept %d (%.1f s)", stage, len(result.kept), seconds[stage])
        return result.kept

    cache = SqliteCache(Path(config.cache).expanduser()) if config.cache else None
    settings = EvalSettings(
        device=config.device,
        size="small" if config.device == "cpu" else None,
        workers=config.workers,
        correctness_trials=3,
    )
    pool = WorkerSet(settings.hiding(cache.path if cache is not None else None))  # workers never see the cache
    try:
        kept = run("normalize", normalize, candidates)
        # The similarity stages read sources only: they run before the expensive one that runs every problem.
        if "decontaminate" not in config.skip:
            kept = run("decontaminate", decontaminate, kept, _evaluation_set(config.decontaminate), config.decontam)
        if "deduplicate" not in config.skip:
            kept = run("deduplicate", deduplicate, kept, config.dedup_threshold, config.decontam.shingle_k)
        kept = run("validate", validate, kept, pool, config.size_search, cache)
        llm = CurationLLM.from_mapping(config.difficulty_llm) if config.difficulty_llm else None
        kept = run("difficulty", assign_difficulty, kept, llm, config.difficulty_rubric)
        if "variants" not in config.skip and config.variants_per_problem > 0:
            variants = shape_variants(kept, config.variants_per_problem, config.seed)
            for v in variants:
                kinds[v.id] = kinds.get(v.origin.parent or "", "variant")
            t = time.monotonic()
            checked = validate(variants, pool, config.size_search, cache)
            for d in checked.decisions:
                decisions.append(dataclasses.replace(d, stage="variants"))
            seconds["variants"] = time.monotonic() - t
            kept = kept + checked.kept
        if "runtime" not in config.skip:
            kept = run("runtime", filter_runtime, kept, pool, config.runtime)
        if "cluster" not in config.skip:
            kept = run(
                "cluster",
                cluster_and_weight,
                kept,
                make_embedder(config.cluster_embedder),
                config.clusters,
                config.seed,
            )
    finally:
        pool.close()
    seconds["total"] = time.monotonic() - started
    order = [s for s in STAGES if s in seconds]
    table = funnel(order, entered, decisions, kinds)
    table["seconds"] = {k: round(v, 1) for k, v in seconds.items()}
    table["crawl_skipped"] = len(skipped_sources)
    write_set(out, kept, decisions, table, skipped_sources)
    return PipelineReport(out, len(kept), table, seconds)
