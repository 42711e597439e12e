"""Text at tailrent's edges: bytes made storable, and text made safe to show on a terminal.

Two functions, one per direction, used by every path that needs them:

- ``storable``: what came in as bytes that are not UTF-8 (a prompt in argv,
  which Python hands over with surrogate escapes; a file name; a paste) or as a
  lone surrogate (a JSON escape from a server) becomes text that any journal line
  can encode: the bytes decoded as UTF-8 with U+FFFD for what is not, so a valid
  character split by the escape comes back whole and ``caf\\xe9`` is kept as
  ``caf�``. Text that is already clean is returned as is.
- ``visible``: what goes out to a terminal (the app's transcript, ``ask``,
  ``tool``, ``export``) with every control and escape character shown as a
  visible picture instead of acted on: ESC becomes ``␛`` (so ``\\x1b]52;c;…``, which
  would write the user's clipboard, prints as ``␛]52;c;…``), BEL ``␇``, a carriage
  return not before a newline ``␍``, a C1 control ``<U+009B>``, a bidirectional
  override ``<U+202E>``. Newlines and tabs stay.
"""

from __future__ import annotations

import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")
# C0 controls but tab and newline, DEL, the C1 controls, and the bidirectional overrides and isolates
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\x80-\x9f\u202a-\u202e\u2066-\u2069]|\r(?!\n)")


def storable(text: str) -> str:
    """``text`` with its surrogate escapes decoded as UTF-8 (U+FFFD for what is not) and lone surrogates
    replaced: every journal line can hold it, and it reads back the same."""
    if not _SURROGATE.search(text):
        return text
    try:
        # argv, os.listdir, os.environ: the raw bytes came back as \udc80-\udcff
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:
        # a surrogate from a JSON escape: pairs joined, the lone ones replaced
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def storable_value(value: Any) -> Any:
    """``storable`` through JSON-like data: keys and strings at any depth."""
    if isinstance(value, str):
        return storable(value)
    if isinstance(value, dict):
        return {storable_value(k): storable_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [storable_value(v) for v in value]
    return value


def _picture(match: re.Match[str]) -> str:
    c = match.group()
    code = ord(c)
    if code == 0x7F:
        return "\u2421"  # ␡
    if code < 0x20:
        return chr(0x2400 + code)  # ␀ ... ␟, ␛ for ESC, ␍ for a lone CR
    return f"<U+{code:04X}>"


def visible(text: str) -> str:
    """``text`` as a terminal may print it: control and escape characters shown, never acted on."""
    return _CONTROL.sub(_picture, storable(text))


_JSON_UNSAFE = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def json_visible(text: str) -> str:
    """JSON text (``json.dumps(..., ensure_ascii=False)``) with the characters a terminal may act on and
    JSON leaves raw (DEL, the C1 controls, bidirectional overrides) written as ``\\uXXXX``: the same data,
    safe to print. JSON already escapes the C0 controls, ESC among them."""
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", storable(text))


def model_label(name: str) -> str:
    """A model's name as people say it: llama.cpp names its model by the file it loaded
    (`/home/me/models/SmolLM2-135M-Instruct-Q8_0.gguf`), and the file's name is enough."""
    base = re.split(r"[/\\]", name.rstrip("/\\"))[-1] or name
    return base[: -len(".gguf")] if base.lower().endswith(".gguf") and len(base) > 5 else base
