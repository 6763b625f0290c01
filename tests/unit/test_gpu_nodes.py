"""Which /dev/nvidia* nodes a sandboxed CUDA worker gets, from a fake /proc/driver/nvidia and /dev."""

from __future__ import annotations

from pathlib import Path

import pytest

from envs.worker import gpu_nodes
from envs.worker.gpu_nodes import GpuMappingError, inventory, select
from envs.worker.sandbox import Sandbox

UUIDS = [
    "GPU-11111111-aaaa-bbbb-cccc-000000000000",
    "GPU-22222222-aaaa-bbbb-cccc-000000000000",
    "GPU-33333333-aaaa-bbbb-cccc-000000000000",
]
# Minors deliberately not in bus order: the node is the driver's minor, never CUDA's index.
BUSES = [("0000:18:00.0", 2), ("0000:2a:00.0", 0), ("0000:ab:00.0", 1)]
SMI_CSV = "\n".join(f"{i}, {UUIDS[i]}, 0000{bus}, NVIDIA H200" for i, (bus, _) in enumerate(BUSES))
SMI_LIST = (
    f"GPU 0: NVIDIA H200 (UUID: {UUIDS[0]})\n"
    f"GPU 1: NVIDIA H200 (UUID: {UUIDS[1]})\n"
    "  MIG 1g.18gb     Device  0: (UUID: MIG-aaaaaaaa-1111-2222-3333-444444444444)\n"
    f"GPU 2: NVIDIA H200 (UUID: {UUIDS[2]})\n"
)


@pytest.fixture
def host(tmp_path: Path):
    proc, dev = tmp_path / "proc", tmp_path / "dev"
    dev.mkdir()
    for i, (bus, minor) in enumerate(BUSES):
        (proc / bus).mkdir(parents=True)
        uuid = "GPU-????????-????-????-????-????????????" if i == 2 else UUIDS[i]  # not read yet by the driver
        (proc / bus / "information").write_text(
            f"Model: \t\t NVIDIA H200\nGPU UUID: \t {uuid}\nBus Location: \t {bus}\nDevice Minor: \t {minor}\n"
        )
        (dev / f"nvidia{minor}").touch()
    for name in ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"):
        (dev / name).touch()
    (dev / "nvidia-caps").mkdir()
    return proc, dev


def test_index_uuid_and_prefix_map_to_the_driver_minor(host):
    proc, dev = host
    gpus = inventory(SMI_CSV, SMI_LIST, proc)
    assert [(g.index, g.minor) for g in gpus] == [(0, 2), (1, 0), (2, 1)]
    shared = [str(dev / n) for n in ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools")]
    assert select("0", gpus, dev) == ([str(dev / "nvidia2"), *shared], UUIDS[0])
    assert select(UUIDS[2], gpus, dev) == ([str(dev / "nvidia1"), *shared], UUIDS[2])
    assert select("GPU-2222", gpus, dev)[0][0] == str(dev / "nvidia0")  # a unique prefix, as CUDA accepts
    nodes, inside = select("2,0", gpus, dev)
    assert nodes[:2] == [str(dev / "nvidia1"), str(dev / "nvidia2")] and inside == f"{UUIDS[2]},{UUIDS[0]}"
    assert str(dev / "nvidia-modeset") not in nodes and str(dev / "nvidia-caps") not in nodes


def test_unset_means_every_gpu_and_empty_means_none(host):
    proc, dev = host
    gpus = inventory(SMI_CSV, None, proc)
    nodes, inside = select(None, gpus, dev)
    assert {str(dev / f"nvidia{m}") for m in (0, 1, 2)} <= set(nodes) and inside == ",".join(UUIDS)
    assert select("", gpus, dev) == ([], "")


def test_a_mig_device_gets_its_parent_and_the_capability_nodes(host):
    proc, dev = host
    gpus = inventory(SMI_CSV, SMI_LIST, proc)
    nodes, inside = select("MIG-aaaaaaaa-1111-2222-3333-444444444444", gpus, dev)
    assert nodes[0] == str(dev / "nvidia0") and str(dev / "nvidia-caps") in nodes
    assert inside == "MIG-aaaaaaaa-1111-2222-3333-444444444444"


def test_unknown_or_ambiguous_entries_are_refused(host):
    proc, dev = host
    gpus = inventory(SMI_CSV, None, proc)
    for entry in ("7", "GPU-99", "GPU-", "MIG-nothing"):
        with pytest.raises(GpuMappingError, match="names"):
            select(entry, gpus, dev)
    (dev / "nvidia1").unlink()
    with pytest.raises(GpuMappingError, match="does not exist"):
        select("2", gpus, dev)


def test_without_nvidia_smi_proc_alone_gives_bus_order_and_renumbers_inside(host):
    proc, dev = host
    gpus = inventory(None, None, proc)
    assert [(g.index, g.minor, g.uuid) for g in gpus] == [(0, 2, UUIDS[0]), (1, 0, UUIDS[1]), (2, 1, None)]
    assert select("0", gpus, dev)[1] == UUIDS[0]
    nodes, inside = select("1,2", gpus, dev)  # GPU 2's UUID is unknown: CUDA numbers the bound two from 0
    assert nodes[:2] == [str(dev / "nvidia0"), str(dev / "nvidia1")] and inside == "0,1"


def test_the_sandbox_binds_only_the_selected_nodes(monkeypatch):
    monkeypatch.setattr(
        gpu_nodes,
        "worker_nodes",
        lambda visible: (["/dev/nvidia3", "/dev/nvidiactl"], "GPU-x") if visible == "3" else pytest.fail(visible),
    )
    args = Sandbox("/usr/bin/bwrap").command(["x"], "/w", "cuda", "3")
    binds = [(args[i + 1], args[i + 2]) for i, a in enumerate(args) if a == "--dev-bind"]
    assert binds == [("/dev/nvidia3", "/dev/nvidia3"), ("/dev/nvidiactl", "/dev/nvidiactl")]
    env = [(args[i + 1], args[i + 2]) for i, a in enumerate(args) if a == "--setenv"]
    assert ("CUDA_VISIBLE_DEVICES", "GPU-x") in env


def test_the_pool_names_gpus_as_the_host_does(monkeypatch):
    from envs.gpu_lock import host_gpu_ids

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert host_gpu_ids(2) == [0, 1]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3, GPU-2222,5")  # CUDA's device 0 here is the host's GPU 3
    assert host_gpu_ids(3) == [3, "GPU-2222", 5]
    assert host_gpu_ids(1) == [3]  # CUDA stopped at an entry it could not use
