"""Putting an Agent together: settings, the session directory, the model, the stores.

`build_agent` is the opening half of `agent/lifecycle.py:open_agent`, which every
caller uses (it closes on every exit path). It opens (or resumes) the session directory, takes its lock, replays the
journal, and opens the model (`models.factory.open_model`) — the one asked for,
else Ollama if it answers at OLLAMA_HOST within a short timeout, else the
embedded engine when it is installed, else the mock, with a notice saying which
and how to connect a real model. Model clients open their HTTP connections
lazily, on the loop that uses them; the embedded engine starts on first use too
(after the app's first frame).

It also picks what counts tokens. With `tokenizer = "auto"`, a new session on
a server that can count (llama.cpp) counts with the server's own tokenizer and
the framing its chat template adds, measured once and kept in meta.json: the
context then holds what the server will count. A resume counts as its session
did.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tailrent_tui.agent.kv_slots import idle_words
from tailrent_tui.agent.loop import Agent
from tailrent_tui.agent.startup import model_options, model_spec_of, pick_summarizer, price_sheet_for, server_counter
from tailrent_tui.agent.tools import offered_tools
from tailrent_tui.agent.tools.caps import ToolCaps
from tailrent_tui.agent.wire import wire_messages
from tailrent_tui.core.guard import DecisionDetector
from tailrent_tui.core.rent import HEAD_ID, RentModel, context_items, session_user_start
from tailrent_tui.core.session import Session
from tailrent_tui.core.tokens import Framing, TokenCounter, UnknownTokenizer, get_counter
from tailrent_tui.models.base import ChatModel, WireMessage
from tailrent_tui.models.embedded import EmbeddedModel
from tailrent_tui.models.factory import CannotOpenModel, open_model
from tailrent_tui.models.openai import OpenAIModel
from tailrent_tui.models.text import redact
from tailrent_tui.models.tokenizer import PROBE, TokenizerUnavailable, measure_framing, server_tokenizer
from tailrent_tui.settings import Settings
from tailrent_tui.store.journal import JournalError
from tailrent_tui.store.paths import resolve_data_dir
from tailrent_tui.store.sessions import (
    OpenedSession,
    SessionDir,
    close_session_sync,
    last_request_at,
    open_session,
    rescue_files,
    resolve_session,
    session_dirs,
)


class BuildError(RuntimeError):
    """The agent could not be built (unknown session, bad model spec, a locked session); one line for the user."""


def decision_detector(settings: Settings) -> DecisionDetector | None:
    if settings.policy not in ("ladder", "naive-pin"):
        return None
    if settings.fold.decision_patterns is not None:
        return DecisionDetector(settings.fold.decision_patterns)
    return DecisionDetector()


@dataclass
class Counting:
    """How a new session counts tokens: the counter, the name meta records, what the server adds."""

    counter: TokenCounter
    tokenizer: str
    framing: Framing = field(default_factory=Framing)
    tool_schema_tokens: int = 0


def framing_probes() -> dict[str, WireMessage]:
    """One transcript message of each role holding PROBE, as the agent sends it."""
    probe = Session(counter=get_counter("chars4"))
    for role in ("user", "assistant", "system", "tool"):
        # a tool result with no call of its own: the `!cmd` path, the one that needs no tool-calling model
        extra: dict[str, Any] = {"tool": "run_shell"} if role == "tool" else {}
        probe.add(role, PROBE, autopin=False, **extra)
    return {m.role: w for m, w in zip(probe.messages, wire_messages(probe), strict=True)}


def pick_counting(settings: Settings, model: ChatModel) -> Counting:
    """`auto`: the server's own tokenizer and framing when it can count (llama.cpp), else cl100k."""
    name = settings.tokenizer
    # the embedded engine is not running yet (it starts after the first frame): it cannot count for a new session
    if name == "auto" and isinstance(model, OpenAIModel) and not isinstance(model, EmbeddedModel):
        server = server_tokenizer(model)
        try:
            framing, schema = measure_framing(server, framing_probes(), system=settings.system_prompt, tools=offered_tools())
            return Counting(server, server.name, framing, schema)
        except TokenizerUnavailable:
            server.close()  # not llama.cpp (or too old to render its template): count like cl100k
    if name == "auto":
        name = "cl100k"
    return Counting(get_counter(name), name, tool_schema_tokens=tool_schema_tokens(name))


def build_agent(
    settings: Settings,
    flags: dict[str, Any] | None = None,
    *,
    async_writer: bool = True,
    new: bool = False,
    title: str | None = None,
    told: set[str] | None = None,
    caps: ToolCaps | None = None,
) -> Agent:
    """Open or create the session the flags name and the model the settings name.

    A resumed session reopens with its own model and workspace unless `told` names
    `model` / `workspace` (a flag or the environment set them: `told_keys`), and says
    so when they differ from what this start would have used. `caps` replaces the tools'
    output caps (tests shrink them); unset, they are the fixed ones with [tools] shell_timeout.
    """
    flags = flags or {}
    data_dir = resolve_data_dir(settings.data_dir)
    sd: SessionDir | None = None
    if not new:
        try:
            sd = resolve_session(data_dir, continue_=bool(flags.get("continue_")), resume=flags.get("resume"))
        except LookupError as exc:
            raise BuildError(str(exc)) from None
    reopen: list[str] = []
    if sd is not None:
        # called with settings alone (tests, the bench), what they set counts as told
        given = told if told is not None else {k for k in ("model", "workspace") if getattr(settings, k) is not None}
        settings, reopen = reopen_as_before(settings, sd, told=given)
    workspace = Path(settings.workspace or os.getcwd()).resolve()
    if not workspace.is_dir():
        raise BuildError(f"workspace {workspace} is not a directory")
    try:
        model, notice = open_model(settings.model, model_options(settings))
    except CannotOpenModel as exc:
        raise BuildError(str(exc)) from None
    detector = decision_detector(settings)
    counter, counting_warning = None, None
    created = sd is None
    pruned = 0
    if sd is None:
        pruned = prune_unanswered(data_dir)
        try:
            counting = pick_counting(settings, model)
        except (OSError, UnknownTokenizer) as exc:  # the tokenizer's files (a full disk, no usable temp dir)
            reason = _os_reason(exc) if isinstance(exc, OSError) else str(exc)
            raise BuildError(f"cannot load the token counter: {reason}") from None
        counter = counting.counter
        try:
            sd = SessionDir.create(
                data_dir,
                title=title or "",
                model=getattr(model, "name", "mock"),
                workspace=workspace,
                policy=settings.policy,
                window=settings.window or 32768,
                tokenizer=counting.tokenizer,
                framing=counting.framing,
                system=settings.system_prompt,
                tool_schema_tokens=counting.tool_schema_tokens,
            )
        except OSError as exc:
            raise BuildError(
                f"cannot create a session in {data_dir}: {_os_reason(exc)}; free some space or make it writable, "
                "or set TAILRENT_HOME to another directory"
            ) from None
    else:
        try:
            counter, counting_warning = server_counter(sd.read_meta().tokenizer, model)
        except LookupError as exc:
            raise BuildError(str(exc)) from None
    try:
        opened = open_session(sd, decisions=detector, fsync=settings.fsync, async_writer=async_writer, counter=counter)
    except (RuntimeError, JournalError, OSError) as exc:
        if created:
            shutil.rmtree(sd.path, ignore_errors=True)  # nothing of the user's is in it yet: no orphan
        if isinstance(exc, OSError):
            raise BuildError(f"cannot open session {sd.id} in {data_dir}: {_os_reason(exc)}") from None
        raise BuildError(str(exc)) from None
    if counting_warning:
        opened.warnings.append(counting_warning)
    opened.warnings.extend(reopen)
    if pruned:
        opened.warnings.append(
            f"removed {pruned} earlier session(s) that held one unanswered message (a failed first turn); "
            "what you typed is in the input's history (up)"
        )
    spec = model_spec_of(settings.model, model)
    try:
        if spec != sd.read_meta().model_spec or str(workspace) != sd.read_meta().workspace:
            sd.update_meta(model_spec=spec, workspace=str(workspace))
    except (OSError, LookupError):
        pass  # the next resume falls back to this start's model and folder, and says so
    try:
        return _agent_for(settings, opened, model, workspace, notice, caps)
    except BaseException:
        # the lock is held from here on: a failed build must not leave the session looking open
        close_session_sync(opened)
        raise


#: how many of the newest sessions a new one looks through for unanswered ones to remove
PRUNE_LOOKBACK = 50


def prune_unanswered(data_dir: Path) -> int:
    """Remove recent sessions that hold one message and no reply (a first turn that failed, or an
    app closed before the reply), so they do not pile up; a new session replaces the one a
    `--continue` would have retried. Sessions open elsewhere are left alone. How many went."""
    removed = 0
    for sd in session_dirs(data_dir)[-PRUNE_LOOKBACK:]:
        try:
            info = sd.info()
        except (LookupError, OSError):
            continue
        if info.error is not None or info.messages != 1 or info.folds or rescue_files(sd):
            continue
        try:
            lock = sd.acquire_lock()
        except (RuntimeError, OSError):
            continue  # open in another tailrent
        try:
            shutil.rmtree(sd.path)
            removed += 1
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                lock.release()
    return removed


def told_keys(sources: dict[str, str]) -> set[str]:
    """The settings a flag or the environment gave for this start (config files are defaults)."""
    return {key for key, where in sources.items() if where.startswith(("--", "$"))}


def reopen_as_before(settings: Settings, sd: SessionDir, *, told: set[str]) -> tuple[Settings, list[str]]:
    """The settings a resume runs with: the session's model and workspace unless told otherwise;
    lines that say what differs from the session's own."""
    try:
        meta = sd.read_meta()
    except (OSError, LookupError):
        return settings, []
    lines: list[str] = []
    updates: dict[str, Any] = {}
    if meta.model_spec and "model" not in told:
        if settings.model != meta.model_spec:
            updates["model"] = meta.model_spec
            if settings.model:
                lines.append(
                    f"resumed on the session's model {meta.model_spec}, not {redact(settings.model)}: pass --model to change"
                )
    elif "model" in told and meta.model_spec and settings.model != meta.model_spec:
        lines.append(f"this session ran on {meta.model_spec}; now on {redact(settings.model or 'auto')} (--model)")
    elif not meta.model_spec and "model" not in told and meta.model and settings.model is None:
        lines.append(f"this session ran on {meta.model}, which tailrent cannot reopen by itself: pass --model to use it again")
    here = Path(settings.workspace or os.getcwd()).resolve()
    if meta.workspace and Path(meta.workspace) != here:
        began = Path(meta.workspace)
        if "workspace" in told:
            lines.append(f"this session began in {began}; working in {here} (--workspace)")
        elif began.is_dir():
            updates["workspace"] = began
            lines.append(f"working in {began}, where this session began (you are in {here}): pass --workspace to change")
        else:
            lines.append(f"this session began in {began}, which no longer exists (moved or deleted): working in {here}")
    return (settings.model_copy(update=updates) if updates else settings), lines


def _os_reason(exc: OSError) -> str:
    """What an OSError says, and about which file, in one line."""
    reason = exc.strerror or str(exc)
    return f"{reason} ({exc.filename})" if exc.filename else reason


def _agent_for(
    settings: Settings,
    opened: OpenedSession,
    model: ChatModel,
    workspace: Path,
    notice: str | None,
    caps: ToolCaps | None = None,
) -> Agent:
    session, sd = opened.session, opened.session_dir
    replayed_notes = len(session.notes)
    if isinstance(model, EmbeddedModel):
        # tailrent owns the engine, so its KV slots go in the session's directory: no setup
        model.slot_dir = embedded_slot_dir(sd.path)
    if settings.window and settings.window != session.window:
        session.window = settings.window
        sd.update_meta(window=settings.window)
    sheet = price_sheet_for(settings, model)
    rent = RentModel(sheet)
    rent.user_start = session_user_start(session)  # where llama.cpp takes context checkpoints (SWA models)
    last = last_request_at(session)
    cold_resume = False
    if last is not None:
        idle = time.time() - last
        # a clock behind the last request (a jump back) says nothing about the cache: counted cold;
        # the embedded engine starts with this process, so it holds nothing of an earlier one
        if 0 <= idle < sheet.ttl_seconds and not isinstance(model, EmbeddedModel):
            # resumed inside the TTL: the server may still hold this context
            rent.assume_cached([(HEAD_ID, session.head_tokens), *context_items(session)], last)
        else:
            cold_resume = True
            if isinstance(model, EmbeddedModel):
                session.note(
                    f"resumed after {idle_words(max(idle, 0.0))}: the embedded engine starts empty, so unless a saved KV "
                    "slot is restored the next request reads the whole context (see the resume line)",
                    "info",
                )
            elif idle >= 0:
                session.note(
                    f"resumed after {idle_words(idle)} idle, past the cache TTL ({idle_words(sheet.ttl_seconds)}): "
                    "unless a saved KV slot is restored, the next request writes the prefix again (see the resume line)",
                    "info",
                )
    agent = Agent(
        session=session,
        model=model,
        settings=settings,
        workspace=workspace,
        spill_store=sd.spills(),
        archive=sd.archive(),
        memory=sd.memory(),
        journal=opened.writer,
        session_dir=sd,
        opened=opened,
        summarizer=pick_summarizer(settings, model),
        notice=notice,
        rent=rent,
        instructions=True,
        caps=caps,
        slots=True,
        resumed=last is not None,
        cold_resume=cold_resume,
    )
    agent.mcp = mcp_hub(settings, workspace, session)
    for warning in opened.warnings:
        session.note(warning, "warning")
    if session.detect_statements and not session.statements and len(session):
        # journaled before the ledger existed: its statements are found in its messages, once
        found = session.rebuild_ledger()
        if found:
            session.note(f"the ledger was built from this session's {len(session):,} messages: {found:,} statements", "info")
    # written before the app listens to the session: it shows them when it opens
    agent.startup_notes = session.notes[replayed_notes:]
    return agent


def mcp_hub(settings: Settings, workspace: Path, session: Session) -> Any:
    """The session's MCP servers (not started: the app starts them after its first frame); None without any."""
    if not settings.mcp.servers and not settings.mcp.project_file:
        return None
    from tailrent_tui.agent.mcp import hub_for
    from tailrent_tui.settings import config_file

    hub = hub_for(settings, {"mcp": str(config_file())}, workspace, session)
    return hub if hub else None


def embedded_slot_dir(session_path: Path) -> Path:
    """Where the embedded engine saves this session's KV slots."""
    return session_path / "slots"


def tool_schema_tokens(tokenizer: str) -> int:
    """Tokens of the tool schema sent with every request (part of the head), as JSON."""
    import json

    from tailrent_tui.models.base import wire_tools

    return get_counter(tokenizer).count(json.dumps(wire_tools(offered_tools())))
