"""Tool calls out of a policy's turn, and the text that tells a policy how to make them.

Formats (TrajectoryConfig.tool_format): `native` (OpenAI function calling, `Sample.tool_calls`), `hermes`
(`<tool_call>{...}</tool_call>` in the text), `fenced` (a ```tool block), `auto` (native when present, else
both text forms). Parsing is lenient because small policies write imperfect calls; a call that still cannot be
understood becomes a `ParsedCall` with `error` set, shown to the policy as the call's observation, never
raised. What is accepted: docs/tools.md."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any, Literal

from envs.tools.base import Tool

ToolFormat = Literal["auto", "native", "hermes", "fenced"]

_HERMES = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|\Z)", re.DOTALL)
_FENCED = re.compile(r"```[ \t]*tool[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)
_PYTHON = re.compile(r"```[ \t]*(?:python3?|py)[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)


@dataclasses.dataclass(frozen=True)
class ParsedCall:
    name: str
    arguments: dict[str, Any]
    call_id: str = ""
    error: str | None = None  # why the call could not be understood (then the runner reports it)


def last_python_block(text: str) -> str | None:
    blocks = _PYTHON.findall(text)
    return blocks[-1].strip() if blocks else None


def tool_call_blocks(text: str) -> list[str]:
    """The text of every tool call written in `text` (hermes tags and ```tool blocks), verbatim, in order."""
    found = [(m.start(), m.group(0)) for pattern in (_HERMES, _FENCED) for m in pattern.finditer(text)]
    return [block for _, block in sorted(found)]


def _loads(raw: str) -> Any:
    return json.loads(raw, strict=False)  # strict=False: raw control characters (newlines in code) allowed


def _from_payload(payload: Any, call_id: str, text: str, tools: dict[str, Tool]) -> ParsedCall:
    if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
        return ParsedCall("?", {}, call_id, 'a tool call must be a JSON object {"name": ..., "arguments": {...}}')
    name = payload["name"]
    arguments = payload.get("arguments", payload.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            arguments = _loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as e:
            return ParsedCall(name, {}, call_id, f"the arguments of {name} are not valid JSON ({e.msg})")
    if not isinstance(arguments, dict):
        return ParsedCall(name, {}, call_id, f"the arguments of {name} must be a JSON object")
    if name not in tools:
        return ParsedCall(name, arguments, call_id, f"there is no tool {name!r}; the tools are: {', '.join(tools)}")
    if "code" in tools[name].parameters.get("properties", {}) and "code" not in arguments:
        code = last_python_block(text)
        if code is not None:
            arguments = {**arguments, "code": code}
    problem = tools[name].check_arguments(arguments)
    return ParsedCall(name, arguments, call_id, problem)


def _text_calls(text: str, pattern: re.Pattern, tools: dict[str, Tool]) -> list[ParsedCall]:
    calls = []
    for raw in pattern.findall(text):
        try:
            payload = _loads(raw)
        except json.JSONDecodeError as e:
            calls.append(
                ParsedCall(
                    "?", {}, "", f"the tool call is not valid JSON ({e.msg} at line {e.lineno} column {e.colno})"
                )
            )
            continue
        calls.append(_from_payload(payload, "", text, tools))
    return calls


def _native_calls(native: list[Any], text: str, tools: dict[str, Tool]) -> list[ParsedCall]:
    calls = []
    for i, call in enumerate(native):
        function = call.get("function", {}) if isinstance(call, dict) else {}
        payload = {"name": function.get("name"), "arguments": function.get("arguments", {})}
        calls.append(
            _from_payload(payload, str(call.get("id", f"call_{i}")) if isinstance(call, dict) else "", text, tools)
        )
    return calls


def parse_tool_calls(
    text: str, tools: list[Tool], tool_format: ToolFormat = "auto", native: list[Any] | None = None
) -> list[ParsedCall]:
    """Every tool call of one turn, in order (an empty list: the turn made none)."""
    by_name = {t.name: t for t in tools}
    if tool_format == "native" or (tool_format == "auto" and native):
        return _native_calls(native or [], text, by_name)
    calls: list[ParsedCall] = []
    if tool_format in ("auto", "hermes"):
        calls += _text_calls(text, _HERMES, by_name)
    if tool_format in ("auto", "fenced"):
        calls += _text_calls(text, _FENCED, by_name)
    return calls


def tool_instructions(tools: list[Tool], tool_format: ToolFormat) -> str:
    """The system-prompt text offering the tools (for text formats; native calling sends schemas instead)."""
    schemas = "\n".join(json.dumps(t.schema()["function"]) for t in tools)
    if tool_format == "fenced":
        how = (
            "To call a tool, write a fenced block tagged `tool` holding one JSON object:\n"
            '```tool\n{"name": "<tool name>", "arguments": {<arguments>}}\n```'
        )
    else:
        how = (
            "To call a tool, write one JSON object inside <tool_call></tool_call> tags:\n"
            '<tool_call>\n{"name": "<tool name>", "arguments": {<arguments>}}\n</tool_call>'
        )
    return (
        f"You may call tools before giving your final answer. The tools, as JSON schemas:\n<tools>\n{schemas}\n"
        f"</tools>\n{how}\nFor a tool that takes `code`, you may instead leave `code` out and put the code in a "
        "```python block of the same message. Each tool's result comes back in the next message. When you are "
        "done, call `submit` with your final code, or answer with the final code in a ```python block and no "
        "tool call."
    )
