"""Plain-text tables of verdicts for terminals and notes."""

from __future__ import annotations

from typing import Callable

from envs.problems import Problem
from envs.verdict import Verdict


def _ms(stats) -> str:
    return f"{stats.median_ms:.3f}" if stats is not None else "-"


def verdict_table(problems: list[Problem], verdicts: list[Verdict], reward: Callable[[Verdict], float]) -> str:
    """One row per verdict; `reward` (from rewards/) fills the reward column."""
    header = [
        "problem",
        "lvl",
        "status",
        "eager ms",
        "inductor ms",
        "kernel ms",
        "speedup",
        "reward",
        "eval s",
        "cached",
    ]
    rows = []
    for p, v in zip(problems, verdicts):
        t = v.timings
        rows.append(
            [
                p.id,
                "-" if p.level is None else str(p.level),
                v.status.value,
                _ms(t.eager if t else None),
                _ms(t.inductor if t else None),
                _ms(t.kernel if t else None),
                f"{v.speedup:.2f}" if v.speedup is not None else "-",
                f"{reward(v):.3f}",
                f"{v.phase_seconds.get('total', 0.0):.1f}",
                "yes" if v.cached else "",
            ]
        )
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths)), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    failures = [(p, v) for p, v in zip(problems, verdicts) if not v.correct]
    for p, v in failures:
        lines.append(f"\n{p.id}: {v.status.value}\n{v.error}")
    return "\n".join(lines)


def markdown_table(problems: list[Problem], verdicts: list[Verdict]) -> str:
    """Per-problem figures for docs/gpu-notes.md."""
    lines = [
        "| problem | status | t_eager ms | t_inductor ms | t_reference ms | speedup vs inductor | "
        "speedup vs eager | eval wall s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for p, v in zip(problems, verdicts):
        t = v.timings
        eager, inductor, kernel = (t.eager, t.inductor, t.kernel) if t else (None, None, None)
        vs_eager = f"{eager.median_ms / kernel.median_ms:.2f}" if eager and kernel else "-"
        vs_inductor = f"{inductor.median_ms / kernel.median_ms:.2f}" if inductor and kernel else "-"
        lines.append(
            f"| {p.id} | {v.status.value} | {_ms(eager)} | {_ms(inductor)} | {_ms(kernel)} | "
            f"{vs_inductor} | {vs_eager} | {v.phase_seconds.get('total', 0.0):.1f} |"
        )
    return "\n".join(lines)
