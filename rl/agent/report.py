"""The agent's report: the benchmark's metrics (rl.bench.metrics) on the verified winners, the same metrics
over the search's own verdicts at growing budgets (the curves), and per problem the winner, its lineage and
what each operator contributed. Pure functions over the search's records; agent.json / agent.md writers.

    verified      summarize() over one result per problem: the re-verified winner (rl.agent.verify), or the
                  problem's best failure; correct rate, fast_p vs TorchInductor and eager, geomean speedups
    search        summarize() over every evaluated candidate (each one a "sample"): what the search saw
    curves        solved %, faster-than-TorchInductor % and geomean (failures = 1.0) after the first b
                  evaluations of every problem, b = 1, 2, 4, ... and the largest
    floor         per problem (GPU): the physical floor, the search's nearest kernel to it and the verified
                  winner's share of the floor's speed; `floor_stops` counts problems stopped there
"""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Any

from rl.agent.features import fitness
from rl.agent.records import OPERATORS, CandidateRecord
from rl.agent.search import FLOOR_STOP, ProblemOutcome
from rl.agent.verify import Verified
from rl.bench.metrics import AttemptRecord, ProblemResult, speedup_vs, summarize

__all__ = ["build_report", "lineage", "write_markdown"]


def _attempt(record: CandidateRecord, sample: int, verdict: Any = None) -> AttemptRecord:
    p = record.proposal
    return AttemptRecord(
        sample=sample,
        attempt=0,
        verdict=verdict or record.verdict,
        prompt_tokens=p.prompt_tokens,
        completion_tokens=p.completion_tokens,
        cost_usd=p.cost_usd,
        generate_seconds=p.generate_seconds,
        finish_reason=p.finish_reason,
        text=p.text,
    )


def _evaluated(outcome: ProblemOutcome) -> list[CandidateRecord]:
    return [r for r in outcome.records if r.duplicate_of is None]


def lineage(outcome: ProblemOutcome, record: CandidateRecord) -> list[dict[str, Any]]:
    """The winner's ancestry along first parents, oldest first: how it was found."""
    by_id = {r.id: r for r in outcome.records}
    chain, seen, node = [], set(), record
    while node is not None and node.id not in seen:
        seen.add(node.id)
        chain.append(
            {
                "id": node.id,
                "operator": node.proposal.operator,
                "strategy": node.proposal.strategy,
                "policy": node.proposal.policy,
                "status": node.verdict.status.value,
                "speedup": node.verdict.speedup,
            }
        )
        node = by_id.get(node.proposal.parents[0]) if node.proposal.parents else None
    return chain[::-1]


def _operator_stats(outcomes: list[ProblemOutcome]) -> dict[str, dict[str, Any]]:
    stats = {op: collections.Counter() for op in OPERATORS}
    for o in outcomes:
        best = -1.0
        for r in o.records:
            s = stats[r.proposal.operator]
            s["steps"] += 1
            s["duplicates"] += r.duplicate_of is not None
            s["correct"] += r.correct and r.duplicate_of is None
            f = fitness(r.verdict, r.reward)
            if r.duplicate_of is None and f > best:
                s["new_best"] += best >= 0  # the first candidate of a problem is not an improvement
                best = f
    return {op: dict(c) for op, c in stats.items() if c}


def _floor(outcome: ProblemOutcome, verified: Any) -> dict[str, Any] | None:
    """The physical floor and how near the kernels came (None on CPU, where no floor is measured)."""
    near = [r for r in _evaluated(outcome) if r.verdict.speed_of_light is not None]
    floor = next((r.verdict.floor_ms for r in near), verified.floor_ms if verified is not None else None)
    if floor is None:
        return None
    best = max(near, key=lambda r: r.verdict.speed_of_light, default=None)
    return {
        "floor_ms": floor,
        "search_nearest": None if best is None else {"id": best.id, "speed_of_light": best.verdict.speed_of_light},
        "verified_speed_of_light": verified.speed_of_light if verified is not None else None,
    }


def _budget_steps(n: int) -> list[int]:
    steps, b = [], 1
    while b < n:
        steps.append(b)
        b *= 2
    return steps + [n] if n else []


def _curves(outcomes: list[ProblemOutcome], levels: dict[str, int | None], baseline: str) -> list[dict[str, Any]]:
    longest = max((len(_evaluated(o)) for o in outcomes), default=0)
    rows = []
    for b in _budget_steps(longest):
        results = [
            ProblemResult(
                o.problem.id, levels.get(o.problem.id), tuple(_attempt(r, i) for i, r in enumerate(_evaluated(o)[:b]))
            )
            for o in outcomes
        ]
        s = summarize(results, baseline)
        rows.append(
            {
                "evaluations": b,
                "solved": s["correct_any"],
                "faster_than_inductor": s["faster_than_inductor"],
                "faster_than_eager": s["faster_than_eager"],
                "geomean_all": s["geomean_speedup"]["all"],
                "geomean_correct": s["geomean_speedup"]["correct"],
            }
        )
    return rows


def build_report(
    outcomes: list[ProblemOutcome], verified: list[Verified], baseline: str, run: dict[str, Any]
) -> dict[str, Any]:
    levels = {o.problem.id: o.problem.level for o in outcomes}
    by_id = {v.problem_id: v for v in verified}
    final, rows = [], []
    for o in outcomes:
        v = by_id[o.problem.id]
        evaluated = _evaluated(o)
        by_record = {r.id: r for r in evaluated}
        if v.record is not None:  # the verified winner, with its re-measured verdict
            attempt = _attempt(v.record, 0, v.verdict)
        elif v.tried:  # correct in the search, failed re-verification: that failure is what counts
            cid, verdict = v.tried[0]
            attempt = _attempt(by_record[cid], 0, verdict)
        elif evaluated:  # nothing correct: the problem's best failure
            attempt = _attempt(max(evaluated, key=lambda r: (fitness(r.verdict, r.reward), -r.id)), 0)
        else:
            attempt = None
        final.append(ProblemResult(o.problem.id, o.problem.level, (attempt,) if attempt else ()))
        winner = v.record
        shown = v.verdict or (winner.verdict if winner else None)
        rows.append(
            {
                "problem_id": o.problem.id,
                "level": o.problem.level,
                "candidates": len(o.records),
                "evaluated": len(evaluated),
                "resumed_from": o.resumed_from,
                "stop_reason": o.stop_reason,
                "correct_candidates": sum(r.correct for r in evaluated),
                "cells": len({r.cell for r in evaluated}),
                "winner": None
                if winner is None
                else {
                    "id": winner.id,
                    "operator": winner.proposal.operator,
                    "strategy": winner.proposal.strategy,
                    "policy": winner.proposal.policy,
                    "search_speedup": winner.verdict.speedup,
                    "verified_status": shown.status.value,
                    "verified_speedup": shown.speedup,
                    **{f"verified_speedup_{b}": speedup_vs(shown, b) for b in ("inductor", "eager")},
                    "lineage": lineage(o, winner),
                },
                "verification": [{"id": i, "status": vd.status.value, "speedup": vd.speedup} for i, vd in v.tried],
                "floor": _floor(o, shown),
                "operators": dict(collections.Counter(r.proposal.operator for r in o.records)),
                "tokens": sum(r.proposal.prompt_tokens + r.proposal.completion_tokens for r in o.records),
                "cost_usd": sum(r.proposal.cost_usd or 0.0 for r in o.records),
                "eval_seconds": sum(r.eval_seconds for r in o.records),
            }
        )
    search = [
        ProblemResult(o.problem.id, o.problem.level, tuple(_attempt(r, i) for i, r in enumerate(_evaluated(o))))
        for o in outcomes
    ]
    verified_summary = summarize(final, baseline)
    run = {**run, "floor_stops": sum(FLOOR_STOP in r["stop_reason"] for r in rows)}
    return {
        **{
            k: verified_summary[k]
            for k in (
                "problems",
                "correct_any",
                "fast_p",
                "fast_p_eager",
                "faster_than_inductor",
                "faster_than_eager",
                "geomean_speedup",
                "speedups_measured",
                "baseline",
            )
        },
        "solved": verified_summary["correct_any"],
        "verified": verified_summary,
        "search": summarize(search, baseline),
        "curves": _curves(outcomes, levels, baseline),
        "operators": _operator_stats(outcomes),
        "run": run,
        "per_problem": rows,
    }


def _f(x: Any, pct: bool = False) -> str:
    if x is None:
        return "-"
    return f"{100 * x:.1f}%" if pct else f"{x:.3f}"


def write_markdown(report: dict[str, Any], path: str | Path, plots: list[str] = ()) -> None:
    run, geo = report["run"], report["geomean_speedup"]
    lines = [
        f"# Agent run: {', '.join(run['policies'])} on {run['problem_set']}",
        "",
        f"Device {run['device']}, baseline {report['baseline']}, {run['evaluations']} evaluations, "
        f"{run['llm_calls']} LLM calls, {run['tokens']} tokens, wall {run['wall_seconds']:.1f} s. "
        f"Winners re-verified: {run['verify']}. Profiles of mutation parents: {run.get('profiles', 0)}; "
        f"problems stopped near the physical floor: {run.get('floor_stops', 0)} "
        f"(stop_at_floor_fraction {run.get('stop_at_floor_fraction')}).",
        "",
        "| metric (verified winners) | value |",
        "|---|---|",
        f"| problems | {report['problems']} |",
        f"| solved (correct) | {_f(report['solved'], True)} |",
        f"| faster than TorchInductor | {_f(report['faster_than_inductor'], True)} |",
        f"| faster than eager | {_f(report['faster_than_eager'], True)} |",
        *[f"| fast_{p} vs {report['baseline']} | {_f(v, True)} |" for p, v in report["fast_p"].items()],
        f"| fast_1 vs eager | {_f(report['fast_p_eager'].get('1'), True)} |",
        f"| geomean speedup, correct | {_f(geo['correct'])} |",
        f"| geomean speedup, all (failures = 1.0) | {_f(geo['all'])} |",
        "",
        "## Budget curve (search verdicts)",
        "",
        "| evaluations | solved | faster than TorchInductor | geomean all |",
        "|---|---|---|---|",
        *[
            f"| {c['evaluations']} | {_f(c['solved'], True)} | {_f(c['faster_than_inductor'], True)} | "
            f"{_f(c['geomean_all'])} |"
            for c in report["curves"]
        ],
        "",
        "## Operators",
        "",
        "| operator | steps | correct | duplicates | new best |",
        "|---|---|---|---|---|",
        *[
            f"| {op} | {s.get('steps', 0)} | {s.get('correct', 0)} | {s.get('duplicates', 0)} | "
            f"{s.get('new_best', 0)} |"
            for op, s in report["operators"].items()
        ],
        "",
        "## Problems",
        "",
        "| problem | candidates | correct | cells | winner | verified | speedup | of floor | stop |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in report["per_problem"]:
        w = row["winner"]
        lines.append(
            f"| {row['problem_id']} | {row['candidates']} | {row['correct_candidates']} | {row['cells']} | "
            + (
                f"#{w['id']} {w['operator']}{'/' + w['strategy'] if w['strategy'] else ''} | "
                f"{w['verified_status']} | {_f(w['verified_speedup'])}"
                if w
                else "- | - | -"
            )
            + f" | {_f((row['floor'] or {}).get('verified_speed_of_light'), True)} | {row['stop_reason']} |"
        )
    if run.get("notes"):
        lines += ["", *[f"Note: {n}" for n in run["notes"]]]
    lines += ["", *[f"![{Path(p).stem}]({Path(p).name})" for p in plots]]
    Path(path).write_text("\n".join(lines) + "\n")


def write_json(report: dict[str, Any], path: str | Path) -> None:
    Path(path).write_text(json.dumps(report, indent=1, default=str))
