"""`kernel_search(query)`: verified kernels of other problems similar to the query (BM25, envs.retrieval).

The index is built by the caller from the solution store (envs/solutions.py) with held-out problems
(validation/benchmark) already left out; this tool also never returns a solution of the problem being
solved (by id and by source hash), so a trajectory cannot look up its own answer.
"""

from __future__ import annotations

from typing import Any

from envs.tools.base import Tool, ToolContext, ToolResult, string_arguments

_MAX_HITS = 2
_MAX_SOLUTION_CHARS = 3000


def _shown(text: str) -> str:
    return text if len(text) <= _MAX_SOLUTION_CHARS else text[:_MAX_SOLUTION_CHARS] + "\n# ... (truncated)"


async def run(arguments: dict[str, Any], context: ToolContext) -> ToolResult:
    if context.solutions is None:
        return ToolResult("kernel_search is not available in this run", ok=False)
    query = arguments["query"].strip()
    if not query:
        return ToolResult("kernel_search needs a non-empty query (words or code describing the computation)", ok=False)
    hits = context.solutions.search(
        query, k=_MAX_HITS, exclude_ids={context.problem.id}, exclude_sha256={context.problem.sha256}
    )
    if not hits:
        return ToolResult(
            f"kernel_search: no verified kernel matches {query[:80]!r}; try other words "
            "(operation names such as softmax, matmul, layer_norm, conv)",
            cost={"hits": 0.0},
        )
    parts = []
    for i, hit in enumerate(hits, 1):
        r = hit.record
        speed = f"{r.speedup:.2f}x" if r.speedup is not None else "not measured"
        parts.append(
            f"## result {i}: problem {r.problem_id} (speedup {speed}; {r.provenance})\n"
            f"### problem\n```python\n{_shown(r.problem_source)}\n```\n"
            f"### verified solution\n```python\n{_shown(r.solution)}\n```"
        )
    return ToolResult("\n\n".join(parts), cost={"hits": float(len(hits))})


TOOL = Tool(
    name="kernel_search",
    description=(
        "Search a database of verified Triton solutions to OTHER problems (each with its problem "
        "source, solution and measured speedup). Query with operation names or code, e.g. "
        "'row softmax', 'matmul relu', 'layer norm'. Returns the best matches."
    ),
    parameters=string_arguments("query", descriptions={"query": "words or code describing the computation"}),
    run=run,
)
