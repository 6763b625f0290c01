"""What every tool is: a name, an OpenAI function-calling schema, and an async function of (arguments, context).

A tool never raises for the model's mistakes: bad arguments, a budget spent, a failing evaluation all come
back as a `ToolResult` whose text says what happened (`ok=False`), because the trajectory shows the text to
the model as the tool's output. Only the environment's own failures (a dead pool) propagate.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Awaitable, Callable

from envs.kernel_evaluator import KernelEvaluator
from envs.problems import Problem
from envs.verdict import Verdict


@dataclasses.dataclass
class ToolContext:
    """What a tool may use while serving one trajectory. Built by the trajectory runner per trajectory."""

    problem: Problem
    evaluator: KernelEvaluator | None = None  # kernel_evaluator
    profiler: KernelEvaluator | None = None  # profile (its `device` and `profile`)
    solutions: Any = None  # kernel_search: a envs.retrieval.KernelIndex already free of held-out problems
    docs: Any = None  # docs_search: envs.tools.triton_docs.DocsIndex
    priority: str = "train"  # the pool priority of this trajectory's evaluations
    evaluations_left: int = 4  # kernel_evaluator calls this trajectory may still make
    reward: Callable[[Verdict], float] | None = None  # kernel_evaluator's reward line (from rewards/, by the runner)
    verdicts: list[Verdict] = dataclasses.field(default_factory=list)  # every kernel_evaluator verdict, in order


@dataclasses.dataclass(frozen=True)
class ToolResult:
    text: str  # what the model reads
    ok: bool = True  # False: the call did not do its job (bad arguments, budget spent, tool failure)
    verdict: Verdict | None = None  # kernel_evaluator: the verdict the text describes
    cost: dict[str, float] = dataclasses.field(default_factory=dict)  # e.g. {"evaluations": 1}


ToolFunction = Callable[[dict[str, Any], ToolContext], Awaitable[ToolResult]]


@dataclasses.dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments object
    run: ToolFunction
    needs_gpu: bool = False

    def schema(self) -> dict[str, Any]:
        """The OpenAI function-calling declaration (`tools=[...]` of a chat completion)."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }

    def check_arguments(self, arguments: Any) -> str | None:
        """Why `arguments` do not fit the schema (required keys, string types, no unknown keys), or None."""
        if not isinstance(arguments, dict):
            return f"{self.name} takes a JSON object of arguments, not {type(arguments).__name__}"
        properties = self.parameters.get("properties", {})
        missing = [k for k in self.parameters.get("required", []) if k not in arguments]
        if missing:
            return f"{self.name} is missing the argument(s) {', '.join(missing)}"
        unknown = sorted(set(arguments) - set(properties))
        if unknown:
            return f"{self.name} has no argument(s) {', '.join(unknown)} (it takes: {', '.join(properties)})"
        for key, value in arguments.items():
            expected = properties[key].get("type")
            if expected == "string" and not isinstance(value, str):
                return f"{self.name}: argument {key} must be a string"
            if expected == "integer" and (not isinstance(value, int) or isinstance(value, bool)):
                return f"{self.name}: argument {key} must be an integer"
        return None


def string_arguments(*names: str, descriptions: dict[str, str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {n: {"type": "string", "description": descriptions[n]} for n in names},
        "required": list(names),
        "additionalProperties": False,
    }
