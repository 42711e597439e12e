"""What the agent's rooms share: the session, the model, the settings and the stores.

One mutable record, so that switching the model or the settings (`switch_model`)
is seen by the turn loop, the tool runner and the ladder driver at once. The
`Agent` facade exposes each field under its old name.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tailrent_tui.agent.events import SummaryProgress
from tailrent_tui.agent.tools.caps import ToolCaps
from tailrent_tui.core.policies import PolicySettings
from tailrent_tui.core.rungs.fold import FoldArchive
from tailrent_tui.core.rungs.spill import SpillStore
from tailrent_tui.core.session import Session
from tailrent_tui.core.summarize import Review, Summarizer, Verdict
from tailrent_tui.models.base import ChatModel
from tailrent_tui.models.summarizer import ModelSummarizer
from tailrent_tui.settings import Settings
from tailrent_tui.store.journal import Writer
from tailrent_tui.store.sessions import OpenedSession

if TYPE_CHECKING:
    from tailrent_tui.agent.fold_requests import PreparedFold
    from tailrent_tui.agent.kv_slots import SlotKeeper
    from tailrent_tui.agent.placement import PlacementKeeper


@dataclass
class AgentState:
    session: Session
    model: ChatModel
    settings: Settings
    #: the tools' output caps and the turn's bounds (rung 1)
    caps: ToolCaps
    workspace: Path
    spill_store: SpillStore
    archive: FoldArchive
    summarizer: Summarizer | ModelSummarizer
    memory: Any = None
    journal: Writer | None = None
    session_dir: Any = None
    #: the session as `open_session` gave it (journal, directory, lock): closed at exit; None for a sub-session
    opened: OpenedSession | None = None
    rent: Any = None
    is_sub: bool = False
    #: the bench fixes every policy setting; the app derives them from its settings
    policy_settings: PolicySettings | None = None
    #: told when a fold's summary is asked for and when it is in: folds run inside
    #: a turn and by hand, so this belongs to the agent, not to one turn's callbacks
    on_summary: Callable[[SummaryProgress], None] | None = None
    #: told when a fold's summary is written ahead (`prepare_fold`), and when it is used or dropped (None)
    on_prepared: Callable[[PreparedFold | None], None] | None = None
    #: shows a fold before it applies (the app's fold preview); unset: folds apply as planned
    on_review: Callable[[Review], Awaitable[Verdict]] | None = None
    #: saves and restores llama.cpp's KV slot (agent/kv_slots.py); None for a sub-session
    slots: SlotKeeper | None = None
    #: a resume past the cache TTL: the first request rewrites the prefix (build notes it)
    cold_resume: bool = False
    #: set by build_agent for a session that had requests before: the first start restores its slot and prices the resume
    resumed: bool = False
    resume_price: Any = None
    resume_lines: list[tuple[str, str]] = field(default_factory=list)
    #: what the first start found out about the server (its KV slots), to say once
    start_lines: list[tuple[str, str]] = field(default_factory=list)
    #: how long the model took to load before the first request (`preload`), when it was loaded
    preload_seconds: float | None = None
    #: where folds put their summary, and why (agent/placement.py); None for a sub-session
    placement: PlacementKeeper | None = None
    notice: str | None = None
