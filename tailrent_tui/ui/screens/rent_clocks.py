"""The session screen's clocks: the keep-warm ping, the cache countdown, the KV slot's save when idle.

Once a second the Tail panel asks how long the cache has left and what the
keep-warm rule says, and `keep_warm_tick` sends a ping when one is due (never
during a turn or a fold). After a turn, the llama.cpp slot is saved once the
session has stayed idle for `SLOT_SAVE_IDLE` seconds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.screen import Screen
from textual.timer import Timer

from tailrent_tui.core.keepwarm import KeepWarmStatus
from tailrent_tui.ui.protocol import SessionAgent

#: seconds of idleness after a turn before the app saves the KV slot
SLOT_SAVE_IDLE = 30.0


class RentClocks:
    """The keep-warm ping, the cache countdown and the KV slot's idle save (the session screen composes one)."""

    def __init__(self, host: Screen[Any], agent: SessionAgent, *, clock: Callable[[], float], busy: Callable[[], bool]) -> None:
        #: the screen the ping and the save run on, and whose notices they are
        self._host = host
        self._agent = agent
        self._clock = clock
        self._busy = busy
        self._pinging = False
        self._slot_timer: Timer | None = None
        #: seconds of idleness after a turn before the slot is saved
        self.slot_save_idle = SLOT_SAVE_IDLE

    def keep_warm_status(self) -> KeepWarmStatus | None:
        """The keep-warm rule's decision now, for the Tail panel (None without a rent model)."""
        keep_warm = self._agent.meter.keep_warm
        return keep_warm.status(self._clock()) if keep_warm is not None else None

    def keep_warm_tick(self) -> None:
        """Once a second: send a keep-warm ping when the rule says one is due, never during a turn."""
        keep_warm = self._agent.meter.keep_warm
        if keep_warm is None or self._busy() or self._pinging or not keep_warm.due(self._clock()):
            return
        self._pinging = True
        self._host.run_worker(self._ping(), group="ping", name="keep-warm ping", exit_on_error=False)

    async def _ping(self) -> None:
        try:
            await self._agent.turns.ping(self._clock())
        finally:
            self._pinging = False

    def cache_seconds_left(self) -> float | None:
        rent = self._agent.rent
        if rent is None:
            return None
        expires = rent.cache_expires_at
        if expires is None:
            main = [u for u in self._agent.session.usage if u.sub_session is None]
            if not main:
                return None
            expires = main[-1].at + rent.sheet.ttl_seconds
        return expires - self._clock()

    # -- the KV slot (llama.cpp) ----------------------------------------------------

    def arm_slot_save(self) -> None:
        """After a turn: save the slot once the session has stayed idle for `slot_save_idle` seconds."""
        self.disarm_slot_save()
        keeper = self._agent.slots
        if keeper is None or keeper.state != "on":
            return
        self._slot_timer = self._host.set_timer(self.slot_save_idle, self._save_slot_idle, name="slot save")

    def disarm_slot_save(self) -> None:
        timer = self._slot_timer
        if timer is not None:
            timer.stop()
        self._slot_timer = None

    def _save_slot_idle(self) -> None:
        self._slot_timer = None
        keeper = self._agent.slots
        if keeper is None or self._busy():
            return
        self._host.run_worker(self._save(keeper), group="slot", name="save the KV slot", exit_on_error=False)

    async def _save(self, keeper: Any) -> None:
        outcome = await keeper.save(f"idle {self.slot_save_idle:g} s")
        if outcome is None or not outcome.line:
            return
        text = "; ".join([outcome.line, *outcome.extra])
        self._host.notify(text, severity="information" if outcome.ok else "warning", timeout=6 if outcome.ok else 10)
