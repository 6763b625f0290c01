"""The GPU monitor against the real nvidia-smi while a GEMM loop keeps the GPU busy."""

import shutil
import time

import pytest

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available() or shutil.which("nvidia-smi") is None, reason="needs CUDA and nvidia-smi"
    ),
]


def test_monitor_sees_a_busy_gpu_and_its_memory():
    from rl.gpu_monitor import GpuMonitor

    mon = GpuMonitor(interval_ms=100)
    try:
        a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)  # 128 MiB, plus the products
        mon.take()
        end = time.time() + 3
        while time.time() < end:
            for _ in range(20):
                a = (a @ a).clamp_(-1, 1)
            torch.cuda.synchronize()
        busy = mon.take()
    finally:
        mon.close()
    assert busy["gpu/samples"] >= 10
    assert busy["gpu/util_mean"] > 50
    assert busy["gpu/mem_used_gib_max"] > 0.25
