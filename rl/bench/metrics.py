"""Benchmark metrics over typed per-problem results: what `scripts/benchmark.py` reports and what the training
loop's periodic validation can log (`validation_metrics`). Pure functions, no I/O.

Definitions (docs/benchmark.md has the sources):
  correct@1                 share of problems whose first attempt of the first sample is correct
  correct_within_attempts   share of problems with a correct answer within the refinement budget (sample 0)
  pass@k                    Chen et al. 2021 unbiased estimator 1 - C(n-c, k) / C(n, k), averaged over problems,
                            from n independent samples of which c are correct (a sample = its refinement chain)
  fast_p                    KernelBench: share of problems whose answer is correct AND speedup > p
  faster_than_<baseline>    share of problems whose answer is correct and faster than TorchInductor / eager
  geomean_speedup.correct   geometric mean speedup over problems with a correct answer
  geomean_speedup.all       over all problems; a problem without a correct answer counts as speedup 1.0
                            (the fallback rule: one keeps the baseline implementation when the kernel fails)
A problem's "answer" is its best attempt: the correct one with the highest speedup over every sample and
refinement attempt the run allowed (with one sample and one attempt: that attempt).
"""

from __future__ import annotations

import collections
import dataclasses
import math
from typing import Any, Iterable, Mapping

from envs.speedup import rebase_speedup
from envs.verdict import Status, Verdict

__all__ = [
    "AttemptRecord",
    "ProblemResult",
    "FAST_P",
    "pass_at_k",
    "speedup_vs",
    "geomean",
    "summarize",
    "results_from_groups",
    "validation_metrics",
    "flatten",
]

FAST_P = (0.0, 1.0, 1.2, 1.5, 2.0)
BASELINES = ("inductor", "eager")


@dataclasses.dataclass(frozen=True)
class AttemptRecord:
    """One evaluated answer: sample `sample` (0..n-1), refinement attempt `attempt` (0..N-1)."""

    sample: int
    attempt: int
    verdict: Verdict
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None  # None: unknown (local model, or a model without a price)
    generate_seconds: float = 0.0
    finish_reason: str | None = None
    text: str = ""  # the policy's answer as produced (kept for the report and W&B table)


@dataclasses.dataclass(frozen=True)
class ProblemResult:
    problem_id: str
    level: int | None
    attempts: tuple[AttemptRecord, ...]
    sizes: dict[str, Any] | None = None  # the sizes evaluated at when they were derived (envs.small_sizes)

    def chain(self, sample: int) -> list[AttemptRecord]:
        return sorted((a for a in self.attempts if a.sample == sample), key=lambda a: a.attempt)

    @property
    def samples(self) -> list[int]:
        return sorted({a.sample for a in self.attempts})

    def first(self) -> AttemptRecord | None:
        chain = self.chain(0)
        return chain[0] if chain else None

    def best(self, attempts: Iterable[AttemptRecord] | None = None) -> AttemptRecord | None:
        """The correct attempt with the highest speedup (unmeasured counts as lowest), else the last one."""
        pool = list(self.attempts if attempts is None else attempts)
        if not pool:
            return None
        correct = [a for a in pool if a.verdict.correct]
        if correct:
            return max(correct, key=lambda a: a.verdict.speedup if a.verdict.speedup is not None else -1.0)
        return max(pool, key=lambda a: (a.sample == 0, a.attempt))


def pass_at_k(n: int, c: int, k: int) -> float:
    """Chen et al. 2021 (Codex paper, eq. 1): 1 - C(n-c, k) / C(n, k) as a numerically stable product."""
    if not (0 <= c <= n) or k < 1 or k > n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def speedup_vs(verdict: Verdict, baseline: str) -> float | None:
    """The verdict's speedup against `baseline` (None when it was not measured): its own speedup where that is
    the baseline it was judged against, else rebased through the cached baselines the way the environment does
    it (envs.speedup.rebase_speedup), so a benchmark reports the speedup the reward saw, re-anchoring included,
    not a ratio of medians measured in different timing regimes. Verdicts without a speedup (correct but not
    timed against anything) get the ratio of the timings' medians, rebase_speedup's own fallback."""
    if baseline not in BASELINES:
        raise ValueError(f"baseline must be one of {BASELINES}, not {baseline!r}")
    if verdict.speedup is not None and verdict.baseline == baseline:
        return verdict.speedup
    t = verdict.timings
    base = getattr(t, baseline, None) if t is not None else None
    if base is None or t.kernel is None or t.kernel.median_ms <= 0:
        return None
    return rebase_speedup(verdict, baseline)[0]  # without a speedup to rebase: the medians' ratio


def geomean(values: Iterable[float]) -> float | None:
    vals = list(values)
    if not vals:
        return None
    if any(v <= 0 for v in vals):
        raise ValueError("a geometric mean needs positive values")
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def _share(flags: list[bool]) -> float | None:
    return sum(flags) / len(flags) if flags else None


def _pass_ks(n: int) -> list[int]:
    ks = [k for k in (1, 2, 3, 5, 10, 20, 50, 100) if k <= n]
    return ks + ([n] if n not in ks else [])


def _summary(results: list[ProblemResult], baseline: str) -> dict[str, Any]:
    n_problems = len(results)
    firsts = [r.first() for r in results]
    finals = [r.best() for r in results]
    out: dict[str, Any] = {"problems": n_problems}
    out["correct_at_1"] = _share([bool(a and a.verdict.correct) for a in firsts])
    out["correct_within_attempts"] = _share(
        [bool(r.chain(0)) and any(a.verdict.correct for a in r.chain(0)) for r in results]
    )
    out["correct_any"] = _share([bool(a and a.verdict.correct) for a in finals])
    # pass@k over the n samples every problem has (a sample is correct when its chain reached a correct answer)
    n = min((len(r.samples) for r in results), default=0)
    out["samples_per_problem"] = n
    out["pass_at_k"] = {}
    if n:
        per_problem = [(n, sum(any(a.verdict.correct for a in r.chain(s)) for s in r.samples[:n])) for r in results]
        out["pass_at_k"] = {
            str(k): sum(pass_at_k(nn, c, k) for nn, c in per_problem) / len(per_problem) for k in _pass_ks(n)
        }
    measured = any(speedup_vs(a.verdict, b) is not None for r in results for a in r.attempts for b in BASELINES)
    out["speedups_measured"] = measured

    def fast(p: float, base: str, attempts: list[AttemptRecord | None]) -> float | None:
        if not measured:  # CPU: no timings; fast_0 is correctness (every correct kernel has speedup > 0)
            return _share([bool(a and a.verdict.correct) for a in attempts]) if p == 0 else None
        return _share([bool(a and a.verdict.correct and (speedup_vs(a.verdict, base) or 0.0) > p) for a in attempts])

    out["baseline"] = baseline
    out["fast_p"] = {f"{p:g}": fast(p, baseline, finals) for p in FAST_P}
    out["fast_p_at_1"] = {f"{p:g}": fast(p, baseline, firsts) for p in FAST_P}
    out["fast_p_eager"] = {f"{p:g}": fast(p, "eager", finals) for p in FAST_P}
    out["fast_p_inductor"] = {f"{p:g}": fast(p, "inductor", finals) for p in FAST_P}
    out["faster_than_inductor"] = fast(1.0, "inductor", finals)
    out["faster_than_eager"] = fast(1.0, "eager", finals)
    geo: dict[str, Any] = {}
    for base in BASELINES:
        correct = [speedup_vs(a.verdict, base) for a in finals if a and a.verdict.correct]
        correct = [s for s in correct if s is not None and s > 0]
        fallback = [(speedup_vs(a.verdict, base) or 1.0) if a and a.verdict.correct else 1.0 for a in finals]
        geo[base] = {
            "correct": geomean(correct),
            "all": geomean(fallback) if measured and finals else None,
            "correct_count": len(correct),
        }
    out["geomean_speedup"] = {
        "correct": geo[baseline]["correct"],
        "all": geo[baseline]["all"],
        "rule": "all: a problem without a correct answer counts as speedup 1.0 (fallback to the baseline)",
        **{f"vs_{b}": g for b, g in geo.items()},
    }
    every = [a for r in results for a in r.attempts]
    out["status_mix"] = {s.value: sum(a.verdict.status is s for a in every) for s in Status}
    out["final_status_mix"] = {s.value: sum(bool(a and a.verdict.status is s) for a in finals) for s in Status}
    out["hack_mix"] = dict(
        sorted(collections.Counter(a.verdict.hack.category for a in every if a.verdict.hack).items())
    )
    prompt = sum(a.prompt_tokens for a in every)
    completion = sum(a.completion_tokens for a in every)
    costs = [a.cost_usd for a in every if a.cost_usd is not None]
    out["tokens"] = {
        "prompt": prompt,
        "completion": completion,
        "per_problem": (prompt + completion) / n_problems if n_problems else None,
        "completion_per_problem": completion / n_problems if n_problems else None,
    }
    cost = sum(costs) if costs else None
    out["cost_usd"] = {"total": cost, "per_problem": cost / n_problems if cost is not None and n_problems else None}
    out["attempts"] = len(every)
    return out


def summarize(results: Iterable[ProblemResult], baseline: str = "inductor") -> dict[str, Any]:
    """Overall metrics plus the same metrics per level (`per_level`, keys are level numbers as strings)."""
    results = list(results)
    out = _summary(results, baseline)
    levels = sorted({r.level for r in results}, key=lambda x: (x is None, x))
    out["per_level"] = {
        ("none" if lv is None else str(lv)): _summary([r for r in results if r.level == lv], baseline) for lv in levels
    }
    # KernelBench's own levels (1 single operators, 2 fusions, 3 architectures, 4 HF models) for its problems,
    # apart from the built-in set's L0-L5 scale, so a mixed run still reports per KernelBench level
    kb = [r for r in results if kernelbench_level(r.problem_id) is not None]
    if kb:
        kb_levels = sorted({kernelbench_level(r.problem_id) for r in kb})
        out["per_kernelbench_level"] = {
            str(lv): _summary([r for r in kb if kernelbench_level(r.problem_id) == lv], baseline) for lv in kb_levels
        }
    out["level_scale"] = "kernelbench" if kb and len(kb) == len(results) else "mixed" if kb else "kernelrl"
    return out


KERNELBENCH_LEVELS = {
    1: "single-kernel operators",
    2: "simple fusions",
    3: "full architectures",
    4: "Hugging Face models",
}


def kernelbench_level(problem_id: str) -> int | None:
    """N of a KernelBench problem id (`kernelbench/level<N>/<number>`, envs.problems.load_kernelbench), else None."""
    parts = problem_id.split("/")
    if len(parts) == 3 and parts[0] == "kernelbench" and parts[1].startswith("level") and parts[1][5:].isdigit():
        return int(parts[1][5:])
    return None


def flatten(summary: Mapping[str, Any], prefix: str) -> dict[str, float]:
    """Scalar metrics as flat `<prefix>/<name>` keys for W&B / metrics.jsonl (None becomes NaN)."""
    out: dict[str, float] = {}

    def put(key: str, value: Any) -> None:
        if isinstance(value, bool):
            return
        if isinstance(value, (int, float)) or value is None:
            out[f"{prefix}/{key}"] = math.nan if value is None else float(value)

    for key in (
        "problems",
        "correct_at_1",
        "correct_within_attempts",
        "correct_any",
        "faster_than_inductor",
        "faster_than_eager",
    ):
        put(key, summary.get(key))
    for p, v in summary.get("fast_p", {}).items():
        put(f"fast_{p}", v)
    for p, v in summary.get("fast_p_eager", {}).items():
        put(f"fast_{p}_eager", v)
    for k, v in summary.get("pass_at_k", {}).items():
        put(f"pass_at_{k}", v)
    geo = summary.get("geomean_speedup", {})
    put("geomean_speedup_correct", geo.get("correct"))
    put("geomean_speedup_all", geo.get("all"))
    for level, s in summary.get("per_level", {}).items():
        put(f"level{level}/correct_at_1", s.get("correct_at_1"))
        put(f"level{level}/fast_1", s.get("fast_p", {}).get("1"))
    for level, s in summary.get("per_kernelbench_level", {}).items():
        put(f"kernelbench_level{level}/correct_at_1", s.get("correct_at_1"))
        put(f"kernelbench_level{level}/fast_1", s.get("fast_p", {}).get("1"))
        put(f"kernelbench_level{level}/fast_1_eager", s.get("fast_p_eager", {}).get("1"))
    return out


def results_from_groups(groups: Iterable[Any], levels: Mapping[str, int | None] | None = None) -> list[ProblemResult]:
    """rl.types.Group records (one request's n samples, one attempt each) -> ProblemResults; a problem with
    several groups gets their samples in order. `levels`: problem id -> level."""
    by_problem: dict[str, list[AttemptRecord]] = collections.defaultdict(list)
    for g in groups:
        for s in g.samples:
            sample = s.sample
            usage = sample.usage or {}
            records = by_problem[g.problem_id]
            records.append(
                AttemptRecord(
                    sample=len(records),
                    attempt=0,
                    verdict=s.verdict,
                    prompt_tokens=int(usage.get("prompt_tokens", len(sample.prompt_ids))),
                    completion_tokens=int(usage.get("completion_tokens", len(sample.completion_ids))),
                    cost_usd=usage.get("cost_usd"),
                    generate_seconds=sample.seconds,
                    finish_reason=sample.finish_reason,
                    text=sample.text,
                )
            )
    levels = levels or {}
    return [ProblemResult(pid, levels.get(pid), tuple(recs)) for pid, recs in by_problem.items()]


def validation_metrics(
    groups: Iterable[Any],
    levels: Mapping[str, int | None] | None = None,
    prefix: str = "val",
    baseline: str = "inductor",
) -> dict[str, float]:
    """The benchmark's metrics for the training loop's validation groups, as flat `<prefix>/...` floats."""
    return flatten(summarize(results_from_groups(groups, levels), baseline), prefix)
