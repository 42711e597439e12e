"""`tailrent config`: the effective settings and where each value came from."""

from __future__ import annotations

import json
from typing import Any

import click

from tailrent_tui.models.text import redact
from tailrent_tui.settings import (
    SettingsError,
    config_file,
    env_warnings,
    load_settings,
    setting_help,
    setting_keys,
)


@click.command("config")
@click.option("--json", "as_json", is_flag=True, help="The settings with their sources as JSON.")
@click.option("--toml", "as_toml", is_flag=True, help="The settings as a commented config.toml (unset ones commented out).")
@click.pass_context
def config(ctx: click.Context, as_json: bool, as_toml: bool) -> None:
    """Print the effective settings: value, source (default, file, $VAR, --flag), meaning.

    Warns of old flat keys, of TAILRENT_* variables that name no setting and of
    keymap ids or keys that clash (on stderr)."""
    flags = dict(ctx.obj or {})
    try:
        settings, source, warnings = load_settings(flags)
    except SettingsError as exc:
        raise click.ClickException(str(exc)) from None
    dumped = settings.model_dump(mode="json")
    # a model URL's credentials (openai:http://user:pass@host) are for the request only
    values = {k: _shown(dumped, k) for k in setting_keys()}
    # the keymap is checked against the app's bindings, which need Textual: only when there is one
    keymap = []
    if settings.keymap:
        from tailrent_tui.ui.keymap import keymap_warnings

        keymap = keymap_warnings(settings.keymap)
    for warning in [*warnings, *env_warnings(), *keymap]:
        click.echo(f"warning: {warning}", err=True)
    if as_json:
        click.echo(json.dumps({k: {"value": values[k], "source": source[k]} for k in values}, indent=2))
        return
    if as_toml:
        from tailrent_tui.commands._toml import settings_toml

        click.echo(settings_toml(values, source, str(config_file())))
        return
    click.echo(f"# config file: {config_file()}")
    help_ = setting_help()
    for key in setting_keys():
        click.echo(f"{key} = {json.dumps(values[key])}    # {source[key]}")
        click.echo(f"    {help_[key]}")


def _shown(dumped: dict[str, Any], key: str) -> Any:
    group, _, name = key.rpartition(".")
    value = (dumped[group] if group else dumped)[name]
    return redact(value) if isinstance(value, str) else value


COMMANDS = [config]
