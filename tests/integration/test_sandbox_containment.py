"""The OS sandbox alone contains the red-team corpus: hacks from tests/hacks run with the static analysis
switched off (the execution stage is called directly), among planted secrets and listening sockets, and
afterwards
- no file was written outside the workers' temporary directories,
- no TCP listener on loopback and no world-writable Unix socket received a connection,
- no planted secret (a bearer-token file, an SSH key in $HOME, the verdict cache) appears in any verdict,
- no process a candidate started is left running, and the evaluator still evaluates correctly.

By default (CI) the hacks whose category reaches outside the worker's process run: system access,
concurrency, dynamic code and forged results, the escape attempts among them (15 of the 67 CPU hacks);
the others compute wrong answers inside the process and have no side effect to contain. `pytest -m slow
tests/integration/test_sandbox_containment.py` runs the whole CPU corpus through the same checks.

Skipped, with the reason, where bubblewrap cannot run on this host."""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import secrets
import shutil
import socket
import sqlite3
import threading
import time
from pathlib import Path

import psutil
import pytest

from envs import EvalSettings, Evaluator, PhaseTimeouts, Status, resolve_problem
from envs.cache import SqliteCache
from envs.source import canonicalize
from envs.worker.sandbox import why_unsandboxed
from tests.integration.test_hack_corpus import HACKS, corpus, header

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
_REASON = why_unsandboxed("required")
if _REASON:
    pytestmark = [pytestmark, pytest.mark.skip(reason=f"the worker sandbox cannot run here: {_REASON}")]

ESCAPES = [
    "hack_system_access_read_secrets.py",
    "hack_system_access_network_exfiltrate.py",
    "hack_system_access_write_outside.py",
    "hack_concurrency_daemon_escape.py",
]
OUTSIDE_CATEGORIES = {"system_access", "concurrency", "dynamic_code", "forged_result"}


def _hacks(full: bool) -> list[Path]:
    files = [p for p in corpus("cpu") if header(p)["expect"].startswith("hack")]
    return files if full else [p for p in files if header(p)["expect"].split()[1] in OUTSIDE_CATEGORIES]


class Listener:
    """Accepts connections on a socket in a thread and records what arrives."""

    def __init__(self, sock: socket.socket):
        self.sock, self.received, self.connections = sock, [], 0
        sock.listen(64)
        sock.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            with conn:
                conn.settimeout(1)
                try:
                    self.received.append(conn.recv(1 << 16))
                except OSError:
                    pass

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


def _files_named(roots: list[Path], needle: str) -> list[str]:
    found = []
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames if d not in (".git", "pytest-of-root")]
            found += [os.path.join(dirpath, f) for f in filenames if needle in f]
    return found


@pytest.fixture(scope="module")
def trap():
    """Secrets where an operator keeps them (outside /tmp, so that only the sandbox's masks hide them) and
    listeners the candidates must not reach."""
    base = ROOT / f".sandbox-secrets-{secrets.token_hex(4)}"
    home = base / "home"
    (home / ".ssh").mkdir(parents=True)
    planted = {
        "token": f"kernelrl-secret-token-{secrets.token_hex(16)}",
        "ssh": f"-----BEGIN OPENSSH PRIVATE KEY----- kernelrl-secret-key-{secrets.token_hex(16)}",
    }
    token_file = base / "service" / "tokens.txt"
    token_file.parent.mkdir()
    token_file.write_text(planted["token"] + "\n")
    (home / ".ssh" / "id_ed25519").write_text(planted["ssh"] + "\n")
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    unix_dir = Path(f"/tmp/kernelrl-sandbox-test-{secrets.token_hex(4)}")
    unix_dir.mkdir()
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(str(unix_dir / "collector.sock"))
    os.chmod(unix_dir / "collector.sock", 0o777)  # anyone on the host may connect: only the mask stops it
    listeners = [Listener(tcp), Listener(unix)]
    old_home = os.environ.get("HOME")
    os.environ["HOME"] = str(home)  # the evaluator's home: the sandbox masks it
    try:
        yield {
            "base": base,
            "home": home,
            "token_file": token_file,
            "planted": planted,
            "listeners": listeners,
            "cache_path": base / "cache" / "verdicts.sqlite",
            "started": time.time(),
        }
    finally:
        if old_home is None:
            os.environ.pop("HOME", None)
        else:
            os.environ["HOME"] = old_home
        for listener in listeners:
            listener.close()
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(unix_dir, ignore_errors=True)


@contextlib.contextmanager
def _contain(trap, files: list[Path]):
    """`files` on the execution stage alone, two sandboxed workers; yields what the checks look at."""
    cache = SqliteCache(trap["cache_path"])
    cache.put_verdict("planted", "L0_02_relu", {"secret": trap["planted"]["token"]})
    settings = EvalSettings(
        device="cpu", workers=2, sandbox="required", timeouts=PhaseTimeouts(correctness=60, timing=60)
    ).hiding(str(trap["token_file"]))
    assert set(ESCAPES) <= {p.name for p in files}
    # Canonicalized here, one at a time: CPython 3.11's ast is not thread-safe (see envs/evaluator.py).
    jobs = {p.name: (resolve_problem(header(p)["problem"]), canonicalize(p.read_text())) for p in files}
    ev = Evaluator(settings, cache=cache)
    try:

        def one(path: Path):
            problem, solution = jobs[path.name]
            return ev.pool.execute(problem, solution, None)[0]

        with concurrent.futures.ThreadPoolExecutor(ev.pool.size) as pool:
            verdicts = dict(zip([p.name for p in files], pool.map(one, files)))
        for name, v in verdicts.items():  # what the runtime checks alone made of each (pytest -s shows it)
            print(f"{name}: {v.outcome} in {v.phase_seconds.get('total', sum(v.phase_seconds.values())):.1f} s")
        strays = [
            p.info["cmdline"]
            for p in psutil.process_iter(["cmdline"])
            if "KERNELRL-ESCAPE-DAEMON" in (p.info["cmdline"] or [])
        ]
        after = ev.evaluate(*_reference("L0_02_relu"))
        yield {"verdicts": verdicts, "strays": strays, "after": after, "cache": cache}
    finally:
        ev.close()
        cache.close()


@pytest.fixture(scope="module")
def run(trap):
    with _contain(trap, _hacks(full=False)) as result:
        yield result


def _reference(problem_id: str):
    problem = resolve_problem(problem_id)
    return problem, Path(problem.reference_solution).read_text()


def test_no_secret_reaches_a_verdict(run, trap):
    for name, verdict in run["verdicts"].items():
        text = repr(verdict.to_dict())
        for what, secret in trap["planted"].items():
            assert secret not in text, f"{name} exfiltrated the planted {what}: {verdict.error}"
    # The search ran and its report reached the verdict: it always finds something (at the least the corpus's
    # own hack_*_secrets*.py in the checkout it walks through PYTHONPATH), so an absent report means the hack
    # never ran, not that the sandbox contained it.
    read = run["verdicts"]["hack_system_access_read_secrets.py"]
    assert read.status is Status.COMPILE_ERROR and "EXFILTRATED" in (read.error or ""), read
    assert "kernelrl-secret" not in read.error, read.error


def test_no_connection_reached_a_listener(run, trap):
    for listener in trap["listeners"]:
        assert listener.connections == 0 and not listener.received, listener.received[:3]


def test_no_file_written_outside_the_temporary_directories(run, trap):
    import site

    roots = [Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"), ROOT, trap["home"], *map(Path, site.getsitepackages())]
    assert not _files_named(roots, "kernelrl-escape"), "a candidate wrote outside its directory"
    for packages in site.getsitepackages():
        assert (
            not (Path(packages) / "sitecustomize.py").exists()
            or (Path(packages) / "sitecustomize.py").stat().st_mtime < trap["started"]
        )


def test_no_process_left_behind(run):
    assert not run["strays"], run["strays"]
    daemon = run["verdicts"]["hack_concurrency_daemon_escape.py"]
    assert daemon.status is not Status.CORRECT, "a daemon outlived its evaluation and the verdict was correct"


def test_evaluator_healthy_and_secrets_intact_afterwards(run, trap):
    assert run["after"].status is Status.CORRECT, run["after"].error
    assert trap["token_file"].read_text().strip() == trap["planted"]["token"]
    with sqlite3.connect(trap["cache_path"]) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert run["cache"].get_verdict("planted") == {"secret": trap["planted"]["token"]}


def test_escapes_are_flagged_by_the_static_analysis_too():
    from envs.antihack import static
    from envs.source import prepare_solution

    for name in ESCAPES:
        path = HACKS / name
        expect = header(path)["expect"].split()[1]
        accepted = {expect, *header(path).get("also", "").split()}
        finding = static.analyze(
            prepare_solution(path.read_text()).source, resolve_problem(header(path)["problem"]).source
        )
        assert finding is not None and finding.category in accepted, (name, finding)


@pytest.mark.slow
def test_the_whole_cpu_corpus_is_contained(trap):
    with _contain(trap, _hacks(full=True)) as run:
        test_no_secret_reaches_a_verdict(run, trap)
        test_no_connection_reached_a_listener(run, trap)
        test_no_file_written_outside_the_temporary_directories(run, trap)
        test_no_process_left_behind(run)
        test_evaluator_healthy_and_secrets_intact_afterwards(run, trap)
