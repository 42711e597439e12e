"""Keep-warm pings under hostile input (issue 27, item 7): a ping that never returns is abandoned
at ping_deadline, a server down or erroring is said once, and a ping in flight when the user
sends is cancelled, the turn going first.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tailrent_tui.agent.loop import TurnCallbacks

# -- keep-warm pings ----------------------------------------------------------------------------


def _priced(make_agent, **caps: Any):
    from tailrent_tui.settings import config_dir
    from tests.support.ui_helpers import FixedClock
    from tests.ui.test_rent import PRICED

    config_dir().mkdir(parents=True, exist_ok=True)
    (config_dir() / "prices.toml").write_text(PRICED, encoding="utf-8")
    agent = make_agent(["hello back", "second reply"], price_sheet="priced-test", caps=caps)
    agent.session.clock = FixedClock()
    return agent


@pytest.mark.fault("keep-warm pings")
async def test_a_ping_that_never_returns_is_abandoned_at_its_deadline(make_agent):
    agent = _priced(make_agent, ping_deadline=0.3)
    await agent.turn("hello", TurnCallbacks())
    real = agent.model.stream

    async def hangs(*args, **kwargs):
        await asyncio.Event().wait()
        yield  # an async generator, as stream is

    agent.model.stream = hangs
    agent.session.clock.now += 280
    started = time.monotonic()
    assert await asyncio.wait_for(agent.turns.ping(agent.session.clock()), 10) is False
    assert time.monotonic() - started < 5
    notes = [n.text for n in agent.session.notes if "keep-warm ping failed" in n.text]
    assert len(notes) == 1 and "ping_deadline" in notes[0]
    agent.model.stream = real


@pytest.mark.fault("keep-warm pings")
@pytest.mark.parametrize("fault", ["down", "erroring"])
async def test_a_ping_to_a_server_down_or_erroring_is_said_once(make_agent, fault):
    from tailrent_tui.models.errors import ModelError

    agent = _priced(make_agent)
    await agent.turn("hello", TurnCallbacks())

    async def fails(*args, **kwargs):
        raise ModelError("connection refused" if fault == "down" else "HTTP 500: boom")
        yield

    agent.model.stream = fails
    agent.session.clock.now += 280
    for _ in range(3):
        assert await agent.turns.ping(agent.session.clock()) is False
        agent.session.clock.now += 1
    assert len([n for n in agent.session.notes if "keep-warm ping failed" in n.text]) == 1


@pytest.mark.fault("keep-warm pings")
async def test_a_ping_in_flight_when_the_user_sends_is_cancelled_and_the_turn_goes_first(make_agent):
    agent = _priced(make_agent)
    await agent.turn("hello", TurnCallbacks())
    real = agent.model.stream
    started = asyncio.Event()

    def stream(messages, *args, **kwargs):
        if kwargs.get("options", {}).get("max_tokens") == 1:
            return slow_ping()
        return real(messages, *args, **kwargs)

    async def slow_ping():
        started.set()
        await asyncio.sleep(30)
        yield

    agent.model.stream = stream
    agent.session.clock.now += 280
    ping = asyncio.create_task(agent.turns.ping(agent.session.clock()))
    await asyncio.wait_for(started.wait(), 5)
    t0 = time.monotonic()
    result = await asyncio.wait_for(agent.turn("are you there?", TurnCallbacks()), 10)
    assert result.reply is not None and result.reply.content == "second reply"
    assert time.monotonic() - t0 < 5
    with pytest.raises(asyncio.CancelledError):
        await ping
