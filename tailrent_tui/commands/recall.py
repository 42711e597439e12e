"""`tailrent recall`: a probe of a saved session, from the command line."""

from __future__ import annotations

import json

import click

from tailrent_tui.text import json_visible, visible


@click.command()
@click.argument("session_ref", metavar="SESSION")
@click.argument("question")
@click.argument("more", nargs=-1, metavar="")
@click.option(
    "--expect",
    "expect",
    multiple=True,
    required=True,
    metavar="WORD...",
    help='The words the answer needs: --expect A B C, or --expect repeated; quote a phrase ("15 minute").',
)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def recall(
    ctx: click.Context, session_ref: str, question: str, more: tuple[str, ...], expect: tuple[str, ...], as_json: bool
) -> None:
    """Which expected words are visible in the context SESSION would send now.

    For each word: where it lives (pin, summary of depth n, pointer, live
    message) or, when it is not in context, whether it survives only in the
    fold archive, a spill or memory. An entry there that cannot be read (a
    missing or damaged file) is named in a warning and left out.
    """
    from tailrent_tui.commands._common import data_dir_of
    from tailrent_tui.core.probe import format_probe, probe
    from tailrent_tui.store.journal import JournalError
    from tailrent_tui.store.outside import read_outside
    from tailrent_tui.store.sessions import find_session

    data_dir = data_dir_of(ctx)
    try:
        sd = find_session(data_dir, session_ref)
        session, _ = sd.replay(save_torn=False)
    except (LookupError, OSError, ValueError, JournalError) as exc:
        raise click.ClickException(str(exc)) from None

    outside = read_outside(session, sd.archive(), sd.spills(), sd.memory())
    # click options take one value each: the words after the first one arrive as arguments
    report = probe(session, question, [*expect, *more], outside=outside.by_label())
    if as_json:
        extra = {"hits": report.hits, "total": report.total, "unreadable": outside.unreadable}
        click.echo(json_visible(json.dumps(report.model_dump() | extra, indent=2, ensure_ascii=False)))
        return
    for reason in outside.unreadable:
        click.echo(visible(f"warning: not searched: {reason}"), err=True)
    click.echo(visible(format_probe(report)))


COMMANDS = [recall]
