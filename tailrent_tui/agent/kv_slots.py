"""KV slots that survive restarts, and the resume's price: the driver around core/kv_slots.py.

When the model is an OpenAI-compatible server that turns out to be llama.cpp, every
request is pinned to one slot (``id_slot``, the ``[slots] id`` setting), so that slot
holds the session's prefix. The slot is saved to a file (``tailrent-<session>-<hash>
.bin`` in the server's ``--slot-save-path``) when the app has been idle for
``SLOT_SAVE_IDLE`` seconds after a turn, on quit, before a model switch, and at the
end of ``tailrent ask``; it is saved only while it still holds the conversation (a
fold's summary request or a delegate's replaces it) and not twice for one prefix.
On ``--continue`` / ``--resume``, before the first request, the newest saved slot
whose prefix hash matches the first messages about to be sent is restored; else the
resume line says why not. A failure is one line, once, and the session carries on.

The resume's price is said for every model: what the first request re-reads
(tokens; seconds at the prompt rate the server measured; dollars with a priced
sheet), and whether a restored slot or a warm cache spares it.
"""

from __future__ import annotations

import asyncio
import math
import os
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tailrent_tui.agent.wire import wire_messages
from tailrent_tui.core.kv_slots import (
    ResumePrice,
    SlotRecord,
    choose_restore,
    cleanup_plan,
    prefix_hash,
    resume_price,
    slot_file_name,
)
from tailrent_tui.core.messages import UsageRecorded
from tailrent_tui.core.policies import Policy, PolicyContext
from tailrent_tui.core.rent import HEAD_ID, RentModel, context_items, generation_rate, prompt_rate
from tailrent_tui.core.session import Session
from tailrent_tui.models.base import ChatModel
from tailrent_tui.models.kv_slots import SlotClient, SlotError, SlotServer
from tailrent_tui.models.openai import OpenAIModel, SentPrompt, rendered_prompt
from tailrent_tui.models.text import redact
from tailrent_tui.settings import Settings
from tailrent_tui.store.kv_slots import delete_slot_files, scan_slot_dir
from tailrent_tui.store.sessions import SessionDir

MB = 1024 * 1024
#: in [slots] dir, the slot files of one session may use this many MB, and tailrent's in all this many;
#: past either the oldest go first (a slot file is about the KV of its context: tens to hundreds of MB)
SESSION_SLOT_MB = 512
TOTAL_SLOT_MB = 4096


@dataclass
class SlotOutcome:
    """What a save or a restore did, for the caller to show (``line``) and for `ask --json`."""

    action: str
    ok: bool = False
    file: str | None = None
    tokens: int | None = None
    bytes: int | None = None
    ms: float | None = None
    line: str | None = None
    level: str = "info"
    extra: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "ok": self.ok,
            "file": self.file,
            "tokens": self.tokens,
            "bytes": self.bytes,
            "ms": self.ms,
            "message": self.line,
        }


@dataclass(frozen=True)
class HeldSlot:
    """What the server's slot holds, against this session's last request (`SlotKeeper.ask_held`)."""

    #: True: it still holds the last request; False: it does not (a restart, another client); None: cannot tell
    warm: bool | None
    why: str = ""
    tokens: int | None = None


#: a pause shorter than this is not worth asking the server whether its slot still holds the context
HELD_CHECK_IDLE = 60.0
#: llama.cpp's count of what a slot holds is its prompt plus what it generated, less the last token
HELD_SLACK = 2


@dataclass
class _SavePlan:
    file: str
    record: SlotRecord
    client: SlotServer
    slot: int


def connect_slots(model: OpenAIModel) -> SlotServer:
    """The slot endpoints of the model's server, over HTTP (with its headers: an API key)."""
    return SlotClient(model.server_root, headers=model.headers)


class SlotKeeper:
    """Saves and restores one session's llama.cpp slot; silent on servers without slots.

    Its inputs: the settings (`slots`, `slot_id`, `slot_dir`, the caps), the current model
    (a /model switch changes it), the session (its id, usage and messages), its directory
    (meta.json records the slot files; None in memory), the tools a request offers (the
    prefix a slot holds includes them), and how to reach the server's slots (`connect`:
    HTTP by default, a fake `SlotServer` in a test).
    """

    def __init__(
        self,
        *,
        settings: Settings,
        model: Callable[[], ChatModel],
        session: Session,
        session_dir: SessionDir | None,
        offered_tools: Callable[[], list[dict[str, Any]]],
        connect: Callable[[OpenAIModel], SlotServer] = connect_slots,
    ) -> None:
        self.settings = settings
        self._model = model
        self.session = session
        self.session_dir = session_dir
        self._offered_tools = offered_tools
        self._connect = connect
        self.state = "unknown"  # "on", "off"
        self.off_reason = ""
        self.slot = self.settings.slots.id
        self._said: set[str] = set()
        self._client: SlotServer | None = None
        self._saved_hash: str | None = None
        self.restored: SlotOutcome | None = None
        self.restore_why = ""
        self.last_save: SlotOutcome | None = None
        #: what the slot held when last asked (`ask_held`): a resume's warm or cold
        self.held: HeldSlot | None = None
        #: a fold was undone: the slot saved before it is restored before the next request
        self.restore_pending: int | None = None
        # the idle save (a worker thread) and the save on quit may overlap
        self._writing = threading.Lock()

    # -- the server ----------------------------------------------------------------

    @property
    def model(self) -> OpenAIModel | None:
        model = self._model()
        return model if isinstance(model, OpenAIModel) else None

    @property
    def slot_dir(self) -> Path | None:
        """Where the slot files are, when tailrent can see them: the `slot_dir` setting, or the
        directory of an engine tailrent runs itself (the embedded engine's)."""
        if self.settings.slots.dir is not None:
            return self.settings.slots.dir
        own = getattr(self.model, "slot_dir", None)
        return own if isinstance(own, Path) else None

    def model_changed(self) -> None:
        """A /model switch: the new server is probed afresh."""
        if self._client is not None:
            self._client.close()
        self._client = None
        self.state = "unknown"
        self.off_reason = ""
        self._saved_hash = None

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def _once(self, key: str, line: str) -> str | None:
        if key in self._said:
            return None
        self._said.add(key)
        return line

    def _turn_off(self, why: str) -> str | None:
        why = redact(why)  # the server's URL may carry credentials (http://user:pass@host)
        self.state = "off"
        self.off_reason = why
        model = self.model
        if model is not None:
            model.id_slot = None
        return self._once("off", f"KV slots off for this session: {why}")

    def probe(self) -> str | None:
        """Ask the server whether it has slots (sync; once). Returns a line to show once, if any."""
        if self.state != "unknown":
            return None
        model = self.model
        if self.settings.slots.save == "off":
            self.state, self.off_reason = "off", "[slots] save = off in the settings"
            return None
        if model is None:
            self.state, self.off_reason = "off", "only llama.cpp's server saves KV slots"
            return None
        if (why := _engine_slots(model)) is not None:
            return self._turn_off(why) if why else None
        self._client = self._connect(model)
        try:
            server = self._client.probe()
        except SlotError as exc:
            if exc.unsupported:
                return self._turn_off(f"{model.server_root} has no slot endpoints ({exc}); resumes re-read the whole context")
            return self._turn_off(f"could not ask {model.server_root} about its slots ({exc})")
        line = None
        if server.total_slots is not None and self.slot >= server.total_slots:
            line = f"[slots] id {self.slot} is past the server's {server.total_slots} slot(s): using slot 0"
            self.slot = 0
        self.state = "on"
        model.id_slot = self.slot
        return line

    def ask_held(self) -> HeldSlot:
        """Ask the server what its slot holds now, against the session's last request (sync).

        A llama.cpp server keeps a slot's KV until another prompt takes the slot or the
        server restarts; its TTL is unknown, so the server is asked instead of a clock.
        """
        held = self._ask_held()
        self.held = held
        return held

    def _ask_held(self) -> HeldSlot:
        if self.state == "unknown":
            self.probe()
        if self.state != "on" or self._client is None:
            return HeldSlot(None)
        return held_slot(self._client, self.slot, self.session.usage)

    def _upcoming(self) -> SentPrompt:
        model = self.model
        assert model is not None
        tools = None if model.tools_dropped else self._offered_tools()
        return rendered_prompt(model.name, wire_messages(self.session), tools)

    def _records(self) -> list[SlotRecord]:
        """The slot files the session's meta records (none when it cannot be read)."""
        if self.session_dir is None:
            return []
        try:
            return list(self.session_dir.read_meta().slots)
        except (OSError, LookupError):
            return []

    # -- restore on resume ----------------------------------------------------------

    def restore(self) -> SlotOutcome | None:
        """Restore the newest matching slot before the first request (sync). None when slots are off."""
        line = self.probe()
        if self.state != "on":
            # an Ollama or mock session, or slots = off: nothing to explain on every resume
            said = self.model is not None and self.settings.slots.save != "off"
            self.restore_why = self.off_reason if said else ""
            return SlotOutcome("restore", line=line, level="warning") if line else None
        outcome = SlotOutcome("restore", extra=[line] if line else [])
        upcoming = self._upcoming()

        def hash_of_first(n: int) -> str | None:
            if n > len(upcoming.messages):
                return None
            return prefix_hash(upcoming.model, upcoming.tools, upcoming.messages[:n])

        slot_dir = self.slot_dir
        exists = (lambda name: (slot_dir / name).is_file()) if slot_dir is not None else None
        choice = choose_restore(self._records(), upcoming.model, hash_of_first, exists=exists)
        if not choice.ok or choice.record is None:
            self.restore_why = choice.reason
            outcome.line = f"no KV slot restored: {choice.reason}"
            outcome.level = "info" if "no slot was saved" in choice.reason else "warning"
            return outcome
        record = choice.record
        damaged = _damaged_slot_file(slot_dir, record, in_process=getattr(self.model, "kind", "") == "embedded")
        if damaged:
            # llama.cpp's engine asserts (GGML_ASSERT) on a short slot file and aborts the whole process
            self.restore_why = damaged
            outcome.line = f"no KV slot restored: {damaged}; the first request re-reads the whole context"
            outcome.level = "warning"
            return outcome
        assert self._client is not None
        try:
            answer = self._client.restore(self.slot, record.file)
        except SlotError as exc:
            if exc.unsupported:
                self._turn_off(f"the server cannot restore slots ({exc}); start it with --slot-save-path DIR/")
                self.restore_why = self.off_reason
            else:
                self.restore_why = f"the server refused to restore {record.file} ({exc})"
            outcome.line = f"no KV slot restored: {self.restore_why}; the first request re-reads the whole context"
            outcome.level = "warning"
            return outcome
        if answer.n_restored == 0:
            self.restore_why = f"the server restored 0 tokens from {record.file}"
            outcome.line = f"no KV slot restored: {self.restore_why}"
            outcome.level = "warning"
            return outcome
        ms = answer.timings.restore_ms if answer.timings else None
        outcome.ok, outcome.file, outcome.tokens, outcome.bytes, outcome.ms = (
            True,
            record.file,
            answer.n_restored,
            answer.n_read,
            ms,
        )
        took = f" in {ms:.0f} ms" if ms is not None else ""
        outcome.line = f"KV slot restored: {answer.n_restored:,} tokens from {record.file}{took}"
        self._saved_hash = record.hash  # the file holds this prefix already
        self.restored = outcome
        return outcome

    # -- save ----------------------------------------------------------------------

    def _plan(self) -> _SavePlan | SlotOutcome | None:
        """What to save now, or why not (None: nothing to say)."""
        if self.state == "unknown":
            line = self.probe()
            if line and self.state == "off":
                return SlotOutcome("save", line=line, level="warning")
        model = self.model
        if self.state != "on" or model is None or self._client is None:
            return None
        sent = model.last_prompt
        if sent is None or sent.id_slot != self.slot:
            return None  # no request has finished through the slot since the start (or the last one failed)
        upcoming = self._upcoming()
        n = len(sent.messages)
        if sent.model != upcoming.model or sent.tools != upcoming.tools or sent.messages != upcoming.messages[:n]:
            # a fold's summary or a delegate ran last: the slot holds their prompt, not the conversation
            return None
        digest = prefix_hash(sent.model, sent.tools, sent.messages)
        if digest == self._saved_hash:
            return None
        file = slot_file_name(self.session.id or "session", digest)
        record = SlotRecord(file=file, hash=digest, messages=n, model=sent.model, saved_at=time.time())
        return _SavePlan(file, record, self._client, self.slot)

    def _write(self, plan: _SavePlan, reason: str) -> SlotOutcome:
        with self._writing:
            if plan.record.hash == self._saved_hash:
                return SlotOutcome("save", ok=True, file=plan.file)
            return self._write_locked(plan, reason)

    def _write_locked(self, plan: _SavePlan, reason: str) -> SlotOutcome:
        outcome = SlotOutcome("save", file=plan.file)
        started = time.perf_counter()
        try:
            answer = plan.client.save(plan.slot, plan.file)
        except SlotError as exc:
            if exc.unsupported:
                outcome.line = self._turn_off(
                    f"the server cannot save slots ({exc}); "
                    "start it with --slot-save-path DIR/ to keep the KV cache across restarts"
                )
            else:
                # a full disk answers 500 with the server's reason: one line, and carry on
                outcome.line = f"KV slot not saved ({reason}): {exc}; carrying on, the next resume re-reads the whole context"
            outcome.level = "warning"
            return outcome
        ms = answer.timings.save_ms if answer.timings else (time.perf_counter() - started) * 1000
        if answer.n_saved <= 0:
            # the slot held nothing (the server restarted, or another client took the slot since our
            # last request): a file of it would claim a prefix it does not hold
            outcome.line = (
                f"KV slot not saved ({reason}): the server's slot held no tokens (restarted, or another client used it); "
                "the next resume re-reads the whole context"
            )
            outcome.level = "warning"
            return outcome
        digest = file_digest(self.slot_dir / plan.file) if self.slot_dir is not None else None
        record = plan.record.model_copy(update={"tokens": answer.n_saved, "bytes": answer.n_written, "digest": digest})
        outcome.ok, outcome.tokens, outcome.bytes, outcome.ms = True, answer.n_saved, answer.n_written, ms
        outcome.line = f"KV slot saved ({reason}): {answer.n_saved:,} tokens, {answer.n_written / MB:.1f} MB in {ms:.0f} ms"
        self._saved_hash = record.hash
        outcome.extra.extend(self._keep(record))
        return outcome

    def _keep(self, record: SlotRecord) -> list[str]:
        """Record the file in meta.json and, with slot_dir, clean up past the caps. Lines to show."""
        notes: list[str] = []
        records = [r for r in self._records() if r.file != record.file] + [record]
        slot_dir = self.slot_dir
        if slot_dir is not None:
            on_disk = scan_slot_dir(slot_dir)
            if not any(f.name == record.file for f in on_disk):
                beside = slot_dir.parent / (slot_dir.name + record.file)
                if beside.exists():
                    why = f"the server wrote it beside [slots] dir, as {beside}: its --slot-save-path lacks a trailing '/'"
                else:
                    why = f"{record.file} is not in [slots] dir {slot_dir}: is that the server's --slot-save-path?"
                notes.extend(filter(None, [self._once("slot_dir", f"slot files not cleaned up: {why}")]))
            else:
                doomed = cleanup_plan(
                    on_disk,
                    keep=record.file,
                    session_cap=SESSION_SLOT_MB * MB,
                    total_cap=TOTAL_SLOT_MB * MB,
                )
                freed, errors = delete_slot_files(slot_dir, doomed)
                gone = {f.name for f in doomed}
                records = [r for r in records if r.file not in gone]
                if doomed:
                    notes.append(f"deleted {len(doomed)} old slot file(s), {freed / MB:.0f} MB, past the caps")
                notes.extend(f"could not delete slot file {e}" for e in errors)
        elif len(records) > 1:
            total = sum(r.bytes for r in records)
            notes.extend(
                filter(
                    None,
                    [
                        self._once(
                            "no [slots] dir",
                            f"{len(records)} slot files of this session (~{total / MB:.0f} MB) stay in the server's slot dir: "
                            "set [slots] dir (the server's --slot-save-path) and tailrent deletes the oldest past the caps",
                        )
                    ],
                )
            )
        sd = self.session_dir
        if sd is not None:
            try:
                sd.update_meta(slots=records)
            except (OSError, LookupError) as exc:
                notes.append(f"the slot file's name could not be kept in meta.json ({exc}); the next resume cannot restore it")
        return notes

    async def save_before_fold(self) -> SlotOutcome | None:
        """Save the slot while it holds the conversation as it is before a fold: `/unfold` restores it
        when the engine's prompt cache no longer holds that prompt. A failure is a warning, once."""
        return await self.save("before a fold")

    async def save(self, reason: str) -> SlotOutcome | None:
        """Save from the event loop: what is sent is read here, the request runs in a thread."""
        plan = self._plan() if self.state != "unknown" else await asyncio.to_thread(self._plan)
        if not isinstance(plan, _SavePlan):
            return plan
        self.last_save = await asyncio.to_thread(self._write, plan, reason)
        return self.last_save


async def save_before_fold(keeper: SlotKeeper | None) -> None:
    """The slot saved before a fold (a fold's first summary request, or its fallback's, is next)."""
    if keeper is None or keeper.state != "on":
        return
    outcome = await keeper.save_before_fold()
    if outcome is not None and not outcome.ok and outcome.line:
        line = keeper._once("save-before-fold", outcome.line)
        if line:
            keeper.session.note(line, "warning")


async def restore_after_unfold(keeper: SlotKeeper | None, rent: RentModel | None) -> None:
    """After `/unfold`, before the next request: the newest slot whose prefix is the context's
    (the one saved before the fold) is restored, so the request reads what came after it, whether or
    not the engine's prompt cache still held the prompt before the fold. Said in one line."""
    if keeper is None or keeper.restore_pending is None:
        return
    session = keeper.session
    fold_no, keeper.restore_pending = keeper.restore_pending, None
    outcome = await asyncio.to_thread(keeper.restore)
    if outcome is None:
        return
    if outcome.ok and outcome.tokens:
        if rent is not None:
            # the slot holds the prompt as it was before the fold: the items that fit in what was restored
            items, held = [], session.head_tokens
            for item in context_items(session):
                if held + item[1] > outcome.tokens:
                    break
                items.append(item)
                held += item[1]
            rent.assume_cached([(HEAD_ID, session.head_tokens), *items], time.time())
        session.note(f"after /unfold {fold_no}: {outcome.line} (the slot saved before the fold)", "info")
    elif outcome.line:
        session.note(f"after /unfold {fold_no}: {outcome.line}", "warning")


# -- the resume's price --------------------------------------------------------------


def price_resume(
    *,
    session: Session,
    rent: RentModel | None,
    keeper: SlotKeeper | None,
    policy: Policy,
    ctx: PolicyContext,
    by_model: bool,
    embedded: bool = False,
    now: float | None = None,
    slot_why_said: bool = False,
) -> ResumePrice:
    """What the first request after this resume will re-read, and what spares it.

    Why no slot was restored joins the price's `why` unless its own line said it already
    (`slot_why_said`): the user reads each reason once. What the server's slot holds
    (`SlotKeeper.held`, asked by `on_resume`) decides warm or cold before any TTL does: a
    llama.cpp server keeps its KV until the slot is reused, however long the pause.

    A cold cache lets the ladder fold first, and it does only when that is cheaper than
    re-reading the whole context, by this estimate (reading the span and writing the summary
    count with the fold): a conversation that fits is not cut to save nothing. `by_model`: a
    model writes the summaries (it reads the span and writes before the first request);
    `embedded`: tailrent started the engine, so nothing of the last request is in its cache.
    """
    now = time.time() if now is None else now
    sheet = rent.sheet if rent is not None else None
    main = [u for u in session.usage if u.sub_session is None]
    last = main[-1].at if main else None
    restored = keeper.restored if keeper is not None else None
    held = keeper.held if keeper is not None else None
    warm, why = False, ""
    if restored is None and last is not None and sheet is not None:
        idle = now - last
        if held is not None and held.warm is not None:
            warm, why = held.warm, (f"idle {idle_words(idle)}; {held.why}" if idle >= 0 else held.why)
        elif embedded:
            # tailrent started this engine: nothing of the last request is in its cache
            warm, why = False, "the embedded engine starts empty"
        elif idle < 0:
            why = f"the clock is {idle_words(-idle)} behind the last request: cannot tell whether the cache is warm, counted cold"
        elif idle < sheet.ttl_seconds:
            warm = True
            if math.isinf(sheet.ttl_seconds):
                why = f"idle {idle_words(idle)}; the server keeps its KV cache until the slot is reused"
                if held is not None and held.why:
                    why += f" ({held.why})"
            else:
                why = f"idle {idle_words(idle)}, inside its TTL of {idle_words(sheet.ttl_seconds)}"
        else:
            why = f"idle {idle_words(idle)}: the cache expired (its TTL is {idle_words(sheet.ttl_seconds)})"
    if restored is None and keeper is not None and keeper.restore_why and not slot_why_said:
        why = f"{why}; no slot restored: {keeper.restore_why}" if why else f"no slot restored: {keeper.restore_why}"
    rate = prompt_rate(session.usage, sheet) if sheet is not None else None
    cold = restored is None and not warm and last is not None
    fold = policy.cold_resume_fold(session, ctx) if cold else None
    by_model = by_model and fold is not None

    def price(with_fold: bool) -> ResumePrice:
        folding = fold if with_fold else None
        return resume_price(
            fold_to=folding.after if folding is not None else None,
            fold_reviewed=ctx.settings.fold_preview == "always",
            summary_read=folding.span_tokens if by_model and folding is not None else 0,
            summary_write=folding.summary_tokens if by_model and folding is not None else 0,
            gen_tokens_per_second=generation_rate(session.usage),
            context_tokens=session.context_tokens,
            restored_tokens=restored.tokens if restored is not None else None,
            warm=warm,
            why=why,
            tokens_per_second=rate.tokens_per_second if rate is not None else None,
            rate_measured=bool(rate and rate.measured),
            input_per_mtok=sheet.input_per_mtok if sheet is not None and sheet.priced else 0.0,
            write_multiplier=sheet.cache_write_multiplier if sheet is not None else 1.0,
            read_multiplier=sheet.cache_read_multiplier if sheet is not None else 1.0,
        )

    plain = price(False)
    if fold is None:
        return plain
    folded = price(True)
    if fold_is_cheaper(folded, plain, sheet, fold.span_tokens if by_model else 0, fold.summary_tokens if by_model else 0):
        return folded
    return plain.model_copy(update={"why": _join(plain.why, _no_fold_why(folded, plain))})


def fold_is_cheaper(folded: ResumePrice, plain: ResumePrice, sheet: Any, read: int, write: int) -> bool:
    """Whether folding first costs the resume less than re-reading the whole context: in dollars
    on a priced sheet (the summary's request counted), else in seconds, else in tokens. A model
    summary whose writing speed is unknown is not assumed cheap."""
    if sheet is not None and sheet.priced and folded.usd is not None and plain.usd is not None:
        summary = (read * sheet.input_per_mtok + write * sheet.output_per_mtok) / 1_000_000
        return folded.usd + summary < plain.usd
    if folded.summary_tokens and folded.summary_seconds is None:
        return False
    if folded.seconds is not None and plain.seconds is not None:
        return folded.seconds < plain.seconds
    return folded.to_read + read + write < plain.to_read


def _no_fold_why(folded: ResumePrice, plain: ResumePrice) -> str:
    if folded.summary_tokens and folded.summary_seconds is None:
        return (
            f"no fold first: a summary of up to {folded.summary_tokens:,} tokens, at a writing speed not measured yet, "
            "is not known to cost less than the re-read"
        )
    if folded.seconds is not None and plain.seconds is not None:
        return f"no fold first: folding to about {folded.to_read:,} would take ~{folded.seconds:.0f} s, not less than the re-read"
    return f"no fold first: folding to about {folded.to_read:,} would not cost less than the re-read"


def _join(first: str, second: str) -> str:
    return f"{first}; {second}" if first else second


def warm_rent_after_restore(rent: RentModel | None, session: Session, now: float) -> None:
    """A restored slot holds the context as it was: the rent model predicts it cached."""
    if rent is not None:
        rent.assume_cached([(HEAD_ID, session.head_tokens), *context_items(session)], now)


def idle_words(seconds: float) -> str:
    """An idle time as said: 45 s, 12 min, 1.5 h, 2.3 days."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


async def check_held(keeper: SlotKeeper | None, rent: RentModel | None, now: float) -> str | None:
    """Before a request after a pause (`HELD_CHECK_IDLE`), ask whether the server's slot still
    holds the context; when it does not (a restart, another client), the rent predicts the
    request cold. The line to show, if any."""
    if keeper is None or keeper.state != "on" or rent is None or rent.last_at is None:
        return None
    if now - rent.last_at < HELD_CHECK_IDLE:
        return None
    held = await asyncio.to_thread(keeper.ask_held)
    if held.warm is not False:
        return None
    rent.expire()
    return f"{held.why}: this request re-reads the whole context"


async def on_start(keeper: SlotKeeper | None, session: Session) -> str | None:
    """Ask the server about its slots once per model, so requests are pinned from the first; the line to say once."""
    if keeper is None or keeper.state != "unknown":
        return None
    line = await asyncio.to_thread(keeper.probe)
    if line:
        session.note(line, "info")
    return line


@dataclass
class Resumed:
    """What `on_resume` found: the lines to show, the first request's price, whether the ladder folds first."""

    lines: list[tuple[str, str]]
    price: ResumePrice
    cold_resume: bool


async def on_resume(
    keeper: SlotKeeper | None,
    *,
    session: Session,
    rent: RentModel | None,
    cold_resume: bool,
    policy: Policy,
    ctx: Callable[[], PolicyContext],
    by_model: bool,
    embedded: bool = False,
) -> Resumed:
    """Restore the slot (if any) and price the first request; the lines are noted in the session too.
    `cold_resume` comes in as the build judged it and goes out as the slot and the price leave it."""
    lines: list[tuple[str, str]] = []
    # slots off: the probe's line ("KV slots off for this session: ...") said why, on start
    said = keeper is not None and keeper.state == "off"
    # a slot that still holds the conversation needs no restore (a server left running overnight)
    held = await asyncio.to_thread(keeper.ask_held) if keeper is not None else None
    if keeper is not None and held is not None and held.warm is not True:
        outcome = await asyncio.to_thread(keeper.restore)
        if outcome is not None:
            lines += [(extra, "warning") for extra in outcome.extra]
            if outcome.line and not outcome.ok and outcome.level == "warning":
                lines.append((outcome.line, "warning"))
                said = True
            if outcome.ok:
                warm_rent_after_restore(rent, session, time.time())
                cold_resume = False  # the cache is warm again: no fold "at no extra cost" now
                lines.append((outcome.line or "", "info"))
        if keeper.restored is None and held.warm is False and rent is not None:
            rent.expire()
            cold_resume = True
    # the policy context is read after the restore: a slot restored changes what a fold would save
    price = price_resume(
        session=session,
        rent=rent,
        keeper=keeper,
        policy=policy,
        ctx=ctx(),
        by_model=by_model,
        embedded=embedded,
        slot_why_said=said,
    )
    if cold_resume and price.saver != "fold":
        # folding first would not cost less than re-reading: the conversation stays as it is
        cold_resume = False
    lines.append((price.line(), "info"))
    for text, level in lines:
        session.note(text, level)
    return Resumed(lines, price, cold_resume)


def _engine_slots(model: Any) -> str | None:
    """The embedded engine's say on slots: "" before it listens (asked once it does), why it keeps
    none (its slot dir refused), or None (any other server: ask it)."""
    if getattr(model, "started", True) is False:
        return ""
    refused = getattr(model, "slots_refused", None)
    return f"{refused}; resumes re-read the whole context" if refused else None


#: the first bytes of a llama.cpp slot file ("ggsq", LLAMA_STATE_SEQ_MAGIC, little-endian)
SLOT_MAGIC = b"qsgg"


def file_digest(path: Path) -> str | None:
    """sha256 of a regular file (not followed through a symlink); None when it cannot be read."""
    import hashlib

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None
        h = hashlib.sha256()
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _damaged_slot_file(slot_dir: Path | None, record: SlotRecord, *, in_process: bool = False) -> str | None:
    """Why the slot file of `record` must not be handed to the server to restore; None when it looks whole.

    Checked only where tailrent can see the slot dir: a symlink, a file that is not regular, one
    that is not a llama.cpp slot file, one whose size is not what the server reported writing (cut
    short by a full disk), or whose content is not what it wrote (another session's or another
    model's slot under this name, a flipped bit). llama.cpp aborts its process (GGML_ASSERT) on a
    short file: with the engine in this process (`in_process`), a record that cannot be checked
    (no size, from an older tailrent) is not restored either."""
    if slot_dir is None:
        return None
    path = slot_dir / record.file
    try:
        st = os.lstat(path)
    except OSError:
        return None  # gone: choose_restore has said so where it can
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISREG(st.st_mode):
        return f"{record.file} in the slot dir is not a regular file"
    if record.bytes and st.st_size != record.bytes:
        return (
            f"{record.file} in the slot dir is {st.st_size:,} bytes, not the {record.bytes:,} the server wrote "
            "(cut short or replaced)"
        )
    try:
        with open(path, "rb") as f:
            head = f.read(len(SLOT_MAGIC))
    except OSError as exc:
        return f"{record.file} in the slot dir cannot be read ({exc.strerror or exc})"
    if head != SLOT_MAGIC:
        return f"{record.file} in the slot dir is not a llama.cpp slot file"
    if record.digest is not None and file_digest(path) != record.digest:
        return (
            f"{record.file} in the slot dir is not the file the server wrote (its content changed: another "
            "session's or another model's slot, or damage)"
        )
    if in_process and not record.bytes and record.digest is None:
        return (
            f"{record.file} has no recorded size to check it against, and a short slot file would abort "
            "the embedded engine (and tailrent with it)"
        )
    return None


def held_slot(client: SlotServer, slot: int, usage: list[UsageRecorded]) -> HeldSlot:
    """What the server's slot holds against the session's last request (GET /slots)."""
    last = next((u for u in reversed(usage) if u.prompt_tokens), None)
    if last is None or last.prompt_tokens is None:
        return HeldSlot(None)
    try:
        tokens = client.held_tokens(slot)
    except SlotError as exc:
        return HeldSlot(None, f"could not ask the server what its slot holds ({redact(str(exc))})")
    if tokens is None:
        return HeldSlot(None, "the server does not list what its slot holds (GET /slots is off)")
    if tokens == 0:
        return HeldSlot(False, "the server's slot is empty: it was started since the last request", 0)
    low, high = last.prompt_tokens, last.prompt_tokens + (last.output_tokens or 0)
    if low - HELD_SLACK <= tokens <= high + HELD_SLACK:
        return HeldSlot(True, f"the server's slot still holds the last request's {tokens:,} tokens", tokens)
    return HeldSlot(False, f"the server's slot holds {tokens:,} tokens of another prompt (another client used it)", tokens)
