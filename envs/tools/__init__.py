"""Tools a policy may call inside a trajectory: kernel_evaluator, kernel_search, docs_search,
profile, and submit. One registry (`registry.TOOLS`), OpenAI function-calling schemas, one small module
per tool; `base.py` says what a tool is."""

from envs.tools.base import Tool, ToolContext, ToolResult
from envs.tools.registry import SUBMIT, TOOLS, resolve_tools, schemas

__all__ = ["SUBMIT", "TOOLS", "Tool", "ToolContext", "ToolResult", "resolve_tools", "schemas"]
