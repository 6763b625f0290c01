"""Stage: shape diversification by rules. A variant of a problem scales one of its size constants (a name in
SMALL_SIZES, drawn with a seeded RNG) by 2 or 1/2 at both sizes, the full one and the small one, so the CPU
check runs the variant's own shape; every variant is validated like any candidate and records its parent.
Variants come after deduplication on purpose: they are near-duplicates by construction."""

from __future__ import annotations

import ast
import dataclasses
import random

from envs.data.records import CandidateProblem

__all__ = ["shape_variants"]


def _rewrite(source: str, name: str, factor: float) -> str | None:
    tree = ast.parse(source)
    changed = 0
    for node in tree.body:
        if not isinstance(node, ast.Assign) or len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
            continue
        target = node.targets[0].id
        if target == name and isinstance(node.value, ast.Constant) and type(node.value.value) is int:
            node.value = ast.Constant(max(1, int(node.value.value * factor)))
            changed += 1
        elif target == "SMALL_SIZES" and isinstance(node.value, ast.Dict):
            for k, v in zip(node.value.keys, node.value.values):
                if (
                    isinstance(k, ast.Constant)
                    and k.value == name
                    and isinstance(v, ast.Constant)
                    and type(v.value) is int
                ):
                    v.value = max(1, int(v.value * factor))
                    changed += 1
    return ast.unparse(tree) + "\n" if changed == 2 else None


def _size_names(source: str) -> list[str]:
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "SMALL_SIZES" for t in node.targets
        ):
            try:
                sizes = ast.literal_eval(node.value)
            except ValueError:
                return []
            return sorted(k for k, v in sizes.items() if type(v) is int and v >= 2)
    return []


def shape_variants(candidates: list[CandidateProblem], per_problem: int, seed: int = 0) -> list[CandidateProblem]:
    """Up to `per_problem` unvalidated variants of each candidate (validate them before keeping any)."""
    out = []
    for c in candidates:
        names = _size_names(c.source)
        rng = random.Random(f"{seed}:{c.id}")
        made: set[tuple[str, float]] = set()
        for k in range(per_problem):
            if not names:
                break
            choice = (rng.choice(names), rng.choice([2.0, 0.5]))
            if choice in made:
                continue
            made.add(choice)
            source = _rewrite(c.source, *choice)
            if source is None:
                continue
            name, factor = choice
            origin = dataclasses.replace(c.origin, kind="variant", parent=c.id)
            out.append(
                dataclasses.replace(
                    c,
                    id=f"{c.id}__v{k + 1}",
                    source=source,
                    origin=origin,
                    alternatives=(),
                    facts={**c.facts, "variant": {"of": c.id, "constant": name, "factor": factor}},
                )
            )
    return out
