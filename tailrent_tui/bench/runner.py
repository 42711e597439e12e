"""The bench: every policy driven through the same trace, with the same tokenizer,
summarizer and price sheet, and their rent, folds and recall side by side.

Per policy: a fresh core Session and a fresh RentModel. Each trace line is
added through the policy (tool results through rungs 1 and 2, then its
`after_add` plan). Before each assistant line the policy's `before_request`
plan runs (told whether the cache expired), then a model request is charged:
the context at that point, with the assistant line's tokens as output. Each
probe scores its expected strings against `session.visible_text()`.

Pauses: before each request, the keep-warm rule (core/keepwarm.py) sends the
pings it would have sent while the user was away, on a sheet that allows them;
they are charged in `billed_usd` and counted in `pings`, and each pause it had
to decide goes into the run's competitive ratio. On a sheet that restores KV
slots, a resume past the TTL brings the saved prefix back (`restores`).

The plans are driven by the agent's code (`driver="agent"`, the default: what
the app runs) or by core's synchronous driver (`driver="core"`); with a
deterministic summarizer both give the same figures.

With an engine (`engine="openai:URL"`), every request of every policy is also
sent to that server with one output token, as the agent sends it, and what the
server measured (cached tokens, evaluated prompt tokens, prompt time) is
recorded next to the prediction. The prediction then counts tokens with the
server's own tokenizer and the framing its chat template adds (models/tokenizer.py,
as the app does with `tokenizer = "auto"`), so predicted and measured numbers
speak the same tokens.
"""

from __future__ import annotations

import asyncio
import math
import random
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from tailrent_tui.core.guard import find_expected
from tailrent_tui.core.keepwarm import KeepWarm, PauseOutcome, competitive_ratio
from tailrent_tui.core.messages import Folded, Kind, Message
from tailrent_tui.core.policies import POLICY_NAMES, Policy, PolicyContext, PolicySettings, get_policy, run_plan
from tailrent_tui.core.rent import PriceSheet, RentModel, RequestRent, get_price_sheet
from tailrent_tui.core.rungs.spill import MemorySpillStore
from tailrent_tui.core.session import Session
from tailrent_tui.core.summarize import ExtractiveSummarizer, LossySummarizer, Summarizer
from tailrent_tui.core.tokens import Framing, TokenCounter, get_counter
from tailrent_tui.scenarios.traces import Trace

SUMMARIZERS = ("mock-lossy", "mock-extractive", "model")
DRIVERS = ("agent", "core")
FIGURES = (
    "prompt_tokens",
    "cached_tokens",
    "reevaluated_tokens",
    "billed_usd",
    "folds",
    "peak_context_tokens",
    "recall_hits",
    "recall_total",
    "facts_lost",
    "pings",
)

Progress = Callable[[str, int, int], None]


class BenchError(ValueError):
    """A bench that cannot run: an unknown summarizer, a broken engine."""


class CachingCounter:
    """Counts each distinct text once per run: the policies see the same trace."""

    def __init__(self, base: TokenCounter) -> None:
        self.base = base
        self.name = base.name
        self._cache: dict[str, int] = {}

    def count(self, text: str) -> int:
        n = self._cache.get(text)
        if n is None:
            n = self._cache[text] = self.base.count(text)
        return n


def get_summarizer(name: str) -> Summarizer:
    if name == "mock-lossy":
        return LossySummarizer()
    if name == "mock-extractive":
        return ExtractiveSummarizer()
    if name == "model":
        raise BenchError("summarizer 'model' needs --engine (the engine's model writes the summaries)")
    raise BenchError(f"unknown summarizer {name!r}: choose one of {', '.join(SUMMARIZERS)}")


class EngineFigures(BaseModel):
    """What the server measured over all requests of one policy, next to our prediction."""

    requests: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    evaluated_tokens: int = 0
    prompt_ms: float = 0.0
    predicted_prompt_tokens: int = 0
    predicted_evaluated_tokens: int = 0

    measured_requests: int = Field(default=0, description="requests whose evaluated tokens the server reported")

    @property
    def evaluated_error(self) -> float | None:
        """Relative error of the predicted evaluated tokens against the measured ones;
        None when the server measured nothing to compare with (no usage, or 0 evaluated)."""
        if not self.measured_requests or not self.evaluated_tokens:
            return 0.0 if self.measured_requests and not self.predicted_evaluated_tokens else None
        return (self.predicted_evaluated_tokens - self.evaluated_tokens) / self.evaluated_tokens

    @property
    def evaluated_error_text(self) -> str:
        error = self.evaluated_error
        return "n/a" if error is None else f"{error:+.1%}"


class FoldCosts(BaseModel):
    """What folds cost the requests around them (issue 23): the summary requests, and the first
    request after each fold against an ordinary one; predicted, and measured with an engine."""

    summary_requests: int = 0
    summary_span_tokens: int = Field(default=0, description="tokens of the spans folded, when a model wrote summaries")
    summary_predicted_evaluated: int = 0
    summary_evaluated: int = 0
    after_fold_requests: int = 0
    after_fold_predicted_evaluated: int = 0
    after_fold_evaluated: int = 0
    ordinary_requests: int = 0
    ordinary_predicted_evaluated: int = 0
    ordinary_evaluated: int = 0
    measured: bool = False

    def add(self, after_fold: bool, predicted: int, measured: int | None) -> None:
        self.measured = self.measured or measured is not None
        if after_fold:
            self.after_fold_requests += 1
            self.after_fold_predicted_evaluated += predicted
            self.after_fold_evaluated += measured or 0
        else:
            self.ordinary_requests += 1
            self.ordinary_predicted_evaluated += predicted
            self.ordinary_evaluated += measured or 0


class PolicyResult(BaseModel):
    policy: str
    prompt_tokens: int = 0
    cached_tokens: int = 0
    reevaluated_tokens: int = 0
    billed_usd: float = 0.0
    folds: int = 0
    peak_context_tokens: int = 0
    recall_hits: int = 0
    recall_total: int = 0
    facts_lost: int = 0
    pings: int = Field(default=0, description="keep-warm pings sent during pauses (their cost is in billed_usd)")
    # extras
    requests: int = 0
    expiries: int = 0
    ping_usd: float = 0.0
    ping_tokens: int = Field(default=0, description="prompt tokens the pings sent (all cached; in prompt_tokens)")
    restores: int = Field(default=0, description="resumes whose prefix a saved KV slot brought back")
    pauses: list[PauseOutcome] = Field(default_factory=list, description="pauses the keep-warm rule decided")
    spills: int = 0
    pins: int = 0
    false_pins: int = 0
    chatter_lines: int = 0
    decisions_pinned: int = 0
    decision_lines: int = 0
    guard_repair_tokens: int = Field(default=0, description="sum over requests of repaired-fact tokens in context")
    final_context_tokens: int = 0
    folds_grew: int = Field(default=0, description="folds after which the context was not smaller")
    over_window: int = Field(default=0, description="requests whose context was larger than the window")
    max_depth: int = Field(default=0, description="the deepest fold: 1 is a summary of raw messages, 2 a summary of one")
    stale_shown: int = Field(
        default=0, description="probes' superseded words shown as current (in a pin, the ledger or a summary)"
    )
    stale_total: int = 0
    statements: int = Field(default=0, description="statements in the ledger at the end")
    superseded: int = 0
    ledger_tokens: int = Field(default=0, description="tokens the ledger messages hold at the end")
    probe_misses: list[str] = Field(default_factory=list)
    context_series: list[int] = Field(default_factory=list)
    engine: EngineFigures | None = None
    fold_costs: FoldCosts = Field(default_factory=FoldCosts)

    def figures(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in FIGURES}
        out["billed_usd"] = round(self.billed_usd, 6)
        return out

    @property
    def guard_share(self) -> float:
        """Repaired-fact tokens as a share of the prompt tokens the conversation's requests sent (pings aside)."""
        sent = self.prompt_tokens - self.ping_tokens
        return self.guard_repair_tokens / sent if sent else 0.0

    @property
    def false_pin_rate(self) -> float | None:
        return self.false_pins / self.chatter_lines if self.chatter_lines else None

    def extras(self) -> dict[str, Any]:
        cr = competitive_ratio(self.pauses)
        return {
            "requests": self.requests,
            "cache_expiries": self.expiries,
            "ping_usd": round(self.ping_usd, 6),
            "slot_restores": self.restores,
            "keep_warm": {
                "pauses": cr.pauses,
                "pinged_through": cr.pinged_through,
                "expired": cr.expired,
                "online_usd": round(cr.online_usd, 6),
                "best_usd": round(cr.best_usd, 6),
                "always_ping_usd": round(cr.always_ping_usd, 6),
                "never_ping_usd": round(cr.never_ping_usd, 6),
                "ratio": None if cr.ratio is None else round(cr.ratio, 4),
                "ratio_vs_fixed": None if cr.ratio_vs_fixed is None else round(cr.ratio_vs_fixed, 4),
                "worst_pause": round(cr.worst_pause, 4),
            },
            "spills": self.spills,
            "pins": self.pins,
            "false_pins": self.false_pins,
            "chatter_lines": self.chatter_lines,
            "false_pin_rate": self.false_pin_rate,
            "decisions_pinned": self.decisions_pinned,
            "decision_lines": self.decision_lines,
            "guard_share": round(self.guard_share, 5),
            "final_context_tokens": self.final_context_tokens,
            "folds_grew": self.folds_grew,
            "requests_over_window": self.over_window,
            # a policy past the window is not cheaper: a server would refuse or cut those requests
            "comparable": self.over_window == 0,
            "max_depth": self.max_depth,
            "stale_shown": self.stale_shown,
            "stale_total": self.stale_total,
            "statements": self.statements,
            "superseded": self.superseded,
            "ledger_tokens": self.ledger_tokens,
            "probe_misses": self.probe_misses,
            "engine": None
            if self.engine is None
            else {
                **self.engine.model_dump(),
                "evaluated_error": None if self.engine.evaluated_error is None else round(self.engine.evaluated_error, 5),
            },
        }


class TraceResult(BaseModel):
    trace: str
    window: int
    tokenizer: str
    summarizer: str
    price_sheet: str
    policies: dict[str, PolicyResult]
    engine: str | None = None
    driver: str = "agent"


class BenchResult(BaseModel):
    traces: list[TraceResult] = Field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The documented `--json` shape, with the extras under their own key."""
        return {
            "traces": [{"trace": t.trace, "policies": {n: p.figures() for n, p in t.policies.items()}} for t in self.traces],
            "extras": [
                {
                    "trace": t.trace,
                    "window": t.window,
                    "tokenizer": t.tokenizer,
                    "summarizer": t.summarizer,
                    "price_sheet": t.price_sheet,
                    "engine": t.engine,
                    "policies": {n: p.extras() for n, p in t.policies.items()},
                }
                for t in self.traces
            ],
        }


def seeded_spill_ids(seed: int = 0) -> Callable[[], str]:
    """Spill ids from a seeded generator, for one run's session.

    A pointer's text holds its spill id, so random ids would change pointer
    token counts (by a token or two) from run to run; the bench must repeat.
    """
    rng = random.Random(seed)
    return lambda: str(uuid.UUID(int=rng.getrandbits(128), version=4))


class CoreDriver:
    """Core's synchronous driver (`--driver core`): the policy's plans answered by a summarizer in core."""

    def __init__(self, session: Session, policy: Policy, ctx: PolicyContext, summarizer: Summarizer, rent: RentModel) -> None:
        self.session, self.policy, self.ctx, self.summarizer, self.rent = session, policy, ctx, summarizer, rent
        self.warm = KeepWarm(rent, rewrite_tokens=lambda: policy.cold_resume_tokens(session, ctx))

    async def add(self, role: Any, content: str, *, pinned: bool, at: float) -> Message:
        m = self.session.add(role, content, pinned=pinned, at=at)
        run_plan(self.policy.after_add(self.session, self.ctx), self.summarizer)
        return m

    async def admit_tool(self, tool: str, content: str, *, at: float) -> None:
        self.policy.admit_tool(self.session, self.ctx, tool, content, at=at)
        run_plan(self.policy.after_add(self.session, self.ctx), self.summarizer)

    async def keep_warm(self, at: float) -> None:
        self.warm.replay_until(at)

    async def before_request(self) -> None:
        s = self.session
        expired = self.rent.expired_at(s.clock())
        run_plan(self.policy.before_request(s, self.ctx, expired=expired), self.summarizer)


class AgentDriver:
    """The agent's code, as the app and `tailrent ask` run it (`--driver agent`)."""

    def __init__(self, agent: Any) -> None:
        self.agent = agent
        self.warm = agent.meter.keep_warm or KeepWarm(agent.rent)

    async def keep_warm(self, at: float) -> None:
        # the trace's clock stands in for the app's timer: the same rule, replayed
        self.warm.replay_until(at)

    async def add(self, role: Any, content: str, *, pinned: bool, at: float) -> Message:
        return await self.agent.ladder.add_message(role, content, pinned=pinned, at=at)

    async def admit_tool(self, tool: str, content: str, *, at: float) -> None:
        await self.agent.ladder.admit_tool_text(tool, content, at=at)

    async def before_request(self) -> None:
        await self.agent.ladder.before_request()


@asynccontextmanager
async def _driving(
    driver: str,
    name: str,
    session: Session,
    ctx: PolicyContext,
    summarizer: Any,
    rent: RentModel,
    model: Any,
    policy: Policy,
) -> AsyncIterator[CoreDriver | AgentDriver]:
    if driver == "core":
        yield CoreDriver(session, policy, ctx, summarizer, rent)
        return
    from tailrent_tui.agent.lifecycle import InMemory, open_agent
    from tailrent_tui.core.rungs.fold import MemoryFoldArchive
    from tailrent_tui.settings import Settings

    settings = Settings.model_validate({"policy": name, "window": ctx.settings.window, "yolo": False, "model": "mock"})
    memory = InMemory(
        session,
        model=model,  # the engine's, closed by the bench after every policy; None: the mock, opened here
        workspace=Path.cwd(),
        spill_store=ctx.spill_store,
        archive=ctx.archive or MemoryFoldArchive(),
        summarizer=summarizer,
        rent=rent,
        policy_settings=ctx.settings,
    )
    async with open_agent(settings, memory=memory, say=None) as agent:
        yield AgentDriver(agent)


async def _drive(
    trace: Trace,
    name: str,
    counter: TokenCounter,
    summarizer: Any,
    sheet: PriceSheet,
    settings: PolicySettings,
    engine: _Engine | None,
    progress: Progress | None,
    driver: str,
) -> PolicyResult:
    policy = get_policy(name)
    now = [trace.steps[0].at if trace.steps else 0.0]
    session = Session(
        counter=counter,
        system=trace.system,
        window=trace.window,
        decisions=policy.decision_detector(),
        detect_statements=policy.ledger,
        clock=lambda: now[0],
        spill_ids=seeded_spill_ids(),
        id=f"bench-{name}",
        framing=engine.framing if engine else Framing(),
    )
    ctx = PolicyContext(spill_store=MemorySpillStore(), settings=settings)
    rent = RentModel(sheet.with_ttl(math.inf) if policy.infinite_ttl else sheet)
    async with _driving(driver, name, session, ctx, summarizer, rent, engine.model if engine else None, policy) as drive:
        return await _walk(trace, name, session, now, rent, drive, engine, progress)


async def _walk(
    trace: Trace,
    name: str,
    session: Session,
    now: list[float],
    rent: RentModel,
    drive: CoreDriver | AgentDriver,
    engine: _Engine | None,
    progress: Progress | None,
) -> PolicyResult:
    """The trace, step by step, through one policy's driver; the figures it gave."""
    result = PolicyResult(policy=name)
    repair_of: dict[str, int] = {}

    folded_since = [False]  # a fold since the last request: the next is a first request after a fold

    def listen(ev: Any) -> None:
        if isinstance(ev, Folded):
            folded_since[0] = True
            repair_of[ev.fold.summary.id] = ev.fold.repair_tokens
            result.folds_grew += int(ev.fold.context_after >= ev.fold.context_before)

    session.listeners.append(listen)
    total = len(trace.steps)
    for i, step in enumerate(trace.steps):
        now[0] = step.at
        if progress is not None and i % 200 == 0:
            progress(name, i, total)
        if step.kind == "probe":
            found = find_expected(step.expect, session.visible_text())
            result.recall_total += len(found)
            result.recall_hits += sum(found.values())
            result.probe_misses += [f"line {step.line}: {w}" for w, ok in found.items() if not ok]
            if step.stale:
                current = "\n".join(m.content for m in session.messages if m.pinned or m.kind in _CURRENT_KINDS)
                shown = find_expected(step.stale, current)
                result.stale_total += len(shown)
                result.stale_shown += sum(shown.values())
            continue
        if step.kind != "message":
            continue
        if step.role == "assistant":
            await drive.keep_warm(step.at)
            await drive.before_request()
            result.peak_context_tokens = max(result.peak_context_tokens, session.context_tokens)
            out_tokens = session.count(step.content)
            if engine is not None:
                r, usage = await engine.request(session, rent, step.at, out_tokens, result)
                measured = usage.evaluated_tokens if usage is not None else None
            else:
                r, measured = rent.request_session(session, step.at, out_tokens), None
            result.fold_costs.add(folded_since[0], r.tail_tokens, measured)
            folded_since[0] = False
            result.context_series.append(session.context_tokens)
            result.over_window += int(session.context_tokens > session.window)
            result.guard_repair_tokens += sum(t for sid, t in repair_of.items() if sid in session)
        if step.role == "tool":
            await drive.admit_tool(step.tool or "tool", step.content, at=step.at)
        else:
            m = await drive.add(step.role, step.content, pinned=step.pin, at=step.at)
            if step.decision is not None:
                auto = m.pinned and not step.pin
                if step.decision:
                    result.decision_lines += 1
                    result.decisions_pinned += int(m.pinned)
                else:
                    result.chatter_lines += 1
                    result.false_pins += int(auto)
        result.peak_context_tokens = max(result.peak_context_tokens, session.context_tokens)
    if progress is not None:
        progress(name, total, total)
    t = rent.totals
    result.prompt_tokens = t.context_tokens
    result.cached_tokens = t.cached_tokens
    result.reevaluated_tokens = t.tail_tokens
    result.billed_usd = t.usd
    result.requests = t.requests
    result.expiries = t.expiries
    result.pings = t.pings
    result.ping_usd = t.ping_usd
    result.ping_tokens = sum(r.context_tokens for r in rent.history if r.ping)
    result.restores = t.restores
    result.pauses = list(drive.warm.pauses)
    result.folds = len(session.folds)
    result.facts_lost = facts_lost(session)
    result.max_depth = max((f.depth for f in session.folds), default=0)
    result.statements = len(session.statements)
    result.superseded = sum(st.status == "superseded" for st in session.statements.values())
    result.ledger_tokens = sum(m.tokens for m in session.messages if m.kind is Kind.ledger)
    result.spills = len(session.spills)
    result.pins = len(session.pinned)
    result.final_context_tokens = session.context_tokens
    summaries = [u for u in session.usage if u.purpose == "summary"]
    costs = result.fold_costs
    costs.summary_requests = len(summaries)
    costs.summary_predicted_evaluated = sum(u.predicted_evaluated for u in summaries)
    costs.summary_evaluated = sum(u.evaluated_tokens or 0 for u in summaries)
    costs.summary_span_tokens = sum(f.tokens_before for f in session.folds) if summaries else 0
    return result


_CURRENT_KINDS = (Kind.ledger, Kind.fold_summary)


def facts_lost(session: Session) -> int:
    """What the folds lost and the context does not show now: each item once, however many
    folds lost it (a fact said again after a fold is visible again until a later fold)."""
    from tailrent_tui.core.guard import Fact, Visible

    lost = {t.casefold(): t for f in session.folds for t in f.facts_lost}
    lost.update({t.casefold(): t for r in session.retired.values() for t in r.facts_lost})
    if not lost:
        return 0
    now = Visible(session.visible_text())
    return sum(not now.shows(Fact(text=t, kind="quoted")) for t in lost.values())


def run_bench(
    trace: Trace,
    policies: Sequence[str] = POLICY_NAMES,
    *,
    tokenizer: str = "cl100k",
    summarizer: str = "mock-lossy",
    price_sheet: str | PriceSheet = "anthropic-5m",
    price_paths: Sequence[str] = (),
    engine: str | None = None,
    settings: PolicySettings | None = None,
    progress: Progress | None = None,
    driver: str = "agent",
    request_timeout: float | None = None,
    fold_placement: str = "auto",
) -> BenchResult:
    """Run each policy through the trace; one TraceResult per call (see `run_many`).

    `fold_placement` is the setting of that name: with an engine, `auto` asks it
    (agent/placement.py) and sends n_cache_reuse where its KV shifts; without one,
    `auto` is in place (the bench's sheets say what the engine would do).

    `driver` is `agent` (the agent's code, as the app runs it) or `core` (core's
    synchronous driver); with the same deterministic summarizer both give the
    same figures, because both run the policies' one set of plans.
    `request_timeout` is the engine's read timeout (the `request_timeout` setting);
    a failing engine is a BenchError, in one line.
    """
    for p in policies:
        get_policy(p)  # unknown names fail before any work
    if driver not in DRIVERS:
        raise BenchError(f"unknown driver {driver!r}: choose one of {', '.join(DRIVERS)}")
    if summarizer == "model" and driver != "agent":
        raise BenchError("summarizer 'model' needs --driver agent: core's driver is synchronous and cannot await a model")
    sheet = price_sheet if isinstance(price_sheet, PriceSheet) else get_price_sheet(price_sheet, price_paths)
    settings = settings or PolicySettings(window=trace.window)
    if fold_placement not in ("auto", "in_place", "after"):
        raise BenchError(f"unknown fold placement {fold_placement!r}: choose auto, in_place or after")
    if engine is not None:
        return asyncio.run(
            _run_with_engine(
                trace, policies, engine, summarizer, sheet, settings, progress, driver, request_timeout, fold_placement
            )
        )
    if fold_placement == "after":
        settings = settings.model_copy(update={"fold_placement": "after"})
    counter = CachingCounter(get_counter(tokenizer))
    trace.check_window(counter)
    summ = get_summarizer(summarizer)

    async def run_all() -> dict[str, PolicyResult]:
        out = {}
        for p in policies:
            out[p] = await _drive(trace, p, counter, summ, sheet, settings, None, progress, driver)
        return out

    results = asyncio.run(run_all())
    return BenchResult(
        traces=[
            TraceResult(
                trace=trace.name,
                window=trace.window,
                tokenizer=counter.name,
                summarizer=summ.name,
                price_sheet=sheet.name,
                policies=results,
                driver=driver,
            )
        ]
    )


# -- the engine path ----------------------------------------------------------------------


class _Engine:
    """Sends each bench request to a llama.cpp (OpenAI-compatible) server, one output token."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.framing = Framing()

    async def send(self, messages: list[dict[str, Any]]) -> Any:
        from tailrent_tui.models.base import Usage

        usage = None
        async for chunk in self.model.stream(messages, options={"max_tokens": 1, "num_predict": 1, "temperature": 0}):
            if isinstance(chunk, Usage):
                usage = chunk
        return usage

    async def request(
        self, session: Session, rent: RentModel, at: float, out_tokens: int, result: PolicyResult
    ) -> tuple[RequestRent, Any]:
        from tailrent_tui.agent.loop import wire_messages

        r = rent.request_session(session, at, out_tokens)
        usage = await self.send(wire_messages(session))
        e = result.engine or EngineFigures()
        e.requests += 1
        e.predicted_prompt_tokens += r.context_tokens
        e.predicted_evaluated_tokens += r.tail_tokens
        if usage is not None:
            e.measured_requests += usage.evaluated_tokens is not None
            e.prompt_tokens += usage.prompt_tokens or 0
            e.cached_tokens += usage.cached_tokens or 0
            e.evaluated_tokens += usage.evaluated_tokens or 0
            e.prompt_ms += usage.prompt_ms or 0.0
        result.engine = e
        return r, usage

    async def flush(self) -> None:
        """Replace the server's KV cache with an unrelated prompt, so each policy starts cold
        as its fresh RentModel assumes (otherwise it would reuse the previous policy's prefix)."""
        await self.send([{"role": "user", "content": "flush the cache: zq xv jk"}])


async def _run_with_engine(
    trace, policies, engine_spec, summarizer, sheet, settings, progress, driver, request_timeout=None, placement="auto"
) -> BenchResult:
    from tailrent_tui.models.errors import ModelError
    from tailrent_tui.models.text import redact

    try:
        return await _run_engine(
            trace, policies, engine_spec, summarizer, sheet, settings, progress, driver, request_timeout, placement
        )
    except ModelError as exc:
        hint = f" ({exc.hint})" if exc.hint else ""
        raise BenchError(f"the engine {redact(engine_spec)} failed: {exc.message}{hint}") from None


async def _run_engine(
    trace, policies, engine_spec, summarizer, sheet, settings, progress, driver, request_timeout, placement="auto"
):
    from tailrent_tui.agent.build import framing_probes
    from tailrent_tui.agent.placement import detect
    from tailrent_tui.models.errors import ModelError
    from tailrent_tui.models.factory import ModelOptions, open_model
    from tailrent_tui.models.http import DEFAULT_READ_TIMEOUT
    from tailrent_tui.models.openai import OpenAIModel
    from tailrent_tui.models.spec import parse_model_spec
    from tailrent_tui.models.summarizer import ModelSummarizer
    from tailrent_tui.models.tokenizer import TokenizerUnavailable, measure_framing, server_tokenizer

    spec = parse_model_spec(engine_spec)
    if spec.kind != "openai":
        raise BenchError(
            f"--engine {spec}: the engine path needs an OpenAI-compatible llama.cpp server "
            "(openai:URL); it counts tokens with the server's /tokenize"
        )
    read_timeout = request_timeout or DEFAULT_READ_TIMEOUT
    model, _ = open_model(spec, ModelOptions(read_timeout=read_timeout))
    assert isinstance(model, OpenAIModel)  # an openai: spec, checked above
    try:
        await model.resolve_name()  # a server with no model fails here, before any measure
    except ModelError:
        await model.aclose()
        raise
    # where folds go on this engine, as the app decides it (n_cache_reuse is sent where KV shifts)
    placed = await detect(model, placement)
    settings = settings.model_copy(update={"fold_placement": placed.placement})
    if model.cache_reuse is not None and sheet.local:
        sheet = sheet.model_copy(update={"reuses_shifted_kv": True, "reuse_min_tokens": model.cache_reuse})
    eng = _Engine(model)
    # the tokenizer's own timeout is short already; a shorter request_timeout shortens it too
    counter = server_tokenizer(eng.model, timeout=min(10.0, read_timeout))
    try:
        try:
            # the same measure as the app's (`tokenizer = "auto"`); the bench offers no tools
            eng.framing, _ = measure_framing(counter, framing_probes(), system=trace.system)
        except TokenizerUnavailable as exc:
            raise BenchError(f"the engine cannot count tokens for the prediction: {exc}") from None
        trace.check_window(counter)
        # A model's summary is asked in the conversation's own context (agent/ladder_driver.py):
        # the rent model moves its cache with it, and counts it apart from the turns.
        summ = ModelSummarizer(eng.model) if summarizer == "model" else get_summarizer(summarizer)
        # The engine keeps one KV cache whatever the clock says: its TTL is infinite
        # within a run; only a different prefix evicts it.
        local = sheet.with_ttl(math.inf).model_copy(update={"min_cacheable": 0})
        results = {}
        for p in policies:
            await eng.flush()
            results[p] = await _drive(trace, p, counter, summ, local, settings, eng, progress, driver)
        return BenchResult(
            traces=[
                TraceResult(
                    trace=trace.name,
                    window=trace.window,
                    tokenizer="engine",
                    summarizer=summ.name,
                    price_sheet=local.name,
                    policies=results,
                    engine=str(spec),
                    driver=driver,
                )
            ]
        )
    finally:
        counter.close()
        await eng.model.aclose()


def run_many(traces: Sequence[Trace], policies: Sequence[str] = POLICY_NAMES, **kwargs: Any) -> BenchResult:
    out = BenchResult()
    for t in traces:
        out.traces += run_bench(t, policies, **kwargs).traces
    return out
