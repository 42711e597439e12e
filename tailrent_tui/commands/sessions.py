"""`tailrent sessions`, `tailrent sessions repair`, `tailrent inspect`, `tailrent export`.

All of them read the data directory where `ask` and the app write: the
group's `--data-dir`, else `$TAILRENT_HOME`, else `data_dir` in config.toml,
else the platform's user data dir. A session is named by
its id or a unique prefix of it.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import click

from tailrent_tui.core.messages import Folded, Kind, Unfolded
from tailrent_tui.core.ports import ArchiveError
from tailrent_tui.core.session import Session, replay
from tailrent_tui.models.text import redact
from tailrent_tui.store.export import export_session, write_export
from tailrent_tui.store.journal import JournalError
from tailrent_tui.store.ledger_report import ledger_lines, ledger_rows
from tailrent_tui.store.paths import inside
from tailrent_tui.store.repair import repair_session
from tailrent_tui.store.sessions import (
    SessionDir,
    SessionLocked,
    SessionLookupError,
    find_session,
    list_sessions,
)
from tailrent_tui.text import json_visible, visible


def _echo(text: object = "", **kwargs: Any) -> None:
    """click.echo with the session's words (titles, messages, paths) shown as visible text, never acted on."""
    click.echo(visible(str(text)), **kwargs)


def _json(text: str) -> None:
    click.echo(json_visible(text))


def _data_dir(ctx: click.Context) -> Path:
    from tailrent_tui.commands._common import data_dir_of

    return data_dir_of(ctx)


def _slot_dir(ctx: click.Context) -> Path | None:
    from tailrent_tui.commands._common import load_settings_or_fail

    return load_settings_or_fail(dict(ctx.find_root().obj or {})).slots.dir


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
        listed: list[dict[str, Any]] = []
        for i in infos:
            model, workspace = _model_and_workspace(i.path)
            listed.append({**i.model_dump(mode="json"), "model": model, "workspace": workspace})
        _json(json.dumps(listed, ensure_ascii=False, indent=2))
        return
    if not infos:
        _echo(f"no sessions in {_data_dir(ctx) / 'sessions'}")
        return
    header: tuple[str, ...] = ("id", "title", "model", "workspace", "last active", "messages", "folds", "pinned", "context")
    places = {i.id: _model_and_workspace(i.path) for i in infos}
    rows = [
        (
            i.id,
            (i.title[:30] + "…") if len(i.title) > 31 else i.title,
            _short(places[i.id][0], 28),
            _home(places[i.id][1]),
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
        _echo("  ".join(str(v).ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())
    for i in infos:
        if i.note:
            _echo(f"note: {i.id}: {i.note}", err=True)


def _model_and_workspace(path: Path) -> tuple[str, str]:
    """What a session ran on and where, from its meta.json ("?" when it cannot say)."""
    try:
        meta = SessionDir(path).read_meta()
    except (SessionLookupError, OSError):
        return "?", "?"
    return redact(meta.model_spec or meta.model or "?"), meta.workspace or "?"


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else "…" + text[-(width - 1) :]


def _home(path: str) -> str:
    home = str(Path.home())
    return "~" + path[len(home) :] if path == home or path.startswith(home + "/") else path


def _remove(sd: SessionDir) -> str | None:
    """Delete a session's directory, under its lock; why not, when it is open elsewhere or cannot go."""
    try:
        lock = sd.acquire_lock()
    except SessionLocked as exc:
        return str(exc)
    except OSError as exc:
        return f"cannot take its lock ({exc.strerror or exc})"
    try:
        shutil.rmtree(sd.path)
    except OSError as exc:
        return f"could not delete {sd.path} ({exc.strerror or exc})"
    finally:
        with contextlib.suppress(OSError):
            lock.release()
    return None


def _confirm(what: str, yes: bool) -> bool:
    if yes:
        return True
    if not sys.stdin.isatty():
        raise click.ClickException(f"{what}: pass --yes to confirm (no terminal to ask)")
    return click.confirm(what, default=False)


@sessions.command("rm")
@click.argument("session_ids", metavar="ID...", nargs=-1, required=True)
@click.option("--yes", "-y", is_flag=True, help="Do not ask.")
@click.pass_context
def rm(ctx: click.Context, session_ids: tuple[str, ...], yes: bool) -> None:
    """Delete sessions (their journal, spills, fold archive and saved slots): this cannot be undone."""
    doomed = [_find(ctx, ref) for ref in session_ids]
    if not _confirm(f"delete {len(doomed)} session(s): {', '.join(sd.id for sd in doomed)}?", yes):
        raise click.Abort()
    failed = 0
    for sd in doomed:
        why = _remove(sd)
        if why is None:
            _echo(f"deleted {sd.id}")
        else:
            failed += 1
            _echo(f"not deleted {sd.id}: {why}", err=True)
    if failed:
        sys.exit(1)


@sessions.command("prune")
@click.option(
    "--older-than",
    "older_than",
    type=click.FloatRange(min=0),
    metavar="DAYS",
    help="Also delete sessions not active for this many days.",
)
@click.option("--dry-run", is_flag=True, help="Say what would go, delete nothing.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask.")
@click.pass_context
def prune(ctx: click.Context, older_than: float | None, dry_run: bool, yes: bool) -> None:
    """Delete sessions that hold one unanswered message (a failed first turn), and with
    --older-than those idle for that long."""
    now = time.time()
    picked = []
    for info in list_sessions(_data_dir(ctx), _slot_dir(ctx)):
        if info.error is not None:
            continue  # a damaged session is for `sessions repair`, not for a sweep
        unanswered = info.messages == 1 and not info.folds
        stale = older_than is not None and now - info.last_active >= older_than * 86400
        if unanswered or stale:
            picked.append((info, "one unanswered message" if unanswered else f"idle since {_when(info.last_active)}"))
    if not picked:
        _echo("nothing to prune")
        return
    for info, why in picked:
        _echo(f"{info.id}  {why}  {info.title[:40]}")
    if dry_run:
        _echo(f"{len(picked)} session(s) would be deleted (dry run)")
        return
    if not _confirm(f"delete these {len(picked)} session(s)?", yes):
        raise click.Abort()
    gone = 0
    for info, _ in picked:
        refused = _remove(SessionDir(info.path))
        if refused is None:
            gone += 1
        else:
            _echo(f"not deleted {info.id}: {refused}", err=True)
    _echo(f"deleted {gone} session(s)")


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
        _echo(f"skipped {len(out.skipped)} line(s) of {out.journal}:")
        for n, reason in out.skipped:
            _echo(f"  line {n}: {reason}")
    else:
        _echo(f"{out.journal}: no bad lines found")
    _echo(f"kept {out.kept:,} event(s)")
    if out.applied:
        _echo(f"applied: the original is kept as {out.backup}; the repaired journal is now {out.journal}")
    else:
        _echo(f"wrote {out.repaired}; the original is unchanged.")
        _echo(f"to use it: tailrent sessions repair {sd.id} --apply  (the original is kept as journal.bak-<time>.jsonl)")
    if out.meta_problem is not None:
        if out.applied:
            kept = f" (the damaged one is kept as {out.meta_backup})" if out.meta_backup else ""
            _echo(f"{out.meta_problem}: rebuilt it from the journal{kept}")
        else:
            _echo(f"{out.meta_problem}: wrote {out.meta_repaired}, rebuilt from the journal; --apply puts it in place")


def fold_views(sd: SessionDir, session: Session | None = None) -> list[dict[str, Any]]:
    """Each fold: when, tokens, depth, facts (from the journal), the statements it carried into the
    ledger or could not, whether it was dropped or retired, and its originals (from the archive)."""
    archive = sd.archive()
    events = sd.events()
    session = session if session is not None else replay(events)
    numbers = {sid: i for i, sid in enumerate(session.statements, 1)}

    def statements(ids: list[str]) -> list[dict[str, Any]]:
        out = []
        for sid in ids:
            st = session.statements.get(sid)
            out.append({"no": numbers.get(sid), "id": sid, "kind": st.kind if st else None, "text": st.text if st else None})
        return out

    undone = {ev.fold_no: ev.at for ev in events if isinstance(ev, Unfolded)}
    views = []
    for ev in events:
        if not isinstance(ev, Folded):
            continue
        f = ev.fold
        retired = session.retired.get(f.fold_no)
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
            "carried": statements(f.carried),
            "uncarried": statements(f.uncarried),
            "dropped": f.dropped,
            "retired": retired is not None,
            "retired_pointer": retired.pointer if retired is not None else None,
            "unfolded": f.fold_no in session.unfolded,
            "unfolded_at": undone.get(f.fold_no),
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
    undone = ""
    if v["unfolded"]:
        when = f" at {_when(v['unfolded_at'])}" if v.get("unfolded_at") is not None else ""
        undone = f" · UNDONE{when} (/unfold): its originals are back in the context, the summary is not"
    _echo(
        f"fold #{v['fold_no']} · {_when(v['at'])} · tokens {v['tokens_before']:,} -> {v['tokens_after']:,} "
        f"(context {v['context_before']:,} -> {v['context_after']:,}) · depth {v['depth']} · {v['trigger']}{undone}"
    )
    _echo("  originals:")
    if v["originals"] is None:
        _echo(f"    ({v['archive_error']})")
    else:
        for m in v["originals"]:
            pin = " [pinned]" if m["pinned"] else ""
            _echo(f"    [{m['id']}] {m['role']} {Kind(m['kind']).label}{pin} ({m['tokens']:,} tokens)")
            for line in m["content"].splitlines() or [""]:
                _echo(f"      {line}")
    refused = f" ({v['summarizer_refused']})" if v["summarizer_refused"] else ""
    _echo(f"  summary, by {v['summarizer'] or 'unknown'}{refused}:")
    for line in v["summary"].splitlines():
        _echo(f"    {line}")
    _echo(f"  facts lost: {'; '.join(v['facts_lost']) or 'none'}")
    _echo(f"  facts repaired: {'; '.join(v['facts_repaired']) or 'none'}")
    _echo(f"  carried into the ledger: {len(v['carried'])}")
    for st in v["carried"]:
        _echo(f"    #{st['no']} {st['kind']}: {st['text']}")
    if v["uncarried"]:
        _echo(f"  not carried (no room under the pin budget; counted lost): {len(v['uncarried'])}")
        for st in v["uncarried"]:
            _echo(f"    #{st['no']} {st['kind']}: {st['text']}")
    if v["dropped"]:
        _echo("  dropped: no summary could shrink the span; it left whole for the archive, with a pointer")
    if v["retired"]:
        _echo(f"  retired: its summary left the context for a pointer: {v['retired_pointer']}")


@click.command("inspect")
@click.argument("session_id", metavar="SESSION")
@click.option("--fold", "fold_no", type=int, help="Show only fold number N.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def inspect(ctx: click.Context, session_id: str, fold_no: int | None, as_json: bool) -> None:
    """Show what each fold of a session did (tokens, depth, originals, summary, facts lost, the statements
    it carried into the ledger), then the ledger as it is now."""
    sd = _find(ctx, session_id)
    try:
        session, _ = sd.replay(save_torn=False)
        views = fold_views(sd, session)
    except JournalError as exc:
        raise click.ClickException(str(exc)) from None
    if fold_no is not None:
        chosen = [v for v in views if v["fold_no"] == fold_no]
        if not chosen:
            have = f"folds 1-{len(views)}" if views else "no folds"
            raise click.ClickException(f"session {sd.id} has no fold #{fold_no} (it has {have})")
        views = chosen
    if as_json:
        # one fold's view; else every fold and the ledger as it is now
        doc: Any = views[0] if fold_no is not None else {"folds": views, "ledger": [r.to_json() for r in ledger_rows(session)]}
        _json(json.dumps(doc, ensure_ascii=False, indent=2))
        return
    if not views:
        _echo(f"session {sd.id} has no folds")
    for v in views:
        _print_fold(v)
    if fold_no is None:
        _echo("")
        for line in ledger_lines(session):
            _echo(line)


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
    _echo(f"wrote {output}", err=True)


COMMANDS = [sessions, inspect, export]
