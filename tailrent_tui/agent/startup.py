"""The model, seen from the agent: loading it, learning its name and window, and what is bound to it.

The model is opened by `models.factory.open_model`, with the options the settings
give (`model_options`): by the build for a session's first model, by `Agent.switch_model` after.
What follows the model is picked here, for both: who writes the fold summaries
(`pick_summarizer`), the price sheet's cache life (`price_sheet_for`) and, for a
session that counts with its server's tokenizer, the counter (`server_counter`).

`start` runs once per model, after the app's first frame and before a turn's
first request (a second caller waits for the first): it loads the model when
it must (the embedded engine; a resumed Ollama model), asks the server for its
name and window, probes llama.cpp's KV slot and, on a resume, restores the
slot and prices the first request (slots.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Callable

from tailrent_tui.agent.budget import LadderBudget
from tailrent_tui.agent.fold_requests import FoldRequests
from tailrent_tui.agent.kv_slots import SlotKeeper, on_resume, on_start
from tailrent_tui.agent.ladder_driver import LadderDriver
from tailrent_tui.agent.placement import PlacementKeeper
from tailrent_tui.core.kv_slots import ResumePrice
from tailrent_tui.core.rent import PriceSheet, RentModel, get_price_sheet
from tailrent_tui.core.session import Session
from tailrent_tui.core.summarize import ExtractiveSummarizer, LossySummarizer, Summarizer
from tailrent_tui.core.tokens import TokenCounter
from tailrent_tui.models.base import ChatModel, Preloadable
from tailrent_tui.models.embedded import EmbeddedModel
from tailrent_tui.models.errors import ModelError
from tailrent_tui.models.factory import ModelOptions
from tailrent_tui.models.mock import MockModel
from tailrent_tui.models.ollama import OllamaModel
from tailrent_tui.models.openai import OpenAIModel
from tailrent_tui.models.summarizer import ModelSummarizer
from tailrent_tui.models.text import redact
from tailrent_tui.models.tokenizer import PROBE, ServerTokenizer, TokenizerUnavailable, server_tokenizer
from tailrent_tui.settings import Settings, keep_alive_seconds, user_price_files
from tailrent_tui.store.sessions import SessionDir


def model_options(settings: Settings) -> ModelOptions:
    """What the settings say about opening a model, besides its spec (`model`)."""
    return ModelOptions(window=settings.window, keep_alive=settings.keep_alive, read_timeout=settings.request_timeout)


def model_spec_of(asked: str | None, model: ChatModel) -> str | None:
    """The spec that reopens this model: the one asked for, else what the probe found; None when
    it carries credentials (they stay out of meta.json: a resume then asks for --model)."""
    if asked:
        return asked if redact(asked) == asked else None
    if isinstance(model, EmbeddedModel):
        return "embedded"
    if isinstance(model, OllamaModel):
        return f"ollama:{model.name}" if model.name else "ollama"
    if isinstance(model, MockModel):
        return "mock"
    return None


def pick_summarizer(settings: Settings, model: ChatModel) -> Summarizer | ModelSummarizer:
    """Who writes this model's fold summaries ([fold] summarizer; auto = the model unless it is the mock)."""
    choice = settings.fold.summarizer
    if choice == "auto":
        choice = "extractive" if isinstance(model, MockModel) else "model"
    if choice == "model":
        return ModelSummarizer(model)
    if choice == "lossy":
        return LossySummarizer()
    return ExtractiveSummarizer()


def price_sheet_for(settings: Settings, model: ChatModel) -> PriceSheet:
    """The price sheet the settings name, its cache life the one this model's server keeps."""
    sheet = get_price_sheet(settings.price_sheet, user_price_files())
    if sheet.local and isinstance(model, OllamaModel):
        # Ollama keeps the model and its KV cache for the keep_alive the app sends: the local sheet's TTL
        return sheet.with_ttl(max(keep_alive_seconds(settings.keep_alive), 1.0))
    if sheet.local and isinstance(model, OpenAIModel):
        # llama.cpp (and the embedded engine) keep a slot's KV until another prompt takes the slot:
        # no clock says when; the resume asks the server what its slot holds (agent/kv_slots.py)
        return sheet.with_ttl(math.inf)
    return sheet


def server_counter(tokenizer: str, model: ChatModel) -> tuple[TokenCounter | None, str | None]:
    """For a session that counts with its model server's tokenizer (`tokenizer` is meta.json's), that
    server's counter (None: the one meta names), and a warning when the server cannot count. A resume
    and a /model switch ask it. Blocking: one request to the server."""
    if tokenizer != ServerTokenizer.name:
        return None, None
    if isinstance(model, OpenAIModel) and not isinstance(model, EmbeddedModel):
        server = server_tokenizer(model)
        try:
            server.tokens(PROBE)
            return server, None
        except TokenizerUnavailable as exc:
            server.close()
            why = str(exc)
    else:
        why = f"{getattr(model, 'name', '') or 'this model'} has no tokenizer to ask"
    return None, f"this session counts tokens with its model server's tokenizer, and {why}: new text is counted like cl100k"


class ModelLink:
    """Starts the model once per model: loads it, learns its window, probes its slots, prices a resume."""

    def __init__(
        self,
        *,
        model: Callable[[], ChatModel],
        session: Session,
        window: int | None,
        session_dir: SessionDir | None,
        ladder: LadderDriver,
        budget: LadderBudget,
        requests: FoldRequests,
        rent: RentModel | None,
        slots: SlotKeeper | None = None,
        placement: PlacementKeeper | None = None,
        resumed: bool = False,
    ) -> None:
        """`model`: the current model (a /model switch changes it); `window`: the setting, which wins
        over the server's; `budget` and `requests`: the policy and summarizer a resume is priced with;
        `ladder`: where a cold resume is told; `resumed`: the session had requests before, so the first
        start restores its slot and prices the resume."""
        self._model = model
        self.session = session
        self.window = window
        self.session_dir = session_dir
        self.ladder = ladder
        self.budget = budget
        self.requests = requests
        self.rent = rent
        self.slots = slots
        self.placement = placement
        self.resumed = resumed
        #: how long the model took to load before the first request (`preload`), when it was loaded
        self.preload_seconds: float | None = None
        #: what the first start found out about the server (its KV slots), to say once
        self.start_lines: list[tuple[str, str]] = []
        #: the resume's price and the slot restored, as (text, level)
        self.resume_lines: list[tuple[str, str]] = []
        self.resume_price: ResumePrice | None = None
        self._started = False
        self._preload_said: str | None = None
        self._learning: asyncio.Future[None] | None = None

    def model_changed(self) -> None:
        """A /model switch: the next start asks the new server."""
        self._started = False

    def will_preload(self) -> bool:
        """Whether `start` loads the model first: the embedded engine always (it must start), an
        Ollama model when the session is resumed (its first request would wait for the load, unseen)."""
        model = self._model()
        return isinstance(model, Preloadable) and (isinstance(model, EmbeddedModel) or bool(self.session.usage))

    async def preload(self) -> float | None:
        """Load the model now (see `will_preload`): the seconds it took, None when nothing was loaded
        or the load failed (noted; the first request tries again and reports the fault)."""
        model = self._model()
        if not self.will_preload() or not isinstance(model, Preloadable):
            return None
        try:
            # the window the turns send: a different num_ctx would make Ollama load the model again
            seconds = await model.preload(num_ctx=self.session.window)
        except ModelError as exc:
            line = f"could not load {model.name or 'the model'} before the first request: {exc.message} ({exc.hint})"
            if exc.message != self._preload_said:  # a retry that fails the same way is not said again
                self._preload_said = exc.message
                self.session.note(line, "warning")
            return None
        self.preload_seconds = seconds
        return seconds

    async def start(self) -> None:
        """Ask the server for its name and window, once per model; the `window` setting wins when given.

        The app calls this after its first frame, and a turn before its first
        request: a second caller waits for the first. The window learned is kept
        in the session's meta.json, so a resume starts with it.
        """
        learning = self._learning
        # a cancelled caller cancels the shared task with it, and a failed one says
        # nothing about the next try: either way the next caller asks again
        failed = learning is not None and learning.done() and (learning.cancelled() or learning.exception())
        if not self._started or learning is None or failed:
            self._started = True
            learning = self._learning = asyncio.ensure_future(self._learn())
        await learning

    async def _learn(self) -> None:
        # first: the embedded engine must listen before anything asks it, and a resumed Ollama model loads
        await self.preload()
        model = self._model()
        if isinstance(model, EmbeddedModel) and not model.started:
            # the engine did not start, and its note said why: the next turn tries it all again
            self._started = False
            return
        await self._learn_window()
        if self.placement is not None:
            # before the first request: llama.cpp is asked with n_cache_reuse from it on
            await self.placement.detect()
        # the slot is probed before any request, so every request is pinned to it
        ladder = self.ladder
        line = await on_start(self.slots, self.session)
        if line:
            self.start_lines.append((line, "info"))
        if self.resumed and not self.resume_lines:
            resumed = await on_resume(
                self.slots,
                session=self.session,
                rent=self.rent,
                cold_resume=ladder.cold_resume,
                policy=self.budget.policy,
                # the fold it promises is shown first when the app shows folds before they apply
                ctx=lambda: self.budget.policy_context(review=ladder.on_review is not None),
                by_model=isinstance(self.requests.summarizer, ModelSummarizer),
                embedded=isinstance(model, EmbeddedModel),
            )
            self.resume_lines, self.resume_price, ladder.cold_resume = resumed.lines, resumed.price, resumed.cold_resume

    async def _learn_window(self) -> None:
        model, session = self._model(), self.session
        resolve = getattr(model, "resolve_name", None)
        if resolve is not None and not model.name:
            with contextlib.suppress(ModelError):  # the turn's own request reports the fault with its hint
                await resolve()
        if self.window is not None:
            return
        try:
            window = await model.context_window()
        except ModelError as exc:
            session.note(f"could not read the model's window ({exc.message}); budgeting {session.window:,}", "warning")
            return
        if not window or window == session.window:
            return
        session.window = window
        if self.session_dir is not None:
            try:
                await asyncio.to_thread(self.session_dir.update_meta, window=window)
            except (OSError, LookupError) as exc:
                session.note(f"the window ({window:,}) could not be kept for the next resume: {exc}", "warning")
