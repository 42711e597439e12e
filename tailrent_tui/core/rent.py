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

Pauses. A sheet with `pings = true` lets the app keep a priced cache warm with
a keep-warm ping (`RentModel.ping`: the cached prefix read again, one output
token), which refreshes the TTL; whether to send one is decided online in
`core/keepwarm.py`. A sheet with `restores_slots = true` (llama.cpp with slot
save/restore) brings the saved prefix back after a pause past the TTL: the
resume re-evaluates only what follows it, and the restore is counted apart.

Folds on an engine that shifts KV. A sheet with `reuses_shifted_kv = true`
(llama.cpp asked with `n_cache_reuse`, a model without sliding-window
attention) counts as cached, after the common prefix, the next messages found
further on in the previous request (`reused_prefix`): a fold whose summary goes
after the kept messages costs the summary and what follows. With
`prompt_cache = true` (llama.cpp's `--cache-ram`) the prompts before the last
are kept too: undoing the latest fold finds the pre-fold prompt there.

Folds on an engine that keeps checkpoints. A sliding-window model (gemma3) or a
recurrent one cannot roll its KV back past its window: llama.cpp restarts a
changed prompt from a context checkpoint it took while reading an earlier one
(`Checkpoints`: at user-message starts and near a prompt's end). A sheet with
`checkpoints` (their number) and `swa_tokens` (the window) predicts that: a
change within the window keeps the common prefix, one further back keeps the
prefix up to the last checkpoint before it.

Price sheets are data: `tailrent_tui/data/prices.toml`, plus any user file.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Callable, Iterable, Sequence
from importlib import resources
from operator import itemgetter
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError, model_validator

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
    pings: bool = Field(
        default=False,
        strict=True,
        description="the provider lets a keep-warm ping (the cached prefix, one output token) refresh its cache",
    )
    ping_lead_seconds: float = Field(default=20.0, gt=0, description="a ping goes out this long before the cache would expire")
    restores_slots: bool = Field(
        default=False,
        strict=True,
        description="the engine saves its KV slot when idle and restores it on resume (llama.cpp --slot-save-path)",
    )
    restore_tokens_per_second: float | None = Field(
        default=None, gt=0, description="how fast a slot restore brings back saved prefix tokens"
    )
    reuses_shifted_kv: bool = Field(
        default=False,
        strict=True,
        description="the engine finds cached messages further on after a deletion and shifts their KV into place "
        "(llama.cpp with n_cache_reuse, a model without sliding-window attention): a fold that puts its summary "
        "after the kept messages leaves their cache in use",
    )
    reuse_min_tokens: int = Field(default=64, ge=1, description="the shortest cached run the engine shifts (n_cache_reuse)")
    prompt_cache: bool = Field(
        default=False,
        strict=True,
        description="the engine keeps recent prompts besides the last (llama.cpp --cache-ram): a request that "
        "repeats one of them (an undone fold) reads it from there",
    )
    checkpoints: int = Field(
        default=0,
        ge=0,
        description="the engine cannot roll its KV back token by token, only to context checkpoints it took while "
        "reading prompts, this many at most (llama.cpp --ctx-checkpoints, with a sliding-window or recurrent model); "
        "0: it rolls back anywhere",
    )
    checkpoint_min_step: int = Field(
        default=8192,
        ge=1,
        description="the spacing that thins a full list of checkpoints (llama.cpp --checkpoint-min-step)",
    )
    swa_tokens: int = Field(
        default=0,
        ge=0,
        description="with checkpoints: the sliding window (llama.cpp's n_swa): a change this close to the end of the "
        "cached prompt is rolled back without a checkpoint; 0 for a recurrent model",
    )

    @model_validator(mode="after")
    def _pauses_make_sense(self) -> PriceSheet:
        if self.pings:
            if self.local:
                raise ValueError("pings: a local sheet never pings (its TTL is the keep_alive the app sends)")
            if self.input_per_mtok <= 0 or self.cache_read_multiplier <= 0:
                raise ValueError("pings: a ping is priced as a cached read: give input_per_mtok and cache_read_multiplier")
            if self.ping_lead_seconds >= self.ttl_seconds:
                raise ValueError("ping_lead_seconds: must be shorter than ttl_seconds")
        if self.restores_slots and not self.local:
            raise ValueError("restores_slots: only a local engine restores KV slots (set local = true)")
        if self.reuses_shifted_kv and not self.local:
            raise ValueError("reuses_shifted_kv: only a local engine shifts its KV cache (set local = true)")
        if self.checkpoints and not self.local:
            raise ValueError("checkpoints: only a local engine keeps context checkpoints (set local = true)")
        if self.checkpoints and self.reuses_shifted_kv:
            raise ValueError("checkpoints: an engine that keeps checkpoints cannot shift its KV (reuses_shifted_kv)")
        return self

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
        raise PriceSheetError(f"price sheet {name!r} in {source}: missing {', '.join(repr(k) for k in missing)}")
    try:
        return PriceSheet.model_validate({**table, "name": name})
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"])
        # a rule across keys (pings, restores_slots) names its key in its own message
        msg = err["msg"].removeprefix("Value error, ")
        raise PriceSheetError(f"price sheet {name!r} in {source}: " + (f"{key}: {msg}" if key else msg)) from None


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
    at: float | None = Field(default=None, description="when it was sent (epoch seconds)")
    ping: bool = Field(default=False, description="a keep-warm ping, not a turn of the conversation")
    restored: bool = Field(default=False, description="the cache had expired and a saved KV slot brought the prefix back")
    restore_seconds: float | None = Field(default=None, description="the restore's time at the sheet's restore speed")


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
    pings: int = Field(default=0, description="keep-warm pings (not counted in `requests`)")
    ping_usd: float = Field(default=0.0, description="what the pings cost (included in `usd`)")
    restores: int = Field(default=0, description="resumes whose prefix a saved KV slot brought back")
    restore_seconds: float = 0.0

    def add(self, r: RequestRent) -> None:
        self.requests += int(not r.ping)
        self.pings += int(r.ping)
        self.ping_usd += r.usd if r.ping else 0.0
        self.restores += int(r.restored)
        self.restore_seconds += r.restore_seconds or 0.0
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
    content) breaks the prefix. A core Session keeps them as messages arrive
    (`Session.context_items`); anything else that holds messages is read whole.
    """
    kept = getattr(session, "context_items", None)
    if kept is not None:
        items: list[Item] = kept()
        return items
    return [context_item(session, m) for m in session.messages if not m.cut_off]


def context_item(session: Any, m: Any) -> Item:
    """One message's (identity, tokens) item, as `context_items` makes them."""
    return (f"{m.id}#{m.kind.value}", session.sent_tokens(m))


def _tokens(items: Iterable[Item]) -> int:
    """The items' tokens, summed."""
    return sum(map(_TOKENS, items))


_TOKENS = itemgetter(1)


def common_length(previous: Sequence[Item], current: Sequence[Item]) -> int:
    """How many leading items are equal in both (the shorter one ends the run)."""
    n = min(len(previous), len(current))
    # the common case, a request that appends to the previous one: one comparison, in C (the items a
    # session keeps are the same objects from request to request, compared by identity first)
    if (previous == current[:n]) if n == len(previous) else (previous[:n] == current):
        return n
    k = 0
    for a, b in zip(previous, current, strict=False):
        if a != b:
            break
        k += 1
    return k


def shared_prefix(previous: Sequence[Item], current: Sequence[Item]) -> int:
    """Tokens of the longest run of leading items equal in both."""
    k = common_length(previous, current)
    return _tokens(current[:k] if k < len(current) else current)


def reused_prefix(previous: Sequence[Item], current: Sequence[Item], min_tokens: int) -> int:
    """Tokens an engine that shifts KV reuses (llama.cpp's n_cache_reuse): the common prefix,
    then each next item found further on in the previous request, in order, in runs of at
    least `min_tokens` (a shorter match is skipped, as the engine skips it, and the search goes
    on). A deletion is bridged; the first item not found ahead (an insertion: a summary where
    the span was, a new message) ends it."""
    i = j = common_length(previous, current)
    total = _tokens(current[:j])
    while j < len(current):
        try:
            k = previous.index(current[j], i)
        except ValueError:
            break
        run, n = 0, 0
        while k + n < len(previous) and j + n < len(current) and previous[k + n] == current[j + n]:
            run += current[j + n][1]
            n += 1
        if run < min_tokens:
            i = k + 1
            continue
        total += run
        i, j = k + n, j + n
    return total


def lines_read_again(before: str, after: str, count: Callable[[str], int], min_tokens: int) -> int | None:
    """Tokens of the message `after` that an engine shifting KV (`reused_prefix`'s rule, line by line) reads
    again when its cache ends on the message `before`: the lines both start with, then runs of `before`'s
    lines in order, each of at least `min_tokens` (a line that left is a deletion the run bridges); from the
    first line not found ahead on, everything is read. None when the two share no first line.

    A fold's ledger sent ahead while the user read, and the ledger the fold carries at the trigger: the
    user's next message may have superseded a line (gone) and made room for others (kept in the order read
    and put last: `stable_order`), which llama.cpp reads with the user's message, not the whole ledger."""
    old, new = before.split("\n"), after.split("\n")
    i = j = 0
    while i < len(old) and j < len(new) and old[i] == new[j]:
        i, j = i + 1, j + 1
    if j == 0:
        return None
    while j < len(new):
        try:
            k = old.index(new[j], i)
        except ValueError:
            break
        n = 0
        while k + n < len(old) and j + n < len(new) and old[k + n] == new[j + n]:
            n += 1
        if sum(count(line) + 1 for line in new[j : j + n]) < min_tokens:
            i = k + 1
            continue
        i, j = k + n, j + n
    return sum(count(line) + 1 for line in new[j:]) if j < len(new) else 0


#: prompts a prompt cache keeps besides the last (llama.cpp keeps what fits its --cache-ram)
PROMPT_CACHE_ENTRIES = 8

#: llama.cpp ends a prompt's batches this many tokens before its end, and a micro-batch (n_ubatch, 512 by
#: default) before that, to take a context checkpoint there (server-context.cpp, "checkpoint_offsets")
CHECKPOINT_END_OFFSET = 4
CHECKPOINT_UBATCH = 512


def session_user_start(session: Any) -> Callable[[str], bool]:
    """Which rent items start a user message as the engine reads the prompt (where llama.cpp takes a context
    checkpoint, `PriceSheet.checkpoints`): a user message, a context note (a summary, a pointer, the ledger:
    a system message sent on the user side), a summary asked in context (its instruction comes first), an
    orphan tool result; not a reply, nor a tool result answering a call."""

    def user_start(key: str) -> bool:
        if key.startswith("__summary_answer__"):
            return False
        if key.startswith("__"):
            return True  # the other items of a summary request (its instruction, a ledger or note sent ahead)
        message_id = key.split("#", 1)[0]
        if message_id not in session:
            return True
        m = session.get(message_id)
        return m.role not in ("assistant", "tool") or (m.role == "tool" and not m.tool_call_id)

    return user_start


class Checkpoints:
    """llama.cpp's context checkpoints for one slot, for a model whose KV cannot be rolled back token by token
    (sliding-window attention past its window, recurrent state): where a request that changes the prompt
    further back than the window can restart.

    As llama.cpp 2026 takes them (measured on gemma3-270m through xllamacpp 2026.10, `benchmarks/RESULTS.md`):
    while it reads a prompt, at the start of its last user message (when it reads that far back), and
    `CHECKPOINT_END_OFFSET`
    (and a micro-batch more) before the prompt's end; a restart drops those past the point it went back to.
    When the list is full (`--ctx-checkpoints`) the older requests' checkpoints closer than
    `--checkpoint-min-step` to the one before them go, then the oldest: with the default 8,192-token step and
    a smaller window, the session's first checkpoint (the end of the head) and the newest request's are what
    is left."""

    def __init__(self, limit: int, min_step: int) -> None:
        self.limit = limit
        self.min_step = min_step
        #: (tokens, request number), oldest first
        self.held: list[tuple[int, int]] = []
        self._request = 0

    def restart(self, prefix: int) -> int:
        """Tokens cached for a request that shares `prefix` tokens with the prompt the slot holds, when the
        change is further back than the window: up to the last checkpoint within it (0 when none is)."""
        return max((t for t, _ in self.held if t <= prefix), default=0)

    def read(self, items: Sequence[Item], cached: int, user_start: Callable[[str], bool] | None) -> None:
        """A request whose `items` (the head first) were read from `cached` tokens on: the checkpoints past
        `cached` describe another prompt and go; those this reading takes are added."""
        self._request += 1
        self.held = [c for c in self.held if c[0] <= cached]
        at, taken, last_user = 0, [], None
        for key, tokens in items:
            if key != HEAD_ID and (user_start is None or user_start(key)):
                last_user = at
            at += tokens
        context = at
        if last_user is not None and last_user >= cached:
            taken.append(last_user)
        for offset in (CHECKPOINT_END_OFFSET + CHECKPOINT_UBATCH, CHECKPOINT_END_OFFSET):
            if context - offset >= max(cached, 1):
                taken.append(context - offset)
        for t in sorted(set(taken)):
            self._add(t)

    def _add(self, tokens: int) -> None:
        if len(self.held) + 1 >= self.limit:
            last, kept = -1, []
            for t, request in self.held:
                if request != self._request and last >= 0 and t <= last + self.min_step:
                    continue
                last = t
                kept.append((t, request))
            self.held = kept
        while len(self.held) >= self.limit:
            self.held.pop(0)
        self.held = [c for c in self.held if c[0] != tokens]
        self.held.append((tokens, self._request))


class RentModel:
    """Charges each request against the previous one's cache under a price sheet.

    Time (`at`, epoch seconds) comes from the trace or the wall clock; a gap of
    `ttl_seconds` or more since the previous request (or ping) empties the
    cache, unless the sheet restores slots: then the saved prefix comes back.
    """

    def __init__(self, sheet: PriceSheet) -> None:
        self.sheet = sheet
        self.totals = RentTotals()
        self.history: list[RequestRent] = []
        self._previous: list[Item] | None = None
        #: the previous request's tokens (the sum of `_previous`), kept with it: a request that appends
        #: to it is charged without summing the transcript again
        self._previous_tokens = 0
        self._previous_at: float | None = None
        #: earlier prompts a prompt cache still holds (sheet.prompt_cache), newest last
        self._recent: list[list[Item]] = []
        #: tokens the next request reads again when its prefix runs through the reply generated last (`generated`)
        self._reread = 0
        #: the engine's context checkpoints (sheet.checkpoints), and which items start a user message there
        self.checkpoints = Checkpoints(sheet.checkpoints, sheet.checkpoint_min_step)
        self.user_start: Callable[[str], bool] | None = None

    @property
    def last_at(self) -> float | None:
        """When the cache was last touched (a request or a ping), None if it holds nothing."""
        return self._previous_at

    @property
    def cache_expires_at(self) -> float | None:
        """When the cache expires if nothing touches it (inf when the sheet gives no TTL)."""
        return None if self._previous_at is None else self._previous_at + self.sheet.ttl_seconds

    @property
    def prefix_tokens(self) -> int:
        """Tokens the cache holds: the previous request's context (0 below `min_cacheable`)."""
        if self._previous is None:
            return 0
        tokens = self._previous_tokens
        return tokens if tokens >= self.sheet.min_cacheable else 0

    def _expired(self, at: float) -> bool:
        if self._previous_at is None:
            return False
        if math.isinf(self.sheet.ttl_seconds):
            return False
        return at - self._previous_at >= self.sheet.ttl_seconds

    def resume(self, at: float) -> bool:
        """A resume at `at`: if the cache has expired by then (and no slot brings it back), forget it. True if it had."""
        if self._previous is not None and self._expired(at) and not self.sheet.restores_slots:
            self._hold(None)
            self._previous_at = None
            self._recent = []
            self.checkpoints.held = []
            return True
        return False

    def assume_cached(self, items: list[Item], at: float) -> None:
        """The server holds `items` as of `at` (a resume inside the TTL, a KV slot restored):
        the next request is charged against them as the previous request's."""
        self._hold(list(items))
        self._previous_at = at
        self._reread = 0

    def rebase_head(self, head_tokens: int) -> None:
        """The head was mis-counted (a server that ignores the tool schema): fix the
        previous request's record so the next prefix still compares with it."""
        if self._previous:
            self._previous[0] = (HEAD_ID, head_tokens)
            self._hold(self._previous)

    def generated(self, item: Item, reread: int = 0) -> None:
        """The reply the engine just wrote: a local engine keeps the tokens it generated in its
        KV cache, so the next request finds them cached (llama.cpp's `cache_n` counts them).
        A priced API caches prompts only: there the reply is read as new on the next request.

        `reread`: what the next request reads again all the same when it runs through the reply: the
        reply's end of turn as the template writes it and its last token (generated, never evaluated),
        and the next reply's opening. On llama.cpp with SmolLM2 that is 7 tokens a request: within 10%
        of a 250-token turn, not of a 60-token summary instruction asked after the reply."""
        if self.sheet.local and self._previous is not None:
            self._previous.append(item)
            self._previous_tokens += item[1]
            self._reread = reread

    def rename(self, keys: Sequence[str], items: Sequence[Item], reread: int = 0) -> bool:
        """The previous request's items under `keys`, in a row at its end, are now `items`: a fold's
        summary pair (the instruction its summary request sent, the answer the engine generated)
        became the summary message (and the ledger sent after it, the ledger message), and the next
        request sends them as those same tokens. False when the previous request does not end on
        them (another request came between). `reread`: tokens at the end of the last of `items` the
        engine has not read all the same (`lines_read_again`: lines a ledger gained since it was sent)."""
        n = len(keys)
        if n == 0:
            return False
        # a prompt the engine's prompt cache keeps ends on them too (a prepared fold's context sent
        # ahead, then a turn before the trigger): it is read back under the new names
        for recent in self._recent:
            if [k for k, _ in recent[-n:]] == list(keys):
                recent[-n:] = list(items)
        previous = self._previous
        if previous is None or [k for k, _ in previous[-n:]] != list(keys):
            return False
        previous[-n:] = list(items)
        self._hold(previous)
        self._reread = max(self._reread, reread)
        return True

    def _hold(self, previous: list[Item] | None) -> None:
        """The cache holds these items now (None: nothing); their tokens are summed once, here."""
        self._previous = previous
        self._previous_tokens = _tokens(previous) if previous is not None else 0

    def expire(self) -> None:
        """Forget the cache (the model was unloaded, the server restarted)."""
        self._previous = None
        self._previous_tokens = 0
        self._previous_at = None
        self._recent = []
        self._reread = 0
        self.checkpoints.held = []

    def _restores(self, at: float) -> bool:
        """The cache expired, but a saved KV slot brings the previous prefix back."""
        return self.sheet.restores_slots and self._previous is not None and self._expired(at)

    def expired_at(self, at: float) -> bool:
        """Would a request sent at `at` find the cache expired? (`predict`'s third figure, without the
        context: a restored slot is not an expiry.)"""
        return self._previous is not None and self._expired(at) and not self.sheet.restores_slots

    def predict(self, items: Sequence[Item], head_tokens: int, at: float) -> tuple[int, int, bool]:
        """(context, cached, expired) for a request, without charging it.

        A restored slot is not an expiry: the policy finds the prefix warm.
        """
        context, cached, expired, _ = self._predict(items, head_tokens, at)
        return context, cached, expired

    def _predict(self, items: Sequence[Item], head_tokens: int, at: float) -> tuple[int, int, bool, list[Item]]:
        """`predict`'s figures, and the request's items with the head (what the cache holds after it)."""
        current = [(HEAD_ID, head_tokens), *items]
        previous = self._previous
        expired = self.expired_at(at)
        cached = 0
        if previous is None or expired:
            return head_tokens + _tokens(items), cached, expired, current
        held = self._previous_tokens
        k = common_length(previous, current)
        # a request that appends to the previous one (the common case): only its new items are summed
        context = held + _tokens(current[k:]) if k == len(previous) else head_tokens + _tokens(items)
        if self.sheet.reuses_shifted_kv:
            cached = reused_prefix(previous, current, self.sheet.reuse_min_tokens)
        else:
            cached = held if k == len(previous) else _tokens(current[:k])
            if self.sheet.checkpoints and held - cached > self.sheet.swa_tokens:
                # the change is further back than the window the engine still holds: it restarts from the last
                # checkpoint before it
                cached = self.checkpoints.restart(cached)
        if self._reread and cached >= held and cached < context:
            # the prefix runs through the reply the engine generated last: its end is read again
            cached = max(0, min(cached, context - 1) - self._reread)
        if self.sheet.prompt_cache:
            cached = max([cached, *(shared_prefix(p, current) for p in self._recent)])
        if cached < self.sheet.min_cacheable:
            cached = 0
        return context, cached, expired, current

    def prompt_cache_gain(self, items: Sequence[Item], head_tokens: int, at: float) -> int:
        """Tokens of this request that only the prompt cache holds: cached thanks to an earlier prompt
        it kept (an undone fold), beyond what the last request left. 0 without a prompt cache."""
        if not self.sheet.prompt_cache or self._previous is None or self._expired(at):
            return 0
        current = [(HEAD_ID, head_tokens), *items]
        last = self._cached(self._previous, current)
        return max([0, *(shared_prefix(p, current) - last for p in self._recent)])

    def _cached(self, previous: Sequence[Item], current: Sequence[Item]) -> int:
        if self.sheet.reuses_shifted_kv:
            return reused_prefix(previous, current, self.sheet.reuse_min_tokens)
        return shared_prefix(previous, current)

    def request(
        self,
        message_ids_with_tokens: Sequence[Item],
        head_tokens: int,
        at: float,
        output_tokens: int = 0,
        *,
        aside: bool = False,
    ) -> RequestRent:
        """Charge one request whose context is the head then these items, sent at `at`.

        `aside`: a request outside the conversation's turns (a fold's summary asked in its
        context): it moves the cache as any request does, but is left out of the totals."""
        context, cached, expired, current = self._predict(message_ids_with_tokens, head_tokens, at)
        restored = self._restores(at)
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
            at=at,
            restored=restored,
            restore_seconds=(cached / s.restore_tokens_per_second if restored and s.restore_tokens_per_second else None),
        )
        if self.sheet.prompt_cache and self._previous is not None and not expired:
            self._recent = [*self._recent, self._previous][-PROMPT_CACHE_ENTRIES:]
        if s.checkpoints:
            self._checkpoints_for(s).read(current, cached, self.user_start)
        self._previous, self._previous_tokens = current, context
        self._previous_at = at
        self._reread = 0
        if not aside:
            self.totals.add(r)
            self.history.append(r)
        return r

    def _checkpoints_for(self, sheet: PriceSheet) -> Checkpoints:
        """The checkpoint list, made anew when the sheet's rules changed (the placement keeper set them)."""
        c = self.checkpoints
        if (c.limit, c.min_step) != (sheet.checkpoints, sheet.checkpoint_min_step):
            c = self.checkpoints = Checkpoints(sheet.checkpoints, sheet.checkpoint_min_step)
        return c

    def ping(self, at: float) -> RequestRent:
        """Charge a keep-warm ping at `at`: the cached prefix read again, one output token.

        It refreshes the TTL and leaves the prefix as it was. Raises ValueError
        when there is nothing warm to keep (no prefix, or it expired already).
        """
        if self._previous is None or self._expired(at) or not self.prefix_tokens:
            raise ValueError("nothing to keep warm: the cache is empty or has expired")
        s = self.sheet
        cached = self.prefix_tokens
        r = RequestRent(
            context_tokens=cached,
            cached_tokens=cached,
            tail_tokens=0,
            output_tokens=1,
            usd=(cached * s.input_per_mtok * s.cache_read_multiplier + s.output_per_mtok) / 1_000_000,
            at=at,
            ping=True,
        )
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
    """The conversation's own requests: neither a delegate's, a fold summary's nor a keep-warm ping."""
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


def generation_rate(usage: Sequence[UsageRecorded]) -> float | None:
    """Output tokens per second as the server timed them, for the latest timed model; None
    before any timed reply (the sheets do not guess it)."""
    timed = [u for u in usage if u.generation_ms and u.output_tokens]
    if not timed:
        return None
    same = [u for u in timed if u.model == timed[-1].model]
    return sum(u.output_tokens or 0 for u in same) / (sum(u.generation_ms or 0.0 for u in same) / 1000)
