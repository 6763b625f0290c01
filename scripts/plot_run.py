#!/usr/bin/env python
"""Draw a run's curves from its metrics.jsonl to PNG.

  python scripts/plot_run.py RUN_DIR                       # -> RUN_DIR/curves.png
  python scripts/plot_run.py RUN_DIR --out docs/run.png --keys train/reward_mean val/reward_mean

Default panels: training and validation reward, correct rate, status mix, response length and
truncation, policy loss / KL / entropy, seconds per stage. Keys missing from the run are skipped.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from rl.tracking import read_metrics

PANELS: list[tuple[str, list[str]]] = [
    ("reward", ["train/reward_mean", "train/kernel_reward_mean", "val/reward_mean"]),
    ("correct rate", ["train/correct_rate", "val/correct_rate"]),
    ("status mix (train)", ["train/status/correct", "train/status/incorrect", "train/status/compile_error",
                            "train/status/runtime_error", "train/status/hack", "train/status/timeout"]),
    ("response length", ["train/response_len_mean", "train/response_len_max"]),
    ("truncation / flat groups", ["train/truncation_rate", "train/zero_variance_group_frac"]),
    ("loss", ["train/pg_loss", "train/loss"]),
    ("KL / entropy", ["train/kl_old", "train/kl_ref", "train/entropy"]),
    ("seconds per stage", ["time/generate", "time/wait_for_rewards", "time/train", "time/sync", "time/step"]),
]


def series(rows: list[dict], key: str) -> tuple[list[int], list[float]]:
    xs, ys = [], []
    for r in rows:
        v = r.get(key)
        if isinstance(v, (int, float)) and math.isfinite(v):
            xs.append(r["step"])
            ys.append(float(v))
    return xs, ys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--out", type=Path, default=None, help="PNG path (default RUN_DIR/curves.png)")
    parser.add_argument("--keys", nargs="*", default=None, help="plot only these keys, one panel")
    parser.add_argument("--title", default=None)
    args = parser.parse_args(argv)
    path = args.run_dir / "metrics.jsonl" if args.run_dir.is_dir() else args.run_dir
    if not path.is_file():
        print(f"plot_run: {path}: no such file (a run directory holds metrics.jsonl)", file=sys.stderr)
        return 2
    try:
        rows = read_metrics(path)
    except (OSError, UnicodeDecodeError) as e:
        print(f"plot_run: {path}: cannot read ({e})", file=sys.stderr)
        return 2
    rows = [r for r in rows if isinstance(r, dict) and isinstance(r.get("step"), (int, float))]  # metrics rows
    if not rows:
        print(f"plot_run: {path} holds no rows", file=sys.stderr)
        return 2
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_run: needs matplotlib: pip install matplotlib", file=sys.stderr)
        return 2
    panels = [("", args.keys)] if args.keys else PANELS
    panels = [(title, [k for k in keys if series(rows, k)[0]]) for title, keys in panels]
    panels = [(title, keys) for title, keys in panels if keys]
    if not panels:
        print(f"plot_run: none of the keys has values in {path}", file=sys.stderr)
        return 2
    cols = 2 if len(panels) > 1 else 1
    nrows = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(6 * cols, 3.2 * nrows), squeeze=False)
    for ax, (title, keys) in zip(axes.flat, panels):
        for key in keys:
            xs, ys = series(rows, key)
            ax.plot(xs, ys, marker="o" if len(xs) < 30 else None, markersize=3, label=key)
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.suptitle(args.title or str(args.run_dir))
    fig.tight_layout()
    out = args.out or (args.run_dir if args.run_dir.is_dir() else args.run_dir.parent) / "curves.png"
    if out.is_dir():
        out = out / "curves.png"
    elif not out.suffix:  # matplotlib would add .png itself, and the path printed would not be the file's
        out = out.with_suffix(".png")
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
