"""llama.cpp's slot endpoints: find out whether the server has slots, save one, restore one.

Synchronous (one ``httpx.Client``), so the same client works inside the app's loop
(through ``asyncio.to_thread``) and after it has ended (the save on quit). Every
failure is a ``SlotError`` with one line to show; ``unsupported`` marks the answers
that mean "this server has no slot actions" (HTTP 501: started without
``--slot-save-path``; 404: not llama.cpp), after which tailrent stops asking.

Measured on xllamacpp: with ``--slots`` off (the ``endpoint_slots`` flag), ``GET
/slots`` answers 501 but save and restore still work; without
``--slot-save-path`` both actions answer 501. So what decides is the first action,
not the listing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Protocol, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from .errors import first_problem
from .http import error_text
from .wire import LlamaServerProps, LlamaSlot, LlamaSlotRestored, LlamaSlotSaved

M = TypeVar("M", bound=BaseModel)

#: saving 8k tokens took 0.15 s and restoring 0.02 s here; a slow disk gets much longer
SLOT_TIMEOUT = httpx.Timeout(120.0, connect=3.0)


class SlotError(Exception):
    """A slot request that failed; ``str()`` is one line."""

    def __init__(self, message: str, *, status: int | None = None, unsupported: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.unsupported = unsupported


@dataclass(frozen=True)
class SlotsInfo:
    """What the server says about its slots."""

    total_slots: int | None
    model_path: str | None
    listed: bool
    """GET /slots answered (False: the listing is off, the actions may still work)"""


class SlotServer(Protocol):
    """What the slot keeper asks of a server's slots (`SlotClient` over HTTP; a test's fake without it)."""

    def probe(self) -> SlotsInfo: ...
    def held_tokens(self, slot: int) -> int | None: ...
    def save(self, slot: int, filename: str) -> LlamaSlotSaved: ...
    def restore(self, slot: int, filename: str) -> LlamaSlotRestored: ...
    def close(self) -> None: ...


class SlotClient:
    """The slot endpoints of one llama.cpp server (its root, beside ``/v1``): a `SlotServer`."""

    def __init__(self, root: str, *, headers: dict[str, str] | None = None, timeout: httpx.Timeout = SLOT_TIMEOUT) -> None:
        self.root = root.rstrip("/")
        self._client = httpx.Client(timeout=timeout, headers=headers or {})

    def close(self) -> None:
        self._client.close()

    def probe(self) -> SlotsInfo:
        """``/props`` (slots and model), else ``GET /slots``; SlotError(unsupported) when neither is llama.cpp's."""
        props: LlamaServerProps | None = None
        try:
            props = self._get("/props", LlamaServerProps)
        except SlotError as exc:
            if exc.status is None:
                raise
        listed = None
        try:
            listed = self._get_list("/slots")
        except SlotError as exc:
            if exc.status is None:
                raise
            if props is None or props.total_slots is None:
                raise SlotError(f"{self.root} offers no KV slots ({exc})", status=exc.status, unsupported=True) from None
        total = props.total_slots if props is not None and props.total_slots is not None else (len(listed) if listed else None)
        return SlotsInfo(total_slots=total, model_path=props.model_path if props else None, listed=listed is not None)

    def held_tokens(self, slot: int) -> int | None:
        """How many tokens slot `slot` holds now (0: none, a server started since); None when the
        listing does not say (``GET /slots`` off, or a server that reports no counts)."""
        try:
            listed = self._get_list("/slots")
        except SlotError as exc:
            if exc.status is None:
                raise
            return None
        for entry in listed:
            if entry.id == slot:
                if entry.n_prompt_tokens is None:
                    # llama.cpp lists the count once a request used the slot: a slot without one is empty
                    return 0 if entry.n_ctx is not None else None
                return entry.n_prompt_tokens
        return None

    def save(self, slot: int, filename: str) -> LlamaSlotSaved:
        return self._action(slot, "save", filename, LlamaSlotSaved)

    def restore(self, slot: int, filename: str) -> LlamaSlotRestored:
        return self._action(slot, "restore", filename, LlamaSlotRestored)

    # -- plumbing -------------------------------------------------------------------

    def _send(self, method: str, path: str, body: object = None) -> httpx.Response:
        try:
            response = self._client.request(method, self.root + path, json=body)
        except httpx.HTTPError as exc:
            raise SlotError(f"{self.root}{path.split('?')[0]}: {type(exc).__name__} ({exc})") from None
        if response.status_code >= 300:
            message = error_text(response.content) or f"HTTP {response.status_code}"
            unsupported = response.status_code in (404, 405, 501)
            raise SlotError(message, status=response.status_code, unsupported=unsupported)
        return response

    def _json(self, response: httpx.Response, path: str) -> object:
        try:
            return json.loads(response.content)
        except (ValueError, RecursionError):
            raise SlotError(f"{self.root}{path} answered with something that is not JSON", status=response.status_code) from None

    def _get(self, path: str, model: type[M]) -> M:
        data = self._json(self._send("GET", path), path)
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            raise SlotError(f"{self.root}{path} answered in an unexpected shape ({first_problem(exc)})") from None

    def _get_list(self, path: str) -> list[LlamaSlot]:
        data = self._json(self._send("GET", path), path)
        if not isinstance(data, list):
            raise SlotError(f"{self.root}{path} answered in an unexpected shape (not a list)", status=200)
        try:
            return [LlamaSlot.model_validate(item) for item in data]
        except ValidationError as exc:
            raise SlotError(f"{self.root}{path} answered in an unexpected shape ({first_problem(exc)})") from None

    def _action(self, slot: int, action: str, filename: str, model: type[M]) -> M:
        path = f"/slots/{slot}?action={action}"
        data = self._json(self._send("POST", path, {"filename": filename}), path)
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            raise SlotError(f"the {action} of slot {slot} answered in an unexpected shape ({first_problem(exc)})") from None
