"""Export a session as the user saw it: Markdown or JSON, always UTF-8.

The export walks the journal's events in order, so it shows every message as
it was added — including the originals that a later fold took out of the
context — with pins and unpins where they happened (📌), spill pointers where
results were spilled, each fold summary at its place with its depth, and a
fold log at the end, then the ledger (current statements by kind, superseded
ones with their successors). Nothing is read from spill files: the export shows the
pointers, as the context did.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any, Literal

from tailrent_tui.core.messages import (
    Event,
    Folded,
    FoldRetired,
    FoldSkipped,
    InstructionsRead,
    MessageAdded,
    Note,
    Pinned,
    Spilled,
    Unfolded,
    Unpinned,
    UsageRecorded,
)
from tailrent_tui.core.session import Session, replay
from tailrent_tui.store.ledger_report import ledger_markdown, ledger_rows
from tailrent_tui.store.paths import write_file_atomic
from tailrent_tui.store.sessions import SessionDir
from tailrent_tui.text import json_visible, model_label, visible

Format = Literal["md", "json"]
PIN = "📌"


def _when(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


def reply_models(events: list[Event]) -> dict[str, str]:
    """The model that wrote each assistant message: the one its request's usage names (recorded
    right after the reply is added); a reply whose request recorded nothing takes the one before."""
    models: dict[str, str] = {}
    waiting: list[str] = []
    last: str | None = None
    for ev in events:
        if isinstance(ev, MessageAdded) and ev.message.role == "assistant":
            waiting.append(ev.message.id)
        elif isinstance(ev, UsageRecorded) and ev.sub_session is None and ev.purpose == "turn" and ev.model:
            last = model_label(ev.model)
            for mid in waiting:
                models[mid] = last
            waiting = []
    for mid in waiting:
        if last is not None:
            models[mid] = last
    return models


def model_spans(entries: list[dict[str, Any]]) -> list[tuple[str, float, float, int]]:
    """(model, first reply's time, last reply's time, replies) for each run of replies by one model."""
    spans: list[tuple[str, float, float, int]] = []
    for e in entries:
        if e["entry"] != "message" or not e.get("model"):
            continue
        if spans and spans[-1][0] == e["model"]:
            model, first, _, n = spans[-1]
            spans[-1] = (model, first, e["at"], n + 1)
        else:
            spans.append((e["model"], e["at"], e["at"], 1))
    return spans


def transcript_entries(events: list[Event]) -> list[dict[str, Any]]:
    """The session's history as plain records, in the order it happened."""
    pinned_now: set[str] = set()
    out: list[dict[str, Any]] = []
    models = reply_models(events)
    for ev in events:
        if isinstance(ev, MessageAdded):
            m = ev.message
            if m.pinned:
                pinned_now.add(m.id)
            out.append(
                {
                    "entry": "message",
                    "at": ev.at,
                    "id": m.id,
                    "role": m.role,
                    "kind": m.kind.value,
                    "content": m.content,
                    "tokens": m.tokens,
                    "pinned_on_arrival": m.pinned,
                    "auto_pinned": ev.auto_pinned,
                    "tool": m.tool,
                    "spill_id": m.spill_id,
                    "tool_calls": [c.model_dump() for c in m.tool_calls],
                    "cut_off": m.cut_off,
                    "thinking": m.meta.get("thinking") if isinstance(m.meta.get("thinking"), str) else None,
                    "model": models.get(m.id),
                }
            )
        elif isinstance(ev, Pinned):
            pinned_now.add(ev.id)
            out.append({"entry": "pin", "at": ev.at, "id": ev.id, "auto": ev.auto})
        elif isinstance(ev, Unpinned):
            pinned_now.discard(ev.id)
            out.append({"entry": "unpin", "at": ev.at, "id": ev.id})
        elif isinstance(ev, Spilled):
            out.append(
                {
                    "entry": "spill",
                    "at": ev.at,
                    "id": ev.id,
                    "spill_id": ev.spill_id,
                    "tool": ev.tool,
                    "location": ev.location,
                    "tokens_before": ev.tokens_before,
                    "pointer": ev.pointer,
                }
            )
        elif isinstance(ev, Folded):
            f = ev.fold
            out.append(
                {
                    "entry": "fold",
                    "at": ev.at,
                    "fold_no": f.fold_no,
                    "depth": f.depth,
                    "span_ids": f.span_ids,
                    "summary_id": f.summary.id,
                    "summary": f.summary.content,
                    "tokens_before": f.tokens_before,
                    "tokens_after": f.tokens_after,
                    "context_before": f.context_before,
                    "context_after": f.context_after,
                    "facts_lost": f.facts_lost,
                    "facts_repaired": f.facts_repaired,
                    "trigger": f.trigger,
                    "ledger": f.ledger.content if f.ledger is not None else None,
                    "carried": f.carried,
                    "uncarried": f.uncarried,
                    "dropped": f.dropped,
                }
            )
        elif isinstance(ev, FoldRetired):
            out.append({"entry": "fold_retired", "at": ev.at, "fold_no": ev.fold_no, "pointer": ev.pointer, "merged": ev.merged})
        elif isinstance(ev, FoldSkipped):
            out.append({"entry": "fold_skipped", "at": ev.at, "reason": ev.reason})
        elif isinstance(ev, Unfolded):
            out.append({"entry": "unfold", "at": ev.at, "fold_no": ev.fold_no, "ids": [m.id for m in ev.originals]})
        elif isinstance(ev, InstructionsRead):
            read = ev.message
            out.append(
                {
                    "entry": "instructions",
                    "at": ev.at,
                    "source": ev.source,
                    "id": read.id if read else None,
                    "replaces": ev.replaces,
                    "content": read.content if read else None,
                    "tokens": read.tokens if read else 0,
                }
            )
        elif isinstance(ev, Note):
            out.append({"entry": "note", "at": ev.at, "level": ev.level, "text": ev.text})
    for e in out:
        if e["entry"] == "message":
            e["pinned"] = e["id"] in pinned_now
    return out


def _ledger_of(events: list[Event]) -> Session:
    """The session as its events leave it, for its ledger (the statements' events replayed)."""
    return replay(events)


def export_json(sd: SessionDir) -> str:
    meta = sd.read_meta()
    events = sd.events()
    entries = transcript_entries(events)
    doc = {
        "session": meta.model_dump(exclude={"summary"}),
        "transcript": entries,
        "fold_log": [e for e in entries if e["entry"] == "fold"],
        "ledger": [r.to_json() for r in ledger_rows(_ledger_of(events))],
    }
    return json_visible(json.dumps(doc, ensure_ascii=False, indent=2)) + "\n"


def _fence(text: str) -> str:
    # longer than any backtick run inside, so the summary cannot close the fence early
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}\n{text}\n{ticks}"


def export_markdown(sd: SessionDir) -> str:
    meta = sd.read_meta()
    events = sd.events()
    entries = transcript_entries(events)
    lines = [f"# {meta.title or 'tailrent session'} ({meta.id})", ""]
    lines.append(f"Created {_when(meta.created)} · model {meta.model or '-'} · window {meta.window:,} tokens")
    spans = model_spans(entries)
    if spans:
        lines += ["", "Models, in the order they replied:", ""]
        lines += [
            f"- `{model}`: {n:,} {'reply' if n == 1 else 'replies'}, {_when(first)}"
            + (f" to {_when(last)}" if last != first else "")
            for model, first, last, n in spans
        ]
    lines.append("")
    current: str | None = None
    for e in entries:
        kind = e["entry"]
        if kind == "message":
            if e.get("model") and e["model"] != current:
                if current is not None:
                    lines += [f"> model: `{e['model']}` from here (it was `{current}`)", ""]
                current = e["model"]
            pin = f"{PIN} " if e["pinned"] else ""
            label = e["role"] + (f" ({e['tool']})" if e["tool"] else "")
            extra = " · spill pointer" if e["kind"] == "spill_pointer" else ""
            if e["cut_off"]:
                extra += f" · {e['cut_off']}: cut off, never sent to the model"
            by = f" · {e['model']}" if e.get("model") else ""
            lines += [f"### {pin}{label}{by} · {_when(e['at'])}{extra}", f"<sub>id {e['id']} · {e['tokens']:,} tokens</sub>", ""]
            if e.get("thinking"):
                lines += ["<details><summary>thinking</summary>", "", _fence(e["thinking"]), "", "</details>", ""]
            if e["content"]:
                lines += [e["content"], ""]
            for call in e["tool_calls"]:
                args = json.dumps(call["arguments"], ensure_ascii=False, indent=2)
                lines += [f"→ tool call `{call['name']}` <sub>{call['id']}</sub>", "", _fence(args), ""]
        elif kind == "instructions":
            if e["content"] is None:
                lines += [f"> project instructions from {e['source']} removed (the file is gone) · {_when(e['at'])}", ""]
            else:
                again = " (read again: it changed)" if e["replaces"] else ""
                lines += [
                    f"### {PIN} project instructions · {e['source']}{again} · {_when(e['at'])}",
                    f"<sub>id {e['id']} · {e['tokens']:,} tokens</sub>",
                    "",
                ]
                lines += [e["content"], ""]
        elif kind == "pin":
            lines += [f"> {PIN} pinned {e['id']}{' (decision)' if e['auto'] else ''} · {_when(e['at'])}", ""]
        elif kind == "unpin":
            lines += [f"> unpinned {e['id']} · {_when(e['at'])}", ""]
        elif kind == "spill":
            lines += [
                f"> ↪ {e['id']} spilled ({e['tokens_before']:,} tokens) to {e['location']}; pointer: {e['pointer']}",
                "",
            ]
        elif kind == "fold":
            lines += [
                f"### 🗂 fold #{e['fold_no']} · depth {e['depth']} · {_when(e['at'])}",
                f"<sub>{len(e['span_ids'])} messages, {e['tokens_before']:,} -> {e['tokens_after']:,} tokens</sub>",
                "",
                _fence(e["summary"]),
                "",
            ]
            if e["ledger"]:
                lines += [f"<sub>carried into the ledger, verbatim ({len(e['carried'])})</sub>", "", _fence(e["ledger"]), ""]
            if e["uncarried"]:
                lines += [f"> {len(e['uncarried'])} statement(s) not carried: no room under the pin budget (counted lost)", ""]
            if e["dropped"]:
                lines += ["> dropped: no summary could shrink the span; it left whole for the archive, with a pointer", ""]
        elif kind == "fold_retired":
            lines += [f"> fold #{e['fold_no']} retired: its summary left the context for a pointer: {e['pointer']}", ""]
        elif kind == "fold_skipped":
            lines += [f"> fold skipped: {e['reason']}", ""]
        elif kind == "unfold":
            lines += [f"> fold #{e['fold_no']} undone: its {len(e['ids'])} originals are back in the context", ""]
        elif kind == "note":
            lines += [f"> note ({e['level']}): {e['text']}", ""]
    folds = [e for e in entries if e["entry"] == "fold"]
    lines += ["## Fold log", ""]
    if not folds:
        lines += ["No folds.", ""]
    else:
        lines += [
            "| fold | time | tokens before -> after | context before -> after | depth | facts lost |",
            "| ---: | --- | --- | --- | ---: | --- |",
        ]
        for e in folds:
            lost = "; ".join(e["facts_lost"]).replace("|", "\\|") or "none"
            lines.append(
                f"| {e['fold_no']} | {_when(e['at'])} | {e['tokens_before']:,} -> {e['tokens_after']:,} | "
                f"{e['context_before']:,} -> {e['context_after']:,} | {e['depth']} | {lost} |"
            )
        lines.append("")
    lines += ledger_markdown(_ledger_of(events))
    # read with cat or a pager: a control or escape sequence from the model or a file is shown, never acted on
    return visible("\n".join(lines))


def export_session(sd: SessionDir, fmt: Format) -> str:
    if fmt == "md":
        return export_markdown(sd)
    if fmt == "json":
        return export_json(sd)
    raise ValueError(f"unknown export format {fmt!r}: choose md or json")


def write_export(text: str, out: Path) -> Path:
    """Write the export as UTF-8 bytes, whatever the locale says."""
    return write_file_atomic(Path(out), text.encode("utf-8"))
