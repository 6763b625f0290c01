"""From a problem to the chat messages a policy answers: system rules, optional one-shot example, the problem.

    [system]     the answer format and the rules the evaluator enforces   (templates/system.j2)
    [user]       another problem's source          } the one-shot example, retrieved by
    [assistant]  its verified solution             } envs.retrieval (never the problem itself)
    [user]       this problem's source                                    (templates/user.j2)

Templates are Jinja files, by default `conf/prompt/templates/` of this repository, selected by
`PromptConfig` (the Hydra `prompt` group maps onto it). The example is shown as a previous turn, in
exactly the answer format asked for, so that even a small model sees what an answer looks like.
Rendering is deterministic: the same problem, config and store give the same messages.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Mapping

import jinja2

from envs.problems import Problem
from envs.settings import reject_unknown
from envs.guard import guarded
from envs.source import CanonicalSolution, canonicalize
from envs.retrieval import KernelIndex, SolvedKernel
from rl.types import Message, RolloutRequest, SamplingConfig

__all__ = ["DEFAULT_TEMPLATES", "Prompt", "PromptBuilder", "PromptConfig", "PromptError"]

DEFAULT_TEMPLATES = Path(__file__).resolve().parents[1] / "conf" / "prompt" / "templates"


class PromptError(ValueError):
    """A prompt configuration or template that cannot be used; the message says which and why."""


@dataclasses.dataclass(frozen=True)
class PromptConfig:
    templates: str | None = None  # directory of the Jinja templates; None: conf/prompt/templates here
    system: str = "system.j2"  # answer format and evaluator rules (no variables)
    user: str = "user.j2"  # a problem as a user turn: problem_id, source
    example_answer: str = "example_answer.j2"  # the example's assistant turn: problem_id, solution
    one_shot: bool = True  # show a retrieved solved kernel of another problem as a previous turn
    max_example_chars: int | None = 4000  # skip examples whose (shown) solution is longer; null: no limit
    strip_comments: bool = False  # drop comments/docstrings of the shown sources (fewer tokens, less guidance)
    system_role: bool = True  # False: system text opens the first user turn (templates without a system role)

    def __post_init__(self) -> None:
        if self.max_example_chars is not None and self.max_example_chars < 1:
            raise PromptError("prompt max_example_chars must be >= 1 (or null for no limit)")

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any] | None) -> PromptConfig:
        m = dict(m or {})
        reject_unknown(cls, m, "prompt")
        return cls(**m)


@dataclasses.dataclass(frozen=True)
class Prompt:
    problem_id: str
    messages: list[Message]
    example: SolvedKernel | None  # the solved kernel shown as the one-shot example, if any


def _shown(code: str, strip_comments: bool) -> str:
    if not strip_comments:
        return code
    canonical = guarded("prompt", canonicalize, code)
    # not valid Python (or over the CPU stage's bounds): show it as it is rather than lose it
    return canonical.source if isinstance(canonical, CanonicalSolution) else code


class PromptBuilder:
    """Renders prompts for problems. Picklable (templates are re-compiled after unpickling), so it can
    travel into Ray actors with its store."""

    def __init__(self, config: PromptConfig | None = None, index: KernelIndex | None = None):
        self.config = config or PromptConfig()
        if self.config.one_shot and index is None:
            raise PromptError(
                "prompt.one_shot needs a solution store to retrieve examples from "
                "(pass a KernelIndex, or set prompt.one_shot=false)"
            )
        self.index = index
        directory = Path(self.config.templates) if self.config.templates else DEFAULT_TEMPLATES
        self._sources = {
            name: self._read(directory, getattr(self.config, name)) for name in ("system", "user", "example_answer")
        }
        self._compiled: dict[str, jinja2.Template] | None = None
        self._templates()  # compile now: a template error is a start-up error

    @staticmethod
    def _read(directory: Path, name: str) -> str:
        path = directory / name
        try:
            return path.read_text()
        except FileNotFoundError:
            raise PromptError(f"prompt template {path}: no such file") from None
        except (OSError, UnicodeDecodeError) as e:
            raise PromptError(f"prompt template {path}: cannot read ({e})") from None

    def _templates(self) -> dict[str, jinja2.Template]:
        if self._compiled is None:
            env = jinja2.Environment(
                undefined=jinja2.StrictUndefined, autoescape=False, trim_blocks=True, keep_trailing_newline=False
            )
            try:
                self._compiled = {name: env.from_string(text) for name, text in self._sources.items()}
            except jinja2.TemplateSyntaxError as e:
                raise PromptError(f"prompt template: {e.message} (line {e.lineno})") from None
        return self._compiled

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_compiled": None}

    def _render(self, name: str, **values: str) -> str:
        try:
            return self._templates()[name].render(**values).strip()
        except jinja2.UndefinedError as e:
            raise PromptError(
                f"prompt template {getattr(self.config, name)}: {e.message}; available: {sorted(values)}"
            ) from None

    def example_for(self, problem: Problem) -> SolvedKernel | None:
        if not self.config.one_shot or self.index is None:
            return None
        limit, strip = self.config.max_example_chars, self.config.strip_comments
        if limit is None:
            return self.index.most_similar(problem)
        # The limit applies to the solution as shown (after stripping, when configured).
        return self.index.most_similar(problem, accept=lambda r: len(_shown(r.solution, strip)) <= limit)

    def answer(self, problem_id: str, solution: str) -> str:
        """A solution written as an answer in the format the prompts ask for (the one-shot example's)."""
        return self._render(
            "example_answer", problem_id=problem_id, solution=_shown(solution, self.config.strip_comments)
        )

    def build(self, problem: Problem) -> Prompt:
        strip = self.config.strip_comments
        turns: list[Message] = []
        example = self.example_for(problem)
        if example is not None:
            turns.append(
                {
                    "role": "user",
                    "content": self._render(
                        "user", problem_id=example.problem_id, source=_shown(example.problem_source, strip)
                    ),
                }
            )
            turns.append({"role": "assistant", "content": self.answer(example.problem_id, example.solution)})
        turns.append(
            {
                "role": "user",
                "content": self._render("user", problem_id=problem.id, source=_shown(problem.source, strip)),
            }
        )
        system = self._render("system")
        if self.config.system_role:
            messages = [{"role": "system", "content": system}, *turns]
        else:
            first = turns[0]
            messages = [{"role": "user", "content": f"{system}\n\n{first['content']}"}, *turns[1:]]
        return Prompt(problem.id, messages, example)

    def request(
        self, problem: Problem, request_id: str, sampling: SamplingConfig, policy_version: int = 0
    ) -> RolloutRequest:
        return RolloutRequest(request_id, problem.id, self.build(problem).messages, sampling, policy_version)
