"""Text from a model server, made safe to keep: surrogates, split characters, credentials.

A server may send half of an emoji in one event and the other half in the next,
either as raw UTF-8 bytes split across reads (joined by decoding the stream
incrementally, ``http.iter_lines``) or as JSON escapes (``"\\ud83d"`` then
``"\\ude00"``): ``json.loads`` turns each into a lone surrogate, which no journal
can encode. ``SurrogateJoiner`` holds a trailing high surrogate back until the
next piece of the same stream arrives and joins the pair; ``clean_text`` is the
last resort, applied where model text enters the session (the chunk models in
``base.py`` and every ``ModelError``): a surrogate that is still alone becomes
U+FFFD.

Credentials in a model URL (``http://user:pass@host``) are for the request only:
``redact`` hides them in anything shown or stored.
"""

from __future__ import annotations

import re
from typing import Any

from tailrent_tui.text import storable, storable_value

_HIGH = ("\ud800", "\udbff")
# what comes before the '@' of a URL with a scheme, of an `openai:` spec without one
# (`openai:user:pass@host`), or of a bare `user:pass@host` (redacting too much beats a leak)
_CREDENTIALS = re.compile(
    r"(?i)(?:(\b[a-z][a-z0-9+.-]*://|\bopenai:\s*(?!//))[^\s/@]+@"
    r"|(?:^|(?<=[\s'\"(=]))[^\s/?#@:'\"()=]+:[^\s/?#@'\"]*@)"
)


def clean_text(text: str) -> str:
    """Surrogate pairs joined into their character, lone surrogates replaced by U+FFFD (`text.storable`)."""
    return storable(text)


def clean_value(value: Any) -> Any:
    """``clean_text`` through JSON-like data (tool arguments): keys and strings at any depth."""
    return storable_value(value)


def redact(text: str) -> str:
    """``scheme://user:pass@host`` -> ``scheme://***@host`` wherever it occurs in ``text``.

    Also without a scheme: ``openai:user:pass@host`` -> ``openai:***@host``, and a
    bare ``user:pass@host`` -> ``***@host``.
    """
    return _CREDENTIALS.sub(r"\1***@", text)


class SurrogateJoiner:
    """Joins a surrogate pair split across two pieces of one stream (text, or thinking)."""

    def __init__(self) -> None:
        self._held = ""

    def feed(self, piece: str) -> str:
        """What can be passed on now; a trailing high surrogate waits for the next piece."""
        text = self._held + piece
        self._held = ""
        if text and _HIGH[0] <= text[-1] <= _HIGH[1]:
            text, self._held = text[:-1], text[-1]
        return clean_text(text)

    def flush(self) -> str:
        """At the end of the stream: a high surrogate still waiting becomes U+FFFD."""
        held, self._held = self._held, ""
        return clean_text(held)
