"""`tailrent ask`: one headless turn through the same agent the TUI uses.

In four steps: the command line read and checked (`_read_request`), the session opened and the
turn run in it (`_run`, `_turn`), then what happened said (`_report`): the reply, or `--json`,
and for a failure one line with what became of the message, never a traceback.
"""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import click

from tailrent_tui.commands._common import MODEL_SPECS_HELP
from tailrent_tui.text import json_visible, storable, visible

if TYPE_CHECKING:
    from tailrent_tui.agent.closing import CloseLine
    from tailrent_tui.agent.events import ApprovalRequest, TurnCallbacks, TurnResult
    from tailrent_tui.agent.loop import Agent
    from tailrent_tui.settings import Settings
    from tailrent_tui.store.sessions import CloseReport


@dataclass
class _Request:
    """The command line, read and checked."""

    prompt: str
    settings: Settings
    sources: dict[str, str]
    flags: dict[str, Any]
    continue_: bool
    resume: str | None
    as_json: bool

    @property
    def streamed(self) -> bool:
        """The reply is printed as it comes (a terminal, not --json)."""
        return not self.as_json and sys.stdout.isatty()


@dataclass
class _Ran:
    """What running the turn came to."""

    agent: Agent
    result: TurnResult | None
    #: what failed besides the journal, as (message, hint)
    problem: tuple[str, str] | None
    interrupted: bool
    exit_code: int
    #: the session's messages before this turn: did the prompt get in before a failure?
    known: set[str] = field(default_factory=set)


@click.command()
@click.argument("prompt")
@click.option("--model", "model", metavar="SPEC", help=MODEL_SPECS_HELP)
@click.option("--continue", "continue_", is_flag=True, help="Continue the last active session (default: a new one).")
@click.option("--resume", "resume", metavar="ID", help="Continue the session with this id (or a unique prefix of it).")
@click.option(
    "--json", "as_json", is_flag=True, help="Print the reply with usage as the server reported it and the rent as predicted."
)
@click.pass_context
def ask(ctx: click.Context, prompt: str, model: str | None, continue_: bool, resume: str | None, as_json: bool) -> None:
    """Send PROMPT, print the reply. Every turn is recorded in a session.

    Tools that change things (run_shell, write_file, edit_file) are denied
    unless --yolo is given, since there is nobody to ask.
    """
    request = _read_request(ctx, prompt, model, continue_, resume, as_json)
    ran = _run(request)
    _report(request, ran)


# -- the command line -------------------------------------------------------------------------


def _read_request(
    ctx: click.Context, prompt: str, model: str | None, continue_: bool, resume: str | None, as_json: bool
) -> _Request:
    from tailrent_tui.settings import SettingsError, load_settings

    flags = dict(ctx.obj or {})
    if model:
        flags["model"] = model
    continue_ = continue_ or bool(flags.get("continue_"))
    # `tailrent --resume ID ask ...` and `tailrent ask --resume ID ...` alike
    resume = resume or flags.get("resume")
    if resume == "":
        raise click.UsageError("--resume needs a session id here (`tailrent sessions` lists them); the picker is the app's")
    try:
        settings, sources, warnings = load_settings(flags)
    except SettingsError as exc:
        raise click.ClickException(str(exc)) from None
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)
    # argv bytes that are not UTF-8 arrive as surrogate escapes, which no journal line holds
    prompt = storable(prompt)
    if not prompt.strip():
        raise click.UsageError("the prompt is empty")
    return _Request(prompt, settings, sources, flags, continue_, resume, as_json)


# -- the turn ----------------------------------------------------------------------------------


def _callbacks(streamed: bool) -> TurnCallbacks:
    from tailrent_tui.agent.events import TurnCallbacks

    async def deny(request: ApprovalRequest) -> Literal["deny"]:
        click.echo(f"[denied {request.tool}: `tailrent ask` cannot ask you; pass --yolo to allow]", err=True)
        return "deny"

    return TurnCallbacks(
        on_text=(lambda t: click.echo(visible(t), nl=False)) if streamed else (lambda t: None),
        on_notice=lambda text, level: click.echo(visible(f"[{level}] {text}"), err=True),
        approve=deny,
    )


def _say_closing(line: CloseLine) -> None:
    # the journal's close report is worded by `_report`, with what it means for the turn
    if line.about != "journal":
        click.echo(f"[{line.level}] {line.text}", err=True)


async def _start(agent: Agent) -> None:
    """What the app does after its first frame: the notices, the model's start (the KV slot restored,
    the resume priced), the MCP servers (nobody watches a first frame here: the turn waits for them)."""
    if agent.notice:
        click.echo(agent.notice, err=True)
    for note in agent.startup_notes:
        if note.level != "info":  # what the app shows in its transcript at start: another model, folder, counter
            click.echo(f"[{note.level}] {note.text}", err=True)
    await agent.link.start()
    for text, level in [*agent.link.start_lines, *agent.link.resume_lines]:
        click.echo(f"[{level}] {text}", err=True)
    if agent.mcp is not None:
        await agent.mcp.start()  # each server bounded
        await agent.mcp.wait_ready()
        for line in agent.mcp.failures():
            click.echo(f"[warning] mcp: {line}", err=True)


async def _turn(request: _Request, opened: list[Agent], known: set[str]) -> TurnResult:
    from tailrent_tui.agent.build import told_keys
    from tailrent_tui.agent.lifecycle import open_agent

    async with open_agent(
        request.settings,
        {**request.flags, "continue_": request.continue_, "resume": request.resume},
        async_writer=False,
        new=not (request.continue_ or request.resume),
        told=told_keys(request.sources),
        reason="end of ask",
        say=_say_closing,
    ) as agent:
        opened.append(agent)
        known.update(m.id for m in agent.session.messages)
        await _start(agent)
        return await agent.turn(request.prompt, _callbacks(request.streamed))


def _run(request: _Request) -> _Ran:
    """The turn in its session. Every failure ends the same way (a model error, a bug in a tool, the
    loop or a store, ctrl+c, SIGTERM): a problem to report, and the session closed."""
    from tailrent_tui.agent.build import BuildError
    from tailrent_tui.agent.lifecycle import Signalled
    from tailrent_tui.models.errors import ModelError

    opened: list[Agent] = []
    known: set[str] = set()
    result: TurnResult | None = None
    problem: tuple[str, str] | None = None
    interrupted = False
    exit_code = 1
    try:
        result = asyncio.run(_turn(request, opened, known))
    except BuildError as exc:
        raise click.ClickException(str(exc)) from None
    except KeyboardInterrupt:
        interrupted, problem = True, ("interrupted", "")
    except Signalled as exc:
        problem, exit_code = (str(exc), ""), exc.exit_code
    except ModelError as exc:  # raised before the turn (a model that cannot start); the turn reports its own
        problem = (exc.message, exc.hint)
    except Exception as exc:
        problem = (f"the turn failed: {type(exc).__name__}: {' '.join(str(exc).split())}".rstrip(": "), "")
    if not opened:  # not even opened: interrupted while the session was being built
        raise click.ClickException(problem[0] if problem else "the session could not be opened")
    if result is not None and result.error is not None:
        problem = (result.error.message, result.error.hint)
    return _Ran(opened[0], result, problem, interrupted, exit_code, known)


# -- what happened ------------------------------------------------------------------------------


def _report(request: _Request, ran: _Ran) -> None:
    """The reply (or --json), and for a failure one line with what became of the message; the exit code."""
    closing = ran.agent.closing
    report = closing.report if closing is not None else None
    # what the journal could not take: the turn is not saved, whatever the model said
    unsaved = report.message() if report is not None and not report.saved else None
    meta_warning = report.message() if report is not None and report.saved else None
    if meta_warning:
        click.echo(f"[warning] {meta_warning}", err=True)
    error = _error(ran, report, unsaved)
    if request.as_json:
        out = _as_json(request, ran, report, unsaved, meta_warning, error)
        click.echo(json_visible(json.dumps(out, indent=2, ensure_ascii=False)))
    else:
        _print_reply(request, ran)
    if error is None:
        return
    if unsaved is not None:
        # the close report: what the journal lacks and the rescue file that holds it
        click.echo(f"error: {error['message']}", err=True)
    else:
        _say_failure(ran, report)
    if ran.interrupted:
        raise click.Abort()
    sys.exit(ran.exit_code)


def _print_reply(request: _Request, ran: _Ran) -> None:
    """The reply, when it was not streamed as it came (then the line it ended on)."""
    reply = ran.result.reply if ran.result is not None else None
    if request.streamed:
        click.echo()
    elif reply is not None:
        click.echo(visible(reply.content))


def _error(ran: _Ran, report: CloseReport | None, unsaved: str | None) -> dict[str, Any] | None:
    """The error `--json` gives and the exit reports: the journal's loss first, else the turn's problem."""
    problem, session_id = ran.problem, ran.agent.session.id
    if unsaved is None:
        return {"message": problem[0], "hint": problem[1]} if problem is not None else None
    rescued = report is not None and report.rescue is not None and report.rescue.saved
    hint = (
        f"the turn is not saved in session {session_id}; free some space, then `tailrent ask --continue ...` "
        f"or `tailrent --resume {session_id}` restores it from the rescue file"
        if rescued
        else f"the turn is not saved in session {session_id} and could not be kept anywhere on disk; "
        "the reply printed here is all that is left of it: free some space before the next turn"
    )
    return {"message": unsaved if problem is None else f"{problem[0]}; {unsaved}", "hint": hint}


def _slot(agent: Agent) -> dict[str, Any] | None:
    """The KV slot's save at the close and its restore at the start, as `--json` gives them."""
    slot: dict[str, Any] = {}
    closing = agent.closing
    if closing is not None and closing.slot is not None:
        slot["save"] = closing.slot.as_json()
    keeper = agent.slots
    if keeper is not None and keeper.restored is not None:
        slot["restore"] = keeper.restored.as_json()
    elif keeper is not None and keeper.restore_why:
        slot["restore"] = {"action": "restore", "ok": False, "message": keeper.restore_why}
    return slot or None


def _as_json(
    request: _Request,
    ran: _Ran,
    report: CloseReport | None,
    unsaved: str | None,
    meta_warning: str | None,
    error: dict[str, Any] | None,
) -> dict[str, Any]:
    from tailrent_tui.core.rent import conversation_usage

    agent, result = ran.agent, ran.result
    link = agent.link
    notices = [text for text, _ in [*link.start_lines, *link.resume_lines]] + (list(result.notices) if result else [])
    if meta_warning:
        notices.append(meta_warning)
    # the turn's own rent: a fold after the reply adds its summary's request later
    turns = conversation_usage(agent.session.usage)
    last = turns[-1] if turns else None
    reply = result.reply if result is not None else None
    return {
        "session": None if report is not None and report.discarded else agent.session.id,
        "reply": reply.content if reply else None,
        "saved": unsaved is None,
        "usage": [u.model_dump(mode="json", exclude={"raw"}) for u in result.usage] if result else [],
        "rent": None
        if last is None
        else {
            "context_tokens": last.context_tokens,
            "predicted_cached": last.predicted_cached,
            "predicted_evaluated": last.predicted_evaluated,
            "predicted_usd": last.predicted_usd,
            "price_sheet": request.settings.price_sheet,
        },
        "notices": notices,
        "resume": link.resume_price.model_dump() if link.resume_price is not None else None,
        "slot": _slot(agent),
        "error": error,
    }


def _say_failure(ran: _Ran, report: CloseReport | None) -> None:
    """The turn's problem in one line, its hint, and what became of the user's message."""
    assert ran.problem is not None
    message, hint = ran.problem
    session = ran.agent.session
    sent = any(m.role == "user" and m.id not in ran.known for m in session.messages)
    if report is not None and report.discarded:
        kept = "Nothing was recorded: the session had no message yet."
    elif sent:
        kept = (
            f"Your message is kept in session {session.id}; "
            f"retry with `tailrent ask --continue ...` or open it with `tailrent --resume {session.id}`."
        )
    else:
        kept = f"Your message was not sent; session {session.id} is as it was."
    click.echo(f"error: {message}" + (f"\nhint: {hint}" if hint else "") + f"\n{kept}", err=True)


COMMANDS = [ask]
