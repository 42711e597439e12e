"""`tailrent recall`: a probe of a saved session, from the command line."""

from __future__ import annotations

import json

import click


@click.command()
@click.argument("session_ref", metavar="SESSION")
@click.argument("question")
@click.option("--expect", "expect", multiple=True, required=True, metavar="WORD", help="A word the answer needs (repeat).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def recall(ctx: click.Context, session_ref: str, question: str, expect: tuple[str, ...], as_json: bool) -> None:
    """Which expected words are visible in the context SESSION would send now.

    For each word: where it lives (pin, summary of depth n, pointer, live
    message) or, when it is not in context, whether it survives only in the
    fold archive, a spill or memory.
    """
    from tailrent_tui.agent.loop import outside_texts, read_fold_originals
    from tailrent_tui.core.probe import format_probe, probe
    from tailrent_tui.store.paths import resolve_data_dir
    from tailrent_tui.store.sessions import find_session

    data_dir = resolve_data_dir((ctx.obj or {}).get("data_dir"))
    try:
        sd = find_session(data_dir, session_ref)
        session, _ = sd.replay(save_torn=False)
    except (LookupError, OSError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None

    class _View:
        """Just enough of an Agent for outside_texts: the session and its stores."""

        def __init__(self) -> None:
            self.session = session
            self.spill_store = sd.spills()
            self.memory = sd.memory()
            self.archive = sd.archive()

        def folded_originals(self):
            out = []
            for f in session.folds:
                try:
                    out.append((f.fold_no, read_fold_originals(self.archive, f.fold_no)))
                except (LookupError, OSError, ValueError):
                    continue
            return out

    report = probe(session, question, list(expect), outside=outside_texts(_View()))
    if as_json:
        click.echo(json.dumps(report.model_dump() | {"hits": report.hits, "total": report.total}, indent=2, ensure_ascii=False))
    else:
        click.echo(format_probe(report))


COMMANDS = [recall]
