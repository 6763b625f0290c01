"""The evaluation service end to end: a real `scripts/serve_env.py` process on 127.0.0.1 (device cpu)
and a real HTTP client. One server for the module; the last test shuts it down and checks that no
worker process is left behind."""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "test-token-main-0123456789abcdef"
TOKEN_B = "test-token-other-0123456789abcdef"  # a second client, for the rate limit
MAX_BODY = 256 << 10
BURST = 60
RELU_SOLUTION = (ROOT / "envs/builtin/solutions/L0_02_relu.py").read_text()
RELU_PROBLEM = (ROOT / "envs/builtin/problems/L0_02_relu.py").read_text()
CPU_REWARD = 1 / (1 + math.exp(-(1 - 1.8)))  # correct, no speedup measured: sigmoid(1 - delta) ~= 0.31


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen(
            [sys.executable, str(ROOT / "scripts" / "serve_env.py"), *args],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )


class Server:
    def __init__(self, proc: subprocess.Popen, url: str, log: Path, tmpdir: Path):
        self.proc, self.url, self.log, self.tmpdir = proc, url, log, tmpdir

    def client(self, token: str | None = TOKEN, **kw) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=120, **kw)

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "KERNELRL_SERVICE_TOKEN"}
    env["PYTHONUNBUFFERED"] = "1"
    return env


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Server:
    tmp = tmp_path_factory.mktemp("service")
    workers_tmp = tmp / "tmp"  # the server's TMPDIR: its workers' private roots (and TMPDIR) lie under it
    workers_tmp.mkdir()
    tokens = tmp / "tokens.txt"
    tokens.write_text(f"# test tokens\n{TOKEN}\n\n{TOKEN_B}\n")
    tokens.chmod(0o600)
    port = _free_port()
    env = _env()
    env["TMPDIR"] = str(workers_tmp)
    log = tmp / "server.log"
    proc = _serve(
        [
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--device",
            "cpu",
            "--levels",
            "0",
            "1",
            "--token-file",
            str(tokens),
            "--cache",
            str(tmp / "cache.sqlite"),
            "--max-body-bytes",
            str(MAX_BODY),
            "--rate",
            "1",
            "--burst",
            str(BURST),
            "--allow-problem-source",
            "--log-level",
            "info",
        ],
        env,
        log,
    )
    srv = Server(proc, f"http://127.0.0.1:{port}", log, workers_tmp)
    deadline = time.monotonic() + 120
    while True:
        if proc.poll() is not None:
            pytest.fail(f"the server exited with {proc.returncode}:\n{srv.log_tail()}")
        try:
            if httpx.get(srv.url + "/healthz", timeout=2).status_code == 200:
                break
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"the server did not come up in 120 s:\n{srv.log_tail()}")
        time.sleep(0.2)
    yield srv
    if proc.poll() is None:
        proc.kill()
        proc.wait(30)


def _body(**kw) -> dict:
    return {"problem_id": "L0_02_relu", "solution": RELU_SOLUTION, **kw}


# --- open and protected routes --------------------------------------------------------------------
def test_healthz_needs_no_token(server):
    r = httpx.get(server.url + "/healthz")
    assert r.status_code == 200 and r.json() == {"status": "ok"}


@pytest.mark.parametrize("token", [None, "wrong-token-0123456789abcdef", TOKEN[:-1]])
@pytest.mark.parametrize(
    "method,path", [("GET", "/problems"), ("POST", "/evaluate"), ("POST", "/reward"), ("GET", "/openapi.json")]
)
def test_missing_or_wrong_token_is_401(server, token, method, path):
    with server.client(token) as c:
        r = c.request(method, path, json=_body() if method == "POST" else None)
    assert r.status_code == 401, r.text
    assert r.headers["www-authenticate"].startswith("Bearer")


def test_problems(server):
    with server.client() as c:
        r = c.get("/problems")
    assert r.status_code == 200
    problems = {p["id"]: p for p in r.json()["problems"]}
    assert "L0_02_relu" in problems and "L1_01_gelu_tanh" in problems
    assert all(p["level"] in (0, 1) for p in problems.values())  # --levels 0 1
    relu = problems["L0_02_relu"]
    assert relu == {
        "id": "L0_02_relu",
        "level": 0,
        "has_reference": True,
        "small_sizes": {"batch_size": 7, "dim": 1000},
    }
    with server.client() as c:
        one = c.get("/problems/L0_02_relu").json()
        assert one["source"] == RELU_PROBLEM
        assert c.get("/problems/nope").status_code == 404


def test_openapi_schema(server):
    with server.client() as c:
        r = c.get("/openapi.json")
    assert r.status_code == 200
    schema = r.json()
    assert {"/evaluate", "/reward", "/problems", "/healthz"} <= set(schema["paths"])
    components = schema["components"]["schemas"]
    assert {"EvaluateRequest", "VerdictResponse", "RewardResponse", "EvalOverrides"} <= set(components)
    assert set(components["EvaluateRequest"]["properties"]) == {
        "problem_id",
        "problem_source",
        "solution",
        "settings",
        "problem_sha256",
    }
    assert set(components["EvalOverrides"]["properties"]) == {"baseline", "delta"}
    assert "bearer" in json.dumps(schema["components"]["securitySchemes"]).lower()
    ok = schema["paths"]["/evaluate"]["post"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert ok["$ref"].endswith("/VerdictResponse")


# --- evaluation -----------------------------------------------------------------------------------
def test_correct_reference_solution(server):
    with server.client() as c:
        r = c.post("/evaluate", json=_body())
    assert r.status_code == 200, r.text
    v = r.json()
    # The CLI's field order (scripts/eval_kernel.py verdict_json), then the rest of Verdict.to_dict().
    assert list(v)[:8] == ["status", "correct", "hack", "speedup", "reward", "timings", "error", "cached"]
    assert {"problem_id", "device", "baseline", "phase_seconds", "notes", "mismatch"} <= set(v)
    assert v["status"] == "correct" and v["correct"] is True and v["hack"] is None
    assert v["device"] == "cpu" and v["speedup"] is None and v["problem_id"] == "L0_02_relu"
    assert v["reward"] == pytest.approx(CPU_REWARD, abs=1e-6) and abs(v["reward"] - 0.31) < 0.005


def test_reward_endpoint_with_markdown_answer(server):
    answer = f"Here is my kernel.\n\n```python\n{RELU_SOLUTION}```\nIt fuses nothing, but it is correct."
    with server.client() as c:
        assert c.post("/reward", json=_body()).status_code == 200  # the bare code, evaluated (or cached)
        r = c.post("/reward", json=_body(solution=answer))
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"reward", "status", "cached"}
    assert body["status"] == "correct" and body["reward"] == pytest.approx(CPU_REWARD, abs=1e-6)
    # Markdown and bare code canonicalize to the same solution: the verdict cache answers.
    assert body["cached"] is True


def test_settings_overrides(server):
    with server.client() as c:
        r = c.post("/reward", json=_body(settings={"delta": 1.0, "baseline": "eager"}))
        assert r.status_code == 200, r.text
        assert r.json()["reward"] == pytest.approx(0.5, abs=1e-6)  # sigmoid(1 - 1.0)
        # Only safe overrides: anything that changes cost or predictability is refused.
        for unsafe in (
            {"timed_runs": 1},
            {"seed": 1},
            {"correctness_trials": 1},
            {"delta": 1e9},
            {"baseline": "numpy"},
        ):
            r = c.post("/evaluate", json=_body(settings=unsafe))
            assert r.status_code == 422, (unsafe, r.text)


def test_incorrect_solution(server):
    wrong = RELU_SOLUTION.replace("tl.maximum(x, 0.0)", "tl.abs(x)")
    assert wrong != RELU_SOLUTION
    with server.client() as c:
        r = c.post("/evaluate", json=_body(solution=wrong))
    assert r.status_code == 200, r.text
    v = r.json()
    assert v["status"] == "incorrect" and v["correct"] is False and v["reward"] == 0.0
    assert v["mismatch"] and "differ" in v["error"]


def test_compile_error_is_a_verdict(server):
    with server.client() as c:
        r = c.post("/evaluate", json=_body(solution="```python\ndef broken(:\n```"))
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "compile_error" and r.json()["reward"] == 0.0


def test_problem_source_instead_of_id(server):
    source = RELU_PROBLEM.replace('SMALL_SIZES = {"batch_size": 7', 'SMALL_SIZES = {"batch_size": 5')
    assert source != RELU_PROBLEM
    with server.client() as c:
        r = c.post("/evaluate", json={"problem_source": source, "solution": RELU_SOLUTION})
        assert r.status_code == 200, r.text
        v = r.json()
        assert v["status"] == "correct" and v["reward"] == pytest.approx(CPU_REWARD, abs=1e-6)
        assert v["problem_id"].startswith("source/") and v["cached"] is False
        # The same text as a loaded problem shares its cached verdict but keeps the id it was asked under.
        assert c.post("/evaluate", json=_body()).status_code == 200
        r = c.post("/evaluate", json={"problem_source": RELU_PROBLEM, "solution": RELU_SOLUTION})
        assert r.status_code == 200, r.text
        assert r.json()["cached"] is True and r.json()["problem_id"].startswith("source/")


def test_problem_source_runs_in_the_sandbox(server):
    """Problem code is never analysed: a problem whose module body runs shell commands, writes outside its
    directory and reads the token file gets its verdict, and none of it reached the host."""
    from envs.worker.sandbox import why_unsandboxed

    if (reason := why_unsandboxed("required")) is not None:
        pytest.skip(f"the worker sandbox cannot run here: {reason}")
    marker = ROOT / f".escape-{os.getpid()}-{time.monotonic_ns()}"
    tokens = server.tmpdir.parent / "tokens.txt"
    escape = (
        f"import os\nos.system('touch {marker} {server.tmpdir.parent}/escaped')\n"
        f"TOKENS = open({str(tokens)!r}).read() if os.path.exists({str(tokens)!r}) else ''\n"
        "if TOKENS:\n    raise RuntimeError('stolen ' + TOKENS)\n"
    )
    with server.client() as c:
        r = c.post("/evaluate", json={"problem_source": escape + RELU_PROBLEM, "solution": RELU_SOLUTION})
        assert r.status_code == 200, r.text
        v = r.json()
        assert TOKEN not in json.dumps(v) and v["status"] == "correct", v
        assert not marker.exists() and not (server.tmpdir.parent / "escaped").exists()
        assert c.post("/evaluate", json=_body()).json()["status"] == "correct"  # still serving


def test_invalid_problem_source_is_422_with_the_problem_error(server):
    with server.client() as c:
        r = c.post("/evaluate", json={"problem_source": "import torch\nx = 1\n", "solution": RELU_SOLUTION})
        assert r.status_code == 422
        assert "missing Model, get_inputs, get_init_inputs" in r.json()["detail"]
        r = c.post("/evaluate", json={"problem_source": "def (:", "solution": RELU_SOLUTION})
        assert r.status_code == 422 and "not valid Python" in r.json()["detail"]


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b'{"problem_id": "L0_02_relu", "solution": ',
        b"[]",
        b'{"solution": "x"}',
        b'{"problem_id": "L0_02_relu", "problem_source": "x", "solution": "x"}',
        b'{"problem_id": "L0_02_relu", "solution": 3}',
        b'{"problem_id": "L0_02_relu", "solution": "x", "extra": 1}',
    ],
)
def test_malformed_request_is_422(server, content):
    with server.client() as c:
        r = c.post("/evaluate", content=content, headers={"Content-Type": "application/json"})
    assert r.status_code == 422, r.text


def test_unknown_problem_id_is_404(server):
    with server.client() as c:
        r = c.post("/evaluate", json=_body(problem_id="L9_99_nothing"))
    assert r.status_code == 404 and "L9_99_nothing" in r.json()["detail"]


# --- limits ---------------------------------------------------------------------------------------
def test_oversized_body_is_413(server):
    big = _body(solution="# " + "x" * MAX_BODY)
    with server.client() as c:
        r = c.post("/evaluate", json=big)  # Content-Length over the limit
        assert r.status_code == 413, r.text

        def chunks():  # no Content-Length: chunked transfer, the server counts what arrives
            data = json.dumps(big).encode()
            for i in range(0, len(data), 16 << 10):
                yield data[i : i + (16 << 10)]

        r = c.post("/evaluate", content=chunks(), headers={"Content-Type": "application/json"})
        assert r.status_code == 413, r.text
        assert "limit" in r.json()["detail"]
        # Just under the limit is fine (and reaches validation).
        r = c.post("/evaluate", content=b"x" * (MAX_BODY - 1), headers={"Content-Type": "application/json"})
        assert r.status_code == 422


def test_rate_limit_is_429_per_client(server):
    with server.client(TOKEN_B) as c:
        codes = [c.get("/problems") for _ in range(BURST + 10)]
    limited = [r for r in codes if r.status_code == 429]
    assert limited, [r.status_code for r in codes]
    assert all(r.status_code == 200 for r in codes[: BURST - 2])
    assert int(limited[0].headers["retry-after"]) >= 1
    with server.client() as c:  # another token is another client, with its own bucket
        assert c.get("/problems").status_code == 200


# --- startup and shutdown -------------------------------------------------------------------------
def test_refuses_to_start_without_a_token(tmp_path):
    proc = _serve(["--device", "cpu", "--port", str(_free_port())], _env(), tmp_path / "log")
    assert proc.wait(60) == 2
    assert "no bearer token" in (tmp_path / "log").read_text()


def test_refuses_a_public_bind_without_the_sandbox(tmp_path):
    config = tmp_path / "eval.yaml"
    config.write_text((ROOT / "conf/eval/default.yaml").read_text().replace("sandbox: auto", "sandbox: off"))
    env = {**_env(), "KERNELRL_SERVICE_TOKEN": TOKEN}
    proc = _serve(
        ["--device", "cpu", "--host", "0.0.0.0", "--port", str(_free_port()), "--eval-config", str(config)],
        env,
        tmp_path / "log",
    )
    assert proc.wait(60) == 2
    assert "refusing to serve on 0.0.0.0 with sandbox=off" in (tmp_path / "log").read_text()


def _leftover_workers(tmpdir: Path) -> list[psutil.Process]:
    """Worker processes (KERNELRL_WORKER_TAG in their environment) of this test's server."""
    found = []
    for p in psutil.process_iter():
        try:
            env = p.environ()
        except (psutil.Error, OSError):
            continue
        if "KERNELRL_WORKER_TAG" in env and env.get("TMPDIR", "").startswith(str(tmpdir)):
            found.append(p)
    return found


def test_clean_shutdown_leaves_no_worker_processes(server):
    running = _leftover_workers(server.tmpdir)
    assert running, "expected the server's warm worker process to be running"
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(60) == 0, server.log_tail()
    deadline = time.monotonic() + 10
    while (left := _leftover_workers(server.tmpdir)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, [(p.pid, p.cmdline()) for p in left]
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in running)
    assert not list(server.tmpdir.glob("kernelrl-worker-*")), "worker roots left behind"
    assert "Application shutdown complete" in server.log.read_text()
