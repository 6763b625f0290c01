"""`docs_search(query)`: the Triton language reference of the installed triton (envs/tools/triton_docs.py)."""

from __future__ import annotations

from typing import Any

from envs.tools.base import Tool, ToolContext, ToolResult, string_arguments
from envs.tools.triton_docs import installed_docs


async def run(arguments: dict[str, Any], context: ToolContext) -> ToolResult:
    docs = context.docs if context.docs is not None else installed_docs()
    query = arguments["query"].strip()
    if not query:
        return ToolResult("docs_search needs a non-empty query, e.g. 'tl.load mask other' or 'atomic add'", ok=False)
    found = docs.search(query)
    if not found:
        return ToolResult(
            f"docs_search (triton {docs.triton_version}): nothing matches {query[:80]!r}", cost={"hits": 0.0}
        )
    body = "\n\n".join(e.render() for e in found)
    return ToolResult(f"Triton {docs.triton_version} reference:\n\n{body}", cost={"hits": float(len(found))})


TOOL = Tool(
    name="docs_search",
    description=(
        "Look up the Triton language reference of the Triton version that runs your kernel: "
        "signatures and docstrings of tl.* functions (e.g. 'tl.dot', 'reduction max', 'atomic')."
    ),
    parameters=string_arguments("query", descriptions={"query": "a tl.* name or words describing the function"}),
    run=run,
)
