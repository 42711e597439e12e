"""The `tailrent` command: the TUI by default, and subcommands.

Each module in `tailrent_tui/commands/` that defines `COMMANDS` (a list of
click commands) is registered here, so each layer adds its commands without
touching this file.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import click

from tailrent_tui import __version__


@click.group(invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--model", "model", metavar="SPEC", help="mock, ollama, ollama:NAME, openai:URL or openai:URL#MODEL.")
@click.option("--continue", "continue_", is_flag=True, help="Resume the last active session.")
@click.option("--resume", "resume", metavar="ID", help="Resume the session with this id.")
@click.option("--workspace", type=click.Path(file_okay=False, path_type=Path), help="Workspace root for tools.")
@click.option("--theme", help="Theme name.")
@click.option("--policy", help="Folding policy: none, naive, naive-pin, autocompact, ladder.")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), help="Where sessions live (or TAILRENT_HOME).")
@click.option("--yolo", is_flag=True, help="Run shell and file-writing tools without asking.")
@click.version_option(__version__, prog_name="tailrent")
@click.pass_context
def cli(ctx: click.Context, model, continue_, resume, workspace, theme, policy, data_dir, yolo) -> None:
    """tailrent: chat with a local model and watch the context ladder."""
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


def _register_commands() -> None:
    import tailrent_tui.commands as pkg

    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{pkg.__name__}.{info.name}")
        for command in getattr(module, "COMMANDS", ()):
            cli.add_command(command)


_register_commands()


def main() -> None:
    cli(obj={})
