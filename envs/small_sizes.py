"""Derive small sizes for problems that carry only GPU sizes (KernelBench), so the Triton interpreter can check
correctness on a CPU.

The problem's module-level integer constants (and the elements of integer tuples: shapes) of at least
`min_scaled` (sizes; smaller ones are kernel sizes, strides, axes) are halved together, step by step (s
halvings: v -> ceil(v / 2^s), never below `min_value`), so powers of two stay divisible by each other and the
shapes keep their proportions. Constants computed from
others (`bias_shape = (out_channels, 1, 1)`) are recomputed, because the worker sets the constants after the
module ran. The first step whose largest `get_inputs()` tensor (estimated from the source, nothing runs here)
has at most `max_elements` elements is verified by running the reference in an evaluation worker (problem code
is untrusted: the same isolated process as candidates): it must run, give a non-degenerate output and finish
in `max_seconds`. Too slow or out of memory: one more halving; an error (a shape made invalid, e.g. a
spatial size below what the network's pooling needs) or a degenerate output: one halving less.
"""

from __future__ import annotations

import ast
import dataclasses
import math
import operator
import time
from typing import Any

from envs.problems import Problem

__all__ = [
    "SizeSearch",
    "DerivedSizes",
    "SizeError",
    "derive_small_sizes",
    "scaled_sizes",
    "estimate_elements",
    "scalable_constants",
    "apply_small_sizes",
]

_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Div: operator.truediv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_CREATORS = {"rand", "randn", "randint", "zeros", "ones", "empty", "full", "randperm", "arange"}


class SizeError(ValueError):
    """No small size was found for a problem within the search's bounds (the message says what was tried)."""


@dataclasses.dataclass(frozen=True)
class SizeSearch:
    max_elements: int = 65536  # the largest input tensor (estimated from get_inputs), like the built-in SMALL_SIZES
    max_seconds: float = 5.0  # the reference check (load + 3 forward passes) on the CPU
    min_scaled: int = 16  # integer constants below this are not scaled
    min_value: int = 4  # a scaled constant never goes below this
    max_trials: int = 8  # reference runs per problem
    memory_limit_gb: float = 8.0

    def key(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class DerivedSizes:
    sizes: dict[str, Any]  # module constants to set (what Problem.small_sizes holds)
    halvings: int
    estimated_elements: int | None
    trials: list[dict[str, Any]]  # every verification run: halvings, outcome, seconds, detail


class _Unknown(Exception):
    pass


def _eval(node: ast.AST, env: dict[str, Any]) -> Any:
    """Literal arithmetic over known constants; anything else is unknown (nothing is executed)."""
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, (int, float, bool, str))
        or (isinstance(node, ast.Constant) and node.value is None)
    ):
        return node.value
    if isinstance(node, ast.Name) and node.id in env:
        return env[node.id]
    if isinstance(node, (ast.Tuple, ast.List)):
        values = [_eval(e, env) for e in node.elts]
        return tuple(values) if isinstance(node, ast.Tuple) else values
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _eval(node.left, env), _eval(node.right, env)
        if not all(isinstance(v, (int, float)) for v in (left, right)):
            raise _Unknown
        if isinstance(node.op, ast.Pow) and abs(right) > 64:
            raise _Unknown
        return _BINOPS[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _eval(node.operand, env)
        if isinstance(value, (int, float)):
            return -value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "int" and len(node.args) == 1:
        value = _eval(node.args[0], env)
        if isinstance(value, (int, float)):
            return int(value)
    raise _Unknown


def _assignments(tree: ast.Module) -> list[tuple[list[str], ast.AST]]:
    """Module-level `a = b = expr` and `a, b = x, y` bindings, in order."""
    out = []
    for node in tree.body:
        if not isinstance(node, ast.Assign):
            continue
        if all(isinstance(t, ast.Name) for t in node.targets):
            out.append(([t.id for t in node.targets], node.value))
        elif (
            len(node.targets) == 1
            and isinstance(node.targets[0], ast.Tuple)
            and isinstance(node.value, ast.Tuple)
            and len(node.targets[0].elts) == len(node.value.elts)
            and all(isinstance(t, ast.Name) for t in node.targets[0].elts)
        ):
            out += [([t.id], v) for t, v in zip(node.targets[0].elts, node.value.elts)]
    return out


def _literal_int(node: ast.AST) -> int | None:
    """An integer written as literal arithmetic (`4096`, `2048 * 2`, `1 << 12` excluded), else None."""
    if any(isinstance(n, ast.Name) for n in ast.walk(node)):
        return None
    try:
        value = _eval(node, {})
    except (_Unknown, ArithmeticError, TypeError, ValueError):
        return None
    return value if type(value) is int else None


def _environment(tree: ast.Module, overrides: dict[str, int]) -> dict[str, Any]:
    env: dict[str, Any] = {}
    for names, value in _assignments(tree):
        if all(n in overrides for n in names):
            for n in names:
                env[n] = overrides[n]
            continue
        try:
            result = _eval(value, env)
        except (_Unknown, ArithmeticError, TypeError, ValueError):
            continue
        for n in names:
            env[n] = result
    return env


def _literal_size(node: ast.AST) -> int | tuple[int, ...] | None:
    """An integer, or a tuple of integers (`input_shape = (32768,)`), written as literal arithmetic."""
    if isinstance(node, ast.Tuple):
        values = [_literal_int(e) for e in node.elts]
        return tuple(values) if values and all(v is not None for v in values) else None
    return _literal_int(node)


def scalable_constants(source: str, min_scaled: int = 16) -> dict[str, int | tuple[int, ...]]:
    """Module-level names bound directly to an integer literal >= min_scaled (`height = width = 128` binds two),
    or to a tuple of integer literals with one >= min_scaled (a shape)."""
    tree = ast.parse(source)
    out: dict[str, int | tuple[int, ...]] = {}
    for names, value in _assignments(tree):
        literal = _literal_size(value)
        big = literal is not None and max(literal if isinstance(literal, tuple) else (literal,)) >= min_scaled
        for n in names:
            if big and n not in ("SMALL_SIZES", "TOLERANCE"):
                out[n] = literal
            else:
                out.pop(n, None)  # rebound to something else later
    return out


def _halve(value: int, times: int, floor: int) -> int:
    return max(min(floor, value), math.ceil(value / 2**times))


def _group_divisors(tree: ast.Module, min_scaled: int) -> list[int]:
    """Small constants that sizes must stay multiples of: group and head counts (GroupNorm, grouped
    convolutions and attention reshape by them)."""
    out = []
    for names, value in _assignments(tree):
        literal = _literal_int(value)
        if (
            literal is not None
            and 2 <= literal < min_scaled
            and any(w in n.lower() for n in names for w in ("group", "head"))
        ):
            out.append(literal)
    return out


def scaled_sizes(source: str, halvings: int, min_scaled: int = 16, min_value: int = 4) -> dict[str, Any]:
    """The module constants that change after `halvings` halvings, dependents included. A size that a group or
    head count divides stays a multiple of it."""
    tree = ast.parse(source)
    full = _environment(tree, {})
    divisors = _group_divisors(tree, min_scaled)

    def scale(v: int) -> int:
        if v < min_scaled:
            return v
        step = math.lcm(1, *[d for d in divisors if v % d == 0])
        return min(v, step * math.ceil(_halve(v, halvings, min_value) / step))

    scaled = {
        n: tuple(scale(e) for e in v) if isinstance(v, tuple) else scale(v)
        for n, v in scalable_constants(source, min_scaled).items()
    }
    env = _environment(tree, scaled)
    return {n: env[n] for n in env if n in full and env[n] != full[n]}


def estimate_elements(source: str, sizes: dict[str, Any] | None = None) -> int | None:
    """Elements of the largest tensor `get_inputs` creates with torch.<rand|randn|zeros|...>(shape) at `sizes`;
    calls whose shape is not literal arithmetic over module constants are skipped (None: no call is known)."""
    tree = ast.parse(source)
    env = {**_environment(tree, dict(sizes or {})), **(sizes or {})}
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "get_inputs"), None)
    if fn is None:
        return None
    largest: int | None = None
    unknown = False
    for node in ast.walk(fn):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _CREATORS
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "torch"
        ):
            continue
        try:
            shape = _shape(node, env)
        except (_Unknown, ArithmeticError, TypeError, ValueError):
            shape = None
        if shape is None:  # e.g. torch.randint(0, 2, x.shape): usually the shape of a tensor made before
            unknown = True
            continue
        numel = math.prod(shape)
        largest = numel if largest is None else max(largest, numel)
    return largest if largest is not None or not unknown else None


def _shape(call: ast.Call, env: dict[str, Any]) -> list[int] | None:
    name = call.func.attr  # type: ignore[attr-defined]
    size_kw = next((k.value for k in call.keywords if k.arg == "size"), None)
    args = call.args
    if name == "randint":
        node = size_kw if size_kw is not None else (args[2] if len(args) >= 3 else args[1] if len(args) == 2 else None)
        args = [node] if node is not None else []
    elif name == "full":
        args = args[:1]
    elif name in ("randperm", "arange"):
        args = args[-1:] if name == "randperm" else args[:1]
    elif size_kw is not None:
        args = [size_kw]
    values: list[Any] = []
    for a in args:  # torch.rand(batch_size, *input_shape)
        if isinstance(a, ast.Starred):
            inner = _eval(a.value, env)
            if not isinstance(inner, (tuple, list)):
                raise _Unknown
            values += list(inner)
        else:
            values.append(_eval(a, env))
    if len(values) == 1 and isinstance(values[0], (tuple, list)):
        values = list(values[0])
    if not values or not all(isinstance(v, int) for v in values):
        return None
    return values


def _outcome(error: str) -> str:
    low = error.lower()
    slow = ("timeout", "timed out", "time limit", "memory", "killed")
    return "slow" if any(w in low for w in slow) else "error"


def derive_small_sizes(problem: Problem, pool: Any, search: SizeSearch = SizeSearch()) -> DerivedSizes:
    """Small sizes for `problem`, verified on `pool` (an envs.worker.worker_set.WorkerSet on the CPU).
    Raises SizeError when no size satisfies the bounds within `max_trials` runs."""
    from envs.worker.worker_set import EvaluatorError

    scalable = scalable_constants(problem.source, search.min_scaled)
    if not scalable:
        raise SizeError(f"{problem.id}: no integer module constant >= {search.min_scaled} to scale")
    largest = [max(v) if isinstance(v, tuple) else v for v in scalable.values()]
    max_halvings = max(math.ceil(math.log2(max(v / search.min_value, 1))) for v in largest)

    def estimate(s: int) -> int | None:
        return estimate_elements(problem.source, scaled_sizes(problem.source, s, search.min_scaled, search.min_value))

    estimates = {s: estimate(s) for s in range(max_halvings + 1)}
    start = next((s for s, e in estimates.items() if e is not None and e <= search.max_elements), None)
    if start is None and estimates[0] is not None:  # shapes partly literal: as small as the constants allow
        start = min(estimates, key=lambda s: (estimates[s], s))
    if start is None:  # shapes not literal arithmetic: the reference's run time decides, from one halving
        start = 1
    start = max(start, 1)
    trials: list[dict[str, Any]] = []
    tried: dict[int, str] = {}
    s = start
    while len(trials) < search.max_trials:
        sizes = scaled_sizes(problem.source, s, search.min_scaled, search.min_value)
        t = time.monotonic()
        try:
            reason = pool.check_problem(dataclasses.replace(problem, small_sizes=sizes))
            seconds = time.monotonic() - t
            outcome = "degenerate" if reason else ("slow" if seconds > search.max_seconds else "ok")
            detail = reason or ""
        except EvaluatorError as e:
            seconds, detail = time.monotonic() - t, str(e)[-500:]
            outcome = _outcome(detail)
        trials.append(
            {"halvings": s, "sizes": sizes, "outcome": outcome, "seconds": round(seconds, 3), "detail": detail}
        )
        tried[s] = outcome
        if outcome == "ok":
            return DerivedSizes(sizes, s, estimates.get(s), trials)
        nxt = s + 1 if outcome == "slow" else s - 1
        if nxt < 1 or nxt > max_halvings or nxt in tried:
            break
        s = nxt
    summary = "; ".join(f"{t['halvings']} halvings: {t['outcome']} {t['detail'][:160]}" for t in trials)
    raise SizeError(
        f"{problem.id}: no small size runs within {search.max_seconds:g} s and "
        f"{search.max_elements} elements ({summary})"
    )


def needs_small_sizes(problem: Problem, search: SizeSearch = SizeSearch()) -> bool:
    """A problem without SMALL_SIZES whose inputs are not already small (estimated from its source) and that has
    sizes to scale; one with none, or already within the bound, runs as it is written."""
    if problem.small_sizes or not scalable_constants(problem.source, search.min_scaled):
        return False
    elements = estimate_elements(problem.source)
    return elements is None or elements > search.max_elements


def size_large_problems(
    problems: list[Problem],
    search: SizeSearch = SizeSearch(),
    cache: Any = None,
    workers: int = 1,
    announce: Any = None,
) -> tuple[dict[str, Problem], dict[str, DerivedSizes], dict[str, str]]:
    """Derived small sizes for the problems that need them (needs_small_sizes): (the sized problem per source
    hash, the derived sizes per problem id, the reason per problem id that no small size fits). Each source is
    sized once; files that share an id but not a source (two `model.py` of a manifest) are sized apart, since
    apply_small_sizes keys by id. `announce(n)` is called before any work with the number of problems to size."""
    unique = list({p.sha256: p for p in problems if needs_small_sizes(p, search)}.values())
    if not unique:
        return {}, {}, {}
    if announce is not None:
        announce(len(unique))
    batches: list[dict[str, Problem]] = []
    for problem in unique:
        batch = next((b for b in batches if problem.id not in b), None)
        if batch is None:
            batches.append(batch := {})
        batch[problem.id] = problem
    sized: dict[str, Problem] = {}
    derived: dict[str, DerivedSizes] = {}
    failed: dict[str, str] = {}
    for batch in batches:
        found, sizes, bad = apply_small_sizes(list(batch.values()), search, cache, workers=workers)
        sized.update({p.sha256: p for p in found})
        derived.update(sizes)
        failed.update(bad)
    return sized, derived, failed


def apply_small_sizes(
    problems: list[Problem], search: SizeSearch = SizeSearch(), cache: Any = None, workers: int = 1
) -> tuple[list[Problem], dict[str, DerivedSizes], dict[str, str]]:
    """Give every problem without SMALL_SIZES derived ones: (problems with sizes, derived per id, why a problem
    got none per id; those are left out of the returned list). Results are cached per problem and search."""
    from envs.cache import cache_key
    from envs.settings import EvalSettings, PhaseTimeouts
    from envs.worker.worker_set import WorkerSet

    todo = [p for p in problems if not p.small_sizes]
    derived: dict[str, DerivedSizes] = {}
    failed: dict[str, str] = {}
    keys = {p.id: cache_key(problem=p.sha256, check="small_sizes", search=search.key()) for p in todo}
    pending = []
    for p in todo:
        hit = cache.get_verdict(keys[p.id]) if cache is not None else None
        if hit is None:
            pending.append(p)
        elif hit.get("error"):
            failed[p.id] = hit["error"]
        else:
            derived[p.id] = DerivedSizes(hit["sizes"], hit["halvings"], hit["estimated_elements"], hit["trials"])
    if pending:
        limit = max(10.0, 4 * search.max_seconds)  # a slow run reports its time; only a runaway one is killed
        settings = EvalSettings(
            device="cpu",
            size="small",
            workers=workers,
            memory_limit_gb=search.memory_limit_gb,
            timeouts=PhaseTimeouts(load=limit, correctness=limit),
            correctness_trials=3,
        )
        import concurrent.futures

        pool = WorkerSet(settings)
        try:
            pool.worker_pids(wait=True)  # started: the first check's time must not include the worker's start

            def one(p: Problem) -> tuple[Problem, DerivedSizes | str]:
                try:
                    return p, derive_small_sizes(p, pool, search)
                except SizeError as e:
                    return p, str(e)

            with concurrent.futures.ThreadPoolExecutor(workers) as ex:
                for p, result in ex.map(one, pending):
                    record = {"error": result} if isinstance(result, str) else dataclasses.asdict(result)
                    if cache is not None:
                        cache.put_verdict(keys[p.id], p.id, record)
                    if isinstance(result, str):
                        failed[p.id] = result
                    else:
                        derived[p.id] = result
        finally:
            pool.close()
    out = [
        dataclasses.replace(p, small_sizes=derived[p.id].sizes) if p.id in derived else p
        for p in problems
        if p.id not in failed
    ]
    return out, derived, failed
