"""What the commands share: loading settings with errors that name the key."""

from __future__ import annotations

from typing import Any

import click

from tailrent_tui.settings import Settings, SettingsError, load_settings


def load_settings_or_fail(flags: dict[str, Any]) -> Settings:
    try:
        settings, _ = load_settings(flags)
    except SettingsError as exc:
        raise click.ClickException(str(exc)) from None
    return settings
