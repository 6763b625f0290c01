"""The worker sandbox's command line and its resolution (no sandbox is started here, except the probe test)."""

from __future__ import annotations

import logging
import os

import pytest

from envs import EvalSettings
from envs.worker import sandbox as sb
from envs.worker.sandbox import PROJECT_ROOT, Sandbox, SandboxUnavailable, resolve_sandbox


def _pairs(args: list[str], flag: str) -> list[tuple[str, str]]:
    return [(args[i + 1], args[i + 2]) for i, a in enumerate(args) if a == flag]


def _singles(args: list[str], flag: str) -> list[str]:
    return [args[i + 1] for i, a in enumerate(args) if a == flag]


def test_modes_and_a_missing_bwrap(monkeypatch, caplog):
    assert resolve_sandbox("off") is None
    with pytest.raises(ValueError, match="sandbox must be one of"):
        resolve_sandbox("sometimes")
    monkeypatch.setattr(sb, "find_bwrap", lambda: None)
    with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap"):
        resolve_sandbox("required")
    with caplog.at_level(logging.WARNING):
        assert resolve_sandbox("auto") is None
    assert "WITHOUT the OS sandbox" in caplog.text


def test_settings_validate_the_mode_and_collect_hidden_paths():
    with pytest.raises(ValueError, match="sandbox must be auto, required or off"):
        EvalSettings(sandbox="yes")
    assert EvalSettings.from_mapping({"sandbox": False}).sandbox == "off"  # YAML's bare `off`
    s = EvalSettings.from_mapping({"sandbox": "required", "sandbox_hide": ["/srv/a"]})
    assert s.sandbox_hide == ("/srv/a",)
    assert s.hiding("/srv/b", None, "/srv/a").sandbox_hide == ("/srv/a", "/srv/b")
    # Only a required sandbox marks the key (auto may run without it); every other key stays as it was.
    assert s.cache_fields("cpu") == {**EvalSettings().cache_fields("cpu"), "sandbox": "required"}
    assert EvalSettings(sandbox="off").cache_fields("cpu") == EvalSettings().cache_fields("cpu")
    assert EvalSettings().cache_fields("cpu", sandboxed=True) == s.cache_fields("cpu")


def test_command_isolates_masks_and_drops_root(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    args = Sandbox("/usr/bin/bwrap", uid=65534).command(["python", "-m", "x"], "/tmp/kernelrl-worker-x", "cpu")
    for flag in ("--unshare-pid", "--unshare-net", "--unshare-ipc", "--die-with-parent", "--new-session"):
        assert flag in args
    assert ("/", "/") in _pairs(args, "--ro-bind")
    tmpfs = _singles(args, "--tmpfs")
    assert {"/tmp", "/var/tmp", "/run", "/root", "/home", str(tmp_path / "home")} <= set(tmpfs)
    assert tmpfs[-1] == "/tmp/kernelrl-worker-x"  # the only large writable place, mounted last
    assert args[args.index("--cap-drop") + 1] == "ALL"
    assert _singles(args, "--cap-add") == ["CAP_SETUID", "CAP_SETGID"]
    init = args[args.index("--") + 1 :]
    assert init[4:6] == ["--uid", "65534"] and init[-4:] == ["--", "python", "-m", "x"]
    assert not any(a.startswith("/dev/nvidia") for a in args)
    unprivileged = Sandbox("/usr/bin/bwrap").command(["python"], "/tmp/r", "cpu")
    assert "--cap-add" not in unprivileged and "--uid" not in unprivileged


def test_hidden_paths_mask_their_directory_unless_the_worker_needs_it(tmp_path, monkeypatch):
    outside = tmp_path / "srv"
    outside.mkdir()
    (outside / "cache.sqlite").write_text("")
    (outside / "cache.sqlite-wal").write_text("")
    inside = os.path.join(PROJECT_ROOT, "tokens-for-test.txt")
    monkeypatch.setattr(sb.os.path, "isfile", lambda p, real=os.path.isfile: p == inside or real(p))
    monkeypatch.setattr(sb, "_MASKED", ())  # tmp_path lies under /tmp, masked anyway
    monkeypatch.setenv("HOME", "/")
    args = Sandbox("/usr/bin/bwrap", hide=(str(outside / "cache.sqlite"), inside)).command(["x"], "/w", "cpu")
    assert str(outside) in _singles(args, "--tmpfs")  # the cache's directory: its -wal and -shm too
    assert ("/dev/null", inside) in _pairs(args, "--ro-bind")  # in the checkout: only the file
    assert PROJECT_ROOT not in _singles(args, "--tmpfs")


def test_bwrap_exit_status_maps_back_to_the_workers():
    assert Sandbox.returncode(139) == -11 and Sandbox.returncode(137) == -9
    assert Sandbox.returncode(0) == 0 and Sandbox.returncode(1) == 1


def test_directories_between_a_mask_and_a_bound_path():
    assert sb._between("/root", "/root/a/b/c") == ["/root/a", "/root/a/b"]
    assert sb._between("/root", "/root/a") == []


@pytest.mark.integration
def test_probe_runs_the_real_command():
    if sb.find_bwrap() is None:
        pytest.skip("bubblewrap is not installed")
    sandbox = Sandbox(sb.find_bwrap(), uid=sb.NOBODY if os.geteuid() == 0 else None)
    reason = sb._probe(sandbox)
    if reason is not None and "failed" in reason:
        pytest.skip(f"bubblewrap cannot create its namespaces here: {reason}")
    assert reason is None


@pytest.mark.integration
def test_probe_names_what_the_unprivileged_uid_cannot_read(tmp_path, monkeypatch):
    if sb.find_bwrap() is None or os.geteuid() != 0:
        pytest.skip("needs bubblewrap and a root evaluator (the worker then runs as nobody)")
    private = tmp_path / "private-packages"
    private.mkdir(mode=0o700)
    monkeypatch.setattr(sb.sys, "path", [*sb.sys.path, str(private)])
    reason = sb._probe.__wrapped__(Sandbox(sb.find_bwrap(), uid=sb.NOBODY))  # not the cached answer
    if reason is not None and "failed" in reason:
        pytest.skip(f"bubblewrap cannot create its namespaces here: {reason}")
    assert reason is not None and str(private) in reason and "world-readable" in reason
