"""The rent, seen from the agent: each request's prediction, and its usage recorded against it.

Every request — a turn's, a fold's summary, a keep-warm ping — is journaled
as a `UsageRecorded` event with what the rent model predicted beside what the
server reported, so the Tail panel and `tailrent sessions` can compare them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from tailrent_tui.agent.events import RequestStarted
from tailrent_tui.core.keepwarm import KeepWarm
from tailrent_tui.core.messages import UsageRecorded
from tailrent_tui.core.rent import RentModel, context_items, prompt_rate
from tailrent_tui.core.session import Session
from tailrent_tui.models.base import Usage


class UsageMeter:
    """Predicts each request's rent and records its usage; holds the keep-warm rule and the last request sent."""

    def __init__(self, session: Session, rent: RentModel | None, model_name: Callable[[], str]) -> None:
        """`model_name`: the current model's name (a /model switch changes it), for a usage without one."""
        self.session = session
        self.rent = rent
        self._model_name = model_name
        self.request_no = len(session.usage)
        #: the keep-warm rule on this rent model; the app's timer asks it when to `ping`
        self.keep_warm: KeepWarm | None = KeepWarm(rent) if rent is not None else None
        #: the last conversation request as sent (messages, tools): a ping re-sends exactly this prefix
        self.last_sent: tuple[list[dict[str, Any]], list[dict[str, Any]] | None] | None = None
        #: the pause (the time of the request it follows) whose ping failed: no more pings in it
        self.failed_pause: float | None = None

    def predict(self) -> Any:
        rent, session = self.rent, self.session
        if rent is None:
            return None
        return rent.request(context_items(session), head_tokens=session.head_tokens, at=session.clock())

    def request_started(self, predicted: Any) -> RequestStarted:
        to_read = predicted.tail_tokens if predicted is not None else None
        rent, session = self.rent, self.session
        rate = prompt_rate(session.usage, rent.sheet) if rent is not None else None
        # the sheet's guess of a speed is no measure of this machine: no estimate from it
        measured = rate is not None and rate.measured and to_read is not None
        return RequestStarted(
            context_tokens=session.context_tokens,
            to_read=to_read,
            read_seconds=rate.seconds(to_read) if measured and rate is not None and to_read is not None else None,
        )

    def record(
        self,
        predicted: Any,
        usage: Usage | None,
        purpose: Literal["turn", "summary", "ping"] = "turn",
        at: float | None = None,
        *,
        cancelled: bool = False,
    ) -> None:
        session = self.session
        self.request_no += 1
        ev = UsageRecorded(
            request_no=self.request_no,
            context_tokens=getattr(predicted, "context_tokens", None) or session.context_tokens,
            predicted_cached=getattr(predicted, "cached_tokens", 0) or 0,
            predicted_evaluated=getattr(predicted, "tail_tokens", 0) or 0,
            predicted_usd=getattr(predicted, "usd", 0.0) or 0.0,
            prompt_tokens=usage.prompt_tokens if usage else None,
            cached_tokens=usage.cached_tokens if usage else None,
            evaluated_tokens=usage.evaluated_tokens if usage else None,
            output_tokens=usage.output_tokens if usage else None,
            prompt_ms=usage.prompt_ms if usage else None,
            generation_ms=usage.generation_ms if usage else None,
            done_reason=usage.done_reason if usage else None,
            model=(usage.model if usage and usage.model else self._model_name()),
            purpose=purpose,
            cancelled=cancelled,
            at=session.clock() if at is None else at,
        )
        session.emit(ev)
