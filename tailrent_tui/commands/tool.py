"""`tailrent tool NAME 'JSON-ARGS'`: run one tool and print what the model would receive.

The output passes rung 1 (the tool's own cap, from the tool caps) and
rung 2 (spill above [tools] spill_threshold), exactly as in a session. For
debugging tools and for tests. A tool error prints the message the model would
see and exits with status 1.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from tailrent_tui.agent.ladder_driver import admit_tool_output
from tailrent_tui.agent.tools import TOOLS, ToolCaps, ToolContext, run_tool
from tailrent_tui.core.rungs.spill import MemorySpillStore
from tailrent_tui.core.tokens import get_counter
from tailrent_tui.settings import SettingsError, load_settings
from tailrent_tui.store.paths import resolve_data_dir
from tailrent_tui.text import json_visible, visible


@click.command("tool")
@click.argument("name")
@click.argument("json_args", metavar="JSON-ARGS", required=False, default="{}")
@click.option(
    "--workspace",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="Workspace root the tool runs in "
    "(default: the group's --workspace, else the workspace setting, else the current directory).",
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object instead of the text.")
@click.pass_context
def tool(ctx: click.Context, name: str, json_args: str, workspace: Path | None, as_json: bool) -> None:
    """Run the tool NAME with JSON-ARGS and print what the model would receive."""
    obj: dict[str, Any] = ctx.obj or {}
    try:
        settings = load_settings(obj).settings
    except SettingsError as exc:
        raise click.ClickException(str(exc)) from None
    root = workspace or settings.workspace or Path.cwd()
    caps = ToolCaps(shell_timeout=settings.tools.shell_timeout)
    tool_ctx = ToolContext(root=Path(root), caps=caps, data_dir=resolve_data_dir(settings.data_dir))
    server = name.partition("__")[0]
    if name not in TOOLS and "__" in name and server in settings.mcp.servers:
        from tailrent_tui.agent.mcp import run_once

        # an MCP server's tool: that server is started, asked through the same door, and stopped
        outcome = run_once(settings, Path(root), server, name, json_args, tool_ctx)
    else:
        outcome = run_tool(name, json_args, tool_ctx)
    # No session here, so a spilled result's content lives only in memory: the
    # pointer printed is what the model would receive, byte for byte.
    content = admit_tool_output(
        name,
        outcome,
        spill_store=MemorySpillStore(),
        counter=get_counter(settings.tokenizer),
        threshold=settings.tools.spill_threshold,
    )
    if as_json:
        doc = {
            "tool": name,
            "is_error": outcome.is_error,
            "content": content,
            "cut": outcome.cut,
            "binary": outcome.binary,
            "meta": outcome.meta,
        }
        click.echo(json_visible(json.dumps(doc, ensure_ascii=False)))
    else:
        # what the model receives, as text: a control or escape sequence in a file is shown, never acted on
        click.echo(visible(content))
    if outcome.is_error:
        ctx.exit(1)


COMMANDS = [tool]
