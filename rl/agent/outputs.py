"""What an agent run leaves behind: the best kernel per problem, agent.json / agent.md with the plots, and the
verified winners in the solution store (envs/solutions.py) with their provenance, so `kernel_search` and SFT
data find them. Only re-verified correct kernels are stored (or search-correct ones when verification is off)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from envs.solutions import SolutionStore
from envs.source import extract_code
from rl.agent.plots import write_curves, write_tree
from rl.agent.report import write_json, write_markdown
from rl.agent.search import ProblemOutcome
from rl.agent.verify import Verified

__all__ = ["file_stem", "write_outputs"]

log = logging.getLogger("kernelrl.agent")


def file_stem(problem_id: str) -> str:
    return problem_id.replace("/", "__")


def _store_winners(
    outcomes: list[ProblemOutcome], verified: list[Verified], store: SolutionStore, split: str, run_name: str
) -> int:
    by_id = {v.problem_id: v for v in verified}
    added = 0
    for o in outcomes:
        v = by_id[o.problem.id]
        if v.record is None:
            continue
        verdict = v.verdict or v.record.verdict
        p = v.record.proposal
        provenance = (
            f"agent {run_name} candidate {v.record.id} ({p.operator}{'/' + p.strategy if p.strategy else ''}"
            f"{', policy ' + p.policy if p.policy else ''}{', re-verified' if v.verdict else ''})"
        )
        added += store.add_verified(o.problem, extract_code(p.text), verdict, split, provenance)
    return added


def write_outputs(
    report: dict[str, Any],
    outcomes: list[ProblemOutcome],
    verified: list[Verified],
    out_dir: Path,
    solutions: SolutionStore | None,
    split: str,
    run_name: str,
    plots: bool = True,
) -> dict[str, Any]:
    out_dir.mkdir(parents=True, exist_ok=True)
    best_dir = out_dir / "best"
    best_dir.mkdir(exist_ok=True)
    files = {}
    for v in verified:
        if v.record is not None:
            path = best_dir / f"{file_stem(v.problem_id)}.py"
            path.write_text(extract_code(v.record.proposal.text).rstrip() + "\n")
            files[v.problem_id] = str(path)
    pictures: list[str] = []
    if plots:
        try:
            pictures = [p for p in [write_curves(report, out_dir / "curves.png")] if p]
            winners = {v.problem_id: (v.record.id if v.record else None) for v in verified}
            for o in outcomes:
                p = write_tree(o, winners[o.problem.id], out_dir / f"tree_{file_stem(o.problem.id)}.png")
                if p:
                    pictures.append(p)
        except ImportError as e:  # a GPU image without matplotlib still gets the JSON and the markdown
            log.warning("no plots (%s); pip install matplotlib", e)
    stored = _store_winners(outcomes, verified, solutions, split, run_name) if solutions is not None else 0
    report["outputs"] = {
        "best_files": files,
        "plots": pictures,
        "solutions_added": stored,
        "solutions_store": str(solutions.path) if solutions is not None else None,
    }
    write_json(report, out_dir / "agent.json")
    write_markdown(report, out_dir / "agent.md", pictures)
    return report["outputs"]
