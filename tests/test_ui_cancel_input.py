"""Nothing typed is lost around a cancel (issue 26, item 6), through the real app (Pilot).

A message whose turn is cancelled before it entered the session (its paste
still being taken in, a fold at the paste's admission running) comes back to
the input; pastes given back or joined keep their own text even when their
chips carry the same label; what the user types or pastes while a cancel lands
stays in the input; a message sent is sent once.
"""

from __future__ import annotations

import os

import pytest
from test_ui_fold_watch import ASK, folding_agent, shown
from textual import events
from ui_helpers import GatedModel, fill, make_agent, make_app, wait_until

from tailrent_tui.core.messages import Kind
from tailrent_tui.models.errors import ToolsUnsupported
from tailrent_tui.models.mock import MockModel
from tailrent_tui.models.summarizer import ModelSummarizer


@pytest.fixture(autouse=True)
def config_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(tmp_path / "config"))


def lines(tag: str, n: int = 40) -> str:
    return "\n".join(f"{tag} line {i}: Traceback frame {tag}-{i}" for i in range(n))


async def paste(pilot, app, text: str) -> None:
    before = app.prompt.text
    app.prompt.post_message(events.Paste(text))
    await wait_until(pilot, lambda: app.prompt.text != before, what="the paste in the input")


def users(agent) -> list[str]:
    return [m.content for m in agent.session.messages if m.role == "user" and m.kind is Kind.chat]


async def test_a_message_cancelled_while_its_paste_is_taken_in_comes_back_to_the_input(tmp_path):
    """The paste's admission folds (the trigger is near) and the user presses escape: the message never
    reached the session, so its words go back to the input, and the next enter sends them once."""
    agent, gate = folding_agent(tmp_path, [{"text": "The reply."}])
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        app.prompt.focus()
        await paste(pilot, app, lines("A", 200))
        chip = app.prompt.text
        await pilot.press(*" why does this fail?")
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.transcript.fold_status is not None, what="the fold at the paste")
        assert "why does this fail?" not in users(agent), "the message waits for its paste"
        await pilot.press("escape")
        await wait_until(pilot, lambda: not app.busy, what="the turn cancelled")
        assert "why does this fail?" not in " ".join(users(agent))
        assert app.prompt.text == f"{chip} why does this fail?", "the message is back in the input"
        assert "your message was not sent: it is back in the input" in shown(app, ".turn-notice")
        assert not app.session_screen.retry_pending  # nothing owed: the words are in the input

        gate.set()
        await pilot.press("enter")
        await wait_until(pilot, lambda: not app.busy and agent.session.messages[-1].content == "The reply.", what="the reply")
        assert users(agent)[-1] == f"{chip} why does this fail?"
        assert sum(u.count("why does this fail?") for u in users(agent)) == 1
        # the paste entered once, with its label, whatever the second send did
        assert len([m for m in agent.session.messages if m.tool == "paste" and chip in m.content]) == 1


async def test_a_paste_given_back_keeps_its_text_beside_one_pasted_meanwhile_with_the_same_label(tmp_path):
    agent = make_agent(tmp_path)
    agent.model = GatedModel([{"text": "never streamed"}], chunk_size=4)
    app = make_app(agent)
    first, second = lines("first"), lines("second")
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press(*"question", "enter")
        await wait_until(pilot, lambda: app.session_screen.running, what="the turn")
        await paste(pilot, app, first)
        await pilot.press(*" see this", "enter")
        await wait_until(pilot, lambda: bool(app.transcript.query(".queued")), what="queued")
        await paste(pilot, app, second)  # typed while the first waits: the same line count, the same label
        await pilot.press("escape")
        await wait_until(pilot, lambda: not app.busy, what="the cancel")
        box = app.prompt
        bodies = sorted(box.sent_pastes(box.text).values())
        assert bodies == sorted([first, second]), "each chip keeps its own paste"
        await pilot.press("ctrl+o")  # expand the chips: the text the user would send
        assert first in box.text and second in box.text and "see this" in box.text


async def test_two_queued_pastes_with_the_same_label_are_both_sent(tmp_path):
    agent = make_agent(tmp_path)
    agent.model = GatedModel([{"text": "one"}, {"text": "two"}], chunk_size=4)
    app = make_app(agent)
    first, second = lines("first"), lines("second")
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press(*"question", "enter")
        await wait_until(pilot, lambda: app.session_screen.running, what="the turn")
        for body in (first, second):
            await paste(pilot, app, body)
            await pilot.press("enter")
            await wait_until(pilot, lambda: app.prompt.text == "", what="queued")
        assert len(app.session_screen.runner.waiting) == 2
        agent.model.gate.set()
        await wait_until(
            pilot, lambda: len([m for m in agent.session.messages if m.role == "assistant"]) == 2, what="both replies"
        )
        contents = "\n".join(m.content for m in agent.session.messages if m.tool == "paste")
        assert "first line 39" in contents and "second line 39" in contents


async def test_what_is_typed_and_sent_while_a_cancel_lands_is_kept_and_sent_once(tmp_path):
    agent = make_agent(tmp_path, script=[{"text": "word " * 300}, {"text": "Second."}], delay=0.01)
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press(*"first", "enter")
        await wait_until(
            pilot, lambda: app.transcript.reply is not None and len(app.transcript.reply.text) > 20, what="streaming"
        )
        await pilot.press(*"typed while it streams")
        await pilot.press("escape")
        await pilot.press(*" and after the escape")
        await wait_until(pilot, lambda: not app.busy, what="the cancel")
        assert app.prompt.text == "typed while it streams and after the escape"
        await pilot.press("enter")
        await wait_until(pilot, lambda: not app.busy and agent.session.messages[-1].content == "Second.", what="reply")
        assert users(agent) == ["first", "typed while it streams and after the escape"]
        assert ASK not in users(agent)


class RefusesTools(GatedModel):
    """Ollama's "does not support tools": the first request, with tools, is refused; the retry waits at the gate."""

    async def stream(self, messages, **kwargs):
        if kwargs.get("tools"):
            raise ToolsUnsupported("the model does not support tools")
        async for chunk in super().stream(messages, **kwargs):
            yield chunk


async def test_the_first_message_cancelled_before_its_reply_is_kept_though_a_system_note_follows_it(tmp_path):
    """Seen on llama.cpp: the text protocol's note entered after the first message; escape before the
    reply said only "reply cancelled", and ctrl+r had nothing to retry. (A note known before the
    request now goes before the message; one learnt from the first request still comes after it.)"""
    agent = make_agent(tmp_path)
    agent.model = RefusesTools([{"text": "The answer."}], chunk_size=4)
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press(*"first question", "enter")
        await wait_until(pilot, lambda: agent.session.messages[-1].role == "system", what="the protocol's note")
        assert agent.session.messages[-2].content == "first question"
        await pilot.press("escape")
        await wait_until(pilot, lambda: not app.busy, what="the cancel")
        assert app.session_screen.retry_pending
        assert "your message is kept: ctrl+r or /retry sends it" in shown(app, ".turn-notice")
        agent.model.gate.set()
        await pilot.press("ctrl+r")
        await wait_until(pilot, lambda: not app.busy and agent.session.messages[-1].content == "The answer.", what="reply")
        assert users(agent) == ["first question"]


async def test_a_fold_by_hand_that_saves_nothing_says_why_in_the_transcript(tmp_path):
    """Seen on llama.cpp: f waited 40 s for the summary, then a 5-second toast said the fold saved
    nothing; the transcript kept no trace of it."""

    agent = make_agent(tmp_path)
    fill(agent.session, 4)
    agent.fold_requests.summarizer = ModelSummarizer(MockModel([{"text": "- " + "a summary longer than its span " * 30}]))
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        app.prompt.value = "/fold m00000 m00001"
        app.prompt.focus()
        await pilot.press("enter")
        await wait_until(pilot, lambda: any(n.startswith("fold skipped: ") for n in shown(app, ".turn-notice")), what="why")
        assert not agent.session.folds


async def test_a_message_sent_while_a_command_runs_waits_for_its_output(tmp_path):
    """A turn started beside a `!cmd` answered before the command's output, which then landed mid-turn."""
    fifo = tmp_path / "gate"
    os.mkfifo(fifo)
    agent = make_agent(tmp_path, script=[{"text": "The tests pass."}])
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        app.prompt.value = f"!cat {fifo.name}"
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.session_screen.runner.shell_running, what="the command")
        await pilot.press(*"did they pass?", "enter")
        await wait_until(pilot, lambda: bool(app.transcript.query(".queued")), what="queued")
        assert shown(app, ".queued") == ["queued, sent when the command ends: did they pass?"]
        assert "did they pass?" not in users(agent) and not app.session_screen.running
        fd = None
        for _ in range(2000):  # the command opens the FIFO once its process has started
            try:
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
                break
            except OSError:
                await pilot.pause(0.01)
        assert fd is not None, "the command never opened its FIFO"
        os.write(fd, b"12 passed\n")
        os.close(fd)
        await wait_until(
            pilot, lambda: not app.busy and agent.session.messages[-1].content == "The tests pass.", rounds=2000, what="reply"
        )
        contents = [m.content for m in agent.session.messages]
        output = next(i for i, c in enumerate(contents) if "12 passed" in c)
        assert output < contents.index("did they pass?"), "the command's output comes before the message"
