"""Length-prefixed JSON frames on private pipes between the evaluator and a worker.

JSON, never pickle: the parent must not deserialize anything executable from an untrusted worker.
Frames are capped so a hostile worker cannot make the parent allocate without bound.
"""

from __future__ import annotations

import json
import os
import struct

MAX_FRAME = 4 << 20
HEADER = struct.Struct(">I")
MAX_CONTROL_MESSAGE = 1 << 16  # one datagram between the owner and a zygote (envs/worker/zygote.py)


class ProtocolError(RuntimeError):
    pass


def write_frame(fd: int, message: dict) -> None:
    data = json.dumps(message, allow_nan=True).encode()
    if len(data) > MAX_FRAME:
        raise ProtocolError(f"frame of {len(data)} bytes exceeds {MAX_FRAME}")
    payload = HEADER.pack(len(data)) + data
    view = memoryview(payload)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _read_exact(fd: int, n: int) -> bytes:
    chunks = []
    while n:
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            raise EOFError("pipe closed")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int) -> dict:
    (size,) = HEADER.unpack(_read_exact(fd, HEADER.size))
    if size > MAX_FRAME:
        raise ProtocolError(f"frame of {size} bytes exceeds {MAX_FRAME}")
    try:
        message = json.loads(_read_exact(fd, size))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ProtocolError(f"malformed frame: {e}") from None
    if not isinstance(message, dict):
        raise ProtocolError("frame is not a JSON object")
    return message
