"""Walk installed packages (by import name) and source directories for nn.Module classes and turn each into a
KernelBench-format candidate: the extracted class, a `Model` wrapping it, module constants, SMALL_SIZES,
get_inputs() and get_init_inputs(). Inputs come from the rules in `shapes` (one source per guess: the first
is the candidate's source, the rest its alternatives) or, when configured, from an LLM (`llm_inputs`).
Each candidate records its package, version, file and license.

Discovery reads files only (the package is located with importlib.util.find_spec, which imports parent
packages; the crawled modules themselves run only later, in the validation worker).
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.metadata
import importlib.util
import logging
from pathlib import Path
from typing import Iterator

from envs.data.crawl.llm_inputs import llm_problem
from envs.data.crawl.extract import ExtractError, ModuleClass, extract_class, module_classes
from envs.data.crawl.shapes import InputGuess, guess_inputs
from envs.data.llm import CurationLLM, LLMUnavailable
from envs.data.records import CandidateProblem, Origin
from envs.source import canonicalize

__all__ = ["CrawlConfig", "CrawlSkip", "crawl", "render_problem", "package_files"]

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class CrawlConfig:
    packages: tuple[str, ...] = ("torch.nn",)  # import names; each is walked recursively
    directories: tuple[str, ...] = ()  # plain source trees (no package metadata: license "unknown")
    # Not problems: containers, lazy and abstract modules, quantized/fused wrappers, parametrizations.
    exclude_classes: tuple[str, ...] = (
        "Sequential",
        "ModuleList",
        "ModuleDict",
        "ParameterList",
        "ParameterDict",
        "Container",
        "Identity",
        "Module",
    )
    exclude_path_parts: tuple[str, ...] = (
        "quantized",
        "quantizable",
        "intrinsic",
        "qat",
        "_reference",
        "tests",
        "test",
        "parametrizations",
        "utils",
    )
    max_guesses: int = 3
    llm: dict | None = None  # an OpenAI-compatible endpoint (JudgeConfig fields) writing inputs the rules cannot


@dataclasses.dataclass(frozen=True)
class CrawlSkip:
    """A class the crawler saw but could not turn into a candidate (recorded in rejected.jsonl)."""

    id: str
    path: str
    reason: str


def _distribution(import_name: str) -> tuple[str | None, str | None, str | None]:
    """(distribution, version, license) of the installed distribution providing `import_name`."""
    top = import_name.split(".")[0]
    names = importlib.metadata.packages_distributions().get(top) or [top]
    for name in names:
        try:
            meta = importlib.metadata.metadata(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        license_ = meta.get("License-Expression") or meta.get("License")
        if not license_ or len(license_) > 200:
            license_ = next(
                (c.split("::")[-1].strip() for c in meta.get_all("Classifier") or [] if c.startswith("License ::")),
                license_[:200] if license_ else None,
            )
        return name, meta.get("Version"), license_
    return None, None, None


def package_files(import_name: str) -> tuple[Path, list[Path]]:
    spec = importlib.util.find_spec(import_name)
    if spec is None or not spec.origin:
        raise ValueError(f"crawl: package {import_name!r} is not installed")
    origin = Path(spec.origin)
    if origin.name != "__init__.py":
        return origin.parent, [origin]
    return origin.parent, sorted(origin.parent.rglob("*.py"))


def _module_name(import_name: str, root: Path, path: Path) -> tuple[str, bool]:
    rel = path.relative_to(root).with_suffix("")
    parts = [p for p in rel.parts]
    is_package = parts[-1] == "__init__"
    if is_package:
        parts = parts[:-1]
    return ".".join([import_name, *parts]) if parts else import_name, is_package


def _literal(value: int | float) -> str:
    return repr(value)


def render_problem(extracted: str, cls: ModuleClass, guess: InputGuess, provenance: str) -> str:
    """A KernelBench-format problem around an extracted class."""
    init_consts = [c for _, c in guess.init]
    seen: list[str] = []
    for c in init_consts:
        if c not in seen:
            seen.append(c)
    params = ", ".join(seen)
    kwargs = ", ".join(f"{arg}={const}" for arg, const in guess.init)
    names = [f"x{i}" for i in range(len(guess.inputs))]
    lines = [
        f'"""{provenance}"""',
        canonicalize(extracted).source.rstrip(),
        "",
        "",
        "import torch as _kr_torch",
        "",
        "",
        "class Model(_kr_torch.nn.Module):",
        f"    def __init__(self{', ' + params if params else ''}):",
        "        super().__init__()",
        f"        self.module = {cls.name}({kwargs})",
        "",
        f"    def forward(self, {', '.join(names)}):",
        f"        return self.module({', '.join(names)})",
        "",
        "",
    ]
    small = {}
    for name, full, small_value in guess.constants:
        lines.append(f"{name} = {_literal(full)}")
        if small_value is not None:
            small[name] = small_value
    lines += ["", f"SMALL_SIZES = {small!r}", "", "", "def get_inputs():"]
    tensors = []
    for spec in guess.inputs:
        dims = ", ".join(spec.dims)
        if spec.kind == "index":
            tensors.append(f"_kr_torch.randint(0, {spec.high}, ({dims},))")
        else:
            tensors.append(f"_kr_torch.{spec.kind}({dims})")
    lines += [f"    return [{', '.join(tensors)}]", "", "", "def get_init_inputs():", f"    return [{params}]", ""]
    return "\n".join(lines)


def _candidates_in_file(
    path: Path, module: str, is_package: bool, origin: Origin, config: CrawlConfig, llm: CurationLLM | None
) -> Iterator[CandidateProblem | CrawlSkip]:
    try:
        source = path.read_text()
        tree = ast.parse(source)
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError) as e:
        log.debug("crawl: skipping unreadable %s: %s", path, e)
        return
    for cls in module_classes(tree):
        cid = f"crawl_{module.replace('.', '_')}_{cls.name}"
        if cls.name in config.exclude_classes or "Lazy" in cls.name:
            yield CrawlSkip(cid, str(path), f"{cls.name}: excluded (container, lazy or abstract module)")
            continue
        guesses, why = guess_inputs(cls, config.max_guesses)
        if not guesses and llm is None:
            yield CrawlSkip(cid, str(path), f"{cls.name}: no input guess: {why}")
            continue
        try:
            extracted = extract_class(source, cls.name, module, is_package)
        except (ExtractError, SyntaxError) as e:
            yield CrawlSkip(cid, str(path), f"{cls.name}: cannot extract: {e}")
            continue
        where = f"{module}.{cls.name}"
        provenance = (
            f"{where} from {origin.package or 'a source tree'} {origin.version or ''} ({path.name}, license "
            f"{origin.license or 'unknown'}), extracted by KernelRL's crawler; inputs: "
        ).replace("  ", " ")
        sources = [render_problem(extracted, cls, g, provenance + g.note) for g in guesses]
        if not sources:  # the rules have nothing: the LLM writes the inputs
            try:
                sources = [llm_problem(canonicalize(extracted).source, cls.name, provenance, llm)]
            except LLMUnavailable as e:
                yield CrawlSkip(cid, str(path), f"{cls.name}: no input guess ({why}) and no LLM inputs: {e}")
                continue
        yield CandidateProblem(
            cid,
            sources[0],
            dataclasses.replace(origin, path=str(path), symbol=where),
            alternatives=tuple(sources[1:]),
            facts={"crawl": {"inputs": [g.note for g in guesses] or ["llm"]}},
        )


def crawl(config: CrawlConfig) -> Iterator[CandidateProblem | CrawlSkip]:
    llm = CurationLLM.from_mapping(config.llm) if config.llm else None
    for import_name in config.packages:
        root, files = package_files(import_name)
        dist, version, license_ = _distribution(import_name)
        origin = Origin("crawl", str(root), package=dist, version=version, license=license_)
        for path in files:
            rel_parts = path.relative_to(root).parts
            if any(p in config.exclude_path_parts for p in rel_parts[:-1]) or path.stem in config.exclude_path_parts:
                continue
            # A single module asked for by name (torch.nn.modules.activation) is that module, not a file in it.
            module, is_package = (
                (import_name, False)
                if files == [path] and path.name != "__init__.py"
                else _module_name(import_name, root, path)
            )
            yield from _candidates_in_file(path, module, is_package, origin, config, llm)
    for directory in config.directories:
        root = Path(directory)
        if not root.is_dir():
            raise ValueError(f"crawl: {directory} is not a directory")
        origin = Origin("crawl", str(root), license=None)
        for path in sorted(root.rglob("*.py")):
            module, is_package = _module_name(root.name, root, path)
            yield from _candidates_in_file(path, module, is_package, origin, config, llm)
