"""A real `scripts/serve_env.py` process for tests of the service's clients: device cpu, the level-0 built-in
problems, a token file and its own verdict cache, on a free loopback port."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "client-test-token-0123456789abcdef"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServiceProcess:
    def __init__(self, tmp: Path, *args: str, port: int | None = None, token: str = TOKEN):
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.token = token
        self.log = tmp / f"service-{self.port}.log"
        tokens = tmp / f"tokens-{self.port}.txt"
        tokens.write_text(token + "\n")
        tokens.chmod(0o600)
        workers_tmp = tmp / f"tmp-{self.port}"
        workers_tmp.mkdir()
        env = {k: v for k, v in os.environ.items() if k != "KERNELRL_SERVICE_TOKEN"}
        env.update(PYTHONUNBUFFERED="1", TMPDIR=str(workers_tmp))
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    str(ROOT / "scripts" / "serve_env.py"),
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                    "--device",
                    "cpu",
                    "--levels",
                    "0",
                    "--token-file",
                    str(tokens),
                    "--cache",
                    str(tmp / f"cache-{self.port}.sqlite"),
                    *args,
                ],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]

    def wait_ready(self, timeout: float = 180.0) -> ServiceProcess:
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the service exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                if httpx.get(self.url + "/healthz", timeout=2).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the service did not come up in {timeout} s:\n{self.log_tail()}")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
