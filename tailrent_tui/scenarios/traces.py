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
import math
from collections import Counter
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from tailrent_tui.core.tokens import TokenCounter

DEFAULT_START = datetime(2026, 11, 2, 9, 0, tzinfo=timezone.utc).timestamp()
DEFAULT_WINDOW = 32768
STEP_SECONDS = 30.0

_HEADER_KEYS = {"trace", "window", "system"}
_MESSAGE_KEYS = {"role", "content", "at", "tool", "pin", "decision"}
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


def parse_at(value: Any, line: int) -> float:
    """An ISO 8601 / RFC 3339 time with its offset (``Z``, ``+00:00``, ``-05:30``) -> a timestamp.

    A time without an offset is refused: it would mean a different instant on every machine.
    """
    if not isinstance(value, str):
        raise _type_error(line, "at", "an ISO 8601 time with an offset, e.g. 2026-11-02T09:00:00Z", value)
    text = value.strip()
    # RFC 3339 allows a lower-case t and z
    text = text[:-1] + "+00:00" if text[-1:] in ("Z", "z") else text
    try:
        stamp = datetime.fromisoformat(text.replace("t", "T", 1) if len(text) > 10 and text[10] == "t" else text)
    except ValueError:
        raise TraceError(
            f"line {line}: \"at\" is not an ISO 8601 time: {value!r:.60} (e.g. 2026-11-02T09:00:00Z)"
        ) from None
    if stamp.tzinfo is None or stamp.utcoffset() is None:
        raise TraceError(
            f"line {line}: \"at\" has no offset: {value!r}; add Z or +HH:MM (e.g. 2026-11-02T09:00:00Z)"
        )
    return stamp.timestamp()


def _no_constant(name: str) -> Any:
    """``json.loads`` takes NaN and Infinity, which are not JSON; a trace refuses them."""
    raise ValueError(f"{name} is not a JSON number")


def _type_error(line: int, key: str, want: str, got: Any) -> TraceError:
    return TraceError(f"line {line}: {key!r} must be {want}, got {type(got).__name__} {got!r:.60}")


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


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
    if isinstance(source, (str, Path)):
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
        if isinstance(raw, dict):
            obj = raw
        else:
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw, parse_constant=_no_constant)
            except json.JSONDecodeError as exc:
                raise TraceError(f"line {n}: not JSON ({exc.msg} at column {exc.colno})") from None
            except ValueError as exc:
                raise TraceError(f"line {n}: not JSON ({exc})") from None
            except RecursionError:
                raise TraceError(f"line {n}: nested too deeply to be a trace line") from None
        if not isinstance(obj, dict):
            raise TraceError(f"line {n}: expected a JSON object, got {type(obj).__name__}")
        if "trace" in obj:
            if seen_any:
                raise TraceError(f"line {n}: a header line (with \"trace\") may only come first")
            seen_any = True
            _header(trace, obj, n, name)
            ignored.update(k for k in obj if k not in _HEADER_KEYS)
            continue
        seen_any = True
        if "role" in obj:
            step = _message(obj, n, clock)
            clock = step.at
            ignored.update(k for k in obj if k not in _MESSAGE_KEYS)
        elif "idle" in obj:
            secs = obj["idle"]
            if not _number(secs) or secs < 0:
                raise _type_error(n, "idle", "a number of seconds >= 0", secs)
            clock += float(secs)
            step = TraceStep(kind="idle", line=n, at=clock, seconds=float(secs))
            ignored.update(k for k in obj if k != "idle")
        elif "probe" in obj:
            q, expect = obj["probe"], obj.get("expect", [])
            if not isinstance(q, str):
                raise _type_error(n, "probe", "a string", q)
            if not isinstance(expect, list) or not all(isinstance(e, str) and e for e in expect):
                raise _type_error(n, "expect", "a list of non-empty strings", expect)
            step = TraceStep(kind="probe", line=n, at=clock, probe=q, expect=expect)
            ignored.update(k for k in obj if k not in ("probe", "expect"))
        else:
            raise TraceError(f"line {n}: expected a message (\"role\"), an \"idle\" or a \"probe\"; got keys {sorted(obj)}")
        trace.steps.append(step)
    trace.ignored_field_names = dict(ignored)
    trace.ignored_fields = sum(ignored.values())
    if counter is not None:
        trace.check_window(counter)
    return trace


def _header(trace: Trace, obj: dict, n: int, name: str | None) -> None:
    tname, window, system = obj["trace"], obj.get("window", DEFAULT_WINDOW), obj.get("system", "")
    if not isinstance(tname, str) or not tname:
        raise _type_error(n, "trace", "a non-empty string", tname)
    if not isinstance(window, int) or isinstance(window, bool) or window <= 0:
        raise _type_error(n, "window", "a positive integer", window)
    if not isinstance(system, str):
        raise _type_error(n, "system", "a string", system)
    trace.name = name or tname
    trace.window = window
    trace.system = system


def _message(obj: dict, n: int, clock: float) -> TraceStep:
    role = obj["role"]
    if not isinstance(role, str):
        raise _type_error(n, "role", "a string", role)
    if role not in _ROLES:
        raise TraceError(f"line {n}: unknown role {role!r}: use one of {', '.join(_ROLES)}")
    content = obj.get("content")
    if not isinstance(content, str):
        raise _type_error(n, "content", "a string", content)
    tool = obj.get("tool")
    if tool is not None and not isinstance(tool, str):
        raise _type_error(n, "tool", "a string", tool)
    pin = obj.get("pin", False)
    if not isinstance(pin, bool):
        raise _type_error(n, "pin", "true or false", pin)
    decision = obj.get("decision")
    if decision is not None and not isinstance(decision, bool):
        raise _type_error(n, "decision", "true or false", decision)
    at = parse_at(obj["at"], n) if "at" in obj else clock + STEP_SECONDS
    return TraceStep(
        kind="message", line=n, at=at, role=role, content=content,
        tool=(tool or "tool") if role == "tool" else tool, pin=pin, decision=decision,
    )


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
        raise TraceError(
            f"no trace {name_or_path!r}: not a built-in ({', '.join(BUILTIN_TRACES)}) and no such file"
        )
    return load_trace(path, counter=counter)
