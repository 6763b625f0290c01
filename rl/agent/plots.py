"""PNG pictures of an agent run (matplotlib, Agg): the budget curves and each problem's search tree.

The tree: one dot per evaluated candidate, x = its order in the search, y = its fitness (rl.agent.features:
failures below 0.5, correct kernels from 1 + reward up, plus the speedup on a GPU), colour = operator,
filled = correct, an edge from every parent to its child, the winner ringed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rl.agent.features import fitness
from rl.agent.records import OPERATORS
from rl.agent.search import ProblemOutcome

__all__ = ["write_curves", "write_tree"]

_COLOURS = dict(zip(OPERATORS, ("tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:red")))


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def write_curves(report: dict[str, Any], path: Path) -> str | None:
    curves = report["curves"]
    if not curves:
        return None
    plt = _plt()
    fig, ax = plt.subplots(1, 2, figsize=(9, 3.4))
    x = [c["evaluations"] for c in curves]
    ax[0].plot(x, [100 * (c["solved"] or 0) for c in curves], marker="o", label="solved")
    ax[0].plot(x, [100 * (c["faster_than_inductor"] or 0) for c in curves], marker="s", label="faster than Inductor")
    ax[0].set(xlabel="evaluations per problem", ylabel="% of problems", ylim=(-2, 102))
    ax[0].legend(fontsize=8)
    geo = [c["geomean_all"] for c in curves]
    if any(g is not None for g in geo):
        ax[1].plot(x, [g if g is not None else float("nan") for g in geo], marker="o")
    else:
        ax[1].text(0.5, 0.5, "no speedups measured (CPU)", ha="center", va="center", transform=ax[1].transAxes)
    ax[1].set(xlabel="evaluations per problem", ylabel=f"geomean speedup vs {report['baseline']}")
    for a in ax:
        a.set_xscale("log", base=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


def write_tree(outcome: ProblemOutcome, winner_id: int | None, path: Path) -> str | None:
    nodes = [r for r in outcome.records if r.duplicate_of is None]
    if not nodes:
        return None
    plt = _plt()
    order = {r.id: i for i, r in enumerate(nodes)}
    y = {r.id: fitness(r.verdict, r.reward) for r in nodes}
    fig, ax = plt.subplots(figsize=(max(5.0, 0.25 * len(nodes)), 3.6))
    for r in nodes:
        for parent in r.proposal.parents:
            if parent in order:
                ax.plot([order[parent], order[r.id]], [y[parent], y[r.id]], color="0.75", lw=0.8, zorder=1)
    for op in OPERATORS:
        pts = [r for r in nodes if r.proposal.operator == op]
        if not pts:
            continue
        ax.scatter(
            [order[r.id] for r in pts],
            [y[r.id] for r in pts],
            s=28,
            zorder=2,
            label=op,
            edgecolors=_COLOURS[op],
            facecolors=[_COLOURS[op] if r.correct else "white" for r in pts],
        )
    if winner_id in order:
        ax.scatter([order[winner_id]], [y[winner_id]], s=160, facecolors="none", edgecolors="black", zorder=3)
    ax.set_title(f"{outcome.problem.id}: search tree (filled = correct, ring = winner)", fontsize=9)
    ax.set(xlabel="candidate", ylabel="fitness")
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)
