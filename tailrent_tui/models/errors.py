"""One exception family for everything a model backend can do wrong.

Every error carries a user-facing ``message`` (what happened, in one line) and a
``hint`` (what the user can do about it). The UI and ``tailrent ask`` print both,
keep the user's message, and offer a retry.

Messages are shown and journaled: credentials in a URL are hidden and text that
cannot be encoded is replaced (``text.redact``, ``text.clean_text``) here, once.
"""

from __future__ import annotations

from pydantic import ValidationError

from .text import clean_text, redact


def first_problem(exc: ValidationError) -> str:
    """The first thing pydantic found wrong, in one line: where, and what."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ()))
    return f"{where}: {first['msg']}" if where else first["msg"]


class ModelError(Exception):
    """Base of every model-backend failure."""

    #: seconds the server asked us to wait (``Retry-After``), when it said
    retry_after: float | None = None

    def __init__(self, message: str, hint: str = "") -> None:
        message, hint = redact(clean_text(message)), redact(clean_text(hint))
        super().__init__(message if not hint else f"{message} ({hint})")
        self.message = message
        self.hint = hint


class ServerUnavailable(ModelError):
    """The server could not be reached (connect timeout, DNS, network)."""


class ConnectionRefused(ServerUnavailable):
    """Nothing listens at the server's address."""


class ModelNotFound(ModelError):
    """The server does not have the model that was asked for."""

    def __init__(self, model: str, message: str = "", hint: str = "") -> None:
        super().__init__(
            message or f"model '{model}' not found",
            hint or f"pull it with `ollama pull {model}`",
        )
        self.model = model


class ToolsUnsupported(ModelError):
    """The model refuses requests that offer tools (Ollama: 400 'does not support tools')."""


class ServerError(ModelError):
    """The server answered with an error status."""

    def __init__(self, status: int, message: str, hint: str = "") -> None:
        super().__init__(message, hint or f"the server answered HTTP {status}; retry, or check its log")
        self.status = status


class Busy(ServerError):
    """HTTP 503 (the server's queue is full or it is still loading) or 429 (too many requests)."""

    def __init__(
        self, message: str = "server busy", hint: str = "", *, status: int = 503, retry_after: float | None = None
    ) -> None:
        if retry_after is not None:
            message = f"{message}; it asks to retry after {retry_after:g} s"
            hint = hint or f"server busy, retry after {retry_after:g} s"
        super().__init__(status, message, hint or "the server is busy; retry in a moment")
        self.retry_after = retry_after


class Redirected(ServerError):
    """HTTP 3xx: the server points elsewhere. Not followed: the request (and its key) stay where the user sent them."""

    def __init__(self, status: int, url: str, location: str | None) -> None:
        where = f" to {location}" if location else " without saying where (no Location header)"
        super().__init__(
            status,
            f"{url} redirected (HTTP {status}){where}",
            f"use that address in the model spec (e.g. --model openai:{location})"
            if location
            else "check the server's address and any proxy in front of it",
        )
        self.location = location


class StreamError(ModelError):
    """The server reported an error in the middle of a stream (HTTP status still 200)."""


class StreamCut(ModelError):
    """The stream ended before its final record (Ollama ``done``, OpenAI ``[DONE]``)."""


class EmptyReply(ModelError):
    """The stream ended properly but said nothing: no text, no tool call and no reason to stop."""


class MalformedChunk(ModelError):
    """A streamed line was not valid JSON (or not the expected shape)."""

    def __init__(self, line: str, line_number: int, reason: str) -> None:
        shown = line if len(line) <= 120 else line[:117] + "..."
        super().__init__(
            f"malformed line {line_number} in the model's stream: {reason}: {shown!r}",
            "retry; if it repeats, the server speaks another protocol (check the model spec)",
        )
        self.line = line
        self.line_number = line_number

    @classmethod
    def invalid(cls, line: str, line_number: int, exc: ValidationError) -> MalformedChunk:
        return cls(line, line_number, f"unexpected shape ({first_problem(exc)})")


class MalformedResponse(ModelError):
    """An information endpoint (/props, /v1/models, /api/show) answered in a shape its API does not have."""

    def __init__(self, endpoint: str, reason: str) -> None:
        super().__init__(
            f"{endpoint} answered in an unexpected shape ({reason})",
            "set `window` in config.toml to budget without asking the server",
        )

    @classmethod
    def invalid(cls, endpoint: str, exc: ValidationError) -> MalformedResponse:
        """The first thing pydantic found wrong, in one line."""
        return cls(endpoint, first_problem(exc))


class ReadTimeout(ModelError):
    """The server stopped sending for longer than the read timeout."""

    def __init__(self, seconds: float | None) -> None:
        after = f" for {seconds:g} s" if seconds is not None else ""
        super().__init__(
            f"the model server sent nothing{after}",
            "it may be stalled or still loading the model; retry, or raise the read timeout",
        )
        self.seconds = seconds


class Cancelled(ModelError):
    """The server reports the request as cancelled (Ollama HTTP 499).

    Cancelling the consuming task raises ``asyncio.CancelledError`` as usual, never this.
    """


class ContextOverflow(ModelError):
    """The request would not fit the model's window, even after the ladder: it is not sent."""
