"""The Tail panel: what the context holds against the window, and what it costs to resend.

A stacked bar (system, pinned, summaries, pointers, live tail, free) with its
legend and tokens, the tokens and percent of the window, the distance to the
fold trigger, a sparkline of the context after each change (the saw-tooth of
folds), the rent of the last request and of the session under the price sheet
(dollars on a priced sheet, time at the measured prompt rate on a local one),
the fold summaries asked of the model, the cache countdown with the keep-warm
rule's decision on a sheet that allows pings (core/keepwarm.py), and the
server's measured prompt/cached/evaluated tokens beside the prediction.

Every figure sits in a short row of a small table, so the panel fits its
width (about 46 columns) without a phrase ever wrapping in two.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Iterable

from pydantic import BaseModel
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Sparkline, Static

from tailrent_tui.core.keepwarm import KeepWarmStatus
from tailrent_tui.core.rent import PriceSheet, PromptRate, conversation_usage, prompt_rate
from tailrent_tui.core.session import Session

SPARK_POINTS = 120

# (label, theme variable) of each bar segment, in context order
SEGMENTS = (
    ("system", "tail-system"),
    ("pins", "tail-pinned"),
    ("summaries", "tail-summary"),
    ("pointers", "tail-pointer"),
    ("live", "tail-live"),
    ("free", "tail-free"),
)

# The panel's words, in the article's terms: /help lists them, the panel's tooltip too.
WORDS = (
    (
        "prefix",
        "the start of the context unchanged since the last request (system prompt, tool schema, "
        "history gone stable): the server keeps it cached, so it is cheap to resend.",
    ),
    (
        "tail",
        "everything after the cache boundary (this turn's message, the newest tool result, the last "
        "reply): new every turn, so it is read, or paid, in full.",
    ),
    (
        "rent",
        "what the tail costs, on every turn, for as long as the session lives. Dollars on a priced "
        "sheet; with a local engine, time: the tail's tokens at the prompt rate the server measured.",
    ),
    (
        "predicted",
        "what tailrent expects of a request before sending it: its prompt tokens and how many of them the server has cached.",
    ),
    ("cached", "prompt tokens the server did not read again: the prefix."),
    ("evaluated", "prompt tokens the server did read: the tail (all of the prompt once the cache expired)."),
    (
        "fold summaries",
        "requests that ask the model for a fold's summary: counted apart. Each is the "
        "conversation as the last request sent it plus one instruction, so the cache reads it again.",
    ),
    (
        "folds",
        "where a fold puts its summary: in place (the cache before it stays) or after the kept "
        "messages, where llama.cpp shifts their cache into place (n_cache_reuse) and the next request reads "
        "only the summary and what is new.",
    ),
    (
        "keep-warm",
        "while you are away, a ping (the cached prefix again, one output token) keeps a priced "
        "cache from expiring; tailrent pings only while the pings cost less than the rewrite an expiry "
        "would add, then lets it expire (never worse than twice the better choice in hindsight).",
    ),
)


class TailFigures(BaseModel):
    """Everything the panel shows, computed from the session and the price sheet."""

    window: int
    system: int
    pinned: int
    summaries: int
    pointers: int
    live: int
    context: int
    trigger_tokens: int
    target_tokens: int
    sheet: str
    priced: bool
    rate: PromptRate | None = None
    turn_tail: int | None = None
    turn_usd: float | None = None
    session_tail: int = 0
    session_usd: float = 0.0
    requests: int = 0
    summary_requests: int = 0
    summary_tail: int = 0
    summary_usd: float = 0.0
    ping_requests: int = 0
    ping_usd: float = 0.0
    measured_prompt: int | None = None
    measured_cached: int | None = None
    measured_evaluated: int | None = None
    predicted_context: int | None = None
    predicted_cached: int | None = None
    delegate_tokens: int = 0
    mcp_tokens: dict[str, int] = {}
    sheet_prices: tuple[float, float, float] | None = None  # input $/Mtok, cache read and write multipliers
    #: where folds put their summary, and why in a few words (agent/placement.py)
    placement: tuple[str, str] | None = None

    @property
    def free(self) -> int:
        return max(0, self.window - self.context)

    @property
    def percent(self) -> float:
        return 100.0 * self.context / max(1, self.window)


def tail_figures(
    session: Session,
    *,
    sheet: PriceSheet,
    fold_trigger: float,
    fold_target: float,
    delegate_tokens: int = 0,
    mcp_tokens: dict[str, int] | None = None,
    placement: tuple[str, str] | None = None,
) -> TailFigures:
    t = session.totals
    turns = conversation_usage(session.usage)
    summaries = [u for u in session.usage if u.sub_session is None and u.purpose == "summary"]
    pings = [u for u in session.usage if u.sub_session is None and u.purpose == "ping"]
    last = turns[-1] if turns else None
    return TailFigures(
        window=session.window,
        system=session.head_tokens,
        pinned=t.pinned,
        summaries=t.summaries,
        pointers=t.pointers,
        live=t.live,
        context=session.context_tokens,
        trigger_tokens=int(fold_trigger * session.window),
        target_tokens=int(fold_target * session.window),
        sheet=sheet.name,
        priced=sheet.priced,
        rate=prompt_rate(session.usage, sheet),
        turn_tail=last.predicted_evaluated if last else None,
        turn_usd=last.predicted_usd if last else None,
        session_tail=sum(u.predicted_evaluated for u in turns),
        session_usd=sum(u.predicted_usd for u in turns),
        requests=len(turns),
        summary_requests=len(summaries),
        summary_tail=sum(u.predicted_evaluated for u in summaries),
        summary_usd=sum(u.predicted_usd for u in summaries),
        ping_requests=len(pings),
        ping_usd=sum(u.predicted_usd for u in pings),
        measured_prompt=last.prompt_tokens if last else None,
        measured_cached=last.cached_tokens if last else None,
        measured_evaluated=last.evaluated_tokens if last else None,
        predicted_context=last.context_tokens if last else None,
        predicted_cached=last.predicted_cached if last else None,
        delegate_tokens=delegate_tokens,
        mcp_tokens=mcp_tokens or {},
        sheet_prices=(sheet.input_per_mtok, sheet.cache_read_multiplier, sheet.cache_write_multiplier),
        placement=placement,
    )


class TailBar(Widget):
    """The context as one stacked bar against the window; colors from theme variables."""

    DEFAULT_CSS = "TailBar { height: 1; width: 1fr; }"

    figures: reactive[TailFigures | None] = reactive(None)

    def render(self) -> Content:
        f = self.figures
        width = max(1, self.size.width)
        if f is None:
            return Content("")
        sizes = [f.system, f.pinned, f.summaries, f.pointers, f.live, f.free]
        total = max(1, f.window, sum(sizes))
        cells = [round(width * s / total) for s in sizes]
        # a non-empty part keeps at least one cell, so a small pin is still visible
        cells = [max(1, c) if s > 0 else 0 for c, s in zip(cells, sizes, strict=True)]
        while sum(cells) > width:
            biggest = cells.index(max(cells))
            cells[biggest] -= 1
        cells[-1] += width - sum(cells)
        parts = [
            Content.from_markup(f"[${var}]$bar[/]", bar="█" * n)
            for (_label, var), n in zip(SEGMENTS, cells, strict=True)
            if n > 0
        ]
        return Content("").join(parts)


def _tok(n: int | None) -> str:
    return "–" if n is None else f"{n:,}"


def duration(seconds: float) -> str:
    """0.05 s, 0.9 s, 12 s, 4 min 12 s, 2 h 5 min: as a person says it."""
    if seconds < 0.1:
        # a few re-read tokens are not nothing: 0.0 s would say the cache held them all
        return f"{seconds:.2f} s" if seconds else "0 s"
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, s = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {s} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def _count(n: int, one: str, many: str) -> str:
    return f"{n:,} {one if n == 1 else many}"


def _muted(text: str) -> Content:
    return Content.from_markup("[$foreground-muted]$text[/]", text=text)


def legend(f: TailFigures) -> Content:
    """The bar's key with each part's tokens, two parts a row."""
    tokens = (f.system, f.pinned, f.summaries, f.pointers, f.live, f.free)
    cells = [
        Content.from_markup(f"[${var}]■[/] $cell", cell=f"{label:<10}{n:>7,}")
        for (label, var), n in zip(SEGMENTS, tokens, strict=True)
    ]
    rows = [Content("  ").join(cells[i : i + 2]) for i in range(0, len(cells), 2)]
    return Content("\n").join(rows)


def figures_text(f: TailFigures) -> Content:
    lines = [
        Content.from_markup("[b]$c[/b] / $w tokens · $p%", c=f"{f.context:,}", w=f"{f.window:,}", p=f"{f.percent:.1f}"),
    ]
    to_go = f.trigger_tokens - f.context
    if to_go >= 0:
        lines.append(Content(f"fold trigger at {f.trigger_tokens:,}: {to_go:,} to go"))
    else:
        lines.append(Content.from_markup("[$error]past the fold trigger by $n[/]", n=f"{-to_go:,}"))
    lines += [Content(line) for line in mcp_lines(f.mcp_tokens)]
    return Content("\n").join(lines)


def schema_rent(tokens: int, f: TailFigures | None) -> str:
    """What `tokens` of tool schema cost in each request's head, in the panel's rent terms."""
    if f is None or tokens <= 0:
        return ""
    if f.priced and f.sheet_prices is not None:
        per_mtok, read, write = f.sheet_prices
        cached, cold = tokens * per_mtok * read / 1e6, tokens * per_mtok * write / 1e6
        return f"${cached:,.4f} a request while cached, ${cold:,.4f} when the cache is cold"
    if f.rate is not None:
        return f"{duration(f.rate.seconds(tokens))} of prompt time whenever the cache is cold"
    return ""


def mcp_lines(tokens: dict[str, int], width: int = 44) -> list[str]:
    """The MCP tools' schema tokens, part of `system` and re-sent with every request, counted apart."""
    if not tokens:
        return []
    per = " · ".join(f"{name} {n:,}" for name, n in sorted(tokens.items(), key=lambda kv: -kv[1]))
    if len(per) > width:
        per = per[: width - 1] + "…"
    return [f"of system, mcp tools: {sum(tokens.values()):,} each request", per]


def _rent_row(label: str, tail: str, cost: str) -> str:
    return f"{label:<15}{tail:>9}{cost:>12}"


def _server_row(label: str, prompt: str, cached: str, evaluated: str) -> str:
    return f"{label:<10}{prompt:>9}{cached:>9}{evaluated:>11}"


def clock_text(at: float) -> str:
    return time.strftime("%H:%M", time.localtime(at))


def keep_warm_lines(w: KeepWarmStatus | None) -> list[str]:
    """The keep-warm rule's decision in short lines ("keeping warm: 3 pings, $0.0040")."""
    if w is None or w.price is None or w.state in ("off", "expired"):
        return []
    add = f"a rewrite would add ${w.price.expiry_usd:,.4f}"
    if w.price.rewrite_tokens < w.price.prefix_tokens:  # the ladder folds first at a cold resume
        add = f"a rewrite of {_tok(w.price.rewrite_tokens)} would add ${w.price.expiry_usd:,.4f}"
    if w.state == "warm":
        first = clock_text(w.next_ping_at) if w.next_ping_at is not None else "–"
        return [f"keep-warm: first ping at {first}", f"up to {w.price.max_pings} pings, ${w.price.ping_usd:,.4f} each", add]
    stops = clock_text(w.expires_at) if w.expires_at is not None else "–"
    pings = f"{_count(w.pings, 'ping', 'pings')}, ${w.spent_usd:,.4f}"
    if w.state == "keeping":
        return [f"keeping warm: {pings}", add, f"stops at {stops}"]
    return [f"keep-warm stopped: {pings}", add, f"letting it expire at {stops}"]


def rent_text(f: TailFigures, cache_left: float | None, warm: KeepWarmStatus | None = None) -> Content:
    """Rent in dollars on a priced sheet, else in time at the prompt rate; then the cache and the server."""

    def cost(tail: int | None, usd: float | None) -> str:
        if f.priced:
            return "–" if usd is None else f"${usd:,.4f}"
        return "–" if tail is None or f.rate is None else duration(f.rate.seconds(tail))

    lines = [Content.from_markup("[b]rent[/b] ($sheet sheet)", sheet=f.sheet)]
    if not f.priced:
        if f.rate is None:
            lines.append(Content("prompt rate: not measured yet"))
        else:
            source = "measured" if f.rate.measured else "the sheet's guess"
            lines.append(Content(f"prompt rate: {f.rate.tokens_per_second:,.0f} tok/s, {source}"))
    lines.append(_muted(_rent_row("", "tail", "dollars" if f.priced else "time")))
    lines.append(Content(_rent_row("last request", _tok(f.turn_tail), cost(f.turn_tail, f.turn_usd))))
    lines.append(Content(_rent_row("this session", f"{f.session_tail:,}", cost(f.session_tail, f.session_usd))))
    count = _count(f.requests, "request", "requests")
    if f.summary_requests:
        lines.append(Content(_rent_row("fold summaries", f"{f.summary_tail:,}", cost(f.summary_tail, f.summary_usd))))
        count += " + " + _count(f.summary_requests, "fold summary", "fold summaries")
    if f.ping_requests:
        lines.append(Content(_rent_row("keep-warm", _count(f.ping_requests, "ping", "pings"), cost(0, f.ping_usd))))
    lines.append(Content(count))
    if cache_left is None:
        lines.append(Content("cache: cold (no request yet)"))
    elif cache_left <= 0:
        lines.append(Content.from_markup("[$warning]cache: expired; the next turn re-reads it all[/]"))
    elif math.isinf(cache_left):
        lines.append(Content("cache: kept (the sheet gives no TTL)"))
    else:
        m, s = divmod(int(cache_left), 60)
        lines.append(Content(f"cache expires in {m}:{s:02d}"))
    lines += [Content(line) for line in keep_warm_lines(warm)]
    if f.placement is not None:
        where, why = f.placement
        lines += [Content(where), _muted(f"  {why}")]
    lines.append(_muted(_server_row("", "prompt", "cached", "evaluated")))
    lines.append(Content(_server_row("predicted", _tok(f.predicted_context), _tok(f.predicted_cached), _tok(f.turn_tail))))
    lines.append(Content(_server_row("server", _tok(f.measured_prompt), _tok(f.measured_cached), _tok(f.measured_evaluated))))
    if f.delegate_tokens:
        lines.append(Content(f"delegates: {f.delegate_tokens:,} tokens in own contexts"))
    return Content("\n").join(lines)


class TailPanel(Vertical):
    """The Tail panel; the app calls `refresh_figures` after session events."""

    DEFAULT_CSS = """
    TailPanel { height: auto; }
    TailPanel > Static { height: auto; }
    TailPanel > .legend { color: $text-muted; }
    TailPanel > Sparkline { height: 3; margin: 1 0 0 0; }
    TailPanel > Sparkline > .sparkline--max-color { color: $tail-live; }
    TailPanel > Sparkline > .sparkline--min-color { color: $tail-live 30%; }
    TailPanel > .rent { margin: 1 0 0 0; }
    """

    def __init__(
        self,
        *,
        samples: Iterable[int] = (),
        cache_left: Callable[[], float | None] | None = None,
        keep_warm: Callable[[], KeepWarmStatus | None] | None = None,
        id: str | None = None,
    ) -> None:
        super().__init__(id=id)
        self.tooltip = "\n".join(f"{word}: {meaning}" for word, meaning in WORDS)
        self.samples: deque[int] = deque(samples, maxlen=SPARK_POINTS)
        self.figures: TailFigures | None = None
        #: seconds the cache has left (None: unknown), asked once a second
        self._cache_left = cache_left
        #: the keep-warm rule's state now (None where nothing pings)
        self._keep_warm = keep_warm
        self._bar = TailBar()
        self._legend = Static("", classes="legend")
        self._figures = Static("", classes="figures")
        self._spark = Sparkline(list(self.samples), summary_function=max)
        self._rent = Static("", classes="rent")

    def compose(self) -> ComposeResult:
        yield self._bar
        yield self._legend
        yield self._figures
        yield self._spark
        yield self._rent

    def sample(self, context_tokens: int) -> None:
        """One point of the sparkline: the context after a change."""
        if not self.samples or self.samples[-1] != context_tokens:
            self.samples.append(context_tokens)

    def refresh_figures(self, figures: TailFigures) -> None:
        self.figures = figures
        self._bar.figures = figures
        self._legend.update(legend(figures))
        self._figures.update(figures_text(figures))
        self._spark.data = list(self.samples)
        # one point draws as a full block: the saw-tooth needs two to mean anything
        self._spark.display = len(self.samples) >= 2
        self.refresh_rent()

    def refresh_rent(self) -> None:
        """The rent lines only (the cache countdown ticks every second)."""
        if self.figures is not None:
            cache_left = self._cache_left() if self._cache_left is not None else None
            warm = self._keep_warm() if self._keep_warm is not None else None
            self._rent.update(rent_text(self.figures, cache_left, warm))
