"""Every command README.md shows, so the front door cannot go stale. A training run is too long for a
test, so each `scripts/train.py` command is composed (every job of a `-m` sweep) and validated as `--check`
does; inputs the README names as placeholders (a model directory, a curated set, a KernelBench checkout) are
built for real in tmp_path. Every script the README runs must exist, and every relative link must resolve."""

import importlib.util
import json
import re
import shlex
import shutil
from pathlib import Path

import pytest

from rl.config import ConfigError
from tests.conftest import ROOT

spec = importlib.util.spec_from_file_location("train_readme", ROOT / "scripts" / "train.py")
train = importlib.util.module_from_spec(spec)
spec.loader.exec_module(train)

README = (ROOT / "README.md").read_text()
KERNELBENCH = next(
    (
        p
        for p in (Path("/work/shared/kernelbench"), ROOT.parent / "shared" / "kernelbench")
        if (p / "KernelBench" / "level1").is_dir()
    ),
    None,
)


def readme_commands() -> list[list[str]]:
    """The shell commands of README's ```bash blocks: continuation lines joined, comments dropped, `&&` split."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", README, re.S):
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            line = line.split(" #")[0].strip()
            if line and not line.startswith("#"):
                commands += [shlex.split(part) for part in line.split("&&")]
    return commands


def train_commands() -> list[list[str]]:
    return [
        c[c.index(next(a for a in c if a.endswith("scripts/train.py"))) + 1 :]
        for c in readme_commands()
        if any(a.endswith("scripts/train.py") for a in c)
    ]


def test_the_readme_shows_the_commands_this_test_checks():
    cmds = [" ".join(c) for c in train_commands()]
    assert "" in cmds and "+experiment=gpt5_triton" in cmds
    assert "data=curated algorithm=dapo rollout.temperature=1.0" in cmds
    assert len(cmds) >= 12


def test_every_script_the_readme_runs_exists():
    scripts = set(re.findall(r"\b(scripts/\w+\.(?:py|sh))", README))
    assert len(scripts) >= 8 and [s for s in scripts if not (ROOT / s).is_file()] == []


def test_every_relative_link_resolves():
    for doc in [ROOT / "README.md", ROOT / "docs" / "benchmarks" / "README.md"]:
        for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", doc.read_text()):
            if not target.startswith(("http://", "https://")):
                assert (doc.parent / target).exists(), f"{doc.name}: {target}"


@pytest.fixture
def placeholders(tmp_path, monkeypatch):
    """Real inputs for what the README's commands name but a checkout does not hold."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"")
    monkeypatch.setenv("KERNELRL_QWEN7B_DIR", str(model))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    curated = tmp_path / "curated"  # a curated set as scripts/curate.py writes it: problem files + manifest
    curated.mkdir()
    manifest = []
    for problem in sorted((ROOT / "envs" / "builtin" / "problems").glob("L[01]_*.py")):
        shutil.copy(problem, curated / problem.name)
        manifest.append({"id": problem.stem, "level": int(problem.stem[1]), "weight": 1.0})
    (curated / "manifest.jsonl").write_text("".join(json.dumps(m) + "\n" for m in manifest))
    monkeypatch.setenv("KERNELRL_CURATED", str(curated))
    if KERNELBENCH:
        monkeypatch.setenv("KERNELBENCH_DIR", str(KERNELBENCH))
    return {"/models/Qwen2.5-Coder-7B-Instruct": str(model)}


@pytest.mark.parametrize("args", train_commands(), ids=lambda a: " ".join(a) or "default")
def test_train_command_composes_and_validates(args, placeholders):
    flags, overrides = train.split_argv(args)
    if "--help" in args:
        assert "Config groups" in train.short_help()
        return
    for placeholder, real in placeholders.items():
        overrides = [o.replace(placeholder, real) for o in overrides]
    multirun = bool(flags.get("-m"))
    jobs = train.sweep_jobs(overrides) if multirun else [overrides]
    assert len(jobs) > 1 or not multirun
    for job in jobs:
        cfg = train.compose_config(job)
        try:
            train.validate(cfg)
        except ConfigError as e:
            # the one input a README command names that no checkout has: a stopped run to resume
            allowed = [p for p in e.problems if "resume" in " ".join(job) and "outputs/2026-12-01" in p]
            if not KERNELBENCH:
                allowed += [p for p in e.problems if "KernelBench" in p]
            assert e.problems == allowed, e.problems
            assert allowed
