"""rl.gpu_monitor: nvidia-smi's CSV lines into gpu/* metrics (the real nvidia-smi:
tests/gpu/test_gpu_monitor_cuda.py)."""

import stat
import sys
import time

import pytest

from rl.gpu_monitor import GpuMonitor, GpuSample, parse_line, summarize
from rl.metrics import stage_metrics


def test_parse_line_reads_the_query_columns_and_refuses_the_rest():
    assert parse_line("0, 87, 40960, 143771\n") == GpuSample(0, 87.0, 40960.0, 143771.0)
    assert parse_line("0, [N/A], 1, 2") is None
    assert parse_line("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver") is None
    assert parse_line("") is None


def test_summarize_takes_mean_utilisation_and_peak_memory():
    out = summarize([GpuSample(0, 20, 1024, 2048), GpuSample(0, 80, 3072, 2048), GpuSample(1, 50, 512, 2048)])
    assert out["gpu/util_mean"] == pytest.approx(50.0)
    assert out["gpu/util_max"] == 80.0
    assert out["gpu/mem_used_gib_max"] == pytest.approx(3.0)
    assert out["gpu/count"] == 2.0  # GPUs 0 and 1, however many ticks each
    # each GPU's own mean beside the node's, where there are several: an idle GPU the job does not use shows
    two = summarize([GpuSample(0, 90, 1, 2), GpuSample(0, 100, 1, 2), GpuSample(1, 0, 1, 2), GpuSample(1, 0, 1, 2)])
    assert two["gpu/util_mean"] == pytest.approx(47.5)
    assert two["gpu/util_mean/0"] == pytest.approx(95.0) and two["gpu/util_mean/1"] == 0.0
    assert not any(k.startswith("gpu/util_mean/") for k in summarize([GpuSample(0, 90, 1, 2)]))
    assert summarize([]) == {}


def test_monitor_without_nvidia_smi_is_inactive(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    mon = GpuMonitor()
    assert not mon.active and mon.take() == {}
    mon.close()


def test_monitor_reads_a_streaming_process_and_take_empties_the_window(tmp_path):
    # a stand-in executable that streams like `nvidia-smi --loop-ms` (this machine has no GPU)
    exe = tmp_path / "fake-smi"
    exe.write_text(
        f"#!{sys.executable}\nimport sys, time\n"
        "for i in range(1000):\n"
        "    print(f'0, {i % 100}, {1024 * (1 + i % 3)}, 4096', flush=True); time.sleep(0.01)\n"
    )
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    mon = GpuMonitor(executable=str(exe))
    try:
        deadline = time.time() + 10
        first: dict = {}
        while time.time() < deadline and first.get("gpu/samples", 0) < 5:
            time.sleep(0.1)
            got = mon.take()
            first = {**got, "gpu/samples": first.get("gpu/samples", 0) + got.get("gpu/samples", 0)} if got else first
        assert first["gpu/samples"] >= 5
        assert first["gpu/mem_total_gib"] == pytest.approx(4.0)
    finally:
        mon.close()
    assert not mon.active


def test_stage_metrics_adds_shares_of_the_step():
    out = stage_metrics({"generate": 6.0, "train": 2.0, "step": 10.0})
    assert out["time/step"] == 10.0 and out["time_share/generate"] == pytest.approx(0.6)
    assert out["time_share/train"] == pytest.approx(0.2) and "time_share/step" not in out
    assert "time_share/generate" not in stage_metrics({"generate": 1.0})
