"""The zygote's own checks (envs/worker/zygote.py): scratch directories restored between children, and no
fork while a thread runs. The forking itself runs in tests/integration/test_forked_workers.py."""

from __future__ import annotations

import os
import threading

import pytest

from envs.settings import EvalSettings
from envs.worker.zygote import Scratch, why_not_fork


def test_scratch_removes_what_a_child_added_and_keeps_what_was_there(tmp_path):
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "cache.bin").write_bytes(b"zygote's")
    scratch = Scratch([str(tmp_path)])
    (tmp_path / "planted.so").write_bytes(b"x")
    (tmp_path / "kept" / "extra").write_text("y")
    locked = tmp_path / "locked" / "deeper"
    locked.mkdir(parents=True)
    (locked / "f").write_text("z")
    os.chmod(tmp_path / "locked", 0)  # a child may make its directory unreadable
    os.symlink("/etc/passwd", tmp_path / "link")  # removed as a link, never followed
    assert scratch.restore() is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept"]
    assert [p.name for p in (tmp_path / "kept").iterdir()] == ["cache.bin"]
    assert os.path.exists("/etc/passwd")


def test_scratch_reports_a_file_it_cannot_restore(tmp_path):
    (tmp_path / "cache.bin").write_bytes(b"zygote's")
    scratch = Scratch([str(tmp_path)])
    (tmp_path / "cache.bin").write_bytes(b"a child's, planted for the next one")
    assert "differ" in scratch.restore()
    (tmp_path / "cache.bin").unlink()
    assert "differ" in scratch.restore()  # gone is as unrestorable as changed


def test_scratch_skips_directories_it_cannot_write(tmp_path):
    ro, rw = tmp_path / "ro", tmp_path / "rw"
    ro.mkdir()
    rw.mkdir()
    (rw / "kept").write_text("x")
    os.chmod(ro, 0o555)
    try:
        scratch = Scratch([str(ro), str(rw), str(tmp_path / "missing")])
        # root may write anywhere: then the read-only directory is watched too; a missing one never is
        assert scratch.dirs == [*([str(ro)] if os.geteuid() == 0 else []), str(rw)]
        assert str(rw / "kept") in scratch.baseline
    finally:
        os.chmod(ro, 0o755)


def test_no_fork_while_another_thread_runs():
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert "threads" in why_not_fork(sandboxed=False)
    finally:
        stop.set()
        thread.join()


def test_fork_workers_setting():
    assert EvalSettings().forks_workers("cpu") and EvalSettings().forks_workers("cuda")
    assert not EvalSettings(fork_workers="off").forks_workers("cuda")
    assert EvalSettings(fork_workers="on").forks_workers("cuda")
    assert not EvalSettings(fork_workers=False).forks_workers("cpu")  # YAML's bare off
    with pytest.raises(ValueError, match="fork_workers"):
        EvalSettings(fork_workers="sometimes")
    with pytest.raises(ValueError, match="max_forks_per_zygote"):
        EvalSettings(max_forks_per_zygote=0)
