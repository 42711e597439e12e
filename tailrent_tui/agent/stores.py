"""The session's stores, seen from the agent: rung 4's files, the archive, the spills, memory.

Everything the agent keeps outside the context or outside the session's
journal goes through here: the decisions file (rung 4 for pinned decisions),
the project instructions pinned at the head, the session's title, the
sub-sessions' transcripts, exports, and the probe that says where a word lives.
"""

from __future__ import annotations

import json
from pathlib import Path

from tailrent_tui.agent.async_files import read_bytes
from tailrent_tui.agent.instructions import InstructionsWatcher
from tailrent_tui.agent.tools.base import ToolContext, ToolError, save_beneath
from tailrent_tui.agent.workspace import WorkspaceEscape
from tailrent_tui.core.messages import Kind, Message
from tailrent_tui.core.ports import ArchiveError, FoldArchive, SpillAltered, SpillMissing, SpillStore
from tailrent_tui.core.probe import ProbeReport, probe
from tailrent_tui.core.session import Session
from tailrent_tui.store.archive import FileFoldArchive
from tailrent_tui.store.memory import MemoryStore
from tailrent_tui.store.outside import read_outside
from tailrent_tui.store.paths import ensure_private_dir, resolve_data_dir, write_file_atomic
from tailrent_tui.store.records import unreadable
from tailrent_tui.store.sessions import SessionDir
from tailrent_tui.store.spills import FileSpillStore


class SessionStores:
    """Reads and writes what the session keeps outside its context; a failure is a note, never a lost turn."""

    def __init__(
        self,
        *,
        session: Session,
        session_dir: SessionDir | None,
        workspace: Path,
        spill_store: SpillStore,
        archive: FoldArchive,
        memory: MemoryStore | None,
        decisions_file: str | None,
        data_dir: Path | None,
        instructions: bool = False,
    ) -> None:
        """`session_dir` None: a session kept in memory (the demo, the bench, a delegate's
        sub-session), which is not titled, archived or exported; `data_dir`: the setting, where
        an export must not write; `instructions`: pin AGENTS.md / TAILRENT.md at the head."""
        self.session = session
        self.session_dir = session_dir
        self.workspace = workspace
        self.spill_store = spill_store
        self.archive = archive
        self.memory = memory
        self.decisions_file = decisions_file
        self.data_dir = data_dir
        self._titled = False
        # the decisions file is written as write_file writes: beneath the workspace, never into the data dir
        self._decisions_ctx = ToolContext(root=workspace, data_dir=resolve_data_dir(data_dir))
        # AGENTS.md / TAILRENT.md, pinned at the head (the app, ask and the demo; not the bench, not a delegate)
        self.instructions = InstructionsWatcher(workspace) if instructions else None
        if self.instructions is not None:
            self.instructions.refresh(session)

    def refresh_instructions(self) -> list[str]:
        """Read the project instruction files again if they changed on disk; the names that changed."""
        session = self.session
        changed = self.instructions.refresh(session) if self.instructions is not None else []
        for name in changed:
            session.note(f"{name} changed on disk: the project instructions were read again", "info")
        return changed

    def write_decisions(self) -> None:
        """Rung 4 for decisions: keep pinned decisions in a workspace file that outlives the session.

        Written as write_file writes (beneath the workspace, atomically); a failure is a one-line
        warning note, and the pin stands."""
        name = self.decisions_file
        if not name:
            return
        session = self.session
        lines = ["# Decisions (pinned in tailrent)", ""]
        lines += [f"- {m.content.strip()}" for m in session.pinned if m.kind == Kind.chat]
        try:
            save_beneath(self._decisions_ctx, name, ("\n".join(lines) + "\n").encode("utf-8", "replace"))
        except (ToolError, WorkspaceEscape, OSError) as exc:
            why = " ".join(str(exc).split()) or type(exc).__name__
            session.note(f"decisions file {name} not written: {why}", "warning")

    def title_from(self, text: str) -> None:
        """A session with no title is named after its first message, as `tailrent sessions` shows it."""
        sd = self.session_dir
        if sd is None or self._titled:
            return
        self._titled = True
        try:
            if not sd.read_meta().title:
                line = " ".join(text.strip().split())
                sd.update_meta(title=line[:60] + ("…" if len(line) > 60 else ""))
        except (OSError, LookupError, ValueError) as exc:
            self.session.note(f"could not name the session: {exc}", "warning")

    def archive_sub(self, sub_id: str, sub_session: Session) -> None:
        """Keep the sub-session's whole transcript in the session directory (subs/<id>.json)."""
        if self.session_dir is None:
            return
        root = self.session_dir.path
        record = {
            "id": sub_id,
            "system": sub_session.system,
            "messages": [m.model_dump(mode="json") for m in sub_session.messages],
            "usage": [u.model_dump(mode="json") for u in sub_session.usage],
        }
        try:
            ensure_private_dir(Path(root) / "subs")
            write_file_atomic(Path(root) / "subs" / f"{sub_id}.json", json.dumps(record, ensure_ascii=False).encode("utf-8"))
        except OSError as exc:
            self.session.note(f"could not archive {sub_id}: {exc}", "error")

    def fold_originals(self, fold_no: int) -> list[Message]:
        """The messages fold `fold_no` removed from the context; ArchiveError when its archive entry is damaged."""
        return self.archive.read_originals(fold_no)

    async def fold_originals_async(self, fold_no: int) -> list[Message]:
        """`fold_originals` for the fold inspector: the archive file read with aiofiles, checked by the archive."""
        archive = self.archive
        if not isinstance(archive, FileFoldArchive):
            return archive.read_originals(fold_no)  # in memory (the demo): nothing to read
        path = archive.path_for(fold_no)
        try:
            data = await read_bytes(path)
        except OSError as exc:
            raise unreadable(path, f"fold #{fold_no}", exc, missing=ArchiveError, damaged=ArchiveError) from None
        return archive.fold_from_bytes(fold_no, data).originals

    async def spill_text(self, spill_id: str) -> str:
        """A spill's content for the spill viewer, or a clear message when its file is missing or altered:
        the file read with aiofiles (the event loop goes on), checked by the store as its own reader checks it."""
        store = self.spill_store
        try:
            if not isinstance(store, FileSpillStore):
                return store.read_spill(spill_id)  # in memory (the demo): nothing to read
            path, raw = store.spill_file(spill_id)
            try:
                data = await read_bytes(path)
            except OSError as exc:
                raise unreadable(path, f"spill {spill_id}", exc, missing=SpillMissing, damaged=SpillAltered) from None
            return store.spill_from_bytes(spill_id, path, data, raw=raw)
        except (OSError, ValueError) as exc:
            return f"[spill {spill_id} cannot be shown: {exc}]"

    def recall(self, question: str, expect: list[str]) -> tuple[ProbeReport, list[str]]:
        """A probe: where each expected word lives now, and what survives only outside;
        with one line for each entry outside that could not be read."""
        outside = read_outside(self.session, self.archive, self.spill_store, self.memory)
        return probe(self.session, question, expect, outside=outside.by_label()), outside.unreadable

    def export(self, fmt: str = "md", path: Path | None = None) -> Path:
        """Write the transcript as the user saw it (md or json); returns the file's absolute path.

        By default into the session's own directory (never the user's repository);
        a relative `path` is taken from the workspace, and a path into the data dir
        is refused (it could overwrite a session).
        """
        from tailrent_tui.store.export import export_session, write_export

        sd = self.session_dir
        if sd is None:
            raise ValueError("this session is not saved, so it cannot be exported")
        if fmt not in ("md", "json"):
            raise ValueError(f"unknown export format {fmt!r}: md or json")
        if path is None:
            out = Path(sd.path) / f"export.{fmt}"
        else:
            out = (self.workspace / Path(path).expanduser()).resolve()
            data_dir = resolve_data_dir(self.data_dir).resolve()
            if out == data_dir or data_dir in out.parents:
                raise ValueError(
                    f"{out} is inside the data dir {data_dir}, where it could overwrite a session; give another path"
                )
            out.parent.mkdir(parents=True, exist_ok=True)
        return write_export(export_session(sd, "md" if fmt == "md" else "json"), out).resolve()
