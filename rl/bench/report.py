"""The benchmark's outputs: benchmark.json (`build_report`), a markdown report, PNG plots, and the comparison
table of several runs (`compare`)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterable

from rl.bench.metrics import FAST_P, BASELINES, KERNELBENCH_LEVELS, ProblemResult, speedup_vs, summarize

__all__ = ["build_report", "per_problem_rows", "write_markdown", "write_plots", "compare", "load_report"]

REQUIRED_KEYS = ("correct_at_1", "fast_p", "faster_than_inductor", "geomean_speedup", "problems", "per_problem")


def _attempt(a: Any) -> dict[str, Any]:
    v = a.verdict
    return {
        "sample": a.sample,
        "attempt": a.attempt,
        "status": v.status.value,
        "correct": v.correct,
        "speedup": v.speedup,
        **{f"speedup_{b}": speedup_vs(v, b) for b in BASELINES},
        "hack": v.hack.category if v.hack else None,
        "prompt_tokens": a.prompt_tokens,
        "completion_tokens": a.completion_tokens,
        "cost_usd": a.cost_usd,
        "finish_reason": a.finish_reason,
        "generate_seconds": a.generate_seconds,
        "verdict": v.to_dict(),
    }


def per_problem_rows(results: Iterable[ProblemResult]) -> list[dict[str, Any]]:
    rows = []
    for r in results:
        first, best = r.first(), r.best()
        rows.append(
            {
                "problem_id": r.problem_id,
                "level": r.level,
                "sizes": r.sizes,
                "correct_at_1": bool(first and first.verdict.correct),
                "status_at_1": first.verdict.status.value if first else None,
                "best_status": best.verdict.status.value if best else None,
                "best_speedup": best.verdict.speedup if best and best.verdict.correct else None,
                **{
                    f"best_speedup_{b}": speedup_vs(best.verdict, b) if best and best.verdict.correct else None
                    for b in BASELINES
                },
                "attempts": [_attempt(a) for a in r.attempts],
            }
        )
    return rows


def build_report(results: list[ProblemResult], baseline: str, run: dict[str, Any]) -> dict[str, Any]:
    """benchmark.json: the summary's keys at top level, `run` (what was benchmarked, how, wall times) and
    `per_problem` (every attempt with its full verdict)."""
    report = {**summarize(results, baseline), "run": run, "per_problem": per_problem_rows(results)}
    missing = [k for k in REQUIRED_KEYS if k not in report]
    assert not missing, f"benchmark report lacks {missing}"
    return report


def load_report(path: str | Path) -> dict[str, Any]:
    try:
        report = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not JSON ({e})") from None
    missing = [k for k in REQUIRED_KEYS if k not in report] if isinstance(report, dict) else list(REQUIRED_KEYS)
    if missing:
        raise ValueError(f"{path}: not a benchmark.json (missing {', '.join(missing)})")
    return report


def _f(x: Any, pct: bool = False, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{100 * x:.1f}%" if pct else f"{x:.{digits}f}"


def _metric_rows(s: dict[str, Any]) -> list[tuple[str, str]]:
    geo = s["geomean_speedup"]
    rows = [
        ("problems", str(s["problems"])),
        ("correct@1", _f(s["correct_at_1"], True)),
        ("correct within attempts", _f(s["correct_within_attempts"], True)),
        ("correct (any sample/attempt)", _f(s["correct_any"], True)),
    ]
    rows += [(f"pass@{k}", _f(v, True)) for k, v in s["pass_at_k"].items()]
    rows += [
        ("faster than TorchInductor", _f(s["faster_than_inductor"], True)),
        ("faster than eager", _f(s["faster_than_eager"], True)),
    ]
    for base, label in (("inductor", "TorchInductor"), ("eager", "eager, KernelBench's baseline")):
        rows += [(f"fast_{p} (vs {label})", _f(v, True)) for p, v in fast_p_vs(s, base).items()]
    rows += [
        (f"geomean speedup over correct (vs {s['baseline']})", _f(geo["correct"])),
        (f"geomean speedup over all, failures = 1.0 (vs {s['baseline']})", _f(geo["all"])),
    ]
    return rows


def fast_p_vs(s: dict[str, Any], base: str) -> dict[str, Any]:
    """fast_p against `base` (inductor or eager); reports written before fast_p_inductor existed have it as
    fast_p when their baseline was inductor."""
    if f"fast_p_{base}" in s:
        return s[f"fast_p_{base}"]
    return s["fast_p"] if s.get("baseline") == base else {p: None for p in s["fast_p"]}


def _level_table(levels: dict[str, Any], title: str, names: dict[int, str] | None = None) -> list[str]:
    header = [
        "level",
        "problems",
        "correct@1",
        "within attempts",
        "fast_1 (inductor)",
        "fast_1 (eager)",
        "geomean (correct)",
        "geomean (all)",
    ]
    lines = ["", f"## {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for lv, s in levels.items():
        name = f"{lv} ({names[int(lv)]})" if names and lv.isdigit() and int(lv) in names else lv
        lines.append(
            f"| {name} | {s['problems']} | {_f(s['correct_at_1'], True)} | "
            f"{_f(s['correct_within_attempts'], True)} | {_f(fast_p_vs(s, 'inductor').get('1'), True)} | "
            f"{_f(fast_p_vs(s, 'eager').get('1'), True)} | {_f(s['geomean_speedup']['correct'])} | "
            f"{_f(s['geomean_speedup']['all'])} |"
        )
    return lines


def write_markdown(report: dict[str, Any], path: str | Path, plots: list[str] | None = None) -> None:
    run = report["run"]
    lines = [
        f"# Benchmark: {run.get('policy')} on {run.get('problem_set')}",
        "",
        f"Device {run.get('device')}, sizes {run.get('size')}, {run.get('samples')} sample(s) x "
        f"{run.get('attempts')} attempt(s), baseline {report['baseline']}; "
        f"wall {run.get('wall_seconds', 0):.1f} s "
        f"(generate {run.get('generate_seconds', 0):.1f} s, evaluate {run.get('evaluate_seconds', 0):.1f} s). "
        "Metric definitions: docs/benchmark.md.",
        "",
        "| metric | overall |",
        "|---|---|",
    ]
    lines += [f"| {k} | {v} |" for k, v in _metric_rows(report)]
    scale = report.get("level_scale")
    if report["per_level"] and scale != "kernelbench":
        lines += _level_table(
            report["per_level"],
            "Per level"
            if scale == "kernelrl" or scale is None
            else "Per level (mixed scales: the built-in L0-L5 and KernelBench's 1-4 share numbers)",
        )
    if report.get("per_kernelbench_level"):
        lines += _level_table(report["per_kernelbench_level"], "Per KernelBench level", KERNELBENCH_LEVELS)
    mix = ", ".join(f"{k} {v}" for k, v in report["status_mix"].items() if v)
    hacks = ", ".join(f"{k} {v}" for k, v in report["hack_mix"].items()) or "none"
    tok, cost = report["tokens"], report["cost_usd"]
    total = f"${cost['total']:.4f}" if cost["total"] is not None else "unknown"
    each = f" (${cost['per_problem']:.4f} per problem)" if cost["per_problem"] is not None else ""
    lines += [
        "",
        f"Status mix (all {report['attempts']} attempts): {mix}. Hack categories: {hacks}.",
        f"Tokens: {tok['prompt']} prompt, {tok['completion']} completion "
        f"({_f(tok['per_problem'], digits=0)} per problem); cost: {total}{each}.",
    ]
    if run.get("skipped"):
        lines += ["", "## Problems left out", ""] + [f"- {k}: {v}" for k, v in run["skipped"].items()]
    if run.get("derived_sizes"):
        lines += [
            "",
            "## Derived small sizes (envs/small_sizes.py)",
            "",
            "| problem | halvings | sizes | est. elements |",
            "|---|---|---|---|",
        ]
        for pid, d in run["derived_sizes"].items():
            sizes = ", ".join(f"{k}={v}" for k, v in d["sizes"].items())
            lines.append(f"| {pid} | {d['halvings']} | {sizes} | {d['estimated_elements'] or '-'} |")
    lines += [
        "",
        "## Per problem",
        "",
        "| problem | level | status@1 | best status | best speedup | vs inductor | vs eager | attempts | tokens |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in report["per_problem"]:
        tokens = sum(a["prompt_tokens"] + a["completion_tokens"] for a in row["attempts"])
        lines.append(
            f"| {row['problem_id']} | {row['level'] if row['level'] is not None else '-'} | "
            f"{row['status_at_1']} | {row['best_status']} | {_f(row['best_speedup'])} | "
            f"{_f(row['best_speedup_inductor'])} | {_f(row['best_speedup_eager'])} | "
            f"{len(row['attempts'])} | {tokens} |"
        )
    if report.get("trajectories"):
        lines += _trajectory_lines(report["trajectories"])
    failures = [(row["problem_id"], a) for row in report["per_problem"] for a in row["attempts"] if not a["correct"]]
    if failures:
        lines += ["", "## Failures", ""]
        for pid, a in failures[:50]:
            error = (a["verdict"].get("error") or "").strip().splitlines()
            lines.append(
                f"- {pid} (sample {a['sample']}, attempt {a['attempt']}): {a['status']}"
                f"{': ' + error[-1][:200] if error else ''}"
            )
    for plot in plots or []:
        lines += ["", f"![{Path(plot).stem}]({Path(plot).name})"]
    Path(path).write_text("\n".join(lines) + "\n")


def _trajectory_lines(t: dict[str, Any]) -> list[str]:
    """The tools mode's section (rl.bench.trajectories.trajectory_report): shares, metrics, one row per trajectory."""
    m = t["metrics"]
    per_turn = ", ".join(
        f"turn {k.split('/')[0][5:]}: {_f(v, True)}"
        for k, v in sorted(m.items())
        if k.startswith("turn_") and k.endswith("/correct_rate")
    )
    lines = [
        "",
        "## Trajectories (rollout.tools)",
        "",
        f"Correct within the trajectory (sample 0): {_f(t['correct_within_trajectory'], True)}; final answer "
        f"correct: {_f(t['final_correct'], True)}; best judged answer correct: {_f(t['best_correct'], True)}. "
        f"Turns per trajectory {_f(m.get('turns_mean'), digits=2)}, "
        f"tool calls {_f(m.get('tool_calls_mean'), digits=2)}; "
        f"correct rate per turn: {per_turn or '-'}; reward gain first -> final: "
        f"{_f(m.get('reward_gain_first_to_final'))}.",
        "",
        "| problem | sample | turns | tool calls | stop | final | best (source, turn) | correct within | gain |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for pid, rows in t["per_problem"].items():
        for r in rows:
            tools = ", ".join(f"{name} x{n}" for name, n in r["tools"].items()) or "-"
            best = r["best"]
            best_text = f"{best['status']} ({best['source']}, {best['turn']})" if best else "-"
            lines.append(
                f"| {pid} | {r['sample']} | {r['turns']} | {tools} | {r['stop_reason']} | "
                f"{r['final']['status'] if r['final'] else '-'} | {best_text} | "
                f"{'yes' if r['correct_within_trajectory'] else 'no'} | "
                f"{_f(r['reward_gain_first_to_final'])} |"
            )
    return lines


def write_plots(report: dict[str, Any], directory: str | Path) -> list[str]:
    """speedup_distribution.png, per_level.png, fast_p.png in `directory`; returns their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    directory = Path(directory)
    base = report["baseline"]
    speedups = [row[f"best_speedup_{base}"] for row in report["per_problem"] if row[f"best_speedup_{base}"] is not None]
    paths = []

    fig, ax = plt.subplots(figsize=(6, 4))
    if speedups:
        logs = [math.log2(s) for s in speedups]
        ax.hist(logs, bins=min(30, max(5, len(logs))), color="tab:blue")
        ax.axvline(0.0, color="black", lw=1)
        ax.set_xlabel(f"log2 speedup vs {base} (correct answers)")
        ax.set_ylabel("problems")
    else:
        ax.text(0.5, 0.5, "no speedups measured (CPU: correctness only)", ha="center", va="center")
        ax.set_axis_off()
    ax.set_title("Speedup distribution")
    paths.append(_save(fig, directory / "speedup_distribution.png"))

    fig, ax = plt.subplots(figsize=(6, 4))
    levels = list(report["per_level"])
    width = 0.4
    xs = range(len(levels))
    c1 = [report["per_level"][lv]["correct_at_1"] or 0.0 for lv in levels]
    f1 = [report["per_level"][lv]["fast_p"]["1"] or 0.0 for lv in levels]
    ax.bar([x - width / 2 for x in xs], c1, width, label="correct@1")
    ax.bar([x + width / 2 for x in xs], f1, width, label=f"fast_1 (vs {base})")
    ax.set_xticks(list(xs), [f"L{lv}" for lv in levels])
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("share of problems")
    ax.legend()
    ax.set_title("Per level")
    paths.append(_save(fig, directory / "per_level.png"))

    fig, ax = plt.subplots(figsize=(6, 4))
    n = report["problems"] or 1
    ps = [i / 100 for i in range(0, 301)]
    if report["speedups_measured"]:
        for b, color, label in (
            ("inductor", "tab:green", "vs TorchInductor"),
            ("eager", "tab:purple", "vs eager (KernelBench)"),
        ):
            best = [row.get(f"best_speedup_{b}") for row in report["per_problem"]]
            best = [x for x in best if x is not None]
            ax.plot(ps, [sum(x > p for x in best) / n for p in ps], color=color, label=label)
            ax.scatter(
                list(FAST_P), [sum(x > p for x in best) / n for p in FAST_P], color=color, edgecolor="black", zorder=3
            )
        ax.legend()
    else:
        ax.text(0.5, 0.5, "no speedups measured (CPU)", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("p (speedup threshold)")
    ax.set_ylabel("fast_p")
    ax.set_ylim(0, 1.05)
    ax.set_title("fast_p against both baselines")
    paths.append(_save(fig, directory / "fast_p.png"))
    return paths


def _save(fig: Any, path: Path) -> str:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


def compare(reports: list[tuple[str, dict[str, Any]]]) -> str:
    """One markdown table, a column per run (name: its file), a row per metric; then correct@1 per level."""
    names = [name for name, _ in reports]
    metric_rows = [dict(_metric_rows(r)) for _, r in reports]
    keys: list[str] = []
    for rows in metric_rows:
        keys += [k for k in rows if k not in keys]
    lines = ["| metric | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    lines += [f"| {k} | " + " | ".join(rows.get(k, "-") for rows in metric_rows) + " |" for k in keys]
    policies = [str(r.get("run", {}).get("policy", "?")) for _, r in reports]
    lines.insert(2, "| policy | " + " | ".join(policies) + " |")
    levels = sorted({lv for _, r in reports for lv in r.get("per_level", {})})
    for lv in levels:
        cells = [
            _f(r["per_level"][lv]["correct_at_1"], True) if lv in r.get("per_level", {}) else "-" for _, r in reports
        ]
        lines.append(f"| correct@1, level {lv} | " + " | ".join(cells) + " |")
    kb_levels = sorted({lv for _, r in reports for lv in r.get("per_kernelbench_level", {})})
    for lv in kb_levels:
        for key, label in (
            ("correct_at_1", "correct@1"),
            ("inductor", "fast_1 vs TorchInductor"),
            ("eager", "fast_1 vs eager"),
        ):
            cells = []
            for _, r in reports:
                s = r.get("per_kernelbench_level", {}).get(lv)
                value = None if s is None else s[key] if key == "correct_at_1" else fast_p_vs(s, key).get("1")
                cells.append(_f(value, True) if s is not None else "-")
            lines.append(f"| {label}, KernelBench level {lv} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
