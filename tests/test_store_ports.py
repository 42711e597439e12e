"""The store ports: every fold archive and spill store has the same read methods
and fails the same way on a missing entry (a LookupError), and a damaged fold
archive file is one line naming the file wherever it is read — `tailrent
inspect`, `tailrent recall`, the search_history tool, /inspect and /recall in
the app — never a traceback; the other folds stay readable."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from folds import fold_span
from test_ui_app import submit
from ui_helpers import make_app, wait_until

from tailrent_tui.cli import cli
from tailrent_tui.core.messages import Folded, Kind
from tailrent_tui.core.ports import ArchiveError, FoldArchive, Memory, SpillMissing, SpillStore, StoreEntryError
from tailrent_tui.core.rungs.fold import MemoryFoldArchive, oldest_unpinned
from tailrent_tui.core.rungs.spill import MemorySpillStore, admit_tool_result
from tailrent_tui.core.session import Session
from tailrent_tui.core.summarize import LossySummarizer
from tailrent_tui.core.tokens import get_counter
from tailrent_tui.models.mock import MockModel
from tailrent_tui.store.archive import FileFoldArchive
from tailrent_tui.store.memory import MemoryStore
from tailrent_tui.store.outside import read_outside
from tailrent_tui.store.spills import FileSpillStore
from tailrent_tui.ui.screens.fold_inspector import FoldInspector
from tailrent_tui.ui.screens.recall import RecallScreen

# -- every implementation, one port ---------------------------------------------------


def _public_methods(cls: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_")
    }


def _port_methods(port: type) -> dict[str, inspect.Signature]:
    return {name: inspect.signature(f) for name, f in vars(port).items() if inspect.isfunction(f) and not name.startswith("_")}


@pytest.mark.parametrize(
    ("port", "implementation"),
    [
        (FoldArchive, MemoryFoldArchive),
        (FoldArchive, FileFoldArchive),
        (SpillStore, MemorySpillStore),
        (SpillStore, FileSpillStore),
        (Memory, MemoryStore),
    ],
)
def test_every_implementation_has_the_ports_methods_with_the_same_signatures(port, implementation):
    have = _public_methods(implementation)
    for name, signature in _port_methods(port).items():
        assert name in have, f"{implementation.__name__} lacks {port.__name__}.{name}"
        assert have[name] == signature, f"{implementation.__name__}.{name}{have[name]} is not {port.__name__}.{name}{signature}"


def _session() -> Session:
    return Session(counter=get_counter("chars4"), system="", window=4096, clock=lambda: 1_800_000_000.0)


@pytest.fixture(params=["memory", "file"])
def archive(request, tmp_path: Path) -> FoldArchive:
    return MemoryFoldArchive() if request.param == "memory" else FileFoldArchive(tmp_path / "archive")


def test_every_archive_reads_back_what_it_wrote_and_refuses_a_missing_fold_alike(archive):
    s = _session()
    originals = [s.add("user", "We chose Redis with a 15 minute TTL."), s.add("assistant", "Noted.")]
    assert archive.fold_numbers() == []
    archive.write_fold(1, originals, "[fold #1] Redis", ["15 minute"])
    originals[0].content = "changed after the fold"

    assert archive.fold_numbers() == [1]
    record = archive.read_fold(1)
    assert (record.fold_no, record.summary, record.facts_lost) == (1, "[fold #1] Redis", ["15 minute"])
    assert [m.content for m in archive.read_originals(1)] == ["We chose Redis with a 15 minute TTL.", "Noted."]
    with pytest.raises(ArchiveError, match="fold #7") as missing:
        archive.read_originals(7)
    assert isinstance(missing.value, LookupError) and "\n" not in str(missing.value)


@pytest.fixture(params=["memory", "file"])
def spills(request, tmp_path: Path) -> SpillStore:
    return MemorySpillStore() if request.param == "memory" else FileSpillStore(tmp_path / "spill")


def test_every_spill_store_reads_whole_or_a_range_and_refuses_a_missing_spill_alike(spills):
    spills.write_spill("s1", "grep", "one\ntwo\nthree\nfour\n", 1.0)
    assert spills.read_spill("s1") == "one\ntwo\nthree\nfour\n"
    assert spills.read_spill_lines("s1", 2, 3) == "two\nthree"
    with pytest.raises(ValueError, match="empty range 9-10"):
        spills.read_spill_lines("s1", 9, 10)
    with pytest.raises(SpillMissing, match="spill nope") as missing:
        spills.read_spill("nope")
    assert isinstance(missing.value, LookupError)


def test_a_damaged_memory_entry_is_a_lookup_error_naming_its_file(tmp_path: Path):
    memory = MemoryStore(tmp_path / "memory")
    memory.remember("plan", "ship friday")
    assert memory.keys() == ["plan"] and memory.recall("plan") == "ship friday"
    (tmp_path / "memory" / "plan.json").write_text("{cut sho")
    with pytest.raises(StoreEntryError, match=r"plan\.json") as damaged:
        memory.recall("plan")
    assert isinstance(damaged.value, LookupError) and "\n" not in str(damaged.value)


# -- a damaged fold archive file, everywhere it is read ---------------------------------

DAMAGES = {
    "missing": lambda p: p.unlink(),
    "truncated": lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]),
    "not JSON": lambda p: p.write_text("these are not the originals\n"),
    "a directory": lambda p: (p.unlink(), p.mkdir()),
}


def background(fact: str) -> str:
    # long enough that the lossy summary keeps only its first words, so the fact lives only in the archive
    return f"hello again, here is some background on the login flow before we start: {fact}."


@pytest.fixture(params=list(DAMAGES))
async def damaged(request, make_agent):
    """An agent whose session has two folds, fold #1's archive file damaged; returns (agent, that file)."""
    agent = make_agent(fold={"guard": "off", "summarizer": "lossy"})
    agent.session.detect_statements = False  # no ledger: the facts must live only in the archive
    for fact in ("the first ticket is ZEBRA-1111", "the second ticket is ZEBRA-2222"):
        first = agent.session.add("user", background(fact))
        second = agent.session.add("assistant", "Noted.")
        assert isinstance(await agent.ladder.fold([first.id, second.id]), Folded)
    agent.session.add("user", "and now?")
    assert "ZEBRA" not in agent.session.visible_text()
    agent.journal.flush()
    path = agent.session_dir.path / "archive" / "fold-0001.json"
    DAMAGES[request.param](path)
    return agent, path


def assert_one_line_naming(text: str, path: Path) -> str:
    lines = [line for line in text.splitlines() if str(path) in line]
    assert len(lines) == 1, text
    assert "Traceback" not in text
    return lines[0]


def run_cli(agent, *args: str):
    data_dir = agent.session_dir.path.parents[1]
    return CliRunner().invoke(cli, ["--data-dir", str(data_dir), *args])


async def test_tailrent_inspect_names_the_damaged_file_and_shows_the_other_fold(damaged):
    agent, path = damaged
    result = run_cli(agent, "inspect", agent.session.id)
    assert result.exit_code == 0 and result.exception is None, result.output
    assert "fold #1" in assert_one_line_naming(result.output, path)
    assert "ZEBRA-2222" in result.output

    as_json = run_cli(agent, "inspect", agent.session.id, "--fold", "1", "--json")
    assert as_json.exit_code == 0, as_json.output
    view = json.loads(as_json.output)
    assert view["originals"] is None and str(path) in view["archive_error"] and "\n" not in view["archive_error"]


async def test_tailrent_recall_warns_in_one_line_and_still_finds_the_other_fold(damaged):
    agent, path = damaged
    result = run_cli(agent, "recall", agent.session.id, "which tickets?", "--expect", "ZEBRA-1111", "--expect", "ZEBRA-2222")
    assert result.exit_code == 0 and result.exception is None, result.output
    assert assert_one_line_naming(result.stderr, path).startswith("warning: not searched: fold #1")
    assert "'ZEBRA-2222' — not in context; only in fold #2 archive" in result.stdout
    assert "'ZEBRA-1111' — nowhere in this session" in result.stdout

    as_json = run_cli(agent, "recall", agent.session.id, "q", "--expect", "ZEBRA-2222", "--json")
    report = json.loads(as_json.stdout)
    assert report["items"][0]["archive_only"] == ["fold #2 archive"]
    assert len(report["unreadable"]) == 1 and str(path) in report["unreadable"][0]


async def test_search_history_is_a_tool_error_naming_the_file_and_searches_the_other_folds(damaged):
    agent, path = damaged
    agent.model = MockModel(
        [{"tool_calls": [{"name": "search_history", "arguments": {"query": "ticket is ZEBRA"}}]}, "Found the second."]
    )
    result = await agent.turn("Which tickets were mentioned?")
    assert result.error is None and result.reply.content == "Found the second."
    (answer,) = [m for m in agent.session.messages if m.kind == Kind.tool_result]
    first = answer.content.splitlines()[0]
    assert first.startswith("error: not searched: fold #1: file") and first == assert_one_line_naming(answer.content, path)
    assert "fold #2 · user" in answer.content and "ZEBRA-2222" in answer.content
    assert "ZEBRA-1111" not in answer.content


async def test_slash_inspect_shows_the_damaged_file_in_one_line_and_the_other_fold_whole(damaged):
    agent, path = damaged
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        await submit(pilot, app, "/inspect 1")
        await wait_until(pilot, lambda: isinstance(app.screen, FoldInspector), what="the inspector on fold #1")
        assert app.screen.originals == []
        assert app.screen.error.startswith("the originals cannot be shown: fold #1: file")
        assert_one_line_naming(app.screen.error, path)
        await pilot.press("escape")

        await submit(pilot, app, "/inspect 2")
        await wait_until(pilot, lambda: isinstance(app.screen, FoldInspector), what="the inspector on fold #2")
        assert app.screen.error is None
        assert any("ZEBRA-2222" in m.content for m in app.screen.originals)
        assert app.is_running


async def test_slash_recall_warns_in_one_line_and_reports_the_other_fold(damaged):
    agent, path = damaged
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        await submit(pilot, app, "/recall which tickets? --expect ZEBRA-1111 ZEBRA-2222")
        await wait_until(pilot, lambda: isinstance(app.screen, RecallScreen), what="the recall screen")
        found = {i.word: i.archive_only for i in app.screen.report.items}
        assert found == {"ZEBRA-1111": [], "ZEBRA-2222": ["fold #2 archive"]}
        warnings = [n.message for n in app._notifications if str(path) in n.message]
        assert len(warnings) == 1 and warnings[0].startswith("not searched: fold #1: file")
        assert "\n" not in warnings[0]
        assert app.is_running


def test_read_outside_goes_on_past_every_kind_of_damaged_entry(tmp_path: Path):
    s = _session()
    archive, spills = FileFoldArchive(tmp_path / "archive"), FileSpillStore(tmp_path / "spill")
    memory = MemoryStore(tmp_path / "memory")
    s.add("user", background("the ticket is ZEBRA-1111"))
    s.add("assistant", "Noted.")
    fold_span(s, oldest_unpinned(s, 2), summarizer=LossySummarizer(), guard="off", archive=archive)
    good = admit_tool_result(s, "grep", "ZEBRA-3333 hit\n" * 300, spills, threshold=10)
    bad = admit_tool_result(s, "grep", "ZEBRA-4444 hit\n" * 300, spills, threshold=10)
    memory.remember("kept", "ZEBRA-5555")
    memory.remember("cut", "ZEBRA-6666")

    spills.path_for(bad.spill_id).write_text("{}")
    (tmp_path / "memory" / "cut.json").write_text("[")
    outside = read_outside(s, archive, spills, memory)
    assert list(outside.by_label()) == ["fold #1 archive", f"spill {good.spill_id[:8]}", "memory kept"]
    assert len(outside.unreadable) == 2
    assert all("\n" not in line for line in outside.unreadable)
    assert str(spills.path_for(bad.spill_id)) in outside.unreadable[0]
    assert str(tmp_path / "memory" / "cut.json") in outside.unreadable[1]
    assert [hit.split(":")[0] for hit in outside.search("zebra-1111")] == [f"fold #1 · user {s.folds[0].span_ids[0]}"]
