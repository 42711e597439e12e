"""The Tail panel: what the context holds against the window, and what it costs to resend.

A stacked bar (system, pinned, summaries, pointers, live tail, free), a
sparkline of the context after each change (the saw-tooth of folds), tokens
and percent, the distance to the fold trigger, this turn's and the session's
rent under the price sheet, the cache countdown, and the server's measured
prompt/cached tokens beside the prediction.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable

from pydantic import BaseModel
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Sparkline, Static

from tailrent_tui.core.messages import UsageRecorded
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


class TailFigures(BaseModel):
    """Everything the panel shows, computed from the session (and the rent state)."""

    window: int
    system: int
    pinned: int
    summaries: int
    pointers: int
    live: int
    context: int
    trigger_tokens: int
    target_tokens: int
    turn_tail: int | None = None
    turn_usd: float | None = None
    session_tail: int = 0
    session_usd: float = 0.0
    requests: int = 0
    measured_prompt: int | None = None
    measured_cached: int | None = None
    measured_evaluated: int | None = None
    predicted_context: int | None = None
    predicted_cached: int | None = None
    delegate_tokens: int = 0

    @property
    def free(self) -> int:
        return max(0, self.window - self.context)

    @property
    def percent(self) -> float:
        return 100.0 * self.context / max(1, self.window)


def tail_figures(
    session: Session, *, fold_trigger: float, fold_target: float, delegate_tokens: int = 0
) -> TailFigures:
    t = session.totals
    main = [u for u in session.usage if u.sub_session is None]
    last: UsageRecorded | None = main[-1] if main else None
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
        turn_tail=last.predicted_evaluated if last else None,
        turn_usd=last.predicted_usd if last else None,
        session_tail=sum(u.predicted_evaluated for u in main),
        session_usd=sum(u.predicted_usd for u in main),
        requests=len(main),
        measured_prompt=last.prompt_tokens if last else None,
        measured_cached=last.cached_tokens if last else None,
        measured_evaluated=last.evaluated_tokens if last else None,
        predicted_context=last.context_tokens if last else None,
        predicted_cached=last.predicted_cached if last else None,
        delegate_tokens=delegate_tokens,
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
        cells = [max(1, c) if s > 0 else 0 for c, s in zip(cells, sizes)]
        while sum(cells) > width:
            biggest = cells.index(max(cells))
            cells[biggest] -= 1
        cells[-1] += width - sum(cells)
        parts = [
            Content.from_markup(f"[${var}]$bar[/]", bar="█" * n) for (_label, var), n in zip(SEGMENTS, cells) if n > 0
        ]
        return Content("").join(parts)


def _tok(n: int | None) -> str:
    return "–" if n is None else f"{n:,}"


def legend() -> Content:
    return Content(" ").join(
        Content.from_markup(f"[${var}]■[/] $label", label=label) for label, var in SEGMENTS
    )


def figures_text(f: TailFigures, price_sheet: str) -> Content:
    lines = [
        Content.from_markup("[b]$c[/b] / $w tokens · $p%", c=f"{f.context:,}", w=f"{f.window:,}", p=f"{f.percent:.1f}"),
    ]
    to_go = f.trigger_tokens - f.context
    if to_go >= 0:
        lines.append(Content(f"fold trigger at {f.trigger_tokens:,}: {to_go:,} to go"))
    else:
        lines.append(Content.from_markup("[$error]past the fold trigger by $n[/]", n=f"{-to_go:,}"))
    lines.append(
        Content(f"pinned {f.pinned:,} · summaries {f.summaries:,} · pointers {f.pointers:,} · live {f.live:,}")
    )
    return Content("\n").join(lines)


def rent_text(f: TailFigures, price_sheet: str, cache_left: float | None) -> Content:
    def usd(x: float | None) -> str:
        return "–" if x is None else f"${x:,.4f}"

    lines = [
        Content(f"rent ({price_sheet}): turn {_tok(f.turn_tail)} tail tok {usd(f.turn_usd)}"),
        Content(f"session {f.session_tail:,} tail tok {usd(f.session_usd)} · {f.requests} request{'' if f.requests == 1 else 's'}"),
    ]
    if cache_left is None:
        lines.append(Content("cache: cold (no request yet)"))
    elif cache_left <= 0:
        lines.append(Content.from_markup("[$warning]cache: expired; the next turn re-sends it all[/]"))
    else:
        m, s = divmod(int(cache_left), 60)
        lines.append(Content(f"cache expires in {m}:{s:02d}"))
    lines.append(
        Content(
            f"server: prompt {_tok(f.measured_prompt)} cached {_tok(f.measured_cached)}"
            f" · predicted {_tok(f.predicted_context)} cached {_tok(f.predicted_cached)}"
        )
    )
    if f.delegate_tokens:
        lines.append(Content(f"delegates: {f.delegate_tokens:,} tokens in their own contexts"))
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

    def __init__(self, *, price_sheet: str, samples: Iterable[int] = (), id: str | None = None) -> None:
        super().__init__(id=id)
        self.price_sheet = price_sheet
        self.samples: deque[int] = deque(samples, maxlen=SPARK_POINTS)
        self.figures: TailFigures | None = None
        self.cache_left: Callable[[], float | None] = lambda: None
        self._bar = TailBar()
        self._figures = Static("", classes="figures")
        self._spark = Sparkline(list(self.samples), summary_function=max)
        self._rent = Static("", classes="rent")

    def compose(self) -> ComposeResult:
        yield self._bar
        yield Static(legend(), classes="legend")
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
        self._figures.update(figures_text(figures, self.price_sheet))
        self._spark.data = list(self.samples)
        # one point draws as a full block: the saw-tooth needs two to mean anything
        self._spark.display = len(self.samples) >= 2
        self.refresh_rent()

    def refresh_rent(self) -> None:
        """The rent lines only (the cache countdown ticks every second)."""
        if self.figures is not None:
            self._rent.update(rent_text(self.figures, self.price_sheet, self.cache_left()))
