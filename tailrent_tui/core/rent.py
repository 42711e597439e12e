"""Tail rent: what each request costs, given what the previous one left cached.

For request i with context length L_i (head + transcript):

- the **prefix** C_i is the tokens of the longest run of leading context items
  identical to the previous request's, if that request was less than `ttl`
  seconds ago; below `min_cacheable` tokens nothing is cached (C_i = 0);
- the **tail** is L_i - C_i: written to the cache at the write rate (a
  provider) or re-evaluated (a local engine);
- output tokens are billed at the output rate.

The head (system prompt + tool schema) is the first item. A message's identity
is its id, its kind and its token count: a spilled message keeps its id but its
content becomes a pointer (kind `spill_pointer`, a different count), so it no
longer matches and the cache breaks from there on, as it would on a server.

Local engines have the same shape. llama.cpp keeps the KV cache of the last
request and re-evaluates everything after the first differing token; Ollama
does the same and unloads the model after `keep_alive`, which acts as the TTL.
So for the `local` sheet, `tail_tokens` is the number of re-evaluated prompt
tokens and the price is time, not dollars: the tail at the prompt rate the
server measured on earlier requests (`prompt_rate`), else the sheet's
`eval_tokens_per_second`.

A fold's summary asked of the model is a request outside the conversation
(`aside_rent`): it has its own prefix, and llama.cpp keeps the conversation's
KV cache across it (measured), so it never moves the conversation's prefix.

Price sheets are data: `tailrent_tui/data/prices.toml`, plus any user file.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Iterable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from tailrent_tui.core.messages import UsageRecorded

HEAD_ID = "__head__"

# Every key a sheet must give; `local` and `eval_tokens_per_second` are optional.
REQUIRED_KEYS = (
    "input_per_mtok",
    "cache_write_multiplier",
    "cache_read_multiplier",
    "output_per_mtok",
    "min_cacheable",
    "ttl_seconds",
)


class PriceSheetError(ValueError):
    """A price sheet that cannot be used: a missing or malformed price, a bad file."""


class PriceSheet(BaseModel):
    """What a backend charges: per-million-token prices, cache rules and TTL."""

    name: str
    input_per_mtok: float = Field(ge=0)
    cache_write_multiplier: float = Field(ge=0)
    cache_read_multiplier: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)
    min_cacheable: int = Field(ge=0)
    ttl_seconds: float = Field(gt=0, description="inf for a cache that never expires")
    local: bool = False
    eval_tokens_per_second: float | None = Field(default=None, gt=0)
    description: str = ""

    def with_ttl(self, ttl_seconds: float) -> PriceSheet:
        return self.model_copy(update={"ttl_seconds": ttl_seconds})

    @property
    def priced(self) -> bool:
        """A sheet with prices: its rent is dollars. Without (a local engine), rent is time."""
        return self.input_per_mtok > 0 or self.output_per_mtok > 0

    def eval_seconds(self, tokens: int) -> float | None:
        """The sheet's guess of the time to read `tokens` prompt tokens (None if it gives no speed)."""
        return tokens / self.eval_tokens_per_second if self.eval_tokens_per_second else None


def _sheet_from_table(name: str, table: Any, source: str) -> PriceSheet:
    if not isinstance(table, dict):
        raise PriceSheetError(f"price sheet {name!r} in {source}: expected a table, got {type(table).__name__}")
    missing = [k for k in REQUIRED_KEYS if k not in table]
    if missing:
        raise PriceSheetError(
            f"price sheet {name!r} in {source}: missing {', '.join(repr(k) for k in missing)}"
        )
    try:
        return PriceSheet.model_validate({**table, "name": name})
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"]) or "?"
        raise PriceSheetError(f"price sheet {name!r} in {source}: {key}: {err['msg']}") from None


def parse_price_sheets(text: str, source: str = "<text>") -> dict[str, PriceSheet]:
    """Sheets from TOML text: one table per sheet, `[name]` with the prices as keys."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PriceSheetError(f"{source}: not valid TOML ({exc})") from exc
    return {name: _sheet_from_table(name, table, source) for name, table in data.items()}


def packaged_prices_text() -> str:
    return resources.files("tailrent_tui").joinpath("data", "prices.toml").read_text(encoding="utf-8")


def load_price_sheets(paths: Iterable[str | Path] = ()) -> dict[str, PriceSheet]:
    """The packaged sheets, then each user file in order (a later sheet of the same name wins).

    A path that does not exist is skipped (the config dir's file is optional).
    """
    sheets = parse_price_sheets(packaged_prices_text(), "tailrent_tui/data/prices.toml")
    for p in paths:
        path = Path(p)
        if not path.exists():
            continue
        try:
            text = path.read_bytes().decode("utf-8")
        except OSError as exc:
            raise PriceSheetError(f"{path}: cannot read price sheets ({exc.strerror or exc})") from None
        except UnicodeDecodeError as exc:
            raise PriceSheetError(f"{path}: not UTF-8 (byte {exc.start}); save it as UTF-8") from None
        sheets.update(parse_price_sheets(text, str(path)))
    return sheets


def get_price_sheet(name: str, paths: Iterable[str | Path] = ()) -> PriceSheet:
    sheets = load_price_sheets(paths)
    try:
        return sheets[name]
    except KeyError:
        raise PriceSheetError(f"unknown price sheet {name!r}: choose one of {', '.join(sorted(sheets))}") from None


class RequestRent(BaseModel):
    """One request's rent."""

    context_tokens: int
    cached_tokens: int
    tail_tokens: int = Field(description="written to the cache, or re-evaluated by a local engine")
    output_tokens: int = 0
    usd: float = 0.0
    cache_expired: bool = Field(default=False, description="the previous request's cache had expired")
    eval_seconds: float | None = Field(default=None, description="local sheets: tail / eval speed")


class RentTotals(BaseModel):
    """A session's rent so far."""

    requests: int = 0
    context_tokens: int = 0
    cached_tokens: int = 0
    tail_tokens: int = 0
    output_tokens: int = 0
    usd: float = 0.0
    expiries: int = 0
    eval_seconds: float = 0.0

    def add(self, r: RequestRent) -> None:
        self.requests += 1
        self.context_tokens += r.context_tokens
        self.cached_tokens += r.cached_tokens
        self.tail_tokens += r.tail_tokens
        self.output_tokens += r.output_tokens
        self.usd += r.usd
        self.expiries += int(r.cache_expired)
        self.eval_seconds += r.eval_seconds or 0.0


Item = tuple[str, int]


def context_items(session: Any) -> list[Item]:
    """A session's context as (identity, tokens) items, without the head.

    The identity joins the message id and its kind, and the tokens (as sent, with
    their framing) are compared too, so a message spilled in place (same id, new
    content) breaks the prefix.
    """
    return [(f"{m.id}#{m.kind.value}", session.sent_tokens(m)) for m in session.messages if not m.cut_off]


def shared_prefix(previous: Sequence[Item], current: Sequence[Item]) -> int:
    """Tokens of the longest run of leading items equal in both."""
    total = 0
    for a, b in zip(previous, current):
        if a != b:
            break
        total += b[1]
    return total


class RentModel:
    """Charges each request against the previous one's cache under a price sheet.

    Time (`at`, epoch seconds) comes from the trace or the wall clock; a gap of
    `ttl_seconds` or more since the previous request empties the cache.
    """

    def __init__(self, sheet: PriceSheet) -> None:
        self.sheet = sheet
        self.totals = RentTotals()
        self.history: list[RequestRent] = []
        self._previous: list[Item] | None = None
        self._previous_at: float | None = None

    def _expired(self, at: float) -> bool:
        if self._previous_at is None:
            return False
        if math.isinf(self.sheet.ttl_seconds):
            return False
        return at - self._previous_at >= self.sheet.ttl_seconds

    def resume(self, at: float) -> bool:
        """A resume at `at`: if the cache has expired by then, forget it. True if it had."""
        if self._previous is not None and self._expired(at):
            self._previous = None
            self._previous_at = None
            return True
        return False

    def rebase_head(self, head_tokens: int) -> None:
        """The head was mis-counted (a server that ignores the tool schema): fix the
        previous request's record so the next prefix still compares with it."""
        if self._previous:
            self._previous[0] = (HEAD_ID, head_tokens)

    def expire(self) -> None:
        """Forget the cache (the model was unloaded, the server restarted)."""
        self._previous = None
        self._previous_at = None

    def predict(self, items: Sequence[Item], head_tokens: int, at: float) -> tuple[int, int, bool]:
        """(context, cached, expired) for a request, without charging it."""
        current = [(HEAD_ID, head_tokens), *items]
        context = head_tokens + sum(t for _, t in items)
        expired = self._previous is not None and self._expired(at)
        cached = 0
        if self._previous is not None and not expired:
            cached = shared_prefix(self._previous, current)
            if cached < self.sheet.min_cacheable:
                cached = 0
        return context, cached, expired

    def request(
        self,
        message_ids_with_tokens: Sequence[Item],
        head_tokens: int,
        at: float,
        output_tokens: int = 0,
    ) -> RequestRent:
        """Charge one request whose context is the head then these items, sent at `at`."""
        context, cached, expired = self.predict(message_ids_with_tokens, head_tokens, at)
        tail = context - cached
        s = self.sheet
        # Below the minimum nothing is written to the cache, so the tail pays the base rate.
        write_rate = s.cache_write_multiplier if context >= s.min_cacheable else 1.0
        usd = (
            cached * s.input_per_mtok * s.cache_read_multiplier
            + tail * s.input_per_mtok * write_rate
            + output_tokens * s.output_per_mtok
        ) / 1_000_000
        r = RequestRent(
            context_tokens=context,
            cached_tokens=cached,
            tail_tokens=tail,
            output_tokens=output_tokens,
            usd=usd,
            cache_expired=expired,
            eval_seconds=s.eval_seconds(tail),
        )
        self._previous = [(HEAD_ID, head_tokens), *message_ids_with_tokens]
        self._previous_at = at
        self.totals.add(r)
        self.history.append(r)
        return r

    def request_session(self, session: Any, at: float, output_tokens: int = 0) -> RequestRent:
        """Charge a request made with a core Session's current context."""
        return self.request(context_items(session), session.head_tokens, at, output_tokens)


def aside_rent(context_tokens: int, output_tokens: int = 0, sheet: PriceSheet | None = None) -> RequestRent:
    """A request outside the conversation (a fold's summary): all of it read, at the base input rate.

    It neither reads nor replaces the conversation's cached prefix, so it goes
    nowhere near a RentModel: the next turn's rent is what it would have been.
    """
    usd = 0.0
    if sheet is not None:
        usd = (context_tokens * sheet.input_per_mtok + output_tokens * sheet.output_per_mtok) / 1_000_000
    return RequestRent(
        context_tokens=context_tokens,
        cached_tokens=0,
        tail_tokens=context_tokens,
        output_tokens=output_tokens,
        usd=usd,
        eval_seconds=sheet.eval_seconds(context_tokens) if sheet is not None else None,
    )


def conversation_usage(usage: Iterable[UsageRecorded]) -> list[UsageRecorded]:
    """The conversation's own requests: neither a delegate's nor a fold summary's."""
    return [u for u in usage if u.sub_session is None and u.purpose == "turn"]


class PromptRate(BaseModel):
    """How fast the engine reads prompt tokens: measured by the server, or the sheet's guess."""

    tokens_per_second: float = Field(gt=0)
    measured: bool

    def seconds(self, tokens: int) -> float:
        return tokens / self.tokens_per_second


def prompt_rate(usage: Sequence[UsageRecorded], sheet: PriceSheet) -> PromptRate | None:
    """The prompt rate the server reported (its prompt time over the tokens it evaluated), else the sheet's.

    Every timed request counts, a fold's summary and a delegate's too (the
    same engine read them), but only those of the latest timed model: after a
    model switch the old speed says nothing. The ratio of sums weighs long
    prompts most, whose rate is the least blurred by per-request overhead.
    None when neither the server nor the sheet says.
    """
    timed = [u for u in usage if u.prompt_ms and u.evaluated_tokens]
    if timed:
        same = [u for u in timed if u.model == timed[-1].model]
        tokens = sum(u.evaluated_tokens or 0 for u in same)
        seconds = sum(u.prompt_ms or 0.0 for u in same) / 1000
        return PromptRate(tokens_per_second=tokens / seconds, measured=True)
    if sheet.eval_tokens_per_second:
        return PromptRate(tokens_per_second=sheet.eval_tokens_per_second, measured=False)
    return None
