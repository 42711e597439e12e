"""The Agent the app, `tailrent ask`, the demo and the bench share: one facade over its rooms.

- the turn loop (turn.py): asks the model, streams the reply, runs the calls;
- tool execution and approvals (tool_runner.py);
- the ladder driver (ladder_driver.py): every fold, spill and pin the policy plans, against
  the budget (budget.py); a fold's summary, prepared ahead or asked now (fold_requests.py), and what
  a fold costs the next request (fold_costs.py);
- the session stores (stores.py): decisions, instructions, exports, sub-session transcripts;
- the model's start and switch (startup.py), the rent and usage (meter.py).

Each room takes what it needs at construction, and no more (the model as a getter: a
`/model` switch replaces it). The Agent holds them and offers what the app and the commands
call (the `SessionAgent` Protocol of ui/protocol.py, the turn, the close); the bench, the
demo's feeder and the tests reach a room's own calls through it (`agent.ladder.add_message`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tailrent_tui.agent.budget import OVERFLOW_SHRINK, LadderBudget
from tailrent_tui.agent.closing import Closing, close_parts
from tailrent_tui.agent.events import (
    Approval,
    ApprovalRequest,
    RequestStarted,
    SummaryEnded,
    SummaryProgress,
    SummaryStarted,
    TurnCallbacks,
    TurnResult,
)
from tailrent_tui.agent.fold_costs import FoldCosts
from tailrent_tui.agent.fold_requests import FoldRequests
from tailrent_tui.agent.kv_slots import SlotKeeper
from tailrent_tui.agent.ladder_driver import LadderDriver
from tailrent_tui.agent.meter import UsageMeter
from tailrent_tui.agent.placement import PlacementKeeper
from tailrent_tui.agent.startup import (
    ModelLink,
    model_options,
    model_spec_of,
    pick_summarizer,
    price_sheet_for,
    server_counter,
)
from tailrent_tui.agent.stores import SessionStores
from tailrent_tui.agent.tool_runner import ToolRunner, cap_to_tokens
from tailrent_tui.agent.tools import offered_tools
from tailrent_tui.agent.tools.base import ToolOutcome, error
from tailrent_tui.agent.tools.caps import ToolCaps
from tailrent_tui.agent.turn import MAX_STEPS, TurnLoop
from tailrent_tui.agent.wire import wire_messages
from tailrent_tui.core.messages import (
    Kind,
    Note,
    UsageRecorded,
    new_id,
)
from tailrent_tui.core.policies import PolicySettings
from tailrent_tui.core.ports import FoldArchive, SpillStore
from tailrent_tui.core.rent import PriceSheetError, RentModel
from tailrent_tui.core.rungs.fold import MemoryFoldArchive
from tailrent_tui.core.rungs.spill import MemorySpillStore
from tailrent_tui.core.session import Session
from tailrent_tui.core.summarize import LossySummarizer, Summarizer
from tailrent_tui.core.tokens import get_counter
from tailrent_tui.models.base import ChatModel
from tailrent_tui.models.factory import CannotOpenModel, open_model
from tailrent_tui.models.summarizer import ModelSummarizer
from tailrent_tui.models.text import redact
from tailrent_tui.models.tokenizer import ServerTokenizer
from tailrent_tui.settings import Settings
from tailrent_tui.store.journal import Writer
from tailrent_tui.store.memory import MemoryStore
from tailrent_tui.store.sessions import OpenedSession, SessionDir

if TYPE_CHECKING:
    from tailrent_tui.agent.mcp.hub import McpHub

__all__ = [
    "MAX_STEPS",
    "OVERFLOW_SHRINK",
    "Agent",
    "Approval",
    "ApprovalRequest",
    "RequestStarted",
    "SummaryEnded",
    "SummaryProgress",
    "SummaryStarted",
    "TurnCallbacks",
    "TurnResult",
    "cap_to_tokens",
    "wire_messages",
]


#: a delegate's final answer is capped to this many tokens before it enters the parent
DELEGATE_ANSWER_CAP = 1500


def follow_model(current: Summarizer | ModelSummarizer, settings: Settings, model: ChatModel) -> Summarizer | ModelSummarizer:
    """Who writes the summaries after a /model switch: the new model when the old one wrote them or the
    setting is auto (picked for the new model as a start would); a summarizer the settings fixed stays."""
    if isinstance(current, ModelSummarizer) or settings.fold.summarizer == "auto":
        return pick_summarizer(settings, model)
    return current


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
        memory: MemoryStore | None = None,
        journal: Writer | None = None,
        session_dir: SessionDir | None = None,
        opened: OpenedSession | None = None,
        summarizer: Summarizer | ModelSummarizer | None = None,
        notice: str | None = None,
        rent: RentModel | None = None,
        is_sub: bool = False,
        policy_settings: PolicySettings | None = None,
        instructions: bool = False,
        caps: ToolCaps | None = None,
        slots: bool = False,
        resumed: bool = False,
        cold_resume: bool = False,
    ) -> None:
        """`slots`: keep llama.cpp's KV slot for this session (agent/kv_slots.py); `resumed`: the session
        had requests before (the first start restores its slot and prices the resume); `cold_resume`: past
        the cache's life (the first request rewrites the prefix); `policy_settings`: the bench fixes every
        policy setting, the app derives them from `settings`."""
        session.pin_share = settings.fold.pin_share
        self.session = session
        #: the model the turns talk to: `switch_model` replaces it, so the rooms ask for it (`lambda: self.model`)
        self.model = model
        self.settings = settings
        self.workspace = workspace
        self.caps = caps or ToolCaps(shell_timeout=settings.tools.shell_timeout)
        self.spill_store: SpillStore = spill_store or MemorySpillStore()
        self.archive: FoldArchive = archive if archive is not None else MemoryFoldArchive()
        self.memory = memory
        self.journal = journal
        self.session_dir = session_dir
        #: the session as `open_session` gave it (journal, directory, lock): closed at exit; None for a sub-session
        self.opened = opened
        self.rent = rent
        self.is_sub = is_sub
        self.notice = notice
        self.sub_tokens = 0
        self.sub_sessions: list[str] = []
        #: the session's MCP servers (agent/mcp): build_agent sets it when any is configured
        self.mcp: McpHub | None = None
        #: notes written while the session was built, before the app listened to it (build_agent sets them)
        self.startup_notes: list[Note] = []
        #: what SIGTERM or SIGHUP calls while the session is open (the app's exit); None: the block is cancelled
        self.on_signal: Callable[[str], None] | None = None
        #: what the close did (agent/closing.py), once `aclose` has run
        self.closing: Closing | None = None
        #: False when the model is the caller's (the bench's engine): `aclose` leaves it open
        self.owns_model = True
        current_model = self._current_model
        tools_offered = partial(offered_tools, sub=is_sub)
        self.meter = UsageMeter(session, rent, lambda: self.model.name)
        #: where folds put their summary, and why (agent/placement.py); None for a sub-session
        self.placement = None if is_sub else PlacementKeeper(settings.fold.placement, current_model, rent)
        #: the policy and the window it plans with (agent/budget.py)
        self.budget = LadderBudget(
            session=session,
            settings=settings,
            spill_store=self.spill_store,
            archive=self.archive,
            placement=self.placement,
            policy_settings=policy_settings,
        )
        if self.budget.policy.name == "ladder":
            # the pins' budget leaves the reply its room from the start: the instructions are cut to it below
            session.reply_reserve = self.budget.policy_context().settings.reply_reserve
        self.stores = SessionStores(
            session=session,
            session_dir=session_dir,
            workspace=workspace,
            spill_store=self.spill_store,
            archive=self.archive,
            memory=memory,
            decisions_file=settings.decisions_file,
            data_dir=settings.data_dir,
            instructions=instructions and not is_sub,
        )
        #: saves and restores llama.cpp's KV slot (agent/kv_slots.py); None in memory and for a sub-session
        self.slots: SlotKeeper | None = None
        if slots and not is_sub:
            self.slots = SlotKeeper(
                settings=settings, model=current_model, session=session, session_dir=session_dir, offered_tools=tools_offered
            )
        #: who writes fold summaries, folds prepared while the user reads, and what folds cost (agent/fold_requests.py)
        self.fold_requests = FoldRequests(
            session=session,
            settings=settings,
            budget=self.budget,
            summarizer=summarizer or LossySummarizer(),
            meter=self.meter,
            stores=self.stores,
            rent=rent,
            slots=self.slots,
            placement=self.placement,
            # a summary request sends what a turn's request sends: its tools and options
            offered_tools=tools_offered,
            # through a lambda: a test may replace `request_options` on one agent
            request_options=lambda: self.request_options(),
            is_sub=is_sub,
        )
        #: what applying or undoing a fold costs the next request (agent/fold_costs.py)
        self.fold_costs = FoldCosts(session=session, rent=rent, stores=self.stores)
        self.ladder = LadderDriver(
            session=session,
            budget=self.budget,
            requests=self.fold_requests,
            spill_store=self.spill_store,
            rent=rent,
            stores=self.stores,
            slots=self.slots,
            placement=self.placement,
            cold_resume=cold_resume,
        )
        if self.meter.keep_warm is not None:
            # what an expiry costs is the policy's to say: the ladder folds at a cold resume
            budget = self.budget
            self.meter.keep_warm.rewrite_tokens = lambda: budget.policy.cold_resume_tokens(session, budget.policy_context())
        self.tools = ToolRunner(
            session=session,
            settings=settings,
            caps=self.caps,
            workspace=workspace,
            spill_store=self.spill_store,
            ladder=self.ladder,
            ladder_budget=self.budget,
            is_sub=is_sub,
        )
        self.tools.bind_session(self.stores, self.delegate)
        self.link = ModelLink(
            model=current_model,
            session=session,
            window=settings.window,
            session_dir=session_dir,
            ladder=self.ladder,
            budget=self.budget,
            requests=self.fold_requests,
            rent=rent,
            slots=self.slots,
            placement=self.placement,
            resumed=resumed,
        )
        self.turns = TurnLoop(
            session=session,
            model=current_model,
            protocol=settings.tools.protocol,
            caps=self.caps,
            rent=rent,
            session_dir=session_dir,
            slots=self.slots,
            ladder=self.ladder,
            budget=self.budget,
            tools=self.tools,
            meter=self.meter,
            stores=self.stores,
            start=self.link.start,
            options=lambda: self.request_options(),
        )

    def _current_model(self) -> ChatModel:
        return self.model

    # -- closing -------------------------------------------------------------------------

    async def aclose(self, reason: str = "quit") -> Closing:
        """Close the session (agent/closing.py), once: the slot saved, the journal closed, the lock
        released, the model stopped. `open_agent` calls it on every exit path."""
        if self.closing is None:
            self.closing = await close_parts(
                reason=reason,
                mcp=self.mcp,
                slots=self.slots,
                opened=self.opened,
                counter=self.session.counter,
                model=self.model if self.owns_model else None,
            )
        return self.closing

    # -- the model -------------------------------------------------------------------

    async def switch_model(self, spec: str) -> str:
        """Switch to the model a spec names; the session and its context stay as they are."""
        settings = self.settings.model_copy(update={"model": spec})
        try:
            model, _ = open_model(spec, model_options(settings))
        except CannotOpenModel as exc:
            raise ValueError(str(exc)) from None
        try:
            # the new server's cache life (Ollama's keep_alive, llama.cpp's slot), read before anything changes
            sheet = price_sheet_for(settings, model) if self.rent is not None else None
        except PriceSheetError as exc:  # prices.toml edited since the start
            await model.aclose()
            raise ValueError(str(exc)) from None
        session, slots = self.session, self.slots
        if slots is not None:
            # the old server's slot, while it still holds this session: a switch back can restore it
            saved = await slots.save("before the model switch")
            if saved is not None and saved.line:
                session.note(saved.line, saved.level)
        old, self.model = self.model, model
        self.settings = settings
        self.link.model_changed()
        if slots is not None:
            slots.model_changed()
        if self.placement is not None:
            self.placement.model_changed()
        # the summaries are the new model's to write, and a summary prepared by the old one is dropped
        self.fold_requests.model_changed(follow_model(self.fold_requests.summarizer, settings, model))
        await old.aclose()
        if self.rent is not None and sheet is not None:
            self.rent.sheet = sheet
            self.rent.expire()  # a different server holds none of this context
        await self._count_with(model)
        shown = model.name or redact(spec)  # a URL's credentials stay out of the journal
        session.note(f"model switched to {shown}", "info")
        if self.session_dir is not None:
            # a resume reopens the model the session ran on last
            with contextlib.suppress(OSError, LookupError):
                await asyncio.to_thread(self.session_dir.update_meta, model_spec=model_spec_of(spec, model), model=shown)
        return shown

    async def _count_with(self, model: ChatModel) -> None:
        """A session that counts with its model server's tokenizer counts new text with the new server's
        (or like cl100k when it cannot count, said once); the old server's counter is closed."""
        session = self.session
        tokenizer = ServerTokenizer.name if isinstance(session.counter, ServerTokenizer) else None
        if self.session_dir is not None:
            with contextlib.suppress(OSError, LookupError):
                tokenizer = self.session_dir.read_meta().tokenizer
        if tokenizer != ServerTokenizer.name:
            return
        counter, warning = await asyncio.to_thread(server_counter, tokenizer, model)
        old, session.counter = session.counter, counter or get_counter(tokenizer)
        if isinstance(old, ServerTokenizer):
            old.close()
        if warning:
            session.note(warning, "warning")

    def request_options(self) -> dict[str, Any]:
        return {"num_ctx": self.session.window, "temperature": 0, "max_tokens": self.budget.reply_cap()}

    # -- the turn ----------------------------------------------------------------------

    async def turn(self, text: str | None, cb: TurnCallbacks | None = None) -> TurnResult:
        """One user turn (turn.py). `text=None` retries from the transcript as it is."""
        if self.mcp is not None:
            # the first frame never waits for an MCP server; the first request does (bounded), saying so
            await self.mcp.settle(cb.on_notice if cb is not None else None)
        return await self.turns.turn(text, cb)

    # -- rung 3 ------------------------------------------------------------------------------------

    async def delegate(self, task: str) -> ToolOutcome:
        """Run `task` in a sub-session with a fresh context; only its capped answer returns."""
        if self.is_sub:
            return error("a sub-session cannot delegate further")
        sub_id = "sub-" + new_id()
        session = self.session
        sub_session = Session(
            counter=session.counter,
            system="You are a sub-agent with a fresh context. Do the task with the tools and end with a short final answer.",
            window=session.window,
            tool_schema_tokens=session.tool_schema_tokens,
            framing=session.framing,
            id=sub_id,
        )
        sub = Agent(
            session=sub_session,
            model=self.model,
            settings=self.settings,
            caps=self.caps,
            workspace=self.workspace,
            spill_store=self.spill_store,
            memory=self.memory,
            summarizer=self.fold_requests.summarizer,
            rent=None,
            is_sub=True,
        )
        parent_cb = self.tools.cb or TurnCallbacks()

        def journal_sub_usage(event: Any) -> None:
            # the sub-session's requests are journaled in the parent, tagged, so
            # its tokens survive a resume and the Tail panel can count them apart
            if isinstance(event, UsageRecorded):
                session.emit(event.model_copy(update={"sub_session": sub_id}))

        sub_session.listeners.append(journal_sub_usage)
        result = await sub.turn(task, TurnCallbacks(approve=parent_cb.approve, on_notice=parent_cb.on_notice))
        sub_tokens = sum(u.context_tokens + (u.output_tokens or 0) for u in sub_session.usage)
        self.sub_tokens += sub_tokens
        self.sub_sessions.append(sub_id)
        self.stores.archive_sub(sub_id, sub_session)
        if result.error is not None:
            return error(f"the delegate failed: {result.error.message}")
        answer = result.reply.content if result.reply is not None else ""
        cap = DELEGATE_ANSWER_CAP
        tokens = session.count(answer)
        if tokens > cap:
            # characters per token of this answer, to cut near the cap
            keep = max(1, int(len(answer) * cap / tokens))
            answer = answer[:keep] + f"\n[delegate answer capped at ~{cap:,} tokens of {tokens:,}]"
        body = f"[delegate {sub_id}: {len(sub_session.messages)} messages, {sub_tokens:,} tokens in its own context]\n{answer}"
        return ToolOutcome(content=body, meta={"kind": Kind.delegate_result.value, "sub_session": sub_id})
