"""Where a benchmark's answers come from: a rollout engine (vllm, hf, openai: rl.rollout.make_engine) or files.

`FilesEngine` implements rl.types.RolloutEngine over answers already on disk, so the benchmark runner drives
every policy the same way. Layout of `policy.dir`, per problem (its file stem: `L2_01_softmax`,
`23_Softmax` for `kernelbench/level1/23`):
    <stem>.py | <stem>.md            one answer (sample 0)
    <stem>/<k>.py | <stem>/<k>.md    samples k = 0, 1, ... (any integers, taken in numeric order)
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import AsyncIterator

from envs.problems import Problem
from rl.types import RolloutRequest, Sample, WeightUpdate

__all__ = ["FilesEngine", "FilesPolicyError", "answer_files"]

_SUFFIXES = (".py", ".md")
_SAMPLE = re.compile(r"^\d+$")


class FilesPolicyError(ValueError):
    """The answers directory is unusable (missing, empty, or two answers for one slot)."""


def _stem(problem: Problem) -> str:
    return Path(problem.path).stem if problem.path else problem.name


def answer_files(directory: Path, problem: Problem) -> list[Path]:
    """The answer files of `problem` in sample order (empty when there are none)."""
    stem = _stem(problem)
    single = [directory / f"{stem}{s}" for s in _SUFFIXES if (directory / f"{stem}{s}").is_file()]
    folder = directory / stem
    samples: dict[int, list[Path]] = {}
    if folder.is_dir():
        for f in folder.iterdir():
            if f.is_file() and f.suffix in _SUFFIXES and _SAMPLE.match(f.stem):
                samples.setdefault(int(f.stem), []).append(f)
    if len(single) > 1 or any(len(v) > 1 for v in samples.values()):
        raise FilesPolicyError(f"{directory}: two answers for one sample of {problem.id} (both .py and .md)")
    if single and samples:
        raise FilesPolicyError(
            f"{directory}: {problem.id} has both {single[0].name} and a {stem}/ directory of samples; keep one"
        )
    return single or [samples[k][0] for k in sorted(samples)]


def file_sample(request: RolloutRequest, index: int, path: Path | None, missing: str = "") -> Sample:
    """The sample a files policy serves: the answer in `path`, or (None) an empty answer that says what was
    `missing`, which evaluates as a failure."""
    if path is None:
        usage = {"error": missing}
        return Sample(request.request_id, request.problem_id, index, [], [], "", None, "error", 0, usage=usage)
    text, usage = path.read_text(), {"file": str(path)}
    return Sample(request.request_id, request.problem_id, index, [], [], text, None, "stop", 0, usage=usage)


class FilesEngine:
    """Serves answers from disk: first attempts only (the runner refuses refinement, which needs a model)."""

    def __init__(self, directory: str | Path, problems: list[Problem]):
        self.directory = Path(directory)
        if not self.directory.is_dir():
            raise FilesPolicyError(f"policy.dir {directory}: no such directory")
        self.files = {p.id: answer_files(self.directory, p) for p in problems}
        if not any(self.files.values()):
            stems = ", ".join(_stem(p) for p in problems[:3])
            raise FilesPolicyError(
                f"policy.dir {directory}: holds no answer for any of the {len(problems)} "
                f"problems (expected e.g. {stems}: <stem>.py|.md or <stem>/<k>.py|.md)"
            )

    def samples_for(self, problem_id: str) -> int:
        return len(self.files.get(problem_id, []))

    async def generate(self, requests: list[RolloutRequest]) -> AsyncIterator[Sample]:
        for r in requests:
            files = self.files.get(r.problem_id, [])
            for index in range(r.sampling.n):
                path = files[index] if index < len(files) else None
                yield file_sample(r, index, path, f"no answer file for sample {index} in {self.directory}")

    def update_weights(self, update: WeightUpdate) -> float:
        raise FilesPolicyError("the files policy has no weights")

    def shutdown(self) -> None:
        pass
