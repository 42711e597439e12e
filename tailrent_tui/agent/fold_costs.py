"""What a fold costs the next request, from the rent model: applying one (the fold preview says it)
and undoing one (the inspector and `/unfold` say it), in tokens read again and their seconds at the
measured rate."""

from __future__ import annotations

from tailrent_tui.agent.stores import SessionStores
from tailrent_tui.core.messages import FoldRecord
from tailrent_tui.core.rent import Item, RentModel, context_item, prompt_rate
from tailrent_tui.core.session import Session, SessionError


class FoldCosts:
    """What a fold, applied or undone, makes the next request read again."""

    def __init__(self, *, session: Session, rent: RentModel | None, stores: SessionStores) -> None:
        """`stores`: where an undone fold's originals are read from."""
        self.session = session
        self.rent = rent
        self.stores = stores

    def reread_after(self, record: FoldRecord) -> tuple[int, float | None]:
        """What applying this fold costs the next request: the tokens it reads again (the rent
        model's prediction of the folded context: in place, what follows the summary; after the
        kept messages on an engine that shifts KV, the summary), and their seconds at the
        measured rate."""
        session = self.session
        span = set(record.span_ids)
        rent = self.rent
        if rent is None or rent.last_at is None:
            # nothing cached yet: what the fold adds is the tokens from the summary's place on
            first = next((i for i, m in enumerate(session.messages) if m.id in span), len(session.messages))
            tokens = session.sent_tokens(record.summary) + sum(
                session.sent_tokens(m) for m in session.messages[first:] if m.id not in span and not m.cut_off
            )
            if record.position == 0:
                tokens = record.context_after - session.head_tokens
            rate = prompt_rate(session.usage, rent.sheet) if rent is not None else None
            return tokens, (rate.seconds(tokens) if rate is not None and rate.measured else None)
        kept = [context_item(session, m) for m in session.messages if m.id not in span and not m.cut_off]
        kept.insert(min(record.position, len(kept)), context_item(session, record.summary))
        return self._reread(kept)

    def unfold_cost(self, fold_no: int) -> tuple[int, float | None, bool]:
        """What undoing fold `fold_no` costs the next request: (tokens read again, their seconds at
        the measured rate, whether the engine's prompt cache still holds the prompt before the
        fold, so that they are few). Raises SessionError/ArchiveError as `unfold` would."""
        session = self.session
        record = next((f for f in session.folds if f.fold_no == fold_no), None)
        if record is None:
            raise SessionError(f"no fold #{fold_no}")
        originals = self.stores.fold_originals(fold_no)
        items: list[Item] = []
        for m in session.messages:
            if m.cut_off:
                continue
            if m.id == record.summary.id:
                items += [context_item(session, o) for o in originals if not o.cut_off]
            else:
                items.append(context_item(session, m))
        tokens, seconds = self._reread(items)
        rent = self.rent
        kept = rent is not None and rent.prompt_cache_gain(items, session.head_tokens, session.clock()) > 0
        return tokens, seconds, kept

    def _reread(self, items: list[Item]) -> tuple[int, float | None]:
        session = self.session
        rent = self.rent
        if rent is None:
            return session.head_tokens + sum(t for _, t in items), None
        context, cached, _ = rent.predict(items, session.head_tokens, session.clock())
        tokens = context - cached
        rate = prompt_rate(session.usage, rent.sheet)
        return tokens, (rate.seconds(tokens) if rate is not None and rate.measured else None)
