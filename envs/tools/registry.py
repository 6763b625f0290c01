"""The one registry of tools a trajectory may offer the policy, by name, with their OpenAI schemas.

`submit(code)` is not a tool that runs: the trajectory runner ends the trajectory with its code as the
final answer. It is declared here so that every tool-call format offers it the same way.
"""

from __future__ import annotations

from typing import Any, Iterable

import envs.tools.docs_search as docs_search
import envs.tools.kernel_evaluator as kernel_evaluator
import envs.tools.kernel_search as kernel_search
import envs.tools.profile as profile
from envs.tools.base import Tool, ToolContext, ToolResult, string_arguments

SUBMIT = "submit"


async def _submit(arguments: dict[str, Any], context: ToolContext) -> ToolResult:
    return ToolResult("submitted")


SUBMIT_TOOL = Tool(
    name=SUBMIT,
    description="Submit your final solution. This ends your attempt: the code is evaluated and scored.",
    parameters=string_arguments("code", descriptions={"code": "the full Python source of the final solution"}),
    run=_submit,
)

TOOLS: dict[str, Tool] = {
    t.name: t for t in (kernel_evaluator.TOOL, kernel_search.TOOL, docs_search.TOOL, profile.TOOL, SUBMIT_TOOL)
}


def resolve_tools(names: Iterable[str]) -> list[Tool]:
    """The named tools (in the given order) plus `submit`; an unknown name is a configuration error."""
    names = list(dict.fromkeys(names))
    unknown = [n for n in names if n not in TOOLS]
    if unknown:
        raise ValueError(f"unknown tool(s) {', '.join(unknown)}; known: {', '.join(n for n in TOOLS if n != SUBMIT)}")
    return [TOOLS[n] for n in names if n != SUBMIT] + [SUBMIT_TOOL]


def schemas(tools: Iterable[Tool]) -> list[dict[str, Any]]:
    """OpenAI `tools=[...]` declarations."""
    return [t.schema() for t in tools]
