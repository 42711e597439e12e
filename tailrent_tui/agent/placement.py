"""Where a fold puts its summary, chosen for the engine (the `fold_placement` setting).

In place (the summary where the span was) keeps the cache before the span;
everything after it moved, and an engine re-reads it. After the kept messages
(the span leaves, the summary comes before the next message) lets llama.cpp
keep the kept messages' KV too: asked with ``n_cache_reuse``, it finds them
further on in its cache and shifts them into place, so the request after the
fold reads the summary and the new message only. That needs KV that can be
shifted: not a sliding-window, chunked-attention or recurrent model (Gemma 2
and 3, gpt-oss, Llama 4, Mamba, RWKV... llama.cpp says "cache_reuse is not
supported by this context"), where the fold stays in place.

`auto` asks the server: llama.cpp answers ``/props`` with its model's path,
whose GGUF header names the architecture when the file is readable here (the
embedded engine, a server on this machine), else the model's name and chat
template are read for it. The first request after a fold placed "after" then
confirms it from what the server cached (``timings.cache_n``): a server that
ignored ``n_cache_reuse`` (or refused it) sends the folds back in place,
said once.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Literal

from tailrent_tui.core.messages import Folded, UsageRecorded
from tailrent_tui.core.rent import RentModel
from tailrent_tui.models.base import ChatModel
from tailrent_tui.models.embedded import CACHE_REUSE_TOKENS, EmbeddedModel
from tailrent_tui.models.errors import ModelError
from tailrent_tui.models.mock import MockModel
from tailrent_tui.models.openai import OpenAIModel

#: llama.cpp's defaults for a slot's context checkpoints (--ctx-checkpoints, --checkpoint-min-step)
LLAMA_CTX_CHECKPOINTS = 32
LLAMA_CHECKPOINT_MIN_STEP = 8192

Placement = Literal["in_place", "after"]
PlacementSetting = Literal["auto", "in_place", "after"]

#: llama.cpp architectures (GGUF ``general.architecture``) whose KV cannot be shifted:
#: sliding-window or chunked attention, recurrent or hybrid state
NO_SHIFT_ARCHITECTURES = frozenset(
    {
        "gemma2",
        "gemma3",
        "gemma3n",
        "gpt-oss",
        "llama4",
        "cohere2",
        "mamba",
        "mamba2",
        "rwkv6",
        "rwkv6qwen2",
        "rwkv7",
        "arwkv7",
        "jamba",
        "falcon-h1",
        "granitehybrid",
        "lfm2",
        "plamo2",
        "qwen3next",
        "nemotron_h",
        "exaone4",
        "smallthinker",
        "minimax-m2",
    }
)
#: the same, as they show in model file names and chat templates, when the header cannot be read
_NO_SHIFT_NAMES = re.compile(
    r"gemma-?[23]|gpt-oss|llama-?4|command-?[ar]|mamba|rwkv|jamba|falcon-h1|granite-?4|lfm2|qwen3-?next|nemotron-h|<start_of_turn>",
    re.IGNORECASE,
)


def gguf_architecture(path: Path) -> str | None:
    """``general.architecture`` from a GGUF file's header, None when it cannot be read.

    The key comes first in files llama.cpp's converter writes; the header's
    other keys before it are skipped by their types.
    """
    return gguf_header(path)[0]


#: GGUF integer value types and their struct formats
_GGUF_INTS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 10: "<Q", 11: "<q"}


def gguf_header(path: Path) -> tuple[str | None, int | None]:
    """(``general.architecture``, ``<arch>.attention.sliding_window``) from a GGUF file's header; None for
    what cannot be read. The window is how far back llama.cpp can roll a sliding-window model's KV without a
    context checkpoint."""
    arch: str | None = None
    try:
        with path.open("rb") as f:
            if f.read(4) != b"GGUF":
                return None, None
            version, _tensors, count = struct.unpack("<IQQ", f.read(20))
            if version < 2:
                return None, None
            for _ in range(min(count, 256)):
                key = _gguf_string(f)
                (kind,) = struct.unpack("<I", f.read(4))
                if key == "general.architecture" and kind == 8:
                    arch = _gguf_string(f)
                    if arch not in NO_SHIFT_ARCHITECTURES:
                        return arch, None
                elif arch is not None and key == f"{arch}.attention.sliding_window" and kind in _GGUF_INTS:
                    fmt = _GGUF_INTS[kind]
                    (window,) = struct.unpack(fmt, f.read(struct.calcsize(fmt)))
                    return arch, int(window)
                else:
                    _gguf_skip(f, kind)
    except (OSError, struct.error, UnicodeDecodeError, ValueError):
        return arch, None
    return arch, None


_SCALAR_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def _gguf_string(f: BinaryIO) -> str:
    (n,) = struct.unpack("<Q", f.read(8))
    if n > 1 << 20:
        raise ValueError("a GGUF string too long for a header key")
    return f.read(n).decode("utf-8")


def _gguf_skip(f: BinaryIO, kind: int) -> None:
    if kind in _SCALAR_SIZES:
        f.seek(_SCALAR_SIZES[kind], 1)
    elif kind == 8:
        _gguf_string(f)
    elif kind == 9:
        inner, n = struct.unpack("<IQ", f.read(12))
        if inner in _SCALAR_SIZES:
            f.seek(_SCALAR_SIZES[inner] * n, 1)
        else:
            for _ in range(n):
                _gguf_skip(f, inner)
    else:
        raise ValueError(f"unknown GGUF value type {kind}")


@dataclass
class PlacementState:
    """The placement in force, why, and what the server said of it."""

    setting: PlacementSetting = "auto"
    placement: Placement = "in_place"
    why: str = "not asked yet"
    #: the first request after a fold placed "after" cached what was predicted
    confirmed: bool = False
    #: a fold placed "after" whose next request is awaited: (fold number, tokens an in-place fold would keep)
    pending: tuple[int, int] | None = None
    #: the why in a few words, for the Tail panel
    short: str = ""
    #: the engine keeps context checkpoints at user-message starts (sliding-window or recurrent attention on
    #: llama.cpp) instead of shifting KV: fold spans end there (`PolicySettings.fold_turn_ends`)
    turn_ends: bool = False
    #: the sliding window read from the model's GGUF header (0: recurrent, or not read): the rent model
    #: predicts llama.cpp's checkpoints with it (`PriceSheet.checkpoints`, `swa_tokens`)
    swa_tokens: int | None = None

    def panel_lines(self) -> tuple[str, str]:
        """(where, why) for the Tail panel, each short enough for its width."""
        where = "after the kept messages" if self.placement == "after" else "in place"
        return f"folds: {where}", ("confirmed: " if self.confirmed else "") + (self.short or self.why)


async def detect(model: Any, setting: PlacementSetting) -> PlacementState:
    """The placement for this model under `setting`; sets ``n_cache_reuse`` on the model when "after"."""

    def placed(placement: Placement, short: str, why: str) -> PlacementState:
        _reuse(model, CACHE_REUSE_TOKENS if placement == "after" else None)
        return PlacementState(setting, placement, why, short=short)

    if setting == "in_place":
        return placed("in_place", "set in the settings", "[fold] placement says in place")
    if isinstance(model, MockModel):
        if setting == "after":
            return placed("after", "set in the settings", "[fold] placement says after (the mock shifts its cache)")
        return placed("in_place", "mock: a plain prefix cache", "the mock model caches a plain prefix")
    if not isinstance(model, OpenAIModel):
        if setting == "after":
            return placed("after", "set in the settings", "[fold] placement says after (no KV shift here)")
        kind = model.kind
        return placed("in_place", f"{kind}: no KV shift", f"{kind} re-reads everything after a change: no KV to shift")
    if setting == "after":
        why = f"[fold] placement says after (n_cache_reuse {CACHE_REUSE_TOKENS})"
        return placed("after", "set in the settings", why)
    arch, source, window = await _architecture(model)
    if source is None:
        return placed("in_place", "not llama.cpp", "the server is not llama.cpp (no /props): its cache cannot shift")
    if arch is not None and (arch in NO_SHIFT_ARCHITECTURES or (source != "GGUF" and _NO_SHIFT_NAMES.search(arch))):
        shown = arch if source == "GGUF" else "its model"
        state = placed(
            "in_place",
            f"{shown}: no KV shift" if source == "GGUF" else "SWA model: no KV shift",
            f"llama.cpp cannot shift the KV of {shown} (sliding-window or recurrent attention); it keeps context "
            "checkpoints at user-message starts, so fold spans end there",
        )
        state.turn_ends = True
        state.swa_tokens = window or 0
        return state
    seen = f"{arch}, from its GGUF" if source == "GGUF" else "architecture guessed from its name"
    return placed(
        "after",
        "llama.cpp shifts KV",
        f"llama.cpp ({seen}) shifts the kept KV: n_cache_reuse {CACHE_REUSE_TOKENS}; checked at the first fold",
    )


def _reuse(model: Any, tokens: int | None) -> None:
    if isinstance(model, OpenAIModel | MockModel):
        model.cache_reuse = tokens


async def _architecture(model: OpenAIModel) -> tuple[str | None, str | None, int | None]:
    """(the architecture or what stands for it, where it was read: "GGUF", "name", the sliding window when the
    GGUF header gives one); (None, None, None) when the server is not llama.cpp."""
    if isinstance(model, EmbeddedModel) and model.choice.path is not None:
        arch, window = await asyncio.to_thread(gguf_header, model.choice.path)
        if arch is not None:
            return arch, "GGUF", window
    try:
        props = await model.get_json("/props", base=model.server_root)
    except ModelError:
        return None, None, None
    if not isinstance(props, dict):
        return None, None, None
    path = str(props.get("model_path") or "")
    if path:
        arch, window = await asyncio.to_thread(gguf_header, Path(path))
        if arch is not None:
            return arch, "GGUF", window
    template = str(props.get("chat_template") or "")
    return " ".join([path, model.name or "", template[:2000]]), "name", None


class PlacementKeeper:
    """Holds the placement for the agent; confirms it from the request after a fold."""

    def __init__(self, setting: PlacementSetting, model: Callable[[], ChatModel], rent: RentModel | None) -> None:
        """`setting`: [fold] placement; `model`: the current model (a /model switch changes it)."""
        self.setting = setting
        self._model = model
        self.rent = rent
        self.state = PlacementState(setting=setting)
        #: asked of the server (at the start, and again after a model switch)
        self.detected = False
        #: a prepared fold sent the context it leaves ahead: the next turn must find its own prompt in the
        #: engine's prompt cache (`observe` checks it)
        self.expect_prompt_cache = False
        #: the server showed it keeps no prompt cache
        self.no_prompt_cache = False

    def model_changed(self) -> None:
        """A /model switch: the new server is asked at its start; nothing the old one showed holds."""
        self.state = PlacementState(setting=self.setting)
        self.detected = False
        self.expect_prompt_cache = False
        self.no_prompt_cache = False

    async def detect(self) -> None:
        self.state = await detect(self._model(), self.setting)
        self.detected = True
        self._rent_rules()

    def _rent_rules(self) -> None:
        """The rent model predicts what the engine does: shifted KV reused while n_cache_reuse is sent."""
        rent = self.rent
        if rent is None or not rent.sheet.local:
            return
        reuse = getattr(self._model(), "cache_reuse", None)
        update: dict[str, Any] = {"reuses_shifted_kv": reuse is not None}
        window = self.state.swa_tokens
        if reuse is None and window is not None:
            # a model llama.cpp cannot shift (sliding-window or recurrent): it restarts a changed prompt from a
            # context checkpoint (--ctx-checkpoints 32, --checkpoint-min-step 8192: its defaults)
            update.update(checkpoints=LLAMA_CTX_CHECKPOINTS, checkpoint_min_step=LLAMA_CHECKPOINT_MIN_STEP, swa_tokens=window)
        elif rent.sheet.checkpoints:
            update["checkpoints"] = 0
        if reuse is not None:
            update["reuse_min_tokens"] = reuse
            # llama.cpp keeps recent prompts in host RAM by default (--cache-ram); checked by the first
            # turn after a prepared fold's context was sent ahead (`observe`)
            model = self._model()
            update["prompt_cache"] = model.prompt_cache if isinstance(model, MockModel) else not self.no_prompt_cache
        with contextlib.suppress(ValueError):
            rent.sheet = rent.sheet.model_copy(update=update)

    def folded(self, event: Folded, prefix_tokens: int) -> None:
        """A fold was applied; placed "after", its next request says whether the engine shifted."""
        if self.state.placement == "after" and not self.state.confirmed:
            self.state.pending = (event.fold.fold_no, prefix_tokens)

    def observe(self, usage: UsageRecorded) -> str | None:
        """A turn's request was recorded: judge a pending fold by it. The fallback's line, once."""
        model = self._model()
        refused = getattr(model, "cache_reuse_refused", None)
        if refused and self.state.placement == "after":
            return self._fall_back(f"the server refused n_cache_reuse ({refused})", "n_cache_reuse refused")
        if self.expect_prompt_cache and usage.purpose == "turn" and usage.cached_tokens is not None:
            self.expect_prompt_cache = False
            # (without it the kept messages are still shifted into place: the span is what goes missing)
            if usage.cached_tokens < 0.9 * usage.predicted_cached:
                self.no_prompt_cache = True
                self._rent_rules()
                return (
                    f"the turn after a prepared fold's context was sent ahead found {usage.cached_tokens:,} tokens cached, "
                    f"not the {usage.predicted_cached:,} predicted: the server keeps no prompt cache (--cache-ram), "
                    "so prepared folds send their ledger ahead only where it fits the window"
                )
        if self.state.pending is None or usage.purpose != "turn" or usage.cached_tokens is None:
            return None
        fold_no, prefix = self.state.pending
        self.state.pending = None
        predicted = usage.predicted_cached
        if predicted <= prefix:
            return None  # nothing shifted was expected (the kept part was empty)
        if usage.cached_tokens >= (prefix + predicted) / 2:
            self.state.confirmed = True
            self.state.short = f"{usage.cached_tokens:,} cached"
            self.state.why = (
                f"the request after fold #{fold_no} found {usage.cached_tokens:,} tokens cached "
                f"({predicted:,} predicted): llama.cpp shifted the kept messages' KV"
            )
            return None
        return self._fall_back(
            f"the request after fold #{fold_no} found {usage.cached_tokens:,} tokens cached, not the {predicted:,} "
            "predicted: the server did not shift the kept KV (n_cache_reuse ignored)",
            "n_cache_reuse ignored",
        )

    def _fall_back(self, why: str, short: str) -> str:
        self.state.placement = "in_place"
        # a llama.cpp that does not shift this model's KV (sliding-window or recurrent attention, where it says
        # "cache_reuse is not supported by this context") keeps checkpoints at user-message starts instead
        self.state.turn_ends = True
        self.state.confirmed = False
        self.state.pending = None
        self.state.why = why
        self.state.short = short
        _reuse(self._model(), None)
        self._rent_rules()
        return f"{why}: folds go in place from now on"
