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
