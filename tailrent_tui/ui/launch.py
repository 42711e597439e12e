"""`tailrent` with no subcommand: settings, the agent, then the app."""

from __future__ import annotations

import asyncio
from typing import Any

import click


def launch(flags: dict[str, Any]) -> None:
    """Load the settings (config file, environment, flags), build the agent, run the app.

    A bad setting or a model that cannot be set up is a clear error on the
    terminal, before the screen is taken over.
    """
    from tailrent_tui.agent.build import BuildError, build_agent
    from tailrent_tui.settings import SettingsError, load_settings
    from tailrent_tui.ui.app import TailrentApp

    try:
        settings, _sources = load_settings(flags)
    except SettingsError as exc:
        raise click.ClickException(str(exc)) from None
    try:
        agent = build_agent(settings, flags)
    except (BuildError, ValueError, OSError) as exc:
        raise click.ClickException(str(exc)) from None
    try:
        TailrentApp(agent, settings).run()
    finally:
        close_agent_sync(agent)


def close_agent_sync(agent: Any) -> None:
    """Flush the journal and release the session's lock after the app's loop has ended."""
    from tailrent_tui.agent.build import aclose_agent

    asyncio.run(aclose_agent(agent))
