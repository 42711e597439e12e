"""The `tailrent` command: the TUI by default, and subcommands.

Subcommands live in `tailrent_tui/commands/`, one module per area, each
defining `COMMANDS` (a list of click commands). They are imported only when
one of them runs (or for `--help`), so opening the TUI pays for none of them.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import click

from tailrent_tui import __version__
from tailrent_tui.commands._common import MODEL_SPECS_HELP
from tailrent_tui.store.paths import absolute_path, normalize_path_env

#: subcommand -> the module of tailrent_tui.commands that defines it
COMMAND_MODULES = {
    "ask": "ask",
    "bench": "bench",
    "config": "config",
    "demo": "demo",
    "export": "sessions",
    "inspect": "sessions",
    "mcp": "mcp",
    "recall": "recall",
    "replay": "replay",
    "sessions": "sessions",
    "tool": "tool",
}


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMAND_MODULES)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module_name = COMMAND_MODULES.get(cmd_name)
        if module_name is None:
            return None
        module = importlib.import_module(f"tailrent_tui.commands.{module_name}")
        for command in getattr(module, "COMMANDS", ()):
            if command.name == cmd_name:
                return command
        return None


#: every model spec, as `--help` lists them (models/spec.py parses them); `ask` shows the same
UNSET_MODEL = " Unset: Ollama if it answers, else the embedded engine, else the mock."


@click.group(
    cls=LazyGroup,
    invoke_without_command=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.option("--model", "model", metavar="SPEC", help=MODEL_SPECS_HELP + UNSET_MODEL)
@click.option("--continue", "continue_", is_flag=True, help="Resume the last active session.")
@click.option(
    "--resume",
    "resume",
    metavar="[ID]",
    is_flag=False,
    flag_value="",
    default=None,
    help="Resume the session with this id (or a unique prefix); alone, pick one from a list.",
)
@click.option("--workspace", type=click.Path(file_okay=False, path_type=Path), help="Workspace root for tools.")
@click.option("--theme", help="Theme name.")
@click.option("--policy", help="Folding policy: none, naive, naive-pin, autocompact, ladder.")
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path, resolve_path=False),
    callback=lambda ctx, param, value: None if value is None or not str(value).strip() else absolute_path(value),
    help="Where sessions live (or TAILRENT_HOME).",
)
@click.option("--yolo", is_flag=True, help="Run shell and file-writing tools without asking.")
@click.version_option(__version__, prog_name="tailrent")
@click.pass_context
def cli(ctx: click.Context, model, continue_, resume, workspace, theme, policy, data_dir, yolo) -> None:
    """tailrent: chat with a local model and watch the context ladder."""
    normalize_path_env()
    ctx.ensure_object(dict)
    ctx.obj.update(
        model=model,
        continue_=continue_,
        resume=resume,
        workspace=workspace,
        theme=theme,
        policy=policy,
        data_dir=data_dir,
        yolo=yolo,
    )
    if ctx.invoked_subcommand is None:
        from tailrent_tui.commands import run_app

        run_app(ctx)


def main() -> None:
    cli(obj={})
