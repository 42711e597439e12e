"""The KV-slot keeper with a fake `SlotServer`: no HTTP, no engine (issue 24 item 1).

The keeper takes narrow inputs (the settings, the current model, the session, its
directory, the tools offered, how to reach the server's slots); these tests hand it a
`SlotServer` that records what it was asked, and check what the keeper saves, when it
does not, and what it restores.
"""

from __future__ import annotations

from pathlib import Path

from tailrent_tui.agent.kv_slots import SlotKeeper
from tailrent_tui.agent.wire import wire_messages
from tailrent_tui.core.session import Session
from tailrent_tui.core.tokens import get_counter
from tailrent_tui.models.kv_slots import SlotError, SlotsInfo
from tailrent_tui.models.openai import OpenAIModel, rendered_prompt
from tailrent_tui.models.wire import LlamaSlotRestored, LlamaSlotSaved
from tailrent_tui.settings import Settings
from tailrent_tui.store.sessions import SessionDir


class FakeSlots:
    """A server's slots in memory: what was saved, under which name; what is asked."""

    def __init__(self, *, unsupported: bool = False) -> None:
        self.files: dict[str, int] = {}
        self.asked: list[tuple[str, int, str]] = []
        self.unsupported = unsupported
        self.closed = False

    def probe(self) -> SlotsInfo:
        return SlotsInfo(total_slots=1, model_path=None, listed=True)

    def held_tokens(self, slot: int) -> int | None:
        return 0

    def save(self, slot: int, filename: str) -> LlamaSlotSaved:
        self.asked.append(("save", slot, filename))
        if self.unsupported:
            raise SlotError("501 Not Implemented", status=501, unsupported=True)
        self.files[filename] = 42
        return LlamaSlotSaved(n_saved=42, n_written=4096)

    def restore(self, slot: int, filename: str) -> LlamaSlotRestored:
        self.asked.append(("restore", slot, filename))
        return LlamaSlotRestored(n_restored=self.files.get(filename, 0), n_read=4096)

    def close(self) -> None:
        self.closed = True


def keeper_for(tmp_path: Path, server: FakeSlots) -> tuple[SlotKeeper, OpenAIModel, Session, SessionDir]:
    sd = SessionDir.create(tmp_path / "data", tokenizer="chars4")
    session = Session(counter=get_counter("chars4"), id=sd.id)
    model = OpenAIModel("http://127.0.0.1:9/v1", "fake-model")
    keeper = SlotKeeper(
        settings=Settings(),
        model=lambda: model,
        session=session,
        session_dir=sd,
        offered_tools=lambda: [],
        connect=lambda m: server,
    )
    return keeper, model, session, sd


def answered(model: OpenAIModel, session: Session, slot: int = 0) -> None:
    """As if the server had just answered the conversation through `slot`."""
    sent = rendered_prompt(model.name, wire_messages(session), None)
    model.last_prompt = type(sent)(sent.model, sent.tools, sent.messages, slot)


async def test_a_conversation_the_slot_holds_is_saved_once_and_recorded_in_meta(tmp_path):
    server = FakeSlots()
    keeper, model, session, sd = keeper_for(tmp_path, server)
    assert keeper.probe() is None and keeper.state == "on" and model.id_slot == 0
    session.add("user", "The API listens on port 8443.")
    answered(model, session)
    saved = await keeper.save("quit")
    assert saved is not None and saved.ok and saved.tokens == 42
    assert [a[0] for a in server.asked] == ["save"]
    assert [r.file for r in sd.read_meta().slots] == [saved.file]
    assert await keeper.save("quit again") is None, "the same prefix is not saved twice"
    assert len(server.asked) == 1


async def test_nothing_is_saved_when_the_slot_last_held_another_prompt(tmp_path):
    server = FakeSlots()
    keeper, model, session, _ = keeper_for(tmp_path, server)
    keeper.probe()
    session.add("user", "first")
    answered(model, session)
    session.add("user", "a message the server never read")  # the slot holds the prefix, not this
    other = rendered_prompt(model.name, [{"role": "user", "content": "a summary request"}], None)
    model.last_prompt = type(other)(other.model, other.tools, other.messages, 0)
    assert await keeper.save("quit") is None and server.asked == []


async def test_a_server_that_cannot_save_turns_slots_off_with_one_line(tmp_path):
    server = FakeSlots(unsupported=True)
    keeper, model, session, _ = keeper_for(tmp_path, server)
    keeper.probe()
    session.add("user", "hello")
    answered(model, session)
    saved = await keeper.save("quit")
    assert saved is not None and not saved.ok and saved.level == "warning"
    assert "--slot-save-path" in (saved.line or "")
    assert keeper.state == "off" and model.id_slot is None
    assert await keeper.save("again") is None, "off: not asked again"


async def test_a_saved_slot_is_restored_for_the_same_prefix(tmp_path):
    server = FakeSlots()
    keeper, model, session, sd = keeper_for(tmp_path, server)
    keeper.probe()
    session.add("user", "The API listens on port 8443.")
    answered(model, session)
    saved = await keeper.save("quit")
    assert saved is not None and saved.ok
    # the next process: a new keeper on the same session directory and server
    again = SlotKeeper(
        settings=Settings(),
        model=lambda: model,
        session=session,
        session_dir=sd,
        offered_tools=lambda: [],
        connect=lambda m: server,
    )
    restored = again.restore()
    assert restored is not None and restored.ok and restored.tokens == 42
    assert server.asked[-1] == ("restore", 0, saved.file)
    again.close()
    assert server.closed
