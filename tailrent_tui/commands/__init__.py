"""Subcommands of `tailrent`, one module per area, each exposing `COMMANDS`."""

from __future__ import annotations

import click


def run_app(ctx: click.Context) -> None:
    """Open the TUI with the group's options."""
    from tailrent_tui.ui.launch import launch

    launch(ctx.obj)
