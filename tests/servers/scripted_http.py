"""An HTTP peer that answers what a test scripts (http.server in a thread, 127.0.0.1): for clients' handling of
answers the real service never gives, such as a proxy's HTML error page, a truncated body, a stall. It is not a
model of the service; tests of what the service does use the real one (tests/servers/kernelrl_service.py).

A script entry is (status, headers, body bytes), or ("hang", seconds): hold the request that long, then close.
Entries are served in order; the last one repeats."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ScriptedHTTP:
    def __init__(self, script: list[tuple[Any, ...]]):
        self.script, self.requests, self._lock = list(script), [], threading.Lock()
        peer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                with peer._lock:
                    peer.requests.append((self.command, self.path, body))
                    entry = peer.script[min(len(peer.requests), len(peer.script)) - 1]
                if entry[0] == "hang":
                    time.sleep(entry[1])
                    self.close_connection = True
                    return
                status, headers, payload = entry
                self.send_response(status)
                for k, v in {"Content-Length": str(len(payload)), **headers}.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = _answer

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> ScriptedHTTP:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
