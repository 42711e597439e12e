"""Traces: recorded or generated sessions that the bench drives every policy through.

The format is JSONL, one object a line (DESIGN.md, "Trace format"):

    {"trace": "name", "window": 32768, "system": "You are ..."}      first line, optional
    {"role": "user", "content": "...", "at": "2026-11-02T09:00:00Z"}  "at" optional
    {"role": "assistant", "content": "..."}     a model request is made before it
    {"role": "tool", "tool": "grep", "content": "..."}     passes rungs 1 and 2
    {"role": "user", "content": "...", "pin": true}        pinned as the user would
    {"idle": 43200}                             seconds of silence: caches expire
    {"probe": "What did we decide?", "expect": ["Redis", "15 minute"]}

Time: a message line without "at" comes 30 s after the previous line; an idle
line moves the clock by its seconds; a probe takes no time (it observes).
A trace with no "at" at all starts at `DEFAULT_START`.

One optional field beyond DESIGN.md: `"decision": true|false` on a chat line
labels it for scoring (false pins on chatter, missed decisions). Policies never
see it. Other unknown fields are ignored and counted in `Trace.ignored_fields`.

A probe before any message is scored against what would be sent: the system
prompt alone.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    ValidationError,
)
from pydantic_core import PydanticCustomError

from tailrent_tui.core.tokens import TokenCounter

DEFAULT_START = datetime(2026, 11, 2, 9, 0, tzinfo=UTC).timestamp()
DEFAULT_WINDOW = 32768
STEP_SECONDS = 30.0

_ROLES = ("user", "assistant", "tool")


class TraceError(ValueError):
    """A trace that cannot be run; the message names the line."""


class TraceStep(BaseModel):
    """One line of a trace, with its time resolved."""

    kind: Literal["message", "idle", "probe"]
    line: int
    at: float
    role: str | None = None
    content: str = ""
    tool: str | None = None
    pin: bool = False
    decision: bool | None = None
    seconds: float = 0.0
    probe: str = ""
    expect: list[str] = Field(default_factory=list)
    stale: list[str] = Field(default_factory=list)


class Trace(BaseModel):
    name: str
    window: int = DEFAULT_WINDOW
    system: str = ""
    steps: list[TraceStep] = Field(default_factory=list)
    ignored_fields: int = 0
    ignored_field_names: dict[str, int] = Field(default_factory=dict)

    @property
    def messages(self) -> list[TraceStep]:
        return [s for s in self.steps if s.kind == "message"]

    @property
    def probes(self) -> list[TraceStep]:
        return [s for s in self.steps if s.kind == "probe"]

    @property
    def labelled(self) -> bool:
        """True when chat lines say whether they are decisions (so false pins can be scored)."""
        return any(s.decision is not None for s in self.steps)

    @property
    def decision_line_numbers(self) -> list[int]:
        return [s.line for s in self.steps if s.decision]

    def check_window(self, counter: TokenCounter) -> None:
        """A window must hold at least the system prompt."""
        tokens = counter.count(self.system)
        if tokens > self.window:
            raise TraceError(
                f"trace {self.name!r}: the window ({self.window:,} tokens) is smaller than "
                f"the system prompt ({tokens:,} {counter.name} tokens)"
            )


def parse_at(value: Any) -> float:
    """An ISO 8601 / RFC 3339 time with its offset (``Z``, ``+00:00``, ``-05:30``) -> a timestamp.

    A time without an offset is refused: it would mean a different instant on every machine.
    """
    example = "(e.g. 2026-11-02T09:00:00Z)"
    if not isinstance(value, str):
        raise PydanticCustomError(
            "trace_at", f'"at" must be an ISO 8601 time with an offset {example}, got {type(value).__name__} {value!r:.60}'
        )
    text = value.strip()
    # RFC 3339 allows a lower-case t and z
    text = text[:-1] + "+00:00" if text[-1:] in ("Z", "z") else text
    if len(text) > 10 and text[10] == "t":
        text = text[:10] + "T" + text[11:]
    try:
        stamp = datetime.fromisoformat(text)
    except ValueError:
        raise PydanticCustomError("trace_at", f'"at" is not an ISO 8601 time: {value!r:.60} {example}') from None
    if stamp.utcoffset() is None:
        raise PydanticCustomError("trace_at", f'"at" has no offset: {value!r:.60}; add Z or +HH:MM {example}')
    return stamp.timestamp()


# -- the lines of the format: one model each, told apart by their key ---------------------------
# Strict: a trace is data, so "yes" is not true and 42 is not a string. Unknown fields are
# kept aside (extra="allow") to be counted, not refused. Each field's description is what
# an error says it must be.

_LINE_CONFIG = ConfigDict(strict=True, extra="allow", allow_inf_nan=False)


class HeaderLine(BaseModel):
    """``{"trace": "name", "window": 32768, "system": "..."}``: the first line, optional."""

    model_config = _LINE_CONFIG

    trace: str = Field(min_length=1, description="a non-empty string")
    window: int = Field(DEFAULT_WINDOW, gt=0, description="a positive integer")
    system: str = Field("", description="a string")


class MessageLine(BaseModel):
    """``{"role": "user", "content": "...", "at": "2026-11-02T09:00:00Z", "pin": true}``."""

    model_config = _LINE_CONFIG

    role: Literal["user", "assistant", "tool"] = Field(description=f"one of {', '.join(_ROLES)}")
    content: str = Field(description="a string")
    at: Annotated[float | None, BeforeValidator(parse_at)] = Field(
        None, description="an ISO 8601 time with an offset, e.g. 2026-11-02T09:00:00Z"
    )
    tool: str | None = Field(None, description="a string")
    pin: bool = Field(False, description="true or false")
    decision: bool | None = Field(None, description="true or false")


class IdleLine(BaseModel):
    """``{"idle": 43200}``: seconds of silence."""

    model_config = _LINE_CONFIG

    idle: float = Field(ge=0, description="a number of seconds >= 0")


class ProbeLine(BaseModel):
    """``{"probe": "What did we decide?", "expect": ["Redis"]}``: a question scored against what is sent."""

    model_config = _LINE_CONFIG

    probe: str = Field(description="a string")
    expect: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list, description="a list of non-empty strings")
    stale: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=list,
        description="words of a superseded value that must no longer be shown as current (in a pin, the ledger or a summary)",
    )


_KINDS: dict[str, type[BaseModel]] = {"trace": HeaderLine, "role": MessageLine, "idle": IdleLine, "probe": ProbeLine}


def _kind(obj: Any) -> str | None:
    """The key that says what a line is; the header's wins, then a message's (as DESIGN.md lists them)."""
    return next((key for key in _KINDS if key in obj), None) if isinstance(obj, dict) else None


TraceLine = Annotated[
    Annotated[HeaderLine, Tag("trace")]
    | Annotated[MessageLine, Tag("role")]
    | Annotated[IdleLine, Tag("idle")]
    | Annotated[ProbeLine, Tag("probe")],
    Discriminator(_kind, custom_error_type="trace_line_kind", custom_error_message="not a trace line"),
]
_TRACE_LINE: TypeAdapter[HeaderLine | MessageLine | IdleLine | ProbeLine] = TypeAdapter(TraceLine)


def _no_constant(name: str) -> Any:
    """``json.loads`` takes NaN and Infinity, which are not JSON; a trace refuses them."""
    raise ValueError(f"{name} is not a JSON number")


def _read_line(raw: str | dict, n: int) -> HeaderLine | MessageLine | IdleLine | ProbeLine:
    """One line of text or a parsed dict -> its model, or a TraceError naming line `n`."""
    obj: Any = raw
    if isinstance(raw, str):
        try:
            obj = json.loads(raw, parse_constant=_no_constant)
        except json.JSONDecodeError as exc:
            raise TraceError(f"line {n}: not JSON ({exc.msg} at column {exc.colno})") from None
        except ValueError as exc:
            raise TraceError(f"line {n}: not JSON ({exc})") from None
        except RecursionError:
            raise TraceError(f"line {n}: nested too deeply to be a trace line") from None
    try:
        return _TRACE_LINE.validate_python(obj)
    except ValidationError as exc:
        raise _one_line(exc, obj, n) from None
    except RecursionError:
        raise TraceError(f"line {n}: nested too deeply to be a trace line") from None


def _one_line(exc: ValidationError, obj: Any, n: int) -> TraceError:
    """The first of pydantic's errors as one line that names the line and says what the field must be."""
    error = exc.errors(include_url=False)[0]
    if error["type"] == "trace_line_kind":
        if not isinstance(obj, dict):
            return TraceError(f"line {n}: expected a JSON object, got {type(obj).__name__}")
        return TraceError(f'line {n}: expected a message ("role"), an "idle" or a "probe"; got keys {sorted(obj)}')
    if error["type"] == "trace_at":
        return TraceError(f"line {n}: {error['msg']}")
    tag, key = error["loc"][0], error["loc"][1]
    want = _KINDS[str(tag)].model_fields[str(key)].description
    if error["type"] == "missing":
        return TraceError(f"line {n}: {key!r} is missing: it must be {want}")
    got = obj[key]
    if key == "role" and isinstance(got, str):
        return TraceError(f"line {n}: unknown role {got!r}: use {want}")
    return TraceError(f"line {n}: {key!r} must be {want}, got {type(got).__name__} {got!r:.60}")


def load_trace(
    source: str | Path | Iterable[str | dict],
    *,
    name: str | None = None,
    counter: TokenCounter | None = None,
) -> Trace:
    """Parse a trace from a file path, or from lines (JSON text or already-parsed dicts).

    Raises TraceError naming the line for: text that is not JSON, a line that is
    not an object, wrong types, an unknown role, a header after the first line,
    a line that is none of message/idle/probe. With a `counter`, also checks the
    window holds the system prompt.
    """
    if isinstance(source, str | Path):
        path = Path(source)
        try:
            raw_lines: Iterable[str | dict] = path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise TraceError(f"cannot read trace {path}: {exc.strerror or exc}") from exc
        except UnicodeDecodeError as exc:
            raise TraceError(f"trace {path} is not UTF-8 text ({exc})") from exc
        default_name = path.stem
    else:
        raw_lines = source
        default_name = "trace"

    trace = Trace(name=name or default_name)
    ignored: Counter[str] = Counter()
    clock = DEFAULT_START - STEP_SECONDS
    seen_any = False
    for n, raw in enumerate(raw_lines, start=1):
        if isinstance(raw, str) and not raw.strip():
            continue
        line = _read_line(raw, n)
        seen_any, first = True, not seen_any
        ignored.update((line.model_extra or {}).keys())
        match line:
            case HeaderLine():
                if not first:
                    raise TraceError(f'line {n}: a header line (with "trace") may only come first')
                trace.name, trace.window, trace.system = name or line.trace, line.window, line.system
                continue
            case MessageLine():
                clock = line.at if line.at is not None else clock + STEP_SECONDS
                tool = (line.tool or "tool") if line.role == "tool" else line.tool
                step = TraceStep(
                    kind="message",
                    line=n,
                    at=clock,
                    role=line.role,
                    content=line.content,
                    tool=tool,
                    pin=line.pin,
                    decision=line.decision,
                )
            case IdleLine():
                clock += line.idle
                step = TraceStep(kind="idle", line=n, at=clock, seconds=line.idle)
            case ProbeLine():
                step = TraceStep(kind="probe", line=n, at=clock, probe=line.probe, expect=line.expect, stale=line.stale)
        trace.steps.append(step)
    trace.ignored_field_names = dict(ignored)
    trace.ignored_fields = sum(ignored.values())
    if counter is not None:
        trace.check_window(counter)
    return trace


def _article() -> Trace:
    from tailrent_tui.scenarios.article import article_trace

    return load_trace(article_trace(), name="article")


def _migration_week() -> Trace:
    from tailrent_tui.scenarios.migration_week import migration_week_records

    return load_trace(migration_week_records(), name="migration-week")


BUILTIN_TRACES: dict[str, Callable[[], Trace]] = {
    "article": _article,
    "migration-week": _migration_week,
}


def get_trace(name_or_path: str, counter: TokenCounter | None = None) -> Trace:
    """A built-in trace by name, or a JSONL file by path."""
    if name_or_path in BUILTIN_TRACES:
        trace = BUILTIN_TRACES[name_or_path]()
        if counter is not None:
            trace.check_window(counter)
        return trace
    path = Path(name_or_path)
    if not path.exists():
        raise TraceError(f"no trace {name_or_path!r}: not a built-in ({', '.join(BUILTIN_TRACES)}) and no such file")
    return load_trace(path, counter=counter)
