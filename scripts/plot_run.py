"""Draw a run's curves from its metrics.jsonl to PNG, or overlay several runs.

  python scripts/plot_run.py RUN_DIR                       # -> RUN_DIR/curves.png
  python scripts/plot_run.py RUN_DIR --out docs/run.png --keys train/reward_mean val/reward_mean
  python scripts/plot_run.py multirun/DATE/TIME/*          # one line per run, labelled by its overrides
                                                           # -> curves_overlay.png in their common directory

Default panels: training and validation reward, correct rate, status mix, response length and
truncation, policy loss, KL (log scale), entropy, seconds per stage. Keys missing from the run are skipped;
a series equal to another of its panel is drawn once, labelled with both names (train/loss is
train/pg_loss without KL or entropy terms; train/kernel_reward_mean is train/reward_mean without shaping).
Validation is drawn as markers (it runs at a few steps only); steps where the learner made no update
(every group flat, or a skipped non-finite step) are shaded grey on every panel.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

from rl.tracking import read_metrics

PANELS: list[tuple[str, list[str]]] = [
    ("reward", ["train/reward_mean", "train/kernel_reward_mean", "val/reward_mean", "val/kernel_reward_mean"]),
    ("correct rate", ["train/correct_rate", "val/correct_rate"]),
    (
        "status mix (train)",
        [
            "train/status/correct",
            "train/status/incorrect",
            "train/status/compile_error",
            "train/status/runtime_error",
            "train/status/hack",
            "train/status/timeout",
        ],
    ),
    ("response length", ["train/response_len_mean", "train/response_len_max"]),
    ("truncation / flat groups", ["train/truncation_rate", "train/zero_variance_group_frac"]),
    ("loss", ["train/loss", "train/pg_loss"]),
    ("KL (log scale)", ["train/kl_old", "train/kl_ref"]),
    ("entropy", ["train/entropy"]),
    ("advantage (train batch)", ["train/advantage_max", "train/advantage_mean", "train/advantage_min"]),
    ("seconds per stage", ["time/generate", "time/wait_for_rewards", "time/train", "time/sync", "time/step"]),
]
LOG_PANELS = {"KL (log scale)"}  # KL is ~1e-5 against entropy's ~1e-2: never on one linear axis


def series(rows: list[dict], key: str) -> tuple[list[int], list[float]]:
    xs, ys = [], []
    for r in rows:
        v = r.get(key)
        if isinstance(v, (int, float)) and math.isfinite(v):
            xs.append(r["step"])
            ys.append(float(v))
    return xs, ys


def plottable(rows: list[dict], key: str, title: str) -> bool:
    """A log panel needs a value above 0: a run without a KL term logs kl_old = 0.0 at every step."""
    return any(y > 0 for y in series(rows, key)[1]) if title in LOG_PANELS else bool(series(rows, key)[0])


def distinct_series(rows: list[dict], keys: list[str]) -> list[tuple[str, list[int], list[float]]]:
    """(label, xs, ys) per key with values; a series equal to an earlier one is folded into its label."""
    out: list[tuple[str, list[int], list[float]]] = []
    for key in keys:
        xs, ys = series(rows, key)
        if not xs:
            continue
        for i, (label, xs0, ys0) in enumerate(out):
            if xs0 == xs and all(math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) for a, b in zip(ys0, ys)):
                out[i] = (f"{label} = {key}", xs0, ys0)
                break
        else:
            out.append((key, xs, ys))
    return out


def no_update_steps(rows: list[dict]) -> list[int]:
    """Training steps without a learner update: every group flat (kept_groups 0, learner numbers NaN) or the
    learner skipped a non-finite step. Runs without a learner (API policies) have none to mark."""
    trained = [r for r in rows if isinstance(r.get("train/loss"), (int, float)) and math.isfinite(r["train/loss"])]
    has_learner = bool(trained) or any("train/loss" in r for r in rows)
    if not has_learner:
        return []
    steps = []
    for r in rows:
        if "train/kept_groups" not in r and "train/loss" not in r:
            continue  # a validation-only row
        loss = r.get("train/loss")
        if (
            r.get("train/kept_groups") == 0
            or not isinstance(loss, (int, float))
            or not math.isfinite(loss)
            or (r.get("train/skipped_steps") or 0) > 0
        ):
            steps.append(int(r["step"]))
    return sorted(set(steps))


def run_label(run_dir: Path) -> str:
    """A run's Hydra overrides (.hydra/overrides.yaml), e.g. `delta=1.2`; the directory's name without any."""
    path = run_dir / ".hydra" / "overrides.yaml"
    try:
        import yaml

        overrides = yaml.safe_load(path.read_text()) if path.is_file() else None
    except Exception:
        overrides = None
    if isinstance(overrides, list) and overrides:
        return " ".join(str(o) for o in overrides)
    return run_dir.name or str(run_dir)


def load_rows(path: Path) -> list[dict] | str:
    """The metrics rows of a run, or the line to print when there are none."""
    if not path.is_file():
        return f"plot_run: {path}: no such file (a run directory holds metrics.jsonl)"
    try:
        rows = read_metrics(path)
    except (OSError, UnicodeDecodeError) as e:
        return f"plot_run: {path}: cannot read ({e})"
    rows = [r for r in rows if isinstance(r, dict) and isinstance(r.get("step"), (int, float))]  # metrics rows
    return rows or f"plot_run: {path} holds no rows"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dirs", type=Path, nargs="+", metavar="RUN_DIR")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="PNG path (default RUN_DIR/curves.png; several runs: curves_overlay.png beside them)",
    )
    parser.add_argument("--keys", nargs="*", default=None, help="plot only these keys, one panel")
    parser.add_argument("--title", default=None)
    args = parser.parse_args(argv)
    runs: list[tuple[str, Path, list[dict]]] = []
    for run_dir in args.run_dirs:
        path = run_dir / "metrics.jsonl" if run_dir.is_dir() else run_dir
        rows = load_rows(path)
        if isinstance(rows, str):
            print(rows, file=sys.stderr)
            return 2
        runs.append((run_label(path.parent), path, rows))
    overlay = len(runs) > 1
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_run: needs matplotlib: pip install matplotlib", file=sys.stderr)
        return 2
    panels = [("", args.keys)] if args.keys else PANELS
    panels = [
        (title, keys) for title, keys in panels if any(plottable(rows, k, title) for _, _, rows in runs for k in keys)
    ]
    if not panels:
        print(f"plot_run: none of the keys has values in {', '.join(str(p) for _, p, _ in runs)}", file=sys.stderr)
        return 2
    cols = 2 if len(panels) > 1 else 1
    nrows = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(6 * cols, 3.2 * nrows), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    styles = ["-", "--", ":", "-."]
    for ax, (title, keys) in zip(axes.flat, panels):
        shaded = False
        for r, (label, _, rows) in enumerate(runs):
            for k, (name, xs, ys) in enumerate(distinct_series(rows, keys)):
                if title in LOG_PANELS:
                    xs, ys = [x for x, y in zip(xs, ys) if y > 0], [y for y in ys if y > 0]
                    if not xs:
                        continue
                color = colors[(r if overlay else k) % len(colors)]
                text = f"{label}: {name}" if overlay else name
                if name.startswith("val/"):  # a few steps only: markers, never a line joining them
                    ax.plot(xs, ys, linestyle="none", marker="D", markersize=5, color=color, label=text)
                else:
                    ax.plot(
                        xs,
                        ys,
                        linestyle=styles[k % len(styles)] if overlay else "-",
                        marker="o" if len(xs) < 30 else None,
                        markersize=3,
                        color=color,
                        label=text,
                    )
            for step in no_update_steps(rows) if not overlay else []:
                ax.axvspan(
                    step - 0.5,
                    step + 0.5,
                    color="0.85",
                    zorder=0,
                    label=None if shaded else "no update (flat groups / skipped)",
                )
                shaded = True
        if title in LOG_PANELS:
            ax.set_yscale("log")
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    first = args.run_dirs[0]
    fig.suptitle(args.title or (str(first) if not overlay else f"{len(runs)} runs"))
    fig.tight_layout()
    if overlay:
        common = Path(os.path.commonpath([str(p.parent.resolve()) for _, p, _ in runs]))
        out = args.out or common / "curves_overlay.png"
    else:
        out = args.out or (first if first.is_dir() else first.parent) / "curves.png"
    if out.is_dir():
        out = out / ("curves_overlay.png" if overlay else "curves.png")
    elif not out.suffix:  # matplotlib would add .png itself, and the path printed would not be the file's
        out = out.with_suffix(".png")
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
