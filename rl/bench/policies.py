"""Where a benchmark's answers come from: a rollout engine (vllm, hf, openai: rl.rollout.make_engine), files,
or a training run's own samples.

`FilesEngine` implements rl.types.RolloutEngine over answers already written, so the benchmark runner drives
every policy the same way. `FilesEngine.from_directory` (policy=files) reads `policy.dir`, per problem (its file
stem: `L2_01_softmax`, `23_Softmax` for `kernelbench/level1/23`):
    <stem>.py | <stem>.md            one answer (sample 0)
    <stem>/<k>.py | <stem>/<k>.md    samples k = 0, 1, ... (any integers, taken in numeric order)
`FilesEngine.from_run` (policy=run) serves the completions a training run recorded in its samples.jsonl at one
step of one split: a run's validation at step 0 and at its end are its start and final policies' answers on the
held-out problems, so both can be benchmarked (and re-judged on another device) without their weights.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import re
from pathlib import Path
from typing import AsyncIterator

from envs.problems import Problem
from rl.types import RolloutRequest, Sample, WeightUpdate

__all__ = ["Answer", "FilesEngine", "FilesPolicyError", "answer_files", "run_answers"]

_SUFFIXES = (".py", ".md")
_SAMPLE = re.compile(r"^\d+$")
_SAMPLE_FILES = ("samples.jsonl", "samples.jsonl.gz")


class FilesPolicyError(ValueError):
    """The answers are unusable (a missing or empty directory or run, two answers for one slot)."""


@dataclasses.dataclass(frozen=True)
class Answer:
    """One answer a files policy serves: its text, where it came from, and how its generation ended."""

    text: str
    origin: str
    finish: str = "stop"

    @classmethod
    def read(cls, path: Path) -> "Answer":
        return cls(path.read_text(), str(path))


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


def run_answers(run_dir: str | Path, step: int | str = 0, split: str = "val") -> tuple[int, dict[str, list[Answer]]]:
    """The completions a training run recorded (`run_dir`/samples.jsonl or samples.jsonl.gz, rows of
    rl.metrics.sample_rows) at `step` of `split`, per problem id in sample-index order; `step="last"` is the last
    step that split has. Returns (the step, the answers)."""
    path = next((p for p in (Path(run_dir) / n for n in _SAMPLE_FILES) if p.is_file()), None)
    if path is None:
        raise FilesPolicyError(f"policy.run {run_dir}: no samples.jsonl(.gz) (the directory of a training run)")
    rows: dict[int, list[dict]] = {}
    try:
        with gzip.open(path, "rt") if path.suffix == ".gz" else path.open() as f:
            for number, line in enumerate(f, 1):
                try:
                    row = json.loads(line)
                    if row.get("split") == split:
                        row["index"], row["problem_id"] = int(row["index"]), str(row["problem_id"])
                        rows.setdefault(int(row["step"]), []).append(row)
                except (ValueError, TypeError, KeyError, AttributeError):
                    raise FilesPolicyError(
                        f"{path}:{number}: not a sample row (JSON with step, split, problem_id, index, completion)"
                    ) from None
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise FilesPolicyError(f"{path}: unreadable ({e})") from None
    if not rows:
        raise FilesPolicyError(f"{path}: no samples of split {split!r}")
    if step == "last":
        step = max(rows)
    elif not isinstance(step, int) or isinstance(step, bool):
        raise FilesPolicyError(f"policy.step must be an integer step or 'last', not {step!r}")
    if step not in rows:
        raise FilesPolicyError(f"{path}: no samples of split {split!r} at step {step} (it has steps {sorted(rows)})")
    answers: dict[str, list[Answer]] = {}
    seen: set[tuple[str, int]] = set()
    for row in sorted(rows[step], key=lambda r: (r["problem_id"], r["index"])):
        key = (row["problem_id"], row["index"])
        if key in seen:  # one slot written twice (a step repeated after a resume): the first rows count
            continue
        seen.add(key)
        origin = f"{path} step {step} {split} {key[0]}#{key[1]}"
        text, finish = row.get("completion") or "", row.get("finish") or "stop"
        answers.setdefault(key[0], []).append(Answer(str(text), origin, str(finish)))
    return step, answers


def _sample(request: RolloutRequest, index: int, answer: Answer | None, missing: str) -> Sample:
    if answer is None:
        usage = {"error": missing}
        return Sample(request.request_id, request.problem_id, index, [], [], "", None, "error", 0, usage=usage)
    usage = {"file": answer.origin}
    return Sample(
        request.request_id, request.problem_id, index, [], [], answer.text, None, answer.finish, 0, usage=usage
    )


def file_sample(request: RolloutRequest, index: int, path: Path | None, missing: str = "") -> Sample:
    """The sample a files policy serves: the answer in `path`, or (None) an empty answer that says what was
    `missing`, which evaluates as a failure."""
    return _sample(request, index, None if path is None else Answer.read(path), missing)


class FilesEngine:
    """Serves answers already written: first attempts only (the runner refuses refinement, which needs a model).
    `answers`: per problem id, its answers in sample order; `source` names where they came from."""

    def __init__(self, answers: dict[str, list[Answer]], source: str):
        self.answers, self.source = answers, source

    @classmethod
    def from_directory(cls, directory: str | Path, problems: list[Problem]) -> "FilesEngine":
        directory = Path(directory)
        if not directory.is_dir():
            raise FilesPolicyError(f"policy.dir {directory}: no such directory")
        answers = {p.id: [Answer.read(f) for f in answer_files(directory, p)] for p in problems}
        if not any(answers.values()):
            stems = ", ".join(_stem(p) for p in problems[:3])
            raise FilesPolicyError(
                f"policy.dir {directory}: holds no answer for any of the {len(problems)} "
                f"problems (expected e.g. {stems}: <stem>.py|.md or <stem>/<k>.py|.md)"
            )
        return cls(answers, str(directory))

    @classmethod
    def from_run(cls, run_dir: str | Path, step: int | str, split: str) -> "FilesEngine":
        """Every answer the run recorded at `step` of `split` (`only` keeps the benchmarked problems')."""
        step, recorded = run_answers(run_dir, step, split)
        return cls(recorded, f"{run_dir} (step {step}, {split})")

    def only(self, problems: list[Problem]) -> "FilesEngine":
        """The answers of `problems` alone; a clear error when it has none of theirs."""
        answers = {p.id: self.answers.get(p.id, []) for p in problems}
        if not any(answers.values()):
            raise FilesPolicyError(
                f"{self.source} answered none of the {len(problems)} problems selected "
                f"(it answered {sorted(self.answers)})"
            )
        return FilesEngine(answers, self.source)

    def samples_for(self, problem_id: str) -> int:
        return len(self.answers.get(problem_id, []))

    async def generate(self, requests: list[RolloutRequest]) -> AsyncIterator[Sample]:
        for r in requests:
            answers = self.answers.get(r.problem_id, [])
            for index in range(r.sampling.n):
                answer = answers[index] if index < len(answers) else None
                yield _sample(r, index, answer, f"no answer for sample {index} in {self.source}")

    def update_weights(self, update: WeightUpdate) -> float:
        raise FilesPolicyError("the files policy has no weights")

    def shutdown(self) -> None:
        pass
