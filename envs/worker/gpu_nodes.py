"""The /dev/nvidia* nodes a sandboxed CUDA worker gets: its own GPUs' and the driver's shared ones, nothing else.

A worker names its GPUs in CUDA_VISIBLE_DEVICES (indices, GPU or MIG UUIDs); each GPU is reached through
/dev/nvidia<minor>, where the minor is the driver's, not CUDA's index, so GPUs are mapped by PCI bus id (from
nvidia-smi, else /proc/driver/nvidia). Inside the sandbox the worker's CUDA_VISIBLE_DEVICES becomes the bound
GPUs' UUIDs, which name the same devices whatever the numbering. Shared nodes: nvidiactl, nvidia-uvm,
nvidia-uvm-tools; a MIG device also needs its parent GPU's node and /dev/nvidia-caps. Details: docs/sandbox.md."""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import re
import shutil
import subprocess
from pathlib import Path

log = logging.getLogger(__name__)

SHARED_NODES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools")
PROC_GPUS = Path("/proc/driver/nvidia/gpus")
_QUERY = ["--query-gpu=index,uuid,pci.bus_id,name", "--format=csv,noheader"]
_UUID = re.compile(r"^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I)


class GpuMappingError(RuntimeError):
    """A CUDA_VISIBLE_DEVICES entry that names no GPU of this host, or a GPU without a device node."""


@dataclasses.dataclass(frozen=True)
class Gpu:
    index: int  # nvidia-smi's index: PCI bus order
    bus_id: tuple[int, int, int, int]  # domain, bus, device, function
    minor: int  # /dev/nvidia<minor>
    uuid: str | None = None  # GPU-...; None where the driver does not show it
    name: str = ""
    mig: tuple[str, ...] = ()  # UUIDs of its MIG devices


def parse_bus_id(text: str) -> tuple[int, int, int, int]:
    """'00000000:18:00.0' (nvidia-smi) or '0000:18:00.0' (/proc) -> (0, 0x18, 0, 0)."""
    domain, bus, rest = text.strip().lower().split(":")
    device, function = rest.split(".")
    return int(domain, 16), int(bus, 16), int(device, 16), int(function, 16)


def read_proc(proc_dir: Path = PROC_GPUS) -> dict[tuple[int, int, int, int], tuple[int, str | None]]:
    """Bus id -> (device minor, UUID or None) from the driver's /proc files."""
    found = {}
    for info in sorted(proc_dir.glob("*/information")):
        fields = {}
        for line in info.read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            fields[key.strip()] = value.strip()
        if "Device Minor" not in fields:
            continue
        uuid = fields.get("GPU UUID")
        found[parse_bus_id(info.parent.name)] = (
            int(fields["Device Minor"]),
            uuid if uuid and _UUID.match(uuid) else None,
        )
    return found


def inventory(smi_csv: str | None, smi_list: str | None, proc_dir: Path = PROC_GPUS) -> list[Gpu]:
    """The host's GPUs from `nvidia-smi --query-gpu=index,uuid,pci.bus_id,name --format=csv,noheader`
    (None: no nvidia-smi), `nvidia-smi -L` (for MIG devices; None: skip) and the driver's /proc files."""
    proc = read_proc(proc_dir)
    gpus = []
    if smi_csv is not None:
        for line in smi_csv.strip().splitlines():
            index, uuid, bus, name = (part.strip() for part in line.split(",", 3))
            minor = proc.get(parse_bus_id(bus), (None, None))[0]
            if minor is None:
                raise GpuMappingError(f"GPU {index} ({bus}) has no entry in {proc_dir}: its device node is unknown")
            gpus.append(Gpu(int(index), parse_bus_id(bus), minor, uuid, name))
    else:
        gpus = [Gpu(i, bus, minor, uuid) for i, (bus, (minor, uuid)) in enumerate(sorted(proc.items()))]
    if smi_list:
        migs: dict[int, list[str]] = {}
        current = None
        for line in smi_list.splitlines():
            if m := re.match(r"^GPU (\d+):", line):
                current = int(m.group(1))
            elif (m := re.search(r"\(UUID: (MIG-[^)\s]+)\)", line)) and current is not None:
                migs.setdefault(current, []).append(m.group(1))
        gpus = [dataclasses.replace(g, mig=tuple(migs.get(g.index, ()))) for g in gpus]
    return gpus


def _match(entry: str, gpus: list[Gpu]) -> tuple[Gpu, str | None]:
    """The GPU an entry names, and the MIG UUID when it names a MIG device."""
    if entry.isdigit():
        hits = [g for g in gpus if g.index == int(entry)]
    elif entry.upper().startswith("MIG-"):
        hits = [g for g in gpus if any(m.lower() == entry.lower() for m in g.mig)]
        if len(hits) == 1:
            return hits[0], next(m for m in hits[0].mig if m.lower() == entry.lower())
    else:  # a UUID, or a unique prefix of one, as CUDA accepts
        hits = [g for g in gpus if g.uuid and g.uuid.lower().startswith(entry.lower())]
    if len(hits) != 1:
        known = ", ".join(f"{g.index} {g.uuid or '(uuid unknown)'}" for g in gpus) or "none"
        raise GpuMappingError(
            f"CUDA_VISIBLE_DEVICES entry {entry!r} names {'no' if not hits else 'more than one'} "
            f"GPU of this host (GPUs: {known})"
        )
    return hits[0], None


def select(visible: str | None, gpus: list[Gpu], dev_dir: Path = Path("/dev")) -> tuple[list[str], str]:
    """(device nodes to bind, CUDA_VISIBLE_DEVICES inside the sandbox) for a worker whose environment has
    CUDA_VISIBLE_DEVICES=`visible` (None: unset, every GPU). Raises GpuMappingError."""
    entries = [e.strip() for e in visible.split(",")] if visible is not None else [str(g.index) for g in gpus]
    chosen: list[tuple[Gpu, str | None]] = [_match(e, gpus) for e in entries if e]
    nodes, names = [], []
    for gpu, mig in chosen:
        node = dev_dir / f"nvidia{gpu.minor}"
        if not node.exists():
            raise GpuMappingError(f"GPU {gpu.index} should be {node}, which does not exist")
        nodes.append(str(node))
        names.append(mig or gpu.uuid)
    if any(name is None for name in names):  # the driver hides the UUIDs: CUDA numbers the bound GPUs from 0
        log.warning("sandbox: GPU UUIDs unknown (no nvidia-smi); CUDA_VISIBLE_DEVICES inside is renumbered")
        names = [str(i) for i in range(len(names))]
    if len({g.name for g, _ in chosen}) > 1 and os.environ.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID":
        log.warning(
            "sandbox: GPUs of several models and CUDA_DEVICE_ORDER is not PCI_BUS_ID: CUDA's indices "
            "may differ from the PCI order the sandbox reads them in"
        )
    if chosen:
        nodes += [str(dev_dir / n) for n in SHARED_NODES if (dev_dir / n).exists()]
        if "nvidia-uvm" not in {Path(n).name for n in nodes}:  # made on first CUDA use by a setuid helper
            log.warning("sandbox: %s does not exist yet; run any CUDA program on the host once", dev_dir / "nvidia-uvm")
        if any(mig for _, mig in chosen) and (dev_dir / "nvidia-caps").is_dir():
            nodes.append(str(dev_dir / "nvidia-caps"))
    return list(dict.fromkeys(nodes)), ",".join(dict.fromkeys(names))


@functools.lru_cache(maxsize=1)
def host_inventory() -> tuple[Gpu, ...]:
    """This host's GPUs (nvidia-smi when installed, else /proc alone), read once."""
    smi = shutil.which("nvidia-smi")
    csv = listing = None
    if smi:
        try:
            csv = subprocess.run([smi, *_QUERY], capture_output=True, text=True, timeout=60, check=True).stdout
            listing = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=60).stdout
        except (OSError, subprocess.SubprocessError) as e:
            raise GpuMappingError(f"{smi} could not list the GPUs: {e}") from None
    return tuple(inventory(csv, listing))


def worker_nodes(visible: str | None) -> tuple[list[str], str]:
    """`select` on this host's GPUs."""
    return select(visible, list(host_inventory()))
