"""`tailrent config`: the effective settings and where each value came from."""

from __future__ import annotations

import json

import click

from tailrent_tui.models.text import redact
from tailrent_tui.settings import Settings, SettingsError, config_file, load_settings


@click.command("config")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def config(ctx: click.Context, as_json: bool) -> None:
    """Print the effective settings: value, source (default, file, $VAR, --flag), meaning."""
    flags = dict(ctx.obj or {})
    try:
        settings, source = load_settings(flags)
    except SettingsError as exc:
        raise click.ClickException(str(exc)) from None
    # a model URL's credentials (openai:http://user:pass@host) are for the request only
    values = {k: redact(v) if isinstance(v, str) else v for k, v in settings.model_dump(mode="json").items()}
    if as_json:
        click.echo(json.dumps({k: {"value": values[k], "source": source[k]} for k in values}, indent=2))
        return
    click.echo(f"# config file: {config_file()}")
    help_ = settings.field_help()
    for key in Settings.model_fields:
        click.echo(f"{key} = {json.dumps(values[key])}    # {source[key]}")
        click.echo(f"    {help_[key]}")


COMMANDS = [config]
