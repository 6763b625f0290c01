"""scripts/plot_run.py on unusual inputs (real matplotlib, Agg)."""

import json

from scripts import plot_run


def _run_dir(tmp_path, *extra_lines):
    tmp_path.mkdir(parents=True, exist_ok=True)
    rows = [{"step": s, "train/reward_mean": 0.1 * s} for s in range(3)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + "".join(extra_lines))
    return tmp_path


def test_lines_that_are_not_metric_rows_are_skipped_and_unreadable_files_exit_2(tmp_path, capsys):
    """A JSON line that is not an object with a step raised AttributeError/KeyError; bytes that are not UTF-8
    raised UnicodeDecodeError (both exit 1 with a traceback)."""
    run = _run_dir(tmp_path / "run", "1\n", "[2]\n", '{"train/reward_mean": 5}\n')
    assert plot_run.main([str(run)]) == 0
    assert (run / "curves.png").stat().st_size > 0
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\xb6\xff\x00")
    assert plot_run.main([str(binary)]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_out_names_the_file_written(tmp_path, capsys):
    """--out DIR wrote DIR.png beside it (matplotlib adds a missing extension) and printed DIR."""
    run = _run_dir(tmp_path / "run")
    folder = tmp_path / "figures"
    folder.mkdir()
    assert plot_run.main([str(run), "--out", str(folder)]) == 0
    assert capsys.readouterr().out.strip() == str(folder / "curves.png") and (folder / "curves.png").is_file()
    assert plot_run.main([str(run), "--out", str(tmp_path / "curves_v2")]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "curves_v2.png")
    assert (tmp_path / "curves_v2.png").is_file() and not (tmp_path / "figures.png").exists()


def _rows_of_a_run():
    """A run as the loop logs it: kernel_reward_mean equals reward_mean (no shaping), loss equals pg_loss
    (no KL or entropy term), KL ~1e-5 and entropy ~1e-2, validation at steps 0 and 3, step 2 without an update."""
    rows = []
    for s in range(4):
        row = {
            "step": s,
            "train/reward_mean": 0.1 * s,
            "train/kernel_reward_mean": 0.1 * s,
            "train/kept_groups": 2,
            "train/loss": -0.01 * s,
            "train/pg_loss": -0.01 * s,
            "train/kl_old": 1e-5 * (s + 1),
            "train/entropy": 1e-2 * (s + 1),
        }
        if s == 2:
            row.update(
                {
                    "train/kept_groups": 0,
                    "train/loss": float("nan"),
                    "train/pg_loss": float("nan"),
                    "train/kl_old": float("nan"),
                    "train/entropy": float("nan"),
                }
            )
        if s in (0, 3):
            row["val/reward_mean"] = 0.2
        rows.append(row)
    return rows


def _write(run, rows, overrides=None):
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if overrides is not None:
        (run / ".hydra").mkdir()
        (run / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    return run


def _figure(monkeypatch):
    from matplotlib.figure import Figure

    saved = []
    original = Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda self, *a, **kw: (saved.append(self), original(self, *a, **kw)))
    return saved


def test_the_issue_defects_of_one_run(tmp_path, monkeypatch):
    """Before: reward_mean hidden under an identical second line, pg_loss under loss, KL and entropy on one
    linear axis, two validation points joined by a line, the step without an update unmarked."""
    run = _write(tmp_path / "run", _rows_of_a_run())
    saved = _figure(monkeypatch)
    assert plot_run.main([str(run)]) == 0
    axes = {ax.get_title(): ax for ax in saved[0].axes}
    reward = axes["reward"]
    labels = [line.get_label() for line in reward.get_lines()]
    assert labels == ["train/reward_mean = train/kernel_reward_mean", "val/reward_mean"]
    assert reward.get_lines()[1].get_linestyle() == "None" and reward.get_lines()[1].get_marker() == "D"
    assert [line.get_label() for line in axes["loss"].get_lines()] == ["train/loss = train/pg_loss"]
    assert axes["KL (log scale)"].get_yscale() == "log" and "train/entropy" not in [
        line.get_label() for line in axes["KL (log scale)"].get_lines()
    ]
    assert [line.get_label() for line in axes["entropy"].get_lines()] == ["train/entropy"]
    spans = [p for p in reward.patches if p.get_label().startswith("no update")]
    assert len(spans) == 1 and spans[0].get_x() == 1.5  # step 2, +- half a step
    assert plot_run.no_update_steps(_rows_of_a_run()) == [2]
    assert "advantage (train batch)" not in axes  # a run from before the key: its panel is left out


def test_the_advantage_panel_of_a_run_that_logs_it(tmp_path, monkeypatch):
    rows = [
        {**r, "train/advantage_max": 1.0, "train/advantage_mean": -0.1 * r["step"], "train/advantage_min": -1.0}
        for r in _rows_of_a_run()
    ]
    saved = _figure(monkeypatch)
    assert plot_run.main([str(_write(tmp_path / "run", rows))]) == 0
    axes = {ax.get_title(): ax for ax in saved[0].axes}
    assert [line.get_label() for line in axes["advantage (train batch)"].get_lines()] == [
        "train/advantage_max",
        "train/advantage_mean",
        "train/advantage_min",
    ]


def test_a_run_without_a_kl_term_gets_no_empty_kl_panel(tmp_path, monkeypatch):
    """The GPU learning run (kl_coef 0) logged train/kl_old = 0.0 each step: a log axis has nothing to draw, and
    the figure showed an empty KL panel between loss and entropy."""
    rows = [{**r, "train/kl_old": 0.0} for r in _rows_of_a_run()]
    saved = _figure(monkeypatch)
    assert plot_run.main([str(_write(tmp_path / "run", rows))]) == 0
    titles = [ax.get_title() for ax in saved[0].axes]
    assert "KL (log scale)" not in titles and "entropy" in titles


def test_several_runs_overlay_one_line_per_run_labelled_by_overrides(tmp_path, monkeypatch, capsys):
    sweep = tmp_path / "multirun"
    a = _write(sweep / "0", _rows_of_a_run(), ["delta=1.2"])
    b_rows = [{**r, "train/reward_mean": r["train/reward_mean"] + 0.5} for r in _rows_of_a_run()]
    b = _write(sweep / "1", b_rows, ["delta=1.8", "loop.steps=4"])
    saved = _figure(monkeypatch)
    assert plot_run.main([str(a), str(b), "--keys", "train/reward_mean"]) == 0
    assert capsys.readouterr().out.strip() == str((sweep / "curves_overlay.png").resolve())
    lines = saved[0].axes[0].get_lines()
    assert [line.get_label() for line in lines] == [
        "delta=1.2: train/reward_mean",
        "delta=1.8 loop.steps=4: train/reward_mean",
    ]
    assert lines[0].get_color() != lines[1].get_color()
    assert plot_run.run_label(tmp_path / "multirun") == "multirun"  # no .hydra: the directory's name
