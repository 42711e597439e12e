"""Tools that need the session and its stores: rungs 2, 3 and 4 seen from the model.

- `read_spill(id, start?, end?)` brings spilled content back (rung 2).
- `search_history(query)` searches the fold archive and the spills — the
  folded originals — so the model can look back instead of trusting summaries.
- `remember(key, text)` / `recall(key)`: rung 4, a memory entry stored outside
  the context with a one-line pointer left in it.
- `delegate(task)`: rung 3, a sub-session with a fresh context whose final
  answer alone (capped) enters the parent.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tailrent_tui.agent.tools.base import ToolOutcome, ToolSpec, error

if TYPE_CHECKING:
    from tailrent_tui.agent.loop import Agent

SNIPPET = 160
MAX_HITS = 20


@dataclass
class SessionTool:
    spec: ToolSpec
    run: Callable[[dict[str, Any]], Awaitable[ToolOutcome]]


def memory_keys(memory: Any) -> list[str]:
    """Keys of a memory store (the file store calls it `list`)."""
    keys = getattr(memory, "keys", None) or getattr(memory, "list")
    return list(keys())


def _lines_range(text: str, start: int | None, end: int | None) -> str:
    if start is None and end is None:
        return text
    lines = text.splitlines()
    a = max(1, int(start or 1))
    b = min(len(lines), int(end or len(lines)))
    if a > b:
        raise ValueError(f"empty range {a}-{b}: the content has {len(lines)} lines")
    return "\n".join(lines[a - 1 : b]) + f"\n[lines {a}-{b} of {len(lines)}]"


def _snippets(text: str, query: str) -> list[str]:
    out = []
    for m in re.finditer(re.escape(query), text, re.IGNORECASE):
        a = max(0, m.start() - SNIPPET // 2)
        b = min(len(text), m.end() + SNIPPET // 2)
        out.append(" ".join(text[a:b].split()))
        if len(out) >= 3:
            break
    return out


def _specs() -> list[ToolSpec]:
    return [t.spec for t in build(None).values()]  # type: ignore[arg-type]


def build(agent: Agent) -> dict[str, SessionTool]:
    """The session tools bound to one agent."""

    async def read_spill(args: dict[str, Any]) -> ToolOutcome:
        spill_id = str(args.get("id", "")).strip()
        if not spill_id:
            return error("read_spill needs an id (the id in the spill pointer)")
        matches = [k for k in agent.session.spills if k.startswith(spill_id)]
        if len(matches) > 1:
            return error(f"spill id {spill_id!r} is ambiguous: {', '.join(matches[:5])}")
        full = matches[0] if matches else spill_id
        start, end = args.get("start"), args.get("end")
        ranged = getattr(agent.spill_store, "read_spill_lines", None)
        try:
            if ranged is not None and (start is not None or end is not None):
                a = max(1, int(start or 1))
                b = int(end) if end is not None else a + 1999
                if a > b:
                    return error(f"empty range {a}-{b}")
                return ToolOutcome(content=ranged(full, a, b) + f"\n[lines {a}-{b} of spill {full}]")
            text = agent.spill_store.read_spill(full)
            body = _lines_range(text, start, end)
        except (OSError, ValueError) as exc:
            return error(f"spill {full}: {exc}")
        return ToolOutcome(content=body)

    async def search_history(args: dict[str, Any]) -> ToolOutcome:
        query = str(args.get("query", "")).strip()
        if not query:
            return error("search_history needs a query")
        hits: list[str] = []
        for fold_no, originals in agent.folded_originals():
            for m in originals:
                for snip in _snippets(m.content, query):
                    hits.append(f"fold #{fold_no} · {m.role} {m.id}: …{snip}…")
        for spill_id in list(agent.session.spills):
            try:
                text = agent.spill_store.read_spill(spill_id)
            except (OSError, ValueError):
                continue
            for snip in _snippets(text, query):
                hits.append(f'spill {spill_id} (read_spill("{spill_id}")): …{snip}…')
        if agent.memory is not None:
            for key in memory_keys(agent.memory):
                for snip in _snippets(agent.memory.recall(key), query):
                    hits.append(f'memory {key} (recall("{key}")): …{snip}…')
        if not hits:
            return ToolOutcome(content=f"no match for {query!r} in the fold archive, the spills or memory")
        shown = hits[:MAX_HITS]
        more = f"\n[showing {len(shown)} of {len(hits)} matches; narrow the query]" if len(hits) > MAX_HITS else ""
        return ToolOutcome(content="\n".join(shown) + more)

    async def remember(args: dict[str, Any]) -> ToolOutcome:
        if agent.memory is None:
            return error("this session has no memory store")
        key, text = str(args.get("key", "")), str(args.get("text", ""))
        try:
            agent.memory.remember(key, text)
        except (OSError, ValueError) as exc:
            return error(str(exc))
        tokens = agent.session.count(text)
        return ToolOutcome(content=f'[memory {key}] stored ~{tokens:,} tokens; recall("{key}") reads it back', meta={"kind": "memory_pointer"})

    async def recall(args: dict[str, Any]) -> ToolOutcome:
        if agent.memory is None:
            return error("this session has no memory store")
        key = str(args.get("key", ""))
        try:
            return ToolOutcome(content=agent.memory.recall(key))
        except (OSError, LookupError, ValueError) as exc:
            known = ", ".join(memory_keys(agent.memory)) or "none"
            return error(f"no memory entry {key!r} ({exc}); entries: {known}")

    async def delegate(args: dict[str, Any]) -> ToolOutcome:
        task = str(args.get("task", "")).strip()
        if not task:
            return error("delegate needs a task")
        return await agent.delegate(task)

    tools = {
        "read_spill": SessionTool(
            ToolSpec(
                name="read_spill",
                description="Read back spilled content by its id (from a spill pointer), whole or a line range.",
                parameters={
                    "type": "object",
                    "properties": {
                        "id": {"type": "string", "description": "spill id from the pointer"},
                        "start": {"type": "integer", "description": "first line, 1-based"},
                        "end": {"type": "integer", "description": "last line, inclusive"},
                    },
                    "required": ["id"],
                },
            ),
            read_spill,
        ),
        "search_history": SessionTool(
            ToolSpec(
                name="search_history",
                description="Search the originals of folded messages, spilled tool results and memory; returns snippets with pointers.",
                parameters={"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
            ),
            search_history,
        ),
        "remember": SessionTool(
            ToolSpec(
                name="remember",
                description="Store an artifact outside the context under a key; leaves a one-line pointer.",
                parameters={
                    "type": "object",
                    "properties": {"key": {"type": "string"}, "text": {"type": "string"}},
                    "required": ["key", "text"],
                },
            ),
            remember,
        ),
        "recall": SessionTool(
            ToolSpec(
                name="recall",
                description="Read back a memory entry stored with remember.",
                parameters={"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]},
            ),
            recall,
        ),
        "delegate": SessionTool(
            ToolSpec(
                name="delegate",
                description="Run a scoped task in a sub-session with a fresh context; only its final answer comes back.",
                parameters={"type": "object", "properties": {"task": {"type": "string"}}, "required": ["task"]},
            ),
            delegate,
        ),
    }
    return tools


SESSION_TOOL_SPECS: list[ToolSpec] = _specs()
