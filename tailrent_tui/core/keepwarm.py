"""Keep-warm: whether to ping a priced cache through a pause, decided online (rent or buy).

While the user is away, a provider's cache expires `ttl` seconds after it was
last touched. Two ways through a pause:

- **rent**: a keep-warm ping just before the cache would expire (the cached
  prefix read again plus one output token, `RentModel.ping`) refreshes it for
  another `ttl`. Each ping costs `ping_usd` = prefix x read rate + one output token.
- **buy**: let it expire. The resume then writes instead of reading: it adds
  `expiry_usd` = rewrite x write rate - prefix x read rate, what the cold
  resume writes less the read that a warm resume pays anyway. What it writes
  is the policy's to say (`Policy.cold_resume_tokens`): the whole prefix, or
  for the ladder what it folds the context to first, since a cold cache makes
  that fold free. An expiry that costs the policy less is bought sooner.

Nobody knows how long the pause will be, so the rule is the deterministic
ski-rental one: send ping k+1 only if k+1 pings cost no more than one expiry,
then stop and let it expire (the ladder folds at the resume, when the cache is
cold anyway). Whatever the pause's length, the pings and the expiry together
cost at most twice what the better of the two fixed choices would have cost
knowing the length in advance (`pause_ratio`): if the pause needs at most
`max_pings` pings the rule pays exactly the hindsight cost; if it needs more,
the hindsight best is the expiry and the rule pays at most `max_pings` pings
(<= one expiry) plus the expiry.

Pings follow one cadence: the first `ping_lead_seconds` before the cache would
expire, then every `ttl - lead` seconds. The hindsight choices use the same
cadence (a ping sent at the last instant would arrive too late).

Local sheets never ping (their TTL is the keep_alive the app sends), and a sheet
must say `pings = true` for the rule to run. The bench replays pauses with
`replay_until`; the app polls `due` and sends each ping through the model.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Literal

from pydantic import BaseModel, Field

from tailrent_tui.core.rent import PriceSheet, RentModel, RequestRent


class PingPrice(BaseModel):
    """What a ping and an expiry cost for a cached prefix of `prefix_tokens`."""

    prefix_tokens: int
    rewrite_tokens: int = Field(description="what a cold resume writes: the prefix, or what the policy folds it to first")
    ping_usd: float = Field(description="one ping: the prefix at the read rate and one output token")
    rewrite_usd: float = Field(description="what a cold resume writes, at the write rate")
    expiry_usd: float = Field(description="what an expiry adds: the rewrite less the read a warm resume pays")
    max_pings: int = Field(description="pings the rule sends in one pause before it lets the cache expire")


def ping_price(sheet: PriceSheet, prefix_tokens: int, rewrite_tokens: int | None = None) -> PingPrice | None:
    """The prices the rule weighs, or None when the sheet cannot ping or nothing is cached.

    `rewrite_tokens` is what a cold resume would write (None: the whole prefix)."""
    if not sheet.pings or sheet.local or prefix_tokens <= 0 or math.isinf(sheet.ttl_seconds):
        return None
    written = prefix_tokens if rewrite_tokens is None else max(0, min(rewrite_tokens, prefix_tokens))
    per_token = sheet.input_per_mtok / 1_000_000
    ping = prefix_tokens * per_token * sheet.cache_read_multiplier + sheet.output_per_mtok / 1_000_000
    rewrite = written * per_token * sheet.cache_write_multiplier
    expiry = max(0.0, rewrite - prefix_tokens * per_token * sheet.cache_read_multiplier)
    # k pings are allowed while k x ping <= expiry (a hair of slack for float rounding)
    max_pings = int(expiry / ping * (1 + 1e-12)) if ping > 0 else 0
    return PingPrice(
        prefix_tokens=prefix_tokens,
        rewrite_tokens=written,
        ping_usd=ping,
        rewrite_usd=rewrite,
        expiry_usd=expiry,
        max_pings=max_pings,
    )


class PauseOutcome(BaseModel):
    """One pause the rule had to decide (at least one ping was due), with its hindsight."""

    start: float = Field(description="the last request before the pause")
    end: float = Field(description="the request that ended it")
    prefix_tokens: int
    pings: int
    ping_usd: float
    expired: bool
    due_pings: int = Field(description="pings the cadence had due before the resume: keeping warm throughout")
    expiry_usd: float

    @property
    def online_usd(self) -> float:
        """What the rule paid for the pause: its pings, and the expiry if it let the cache go."""
        return self.pings * self.ping_usd + (self.expiry_usd if self.expired else 0.0)

    @property
    def keep_usd(self) -> float:
        """Hindsight choice 1: ping through the whole pause."""
        return self.due_pings * self.ping_usd

    @property
    def best_usd(self) -> float:
        """The better of the two fixed choices, knowing the pause's length."""
        return min(self.keep_usd, self.expiry_usd)


def pause_ratio(p: PauseOutcome) -> float:
    """The rule's cost over the hindsight best for one pause (1.0 when both are zero)."""
    if p.best_usd <= 0:
        return 1.0 if p.online_usd <= 0 else math.inf
    return p.online_usd / p.best_usd


class CompetitiveRatio(BaseModel):
    """The rule over a run's pauses, against the best choice in hindsight."""

    pauses: int = 0
    pinged_through: int = Field(default=0, description="pauses kept warm to the resume")
    expired: int = 0
    online_usd: float = 0.0
    best_usd: float = Field(default=0.0, description="the better choice for each pause, summed")
    always_ping_usd: float = Field(default=0.0, description="one fixed choice for every pause: ping through")
    never_ping_usd: float = Field(default=0.0, description="the other fixed choice: let every pause expire")
    worst_pause: float = Field(default=1.0, description="the largest ratio of one pause")

    @property
    def ratio(self) -> float | None:
        """Online against the best choice per pause, summed (None without a pause)."""
        if not self.pauses:
            return None
        return self.online_usd / self.best_usd if self.best_usd > 0 else 1.0

    @property
    def ratio_vs_fixed(self) -> float | None:
        """Online against the best single fixed choice (always ping, or never) for the whole run."""
        if not self.pauses:
            return None
        best = min(self.always_ping_usd, self.never_ping_usd)
        return self.online_usd / best if best > 0 else 1.0


def competitive_ratio(pauses: Iterable[PauseOutcome]) -> CompetitiveRatio:
    out = CompetitiveRatio()
    for p in pauses:
        out.pauses += 1
        out.pinged_through += int(not p.expired)
        out.expired += int(p.expired)
        out.online_usd += p.online_usd
        out.best_usd += p.best_usd
        out.always_ping_usd += p.keep_usd
        out.never_ping_usd += p.expiry_usd
        out.worst_pause = max(out.worst_pause, pause_ratio(p))
    return out


State = Literal["off", "warm", "keeping", "expiring", "expired"]


class KeepWarmStatus(BaseModel):
    """What the Tail panel says about the pause now."""

    state: State
    reason: str = ""
    pings: int = Field(default=0, description="pings sent in this pause")
    spent_usd: float = 0.0
    price: PingPrice | None = None
    next_ping_at: float | None = None
    expires_at: float | None = Field(default=None, description="when the cache expires if the rule sends what it allows")


class KeepWarm:
    """The rule for one RentModel: when the next ping is due, and whether it may go.

    The pause is everything since the rent model's last request; the pings of
    this pause are the trailing pings of its history.
    """

    def __init__(self, rent: RentModel, rewrite_tokens: Callable[[], int | None] | None = None) -> None:
        self.rent = rent
        #: what a cold resume would write now (the policy's `cold_resume_tokens`); None: the prefix
        self.rewrite_tokens = rewrite_tokens
        self.pauses: list[PauseOutcome] = []
        #: the price taken when the pause began: a session that changes mid-pause (a `!cmd`, a
        #: setting) must not make the pings already sent cost more than the expiry they avoid
        self._priced: tuple[float | None, int, PingPrice | None] | None = None

    @property
    def sheet(self) -> PriceSheet:
        return self.rent.sheet

    def _pause(self) -> tuple[float | None, list[RequestRent]]:
        """(start, pings so far) of the current pause."""
        pings: list[RequestRent] = []
        for r in reversed(self.rent.history):
            if not r.ping:
                return r.at, pings[::-1]
            pings.append(r)
        # resumed from a journal: no history, the cache's last touch starts the pause
        return self.rent.last_at, pings[::-1]

    def price(self) -> PingPrice | None:
        """The prices for this pause, fixed when it began (its last request and prefix)."""
        start, _ = self._pause()
        prefix = self.rent.prefix_tokens
        if self._priced is not None and self._priced[:2] == (start, prefix):
            return self._priced[2]
        price = ping_price(self.sheet, prefix)
        if price is not None and self.rewrite_tokens is not None:
            # what a cold resume would write is asked only of a sheet that pings (it walks the transcript)
            price = ping_price(self.sheet, prefix, self.rewrite_tokens())
        self._priced = (start, prefix, price)
        return price

    def next_ping_at(self) -> float | None:
        """When the rule sends its next ping, or None if it sends no more in this pause."""
        price = self.price()
        last = self.rent.last_at
        if price is None or last is None:
            return None
        _, pings = self._pause()
        if len(pings) + 1 > price.max_pings:
            return None
        return last + self.sheet.ttl_seconds - self.sheet.ping_lead_seconds

    def due(self, now: float) -> bool:
        """A ping should go out now: its time has come and the cache has not expired yet."""
        at = self.next_ping_at()
        expires = self.rent.cache_expires_at
        return at is not None and expires is not None and at <= now < expires

    def ping(self, now: float) -> RequestRent:
        """Charge a ping the caller sent at `now` (the app sends it through the model first)."""
        return self.rent.ping(now)

    def status(self, now: float) -> KeepWarmStatus:
        s = self.sheet
        if s.local:
            return KeepWarmStatus(state="off", reason="a local sheet never pings")
        if not s.pings:
            return KeepWarmStatus(state="off", reason=f"the {s.name} sheet does not allow pings")
        expires = self.rent.cache_expires_at
        price = self.price()
        if expires is None or price is None:
            return KeepWarmStatus(state="off", reason="nothing cached to keep warm")
        _, pings = self._pause()
        spent = sum(p.usd for p in pings)
        if now >= expires:
            return KeepWarmStatus(state="expired", pings=len(pings), spent_usd=spent, price=price, expires_at=expires)
        nxt = self.next_ping_at()
        left = max(0, price.max_pings - len(pings))
        final = expires if nxt is None else nxt + (left - 1) * (s.ttl_seconds - s.ping_lead_seconds) + s.ttl_seconds
        state: State = "expiring" if nxt is None else ("keeping" if pings else "warm")
        return KeepWarmStatus(
            state=state,
            pings=len(pings),
            spent_usd=spent,
            price=price,
            next_ping_at=nxt,
            expires_at=final,
        )

    def replay_until(self, at: float) -> list[RequestRent]:
        """Send (charge) every ping the rule sends before a request at `at`, and record the pause.

        The trace's clock stands in for the wall clock: a ping goes out at its
        time if the user has not come back by then.
        """
        start = self.rent.last_at
        if start is None:
            return []
        cadence = self.sheet.ttl_seconds - self.sheet.ping_lead_seconds
        first = start + cadence
        if at <= first:
            return []  # no ping was due: the pause is not priced (the next request starts another)
        price = self.price()
        if price is None:
            return []
        sent: list[RequestRent] = []
        while (nxt := self.next_ping_at()) is not None and nxt < at:
            sent.append(self.rent.ping(nxt))
        due = math.ceil((at - first) / cadence)
        expired = self.rent.cache_expires_at is not None and at >= self.rent.cache_expires_at
        self.pauses.append(
            PauseOutcome(
                start=start,
                end=at,
                prefix_tokens=price.prefix_tokens,
                pings=len(sent),
                ping_usd=price.ping_usd,
                expired=expired,
                due_pings=due,
                expiry_usd=price.expiry_usd,
            )
        )
        return sent
