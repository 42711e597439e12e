"""`tailrent` with no subcommand: settings, then the app inside the session (`open_agent`)."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Any

import click


def launch(flags: dict[str, Any]) -> None:
    """Load the settings (config file, environment, flags), open the session, run the app in it.

    A bad setting or a model that cannot be set up is a clear error on the
    terminal, before the screen is taken over. The session is closed by
    `open_agent` however the app ends (quit, a crash, SIGTERM or SIGHUP).
    """
    from tailrent_tui.settings import SettingsError, load_settings

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
        ended = asyncio.run(run_app(settings, flags, sources, new=new, warnings=warnings))
        if ended.return_code:
            raise SystemExit(ended.return_code)  # a crash: Textual has printed what happened
        if ended.farewell:
            print(ended.farewell)
        if ended.next_session != "new":
            return
        # /new or /clear: a new session on the same model, in the same folder; the old one stays resumable
        new, warnings = True, []  # said once, at the first start
        settings = ended.settings


@dataclass
class Ended:
    """How the app ended, for `launch` once the session is closed."""

    return_code: int
    next_session: str | None
    farewell: str | None
    settings: Any


async def run_app(
    settings: Any, flags: dict[str, Any], sources: dict[str, str], *, new: bool, warnings: list[str] | None = None
) -> Ended:
    """One session in the app, inside `open_agent`; a signal's exit code once it is closed."""
    from tailrent_tui.agent.build import BuildError, told_keys
    from tailrent_tui.agent.lifecycle import Signalled, open_agent
    from tailrent_tui.ui.app import TailrentApp

    farewell: str | None = None
    try:
        async with open_agent(settings, flags, told=told_keys(sources), new=new) as agent:
            app = TailrentApp(agent, settings, load_warnings=warnings or ())
            agent.on_signal = lambda name: app.exit()
            await app.run_async()
            farewell = None if app.return_code else app.farewell()
            return Ended(
                app.return_code or 0,
                app.next_session,
                farewell,
                agent.settings.model_copy(update={"workspace": agent.workspace}),
            )
    except (BuildError, ValueError, OSError) as exc:
        raise click.ClickException(str(exc)) from None
    except Signalled as exc:
        if farewell:  # the terminal may be gone (SIGHUP)
            with contextlib.suppress(OSError):
                print(farewell, flush=True)
        raise SystemExit(exc.exit_code) from None


def pick_session(settings: Any) -> str | None:
    """`--resume` alone: the session the user picks from the list (None: none, or nothing to pick)."""
    from tailrent_tui.store.paths import resolve_data_dir
    from tailrent_tui.ui.picker import SessionPicker, picker_rows

    data_dir = resolve_data_dir(settings.data_dir)
    rows = picker_rows(data_dir)
    if not rows:
        raise click.ClickException(f"no session to resume in {data_dir / 'sessions'}: start one with `tailrent`")
    return SessionPicker(rows).run()
