"""Slash-command arguments under hostile input (issue 27, item 7): `/unfold ²`, `/inspect ²` and a
5,000-digit number are a one-line notice, never a ValueError that takes the app down."""

from __future__ import annotations

import pytest

from tailrent_tui.ui.slash import fold_number
from tailrent_tui.ui.widgets.input import PromptInput
from tests.support.ui_helpers import make_agent, make_app, wait_until


@pytest.fixture(autouse=True)
def config_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(tmp_path / "config"))


ARGS = ["²", "٣", "#²", "9" * 5000, "-1", "1e3", "0x10", " ", "3.0"]


@pytest.mark.fault("slash-command arguments")
@pytest.mark.parametrize("command", ["/unfold", "/inspect"])
@pytest.mark.parametrize(
    "arg",
    ARGS,
    ids=["superscript", "arabic-indic", "hash-superscript", "5000-digits", "negative", "exponent", "hex", "blank", "decimal"],
)
async def test_a_hostile_fold_number_is_a_notice_not_a_crash(tmp_path, command, arg):
    agent = make_agent(tmp_path)
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        box = app.query_one(PromptInput)
        box.focus()
        box.value = f"{command} {arg}"
        await pilot.press("enter")
        await pilot.pause()
        await wait_until(pilot, lambda: bool(app._notifications), what="a notice")
        assert app.is_running
        messages = [str(n.message) for n in app._notifications]
        assert any("fold number" in m or "no folds" in m for m in messages), messages
        assert all("\n" not in m and len(m) < 300 for m in messages)


def test_fold_numbers_take_ascii_digits_only():
    assert [fold_number(t) for t in ("3", "#12", " 7 ")] == [3, 12, 7]
    assert all(fold_number(t) is None for t in ARGS)
