"""`tailrent` with no subcommand: settings, the agent, then the app."""

from __future__ import annotations

from typing import Any

import click


def launch(flags: dict[str, Any]) -> None:
    """Load the settings (config file, environment, flags), build the agent, run the app.

    A bad setting or a model that cannot be set up is a clear error on the
    terminal, before the screen is taken over.
    """
    from tailrent_tui.agent.build import BuildError, build_agent, told_keys
    from tailrent_tui.settings import SettingsError, load_settings
    from tailrent_tui.ui.app import TailrentApp

    try:
        settings, sources, warnings = load_settings(flags)
    except SettingsError as exc:
        raise click.ClickException(str(exc)) from None
    if flags.get("resume") == "":
        picked = pick_session(settings)
        if picked is None:
            return
        flags = {**flags, "resume": picked}
    new = False
    while True:
        try:
            agent = build_agent(settings, flags, told=told_keys(sources), new=new)
        except (BuildError, ValueError, OSError) as exc:
            raise click.ClickException(str(exc)) from None
        try:
            app = TailrentApp(agent, settings, load_warnings=warnings)
            app.run()
        finally:
            save_slot_on_quit(agent)
            close_agent_sync(agent)
            stop_embedded_engine(agent)
            stop_mcp_servers(agent)
        if app.return_code:
            raise SystemExit(app.return_code)  # a crash: Textual has printed what happened
        if app.next_session != "new":
            return
        # /new or /clear: a new session on the same model, in the same folder; the old one stays resumable
        new = True
        settings = agent.settings.model_copy(update={"workspace": agent.workspace})


def pick_session(settings: Any) -> str | None:
    """`--resume` alone: the session the user picks from the list (None: none, or nothing to pick)."""
    from tailrent_tui.store.paths import resolve_data_dir
    from tailrent_tui.ui.picker import SessionPicker, picker_rows

    data_dir = resolve_data_dir(settings.data_dir)
    rows = picker_rows(data_dir)
    if not rows:
        raise click.ClickException(f"no session to resume in {data_dir / 'sessions'}: start one with `tailrent`")
    return SessionPicker(rows).run()


def save_slot_on_quit(agent: Any) -> None:
    """Save llama.cpp's KV slot for the next resume (when it holds something not saved yet), and say so."""
    import sys

    from tailrent_tui.agent.build import save_slot_at_exit

    line = save_slot_at_exit(agent, "quit")
    if line:
        print(f"tailrent: {line}", file=sys.stderr)


def stop_mcp_servers(agent: Any) -> None:
    """Kill any MCP server the app's loop did not stop (its worker stops them on a normal quit)."""
    from tailrent_tui.agent.build import stop_mcp_now

    stop_mcp_now(agent)


def stop_embedded_engine(agent: Any) -> None:
    """Stop the embedded engine, last: the slot is saved on quit through it."""
    from tailrent_tui.models.embedded import EmbeddedModel

    if isinstance(agent.model, EmbeddedModel):
        agent.model.stop_now()


def close_agent_sync(agent: Any) -> None:
    """Flush the journal and release the session's lock after the app's loop has ended.

    The loop that ran the app is closed by now, so the journal's last lines are
    written synchronously. If they still cannot be written (the disk is still
    full), `close_session` puts them in a private rescue file (see
    `store/rescue.py`) and the terminal says where: nothing is lost silently.
    """
    import sys

    from tailrent_tui.store.sessions import close_session_sync

    if agent.opened is None:
        return
    message = close_session_sync(agent.opened, discard_blank=True).message()
    if message:
        print(f"tailrent: {message}", file=sys.stderr)
