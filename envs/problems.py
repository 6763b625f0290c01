"""Problems in KernelBench's format and the loaders for files, directories and KernelBench checkouts.

Loading only parses the file (it never runs problem code in the calling process); the worker
executes it. See docs/problem-format.md for the format and the two KernelRL extensions
(SMALL_SIZES, TOLERANCE).
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import re
from pathlib import Path
from typing import Any

BUILTIN_DIR = Path(__file__).parent / "builtin"
_BUILTIN_NAME = re.compile(r"^L(\d)_(\d\d)_\w+$")
_KERNELBENCH_NAME = re.compile(r"^(\d+)_.+$")
_REQUIRED = ("Model", "get_inputs", "get_init_inputs")
_TOLERANCE_KEYS = {"atol", "rtol"}


class ProblemError(ValueError):
    """A file or directory that is not a usable problem (set); the message names it and says why."""


@dataclasses.dataclass(frozen=True)
class Problem:
    id: str  # "L1_03_softmax", "kernelbench/level1/23", or a file stem
    source: str
    path: str | None = None
    level: int | None = None
    small_sizes: dict[str, Any] = dataclasses.field(default_factory=dict)
    tolerance: dict[str, float] | None = None
    reference_solution: str | None = None  # path of our Triton solution (built-in problems)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()

    @property
    def name(self) -> str:
        return self.id.rsplit("/", 1)[-1]


def _literal_dict(node: ast.Assign, name: str, where: str) -> dict:
    try:
        value = ast.literal_eval(node.value)
    except ValueError:
        raise ProblemError(f"{where}: {name} must be a literal dict") from None
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise ProblemError(f"{where}: {name} must be a dict with string keys")
    return value


def parse_problem(
    source: str,
    problem_id: str,
    path: str | None = None,
    level: int | None = None,
    reference_solution: str | None = None,
) -> Problem:
    """Validate `source` as a problem without executing it."""
    where = path or problem_id
    try:
        tree = ast.parse(source, filename=where)
    except SyntaxError as e:
        raise ProblemError(f"{where}: not valid Python (line {e.lineno}: {e.msg})") from None
    defined: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            defined[node.name] = node
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    defined[t.id] = node
    missing = [n for n in _REQUIRED if n not in defined]
    if missing:
        raise ProblemError(
            f"{where}: not a problem file (missing {', '.join(missing)}); "
            "a problem defines class Model, get_inputs() and get_init_inputs()"
        )
    if not isinstance(defined["Model"], ast.ClassDef):
        raise ProblemError(f"{where}: Model must be a class")

    small_sizes: dict[str, Any] = {}
    if "SMALL_SIZES" in defined:
        small_sizes = _literal_dict(defined["SMALL_SIZES"], "SMALL_SIZES", where)
        unknown = [k for k in small_sizes if k not in defined or k == "SMALL_SIZES"]
        if unknown:
            raise ProblemError(f"{where}: SMALL_SIZES names unknown module constants: {unknown}")
    tolerance = None
    if "TOLERANCE" in defined:
        tolerance = _literal_dict(defined["TOLERANCE"], "TOLERANCE", where)
        if not set(tolerance) <= _TOLERANCE_KEYS or not all(
            isinstance(v, (int, float)) and v >= 0 for v in tolerance.values()
        ):
            raise ProblemError(f"{where}: TOLERANCE must map atol/rtol to non-negative numbers")
        tolerance = {k: float(v) for k, v in tolerance.items()}
    return Problem(problem_id, source, path, level, small_sizes, tolerance, reference_solution)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        raise ProblemError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ProblemError(f"{path}: cannot read ({e})") from None


def load_problem_file(path: str | Path, problem_id: str | None = None) -> Problem:
    path = Path(path)
    if path.is_dir():
        raise ProblemError(f"{path}: is a directory, expected a problem file")
    if path.suffix != ".py":
        raise ProblemError(f"{path}: a problem file is a .py file")
    source = _read(path)
    level = None
    builtin_solution = BUILTIN_DIR / "solutions" / path.name
    is_builtin = path.resolve().parent == (BUILTIN_DIR / "problems").resolve()
    if match := _BUILTIN_NAME.match(path.stem):
        level = int(match.group(1))
    return parse_problem(
        source,
        problem_id or path.stem,
        str(path),
        level,
        str(builtin_solution) if is_builtin and builtin_solution.exists() else None,
    )


def load_problem_dir(directory: str | Path) -> list[Problem]:
    """Every problem file in `directory` (files starting with '_' are skipped), sorted by name."""
    directory = Path(directory)
    if not directory.is_dir():
        raise ProblemError(f"{directory}: no such directory")
    files = sorted(p for p in directory.glob("*.py") if not p.name.startswith("_"))
    if not files:
        raise ProblemError(f"{directory}: holds no problem files")
    return [load_problem_file(p) for p in files]


def load_kernelbench(root: str | Path, levels: list[int] | None = None) -> list[Problem]:
    """Problems of a KernelBench checkout (`root/KernelBench/level1..`), keeping level and problem id."""
    root = Path(root)
    base = root / "KernelBench" if (root / "KernelBench").is_dir() else root
    level_dirs = sorted(
        (d for d in base.glob("level*") if d.is_dir() and d.name[5:].isdigit()), key=lambda d: int(d.name[5:])
    )
    if not level_dirs:
        raise ProblemError(f"{root}: not a KernelBench checkout (no KernelBench/level<N> directories)")
    problems = []
    for level_dir in level_dirs:
        level = int(level_dir.name[5:])
        if levels is not None and level not in levels:
            continue
        files = [p for p in level_dir.glob("*.py") if _KERNELBENCH_NAME.match(p.stem)]
        for path in sorted(files, key=lambda p: int(_KERNELBENCH_NAME.match(p.stem).group(1))):
            pid = int(_KERNELBENCH_NAME.match(path.stem).group(1))
            problem = load_problem_file(path, problem_id=f"kernelbench/level{level}/{pid}")
            problems.append(dataclasses.replace(problem, level=level))
    return problems


def load_builtin(levels: list[int] | None = None) -> list[Problem]:
    problems = load_problem_dir(BUILTIN_DIR / "problems")
    return [p for p in problems if levels is None or p.level in levels]


# --- curated sets (scripts/curate.py): a problem directory with a manifest of levels and weights
MANIFEST = "manifest.jsonl"


def is_curated_set(directory: str | Path) -> bool:
    return (Path(directory) / MANIFEST).is_file()


def read_manifest(directory: str | Path) -> dict[str, dict]:
    path = Path(directory) / MANIFEST
    entries: dict[str, dict] = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            entries[str(entry["id"])] = entry
        except (json.JSONDecodeError, KeyError, TypeError):
            raise ProblemError(f"{path}:{n}: not a manifest line (a JSON object with an id)") from None
    return entries


def load_curated(directory: str | Path, levels: list[int] | None = None) -> list[Problem]:
    manifest = read_manifest(directory)
    problems = []
    for p in load_problem_dir(directory):
        entry = manifest.get(p.id)
        if entry is None:
            raise ProblemError(
                f"{directory}: {p.id}.py is not in {MANIFEST} (a curated set's files and manifest must agree)"
            )
        level = entry.get("level")
        problems.append(dataclasses.replace(p, level=int(level) if level is not None else None))
    return [p for p in problems if levels is None or p.level in levels]


def load_problem_set(spec: str, levels: list[int] | None = None) -> list[Problem]:
    """`builtin`, a KernelBench checkout, a directory of problem files, or one file."""
    if spec == "builtin":
        return load_builtin(levels)
    path = Path(spec)
    kb_level = _kernelbench_level_dir(path if path.is_dir() else path.parent)
    if kb_level is not None:  # one level of a KernelBench checkout (or a file in it): KernelBench's ids and level
        problems = load_kernelbench(
            path.resolve().parent if path.is_dir() else path.resolve().parent.parent, [kb_level]
        )
        if path.is_file():
            problems = [p for p in problems if Path(p.path).resolve() == path.resolve()]
        if problems or path.is_dir():
            return [p for p in problems if levels is None or p.level in levels]
    if path.is_dir():
        if (path / "KernelBench").is_dir() or any(path.glob("level[0-9]*")):
            return load_kernelbench(path, levels)
        if (path / "manifest.jsonl").is_file():  # a curated set (scripts/curate.py): levels from its manifest
            return load_curated(path, levels)
        return [p for p in load_problem_dir(path) if levels is None or p.level in levels]
    if path.exists():
        return [load_problem_file(path)]
    raise ProblemError(f"{spec}: not 'builtin', a problem file, a directory or a KernelBench checkout")


def _kernelbench_level_dir(directory: Path) -> int | None:
    """N when `directory` is KernelBench/level<N> of a checkout, else None."""
    directory = directory.resolve()
    if directory.parent.name == "KernelBench" and re.fullmatch(r"level\d+", directory.name):
        return int(directory.name[5:])
    return None


def resolve_problem(spec: str) -> Problem:
    """A problem file path or a built-in problem id (e.g. L1_03_softmax)."""
    path = Path(spec)
    if path.exists() or spec.endswith(".py"):
        return load_problem_file(path)
    builtin = BUILTIN_DIR / "problems" / f"{spec}.py"
    if builtin.exists():
        return load_problem_file(builtin)
    raise ProblemError(f"{spec}: no such problem file or built-in problem id")
