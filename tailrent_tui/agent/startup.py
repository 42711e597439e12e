"""The model, seen from the agent: loading it, learning its name and window, switching it.

The model is opened by `models.factory.open_model`, with the options the settings
give (`model_options`): by the build for a session's first model, by `switch_model` after.

`start` runs once per model, after the app's first frame and before a turn's
first request (a second caller waits for the first): it loads the model when
it must (the embedded engine; a resumed Ollama model), asks the server for its
name and window, probes llama.cpp's KV slot and, on a resume, restores the
slot and prices the first request (slots.py).
"""

from __future__ import annotations

import asyncio
import contextlib

from tailrent_tui.agent.slots import SlotHost, on_resume, on_start
from tailrent_tui.agent.state import AgentState
from tailrent_tui.models.base import ChatModel, Preloadable
from tailrent_tui.models.embedded import EmbeddedModel
from tailrent_tui.models.errors import ModelError
from tailrent_tui.models.factory import CannotOpenModel, ModelOptions, open_model
from tailrent_tui.models.mock import MockModel
from tailrent_tui.models.ollama import OllamaModel
from tailrent_tui.models.text import redact
from tailrent_tui.settings import Settings


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


class ModelLink:
    """Starts the model once, and switches it with the session left as it is."""

    def __init__(self, state: AgentState, host: SlotHost) -> None:
        self.state = state
        self.host = host
        self._started = False
        self._preload_said: str | None = None
        self._learning: asyncio.Future[None] | None = None

    def will_preload(self) -> bool:
        """Whether `start` loads the model first: the embedded engine always (it must start), an
        Ollama model when the session is resumed (its first request would wait for the load, unseen)."""
        model = self.state.model
        return isinstance(model, Preloadable) and (isinstance(model, EmbeddedModel) or bool(self.state.session.usage))

    async def preload(self) -> float | None:
        """Load the model now (see `will_preload`): the seconds it took, None when nothing was loaded
        or the load failed (noted; the first request tries again and reports the fault)."""
        model = self.state.model
        if not self.will_preload() or not isinstance(model, Preloadable):
            return None
        try:
            # the window the turns send: a different num_ctx would make Ollama load the model again
            seconds = await model.preload(num_ctx=self.state.session.window)
        except ModelError as exc:
            line = f"could not load {model.name or 'the model'} before the first request: {exc.message} ({exc.hint})"
            if exc.message != self._preload_said:  # a retry that fails the same way is not said again
                self._preload_said = exc.message
                self.state.session.note(line, "warning")
            return None
        self.state.preload_seconds = seconds
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
        if isinstance(self.state.model, EmbeddedModel) and not self.state.model.started:
            # the engine did not start, and its note said why: the next turn tries it all again
            self._started = False
            return
        await self._learn_window()
        if self.state.placement is not None:
            # before the first request: llama.cpp is asked with n_cache_reuse from it on
            await self.state.placement.detect()
        # the slot is probed before any request, so every request is pinned to it
        await on_start(self.host)
        if self.state.resumed and not self.state.resume_lines:
            self.state.resume_lines = await on_resume(self.host)

    async def _learn_window(self) -> None:
        s = self.state
        resolve = getattr(s.model, "resolve_name", None)
        if resolve is not None and not s.model.name:
            with contextlib.suppress(ModelError):  # the turn's own request reports the fault with its hint
                await resolve()
        if s.settings.window is not None:
            return
        try:
            window = await s.model.context_window()
        except ModelError as exc:
            s.session.note(f"could not read the model's window ({exc.message}); budgeting {s.session.window:,}", "warning")
            return
        if not window or window == s.session.window:
            return
        s.session.window = window
        if s.session_dir is not None:
            try:
                await asyncio.to_thread(s.session_dir.update_meta, window=window)
            except (OSError, LookupError) as exc:
                s.session.note(f"the window ({window:,}) could not be kept for the next resume: {exc}", "warning")

    async def switch_model(self, spec: str) -> str:
        """Switch to the model a spec names; the session and its context stay as they are."""
        s = self.state
        settings = s.settings.model_copy(update={"model": spec})
        try:
            model, _ = open_model(spec, model_options(settings))
        except CannotOpenModel as exc:
            raise ValueError(str(exc)) from None
        if s.slots is not None:
            # the old server's slot, while it still holds this session: a switch back can restore it
            saved = await s.slots.save("before the model switch")
            if saved is not None and saved.line:
                s.session.note(saved.line, saved.level)
        old, s.model = s.model, model
        s.settings = settings
        self._started = False
        if s.slots is not None:
            s.slots.model_changed()
        await old.aclose()
        if s.rent is not None:
            s.rent.expire()  # a different server holds none of this context
        shown = model.name or redact(spec)  # a URL's credentials stay out of the journal
        s.session.note(f"model switched to {shown}", "info")
        if s.session_dir is not None:
            # a resume reopens the model the session ran on last
            with contextlib.suppress(OSError, LookupError):
                await asyncio.to_thread(s.session_dir.update_meta, model_spec=model_spec_of(spec, model), model=shown)
        return shown
