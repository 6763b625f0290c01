"""Running fuzz cases through the CPU stage of evaluation.

`run_boundary` calls `CpuStage.prepare`, the boundary that must return a Candidate or a Verdict whatever the
text; `run_stages` calls the stages it is made of one by one, to say where a crash comes from. Both run in
forked child processes (`Fleet`), so that a slow case costs only its time limit and one that kills its
process (C stack overflow, memory) is an outcome rather than the end of the run.
"""

from __future__ import annotations

import ast
import contextlib
import multiprocessing
import os
import queue
import resource
import signal
import time
import traceback
import warnings
from collections import Counter
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any, Callable, Iterable, Iterator

from tests.fuzz.mutations import ROOT


def _where(filename: str) -> str:
    path = os.path.abspath(filename)
    return os.path.relpath(path, ROOT) if path.startswith(str(ROOT) + os.sep) else os.path.basename(path)


def crash_site(exc: BaseException) -> dict[str, str]:
    """The exception's type, its innermost frame in envs/ and a site to group crashes by. A RecursionError
    that loops through envs/ is grouped by the functions of the loop: one root cause reaches its limit at
    different frames."""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if _where(f.filename).startswith("envs" + os.sep)] or frames
    inner = f"{_where(ours[-1].filename)}:{ours[-1].lineno}:{ours[-1].name}" if ours else "?"
    site = f"{type(exc).__name__} at {inner}"
    if isinstance(exc, RecursionError):
        calls = Counter(f"{_where(f.filename)}:{f.name}" for f in ours[-300:])
        loop = sorted(name for name, n in calls.items() if n > 2 and name.startswith("envs"))
        if loop:
            site = f"RecursionError in loop {' / '.join(loop)}"
    deepest = f"{_where(frames[-1].filename)}:{frames[-1].lineno}:{frames[-1].name}" if frames else "?"
    return {"type": type(exc).__name__, "frame": inner, "deepest": deepest, "site": site, "message": str(exc)[:300]}


def run_stages(problem, text: str) -> dict | None:
    """The first stage that raises on `text` (extraction and canonicalization, the reference's analysis,
    the solution's analysis) with its site; None when each stage returns or rejects the text as it should."""
    from envs.antihack import static
    from envs.source import SourceError, prepare_solution

    try:
        from envs.antihack.static.reference import _reference
    except ImportError:  # moved: the reference is still analysed inside `analyze`
        _reference = None
    try:
        solution = prepare_solution(text)
    except SourceError:
        return None
    except Exception as e:
        return None if _is_limit(e) else {"stage": "source", **crash_site(e)}
    stages: list[tuple[str, Callable]] = [("analyze", lambda: static.analyze(solution.source, problem.source))]
    if _reference is not None:
        stages.insert(0, ("reference", lambda: _reference(problem.source)))
    for stage, call in stages:
        try:
            call()
        except Exception as e:
            return None if _is_limit(e) else {"stage": stage, **crash_site(e)}
    return None


def _is_limit(e: Exception) -> bool:
    """A stage refusing text over one of its bounds (envs/guard.py's LimitExceeded): the intended outcome."""
    return type(e).__name__ == "LimitExceeded"


def run_boundary(preparer, problem, text: str) -> dict[str, Any]:
    """What `CpuStage.prepare` made of `text`: outcome "candidate", "verdict:<status>" or "escaped" (with the
    crash site), and the CPU stage's wall and CPU seconds."""
    from envs.verdict import Verdict

    wall, cpu = time.perf_counter(), time.process_time()
    try:
        result = preparer.prepare(problem, text)
        record: dict[str, Any] = {"outcome": "candidate"}
        if isinstance(result, Verdict):
            record = {"outcome": f"verdict:{result.status.value}", "error": (result.error or "")[:300]}
    except Exception as e:
        record = {"outcome": "escaped", **crash_site(e)}
    return {**record, "seconds": time.perf_counter() - wall, "cpu_seconds": time.process_time() - cpu}


# --- shrinking ---------------------------------------------------------------------------------------


class _Slow(BaseException):
    """One shrinking attempt ran past its time (a BaseException so the stages' `except Exception` lets it by)."""


@contextlib.contextmanager
def _alarm(seconds: float):
    def fire(*_):
        raise _Slow()

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _remove_chunks(items: list, still_crashes: Callable[[], bool], minimum: int) -> bool:
    """Delete runs of `items` in place (halves, quarters, ... single items) while the crash stays."""
    changed, size = False, max(len(items) // 2, 1)
    while True:
        i = 0
        while i < len(items) and len(items) - size >= minimum:
            removed = items[i : i + size]
            del items[i : i + size]
            if still_crashes():
                changed = True
            else:
                items[i:i] = removed
                i += size
        if size == 1:
            return changed
        size //= 2


def _bodies(tree: ast.Module) -> list[tuple[list, int]]:
    """Every statement list in the tree with the fewest statements it may keep."""
    out = [(tree.body, 0)]
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if node is not tree and isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                out.append((body, 0 if field != "body" else 1))
    return out


def _shrink_statements(text: str, same: Callable[[str], bool]) -> str | None:
    """`text` with statements removed while it still crashes there; None when it does not parse (or no
    longer crashes there once re-printed)."""
    try:
        tree = ast.parse(text)
        if not same(ast.unparse(tree) + "\n"):
            return None
    except (Exception, _Slow):
        return None
    progress = True
    while progress:
        progress = False
        for body, minimum in _bodies(tree):
            progress |= _remove_chunks(body, lambda: same(ast.unparse(tree) + "\n"), minimum)
    return ast.unparse(tree) + "\n"


def shrink(problem, text: str, site: str, budget_s: float = 60.0, attempt_s: float = 10.0) -> str:
    """A smaller text that still crashes a stage at `site`: the fenced code alone, plain line ends, then
    statements removed (valid Python stays valid) or, when it does not parse, lines removed; within
    `budget_s` seconds."""
    from envs.source import extract_code

    deadline = time.monotonic() + budget_s

    def same(candidate: str) -> bool:
        if time.monotonic() > deadline:
            return False
        try:
            with _alarm(attempt_s):
                crash = run_stages(problem, candidate)
        except _Slow:
            return False
        return crash is not None and crash["site"] == site

    for simpler in (extract_code(text), text.replace("\r\n", "\n").replace("\r", "\n")):
        if simpler != text and same(simpler):
            text = simpler
    if (shrunk := _shrink_statements(text, same)) is not None:
        return shrunk
    lines = text.split("\n")
    _remove_chunks(lines, lambda: same("\n".join(lines)), 1)
    return "\n".join(lines)


# --- child processes ---------------------------------------------------------------------------------


def _serve(conn, problems: dict, preparer, memory_gib: float) -> None:
    """The child's loop: one request at a time until the parent closes the pipe."""
    warnings.simplefilter("ignore")  # invalid escapes in fuzzed code would flood stderr with SyntaxWarnings
    with open("/proc/self/statm") as f:
        used = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    limit = used + int(memory_gib * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
    while True:
        try:
            kind, problem_id, *args = conn.recv()
        except EOFError:
            return
        problem = problems[problem_id]
        if kind == "boundary":
            conn.send(run_boundary(preparer, problem, *args))
        elif kind == "stages":
            conn.send({"crash": run_stages(problem, *args)})
        else:
            conn.send({"text": shrink(problem, *args)})


class Worker:
    """One forked child; a request past its time limit kills it, and the next request forks a new one."""

    def __init__(self, problems: dict, preparer, memory_gib: float):
        self.args, self.proc, self.conn = (problems, preparer, memory_gib), None, None

    def call(self, request: tuple, timeout: float) -> dict:
        if self.proc is None:
            fork = multiprocessing.get_context("fork")  # the child inherits the imported code and the CpuStage
            self.conn, child = fork.Pipe()
            self.proc = fork.Process(target=_serve, args=(child, *self.args), daemon=True)
            self.proc.start()
            child.close()
        try:
            self.conn.send(request)
            if not self.conn.poll(timeout):
                self.close()
                return {"outcome": "timeout", "seconds": timeout}
            return self.conn.recv()
        except (EOFError, OSError):
            code = self.close()
            return {"outcome": f"died({code})", "seconds": 0.0}

    def close(self) -> int | None:
        if self.proc is None:
            return None
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join()
        code, self.proc = self.proc.exitcode, None
        self.conn.close()
        return code


class Fleet:
    """`jobs` workers sharing the requests of a run."""

    def __init__(self, problems: dict, preparer, jobs: int = 1, memory_gib: float = 4.0):
        self.jobs, self.idle = jobs, queue.Queue()
        for _ in range(jobs):
            self.idle.put(Worker(problems, preparer, memory_gib))

    def call(self, request: tuple, timeout: float) -> dict:
        worker = self.idle.get()
        try:
            return worker.call(request, timeout)
        finally:
            self.idle.put(worker)

    def map(self, fn: Callable, items: Iterable) -> Iterator:
        """(item, fn(item)) for every item, `jobs` at a time, in order of completion."""
        with ThreadPoolExecutor(self.jobs) as pool:
            futures = {pool.submit(fn, item): item for item in items}
            for future in as_completed(futures):
                yield futures[future], future.result()

    def close(self) -> None:
        while not self.idle.empty():
            self.idle.get().close()


def make_preparer():
    """A CpuStage as envs/evaluator.py builds one for a CPU device, without cache."""
    from envs.evaluator import CpuStage
    from envs.settings import EvalSettings

    return CpuStage(EvalSettings(device="cpu"), "cpu")


def builtin_problems() -> dict:
    from envs.problems import load_builtin

    return {p.id: p for p in load_builtin()}


def run_case(fleet: Fleet, case, timeout: float, stages: bool = True) -> dict:
    """The boundary's record for one case; when it did not end in a Candidate or an ordinary Verdict
    (escaped, internal_error, rejected, timeout, died) and `stages`, also the stage that crashes."""
    record = fleet.call(("boundary", case.problem_id, case.text), timeout)
    ordinary = record["outcome"] == "candidate" or (
        record["outcome"].startswith("verdict:")
        and record["outcome"] not in ("verdict:internal_error", "verdict:rejected")
    )
    if stages and not ordinary:
        crash = fleet.call(("stages", case.problem_id, case.text), timeout)
        record["stage_crash"] = crash.get("crash") if "crash" in crash else {"stage": "?", "site": crash["outcome"]}
    return record
