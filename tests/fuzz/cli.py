#!/usr/bin/env python
"""Fuzz the driver-side CPU stage of evaluation (extraction, canonicalization, static analysis, cache key)
with mutated reference and red-team solutions (tests/fuzz/mutations.py), and report what it does with them.

Every case goes through `CpuStage.prepare`, which must return a Candidate or a Verdict; a case it does not
(an exception escaped, `internal_error`, `rejected`, a timeout, a dead child) also goes through the stages one
by one to find the site that fails. Each case runs in a forked child under a time limit. Exits 1 when a
crash site (or a timeout, or a dead child) was found, else 0.

Run from the checkout's root (the harness is in tests/, not an installed package):

  python -m tests.fuzz.cli --seed 0 --count 3000 --out report.json --crashers crashers/
  python -m tests.fuzz.cli --count 0 --hypothesis 500     # grammar-generated code only
  python -m tests.fuzz.cli --count 3000 --records after.jsonl   # per-case outcomes, to diff versions
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from tqdm import tqdm

from tests.fuzz.harness import Fleet, builtin_problems, make_preparer, run_case
from tests.fuzz.mutations import FuzzCase, cases

_ORDINARY = {"candidate", "verdict:correct", "verdict:compile_error", "verdict:hack"}


def outcome_of(record: dict) -> str:
    """The outcome with, for an escaped exception, its site."""
    return f"escaped: {record['site']}" if record["outcome"] == "escaped" else record["outcome"]


def crash_key(record: dict) -> str | None:
    """The site a failing case is grouped under: the stage that raises, else what the boundary did (an
    internal_error's "stage: Type ... at frame" without the message), else None for an ordinary outcome."""
    crash, outcome = record.get("stage_crash"), record["outcome"]
    if crash:
        return f"{crash['stage']}: {crash['site']}"
    if outcome == "verdict:internal_error":
        m = re.match(r"(\w+): (\w+).* at (\S+)(?: in (\S+))?$", record.get("error", ""))
        return f"boundary {m.group(1)}: {m.group(2)} at {m.group(3)}:{m.group(4)}" if m else outcome
    if outcome == "escaped":
        return f"boundary: {record['site']}"
    return None if outcome in _ORDINARY or outcome == "verdict:rejected" else outcome


def kinds(case: FuzzCase) -> list[str]:
    """The case's mutation names without their parameters ("deep_nesting(parens,812)" -> "deep_nesting")."""
    return [label.split("(")[0] for label in case.name.split("+")[1:]] or ["none"]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def timing(records: list[tuple[FuzzCase, dict]]) -> dict:
    """Boundary seconds (a timeout counts as its limit), and per mutation kind the mean, max, cases over 5 s."""
    seconds = [r["seconds"] for _, r in records]
    per_kind: dict[str, list[float]] = defaultdict(list)
    for case, r in records:
        for kind in kinds(case):
            per_kind[kind].append(r["seconds"])
    return {
        "p50": percentile(seconds, 0.5),
        "p99": percentile(seconds, 0.99),
        "max": max(seconds, default=0.0),
        "over_5s": sum(s > 5 for s in seconds),
        "by_mutation": {
            k: {"cases": len(v), "mean": statistics.fmean(v), "max": max(v), "over_5s": sum(s > 5 for s in v)}
            for k, v in sorted(per_kind.items(), key=lambda kv: -max(kv[1]))
        },
    }


def sites(records: list[tuple[FuzzCase, dict]]) -> dict[str, dict]:
    """Distinct crash sites: count, the mutation kinds that reach them, and the smallest example."""
    out: dict[str, dict] = {}
    for case, r in records:
        key = crash_key(r)
        if key is None:
            continue
        crash = r.get("stage_crash") or r
        entry = out.setdefault(
            key,
            {
                "count": 0,
                "stage": crash.get("stage"),
                "site": crash.get("site"),
                "type": crash.get("type"),
                "frame": crash.get("frame"),
                "deepest": crash.get("deepest"),
                "message": crash.get("message"),
                "boundary": Counter(),
                "mutations": Counter(),
                "example": case,
            },
        )
        entry["count"] += 1
        entry["boundary"][r["outcome"]] += 1
        entry["mutations"].update(kinds(case))
        if len(case.text) < len(entry["example"].text):
            entry["example"] = case
    return out


def rejections(records: list[tuple[FuzzCase, dict]]) -> dict[str, dict]:
    """Which CPU-stage bound rejected how many cases (numbers in the message kept: they name the bound),
    and the mutation kinds that ran into it."""
    out: dict[str, dict] = {}
    for case, r in records:
        if r["outcome"] == "verdict:rejected":
            entry = out.setdefault(r.get("error", ""), {"count": 0, "mutations": Counter()})
            entry["count"] += 1
            entry["mutations"].update(kinds(case))
    return {
        k: {"count": e["count"], "mutations": dict(e["mutations"].most_common())}
        for k, e in sorted(out.items(), key=lambda kv: -kv[1]["count"])
    }


def shrink_examples(fleet: Fleet, found: dict[str, dict], budget_s: float) -> None:
    """Replace each site's example by a shrunk one (its statements and lines cut while it still fails there)."""
    for entry in tqdm([e for e in found.values() if e["stage"]], desc="shrinking", unit="site"):
        case = entry["example"]
        shrunk = fleet.call(("shrink", case.problem_id, case.text, entry["site"], budget_s), budget_s + 60)
        entry["minimal"] = shrunk.get("text", case.text)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)[:80]


def write_crashers(directory: Path, records: list[tuple[FuzzCase, dict]], found: dict[str, dict]) -> None:
    """Each failing case's answer (bytes; lone surrogates kept with surrogatepass), each site's shrunk
    example, and index.json saying which problem and site each file belongs to."""
    directory.mkdir(parents=True, exist_ok=True)
    index = []
    for i, (case, r) in enumerate(records):
        if (key := crash_key(r)) is not None:
            name = f"case_{i:05d}_{_slug(case.name)}.txt"
            (directory / name).write_bytes(case.text.encode("utf-8", "surrogatepass"))
            index.append({"file": name, "case": case.name, "problem_id": case.problem_id, "site": key})
    for n, (key, entry) in enumerate(found.items()):
        name = f"site_{n:02d}_minimal.py"
        (directory / name).write_bytes(entry.get("minimal", entry["example"].text).encode("utf-8", "surrogatepass"))
        example = entry["example"]
        index.append({"file": name, "case": example.name, "problem_id": example.problem_id, "site": key})
    (directory / "index.json").write_text(json.dumps(index, indent=1))


def report(
    records: list[tuple[FuzzCase, dict]], found: dict[str, dict], args: argparse.Namespace, seconds: float
) -> dict:
    slowest = sorted(records, key=lambda cr: -cr[1]["seconds"])[: args.slowest]
    return {
        "seed": args.seed,
        "count": args.count,
        "hypothesis": args.hypothesis,
        "timeout_s": args.timeout,
        "wall_seconds": seconds,
        "outcomes": dict(Counter(outcome_of(r) for _, r in records).most_common()),
        "crash_sites": {
            key: {
                **{k: v for k, v in e.items() if k not in ("example", "boundary", "mutations")},
                "boundary": dict(e["boundary"]),
                "mutations": dict(e["mutations"].most_common()),
                "example_case": e["example"].name,
                "problem_id": e["example"].problem_id,
                "example_chars": len(e["example"].text),
            }
            for key, e in sorted(found.items(), key=lambda kv: -kv[1]["count"])
        },
        "rejections": rejections(records),
        "found_only_by_hypothesis": sorted(k for k, e in found.items() if set(e["mutations"]) <= {"hypothesmith"}),
        "timing": timing(records),
        "slowest": [
            {"case": c.name, "problem_id": c.problem_id, "seconds": r["seconds"], "outcome": outcome_of(r)}
            for c, r in slowest
        ],
    }


def print_summary(result: dict) -> None:
    print(f"\n{sum(result['outcomes'].values())} cases in {result['wall_seconds']:.0f} s")
    for outcome, n in result["outcomes"].items():
        print(f"  {n:6d}  {outcome}")
    t = result["timing"]
    print(f"CPU stage seconds: p50 {t['p50']:.3f}  p99 {t['p99']:.3f}  max {t['max']:.3f}  over 5 s: {t['over_5s']}")
    for bound, e in result["rejections"].items():
        print(f"  rejected {e['count']:5d}: {_clip(bound, 100)}")
    for key, e in result["crash_sites"].items():
        print(
            f"\n[{e['count']}] {key}\n    frame {e['frame']}, deepest {e['deepest']}; "
            f"{_clip(e['message'] or '', 120)}\n    mutations {e['mutations']}"
        )
        lines = (e.get("minimal") or "").split("\n")
        more = f"\n      ... ({len(lines)} lines)" if len(lines) > 12 else ""
        print("    minimal:\n" + "\n".join("      " + _clip(ln) for ln in lines[:12]) + more)


def _clip(line: str, width: int = 160) -> str:
    return line if len(line) <= width else f"{line[:width]}... ({len(line)} chars)"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--count", type=int, default=1000, help="mutated cases")
    p.add_argument("--hypothesis", type=int, default=0, help="also this many hypothesmith-generated cases")
    p.add_argument("--out", type=Path, help="the JSON report")
    p.add_argument("--crashers", type=Path, help="directory for the failing cases and shrunk examples")
    p.add_argument("--records", type=Path, help="JSON lines, one per case (to compare two versions of the code)")
    p.add_argument("--jobs", type=int, default=1, help="child processes running cases at once")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds per case before its child is killed")
    p.add_argument("--shrink-seconds", type=float, default=60.0, help="shrinking budget per crash site (0: none)")
    p.add_argument("--memory-gib", type=float, default=4.0, help="address space a child may add")
    p.add_argument("--slowest", type=int, default=15)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    todo = list(cases(args.seed, args.count))
    if args.hypothesis:
        from tests.fuzz.generated import draw

        todo += draw(args.hypothesis, args.seed)
    fleet = Fleet(builtin_problems(), make_preparer(), args.jobs, args.memory_gib)
    started, records = time.monotonic(), []
    try:
        bar = tqdm(fleet.map(lambda c: run_case(fleet, c, args.timeout), todo), total=len(todo), unit="case")
        for case, record in bar:
            records.append((case, record))
        found = sites(records)
        if args.shrink_seconds > 0:
            shrink_examples(fleet, found, args.shrink_seconds)
    finally:
        fleet.close()
    result = report(records, found, args, time.monotonic() - started)
    for key, entry in found.items():
        result["crash_sites"][key]["minimal"] = entry.get("minimal", entry["example"].text[:2000])
    print_summary(result)
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))
    if args.crashers:
        write_crashers(args.crashers, records, found)
    if args.records:
        with args.records.open("w") as f:
            for case, r in records:
                f.write(
                    json.dumps(
                        {
                            "case": case.name,
                            "problem_id": case.problem_id,
                            "outcome": outcome_of(r),
                            "seconds": r["seconds"],
                            "error": r.get("error"),
                            "site": crash_key(r),
                        }
                    )
                    + "\n"
                )
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
