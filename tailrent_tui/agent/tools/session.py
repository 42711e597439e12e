"""The session tools: rungs 2, 3 and 4 seen from the model, in the one tool registry.

- `read_spill(id, start?, end?)` brings spilled content back (rung 2).
- `search_history(query)` searches what the session keeps outside the
  context (the fold archive, the spills, memory) so the model can look back
  instead of trusting summaries; an entry it cannot read is named in an error
  line and the search goes on with the rest.
- `remember(key, text)` / `recall(key)`: rung 4, a memory entry stored outside
  the context with a one-line pointer left in it.
- `delegate(task)`: rung 3, a sub-session with a fresh context whose final
  answer alone (capped) enters the parent; not offered inside a sub-session.

They are registered beside the workspace tools (`agent/tools/__init__.py`) and
run through the same door (`run_tool_async`), against `ToolContext.session`:
the agent binds its stores and its way of delegating there. Where no session
is bound (`tailrent tool`), each says so in one line.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import Field

from tailrent_tui.agent.tools.base import Integer, String, ToolArgs, ToolContext, ToolError, ToolOutcome, ToolSpec, error
from tailrent_tui.core.ports import FoldArchive, SpillStore
from tailrent_tui.core.session import Session
from tailrent_tui.store.outside import UNREADABLE, read_outside

MAX_HITS = 20
RANGE_LINES = 2000

Delegate = Callable[[str], Awaitable[ToolOutcome]]


class SessionView(Protocol):
    """What a session tool reads: the session and the stores outside its context
    (not agent/stores.py's `SessionStores`, which writes them)."""

    session: Session
    spill_store: SpillStore
    archive: FoldArchive
    memory: Any


@dataclass(frozen=True)
class SessionBinding:
    """What `ToolContext.session` holds in a session: its stores, and how it delegates (rung 3)."""

    stores: SessionView
    delegate: Delegate


def _bound(ctx: ToolContext, name: str) -> SessionBinding:
    binding = ctx.session
    if not isinstance(binding, SessionBinding):
        raise ToolError(
            f"{name} works inside a session (its spills, memory and fold archive belong to one); "
            "use it from the app or `tailrent ask`"
        )
    return binding


class ReadSpillArgs(ToolArgs):
    id: String = Field(description="spill id from the pointer")
    start: Integer | None = Field(default=None, description="first line, 1-based")
    end: Integer | None = Field(default=None, description="last line, inclusive")


class SearchHistoryArgs(ToolArgs):
    query: String


class RememberArgs(ToolArgs):
    key: String
    text: String


class RecallArgs(ToolArgs):
    key: String


class DelegateArgs(ToolArgs):
    task: String


READ_SPILL = ToolSpec.of(
    "read_spill", "Read back spilled content by its id (from a spill pointer), whole or a line range.", ReadSpillArgs
)
SEARCH_HISTORY = ToolSpec.of(
    "search_history",
    "Search the originals of folded messages, spilled tool results and memory; returns snippets with pointers.",
    SearchHistoryArgs,
)
REMEMBER = ToolSpec.of("remember", "Store an artifact outside the context under a key; leaves a one-line pointer.", RememberArgs)
RECALL = ToolSpec.of("recall", "Read back a memory entry stored with remember.", RecallArgs)
DELEGATE = ToolSpec.of(
    "delegate",
    "Run a scoped task in a sub-session with a fresh context; only its final answer comes back.",
    DelegateArgs,
    in_sub_session=False,
)


async def read_spill(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    state = _bound(ctx, "read_spill").stores
    spill_id = str(args.get("id", "")).strip()
    if not spill_id:
        return error("read_spill needs an id (the id in the spill pointer)")
    matches = [k for k in state.session.spills if k.startswith(spill_id)]
    if len(matches) > 1:
        return error(f"spill id {spill_id!r} is ambiguous: {', '.join(matches[:5])}")
    full = matches[0] if matches else spill_id
    start, end = args.get("start"), args.get("end")
    try:
        if start is None and end is None:
            return ToolOutcome(content=state.spill_store.read_spill(full))
        a = max(1, int(start or 1))
        b = int(end) if end is not None else a + RANGE_LINES - 1
        if a > b:
            return error(f"empty range {a}-{b}")
        return ToolOutcome(content=state.spill_store.read_spill_lines(full, a, b) + f"\n[lines {a}-{b} of spill {full}]")
    except UNREADABLE as exc:
        return error(str(exc))


async def search_history(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    state = _bound(ctx, "search_history").stores
    query = str(args.get("query", "")).strip()
    if not query:
        return error("search_history needs a query")
    outside = read_outside(state.session, state.archive, state.spill_store, state.memory)
    hits = outside.search(query)
    lines = [f"error: not searched: {reason}" for reason in outside.unreadable]
    if not hits:
        rest = " the rest of" if outside.unreadable else ""
        lines.append(f"no match for {query!r} in{rest} the fold archive, the spills or memory")
    lines += hits[:MAX_HITS]
    if len(hits) > MAX_HITS:
        lines.append(f"[showing {MAX_HITS} of {len(hits)} matches; narrow the query]")
    return ToolOutcome(content="\n".join(lines), is_error=bool(outside.unreadable))


async def remember(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    state = _bound(ctx, "remember").stores
    if state.memory is None:
        return error("this session has no memory store")
    key, text = str(args.get("key", "")), str(args.get("text", ""))
    try:
        state.memory.remember(key, text)
    except (OSError, ValueError) as exc:
        return error(str(exc))
    tokens = state.session.count(text)
    return ToolOutcome(
        content=f'[memory {key}] stored ~{tokens:,} tokens; recall("{key}") reads it back', meta={"kind": "memory_pointer"}
    )


async def recall(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    state = _bound(ctx, "recall").stores
    if state.memory is None:
        return error("this session has no memory store")
    key = str(args.get("key", ""))
    try:
        return ToolOutcome(content=state.memory.recall(key))
    except UNREADABLE as exc:
        return error(str(exc))


async def delegate(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    binding = _bound(ctx, "delegate")
    task = str(args.get("task", "")).strip()
    if not task:
        return error("delegate needs a task")
    return await binding.delegate(task)


#: registered after the workspace tools, in this order
TOOLS: list[tuple[ToolSpec, Callable[[dict[str, Any], ToolContext], Awaitable[ToolOutcome]]]] = [
    (READ_SPILL, read_spill),
    (SEARCH_HISTORY, search_history),
    (REMEMBER, remember),
    (RECALL, recall),
    (DELEGATE, delegate),
]
