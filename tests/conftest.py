"""Fixtures shared by the agent tests: agents built as the app builds them, in tmp dirs."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# The suite starts a few hundred real `tailrent` processes. With
# PYTHONDONTWRITEBYTECODE set (some sandboxes and CI images set it) each one
# compiled the whole package from source again, a third of a second apiece:
# the package is compiled once here and the children read the cache.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

from tailrent_tui.agent.build import build_agent  # noqa: E402 (after the bytecode setting)
from tailrent_tui.agent.tools.caps import ToolCaps  # noqa: E402
from tailrent_tui.models.mock import MockModel  # noqa: E402
from tailrent_tui.settings import Settings  # noqa: E402
from tests.support.engine import llama_server  # noqa: E402, F401  (the session fixture: one server per worker)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--full-counts",
        action="store_true",
        help="run the stress tests (SIGKILL loops) at their full repetition counts; benchmarks/fault_bench.py passes it",
    )


@pytest.fixture
def full_counts(request: pytest.FixtureRequest) -> bool:
    """True when the run asked for the full repetition counts (the fault bench), else the suite's shorter ones."""
    return bool(request.config.getoption("--full-counts"))


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An empty workspace; a test module may override it with one that holds files."""
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


@pytest.fixture
async def make_agent(tmp_path: Path, workspace: Path, monkeypatch, request):
    """Open agents like the app does (`open_agent`'s opening half), in a tmp data dir; closed by
    `Agent.aclose`, the close `open_agent` runs, at the end (lock released)."""
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(tmp_path / "config"))
    agents = []

    def make(script=None, **overrides):
        values = {"model": "mock", "data_dir": tmp_path / "data", "workspace": workspace, "fsync": False}
        values.update(overrides)
        caps = values.pop("caps", None)
        caps = ToolCaps(**caps) if isinstance(caps, dict) else caps
        agent = build_agent(Settings(**values), async_writer=False, new=True, caps=caps)
        if script is not None:
            agent.model = MockModel(script)
        if request.node.get_closest_marker("no_ledger"):
            agent.session.detect_statements = False
        agents.append(agent)
        return agent

    yield make
    for agent in agents:
        await agent.aclose()


# tryfirst: xdist's worker turns the `xdist_group` mark into the node id's `@engine` suffix, which
# is what `--dist loadgroup` groups by, in its own pytest_collection_modifyitems; called after it, the
# marks added here came too late and the engine tests ran on both workers at once (two engines, each
# with its own model, fighting for the two cores).
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With pytest-xdist's `--dist loadgroup`, the engine tests share one worker: one
    llama.cpp engine at a time on the machine, its threads not fighting a second one. They
    are collected first, so that their worker starts on them while the others share the rest
    (last, they made a tail of minutes with one worker busy). The other `slow` tests come next
    (long ones first, as a scheduler should hand them out): collected in file order, the
    bench-grade ones land wherever their file falls, and one handed out last leaves a tail of
    one busy worker. Only the order changes; every test runs."""
    for item in items:
        if item.get_closest_marker("engine") is not None:
            item.add_marker(pytest.mark.xdist_group("engine"))
    items.sort(key=lambda item: (item.get_closest_marker("engine") is None, item.get_closest_marker("slow") is None))
