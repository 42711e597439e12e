"""The tool registry: what the model is offered, and the one door every call goes through.

`run_tool_async` (the agent's) and `run_tool` (`tailrent tool`'s) never raise.
Invalid JSON arguments, arguments that do not fit the tool's schema, an unknown
tool, a path that leads out of the workspace and a tool that raises all come
back as a `ToolOutcome(is_error=True)` whose content tells the model what went
wrong, so a bad call costs one turn, never the session.

A tool's arguments are a `ToolArgs` model: the JSON schema the model is sent
is derived from it (`ToolSpec.of`), and `parse_args` validates a call with it,
on every path (the agent's, `tailrent tool`'s) and for the schema's token count.
Every tool is registered here: the workspace tools, then the session tools
(read_spill, search_history, remember, recall, delegate: agent/tools/session.py),
which run against the session the agent binds in `ToolContext.session`.
`offered_tools` is the list every request sends and `build` counts.

A tool's `run` is a plain function (run in a worker thread, told of a cancel
through `ToolContext.cancel`) or a coroutine function (run_shell: awaited on
the event loop, cancelled as any task is). `run_tool` runs a coroutine tool
with `asyncio.run`: one implementation on both paths.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import operator
import threading
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache, reduce
from typing import Any, cast

from pydantic import BaseModel, ValidationError, create_model

from tailrent_tui.agent.tools import (
    edit_file,
    grep,
    list_dir,
    read_file,
    run_shell,
    session,
    write_file,
)
from tailrent_tui.agent.tools.base import (
    Boolean,
    Integer,
    Number,
    String,
    ToolArgs,
    ToolCaps,
    ToolContext,
    ToolError,
    ToolOutcome,
    ToolSpec,
    error,
)
from tailrent_tui.agent.workspace import WorkspaceEscape
from tailrent_tui.text import storable, storable_value

ToolFn = Callable[[dict[str, Any], ToolContext], ToolOutcome]
AsyncToolFn = Callable[[dict[str, Any], ToolContext], Awaitable[ToolOutcome]]

__all__ = [
    "TOOLS",
    "Tool",
    "ToolArgs",
    "ToolCaps",
    "ToolContext",
    "ToolError",
    "ToolOutcome",
    "ToolSpec",
    "offered_tools",
    "parse_args",
    "preview_tool",
    "register",
    "run_tool",
    "run_tool_async",
    "tool_specs",
    "unregister",
]


@dataclass(frozen=True)
class Tool:
    """A registered tool: its spec, how to run it, and optionally how to preview it.

    `run_async` is set instead of `run` for a coroutine tool.
    """

    spec: ToolSpec
    run: ToolFn | None = None
    run_async: AsyncToolFn | None = None
    preview: ToolFn | None = None


TOOLS: dict[str, Tool] = {}


def register(spec: ToolSpec, fn: ToolFn | AsyncToolFn, *, preview: ToolFn | None = None) -> Tool:
    """Offer a tool to the model (`fn` a function or a coroutine function). A later
    registration under the same name replaces it."""
    if inspect.iscoroutinefunction(fn):
        tool = Tool(spec=spec, run_async=fn, preview=preview)
    else:
        tool = Tool(spec=spec, run=cast(ToolFn, fn), preview=preview)
    TOOLS[spec.name] = tool
    return tool


def unregister(name: str) -> None:
    """Withdraw a tool (no error if it was not registered)."""
    TOOLS.pop(name, None)


for _module in (read_file, list_dir, grep, run_shell, write_file, edit_file):
    register(_module.SPEC, _module.run, preview=getattr(_module, "preview", None))
for _spec, _run in session.TOOLS:
    register(_spec, _run)


def offered_tools(*, sub: bool = False) -> list[dict[str, Any]]:
    """What every request offers, as the wire sends it, in registration order: the agent
    sends it and `build` counts its tokens. A sub-session is not offered delegate."""
    return [tool.spec.to_wire() for tool in TOOLS.values() if not sub or tool.spec.in_sub_session]


def tool_specs(exclude: Iterable[str] = ()) -> list[ToolSpec]:
    """The specs offered to the model, in registration order, minus `exclude`."""
    skip = set(exclude)
    return [tool.spec for name, tool in TOOLS.items() if name not in skip]


_JSON_TYPES: dict[str, Any] = {
    "string": String,
    "integer": Integer,
    "number": Number,
    "boolean": Boolean,
    "array": list[Any],
    "object": dict[str, Any],
    "null": None,
}


def _annotation(schema_type: str | list[str] | None) -> Any:
    names = [schema_type] if isinstance(schema_type, str) else (schema_type or [])
    types = [_JSON_TYPES[name] for name in names if name in _JSON_TYPES]
    if not types or len(types) < len(names):
        return Any  # a type this table does not know: let the tool check it
    return reduce(operator.or_, [type(None) if t is None else t for t in types])


@lru_cache(maxsize=256)
def _arguments_model(name: str, parameters_json: str) -> type[BaseModel]:
    """For a spec registered with a hand-written schema (a test's, a plugin's): its model, built from the schema."""
    parameters = json.loads(parameters_json)
    required = set(parameters.get("required", []))
    fields: dict[str, Any] = {}
    for arg, prop in parameters.get("properties", {}).items():
        annotation = _annotation(prop.get("type"))
        if arg in required:
            fields[arg] = (annotation, ...)
        else:
            fields[arg] = (annotation | None, None)  # a JSON null counts as absent
    return create_model(f"{name}_arguments", __base__=ToolArgs, **fields)


def parse_args(spec: ToolSpec, raw_args: str | dict[str, Any] | None) -> dict[str, Any]:
    """Parse and check a call's arguments with the tool's argument model (`ToolSpec.arguments`,
    the model its schema was derived from); raise ToolError, one line, if they don't fit.

    A JSON null for an optional argument counts as absent; integral floats
    (3.0) are accepted where an integer is expected and passed on as int.
    """
    if raw_args is None or (isinstance(raw_args, str) and not raw_args.strip()):
        args: Any = {}
    elif isinstance(raw_args, str):
        try:
            args = json.loads(raw_args)
        except json.JSONDecodeError as exc:
            raise ToolError(
                f"the arguments for {spec.name} are not valid JSON ({exc.msg} at line "
                f"{exc.lineno} column {exc.colno}); send a JSON object"
            ) from exc
    else:
        args = raw_args
    if not isinstance(args, dict):
        raise ToolError(f"the arguments for {spec.name} must be a JSON object, not {type(args).__name__}")
    properties: dict[str, Any] = spec.parameters.get("properties", {})
    required = spec.parameters.get("required", [])
    expected = ", ".join(
        f"{name}{'' if name in required else '?'}: {prop.get('type', 'any')}" for name, prop in properties.items()
    )
    model = spec.arguments or _arguments_model(spec.name, json.dumps(spec.parameters, sort_keys=True))
    try:
        checked = model.model_validate(args)
    except ValidationError as exc:
        errors = exc.errors()
        extra = [e["loc"][0] for e in errors if e["type"] == "extra_forbidden"]
        if extra:
            raise ToolError(f"{spec.name} has no argument {extra[0]!r}; its arguments are ({expected})") from None
        wrong = [e for e in errors if e["type"] != "missing"]
        if wrong:
            name = str(wrong[0]["loc"][0])
            value = args[name]
            raise ToolError(
                f"argument {name!r} of {spec.name} must be {properties[name].get('type')}, "
                f"got {type(value).__name__} {json.dumps(value, default=str)[:80]}"
            ) from None
        missing = ", ".join(str(e["loc"][0]) for e in errors)
        raise ToolError(f"{spec.name} is missing required argument(s) {missing}; its arguments are ({expected})") from None
    return {name: getattr(checked, name) for name in checked.model_fields_set if getattr(checked, name) is not None}


def _unknown(name: str) -> ToolOutcome:
    return error(f"unknown tool {name!r}; the tools are: {', '.join(TOOLS)}")


def _fault(name: str, exc: Exception) -> ToolOutcome:
    if isinstance(exc, WorkspaceEscape | ToolError):
        return error(storable(str(exc)))
    # a tool's bug must cost one turn, never the session
    return error(storable(f"{name} failed: {type(exc).__name__}: {exc}"))


def _checked(name: str, result: object) -> ToolOutcome:
    if not isinstance(result, ToolOutcome):
        return error(f"{name} returned {type(result).__name__}, not a ToolOutcome")
    # bytes are data: a file name that is not UTF-8 (os.listdir's surrogate escapes) is kept as U+FFFD,
    # so the result can be journaled and shown
    clean = storable(result.content)
    meta = storable_value(result.meta)
    if clean is not result.content or meta != result.meta:
        result = result.model_copy(update={"content": clean, "meta": meta, "cut": storable(result.cut or "") or None})
    return result


def _call(name: str, raw_args: str | dict[str, Any] | None, ctx: ToolContext, preview: bool) -> ToolOutcome | None:
    tool = TOOLS.get(name)
    if tool is None:
        return _unknown(name)
    fn = tool.preview if preview else tool.run
    if fn is None:
        return None
    try:
        args = parse_args(tool.spec, raw_args)
        result = fn(args, ctx)
    except Exception as exc:
        return _fault(name, exc)
    return _checked(name, result)


async def run_tool_async(name: str, raw_args: str | dict[str, Any] | None, ctx: ToolContext) -> ToolOutcome:
    """Run one tool call from the event loop: a coroutine tool awaited on it, a plain one in
    a worker thread. Cancelling it (escape) cancels a coroutine tool, and sets `ctx.cancel`
    for a plain one, which then stops what it started. Every fault comes back as an error
    outcome, never an exception (a cancel is not a fault: it goes through)."""
    tool = TOOLS.get(name)
    if tool is None:
        return _unknown(name)
    try:
        args = parse_args(tool.spec, raw_args)
        if tool.run_async is not None:
            result = await tool.run_async(args, ctx)
        else:
            assert tool.run is not None
            cancel = threading.Event()
            try:
                result = await asyncio.to_thread(tool.run, args, ctx.model_copy(update={"cancel": cancel}))
            except asyncio.CancelledError:
                cancel.set()
                raise
    except Exception as exc:
        return _fault(name, exc)
    return _checked(name, result)


def run_tool(name: str, raw_args: str | dict[str, Any] | None, ctx: ToolContext) -> ToolOutcome:
    """Run one tool call where no event loop runs (`tailrent tool`, a worker thread): a
    coroutine tool through `asyncio.run(run_tool_async(...))`. Every fault comes back as an
    error outcome, never an exception."""
    tool = TOOLS.get(name)
    if tool is not None and tool.run_async is not None:
        done: list[ToolOutcome] = []

        async def call() -> None:
            # The outcome is not the task's result: asyncio.run reprs its task when it puts
            # back the SIGINT handler, and the repr of a 10 MB outcome costs half a second.
            done.append(await run_tool_async(name, raw_args, ctx))

        asyncio.run(call())
        return done[0]
    result = _call(name, raw_args, ctx, preview=False)
    assert result is not None
    return result


def preview_tool(name: str, raw_args: str | dict[str, Any] | None, ctx: ToolContext) -> ToolOutcome | None:
    """What a write would do (edit_file, write_file: meta["diff"]) without doing it.

    None when the tool has no preview; an error outcome when the call would fail.
    """
    return _call(name, raw_args, ctx, preview=True)
