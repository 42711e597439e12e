"""One turn of the agent loop.

A turn: the user's text enters the session; the model is asked for a reply
(streamed to the caller); the server's usage is recorded against the rent
model's prediction; tool calls run (tool_runner.py), each result passing
rung 1 (the tool's cap) and rung 2 (spill) before it enters; the policy checks
the budget after every message and folds when it must (ladder_driver.py).

Faults never cost the user's message: it is in the session (and the journal)
before the model is called, and a failed request leaves a note and a retry.

Every turn is bounded ([caps]): a reply past `reply_max_bytes` is cut and its
stream closed; a tool call whose arguments pass `tool_call_args_max_bytes` is
not run (the model gets an error); past `tool_calls_max_per_reply` calls in one
reply only the first run; the turn's spills stop at `spills_turn_max_bytes`;
and the whole turn stops at `turn_deadline` seconds, keeping what it did.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Literal

from tailrent_tui.agent.budget import LadderBudget
from tailrent_tui.agent.events import MODEL_ERROR_NOTE, TurnCallbacks, TurnResult
from tailrent_tui.agent.kv_slots import SlotKeeper, check_held
from tailrent_tui.agent.ladder_driver import LadderDriver
from tailrent_tui.agent.meter import UsageMeter
from tailrent_tui.agent.stores import SessionStores
from tailrent_tui.agent.text_protocol import PROTOCOL_META, PROTOCOL_NOTE, parse_actions
from tailrent_tui.agent.tool_runner import ToolRunner
from tailrent_tui.agent.tools.caps import ToolCaps
from tailrent_tui.agent.wire import wire_messages
from tailrent_tui.core.messages import Message, ToolCall
from tailrent_tui.core.rent import RentModel, context_item
from tailrent_tui.core.session import Session
from tailrent_tui.core.summarize import TEMPLATE_TOKEN
from tailrent_tui.models.base import ChatModel, TextDelta, ThinkingDelta, ToolCallChunk, Usage
from tailrent_tui.models.errors import Busy, ContextOverflow, ModelError, ToolsUnsupported
from tailrent_tui.models.openai import OpenAIModel
from tailrent_tui.store.sessions import SessionDir
from tailrent_tui.text import model_label, storable

MAX_STEPS = 24
#: seconds to wait before each retry of a request the server answered busy (HTTP 503 "Loading
#: model", 429) before any of its reply: bounded, about half a minute in all; a Retry-After the
#: server sends is followed up to the longest of them
BUSY_WAITS = (2.0, 4.0, 8.0, 16.0)


class TurnLoop:
    """Asks the model, streams its reply to the caller, runs its tool calls, until it answers."""

    def __init__(
        self,
        *,
        session: Session,
        model: Callable[[], ChatModel],
        protocol: Literal["auto", "native", "text"],
        caps: ToolCaps,
        rent: RentModel | None,
        session_dir: SessionDir | None,
        slots: SlotKeeper | None,
        ladder: LadderDriver,
        budget: LadderBudget,
        tools: ToolRunner,
        meter: UsageMeter,
        stores: SessionStores,
        start: Callable[[], Awaitable[None]],
        options: Callable[[], dict[str, Any]],
    ) -> None:
        """`model`: the current model (a /model switch changes it); `protocol`: [tools] protocol;
        `start`: the model's start, awaited before a turn's first request; `options`: a request's options."""
        self.session = session
        self._model = model
        self.protocol = protocol
        self.caps = caps
        self.rent = rent
        self.session_dir = session_dir
        self.slots = slots
        self.ladder = ladder
        self.budget = budget
        self.tools = tools
        self.meter = meter
        self.stores = stores
        self._start = start
        self._options = options
        #: the keep-warm ping in flight: a turn that starts cancels it (the user's request goes first)
        self._ping_task: asyncio.Task[Any] | None = None
        #: why the server's model cannot call tools, when the schema check found out
        self._no_tools_why = ""

    async def turn(self, text: str | None, cb: TurnCallbacks | None = None) -> TurnResult:
        """One user turn. `text=None` retries from the transcript as it is."""
        cb = cb or TurnCallbacks()
        result = TurnResult()
        ping = self._ping_task
        if ping is not None and not ping.done() and ping is not asyncio.current_task():
            ping.cancel()  # a ping in flight when the user sends: it would only hold the server up
        await self._start()
        self.tools.begin_turn()
        deadline = self.caps.turn_deadline
        try:
            async with asyncio.timeout(deadline):
                return await self._turn(text, cb, result)
        except TimeoutError:
            self._warn(
                f"turn stopped after {deadline:g} s (the turn_deadline cap): what it did is kept; send a message to go on",
                cb,
                result,
            )
            return result

    async def _turn(self, text: str | None, cb: TurnCallbacks, result: TurnResult) -> TurnResult:
        session = self.session
        if text is not None:
            text = storable(text)  # a paste or a key that was not UTF-8: kept with U+FFFD, sendable, journaled
            if not text.strip():
                raise ValueError("empty message: type something, or /help")
        tools = self.tools.offered_tools()
        # the protocol's note, when it is known now, goes before the message: a note between the user's
        # words and the reply is what a small model answers (SmolLM2 recited it instead of answering)
        self._text_protocol(tools, cb, result)
        if text is not None:
            await self.ladder.add_message("user", text)
            self.stores.title_from(text)
        held = await check_held(self.slots, self.rent, session.clock())
        if held:
            session.note(held, "info")
            cb.on_notice(held, "info")
        for _step in range(MAX_STEPS):
            try:
                await self.ladder.before_request(cb)
                self.budget.check_fits()
                reply, calls, usage = await self._request(tools, cb, result)
            except ToolsUnsupported as exc:
                tools = []
                # told to the model before the retry, and said in one warning with the protocol
                self._no_tools_why = f"{exc.message}: retrying without tools"
                self._text_protocol(tools, cb, result)
                continue
            except ModelError as exc:
                result.error = exc
                session.note(f"{MODEL_ERROR_NOTE}{exc.message}" + (f" ({exc.hint})" if exc.hint else ""), "error")
                return result
            except asyncio.CancelledError:
                result.cancelled = True
                raise
            result.reply = reply
            if usage is not None and usage.truncated:
                self._warn("the reply was cut: done_reason=length (the token limit or the window was reached)", cb, result)
            if not calls and self._text_protocol(tools, cb, result):
                chunks = parse_actions(reply.content, id_prefix=f"text_{reply.id}")
                calls = [(ToolCall(id=c.id, name=c.name, arguments=c.arguments), c) for c in chunks]
            if not calls:
                return result
            for call in calls:
                await self.tools.run_call(call, cb)
        msg = f"stopped after {MAX_STEPS} model requests in one turn"
        result.notices.append(msg)
        cb.on_notice(msg, "warning")
        return result

    def _text_protocol(self, tools: list[dict[str, Any]], cb: TurnCallbacks, result: TurnResult) -> bool:
        """Whether this model acts through the text protocol (text_protocol.py): it cannot call
        the tools offered (the server dropped them, or its template leaves no room for them).
        The first time, the protocol is told to the model in a pinned note and the user warned."""
        model, session = self._model(), self.session
        choice = self.protocol
        if choice == "native":
            return False
        offered = bool(self.tools.offered_tools())
        dropped = bool(getattr(model, "tools_dropped", False)) or (offered and not tools)
        ignored = isinstance(model, OpenAIModel) and offered and session.tool_schema_tokens == 0
        if choice == "auto" and not (dropped or ignored):
            return False
        if any(m.meta.get(PROTOCOL_META) for m in session.messages):
            return True
        session.add("system", PROTOCOL_NOTE, pinned=True, autopin=False, meta={PROTOCOL_META: True})
        why = f" ({self._no_tools_why})" if self._no_tools_why else ""
        how = (
            "it acts through text (! lines run commands, fenced write/edit blocks change files, @read reads one), "
            "and you approve each action as a tool call"
        )
        if choice == "text":
            self._warn(f'[tools] protocol = "text": {how}', cb, result)
        else:
            named = model_label(model.name) if model.name else "this model"
            self._warn(
                f"{named} cannot call tools through this server{why}, so it may invent what files "
                f'hold: from now on {how} ([tools] protocol = "native" turns this off)',
                cb,
                result,
            )
        return True

    def _warn(self, msg: str, cb: TurnCallbacks, result: TurnResult) -> None:
        result.notices.append(msg)
        cb.on_notice(msg, "warning")
        self.session.note(msg, "warning")

    async def _request(
        self, tools: list[dict[str, Any]], cb: TurnCallbacks, result: TurnResult
    ) -> tuple[Message, list[tuple[ToolCall, ToolCallChunk]], Usage | None]:
        session, model = self.session, self._model()
        wire = wire_messages(session)
        predicted = self.meter.predict()
        parts: list[str] = []
        thinking: list[str] = []
        calls: list[ToolCallChunk] = []
        usage: Usage | None = None
        cb.on_reply_start(self.meter.request_started(predicted))
        self.meter.last_sent = (wire, tools or None)
        stream = self._busy_retried(lambda: model.stream(wire, tools=tools or None, options=self._options()), cb, result)
        caps = self.caps
        size = 0
        cut_reply = False
        try:
            async for chunk in stream:
                if isinstance(chunk, TextDelta):
                    size += len(chunk.text)
                    if size > caps.reply_max_bytes:
                        # a server that ignores max_tokens: the reply is cut here, and its stream closed
                        room = len(chunk.text) - (size - caps.reply_max_bytes)
                        parts.append(chunk.text[: max(0, room)])
                        cut_reply = True
                        break
                    parts.append(chunk.text)
                    cb.on_text(chunk.text)
                elif isinstance(chunk, ThinkingDelta):
                    thinking.append(chunk.text)
                    cb.on_thinking(chunk.text)
                elif isinstance(chunk, ToolCallChunk):
                    calls.append(chunk)
                elif isinstance(chunk, Usage):
                    usage = chunk
        except asyncio.CancelledError:
            partial = "".join(parts)
            if partial:
                session.add("assistant", partial, autopin=False, meta={"cancelled": True})
            session.note("reply cancelled" + (" (partial reply kept)" if partial else ""), "warning")
            # the server read its prompt all the same: counted, as predicted (it reports nothing)
            self.meter.record(predicted, usage, cancelled=True)
            with contextlib.suppress(Exception):
                await stream.aclose()  # type: ignore[attr-defined]
            raise
        except ModelError as exc:
            if isinstance(exc, ContextOverflow):
                self.budget.shrink_window()
            partial = "".join(parts)
            if partial:
                session.add("assistant", partial, autopin=False, meta={"incomplete": True})
            raise
        if cut_reply:
            with contextlib.suppress(Exception):
                await stream.aclose()  # type: ignore[attr-defined]
            self._warn(
                f"the reply was cut at {caps.reply_max_bytes:,} characters (the reply_max_bytes cap): "
                "the server sent more than any reply should hold",
                cb,
                result,
            )
        calls = self._bounded_calls(calls, cb, result)
        if usage is not None:
            result.usage.append(usage)
            if usage.tools_dropped:
                msg = f"{model_label(model.name)} does not support tools: the reply was made without them"
                result.notices.append(msg)
                cb.on_notice(msg, "warning")
        tool_calls = [ToolCall(id=c.id or f"call_{i}", name=c.name, arguments=c.arguments) for i, c in enumerate(calls)]
        text = "".join(parts)
        meta = _call_errors(calls)
        if thinking:
            # kept for the export and the inspector; never sent back, never counted in the context
            meta["thinking"] = "".join(thinking)
        # a reply that ran to its token cap, or that writes the chat template's own tokens (a base
        # model rambling on), is no decision to pin whole: the user can still pin it by hand
        runaway = (usage is not None and usage.truncated) or TEMPLATE_TOKEN.search(text) is not None
        if (usage is not None and usage.truncated) or cut_reply:
            meta["truncated"] = True
            runaway = True
        reply = session.add("assistant", text, tool_calls=tool_calls, meta=meta, autopin=not runaway)
        if self.rent is not None and usage is not None:
            # its end of turn, its last token and the next reply's opening are read again: the reply's framing
            # (measured on the server's template) and its last token
            framing = session.framing.message("assistant")
            self.rent.generated(context_item(session, reply), reread=framing + 1 if framing else 0)
        self.meter.record(predicted, usage)
        if usage is not None and tools and not usage.tools_dropped:
            self._check_schema_sent(usage, cb)
        await self.ladder.after_add()
        return reply, list(zip(tool_calls, calls, strict=True)), usage

    async def _busy_retried(self, open_stream: Callable[[], Any], cb: TurnCallbacks, result: TurnResult) -> AsyncIterator[Any]:
        """The model's stream, opened again after a wait (`BUSY_WAITS`) while the server answers busy
        before any of the reply (llama.cpp's 503 "Loading model"); each wait is said in the transcript."""
        for attempt in range(len(BUSY_WAITS) + 1):
            stream = open_stream()
            started = False
            try:
                async for chunk in stream:
                    started = True
                    yield chunk
                return
            except Busy as exc:
                if started or attempt == len(BUSY_WAITS):
                    raise
                wait = BUSY_WAITS[attempt]
                if exc.retry_after is not None:
                    wait = min(max(exc.retry_after, 0.0), max(BUSY_WAITS))
                self._warn(
                    f"the server is busy ({exc.message}): retry {attempt + 1} of {len(BUSY_WAITS)} in {wait:g} s",
                    cb,
                    result,
                )
                await asyncio.sleep(wait)
            finally:
                with contextlib.suppress(Exception):
                    await stream.aclose()

    def _bounded_calls(self, calls: list[ToolCallChunk], cb: TurnCallbacks, result: TurnResult) -> list[ToolCallChunk]:
        return bounded_calls(calls, self.caps, lambda text: self._warn(text, cb, result))

    def _check_schema_sent(self, usage: Usage, cb: TurnCallbacks) -> None:
        """A server whose whole prompt is smaller than the tool schema we sent ignored the tools.

        llama.cpp's server does that unless it runs with --jinja. The model then
        cannot call tools, and the rent prediction must stop counting the schema.
        """
        session = self.session
        schema = session.tool_schema_tokens
        # half the schema: the server counts with its own tokenizer, which can differ
        # from ours by tens of percent, never by half
        if not schema or usage.prompt_tokens is None or usage.prompt_tokens >= schema // 2:
            return
        from tailrent_tui.models.embedded import EmbeddedModel  # imports no engine until one starts

        # tailrent runs its own engine with --jinja on: there the model's chat template is what drops them
        why = (
            "its chat template has no place for tools"
            if isinstance(self._model(), EmbeddedModel)
            else "llama.cpp's server needs --jinja"
        )
        # said with the text protocol's warning that follows (`_text_protocol`): one fault, one message
        self._no_tools_why = (
            f"it reported a {usage.prompt_tokens:,}-token prompt, smaller than the {schema:,}-token tool schema sent "
            f"with it: it ignores tools ({why}); rent predictions leave the schema out from now on"
        )
        session.tool_schema_tokens = 0
        if self.rent is not None:
            self.rent.rebase_head(session.head_tokens)
        writer = getattr(self.session_dir, "update_meta", None)
        if writer is not None:
            with contextlib.suppress(OSError):
                writer(tool_schema_tokens=0)

    async def ping(self, now: float | None = None) -> bool:
        """Send a keep-warm ping if the rule says one is due: the last request's exact
        messages and tools (the cached prefix) with max_tokens=1, recorded as a usage
        of purpose "ping". True if one was sent; a failed ping is noted, not raised."""
        session, meter = self.session, self.meter
        now = session.clock() if now is None else now
        if meter.keep_warm is None or meter.last_sent is None or not meter.keep_warm.due(now):
            return False
        pause = self.rent.last_at if self.rent is not None else None
        if pause is not None and meter.failed_pause == pause:
            return False  # one failure per pause is said once; the cache is left to expire
        wire, tools = meter.last_sent
        usage: Usage | None = None
        deadline = self.caps.ping_deadline
        self._ping_task = asyncio.current_task()
        try:
            options = {**self._options(), "max_tokens": 1, "num_predict": 1}
            async with asyncio.timeout(deadline):
                async for chunk in self._model().stream(wire, tools=tools, options=options):
                    if isinstance(chunk, Usage):
                        usage = chunk
        except (ModelError, TimeoutError) as exc:
            meter.failed_pause = pause
            why = exc.message if isinstance(exc, ModelError) else f"no answer in {deadline:g} s, the ping_deadline cap"
            session.note(f"keep-warm ping failed ({why}): no more pings in this pause, the cache may expire", "warning")
            return False
        finally:
            self._ping_task = None
        predicted = meter.keep_warm.ping(now)
        meter.record(predicted, usage, "ping", at=now)
        return True


def _call_errors(calls: list[ToolCallChunk]) -> dict[str, Any]:
    errs = {c.id: c.arguments_error for c in calls if c.arguments_error}
    return {"argument_errors": errs} if errs else {}


def bounded_calls(calls: list[ToolCallChunk], caps: Any, warn: Any) -> list[ToolCallChunk]:
    """The reply's tool calls within the caps: the first tool_calls_max_per_reply of them, each with
    arguments no larger than tool_call_args_max_bytes (a larger one keeps none, and an error)."""
    if len(calls) > caps.tool_calls_max_per_reply:
        warn(
            f"the reply asked for {len(calls):,} tool calls: only the first {caps.tool_calls_max_per_reply} run "
            "(the tool_calls_max_per_reply cap)"
        )
        calls = calls[: caps.tool_calls_max_per_reply]
    bounded = []
    for c in calls:
        size = max(len(json.dumps(c.arguments, ensure_ascii=False)) if c.arguments else 0, len(c.raw_arguments or ""))
        if size > caps.tool_call_args_max_bytes:
            c = c.model_copy(
                update={
                    "arguments": {},
                    "raw_arguments": None,
                    "arguments_error": f"the arguments are {size:,} bytes, over the {caps.tool_call_args_max_bytes:,}-"
                    "byte tool_call_args_max_bytes cap: the call was not run; write big content in smaller pieces",
                }
            )
        bounded.append(c)
    return bounded
