"""rl/learner/host_allocator.py: glibc's thresholds set in a CPU learner's process, or nothing changed."""

import ctypes
import subprocess
import sys

from rl.learner import host_allocator


def test_glibc_takes_the_settings_in_a_process_of_its_own():
    # a child process: the settings last for the process's life, and pytest's own should keep glibc's defaults
    code = "from rl.learner.host_allocator import keep_freed_memory as k; print(k())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "True", out.stderr


def test_without_glibc_nothing_is_changed(monkeypatch):
    def no_libc(name, *args, **kwargs):
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(ctypes, "CDLL", no_libc)
    assert host_allocator.keep_freed_memory() is False


def test_a_refused_setting_is_reported(monkeypatch, caplog):
    class Libc:
        class mallopt:  # noqa: N801  (stands for the C function)
            argtypes = restype = None

            def __new__(cls, param, value):
                return 0 if param == -3 else 1

    monkeypatch.setattr(ctypes, "CDLL", lambda name: Libc)
    assert host_allocator.keep_freed_memory() is False
    assert "refused" in caplog.text
