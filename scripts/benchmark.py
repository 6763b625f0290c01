#!/usr/bin/env python
"""Benchmark a policy on a problem set: correct@1, pass@k, fast_p, speedups, per level (rl/bench).

  python scripts/benchmark.py policy=files policy.dir=DIR problems=PATH eval.device=cpu output=FILE.json
  python scripts/benchmark.py policy=smollm2_135m levels=[0] samples=4 attempts=3
  python scripts/benchmark.py compare A.json B.json ... [--out table.md]
  python scripts/benchmark.py render FILE.json        # benchmark.md and plots again from a benchmark.json

Writes benchmark.json, benchmark.md and PNG plots (beside `output`, else in Hydra's output directory) and an
offline W&B run (wandb.mode=disabled: none). Exit 2 on a bad configuration, 1 when correct@1 is below
`min_correct_at_1`.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

# absolute, so Hydra finds the configs whether this runs as a file or as an installed command
CONF = Path(__file__).resolve().parents[1] / "conf"

log = logging.getLogger("kernelrl")


def compare_main(argv: list[str]) -> int:
    from rl.bench.report import compare, load_report

    parser = argparse.ArgumentParser(prog="benchmark.py compare", description="one table of several benchmark runs")
    parser.add_argument("reports", nargs="+", help="benchmark.json files")
    parser.add_argument("--out", help="also write the table to this markdown file")
    args = parser.parse_args(argv)
    try:
        reports = [(Path(p).parent.name + "/" + Path(p).name, load_report(p)) for p in args.reports]
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    table = compare(reports)
    print(table)
    if args.out:
        Path(args.out).write_text(table + "\n")
    return 0


def render_main(argv: list[str]) -> int:
    """benchmark.md and the plots again from a benchmark.json (e.g. one written where matplotlib was missing)."""
    from rl.bench.report import load_report, write_markdown, write_plots

    parser = argparse.ArgumentParser(prog="benchmark.py render", description="report and plots of a benchmark.json")
    parser.add_argument("report", help="a benchmark.json; benchmark.md and the PNGs are written beside it")
    args = parser.parse_args(argv)
    try:
        report = load_report(args.report)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    path = Path(args.report)
    write_markdown(report, path.with_suffix(".md"), write_plots(report, path.parent))
    print(path.with_suffix(".md"))
    return 0


def hydra_main() -> None:
    import hydra
    from omegaconf import DictConfig

    @hydra.main(config_path=str(CONF), config_name="benchmark", version_base="1.3")
    def main(cfg: DictConfig) -> None:
        from rl.bench.main import run_from_config, run_hydra_job
        from rl.bench.report import compare

        plain, report, _ = run_hydra_job(cfg, run_from_config, ())
        print(compare([("this run", report)]))
        threshold = plain.get("min_correct_at_1")
        if threshold is not None and (report["correct_at_1"] or 0.0) < threshold:
            print(f"correct@1 {report['correct_at_1']:.3f} is below min_correct_at_1={threshold}", file=sys.stderr)
            sys.exit(1)

    main()


def cli() -> None:
    """`compare` and `render` take their own arguments; anything else is a Hydra run."""
    if len(sys.argv) > 1 and sys.argv[1] in ("compare", "render"):
        sys.exit((compare_main if sys.argv[1] == "compare" else render_main)(sys.argv[2:]))
    hydra_main()


if __name__ == "__main__":
    cli()
