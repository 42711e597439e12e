"""Fold placement chosen for the engine (issue 23, item 2): after the kept messages where the
engine shifts KV (llama.cpp with n_cache_reuse), in place elsewhere; confirmed by the request
after the first fold, and sent back in place, said once, when the server did not shift."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from tailrent_tui.agent.placement import PlacementKeeper, detect, gguf_architecture, gguf_header
from tailrent_tui.core.messages import ToolCall
from tailrent_tui.core.rent import RentModel, get_price_sheet
from tailrent_tui.core.rungs.fold import span_to_target
from tailrent_tui.core.session import Session
from tailrent_tui.models.openai import OpenAIModel
from tests.models.test_openai import ScriptedServer, collect
from tests.models.test_summary_aligned import chatter as summary_chatter


def chatter(i: int) -> str:
    return summary_chatter(i, 300)


def gguf(path: Path, arch: str, window: int | None = None) -> Path:
    """A GGUF header as llama.cpp's converter writes it: a uint32 key, then the architecture (then, for a
    sliding-window model, a name array to skip and its window)."""

    def string(text: str) -> bytes:
        raw = text.encode()
        return struct.pack("<Q", len(raw)) + raw

    body = struct.pack("<4sIQQ", b"GGUF", 3, 0, 2 if window is None else 4)
    body += string("general.alignment") + struct.pack("<II", 4, 32)
    body += string("general.architecture") + struct.pack("<I", 8) + string(arch)
    if window is not None:
        body += string("general.tags") + struct.pack("<IIQ", 9, 8, 2) + string("swa") + string("text")
        body += string(f"{arch}.attention.sliding_window") + struct.pack("<II", 4, window)
    path.write_bytes(body)
    return path


def test_the_architecture_is_read_from_the_gguf_header(tmp_path):
    assert gguf_architecture(gguf(tmp_path / "m.gguf", "llama")) == "llama"
    (tmp_path / "bad.gguf").write_bytes(b"GGUF\x03")
    assert gguf_architecture(tmp_path / "bad.gguf") is None
    assert gguf_architecture(tmp_path / "missing.gguf") is None


@pytest.fixture
def server():
    s = ScriptedServer()
    yield s
    s.stop()


@pytest.mark.parametrize(
    ("props", "placement", "why"),
    [
        (None, "in_place", "not llama.cpp"),
        ("llama", "after", "llama.cpp (llama, from its GGUF) shifts the kept KV"),
        ("gemma3", "in_place", "cannot shift the KV of gemma3"),
        ("unreadable gemma-3-270m", "in_place", "cannot shift the KV of its model"),
    ],
)
async def test_auto_asks_the_server_and_sends_n_cache_reuse_only_where_kv_shifts(server, tmp_path, props, placement, why):
    if props is not None:
        path = tmp_path / "gone" / "gemma-3-270m.gguf" if props.startswith("unreadable") else gguf(tmp_path / "m.gguf", props)
        server.props = {"model_path": str(path), "chat_template": ""}
    model = OpenAIModel(server.url, "m", read_timeout=5.0)
    try:
        state = await detect(model, "auto")
        assert state.placement == placement and why in state.why
        await collect(model)
        assert server.requests[-1].get("n_cache_reuse") == (64 if placement == "after" else None)
    finally:
        await model.aclose()


async def fill_until_fold(agent, start: int = 0) -> int:
    i = start
    while not agent.session.folds:
        await agent.turn(chatter(i))
        i += 1
    return i


def turn_usage(agent):
    return [u for u in agent.session.usage if u.purpose == "turn"]


async def test_a_fold_placed_after_the_kept_messages_costs_the_next_request_its_summary_only(make_agent):
    agent = make_agent(window=8192, system_prompt="Be brief.", tokenizer="chars4", fold={"placement": "after", "target": 0.6})
    await agent.link.start()
    await fill_until_fold(agent)  # the fold comes before the last turn's request
    ordinary, after = turn_usage(agent)[-2:]
    assert agent.placement.state.confirmed
    # the summary and the new message are read; the kept messages' KV was shifted into place
    assert after.evaluated_tokens <= ordinary.evaluated_tokens + agent.session.folds[-1].tokens_after + 64
    assert after.predicted_cached == pytest.approx(after.cached_tokens, rel=0.1)


async def test_in_place_the_same_fold_re_reads_what_follows_it(make_agent):
    agent = make_agent(window=8192, system_prompt="Be brief.", tokenizer="chars4", fold={"placement": "in_place", "target": 0.6})
    await agent.link.start()
    await fill_until_fold(agent)
    ordinary, after = turn_usage(agent)[-2:]
    assert after.evaluated_tokens > 2 * (ordinary.evaluated_tokens + agent.session.folds[-1].tokens_after)
    assert after.predicted_cached == pytest.approx(after.cached_tokens, rel=0.1)


async def test_a_server_that_ignores_n_cache_reuse_sends_folds_back_in_place_saying_so_once(make_agent):
    agent = make_agent(window=8192, system_prompt="Be brief.", tokenizer="chars4", fold={"placement": "after", "target": 0.6})
    await agent.link.start()
    agent.model.cache_reuse = None  # the server takes the field and does nothing with it
    i = await fill_until_fold(agent)
    keeper = agent.placement
    assert keeper.state.placement == "in_place" and "did not shift the kept KV" in keeper.state.why
    notes = [n.text for n in agent.session.notes if "folds go in place from now on" in n.text]
    assert len(notes) == 1
    assert not agent.rent.sheet.reuses_shifted_kv
    folds = len(agent.session.folds)
    i = await fill_until_fold_more(agent, i + 1, folds)
    assert agent.session.folds[-1].position == 0  # in place: where its span began, nothing before it
    assert len([n for n in agent.session.notes if "folds go in place from now on" in n.text]) == 1


async def fill_until_fold_more(agent, i: int, folds: int) -> int:
    while len(agent.session.folds) == folds:
        await agent.turn(chatter(i))
        i += 1
    return i


def turns_with_tools(n: int) -> Session:
    """Turns of a user message, a tool call, its result and a reply (four messages each)."""
    s = Session(window=32768)
    for i in range(n):
        s.add("user", f"question {i}: " + "words " * 60)
        s.add("assistant", "", tool_calls=[ToolCall(id=f"c{i}", name="grep", arguments={"pattern": "x"})])
        s.add("tool", "match " * 40, tool="grep", tool_call_id=f"c{i}")
        s.add("assistant", f"answer {i}: " + "words " * 30)
    return s


def ends_on_a_turn(s: Session, span: list[str]) -> bool:
    ids = [m.id for m in s.messages]
    after = ids.index(span[-1]) + 1
    return after < len(ids) and s.messages[after].role == "user"


def test_for_a_model_with_checkpoints_at_user_messages_a_span_ends_where_a_user_message_starts():
    s = turns_with_tools(6)
    # a target whose span stops inside a turn (after the first message of turn 2, say)
    for target in range(s.context_tokens - 900, s.context_tokens - 200, 37):
        plain = span_to_target(s, target)
        rounded = span_to_target(s, target, turn_ends=True)
        assert ends_on_a_turn(s, rounded), target
        assert rounded[: len(plain)] == plain or plain[: len(rounded)] == rounded
    assert any(not ends_on_a_turn(s, span_to_target(s, t)) for t in range(s.context_tokens - 900, s.context_tokens - 200, 37))


def test_a_span_that_cannot_run_to_the_next_user_message_is_cut_back_to_its_last_one():
    s = turns_with_tools(4)
    # the reply that ends turn 1 is pinned: a span ending inside turn 1 cannot take it, so it ends before turn 1
    s.pin(s.messages[7].id)
    span = [m.id for m in s.messages[:6]]
    from tailrent_tui.core.rungs.fold import end_on_turn

    cut = end_on_turn(s, span, len(s.messages) - 2)
    assert cut == span[:4] and ends_on_a_turn(s, cut)


async def test_auto_on_a_sliding_window_model_folds_in_place_with_spans_ending_at_user_messages(server, tmp_path):
    server.props = {"model_path": str(gguf(tmp_path / "m.gguf", "gemma3")), "chat_template": ""}
    model = OpenAIModel(server.url, "m", read_timeout=5.0)
    try:
        state = await detect(model, "auto")
        assert state.placement == "in_place" and state.turn_ends and "checkpoints at user-message starts" in state.why
    finally:
        await model.aclose()
    # the window, from the header: the rent model predicts llama.cpp's checkpoints with it
    assert state.swa_tokens == 0  # this header gives none
    server.props = {"model_path": str(gguf(tmp_path / "w.gguf", "gemma3", window=512)), "chat_template": ""}
    model = OpenAIModel(server.url, "m", read_timeout=5.0)
    try:
        rent = RentModel(get_price_sheet("local"))
        keeper = PlacementKeeper("auto", lambda: model, rent)
        await keeper.detect()
        assert keeper.state.swa_tokens == 512
        assert (rent.sheet.checkpoints, rent.sheet.swa_tokens, rent.sheet.reuses_shifted_kv) == (32, 512, False)
    finally:
        await model.aclose()
    llama = tmp_path / "l.gguf"
    assert gguf_header(gguf(llama, "llama", window=4096)) == ("llama", None)  # shifts its KV: no window needed
    server.props = {"model_path": str(gguf(llama, "llama")), "chat_template": ""}
    model = OpenAIModel(server.url, "m", read_timeout=5.0)
    try:
        assert not (await detect(model, "auto")).turn_ends
    finally:
        await model.aclose()


@pytest.mark.engine
async def test_auto_on_gemma3_served_by_llama_cpp_folds_in_place_with_spans_ending_at_user_messages(llama_server):
    # the real server: /props names the model file, whose GGUF header says gemma3 (sliding-window attention)
    model = OpenAIModel(llama_server, "gemma3-270m", read_timeout=60.0)
    try:
        state = await detect(model, "auto")
        assert state.placement == "in_place" and state.turn_ends, state.why
        assert model.cache_reuse is None  # n_cache_reuse is not sent: the server would not shift this model's KV
    finally:
        await model.aclose()


def test_a_span_of_one_turn_whose_reply_is_kept_is_no_span_for_a_model_with_checkpoints():
    # the user message of the last turn but one is all a pass may take; its reply is among the kept messages,
    # so the span could only end mid-turn, and the next fold would start off every checkpoint
    s = turns_with_tools(1)
    s.add("user", "question 1: " + "words " * 60)
    s.add("assistant", "answer 1")
    from tailrent_tui.core.rungs.fold import end_on_turn

    first = s.messages[4].id
    assert end_on_turn(s, [first], len(s.messages) - 1) == []
    assert span_to_target(s, s.context_tokens - 10, keep_recent=1, turn_ends=True) in ([], [m.id for m in s.messages[:4]])


def test_a_pinned_system_note_between_turns_does_not_cut_a_span_to_nothing():
    """Seen in a morning resume on a gemma3 server: the text protocol's pinned note sat between the
    long message's turn and the next; the span [long message, its reply] was taken for one that
    could only end mid-turn, the resume fold took nothing and the next request re-read it all."""
    from tailrent_tui.core.rungs.fold import end_on_turn
    from tailrent_tui.core.tokens import get_counter

    s = Session(counter=get_counter("chars4"), window=100_000)
    long = s.add("user", "read this and remember it: " + "step 1: the parser reads the header " * 40)
    reply = s.add("assistant", "ok")
    s.add("system", "This model cannot call tools here: it answers in text.", pinned=True)
    s.add("user", "thanks, that is all for today")
    s.add("assistant", "ok")
    s.add("user", "which module reads the footer?")
    assert end_on_turn(s, [long.id], len(s.messages) - 2) == [long.id, reply.id]
