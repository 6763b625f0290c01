"""The curated problem set on disk: one problem file per kept problem (any problem-set loader reads the
directory), `manifest.jsonl` (one line per kept problem), `rejected.jsonl` (one line per dropped candidate:
its source path, the stage, the reason, the score and what it collided with), `decisions.jsonl` (every
decision of every stage, notes included), `funnel.json` / `funnel.md` (counts per stage and source kind)."""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Any

from envs.data.records import CandidateProblem, Decision

__all__ = ["OutputError", "prepare_output", "write_set", "funnel", "funnel_markdown", "MANIFEST"]

MANIFEST = "manifest.jsonl"
_OWN = ("manifest.jsonl", "rejected.jsonl", "decisions.jsonl", "funnel.json", "funnel.md")


class OutputError(ValueError):
    """The output directory cannot take a curated set (it holds other files)."""


def prepare_output(directory: str | Path, overwrite: bool) -> Path:
    """An empty output directory. `overwrite` replaces a previous curated set (a directory with a manifest);
    a directory with anything else in it is refused, so nothing unrelated is ever deleted."""
    out = Path(directory)
    if out.exists() and any(out.iterdir()):
        if not (out / MANIFEST).is_file():
            raise OutputError(f"{out}: not empty and not a curated set (no {MANIFEST}); choose another output")
        if not overwrite:
            raise OutputError(f"{out}: holds a curated set; pass overwrite=true to replace it")
        strangers = [p.name for p in out.iterdir() if not (p.suffix == ".py" or p.name in _OWN)]
        if strangers:
            raise OutputError(f"{out}: holds files a curated set does not write ({strangers[:5]}); not replacing it")
        for p in out.iterdir():
            p.unlink()
    out.mkdir(parents=True, exist_ok=True)
    return out


def _manifest_line(c: CandidateProblem) -> dict[str, Any]:
    f = c.facts
    return {
        "id": c.id,
        "file": f"{c.id}.py",
        "source": c.origin.path,
        "kind": c.origin.kind,
        "package": c.origin.package,
        "version": c.origin.version,
        "license": c.origin.license,
        "symbol": c.origin.symbol,
        "parent": c.origin.parent,
        "level": c.level,
        "difficulty": f.get("difficulty"),
        "cluster": f.get("cluster"),
        "cluster_size": f.get("cluster_size"),
        "weight": f.get("weight"),
        "baselines": f.get("baselines"),
        "decontamination": f.get("decontamination"),
        "dedup": f.get("dedup"),
        "sha256": c.sha256,
    }


def funnel(
    stage_order: list[str], entered: dict[str, int], decisions: list[Decision], kinds: dict[str, str]
) -> dict[str, Any]:
    """{stage: {kind: {"in", "rejected", "out"}}}, plus totals; `entered` counts candidates per kind."""
    rejected: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    added: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for d in decisions:
        if d.decision == "reject":
            rejected[d.stage][kinds.get(d.problem, "?")] += 1
    table: dict[str, Any] = {"entered": dict(entered), "stages": {}}
    current = collections.Counter(entered)
    for stage in stage_order:
        row = {}
        for kind in sorted(set(current) | set(rejected[stage])):
            if stage == "variants":
                added[stage][kind] = sum(
                    1
                    for d in decisions
                    if d.stage == "variants" and d.decision == "keep" and kinds.get(d.problem) == kind
                )
            n_in = current[kind]
            # Variants are new candidates: the kept ones are added, the rejected ones never counted.
            n_out = n_in + added[stage][kind] if stage == "variants" else n_in - rejected[stage][kind]
            row[kind] = {"in": n_in, "rejected": rejected[stage][kind], "out": n_out}
            current[kind] = n_out
        table["stages"][stage] = row
    table["kept"] = dict(current)
    return table


def funnel_markdown(table: dict[str, Any]) -> str:
    kinds = sorted({k for row in table["stages"].values() for k in row})
    lines = ["| stage | " + " | ".join(kinds) + " | total |", "|---|" + "---|" * (len(kinds) + 1)]
    lines.append(
        "| candidates | "
        + " | ".join(str(table["entered"].get(k, 0)) for k in kinds)
        + f" | {sum(table['entered'].values())} |"
    )
    for stage, row in table["stages"].items():
        cells = [f"{row[k]['out']}" if k in row else "0" for k in kinds]
        lines.append(f"| after {stage} | " + " | ".join(cells) + f" | {sum(r['out'] for r in row.values())} |")
    return "\n".join(lines) + "\n"


def write_set(
    out: Path,
    kept: list[CandidateProblem],
    decisions: list[Decision],
    table: dict[str, Any],
    extra_rejected: list[dict[str, Any]] = (),
) -> None:
    for c in kept:
        (out / f"{c.id}.py").write_text(c.source)
    with open(out / MANIFEST, "w") as f:
        for c in kept:
            f.write(json.dumps(_manifest_line(c)) + "\n")
    with open(out / "rejected.jsonl", "w") as f:
        for r in extra_rejected:
            f.write(json.dumps(r) + "\n")
        for d in decisions:
            if d.decision == "reject":
                f.write(json.dumps(d.to_dict()) + "\n")
    with open(out / "decisions.jsonl", "w") as f:
        for d in decisions:
            f.write(json.dumps(d.to_dict()) + "\n")
    (out / "funnel.json").write_text(json.dumps(table, indent=1) + "\n")
    (out / "funnel.md").write_text(funnel_markdown(table))
