"""Read back what W&B wrote to an offline run, without syncing: the records of its `run-<id>.wandb` file.

The file is W&B's transaction log: a 7-byte header (`:W&B`, magic 0xBEE1, version 0), then 32 KiB blocks of
chunks, each with a 7-byte header (CRC32, length as uint16 little-endian, type: 1 full, 2 first, 3 middle,
4 last) and a payload; a block's tail shorter than a chunk header is zero padding. The payloads joined are
serialized `wandb_internal_pb2.Record` messages (wandb's own protobuf classes decode them).

wandb's service process writes the file after `finish()` has returned (under load the file can still hold
only its header then), so a reader waits for the run's `exit` record, which is written last.
"""

from __future__ import annotations

import dataclasses
import json
import struct
import time
import zlib
from pathlib import Path
from typing import Any

_BLOCK = 32 * 1024
_HEADER = b":W&B" + struct.pack("<HB", 0xBEE1, 0)
_CHUNK = 7


def payloads(path: str | Path) -> list[bytes]:
    data = Path(path).read_bytes()
    if data[: len(_HEADER)] != _HEADER:
        raise ValueError(f"{path} is not a W&B transaction log (header {data[:7]!r})")
    out, pending, pos = [], b"", len(_HEADER)
    while pos + _CHUNK <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < _CHUNK:
            pos += left  # padding at a block's end
            continue
        crc, length, kind = struct.unpack("<IHB", data[pos : pos + _CHUNK])
        if kind == 0 or pos + _CHUNK + length > len(data):
            break  # zeros, or a chunk still being written: the end of what is there
        payload = data[pos + _CHUNK : pos + _CHUNK + length]
        if zlib.crc32(bytes([kind]) + payload) & 0xFFFFFFFF != crc:
            raise ValueError(f"{path}: bad checksum at byte {pos}")
        pos += _CHUNK + length
        if kind == 1:
            out.append(payload)
        elif kind == 2:
            pending = payload
        elif kind == 3:
            pending += payload
        elif kind == 4:
            out.append(pending + payload)
            pending = b""
        else:
            raise ValueError(f"{path}: chunk type {kind} at byte {pos}")
    return out


def _items(items) -> dict[str, Any]:
    """History or summary items -> {key: value}; a nested key (a table's fields) is joined with '/'."""
    return {(item.key or "/".join(item.nested_key)): json.loads(item.value_json) for item in items}


@dataclasses.dataclass
class OfflineRun:
    run_id: str
    group: str
    name: str
    history: list[dict[str, Any]]  # one dict per logged step, `_step` included
    summary: dict[str, Any]  # the summary's updates, later ones winning
    config: dict[str, Any] = dataclasses.field(default_factory=dict)  # the run's config (top-level keys)


def _records(run_file: str | Path, wait_s: float) -> list[Any]:
    """The file's records once it ends with the run's exit record (waiting up to `wait_s` for wandb to write it)."""
    from wandb.proto import wandb_internal_pb2 as pb

    deadline = time.monotonic() + wait_s
    while True:
        records = []
        for payload in payloads(run_file):
            record = pb.Record()
            record.ParseFromString(payload)
            records.append(record)
        if records and records[-1].WhichOneof("record_type") == "exit":
            return records
        if time.monotonic() > deadline:
            raise TimeoutError(f"{run_file}: no exit record after {wait_s} s ({len(records)} records)")
        time.sleep(0.2)


def read_offline_run(run_file: str | Path, wait_s: float = 60.0) -> OfflineRun:
    run_id = group = name = ""
    history, summary, config = [], {}, {}
    for record in _records(run_file, wait_s):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run_id, group, name = record.run.run_id, record.run.run_group, record.run.display_name
            config.update(_items(record.run.config.update))
        elif kind == "config":
            config.update(_items(record.config.update))
        elif kind == "history":
            history.append(_items(record.history.item))
        elif kind == "summary":
            summary.update(_items(record.summary.update))
    return OfflineRun(run_id, group, name, history, summary, config)


def offline_runs(run_dir: str | Path) -> list[OfflineRun]:
    """Every offline W&B run under RUN_DIR/wandb/, oldest first."""
    return [read_offline_run(f) for f in sorted(Path(run_dir).glob("wandb/offline-run-*/run-*.wandb"))]
