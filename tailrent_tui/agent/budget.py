"""The budget the policy is handed: the window a request must fit by our count, the reply's room,
and the policy's settings for this session (`policy_context`).

Our tokenizer is not always the server's, and a chat template adds its own tokens: a context
that fits by our count may not by the server's. The budget takes the server's last count
against ours (`token_drift`) and what the server refused before (`shrink_window`) off the
window; the ladder driver plans against it, the turn checks a request against it
(`check_fits`), and a summary request is fitted to it.
"""

from __future__ import annotations

from typing import Any

from tailrent_tui.agent.placement import PlacementKeeper
from tailrent_tui.core.policies import Policy, PolicyContext, PolicySettings, get_policy
from tailrent_tui.core.ports import FoldArchive, SpillStore
from tailrent_tui.core.session import Session
from tailrent_tui.models.errors import ContextOverflow
from tailrent_tui.settings import Settings

#: after the server refuses a request as too large, the ladder budgets with this much less of the window
OVERFLOW_SHRINK = 0.85


class LadderBudget:
    """The policy, and the window and settings it plans with."""

    def __init__(
        self,
        *,
        session: Session,
        settings: Settings,
        spill_store: SpillStore,
        archive: FoldArchive,
        placement: PlacementKeeper | None = None,
        policy_settings: PolicySettings | None = None,
    ) -> None:
        """`policy_settings`: the bench fixes every policy setting (the app derives them from `settings`);
        `placement`: where folds put their summary, once the server was asked."""
        self.session = session
        self.settings = settings
        self.spill_store = spill_store
        self.archive = archive
        self.placement = placement
        self.policy_settings = policy_settings
        self.window_scale = 1.0
        self._policy: Policy | None = None

    @property
    def policy(self) -> Policy:
        if self._policy is None or self._policy.name != self.settings.policy:
            self._policy = get_policy(self.settings.policy)
        return self._policy

    def token_drift(self) -> float:
        """Tokens the server counts for each one we predict, from its last report (1 to 1.5)."""
        for u in reversed(self.session.usage):
            if u.prompt_tokens and u.context_tokens and u.sub_session is None:
                return min(1.5, max(1.0, u.prompt_tokens / u.context_tokens))
        return 1.0

    def shrink_window(self) -> None:
        """The server counted more than we did and refused a request: budget with a smaller window from now on."""
        self.window_scale *= OVERFLOW_SHRINK

    def budget_window(self) -> int:
        """The window a request must fit by our count: the server's, less the drift of our
        count from its, less what the server refused before."""
        return max(256, int(self.session.window * self.window_scale / self.token_drift()))

    def reply_cap(self) -> int:
        """Tokens a reply may take: the setting, else an eighth of the window."""
        return self.settings.max_reply_tokens or max(256, self.session.window // 8)

    def room(self) -> int:
        """Tokens the context can still take before the fold trigger, the reply's room kept."""
        trigger = int(self.budget_window() * self.settings.fold.trigger)
        return max(0, trigger - self.reply_cap() - self.session.context_tokens)

    def policy_context(self, *, review: bool = False) -> PolicyContext:
        """The policy's inputs for this session; `review`: someone shows folds before they apply (the app)."""
        window = self.session.window
        keeper = self.placement
        placed: dict[str, Any] = (
            {"fold_placement": keeper.state.placement, "fold_turn_ends": keeper.state.turn_ends}
            if keeper is not None and keeper.detected
            else {}
        )
        if self.policy_settings is not None:
            settings = self.policy_settings.model_copy(update={"window": window, **placed})
        else:
            settings = PolicySettings(
                window=window,
                fold_trigger=self.settings.fold.trigger,
                fold_target=self.settings.fold.target,
                spill_threshold=self.settings.tools.spill_threshold,
                guard=self.settings.fold.guard,
                # room for the reply, and for what the server counts beyond our count
                reply_reserve=self.reply_cap() + window - self.budget_window(),
                fold_preview=self.settings.fold.preview if review else "never",
                **placed,
            )
        return PolicyContext(spill_store=self.spill_store, archive=self.archive, settings=settings)

    def check_fits(self) -> None:
        """A request over the window is never sent: the server would refuse it, or cut it silently."""
        s = self.session
        reserve = self.reply_cap()
        window = self.budget_window() if self.policy_settings is None else s.window
        if s.context_tokens + reserve <= window:
            return
        raise ContextOverflow(
            f"not sent: the context ({s.context_tokens:,} tokens) and the reply's {reserve:,} do not fit "
            f"the {window:,}-token window"
            + (f" (the server's {s.window:,}, less our counting drift)" if window < s.window else ""),
            "unpin what no longer matters (u), spill or fold by hand (s, f), or lower max_reply_tokens",
        )
