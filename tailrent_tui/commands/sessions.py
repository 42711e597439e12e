"""`tailrent sessions`, `tailrent sessions repair`, `tailrent inspect`, `tailrent export`.

All of them read the data directory where `ask` and the app write: the
group's `--data-dir`, else `$TAILRENT_HOME`, else `data_dir` in config.toml,
else the platform's user data dir. A session is named by
its id or a unique prefix of it.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import click

from tailrent_tui.core.messages import Folded, Kind
from tailrent_tui.core.ports import ArchiveError
from tailrent_tui.store.export import export_session, write_export
from tailrent_tui.store.journal import JournalError
from tailrent_tui.store.paths import inside
from tailrent_tui.store.repair import repair_session
from tailrent_tui.store.sessions import (
    SessionDir,
    SessionLocked,
    SessionLookupError,
    find_session,
    list_sessions,
)


def _data_dir(ctx: click.Context) -> Path:
    from tailrent_tui.commands._common import data_dir_of

    return data_dir_of(ctx)


def _slot_dir(ctx: click.Context) -> Path | None:
    from tailrent_tui.commands._common import load_settings_or_fail

    return load_settings_or_fail(dict(ctx.find_root().obj or {})).slot_dir


def _find(ctx: click.Context, ref: str) -> SessionDir:
    try:
        return find_session(_data_dir(ctx), ref)
    except SessionLookupError as exc:
        raise click.ClickException(str(exc)) from None


def _when(at: float | None) -> str:
    return "-" if at is None else time.strftime("%Y-%m-%d %H:%M", time.localtime(at))


def _num(n: int | None) -> str:
    return "?" if n is None else f"{n:,}"


@click.group("sessions", invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array instead of a table.")
@click.pass_context
def sessions(ctx: click.Context, as_json: bool) -> None:
    """List sessions, most recently active first."""
    if ctx.invoked_subcommand is not None:
        return
    infos = list_sessions(_data_dir(ctx), _slot_dir(ctx))
    if as_json:
        click.echo(json.dumps([i.model_dump(mode="json") for i in infos], ensure_ascii=False, indent=2))
        return
    if not infos:
        click.echo(f"no sessions in {_data_dir(ctx) / 'sessions'}")
        return
    header = ("id", "title", "created", "last active", "messages", "folds", "pinned", "context")
    rows = [
        (
            i.id,
            (i.title[:30] + "…") if len(i.title) > 31 else i.title,
            _when(i.created),
            _when(i.last_active),
            _num(i.messages),
            _num(i.folds),
            _num(i.pinned),
            _num(i.context_tokens) if i.error is None else f"error: {i.error}",
        )
        for i in infos
    ]
    widths = [max(len(str(r[c])) for r in [header, *rows]) for c in range(len(header))]
    for r in [header, *rows]:
        click.echo("  ".join(str(v).ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())
    for i in infos:
        if i.note:
            click.echo(f"note: {i.id}: {i.note}", err=True)


@sessions.command("repair")
@click.argument("session_id", metavar="ID")
@click.option(
    "--apply", is_flag=True, help="Keep the original as journal.bak-<time>.jsonl and put the repaired copy in its place."
)
@click.pass_context
def repair(ctx: click.Context, session_id: str, apply: bool) -> None:
    """Write a repaired copy of a session's journal (journal.repaired.jsonl), skipping bad lines.

    The original is never changed; with --apply it is renamed to a backup and
    the repaired copy takes its place.
    """
    sd = _find(ctx, session_id)
    try:
        out = repair_session(sd, apply=apply)
    except (JournalError, SessionLocked, SessionLookupError, OSError) as exc:
        raise click.ClickException(str(exc)) from None
    if out.skipped:
        click.echo(f"skipped {len(out.skipped)} line(s) of {out.journal}:")
        for n, reason in out.skipped:
            click.echo(f"  line {n}: {reason}")
    else:
        click.echo(f"{out.journal}: no bad lines found")
    click.echo(f"kept {out.kept:,} event(s)")
    if out.applied:
        click.echo(f"applied: the original is kept as {out.backup}; the repaired journal is now {out.journal}")
    else:
        click.echo(f"wrote {out.repaired}; the original is unchanged.")
        click.echo(f"to use it: tailrent sessions repair {sd.id} --apply  (the original is kept as journal.bak-<time>.jsonl)")
    if out.meta_problem is not None:
        if out.applied:
            kept = f" (the damaged one is kept as {out.meta_backup})" if out.meta_backup else ""
            click.echo(f"{out.meta_problem}: rebuilt it from the journal{kept}")
        else:
            click.echo(f"{out.meta_problem}: wrote {out.meta_repaired}, rebuilt from the journal; --apply puts it in place")


def fold_views(sd: SessionDir) -> list[dict[str, Any]]:
    """Each fold: when, tokens, depth, facts (from the journal) and its originals (from the archive)."""
    archive = sd.archive()
    views = []
    for ev in sd.events():
        if not isinstance(ev, Folded):
            continue
        f = ev.fold
        view: dict[str, Any] = {
            "fold_no": f.fold_no,
            "at": ev.at,
            "tokens_before": f.tokens_before,
            "tokens_after": f.tokens_after,
            "context_before": f.context_before,
            "context_after": f.context_after,
            "depth": f.depth,
            "trigger": f.trigger,
            "summarizer": f.summarizer,
            "summarizer_refused": f.rejected,
            "summary": f.summary.content,
            "facts": f.facts,
            "facts_lost": f.facts_lost,
            "facts_repaired": f.facts_repaired,
            "originals": None,
            "archive_error": None,
        }
        try:
            view["originals"] = [m.model_dump(mode="json") for m in archive.read_originals(f.fold_no)]
        except ArchiveError as exc:
            view["archive_error"] = str(exc)
        views.append(view)
    return views


def _print_fold(v: dict[str, Any]) -> None:
    click.echo(
        f"fold #{v['fold_no']} · {_when(v['at'])} · tokens {v['tokens_before']:,} -> {v['tokens_after']:,} "
        f"(context {v['context_before']:,} -> {v['context_after']:,}) · depth {v['depth']} · {v['trigger']}"
    )
    click.echo("  originals:")
    if v["originals"] is None:
        click.echo(f"    ({v['archive_error']})")
    else:
        for m in v["originals"]:
            pin = " [pinned]" if m["pinned"] else ""
            click.echo(f"    [{m['id']}] {m['role']} {Kind(m['kind']).label}{pin} ({m['tokens']:,} tokens)")
            for line in m["content"].splitlines() or [""]:
                click.echo(f"      {line}")
    refused = f" ({v['summarizer_refused']})" if v["summarizer_refused"] else ""
    click.echo(f"  summary, by {v['summarizer'] or 'unknown'}{refused}:")
    for line in v["summary"].splitlines():
        click.echo(f"    {line}")
    click.echo(f"  facts lost: {'; '.join(v['facts_lost']) or 'none'}")
    click.echo(f"  facts repaired: {'; '.join(v['facts_repaired']) or 'none'}")


@click.command("inspect")
@click.argument("session_id", metavar="SESSION")
@click.option("--fold", "fold_no", type=int, help="Show only fold number N.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def inspect(ctx: click.Context, session_id: str, fold_no: int | None, as_json: bool) -> None:
    """Show what each fold of a session did: tokens, depth, originals, summary, facts lost."""
    sd = _find(ctx, session_id)
    try:
        views = fold_views(sd)
    except JournalError as exc:
        raise click.ClickException(str(exc)) from None
    if fold_no is not None:
        chosen = [v for v in views if v["fold_no"] == fold_no]
        if not chosen:
            have = f"folds 1-{len(views)}" if views else "no folds"
            raise click.ClickException(f"session {sd.id} has no fold #{fold_no} (it has {have})")
        views = chosen
    if as_json:
        click.echo(json.dumps(views if fold_no is None else views[0], ensure_ascii=False, indent=2))
        return
    if not views:
        click.echo(f"session {sd.id} has no folds")
        return
    for v in views:
        _print_fold(v)


@click.command("export")
@click.argument("session_id", metavar="SESSION")
@click.option("--format", "fmt", type=click.Choice(["md", "json"]), default="md", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write to FILE instead of stdout.")
@click.pass_context
def export(ctx: click.Context, session_id: str, fmt: str, output: Path | None) -> None:
    """Export a session's transcript as the user saw it (UTF-8), with pins, folds and a fold log."""
    sd = _find(ctx, session_id)
    data_dir = _data_dir(ctx)
    if output is not None and inside(output, data_dir):
        raise click.ClickException(
            f"refusing to write {output}: it is inside the data dir {data_dir}, where it could overwrite a session; "
            "choose a path outside it"
        )
    try:
        text = export_session(sd, fmt)  # type: ignore[arg-type]
    except JournalError as exc:
        raise click.ClickException(str(exc)) from None
    if output is None:
        # bytes, so that a C or ASCII locale cannot garble or refuse non-ASCII text
        stream = sys.stdout.buffer
        stream.write(text.encode("utf-8"))
        stream.flush()
        return
    try:
        write_export(text, output)
    except OSError as exc:
        raise click.ClickException(f"cannot write {output}: {exc.strerror or exc}") from None
    click.echo(f"wrote {output}", err=True)


COMMANDS = [sessions, inspect, export]
