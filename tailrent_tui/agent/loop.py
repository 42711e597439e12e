"""One turn of the agent loop, and the Agent the app and `tailrent ask` share.

A turn: the user's text enters the session; the model is asked for a reply
(streamed to the caller); the server's usage is recorded against the rent
model's prediction; tool calls run, each result passing rung 1 (the tool's
cap) and rung 2 (spill) before it enters; the policy checks the budget after
every message and folds when it must. Every change is a core event.

Faults never cost the user's message: it is in the session (and the journal)
before the model is called, and a failed request leaves a note and a retry.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tailrent_tui.agent import session_tools
from tailrent_tui.agent.approval import ShellOffer, prefix_covers, shell_offer
from tailrent_tui.agent.instructions import InstructionsWatcher
from tailrent_tui.agent.ladder import admit_to_session
from tailrent_tui.agent.tools import (
    TOOLS,
    ToolContext,
    ToolError,
    ToolOutcome,
    parse_args,
    preview_tool,
    run_tool,
    tool_specs,
)
from tailrent_tui.agent.tools.base import SpillBudget
from tailrent_tui.core.keepwarm import KeepWarm
from tailrent_tui.core.messages import (
    Event,
    Folded,
    FoldRecord,
    FoldSkipped,
    Kind,
    Message,
    ToolCall,
    Unfolded,
    UsageRecorded,
)
from tailrent_tui.core.policies import (
    Plan,
    Policy,
    PolicyContext,
    PolicySettings,
    get_policy,
)
from tailrent_tui.core.probe import ProbeReport, probe
from tailrent_tui.core.rent import aside_rent, context_items, prompt_rate
from tailrent_tui.core.rungs.fold import FoldArchive, MemoryFoldArchive, unfold
from tailrent_tui.core.rungs.spill import MemorySpillStore, SpillStore, spill_message
from tailrent_tui.core.session import Session
from tailrent_tui.core.summarize import LossySummarizer, Review, Summarize, Summarizer, Summary, Verdict
from tailrent_tui.models.base import (
    ChatModel,
    Preloadable,
    TextDelta,
    ThinkingDelta,
    ToolCallChunk,
    Usage,
)
from tailrent_tui.models.embedded import EmbeddedModel
from tailrent_tui.models.errors import ContextOverflow, ModelError, ToolsUnsupported
from tailrent_tui.models.mock import ModelSummarizer
from tailrent_tui.settings import Settings
from tailrent_tui.store.outside import read_outside
from tailrent_tui.store.paths import resolve_data_dir

Approval = Literal["once", "prefix", "deny"]
MAX_STEPS = 24
#: after the server refuses a request as too large, the ladder budgets with this much less of the window
OVERFLOW_SHRINK = 0.85


@dataclass
class ApprovalRequest:
    """A tool call that needs the user's word before it runs."""

    tool: str
    arguments: dict[str, Any]
    command_prefix: str | None = None
    """what "allow for the session" would cover; None when only "allow once" is offered"""
    diff: str | None = None
    allows: str | None = None
    """one line for the dialog: exactly what a session approval allows, or why none is offered"""


def _noop(*_: Any) -> None:
    return None


async def _deny(_: ApprovalRequest) -> Approval:
    return "deny"


class RequestStarted(BaseModel):
    """A request to the model is on its way: what the server reads before its first token.

    On a CPU the reading takes most of a long turn (52 s for 6,610 tokens on
    2 cores), so the screen says what is being read and how long it should take.
    """

    model_config = ConfigDict(frozen=True)
    context_tokens: int = Field(description="the whole context, as counted here")
    to_read: int | None = Field(
        default=None, description="tokens the server evaluates: the tail past its cached prefix (None without a rent model)"
    )
    read_seconds: float | None = Field(
        default=None, description="`to_read` at the prompt rate the server measured on earlier requests (None before any)"
    )


class SummaryStarted(BaseModel):
    """A fold asked for its span's summary: a model may take minutes to write it."""

    model_config = ConfigDict(frozen=True)
    messages: int = Field(description="messages in the span being folded")
    tokens: int = Field(description="tokens of that span")
    by: str = Field(description="the summarizer asked")


class SummaryEnded(BaseModel):
    """The summary that SummaryStarted announced is in, failed, or was cancelled (no fold is applied then)."""

    model_config = ConfigDict(frozen=True)
    outcome: Literal["written", "failed", "cancelled"]
    error: str | None = None


SummaryProgress = SummaryStarted | SummaryEnded


@dataclass
class TurnCallbacks:
    on_text: Callable[[str], None] = _noop
    on_thinking: Callable[[str], None] = _noop
    on_tool_call: Callable[[ToolCall], None] = _noop
    on_tool_result: Callable[[Message], None] = _noop
    on_notice: Callable[[str, str], None] = _noop
    on_reply_start: Callable[[RequestStarted], None] = _noop
    approve: Callable[[ApprovalRequest], Awaitable[Approval]] = _deny


@dataclass
class TurnResult:
    reply: Message | None = None
    cancelled: bool = False
    error: ModelError | None = None
    usage: list[Usage] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)


def cap_to_tokens(outcome: Any, cap: int, count: Callable[[str], int]) -> Any:
    """Cut an outcome's text to about `cap` tokens, keeping whole lines, and say so."""
    tokens = count(outcome.content)
    if tokens <= cap:
        return outcome
    lines = outcome.content.splitlines()
    keep = max(1, int(len(lines) * cap / tokens))
    cut = (
        f"[read_spill: showing lines 1-{keep} of {len(lines)} (~{cap:,} of {tokens:,} tokens); "
        "pass start/end for the rest]"
    )
    return outcome.model_copy(update={"content": "\n".join(lines[:keep]) + "\n" + cut, "cut": cut})


def wire_messages(session: Session) -> list[dict[str, Any]]:
    """The context as neutral wire messages: system prompt, then the transcript.

    Fold summaries and pointers travel as user-side context notes, because
    several chat templates refuse a system message after the first. A tool
    result whose call was folded away travels the same way, so the request
    never holds an orphan tool message.
    """
    out: list[dict[str, Any]] = []
    if session.system:
        out.append({"role": "system", "content": session.system})
    open_calls: set[str] = set()
    for m in session.messages:
        if m.cut_off:
            continue
        if m.role == "assistant":
            entry: dict[str, Any] = {"role": "assistant", "content": m.content}
            if m.tool_calls:
                entry["tool_calls"] = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in m.tool_calls]
                open_calls = {c.id for c in m.tool_calls}
            out.append(entry)
        elif m.role == "tool" and m.tool_call_id and m.tool_call_id in open_calls:
            out.append({"role": "tool", "content": m.content, "tool_name": m.tool or "", "tool_call_id": m.tool_call_id})
        elif m.role == "tool":
            out.append({"role": "user", "content": f"[tool result: {m.tool or 'tool'}]\n{m.content}"})
        elif m.role == "system":
            out.append({"role": "user", "content": f"[context note]\n{m.content}"})
        else:
            out.append({"role": "user", "content": m.content})
    return out


class Agent:
    """The session, the model, the stores and the policy, behind one set of actions."""

    def __init__(
        self,
        *,
        session: Session,
        model: ChatModel,
        settings: Settings,
        workspace: Path,
        spill_store: SpillStore | None = None,
        archive: FoldArchive | None = None,
        memory: Any = None,
        journal: Any = None,
        session_dir: Any = None,
        summarizer: Summarizer | None = None,
        notice: str | None = None,
        rent: Any = None,
        is_sub: bool = False,
        policy_settings: PolicySettings | None = None,
        instructions: bool = False,
    ) -> None:
        self.session = session
        self.model = model
        self.settings = settings
        self.workspace = workspace
        self.spill_store: SpillStore = spill_store or MemorySpillStore()
        self.archive = archive
        self.memory = memory
        self.journal = journal
        self.session_dir = session_dir
        self.summarizer: Summarizer | ModelSummarizer = summarizer or LossySummarizer()
        # the bench fixes every policy setting; the app derives them from its settings
        self._policy_settings = policy_settings
        self.notice = notice
        self.rent = rent
        #: the keep-warm rule on this rent model; the app's timer asks it when to `ping`
        self.keep_warm: KeepWarm | None = KeepWarm(rent) if rent is not None else None
        #: the last conversation request as sent (messages, tools): a ping re-sends exactly this prefix
        self._last_sent: tuple[list[dict[str, Any]], list[dict[str, Any]] | None] | None = None
        self.is_sub = is_sub
        self.sub_tokens = 0
        self.sub_sessions: list[str] = []
        self.allowed_prefixes: set[str] = set()
        #: run_shell prefixes approved for the session; each covers one simple command (agent/approval.py)
        self.allowed_shell_prefixes: set[tuple[str, ...]] = set()
        self.request_no = len(session.usage)
        open_raw = getattr(self.spill_store, "open_raw", None)
        # run_shell streams output past its in-memory cap into a raw spill file
        # the file tools refuse the data dir when it lies inside the workspace
        raw_bytes = getattr(self.spill_store, "raw_bytes", None)
        budget = SpillBudget(settings.caps.spills_session_max_bytes, used=raw_bytes() if raw_bytes else 0)
        self.tool_ctx = ToolContext(
            root=workspace, caps=settings.caps, spill_sink=open_raw, spill_budget=budget, data_dir=resolve_data_dir(settings.data_dir)
        )
        self.extra_tools = session_tools.build(self)
        self._cb: TurnCallbacks | None = None
        # told when a fold's summary is asked for and when it is in: folds run inside
        # a turn and by hand, so this belongs to the agent, not to one turn's callbacks
        self.on_summary: Callable[[SummaryProgress], None] | None = None
        # shows a fold before it applies (the app's fold preview); unset: folds apply as planned
        self.on_review: Callable[[Review], Awaitable[Verdict]] | None = None
        self.cold_resume = False
        #: set by build_agent for a session that had requests before: the first start restores its slot and prices the resume
        self.resumed = False
        self.resume_price: Any = None
        self.resume_lines: list[tuple[str, str]] = []
        #: what the first start found out about the server (its KV slots), to say once
        self.start_lines: list[tuple[str, str]] = []
        #: saves and restores llama.cpp's KV slot (agent/slots.py); None for a sub-session
        self.slots: Any = None
        self._policy: Policy | None = None
        self._window_scale = 1.0
        session.pin_share = settings.pin_share
        if self.archive is None:
            self.archive = MemoryFoldArchive()
        self._started = False
        #: how long the model took to load before the first request (`preload`), when it was loaded
        self.preload_seconds: float | None = None
        # AGENTS.md / TAILRENT.md, pinned at the head (the app, ask and the demo; not the bench, not a delegate)
        self._instructions = InstructionsWatcher(workspace) if instructions and not is_sub else None
        if self._instructions is not None:
            self._instructions.refresh(session)

    def refresh_instructions(self) -> list[str]:
        """Read the project instruction files again if they changed on disk; the names that changed."""
        changed = self._instructions.refresh(self.session) if self._instructions is not None else []
        for name in changed:
            self.session.note(f"{name} changed on disk: the project instructions were read again", "info")
        return changed

    def will_preload(self) -> bool:
        """Whether `start` loads the model first: the embedded engine always (it must start), an
        Ollama model when the session is resumed (its first request would wait for the load, unseen)."""
        return isinstance(self.model, Preloadable) and (isinstance(self.model, EmbeddedModel) or bool(self.session.usage))

    async def preload(self) -> float | None:
        """Load the model now (see `will_preload`): the seconds it took, None when nothing was loaded
        or the load failed (noted; the first request tries again and reports the fault)."""
        model = self.model
        if not self.will_preload() or not isinstance(model, Preloadable):
            return None
        try:
            # the window the turns send: a different num_ctx would make Ollama load the model again
            seconds = await model.preload(num_ctx=self.session.window)
        except ModelError as exc:
            self.session.note(f"could not load {model.name or 'the model'} before the first request: {exc.message} ({exc.hint})", "warning")
            return None
        self.preload_seconds = seconds
        return seconds

    async def start(self) -> None:
        """Ask the server for its name and window, once per model; the `window` setting wins when given.

        The app calls this after its first frame, and a turn before its first
        request: a second caller waits for the first. The window learned is kept
        in the session's meta.json, so a resume starts with it.
        """

        async def learn() -> None:
            # first: the embedded engine must listen before anything asks it, and a resumed Ollama model loads
            await self.preload()
            await learn_window()
            from tailrent_tui.agent.slots import on_resume, on_start

            # the slot is probed before any request, so every request is pinned to it
            await on_start(self)
            if self.resumed and not self.resume_lines:
                self.resume_lines = await on_resume(self)

        async def learn_window() -> None:
            resolve = getattr(self.model, "resolve_name", None)
            if resolve is not None and not self.model.name:
                try:
                    await resolve()
                except ModelError:
                    pass  # the turn's own request reports the fault with its hint
            if self.settings.window is not None:
                return
            try:
                window = await self.model.context_window()
            except ModelError as exc:
                self.session.note(f"could not read the model's window ({exc.message}); budgeting {self.session.window:,}", "warning")
                return
            if not window or window == self.session.window:
                return
            self.session.window = window
            if self.session_dir is not None:
                try:
                    await asyncio.to_thread(self.session_dir.update_meta, window=window)
                except (OSError, LookupError) as exc:
                    self.session.note(f"the window ({window:,}) could not be kept for the next resume: {exc}", "warning")

        learning = getattr(self, "_learning", None)
        # a cancelled caller cancels the shared task with it, and a failed one says
        # nothing about the next try: either way the next caller asks again
        failed = learning is not None and learning.done() and (learning.cancelled() or learning.exception())
        if not self._started or learning is None or failed:
            self._started = True
            learning = self._learning = asyncio.ensure_future(learn())
        await learning

    # -- the archive, seen from the agent --------------------------------------

    def reread_after(self, record: FoldRecord) -> tuple[int, float | None]:
        """What applying this fold costs the next request: the tokens from the summary's
        place on (the cache before it survives), and their seconds at the measured rate."""
        span = set(record.span_ids)
        first = next((i for i, m in enumerate(self.session.messages) if m.id in span), len(self.session.messages))
        after = self.session.messages[first:]
        tokens = self.session.sent_tokens(record.summary) + sum(
            self.session.sent_tokens(m) for m in after if m.id not in span and not m.cut_off
        )
        if record.position == 0:
            tokens = record.context_after - self.session.head_tokens
        rate = prompt_rate(self.session.usage, self.rent.sheet) if self.rent is not None else None
        return tokens, (rate.seconds(tokens) if rate is not None and rate.measured else None)

    def unfold(self, fold_no: int) -> Unfolded:
        """Undo fold `fold_no` (`/unfold N`, `u` in the inspector): its originals, read from
        the archive, back in its summary's place if they fit under the fold trigger.
        SessionError says why not; ArchiveError when its archive entry is damaged."""
        return unfold(self.session, fold_no, self.fold_originals(fold_no), limit=self.policy_context().settings.trigger_tokens)

    def fold_originals(self, fold_no: int) -> list[Message]:
        """The messages fold `fold_no` removed from the context; ArchiveError when its archive entry is damaged."""
        return self.archive.read_originals(fold_no)

    def recall(self, question: str, expect: list[str]) -> tuple[ProbeReport, list[str]]:
        """A probe: where each expected word lives now, and what survives only outside;
        with one line for each entry outside that could not be read."""
        outside = read_outside(self.session, self.archive, self.spill_store, self.memory)
        return probe(self.session, question, expect, outside=outside.by_label()), outside.unreadable

    async def switch_model(self, spec: str) -> str:
        """Switch to the model a spec names; the session and its context stay as they are."""
        from tailrent_tui.agent.build import BuildError, pick_model

        settings = self.settings.model_copy(update={"model": spec})
        try:
            model, _ = pick_model(settings)
        except BuildError as exc:
            raise ValueError(str(exc)) from None
        if self.slots is not None:
            # the old server's slot, while it still holds this session: a switch back can restore it
            saved = await self.slots.save("before the model switch")
            if saved is not None and saved.line:
                self.session.note(saved.line, saved.level)
        old, self.model = self.model, model
        self.settings = settings
        self._started = False
        if self.slots is not None:
            self.slots.model_changed()
        await old.aclose()
        if self.rent is not None:
            self.rent.expire()  # a different server holds none of this context
        from tailrent_tui.models.text import redact

        shown = model.name or redact(spec)  # a URL's credentials stay out of the journal
        self.session.note(f"model switched to {shown}", "info")
        return shown

    def export(self, fmt: str = "md", path: Path | None = None) -> Path:
        """Write the transcript as the user saw it (md or json); returns the file's absolute path.

        By default into the session's own directory (never the user's repository);
        a relative `path` is taken from the workspace, and a path into the data dir
        is refused (it could overwrite a session).
        """
        from tailrent_tui.store.export import export_session, write_export

        if self.session_dir is None:
            raise ValueError("this session is not saved, so it cannot be exported")
        if fmt not in ("md", "json"):
            raise ValueError(f"unknown export format {fmt!r}: md or json")
        if path is None:
            out = Path(self.session_dir.path) / f"export.{fmt}"
        else:
            out = (self.workspace / Path(path).expanduser()).resolve()
            data_dir = resolve_data_dir(self.settings.data_dir).resolve()
            if out == data_dir or data_dir in out.parents:
                raise ValueError(f"{out} is inside the data dir {data_dir}, where it could overwrite a session; give another path")
            out.parent.mkdir(parents=True, exist_ok=True)
        return write_export(export_session(self.session_dir, fmt), out).resolve()

    def spill_text(self, spill_id: str) -> str:
        """A spill's content, or a clear message when its file is missing or altered."""
        try:
            return self.spill_store.read_spill(spill_id)
        except (OSError, ValueError) as exc:
            return f"[spill {spill_id} cannot be shown: {exc}]"

    # -- rung 3 ------------------------------------------------------------------

    async def delegate(self, task: str):
        """Run `task` in a sub-session with a fresh context; only its capped answer returns."""
        from tailrent_tui.agent.tools.base import ToolOutcome, error
        from tailrent_tui.core.messages import new_id

        if self.is_sub:
            return error("a sub-session cannot delegate further")
        sub_id = "sub-" + new_id()
        sub_session = Session(
            counter=self.session.counter,
            system="You are a sub-agent with a fresh context. Do the task with the tools and end with a short final answer.",
            window=self.session.window,
            tool_schema_tokens=self.session.tool_schema_tokens,
            framing=self.session.framing,
            id=sub_id,
        )
        sub = Agent(
            session=sub_session,
            model=self.model,
            settings=self.settings,
            workspace=self.workspace,
            spill_store=self.spill_store,
            memory=self.memory,
            summarizer=self.summarizer,
            rent=None,
            is_sub=True,
        )
        parent_cb = self._cb or TurnCallbacks()
        sub_cb = TurnCallbacks(approve=parent_cb.approve, on_notice=parent_cb.on_notice)

        def journal_sub_usage(event: Any) -> None:
            # the sub-session's requests are journaled in the parent, tagged, so
            # its tokens survive a resume and the Tail panel can count them apart
            if isinstance(event, UsageRecorded):
                self.session.emit(event.model_copy(update={"sub_session": sub_id}))

        sub_session.listeners.append(journal_sub_usage)
        result = await sub.turn(task, sub_cb)
        sub_tokens = sum(u.context_tokens + (u.output_tokens or 0) for u in sub_session.usage)
        self.sub_tokens += sub_tokens
        self.sub_sessions.append(sub_id)
        self._archive_sub(sub_id, sub_session)
        if result.error is not None:
            return error(f"the delegate failed: {result.error.message}")
        answer = result.reply.content if result.reply is not None else ""
        cap = self.settings.delegate_answer_cap
        tokens = self.session.count(answer)
        if tokens > cap:
            # characters per token of this answer, to cut near the cap
            keep = max(1, int(len(answer) * cap / tokens))
            answer = answer[:keep] + f"\n[delegate answer capped at ~{cap:,} tokens of {tokens:,}]"
        body = f"[delegate {sub_id}: {len(sub_session.messages)} messages, {sub_tokens:,} tokens in its own context]\n{answer}"
        return ToolOutcome(content=body, meta={"kind": Kind.delegate_result.value, "sub_session": sub_id})

    def _title_from(self, text: str) -> None:
        """A session with no title is named after its first message, as `tailrent sessions` shows it."""
        sd = self.session_dir
        if sd is None or self.is_sub or getattr(self, "_titled", False):
            return
        self._titled = True
        try:
            if not sd.read_meta().title:
                line = " ".join(text.strip().split())
                sd.update_meta(title=line[:60] + ("…" if len(line) > 60 else ""))
        except (OSError, LookupError, ValueError) as exc:
            self.session.note(f"could not name the session: {exc}", "warning")

    def _archive_sub(self, sub_id: str, sub_session: Session) -> None:
        """Keep the sub-session's whole transcript in the session directory (subs/<id>.json)."""
        import json

        from tailrent_tui.store.paths import ensure_private_dir, write_file_atomic

        root = getattr(self.session_dir, "path", None)
        if root is None:
            return
        record = {
            "id": sub_id,
            "system": sub_session.system,
            "messages": [m.model_dump(mode="json") for m in sub_session.messages],
            "usage": [u.model_dump(mode="json") for u in sub_session.usage],
        }
        try:
            ensure_private_dir(Path(root) / "subs")
            write_file_atomic(Path(root) / "subs" / f"{sub_id}.json", json.dumps(record, ensure_ascii=False).encode("utf-8"))
        except OSError as exc:
            self.session.note(f"could not archive {sub_id}: {exc}", "error")

    # -- what the model is offered ------------------------------------------

    def offered_tools(self) -> list[dict[str, Any]]:
        exclude = {"delegate"} if self.is_sub else set()
        specs = [s for s in tool_specs() if s.name not in exclude]
        specs += [t.spec for name, t in self.extra_tools.items() if name not in exclude]
        return [{"name": s.name, "description": s.description, "parameters": s.parameters} for s in specs]

    def request_options(self) -> dict[str, Any]:
        return {"num_ctx": self.session.window, "temperature": 0, "max_tokens": self.reply_cap()}

    # -- the turn -------------------------------------------------------------

    async def turn(self, text: str | None, cb: TurnCallbacks | None = None) -> TurnResult:
        """One user turn. `text=None` retries from the transcript as it is."""
        cb = cb or TurnCallbacks()
        result = TurnResult()
        await self.start()
        if text is not None:
            if not text.strip():
                raise ValueError("empty message: type something, or /help")
            await self.add_message("user", text)
            self._title_from(text)
        tools = self.offered_tools()
        for _step in range(MAX_STEPS):
            try:
                await self.before_request(cb)
                self._check_fits()
                reply, calls, usage = await self._request(tools, cb, result)
            except ToolsUnsupported as exc:
                tools = []
                msg = f"{exc.message}: retrying without tools"
                result.notices.append(msg)
                cb.on_notice(msg, "warning")
                self.session.note(msg, "warning")
                continue
            except ModelError as exc:
                result.error = exc
                self.session.note(f"model error: {exc.message}" + (f" ({exc.hint})" if exc.hint else ""), "error")
                return result
            except asyncio.CancelledError:
                result.cancelled = True
                raise
            result.reply = reply
            if usage is not None and usage.truncated:
                msg = "the reply was cut: done_reason=length (the token limit or the window was reached)"
                result.notices.append(msg)
                cb.on_notice(msg, "warning")
                self.session.note(msg, "warning")
            if not calls:
                return result
            for call in calls:
                await self._run_call(call, cb)
        msg = f"stopped after {MAX_STEPS} model requests in one turn"
        result.notices.append(msg)
        cb.on_notice(msg, "warning")
        return result

    async def _request(self, tools: list[dict[str, Any]], cb: TurnCallbacks, result: TurnResult):
        wire = wire_messages(self.session)
        predicted = self._predict()
        parts: list[str] = []
        calls: list[ToolCallChunk] = []
        usage: Usage | None = None
        cb.on_reply_start(self._request_started(predicted))
        self._last_sent = (wire, tools or None)
        stream = self.model.stream(wire, tools=tools or None, options=self.request_options())
        try:
            async for chunk in stream:
                if isinstance(chunk, TextDelta):
                    parts.append(chunk.text)
                    cb.on_text(chunk.text)
                elif isinstance(chunk, ThinkingDelta):
                    cb.on_thinking(chunk.text)
                elif isinstance(chunk, ToolCallChunk):
                    calls.append(chunk)
                elif isinstance(chunk, Usage):
                    usage = chunk
        except asyncio.CancelledError:
            partial = "".join(parts)
            if partial:
                self.session.add("assistant", partial, autopin=False, meta={"cancelled": True})
            self.session.note("reply cancelled" + (" (partial reply kept)" if partial else ""), "warning")
            with contextlib.suppress(Exception):
                await stream.aclose()  # type: ignore[attr-defined]
            raise
        except ModelError as exc:
            if isinstance(exc, ContextOverflow):
                # the server counted more than we did: budget with a smaller window from now on
                self._window_scale *= OVERFLOW_SHRINK
            partial = "".join(parts)
            if partial:
                self.session.add("assistant", partial, autopin=False, meta={"incomplete": True})
            raise
        if usage is not None:
            result.usage.append(usage)
            if usage.tools_dropped:
                msg = f"{self.model.name} does not support tools: the reply was made without them"
                result.notices.append(msg)
                cb.on_notice(msg, "warning")
        tool_calls = [ToolCall(id=c.id or f"call_{i}", name=c.name, arguments=c.arguments) for i, c in enumerate(calls)]
        reply = self.session.add("assistant", "".join(parts), tool_calls=tool_calls, meta=self._call_errors(calls))
        self._record_usage(predicted, usage)
        if usage is not None and tools and not usage.tools_dropped:
            self._check_schema_sent(usage, cb)
        await self.after_add()
        return reply, list(zip(tool_calls, calls)), usage

    def _request_started(self, predicted: Any) -> RequestStarted:
        to_read = predicted.tail_tokens if predicted is not None else None
        rate = prompt_rate(self.session.usage, self.rent.sheet) if self.rent is not None else None
        # the sheet's guess of a speed is no measure of this machine: no estimate from it
        measured = rate is not None and rate.measured and to_read is not None
        return RequestStarted(
            context_tokens=self.session.context_tokens,
            to_read=to_read,
            read_seconds=rate.seconds(to_read) if measured else None,
        )

    def _check_schema_sent(self, usage: Usage, cb: TurnCallbacks) -> None:
        """A server whose whole prompt is smaller than the tool schema we sent ignored the tools.

        llama.cpp's server does that unless it runs with --jinja. The model then
        cannot call tools, and the rent prediction must stop counting the schema.
        """
        schema = self.session.tool_schema_tokens
        # half the schema: the server counts with its own tokenizer, which can differ
        # from ours by tens of percent, never by half
        if not schema or usage.prompt_tokens is None or usage.prompt_tokens >= schema // 2:
            return
        msg = (
            f"{self.model.name or 'the server'} reported a {usage.prompt_tokens:,}-token prompt, smaller than the "
            f"{schema:,}-token tool schema sent with it: it ignores tools (llama.cpp's server needs --jinja), "
            "so the model cannot call them. Rent predictions leave the schema out from now on."
        )
        self.session.tool_schema_tokens = 0
        if self.rent is not None:
            self.rent.rebase_head(self.session.head_tokens)
        writer = getattr(self.session_dir, "update_meta", None)
        if writer is not None:
            try:
                writer(tool_schema_tokens=0)
            except OSError:
                pass
        self.session.note(msg, "warning")
        cb.on_notice(msg, "warning")

    @staticmethod
    def _call_errors(calls: list[ToolCallChunk]) -> dict[str, Any]:
        errs = {c.id: c.arguments_error for c in calls if c.arguments_error}
        return {"argument_errors": errs} if errs else {}

    # -- rent ----------------------------------------------------------------

    def _predict(self) -> Any:
        if self.rent is None:
            return None
        return self.rent.request(context_items(self.session), head_tokens=self.session.head_tokens, at=self.session.clock())

    async def ping(self, now: float | None = None) -> bool:
        """Send a keep-warm ping if the rule says one is due: the last request's exact
        messages and tools (the cached prefix) with max_tokens=1, recorded as a usage
        of purpose "ping". True if one was sent; a failed ping is noted, not raised."""
        now = self.session.clock() if now is None else now
        if self.keep_warm is None or self._last_sent is None or not self.keep_warm.due(now):
            return False
        wire, tools = self._last_sent
        usage: Usage | None = None
        try:
            async for chunk in self.model.stream(
                wire, tools=tools, options={**self.request_options(), "max_tokens": 1, "num_predict": 1}
            ):
                if isinstance(chunk, Usage):
                    usage = chunk
        except ModelError as exc:
            self.session.note(f"keep-warm ping failed ({exc.message}): the cache may expire", "warning")
            return False
        predicted = self.keep_warm.ping(now)
        self._record_usage(predicted, usage, "ping", at=now)
        return True

    def _record_usage(
        self, predicted: Any, usage: Usage | None, purpose: Literal["turn", "summary", "ping"] = "turn", at: float | None = None,
    ) -> None:
        self.request_no += 1
        ev = UsageRecorded(
            request_no=self.request_no,
            context_tokens=getattr(predicted, "context_tokens", None) or self.session.context_tokens,
            predicted_cached=getattr(predicted, "cached_tokens", 0) or 0,
            predicted_evaluated=getattr(predicted, "tail_tokens", 0) or 0,
            predicted_usd=getattr(predicted, "usd", 0.0) or 0.0,
            prompt_tokens=usage.prompt_tokens if usage else None,
            cached_tokens=usage.cached_tokens if usage else None,
            evaluated_tokens=usage.evaluated_tokens if usage else None,
            output_tokens=usage.output_tokens if usage else None,
            prompt_ms=usage.prompt_ms if usage else None,
            generation_ms=usage.generation_ms if usage else None,
            done_reason=usage.done_reason if usage else None,
            model=(usage.model if usage and usage.model else self.model.name),
            purpose=purpose,
            at=self.session.clock() if at is None else at,
        )
        self.session.emit(ev)

    # -- tools ----------------------------------------------------------------

    async def _run_call(self, pair: tuple[ToolCall, ToolCallChunk], cb: TurnCallbacks) -> Message:
        call, chunk = pair
        cb.on_tool_call(call)
        if chunk.arguments_error:
            from tailrent_tui.agent.tools.base import error

            outcome = error(f"the arguments for {call.name} are not valid JSON ({chunk.arguments_error}); send a JSON object")
        else:
            outcome = await self._approved_run(call, cb)
        kind = outcome.meta.get("kind")
        if call.name == "read_spill" and not outcome.is_error:
            # Spilling what the model asked to read back would only hand it a new pointer:
            # it enters inline, capped near the spill threshold, with a cut line for ranges.
            outcome = cap_to_tokens(outcome, self.settings.spill_threshold, self.session.count)
            m = self.session.add("tool", outcome.content, kind=Kind.tool_result, tool=call.name, tool_call_id=call.id, autopin=False)
            cb.on_tool_result(m)
            await self.after_add()
            return m
        if outcome.spilled_path and call.name == "run_shell":
            m = self._admit_streamed_spill(call, outcome)
        elif kind in (Kind.memory_pointer.value, Kind.delegate_result.value) and not outcome.is_error:
            m = self.session.add(
                "tool", outcome.content, kind=Kind(kind), tool=call.name, tool_call_id=call.id, autopin=False
            )
        else:
            m = admit_to_session(
                self.session,
                call.name,
                outcome,
                spill_store=self.spill_store,
                threshold=self.settings.spill_threshold,
                tool_call_id=call.id,
            )
        cb.on_tool_result(m)
        await self.after_add()
        return m

    def _admit_streamed_spill(self, call: ToolCall, outcome: Any) -> Message:
        """A run_shell output streamed whole to a raw spill: only a pointer enters."""
        from tailrent_tui.core.rungs.spill import pointer_text

        spill_id = outcome.spilled_path
        total = int(outcome.meta.get("bytes", len(outcome.content)))
        not_kept = int(outcome.meta.get("not_kept", 0))
        kept = total - not_kept
        est = max(1, kept // 4)  # the whole output is never tokenized: chars/4 is the estimate
        pointer = pointer_text(call.name, est, spill_id, outcome.content[:2000]) + (
            f" [{kept:,} bytes; exit code {outcome.meta.get('exit_code')}; read_spill with start/end]"
        )
        if not_kept and outcome.cut:
            pointer += "\n" + outcome.cut
        m = self.session.make_message("tool", pointer, kind=Kind.spill_pointer, tool=call.name, tool_call_id=call.id)
        m.spill_id = spill_id
        m.meta = {"spill_location": str(getattr(self.spill_store, "raw_path_for", lambda i: i)(spill_id)), "spilled_tokens": est}
        return self.session.add_message(m, autopin=False)

    def _needs_approval(self, name: str) -> bool:
        tool = TOOLS.get(name)
        return bool(tool and tool.spec.needs_approval) and not self.settings.yolo

    def _session_approved(self, call: ToolCall) -> bool:
        if call.name == "run_shell":
            command = str(call.arguments.get("command", ""))
            return any(prefix_covers(prefix, command) for prefix in self.allowed_shell_prefixes)
        return call.name in self.allowed_prefixes

    def _approval_request(self, call: ToolCall, diff: str | None) -> tuple[ApprovalRequest, ShellOffer | None]:
        if call.name != "run_shell":
            allows = f"'Allow for the session' runs every later {call.name} call without asking."
            return ApprovalRequest(call.name, dict(call.arguments), call.name, diff, allows), None
        offer = shell_offer(str(call.arguments.get("command", "")))
        return ApprovalRequest(call.name, dict(call.arguments), offer.shown, diff, offer.allows), offer

    async def _approved_run(self, call: ToolCall, cb: TurnCallbacks):
        from tailrent_tui.agent.tools.base import error

        if call.name in self.extra_tools:
            self._cb = cb
            tool = self.extra_tools[call.name]
            try:
                args = parse_args(tool.spec, call.arguments)
            except ToolError as exc:
                return error(str(exc))
            try:
                return await tool.run(args)
            except Exception as exc:  # a tool's bug must cost one turn, never the session
                return error(f"{call.name} failed: {type(exc).__name__}: {exc}")
        if call.name not in TOOLS:
            names = ", ".join(t["name"] for t in self.offered_tools())
            return error(f"unknown tool {call.name!r}; the tools are: {names}")
        if self._needs_approval(call.name) and not self._session_approved(call):
            diff = None
            preview = await asyncio.to_thread(preview_tool, call.name, call.arguments, self.tool_ctx)
            if preview is not None:
                if preview.is_error:
                    return preview
                diff = preview.meta.get("diff")
            request, offer = self._approval_request(call, diff)
            answer = await cb.approve(request)
            if answer == "deny":
                return error(f"the user denied {call.name}; ask them or try another way")
            if answer == "prefix" and request.command_prefix is not None:
                if offer is not None and offer.prefix is not None:
                    self.allowed_shell_prefixes.add(offer.prefix)
                elif offer is None:
                    self.allowed_prefixes.add(call.name)
        return await self._run_tool(call.name, call.arguments)

    async def _run_tool(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        """Run a workspace tool in a thread; cancelling (escape) tells the tool to kill what it started."""
        cancel = threading.Event()
        ctx = self.tool_ctx.model_copy(update={"cancel": cancel})
        try:
            return await asyncio.to_thread(run_tool, name, arguments, ctx)
        except asyncio.CancelledError:
            cancel.set()
            raise

    async def shell(self, command: str) -> Message:
        """`!cmd`: run a shell command in the workspace; its output enters through the ladder."""
        self.session.add("user", f"!{command}", autopin=False, meta={"shell": True})
        outcome = await self._run_tool("run_shell", {"command": command})
        m = admit_to_session(self.session, "run_shell", outcome, spill_store=self.spill_store, threshold=self.settings.spill_threshold)
        await self.after_add()
        return m

    async def attach_paste(self, label: str, text: str) -> Message:
        """A big paste, sent beside a message: it enters as a tool's output does (spilled with a pointer
        over the threshold), never cut, so the spill holds all of it."""
        from tailrent_tui.agent.tools.base import outcome

        m = admit_to_session(
            self.session, "paste", outcome(f"{label}\n{text}"), spill_store=self.spill_store, threshold=self.settings.spill_threshold
        )
        await self.after_add()
        return m

    async def attach_file(self, path: str) -> Message:
        """`@path` in a message: the file enters as read_file returns it (its line and byte caps), then rung 2."""
        outcome = await asyncio.to_thread(run_tool, "read_file", {"path": path}, self.tool_ctx)
        m = admit_to_session(self.session, "read_file", outcome, spill_store=self.spill_store, threshold=self.settings.spill_threshold)
        await self.after_add()
        return m

    # -- the ladder by hand -----------------------------------------------------

    def pin(self, message_id: str):
        ev = self.session.pin(message_id)
        self._write_decisions()
        return ev

    def unpin(self, message_id: str):
        ev = self.session.unpin(message_id)
        self._write_decisions()
        return ev

    def spill(self, message_id: str):
        return spill_message(self.session, message_id, self.spill_store)

    def watch(self, word: str):
        return self.session.add_watch(word)

    async def fold(self, span_ids: list[str] | None = None, *, trigger: str = "manual") -> Folded | FoldSkipped | None:
        """The user's fold (`f`, `/fold`): the policy's plan for it, driven like every other.

        A span with a pin, or an archive that cannot write, raises; a fold that
        would not shrink the context comes back as a FoldSkipped with the reason.
        """
        plan = self.policy.fold_by_hand(self.session, self.policy_context(), span_ids, trigger)
        events = await self.run_plan(plan)
        return next((e for e in reversed(events) if isinstance(e, (Folded, FoldSkipped))), None)

    # -- the ladder, driven -------------------------------------------------------

    @property
    def policy(self) -> Policy:
        if self._policy is None or self._policy.name != self.settings.policy:
            self._policy = get_policy(self.settings.policy)
        return self._policy

    def token_drift(self) -> float:
        """Tokens the server counts for each one we predict, from its last report (1 to 1.5).

        Our tokenizer is not always the server's, and the chat template adds its own
        tokens: a context that fits by our count may not by the server's.
        """
        for u in reversed(self.session.usage):
            if u.prompt_tokens and u.context_tokens and u.sub_session is None:
                return min(1.5, max(1.0, u.prompt_tokens / u.context_tokens))
        return 1.0

    def budget_window(self) -> int:
        """The window a request must fit by our count: the server's, less the drift of our
        count from its, less what the server refused before."""
        return max(256, int(self.session.window * self._window_scale / self.token_drift()))

    def reply_cap(self) -> int:
        """Tokens a reply may take: the setting, else an eighth of the window."""
        return self.settings.max_reply_tokens or max(256, self.session.window // 8)

    def policy_context(self) -> PolicyContext:
        if self._policy_settings is not None:
            settings = self._policy_settings.model_copy(update={"window": self.session.window})
        else:
            settings = PolicySettings(
                window=self.session.window,
                fold_trigger=self.settings.fold_trigger,
                fold_target=self.settings.fold_target,
                spill_threshold=self.settings.spill_threshold,
                guard=self.settings.guard,
                # room for the reply, and for what the server counts beyond our count
                reply_reserve=self.reply_cap() + self.session.window - self.budget_window(),
                fold_preview=self.settings.fold_preview if self.on_review is not None else "never",
            )
        return PolicyContext(spill_store=self.spill_store, archive=self.archive, settings=settings)

    async def run_plan(self, plan: Plan) -> list[Event]:
        """The agent's driver of a policy plan: each Summarize is answered by the
        summarizer, the model's request awaited when the model writes summaries.

        Cancelling it (escape) closes the plan before its fold is applied.
        """
        try:
            request = next(plan)
            while True:
                if isinstance(request, Review):
                    verdict = await self.on_review(request) if self.on_review is not None else Verdict(apply=True)
                    request = plan.send(verdict)
                else:
                    request = plan.send(await self._watched_summary(request))
        except StopIteration as stop:
            return stop.value
        finally:
            plan.close()

    async def _watched_summary(self, request: Summarize) -> Summary:
        """A summary, reported to `on_summary` as it starts and as it ends, whatever the end."""
        report = self.on_summary or _noop
        report(SummaryStarted(messages=len(request.span), tokens=sum(m.tokens for m in request.span), by=self.summarizer.name))
        try:
            summary = await self._summary_for(request)
        except asyncio.CancelledError:
            report(SummaryEnded(outcome="cancelled"))
            raise
        except Exception as exc:
            report(SummaryEnded(outcome="failed", error=str(exc)))
            raise
        report(SummaryEnded(outcome="failed", error=summary.error) if summary.error else SummaryEnded(outcome="written"))
        return summary

    async def _summary_for(self, request: Summarize) -> Summary:
        summarizer = self.summarizer
        if isinstance(summarizer, ModelSummarizer):
            try:
                summary = await summarizer.asummarize(request.span, request.budget)
            except ModelError as exc:
                return Summary(text="", by=summarizer.name, error=f"the model could not summarize ({exc.message})")
            # journaled like a turn's request, so it is counted and survives a resume, but
            # priced aside: it has its own prefix and leaves the conversation's cache as it was
            sent = sum(self.session.count(m["content"]) for m in summarizer.request_messages(request.span))
            usage = summarizer.last_usage
            sheet = getattr(self.rent, "sheet", None)
            self._record_usage(aside_rent(sent, usage.output_tokens if usage else 0, sheet), usage, "summary")
            return summary
        return Summary(text=summarizer.summarize(request.span), by=summarizer.name)

    async def _policy_step(self, plan: Plan) -> list[Event]:
        try:
            return await self.run_plan(plan)
        except Exception as exc:  # a failed fold must not lose the turn
            self.session.note(f"{self.policy.name} policy: fold failed: {exc}", "error")
            return []

    async def after_add(self) -> list[Event]:
        """The policy's budget check after each message."""
        return await self._policy_step(self.policy.after_add(self.session, self.policy_context()))

    async def add_message(self, role: Any, content: str, *, pinned: bool = False, at: float | None = None, **fields: Any) -> Message:
        """Add a message and let the policy act on it: the path of every message a user, the demo or a trace adds."""
        m = self.session.add(role, content, pinned=pinned, at=at, **fields)
        await self.after_add()
        return m

    async def admit_tool_text(self, tool: str, content: str, *, at: float | None = None) -> Message:
        """A tool's text from a trace or the demo: rungs 1 and 2 as the policy applies them, then its check."""
        m = self.policy.admit_tool(self.session, self.policy_context(), tool, content, at=at)
        await self.after_add()
        return m

    def _cache_expired(self) -> bool:
        if self.cold_resume:
            self.cold_resume = False  # build noted it already
            return True
        if self.rent is None:
            return False
        return self.rent.predict(context_items(self.session), self.session.head_tokens, self.session.clock())[2]

    async def before_request(self, cb: TurnCallbacks | None = None) -> list[Event]:
        """The policy's step before each request: after a cache expiry it may fold at no
        extra cost, and it makes the request fit the window with room for the reply."""
        self.refresh_instructions()
        cold = self.cold_resume
        expired = self._cache_expired()
        if expired and not cold:
            msg = "the cache expired while you were away: this request rewrites the whole prefix"
            self.session.note(msg, "info")
            if cb is not None:
                cb.on_notice(msg, "info")
        return await self._policy_step(self.policy.before_request(self.session, self.policy_context(), expired=expired))

    def _check_fits(self) -> None:
        """A request over the window is never sent: the server would refuse it, or cut it silently."""
        s = self.session
        reserve = self.reply_cap()
        window = self.budget_window() if self._policy_settings is None else s.window
        if s.context_tokens + reserve <= window:
            return
        raise ContextOverflow(
            f"not sent: the context ({s.context_tokens:,} tokens) and the reply's {reserve:,} do not fit "
            f"the {window:,}-token window" + (f" (the server's {s.window:,}, less our counting drift)" if window < s.window else ""),
            "unpin what no longer matters (u), spill or fold by hand (s, f), or lower max_reply_tokens",
        )

    def _write_decisions(self) -> None:
        """Rung 4 for decisions: keep pinned decisions in a workspace file that outlives the session.

        Written as write_file writes (beneath the workspace, atomically); a failure is a one-line
        warning note, and the pin stands."""
        name = self.settings.decisions_file
        if not name:
            return
        from tailrent_tui.agent.tools.base import ToolError, save_beneath
        from tailrent_tui.agent.workspace import WorkspaceEscape

        lines = ["# Decisions (pinned in tailrent)", ""]
        lines += [f"- {m.content.strip()}" for m in self.session.pinned if m.kind == Kind.chat]
        try:
            save_beneath(self.tool_ctx, name, ("\n".join(lines) + "\n").encode("utf-8", "replace"))
        except (ToolError, WorkspaceEscape, OSError) as exc:
            why = " ".join(str(exc).split()) or type(exc).__name__
            self.session.note(f"decisions file {name} not written: {why}", "warning")
