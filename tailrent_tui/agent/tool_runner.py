"""Tool calls, from the model's request to the transcript: approval, the run, rungs 1 and 2.

A call is approved here (`approved_run`: the user's word, asked through
`TurnCallbacks.approve`, unless the session already allows it or --yolo), run
through the one registry's door (`run_tool_async`: run_shell and the session
tools on the loop, the other workspace tools in a thread; escape cancels
either), and its outcome admitted through the ladder:
inline, spilled with a pointer, or — for run_shell's streamed output — a
pointer to its raw spill.
`!cmd`, `@path` and big pastes enter the same way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tailrent_tui.agent.approval import ShellOffer, offer_covers, shell_offer
from tailrent_tui.agent.budget import LadderBudget
from tailrent_tui.agent.events import ApprovalRequest, Denied, TurnCallbacks
from tailrent_tui.agent.ladder_driver import LadderDriver, admit_to_session
from tailrent_tui.agent.tools import TOOLS, ToolContext, ToolOutcome, offered_tools, preview_tool, run_tool_async
from tailrent_tui.agent.tools.base import SpillBudget, error, outcome
from tailrent_tui.agent.tools.caps import ToolCaps
from tailrent_tui.agent.tools.session import Delegate, SessionBinding, SessionView
from tailrent_tui.core.messages import Kind, Message, ToolCall
from tailrent_tui.core.ports import SpillStore
from tailrent_tui.core.rungs.spill import pointer_text
from tailrent_tui.core.session import Session
from tailrent_tui.models.base import ToolCallChunk
from tailrent_tui.settings import Settings
from tailrent_tui.store.paths import resolve_data_dir
from tailrent_tui.text import storable


def cap_to_tokens(outcome: Any, cap: int, count: Callable[[str], int]) -> Any:
    """Cut an outcome's text to about `cap` tokens, keeping whole lines, and say so."""
    tokens = count(outcome.content)
    if tokens <= cap:
        return outcome
    lines = outcome.content.splitlines()
    keep = max(1, int(len(lines) * cap / tokens))
    cut = f"[read_spill: showing lines 1-{keep} of {len(lines)} (~{cap:,} of {tokens:,} tokens); pass start/end for the rest]"
    return outcome.model_copy(update={"content": "\n".join(lines[:keep]) + "\n" + cut, "cut": cut})


class ToolRunner:
    """Approves, runs and admits tool calls; holds what the session allows without asking."""

    def __init__(
        self,
        *,
        session: Session,
        settings: Settings,
        caps: ToolCaps,
        workspace: Path,
        spill_store: SpillStore,
        ladder: LadderDriver,
        ladder_budget: LadderBudget,
        is_sub: bool = False,
    ) -> None:
        """`ladder`: where an outcome enters (its budget check after each); `ladder_budget`: the room a paste may take."""
        self.session = session
        self.settings = settings
        self.workspace = workspace
        self.spill_store = spill_store
        self.ladder = ladder
        self.ladder_budget = ladder_budget
        self.is_sub = is_sub
        self.allowed_prefixes: set[str] = set()
        #: run_shell approvals for the session (ShellOffer.prefix): a read-only program or subcommand under
        #: its flag allowlist, or one exact command line (agent/approval.py)
        self.allowed_shell_prefixes: set[tuple[str, ...]] = set()
        #: the callbacks of the turn running now: a delegate's sub-turn asks the user through them
        self.cb: TurnCallbacks | None = None
        # run_shell streams output past its in-memory cap into a raw spill file
        open_raw = getattr(spill_store, "open_raw", None)
        raw_bytes = getattr(spill_store, "raw_bytes", None)
        #: every spill of the session (raw shell output and every tool's spilled result) counts here
        self.session_budget = SpillBudget(caps.spills_session_max_bytes, used=raw_bytes() if raw_bytes else 0)
        #: and one turn's against this too (restarted by begin_turn)
        budget = self.turn_budget = SpillBudget(caps.spills_turn_max_bytes, outer=self.session_budget)
        # the file tools refuse the data dir when it lies inside the workspace
        self.ctx = ToolContext(
            root=workspace,
            caps=caps,
            spill_sink=open_raw,
            spill_budget=budget,
            data_dir=resolve_data_dir(settings.data_dir),
        )

    def begin_turn(self) -> None:
        """A new user turn: its spill budget is whole again."""
        self.turn_budget.restart()

    def within_spill_budget(self, tool: str, result: ToolOutcome, threshold: int | None = None) -> ToolOutcome:
        """A result that would spill takes its bytes from the turn's and the session's spill budget; past
        either it is cut to what is left (at least a head the model can read) and says which budget."""
        size = len(result.content.encode("utf-8", "replace"))
        # far under the spill threshold it enters inline: nothing is written (4 bytes a token at most)
        if size <= (threshold or self.settings.tools.spill_threshold) * 4:
            return result
        granted = self.turn_budget.take(size)
        if granted >= size:
            return result
        turn_short = self.turn_budget.used >= self.turn_budget.limit
        which = "this turn's spills_turn_max_bytes" if turn_short else "the session's spills_session_max_bytes"
        keep = max(granted, min(size, 2000))
        head = result.content.encode("utf-8", "replace")[:keep].decode("utf-8", "ignore")
        cut = (
            f"[{tool}: result cut at {keep:,} of {size:,} bytes: {which} is used up; "
            "ask for less (a line range, a narrower pattern)]"
        )
        return result.model_copy(update={"content": f"{head}\n{cut}", "cut": cut})

    def bind_session(self, stores: SessionView, delegate: Delegate) -> None:
        """Give the session tools (read_spill, search_history, remember, recall, delegate) this
        session's stores and its way of delegating (rung 3)."""
        self.ctx = self.ctx.model_copy(update={"session": SessionBinding(stores, delegate)})

    def offered_tools(self) -> list[dict[str, Any]]:
        return offered_tools(sub=self.is_sub)

    # -- approval ------------------------------------------------------------------

    def _needs_approval(self, name: str) -> bool:
        tool = TOOLS.get(name)
        return bool(tool and tool.spec.needs_approval) and not self.settings.yolo

    def _session_approved(self, call: ToolCall) -> bool:
        if call.name == "run_shell":
            command = str(call.arguments.get("command", ""))
            return any(offer_covers(prefix, command, self.workspace) for prefix in self.allowed_shell_prefixes)
        return call.name in self.allowed_prefixes

    def _approval_request(self, call: ToolCall, diff: str | None) -> tuple[ApprovalRequest, ShellOffer | None]:
        if call.name != "run_shell":
            allows = f"'Allow for the session' runs every later {call.name} call without asking."
            return ApprovalRequest(call.name, dict(call.arguments), call.name, diff, allows), None
        offer = shell_offer(str(call.arguments.get("command", "")), self.workspace)
        return ApprovalRequest(call.name, dict(call.arguments), offer.shown, diff, offer.allows), offer

    async def approved_run(self, call: ToolCall, cb: TurnCallbacks) -> ToolOutcome:
        """Run a call once it may run: at once, or, for a tool that needs approval, after
        the user's word (with its diff, for the writes)."""
        self.cb = cb
        if call.name not in TOOLS:
            names = ", ".join(t["name"] for t in self.offered_tools())
            return error(f"unknown tool {call.name!r}; the tools are: {names}")
        if self._needs_approval(call.name) and not self._session_approved(call):
            diff = None
            preview = await asyncio.to_thread(preview_tool, call.name, call.arguments, self.ctx)
            if preview is not None:
                if preview.is_error:
                    return preview
                diff = preview.meta.get("diff")
            request, offer = self._approval_request(call, diff)
            answer = await cb.approve(request)
            if isinstance(answer, Denied):
                return error(f"the user denied {call.name}: {answer.reason}")
            if answer == "deny":
                return error(f"the user denied {call.name}; ask them or try another way")
            if answer == "prefix" and request.command_prefix is not None:
                if offer is not None and offer.prefix is not None:
                    self.allowed_shell_prefixes.add(offer.prefix)
                elif offer is None:
                    self.allowed_prefixes.add(call.name)
        return await self.run_tool(call.name, call.arguments)

    async def run_tool(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        """Run a tool (see `run_tool_async`); cancelling it (escape) kills what it started."""
        return await run_tool_async(name, arguments, self.ctx)

    # -- into the transcript ---------------------------------------------------------

    async def run_call(self, pair: tuple[ToolCall, ToolCallChunk], cb: TurnCallbacks) -> Message:
        """One call of a reply: approved, run, and its outcome admitted through the ladder."""
        call, chunk = pair
        session, settings = self.session, self.settings
        cb.on_tool_call(call)
        if chunk.arguments_error:
            result = error(f"the arguments for {call.name} are not valid JSON ({chunk.arguments_error}); send a JSON object")
        else:
            result = await self.approved_run(call, cb)
        kind = result.meta.get("kind")
        if call.name == "read_spill" and not result.is_error:
            # Spilling what the model asked to read back would only hand it a new pointer:
            # it enters inline, capped near the spill threshold, with a cut line for ranges.
            result = cap_to_tokens(result, settings.tools.spill_threshold, session.count)
            m = session.add("tool", result.content, kind=Kind.tool_result, tool=call.name, tool_call_id=call.id, autopin=False)
        elif result.spilled_path and call.name == "run_shell":
            m = self._admit_streamed_spill(call, result)
        elif kind in (Kind.memory_pointer.value, Kind.delegate_result.value) and not result.is_error:
            m = session.add("tool", result.content, kind=Kind(kind), tool=call.name, tool_call_id=call.id, autopin=False)
        else:
            result = self.within_spill_budget(call.name, result)
            m = admit_to_session(
                session,
                call.name,
                result,
                spill_store=self.spill_store,
                threshold=settings.tools.spill_threshold,
                tool_call_id=call.id,
            )
        cb.on_tool_result(m)
        await self.ladder.after_add()
        return m

    def _admit_streamed_spill(self, call: ToolCall, result: ToolOutcome) -> Message:
        """A run_shell output streamed whole to a raw spill: only a pointer enters."""
        spill_id = result.spilled_path
        assert spill_id is not None
        total = int(result.meta.get("bytes", len(result.content)))
        not_kept = int(result.meta.get("not_kept", 0))
        kept = total - not_kept
        est = max(1, kept // 4)  # the whole output is never tokenized: chars/4 is the estimate
        pointer = pointer_text(call.name, est, spill_id, result.content[:2000]) + (
            f" [{kept:,} bytes; exit code {result.meta.get('exit_code')}; read_spill with start/end]"
        )
        if not_kept and result.cut:
            pointer += "\n" + result.cut
        session = self.session
        m = session.make_message("tool", pointer, kind=Kind.spill_pointer, tool=call.name, tool_call_id=call.id)
        m.spill_id = spill_id
        raw_path_for = getattr(self.spill_store, "raw_path_for", lambda i: i)
        m.meta = {"spill_location": str(raw_path_for(spill_id)), "spilled_tokens": est}
        return session.add_message(m, autopin=False)

    async def _admit(
        self, tool: str, result: ToolOutcome, *, threshold: int | None = None, preview_tail: bool = False
    ) -> Message:
        threshold = max(self.settings.tools.spill_threshold, threshold or 0)
        result = self.within_spill_budget(tool, result, threshold)
        m = admit_to_session(
            self.session, tool, result, spill_store=self.spill_store, threshold=threshold, preview_tail=preview_tail
        )
        await self.ladder.after_add()
        return m

    async def shell(self, command: str) -> Message:
        """`!cmd`: run a shell command in the workspace; its output enters through the ladder."""
        # the command runs as typed (its bytes reach bash); what the session keeps is storable text
        self.session.add("user", storable(f"!{command}"), autopin=False, meta={"shell": True})
        try:
            outcome = await self.run_tool("run_shell", {"command": command})
        except asyncio.CancelledError:
            # escape: the model is told it has no output, rather than a command left hanging
            self.session.add(
                "user",
                storable(f"[!{command} was cancelled before it finished; its processes were killed]"),
                autopin=False,
                meta={"shell": True},
            )
            raise
        return await self._admit("run_shell", outcome)

    async def attach_paste(self, label: str, text: str) -> Message:
        """A big paste, sent beside a message: it enters as a tool's output does, never cut. It stays
        inline while it fits the room left before the fold trigger (or is under the spill threshold);
        past that it is spilled whole, its pointer previewing its head and its tail (a traceback's
        decisive line is its last)."""
        return await self._admit(
            "paste", outcome(storable(f"{label}\n{text}")), threshold=self.ladder_budget.room(), preview_tail=True
        )

    async def attach_file(self, path: str) -> Message:
        """`@path` in a message: the file enters as read_file returns it (its line and byte caps), then rung 2."""
        return await self._admit("read_file", await self.run_tool("read_file", {"path": path}))
