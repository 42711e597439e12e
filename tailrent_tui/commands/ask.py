"""`tailrent ask`: one headless turn through the same agent the TUI uses."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any, Literal

import click

from tailrent_tui.commands._common import MODEL_SPECS_HELP
from tailrent_tui.text import json_visible, storable, visible


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
    from tailrent_tui.agent.build import BuildError, told_keys
    from tailrent_tui.agent.lifecycle import CloseLine, Signalled, open_agent
    from tailrent_tui.agent.loop import Agent, ApprovalRequest, TurnCallbacks, TurnResult
    from tailrent_tui.core.rent import conversation_usage
    from tailrent_tui.models.errors import ModelError
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

    async def deny(request: ApprovalRequest) -> Literal["deny"]:
        click.echo(f"[denied {request.tool}: `tailrent ask` cannot ask you; pass --yolo to allow]", err=True)
        return "deny"

    streamed = not as_json and sys.stdout.isatty()
    cb = TurnCallbacks(
        on_text=(lambda t: click.echo(visible(t), nl=False)) if streamed else (lambda t: None),
        on_notice=lambda text, level: click.echo(visible(f"[{level}] {text}"), err=True),
        approve=deny,
    )

    def say(line: CloseLine) -> None:
        # the journal's close report is worded below, with what it means for the turn
        if line.about != "journal":
            click.echo(f"[{line.level}] {line.text}", err=True)

    opened: list[Agent] = []
    # the session's messages before this turn: did the prompt get in before a failure?
    known: set[str] = set()

    async def run() -> TurnResult:
        async with open_agent(
            settings,
            {**flags, "continue_": continue_, "resume": resume},
            async_writer=False,
            new=not (continue_ or resume),
            told=told_keys(sources),
            reason="end of ask",
            say=say,
        ) as agent:
            opened.append(agent)
            known.update(m.id for m in agent.session.messages)
            if agent.notice:
                click.echo(agent.notice, err=True)
            for note in agent.startup_notes:
                if note.level != "info":  # what the app shows in its transcript at start: another model, folder, counter
                    click.echo(f"[{note.level}] {note.text}", err=True)
            # before the first request: restore the KV slot, say what the resume costs
            await agent.link.start()
            for text, level in [*agent.link.start_lines, *agent.link.resume_lines]:
                click.echo(f"[{level}] {text}", err=True)
            if agent.mcp is not None:
                # nobody watches a first frame here: the turn waits for the servers (each bounded)
                await agent.mcp.start()
                await agent.mcp.wait_ready()
                for line in agent.mcp.failures():
                    click.echo(f"[warning] mcp: {line}", err=True)
            return await agent.turn(prompt, cb)

    result: TurnResult | None = None
    # what failed besides the journal, as (message, hint): a model error, a bug in a tool, the loop or a
    # store, ctrl+c, SIGTERM. Every failure ends the same way: one line, the close report, never a traceback
    problem: tuple[str, str] | None = None
    interrupted = False
    exit_code = 1
    try:
        result = asyncio.run(run())
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
    agent = opened[0]
    closing = agent.closing
    report = closing.report if closing is not None else None
    slot: dict[str, Any] = {}
    if closing is not None and closing.slot is not None:
        slot["save"] = closing.slot.as_json()
    if result is not None and result.error is not None:
        problem = (result.error.message, result.error.hint)
    session = agent.session
    # what the journal could not take: the turn is not saved, whatever the model said
    unsaved = report.message() if report is not None and not report.saved else None
    meta_warning = report.message() if report is not None and report.saved else None
    notices = [text for text, _ in [*agent.link.start_lines, *agent.link.resume_lines]] + (list(result.notices) if result else [])
    keeper = agent.slots
    if keeper is not None and keeper.restored is not None:
        slot["restore"] = keeper.restored.as_json()
    elif keeper is not None and keeper.restore_why:
        slot["restore"] = {"action": "restore", "ok": False, "message": keeper.restore_why}
    if meta_warning:
        notices.append(meta_warning)
        click.echo(f"[warning] {meta_warning}", err=True)
    usage = [u.model_dump(mode="json", exclude={"raw"}) for u in result.usage] if result else []
    # the turn's own rent: a fold after the reply adds its summary's request later
    turns = conversation_usage(session.usage)
    last = turns[-1] if turns else None
    error: dict[str, Any] | None = None
    if unsaved is not None:
        rescued = report is not None and report.rescue is not None and report.rescue.saved
        hint = (
            f"the turn is not saved in session {session.id}; free some space, then `tailrent ask --continue ...` "
            f"or `tailrent --resume {session.id}` restores it from the rescue file"
            if rescued
            else f"the turn is not saved in session {session.id} and could not be kept anywhere on disk; "
            "the reply printed here is all that is left of it: free some space before the next turn"
        )
        error = {"message": unsaved if problem is None else f"{problem[0]}; {unsaved}", "hint": hint}
    elif problem is not None:
        error = {"message": problem[0], "hint": problem[1]}
    reply = result.reply if result is not None else None
    if as_json:
        out: dict[str, Any] = {
            "session": None if report is not None and report.discarded else session.id,
            "reply": reply.content if reply else None,
            "saved": unsaved is None,
            "usage": usage,
            "rent": None
            if last is None
            else {
                "context_tokens": last.context_tokens,
                "predicted_cached": last.predicted_cached,
                "predicted_evaluated": last.predicted_evaluated,
                "predicted_usd": last.predicted_usd,
                "price_sheet": settings.price_sheet,
            },
            "notices": notices,
            "resume": agent.link.resume_price.model_dump() if agent.link.resume_price is not None else None,
            "slot": slot or None,
            "error": error,
        }
        click.echo(json_visible(json.dumps(out, indent=2, ensure_ascii=False)))
    elif reply is not None and not streamed:
        click.echo(visible(reply.content))
    elif streamed:
        click.echo()
    if error is None:
        return
    if unsaved is not None:
        # the close report: what the journal lacks and the rescue file that holds it
        click.echo(f"error: {error['message']}", err=True)
    else:
        assert problem is not None
        hint = f"\nhint: {problem[1]}" if problem[1] else ""
        sent = any(m.role == "user" and m.id not in known for m in session.messages)
        if report is not None and report.discarded:
            kept = "Nothing was recorded: the session had no message yet."
        elif sent:
            kept = (
                f"Your message is kept in session {session.id}; "
                f"retry with `tailrent ask --continue ...` or open it with `tailrent --resume {session.id}`."
            )
        else:
            kept = f"Your message was not sent; session {session.id} is as it was."
        click.echo(f"error: {problem[0]}{hint}\n{kept}", err=True)
    if interrupted:
        raise click.Abort()
    sys.exit(exit_code)


COMMANDS = [ask]
