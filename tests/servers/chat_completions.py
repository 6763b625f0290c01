"""A Chat Completions server (FastAPI under uvicorn, on 127.0.0.1) for testing API clients.

It speaks the subset of the protocol the openai rollout engine uses (GET /v1/models, POST
/v1/chat/completions with n, max_completion_tokens, logprobs, seed, vLLM's return_token_ids) and
can be told to misbehave: scripted faults (an HTTP status with Retry-After and an error code, or a
stall) are served first-come first-served, then requests are answered normally. It records every
request (arrival time, body, Authorization header) and the most requests it held at once.

Answers are deterministic: choice i of a request is a python block naming the request's last user
message hash and i; a "token" is a whitespace-separated word, with ids from a stable hash.

Function calling: a `responder(body) -> message` (a test's script) writes the assistant message instead,
with `tool_calls` in the API's schema (the finish reason is then "tool_calls"). Requests are held to the
protocol's rules as the OpenAI API enforces them (400 otherwise): `tools` are function declarations, every
assistant tool call is answered by a `tool` message with its id before the next assistant or user message,
and no `tool` message answers a call that was not made.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import socket
import threading
import time
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response


@dataclasses.dataclass
class Fault:
    status: int | None = None  # HTTP status to answer with; None: answer normally (after the delay)
    delay_s: float = 0.0  # stall before answering
    retry_after: str | None = None  # Retry-After header value
    code: str | None = None  # OpenAI error code, e.g. "insufficient_quota"
    raw_body: str | None = None  # answer 200 with this body verbatim (a broken server or proxy)


def token_id(word: str) -> int:
    return int.from_bytes(hashlib.sha256(word.encode()).digest()[:2], "little")


class ChatServer:
    def __init__(
        self,
        *,
        api_key: str | None = "sk-test-0123456789abcdef",
        models: tuple[str, ...] = ("test-model",),
        owned_by: str = "test",
        latency_s: float = 0.0,
        reasoning_tokens: int = 0,
        cached_tokens: int = 0,
        completion_words: int = 12,
        supports_token_ids: bool = False,
        serve_models: bool = True,
        responder: Any = None,
    ):
        self.api_key, self.models, self.owned_by = api_key, models, owned_by
        self.latency_s, self.reasoning_tokens, self.cached_tokens = latency_s, reasoning_tokens, cached_tokens
        self.completion_words, self.supports_token_ids = completion_words, supports_token_ids
        self.serve_models = serve_models  # False: GET /v1/models is 404, like some gateways
        self.responder = responder  # body -> assistant message dict (content and/or tool_calls)
        self.faults: list[Fault] = []
        self.requests: list[dict[str, Any]] = []  # {"t", "body", "auth"}
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()
        self.app = self._make_app()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.base_url = ""

    # ------------------------------------------------------------------ protocol
    def _error(self, status: int, message: str, code: str | None = None, headers: dict | None = None):
        return JSONResponse(
            {"error": {"message": message, "type": "test_error", "param": None, "code": code}},
            status_code=status,
            headers=headers,
        )

    def _authorized(self, request: Request) -> str | None:
        if self.api_key is None:
            return None
        auth = request.headers.get("authorization", "")
        if auth != f"Bearer {self.api_key}":
            # Like OpenAI, the message echoes (part of) the key it got: clients must redact it.
            return f"Incorrect API key provided: {auth.removeprefix('Bearer ')}"
        return None

    def _make_app(self) -> FastAPI:
        app = FastAPI()

        @app.get("/v1/models")
        async def models(request: Request):
            if (why := self._authorized(request)) is not None:
                return self._error(401, why, "invalid_api_key")
            if not self.serve_models:
                return self._error(404, "Not Found")
            return {
                "object": "list",
                "data": [{"id": m, "object": "model", "created": 0, "owned_by": self.owned_by} for m in self.models],
            }

        @app.post("/v1/chat/completions")
        async def chat(request: Request):
            body = await request.json()
            with self.lock:
                self.requests.append(
                    {"t": time.monotonic(), "body": body, "auth": request.headers.get("authorization")}
                )
                fault = self.faults.pop(0) if self.faults else None
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                await asyncio.sleep(self.latency_s + (fault.delay_s if fault else 0.0))
                if (why := self._authorized(request)) is not None:
                    return self._error(401, why, "invalid_api_key")
                if body.get("model") not in self.models:
                    return self._error(404, f"The model `{body.get('model')}` does not exist", "model_not_found")
                if fault is not None and fault.raw_body is not None:
                    return Response(fault.raw_body, media_type="application/json")
                if fault is not None and fault.status is not None:
                    headers = {"retry-after": fault.retry_after} if fault.retry_after is not None else None
                    return self._error(fault.status, f"injected {fault.status}", fault.code, headers)
                if (why := _tool_protocol_error(body)) is not None:
                    return self._error(400, why, "invalid_request_error")
                return self._answer(body)
            finally:
                with self.lock:
                    self.in_flight -= 1

        return app

    def _answer(self, body: dict) -> dict:
        messages = body["messages"]
        prompt_words = [w for m in messages for w in (m.get("content") or "").split()]
        tag = hashlib.sha256((messages[-1].get("content") or "").encode()).hexdigest()[:8]
        limit = body.get("max_completion_tokens") or body.get("max_tokens") or 1 << 30
        choices, completion_tokens = [], 0
        for i in range(int(body.get("n") or 1)):
            words = ["```python", f"#{tag}", f"sample{i}", "seed", str(body.get("seed"))]
            words += [f"w{j}" for j in range(self.completion_words - len(words) - 1)] + ["```"]
            finish = "stop"
            if len(words) > limit:
                words, finish = words[:limit], "length"
            choice: dict[str, Any] = {
                "index": i,
                "finish_reason": finish,
                "message": {"role": "assistant", "content": " ".join(words)},
            }
            if self.responder is not None:
                message = {"role": "assistant", **self.responder(body)}
                words = (message.get("content") or "").split()
                choice = {
                    "index": i,
                    "message": message,
                    "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
                }
            if body.get("logprobs"):
                choice["logprobs"] = {
                    "content": [
                        {"token": w, "logprob": -0.01 * (j + 1), "bytes": None, "top_logprobs": []}
                        for j, w in enumerate(words)
                    ]
                }
            if self.supports_token_ids and body.get("return_token_ids"):
                choice["token_ids"] = [token_id(w) for w in words]
            choices.append(choice)
            completion_tokens += len(words) + self.reasoning_tokens
        response: dict[str, Any] = {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": choices,
            "usage": {
                "prompt_tokens": len(prompt_words),
                "completion_tokens": completion_tokens,
                "total_tokens": len(prompt_words) + completion_tokens,
                "completion_tokens_details": {"reasoning_tokens": self.reasoning_tokens * len(choices)},
                "prompt_tokens_details": {"cached_tokens": self.cached_tokens},
            },
        }
        if self.supports_token_ids and body.get("return_token_ids"):
            response["prompt_token_ids"] = [token_id(w) for w in prompt_words]
        return response

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> ChatServer:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.base_url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
        config = uvicorn.Config(self.app, log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the test chat server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None and self._thread is not None
        self._server.should_exit = True
        self._thread.join(10)


def _tool_protocol_error(body: dict) -> str | None:
    """Why a request breaks the function-calling rules of the Chat Completions API, or None."""
    for tool in body.get("tools") or []:
        function = tool.get("function") or {}
        if (
            tool.get("type") != "function"
            or not isinstance(function.get("name"), str)
            or not isinstance(function.get("parameters", {}), dict)
        ):
            return f"tools: {str(tool)[:100]} is not a function declaration"
    open_calls: set[str] = set()
    for i, m in enumerate(body.get("messages") or []):
        role = m.get("role")
        if role == "tool":
            if m.get("tool_call_id") not in open_calls:
                return f"messages[{i}]: a tool message must answer a preceding tool call (tool_call_id)"
            open_calls.discard(m["tool_call_id"])
            continue
        if open_calls:
            return f"messages[{i}]: tool calls {sorted(open_calls)} were not answered by tool messages"
        if role == "assistant":
            for call in m.get("tool_calls") or []:
                if call.get("type") != "function" or not isinstance((call.get("function") or {}).get("arguments"), str):
                    return f"messages[{i}]: a tool call needs type function and string arguments"
                open_calls.add(call.get("id"))
    if open_calls:
        return f"tool calls {sorted(open_calls)} were not answered by tool messages"
    return None
