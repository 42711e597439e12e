"""What the commands share: loading settings with errors that name the key, and the data dir."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from tailrent_tui.settings import Settings, SettingsError, load_settings


def load_settings_or_fail(flags: dict[str, Any]) -> Settings:
    try:
        settings = load_settings(flags).settings
    except SettingsError as exc:
        raise click.ClickException(str(exc)) from None
    return settings


def data_dir_of(ctx: click.Context) -> Path:
    """The data dir, from the same sources as every other setting (flag, TAILRENT_HOME, config.toml),
    so that `sessions`, `recall` and `export` look where `ask` and the app write."""
    from tailrent_tui.store.paths import resolve_data_dir

    flags = dict(ctx.find_root().obj or {})
    return resolve_data_dir(load_settings_or_fail(flags).data_dir)


#: every model spec, for the --model help of the app and of ask
MODEL_SPECS_HELP = "mock, mock:SCRIPT.jsonl, ollama, ollama:NAME, openai:URL, openai:URL#MODEL, embedded or embedded:FILE.gguf."
