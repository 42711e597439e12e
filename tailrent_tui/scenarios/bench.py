"""The bench: every policy driven through the same trace, with the same tokenizer,
summarizer and price sheet, and their rent, folds and recall side by side.

Per policy: a fresh core Session and a fresh RentModel. Each trace line is
added through the policy (tool results through rungs 1 and 2, then
`after_add`). Before each assistant line a model request is charged: the
context at that point, with the assistant line's tokens as output. Before a
request whose cache has expired the policy gets `on_resume`. Each probe scores
its expected strings against `session.visible_text()`.

With an engine (`engine="openai:URL"`), every request of every policy is also
sent to that server with one output token, and what the server measured
(cached tokens, evaluated prompt tokens, prompt time) is recorded next to the
prediction. The prediction then counts tokens with the server's own tokenizer
(llama.cpp `POST /tokenize`) plus a per-message chat-template overhead measured
on the server, so predicted and measured numbers speak the same tokens.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, Field

from tailrent_tui.core.guard import find_expected
from tailrent_tui.core.messages import Folded, Message
from tailrent_tui.core.policies import POLICY_NAMES, PolicyContext, PolicySettings, get_policy
from tailrent_tui.core.rent import PriceSheet, RentModel, context_items, get_price_sheet
from tailrent_tui.core.rungs import spill as spill_rung
from tailrent_tui.core.rungs.spill import MemorySpillStore
from tailrent_tui.core.session import Session
from tailrent_tui.core.summarize import LossySummarizer, Summarizer
from tailrent_tui.core.tokens import TokenCounter, get_counter
from tailrent_tui.scenarios.traces import Trace

SUMMARIZERS = ("mock-lossy", "mock-extractive", "model")
FIGURES = (
    "prompt_tokens", "cached_tokens", "reevaluated_tokens", "billed_usd", "folds",
    "peak_context_tokens", "recall_hits", "recall_total", "facts_lost",
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
        try:
            from tailrent_tui.models.mock import MockExtractiveSummarizer
        except ImportError as exc:
            raise BenchError(f"summarizer 'mock-extractive' is not available ({exc})") from exc
        return MockExtractiveSummarizer()
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

    @property
    def evaluated_error(self) -> float:
        """Relative error of the predicted evaluated tokens against the measured ones."""
        if not self.evaluated_tokens:
            return 0.0 if not self.predicted_evaluated_tokens else math.inf
        return (self.predicted_evaluated_tokens - self.evaluated_tokens) / self.evaluated_tokens


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
    # extras
    requests: int = 0
    expiries: int = 0
    spills: int = 0
    pins: int = 0
    false_pins: int = 0
    chatter_lines: int = 0
    decisions_pinned: int = 0
    decision_lines: int = 0
    guard_repair_tokens: int = Field(default=0, description="sum over requests of repaired-fact tokens in context")
    final_context_tokens: int = 0
    probe_misses: list[str] = Field(default_factory=list)
    context_series: list[int] = Field(default_factory=list)
    engine: EngineFigures | None = None

    def figures(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in FIGURES}
        out["billed_usd"] = round(self.billed_usd, 6)
        return out

    @property
    def guard_share(self) -> float:
        """Repaired-fact tokens as a share of all prompt tokens sent."""
        return self.guard_repair_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    @property
    def false_pin_rate(self) -> float | None:
        return self.false_pins / self.chatter_lines if self.chatter_lines else None

    def extras(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "cache_expiries": self.expiries,
            "spills": self.spills,
            "pins": self.pins,
            "false_pins": self.false_pins,
            "chatter_lines": self.chatter_lines,
            "false_pin_rate": self.false_pin_rate,
            "decisions_pinned": self.decisions_pinned,
            "decision_lines": self.decision_lines,
            "guard_share": round(self.guard_share, 5),
            "final_context_tokens": self.final_context_tokens,
            "probe_misses": self.probe_misses,
            "engine": None if self.engine is None else {
                **self.engine.model_dump(), "evaluated_error": round(self.engine.evaluated_error, 5),
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


class BenchResult(BaseModel):
    traces: list[TraceResult] = Field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The documented `--json` shape, with the extras under their own key."""
        return {
            "traces": [
                {"trace": t.trace, "policies": {n: p.figures() for n, p in t.policies.items()}}
                for t in self.traces
            ],
            "extras": [
                {
                    "trace": t.trace, "window": t.window, "tokenizer": t.tokenizer,
                    "summarizer": t.summarizer, "price_sheet": t.price_sheet, "engine": t.engine,
                    "policies": {n: p.extras() for n, p in t.policies.items()},
                }
                for t in self.traces
            ],
        }


@contextlib.contextmanager
def seeded_spill_ids(seed: int = 0):
    """Spill ids from a seeded generator for the length of a run.

    A pointer's text holds its spill id, so random ids would change pointer
    token counts (by a token or two) from run to run; the bench must repeat.
    """
    rng = random.Random(seed)
    saved = spill_rung.new_spill_id
    spill_rung.new_spill_id = lambda: str(uuid.UUID(int=rng.getrandbits(128), version=4))
    try:
        yield
    finally:
        spill_rung.new_spill_id = saved


def _run_policy(
    trace: Trace,
    name: str,
    counter: TokenCounter,
    summarizer: Summarizer,
    sheet: PriceSheet,
    settings: PolicySettings,
    engine: Any | None,
    progress: Progress | None,
) -> PolicyResult:
    with seeded_spill_ids():
        return _drive(trace, name, counter, summarizer, sheet, settings, engine, progress)


def _drive(trace, name, counter, summarizer, sheet, settings, engine, progress) -> PolicyResult:
    policy = get_policy(name)
    now = [trace.steps[0].at if trace.steps else 0.0]
    session = Session(
        counter=counter, system=trace.system, window=trace.window,
        decisions=policy.decision_detector(), clock=lambda: now[0], id=f"bench-{name}",
    )
    ctx = PolicyContext(summarizer=summarizer, spill_store=MemorySpillStore(), settings=settings)
    rent = RentModel(sheet.with_ttl(math.inf) if policy.infinite_ttl else sheet)
    result = PolicyResult(policy=name)
    repair_of: dict[str, int] = {}

    def listen(ev: Any) -> None:
        if isinstance(ev, Folded):
            repair_of[ev.fold.summary.id] = ev.fold.repair_tokens

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
            continue
        if step.kind != "message":
            continue
        if step.role == "assistant":
            _request(session, policy, ctx, rent, result, repair_of, step, engine)
        if step.role == "tool":
            policy.admit_tool(session, ctx, step.tool or "tool", step.content, at=step.at)
        else:
            m = session.add(step.role, step.content, pinned=step.pin, at=step.at)  # type: ignore[arg-type]
            if step.decision is not None:
                auto = m.pinned and not step.pin
                if step.decision:
                    result.decision_lines += 1
                    result.decisions_pinned += int(m.pinned)
                else:
                    result.chatter_lines += 1
                    result.false_pins += int(auto)
        policy.after_add(session, ctx)
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
    result.folds = len(session.folds)
    result.facts_lost = sum(len(f.facts_lost) for f in session.folds)
    result.spills = len(session.spills)
    result.pins = len(session.pinned)
    result.final_context_tokens = session.context_tokens
    return result


def _request(session, policy, ctx, rent, result, repair_of, step, engine) -> None:
    _, _, expired = rent.predict(context_items(session), session.head_tokens, step.at)
    if expired:
        policy.on_resume(session, ctx)
        result.peak_context_tokens = max(result.peak_context_tokens, session.context_tokens)
    out_tokens = session.count(step.content)
    if engine is not None:
        engine.request(session, rent, step.at, out_tokens, result)
    else:
        rent.request_session(session, step.at, out_tokens)
    result.context_series.append(session.context_tokens)
    result.guard_repair_tokens += sum(t for sid, t in repair_of.items() if sid in session)


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
) -> BenchResult:
    """Run each policy through the trace; one TraceResult per call (see `run_many`)."""
    for p in policies:
        get_policy(p)  # unknown names fail before any work
    sheet = price_sheet if isinstance(price_sheet, PriceSheet) else get_price_sheet(price_sheet, price_paths)
    settings = settings or PolicySettings(window=trace.window)
    if engine is not None:
        return _run_with_engine(trace, policies, engine, summarizer, sheet, settings, progress)
    counter = CachingCounter(get_counter(tokenizer))
    trace.check_window(counter)
    summ = get_summarizer(summarizer)
    results = {
        p: _run_policy(trace, p, counter, summ, sheet, settings, None, progress) for p in policies
    }
    return BenchResult(traces=[TraceResult(
        trace=trace.name, window=trace.window, tokenizer=counter.name, summarizer=summ.name,
        price_sheet=sheet.name, policies=results,
    )])


# -- the engine path ----------------------------------------------------------------------


class EngineCounter:
    """Token counts from the server's own tokenizer (llama.cpp POST /tokenize), cached."""

    def __init__(self, client: Any, base_url: str) -> None:
        self.client = client
        self.base = base_url.rstrip("/")
        self.name = "engine"
        self._cache: dict[str, int] = {}

    def count(self, text: str) -> int:
        if not text:
            return 0
        n = self._cache.get(text)
        if n is None:
            r = self.client.post(f"{self.base}/tokenize", json={"content": text, "add_special": False})
            if r.status_code != 200:
                raise BenchError(f"the engine's /tokenize answered {r.status_code}: {r.text[:200]}")
            n = self._cache[text] = len(r.json()["tokens"])
        return n


class _Engine:
    """Sends each bench request to a llama.cpp (OpenAI-compatible) server, one output token."""

    def __init__(self, base_url: str, model: Any, template_overhead: int, base_overhead: int) -> None:
        self.base_url = base_url
        self.model = model
        self.per_message = template_overhead
        self.base_overhead = base_overhead
        self.loop = asyncio.new_event_loop()

    def wire(self, session: Session) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if session.system:
            out.append({"role": "system", "content": session.system})
        for m in session.messages:
            role = m.role if m.role in ("user", "assistant") else "user"
            out.append({"role": role, "content": m.content})
        return out

    async def _send(self, messages: list[dict[str, Any]]) -> Any:
        from tailrent_tui.models.base import Usage

        usage = None
        async for chunk in self.model.stream(messages, options={"max_tokens": 1, "num_predict": 1, "temperature": 0}):
            if isinstance(chunk, Usage):
                usage = chunk
        return usage

    def items(self, session: Session) -> list[tuple[str, int]]:
        # each message costs its content tokens plus the template's per-message tokens
        return [(k, t + self.per_message) for k, t in context_items(session)]

    def head(self, session: Session) -> int:
        return session.head_tokens + self.base_overhead + (self.per_message if session.system else 0)

    def request(self, session: Session, rent: RentModel, at: float, out_tokens: int, result: PolicyResult) -> None:
        r = rent.request(self.items(session), self.head(session), at, out_tokens)
        usage = self.loop.run_until_complete(self._send(self.wire(session)))
        e = result.engine or EngineFigures()
        e.requests += 1
        e.predicted_prompt_tokens += r.context_tokens
        e.predicted_evaluated_tokens += r.tail_tokens
        if usage is not None:
            e.prompt_tokens += usage.prompt_tokens or 0
            e.cached_tokens += usage.cached_tokens or 0
            e.evaluated_tokens += usage.evaluated_tokens or 0
            e.prompt_ms += usage.prompt_ms or 0.0
        result.engine = e

    def flush(self) -> None:
        """Replace the server's KV cache with an unrelated prompt, so each policy starts cold
        as its fresh RentModel assumes (otherwise it would reuse the previous policy's prefix)."""
        self.loop.run_until_complete(self._send([{"role": "user", "content": "flush the cache: zq xv jk"}]))

    def close(self) -> None:
        self.loop.run_until_complete(self.model.aclose())
        self.loop.close()


class _EngineSummarizer:
    """Fold summaries written by the engine's own model (`--summarizer model`).

    A summary is a request with another prefix. llama.cpp's server serves it
    without dropping the conversation's KV cache (measured on gemma3-270m: the
    same evaluated tokens with and without summary requests in between), so the
    rent model charges nothing extra for it. Replies are capped; the 270M base
    model writes noise, which the fact guard then has to repair.
    """

    name = "model"

    def __init__(self, engine: _Engine, max_tokens: int = 160) -> None:
        from tailrent_tui.models.mock import ModelSummarizer

        self.engine = engine
        self.inner = ModelSummarizer(engine.model, options={"temperature": 0, "max_tokens": max_tokens})
        self.calls = 0

    def summarize(self, messages: Sequence[Message]) -> str:
        from tailrent_tui.models.errors import ModelError

        self.calls += 1
        try:
            return self.engine.loop.run_until_complete(
                self.inner.asummarize(messages)
            )
        except ModelError as exc:
            raise BenchError(f"the engine's model could not summarize: {exc.message}") from exc


def measure_template_overhead(engine: _Engine, counter: EngineCounter) -> tuple[int, int]:
    """(per-message, fixed) prompt tokens the chat template adds, from two requests."""
    one = [{"role": "user", "content": "hello there"}]
    three = [*one, {"role": "assistant", "content": "general kenobi"}, {"role": "user", "content": "status report"}]
    u1 = engine.loop.run_until_complete(engine._send(one))
    u3 = engine.loop.run_until_complete(engine._send(three))
    if u1 is None or u3 is None or u1.prompt_tokens is None or u3.prompt_tokens is None:
        raise BenchError("the engine did not report prompt_tokens; cannot calibrate the template overhead")
    c1 = sum(counter.count(m["content"]) for m in one)
    c3 = sum(counter.count(m["content"]) for m in three)
    per = ((u3.prompt_tokens - c3) - (u1.prompt_tokens - c1)) // 2
    fixed = (u1.prompt_tokens - c1) - per
    return per, fixed


def _run_with_engine(trace, policies, engine_spec, summarizer, sheet, settings, progress) -> BenchResult:
    import httpx

    from tailrent_tui.models.spec import open_model, parse_model_spec

    spec = parse_model_spec(engine_spec)
    if spec.kind != "openai":
        raise BenchError(
            f"--engine {engine_spec!r}: the engine path needs an OpenAI-compatible llama.cpp server "
            "(openai:URL); it counts tokens with the server's /tokenize"
        )
    base = (spec.url or "").rstrip("/")
    if base.endswith("/v1"):
        base = base[:-3]
    client = httpx.Client(timeout=60.0)
    eng = _Engine(base, None, 0, 0)
    try:
        eng.model = eng.loop.run_until_complete(open_model(spec))
    except Exception:
        eng.loop.close()
        client.close()
        raise
    try:
        counter = EngineCounter(client, base)
        try:
            counter.count("probe")
        except httpx.HTTPError as exc:
            raise BenchError(f"cannot reach the engine's /tokenize at {base}: {exc}") from exc
        eng.per_message, eng.base_overhead = measure_template_overhead(eng, counter)
        trace.check_window(counter)
        summ = _EngineSummarizer(eng) if summarizer == "model" else get_summarizer(summarizer)
        # The engine keeps one KV cache whatever the clock says: its TTL is infinite
        # within a run; only a different prefix evicts it.
        local = sheet.with_ttl(math.inf).model_copy(update={"min_cacheable": 0})
        results = {}
        for p in policies:
            eng.flush()
            results[p] = _run_policy(trace, p, counter, summ, local, settings, eng, progress)
        return BenchResult(traces=[TraceResult(
            trace=trace.name, window=trace.window, tokenizer="engine", summarizer=summ.name,
            price_sheet=local.name, policies=results, engine=str(spec),
        )])
    finally:
        eng.close()
        client.close()


def run_many(traces: Sequence[Trace], policies: Sequence[str] = POLICY_NAMES, **kwargs: Any) -> BenchResult:
    out = BenchResult()
    for t in traces:
        out.traces += run_bench(t, policies, **kwargs).traces
    return out
