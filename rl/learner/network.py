"""Where a learner group meets: a free port and this node's address (group.py starts the ranks, host.py joins
them); apart from both so that neither imports the other."""

from __future__ import annotations

import socket


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def node_address() -> str:
    try:
        import ray

        return ray.util.get_node_ip_address()
    except Exception:  # no Ray: a single host
        return "127.0.0.1"
