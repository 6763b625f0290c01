"""A local server for the OpenAI REST endpoints a hosted run calls (http.server in a thread, 127.0.0.1).

It implements the request and response shapes of openai 3.57's files, models and fine_tuning resources (the
paths, JSON objects, list pages with `has_more` and the `after` cursor, error bodies `{"error": {message, type,
param, code}}`) closely enough for the real SDK to parse every answer, and records every request. It also plays
OpenAI's part in a job: when the job runs it sends each training row's sample to the endpoint grader it was
given (url, headers, request_body template with {{item.<field>}} and {{sample.output_text}}, score_field) and
reports the scores as `metrics` events. Failures are scripted: `refuse_create = (403, "training_not_available")`.
Nothing here is OpenAI's code; it is the stand-in the issue allows where the real service cannot be reached.
"""

from __future__ import annotations

import email.parser
import email.policy
import itertools
import json
import re
import statistics
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

import httpx

API_KEY = "sk-test-hosted-0123456789abcdef"
_PLACEHOLDER = re.compile(r"\{\{\s*(item\.[A-Za-z0-9_]+|sample\.output_text)\s*\}\}")


def _error(status: int, message: str, code: str | None = None, type_: str = "invalid_request_error"):
    return status, {"error": {"message": message, "type": type_, "param": None, "code": code}}


class FineTuningServer:
    def __init__(
        self,
        *,
        api_key: str = API_KEY,
        models: tuple[str, ...] = ("gpt-5", "gpt-5-2025-08-07", "o4-mini"),
        grader_types: tuple[str, ...] = ("endpoint", "python", "string_check"),
        answer: Callable[[dict[str, Any]], str] | None = None,
    ):
        self.api_key, self.models, self.grader_types = api_key, models, grader_types
        self.answer = answer or (lambda row: "no answer")  # the "policy": a training row -> the sample's text
        self.refuse_create: tuple[int, str] | None = None  # (HTTP status, error code) for POST /fine_tuning/jobs
        self.refuse_access: tuple[int, str] | None = None  # for GET /fine_tuning/jobs (the access check)
        self.failing_polls = 0  # GET /fine_tuning/jobs/{id} answers 503 this many times first
        self.fail_with: tuple[str, str] | None = None  # (code, message): the running job fails instead of succeeding
        self.files: dict[str, dict[str, Any]] = {}
        self.jobs: dict[str, dict[str, Any]] = {}
        self.events: dict[str, list[dict[str, Any]]] = {}
        self.checkpoints: dict[str, list[dict[str, Any]]] = {}
        self.grades: list[dict[str, Any]] = []  # every grader call: request body, status, response
        self.requests: list[tuple[str, str, Any]] = []  # (method, path, JSON body or form fields)
        self.deleted: list[str] = []
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self.base_url = ""

    # ------------------------------------------------------------------ OpenAI's side of a job
    def _event(self, job_id: str, message: str, type_: str = "message", data: Any = None, level: str = "info"):
        self.events[job_id].append(
            {
                "object": "fine_tuning.job.event",
                "id": f"ftevent-{next(self._ids)}",
                "created_at": int(time.time()),
                "level": level,
                "message": message,
                "type": type_,
                "data": data,
            }
        )

    def _grade(self, grader: dict[str, Any], row: dict[str, Any], text: str) -> float:
        def fill(value: str) -> str:
            def one(m: re.Match) -> str:
                name = m.group(1)
                return text if name == "sample.output_text" else str(row[name.split(".", 1)[1]])

            return _PLACEHOLDER.sub(one, value)

        body = {k: fill(v) for k, v in grader["request_body"].items()}
        r = httpx.post(grader["url"], json=body, headers=grader.get("headers") or {}, timeout=grader["timeout_s"])
        score = float(r.json()[grader["score_field"]]) if r.status_code == 200 else 0.0
        self.grades.append({"body": body, "status_code": r.status_code, "response": r.json(), "score": score})
        return score

    def _advance(self, job: dict[str, Any]) -> None:
        """One retrieve = one step of the job's life: validating_files -> queued -> running (one graded step)
        -> running (checkpoint) -> succeeded."""
        job_id, status = job["id"], job["status"]
        if status == "validating_files":
            job["status"] = "queued"
            self._event(job_id, "Files validated, job queued")
        elif status == "queued":
            job["status"] = "running"
            self._event(job_id, "Fine-tuning job started")
            grader = job["method"]["reinforcement"]["grader"]
            data = {"step": 1}
            for split, file_id in (("train", job["training_file"]), ("valid", job.get("validation_file"))):
                if file_id:
                    rows = [json.loads(line) for line in self.files[file_id]["content"].decode().splitlines()]
                    data[f"{split}_reward_mean"] = statistics.mean(self._grade(grader, r, self.answer(r)) for r in rows)
            self._event(job_id, "Step 1/1", "metrics", data)
        elif status == "running" and not self.checkpoints[job_id]:
            self.checkpoints[job_id].append(
                {
                    "object": "fine_tuning.job.checkpoint",
                    "id": f"ftckpt-{next(self._ids)}",
                    "created_at": 0,
                    "fine_tuned_model_checkpoint": f"ft:{job['model']}:test-org:{job.get('suffix') or 'x'}"
                    ":ck1:ckpt-step-1",
                    "fine_tuning_job_id": job_id,
                    "step_number": 1,
                    "metrics": {"step": 1.0, "train_loss": 0.5},
                }
            )
        elif status == "running" and self.fail_with:
            job["status"], job["error"] = (
                "failed",
                {"code": self.fail_with[0], "message": self.fail_with[1], "param": None},
            )
            self._event(job_id, f"Job failed: {self.fail_with[1]}", level="error")
        elif status == "running":
            job["status"] = "succeeded"
            job["finished_at"] = int(time.time())
            job["fine_tuned_model"] = f"ft:{job['model']}:test-org:{job.get('suffix') or 'x'}:ck1"
            self._event(job_id, "The job has successfully completed")

    # ------------------------------------------------------------------ routes
    def handle(self, method: str, path: str, query: dict[str, str], body: Any, auth: str | None):
        if auth != f"Bearer {self.api_key}":
            return _error(401, "Incorrect API key provided", "invalid_api_key")
        with self._lock:
            self.requests.append((method, path, body))
            if method == "GET" and path.startswith("/v1/models/"):
                model = path.removeprefix("/v1/models/")
                if model not in self.models:
                    return _error(404, f"The model '{model}' does not exist", "model_not_found")
                return 200, {"id": model, "object": "model", "created": 0, "owned_by": "openai"}
            if method == "POST" and path == "/v1/files":
                file_id = f"file-{next(self._ids)}"
                self.files[file_id] = body
                return 200, {
                    "id": file_id,
                    "object": "file",
                    "bytes": len(body["content"]),
                    "created_at": 0,
                    "filename": body["filename"],
                    "purpose": body["purpose"],
                    "status": "processed",
                }
            if method == "DELETE" and path.startswith("/v1/files/"):
                file_id = path.removeprefix("/v1/files/")
                self.files.pop(file_id, None)
                self.deleted.append(file_id)
                return 200, {"id": file_id, "object": "file", "deleted": True}
            if method == "POST" and path == "/v1/fine_tuning/alpha/graders/validate":
                if body["grader"].get("type") not in self.grader_types:
                    return _error(400, f"Invalid grader type {body['grader'].get('type')!r}", "invalid_grader")
                return 200, {"grader": body["grader"]}
            if path == "/v1/fine_tuning/jobs":
                if method == "GET":
                    if self.refuse_access:
                        return _error(self.refuse_access[0], "Fine-tuning is not available", self.refuse_access[1])
                    return 200, {
                        "object": "list",
                        "data": list(self.jobs.values())[-int(query.get("limit", 20)) :],
                        "has_more": False,
                    }
                return self._create(body)
            m = re.fullmatch(r"/v1/fine_tuning/jobs/([^/]+)(/events|/checkpoints|/cancel)?", path)
            if m and m.group(1) in self.jobs:
                job = self.jobs[m.group(1)]
                if m.group(2) is None:
                    if self.failing_polls > 0:
                        self.failing_polls -= 1
                        return _error(503, "The server is overloaded", None, "server_error")
                    self._advance(job)
                    return 200, job
                if m.group(2) == "/cancel":
                    job["status"] = "cancelled"
                    self._event(job["id"], "Job cancelled")
                    return 200, job
                items = (self.events if m.group(2) == "/events" else self.checkpoints)[job["id"]][::-1]  # newest first
                if "after" in query:
                    ids = [i["id"] for i in items]
                    items = items[ids.index(query["after"]) + 1 :]
                limit = int(query.get("limit", 20))
                return 200, {"object": "list", "data": items[:limit], "has_more": len(items) > limit}
            if m:
                return _error(404, f"No such job: {m.group(1)}", None)
            return _error(404, f"Unknown path {method} {path}")

    def _create(self, body: dict[str, Any]):
        if self.refuse_create:
            status, code = self.refuse_create
            return _error(status, f"refused: {code}", code, "invalid_request_error")
        if body.get("training_file") not in self.files:
            return _error(400, "invalid training_file", "invalid_file")
        if body.get("model") not in self.models:
            return _error(400, f"Model {body.get('model')} is not available for fine-tuning", "model_not_available")
        if (body.get("method") or {}).get("type") != "reinforcement" or "grader" not in body["method"].get(
            "reinforcement", {}
        ):
            return _error(400, "method.reinforcement.grader is required", "invalid_method")
        job_id = f"ftjob-{next(self._ids)}"
        job = {
            "object": "fine_tuning.job",
            "id": job_id,
            "created_at": int(time.time()),
            "error": None,
            "fine_tuned_model": None,
            "finished_at": None,
            "hyperparameters": {},
            "model": body["model"],
            "organization_id": "org-test",
            "result_files": [],
            "seed": body.get("seed") or 42,
            "status": "validating_files",
            "trained_tokens": None,
            "training_file": body["training_file"],
            "validation_file": body.get("validation_file"),
            "method": body["method"],
            "metadata": body.get("metadata"),
            "suffix": body.get("suffix"),
        }
        self.jobs[job_id], self.events[job_id], self.checkpoints[job_id] = job, [], []
        self._event(job_id, f"Created fine-tuning job: {job_id}")
        return 200, job

    # ------------------------------------------------------------------ HTTP plumbing
    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _serve(self, method: str):
                url = urllib.parse.urlsplit(self.path)
                query = dict(urllib.parse.parse_qsl(url.query))
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                ctype = self.headers.get("content-type", "")
                body: Any = None
                if ctype.startswith("multipart/form-data"):
                    msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
                        f"Content-Type: {ctype}\r\n\r\n".encode() + raw
                    )
                    body = {}
                    for part in msg.iter_parts():
                        name = part.get_param("name", header="content-disposition")
                        if part.get_filename():
                            body["filename"], body["content"] = part.get_filename(), part.get_payload(decode=True)
                        else:
                            body[name] = part.get_payload(decode=True).decode()
                elif raw:
                    body = json.loads(raw)
                status, answer = server.handle(method, url.path, query, body, self.headers.get("authorization"))
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._serve("GET")

            def do_POST(self):
                self._serve("POST")

            def do_DELETE(self):
                self._serve("DELETE")

        return Handler

    def __enter__(self) -> FineTuningServer:
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._httpd is not None
        self._httpd.shutdown()
        self._httpd.server_close()
