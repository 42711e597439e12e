"""Settings papercuts: `config --toml` round-trips, misspelled keys and variables get a suggestion,
keymap clashes and unknown ids are said (in `config` and the app)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from tailrent_tui.cli import cli
from tailrent_tui.settings import Settings, SettingsError, load_settings, setting_help
from tailrent_tui.ui.keymap import keymap_warnings


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"TAILRENT_CONFIG_DIR": str(tmp_path / "cfg"), "TAILRENT_HOME": str(tmp_path / "data"), **extra}


def test_config_toml_is_valid_commented_toml_that_reads_back_to_the_same_settings(tmp_path: Path) -> None:
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    (cfg / "config.toml").write_text(
        'window = 16384\npolicy = "naive-pin"\n'
        'system_prompt = "Say \\"hi\\"\\nthen work. café"\n[keymap]\nfold = "ctrl+f"\n'
        '[fold]\ntrigger = 0.8\ndecision_patterns = ["^DECISION:", "we chose \\\\w+"]\n[tools]\nshell_timeout = 7\n'
        '[slots]\nsave = "off"\n[mcp.servers.fx]\ncommand = "true"\n'
    )
    env = _env(tmp_path)
    result = CliRunner().invoke(cli, ["config", "--toml"], env=env)
    assert result.exit_code == 0, result.output
    text = result.stdout
    data = tomllib.loads(text)  # valid TOML
    assert "model" not in data and "# model =" in text  # unset: a comment
    assert "# Context window in tokens" in text
    out = tmp_path / "again.toml"
    out.write_text(text)
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        first = load_settings(path=cfg / "config.toml").settings
        again = load_settings(path=out).settings
    assert again == first
    assert again.tools.shell_timeout == 7 and again.keymap == {"fold": "ctrl+f"} and again.fold.trigger == 0.8
    assert again.fold.decision_patterns == ["^DECISION:", "we chose \\w+"] and again.slots.save == "off"
    assert again.mcp.servers["fx"].command == "true"
    assert [line for line in text.splitlines() if line.startswith("[")] == ["[keymap]", "[fold]", "[tools]", "[slots]", "[mcp]"]


def test_a_misspelled_key_or_variable_gets_a_suggestion(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text("windw = 4096\n")
    with pytest.raises(SettingsError, match="unknown key 'windw'; did you mean 'window'"):
        load_settings(path=cfg)
    result = CliRunner().invoke(cli, ["config"], env=_env(tmp_path, TAILRENT_WINDW="4096"))
    assert result.exit_code == 0
    assert "$TAILRENT_WINDW is not a setting and is ignored; did you mean TAILRENT_WINDOW?" in result.stderr


def test_keymap_clashes_and_unknown_ids_are_said() -> None:
    warnings = keymap_warnings({"pin": "ctrl+p", "pinn": "x", "sidebar": "ctrl+n"})
    assert 'keymap: pin = "ctrl+p" takes ctrl+p from the command palette' in warnings
    assert "keymap: unknown binding id 'pinn'; did you mean 'pin'?" in warnings
    assert any(w.startswith('keymap: sidebar = "ctrl+n" takes ctrl+n from dismiss_notice') for w in warnings)
    assert keymap_warnings({"fold": "ctrl+f"}) == []


def test_the_settings_help_points_to_nothing_missing() -> None:
    repo = Path(__file__).resolve().parents[2]
    for name, text in setting_help().items():
        for doc in ("DESIGN.md",):
            assert doc not in text or (repo / doc).exists(), f"{name}'s help points to {doc}, not in the repository"


async def test_the_app_says_keymap_warnings(tmp_path: Path) -> None:
    from tests.support.ui_helpers import make_agent, make_app

    agent = make_agent(tmp_path, settings=Settings(tools={"spill_threshold": 200}, tokenizer="chars4", keymap={"pin": "ctrl+p"}))
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        assert any("takes ctrl+p from the command palette" in n.message for n in app._notifications)


def test_a_bad_config_toml_reports_every_error_at_once(tmp_path, monkeypatch):
    from tailrent_tui.cli import cli

    cfg = tmp_path / "config"
    cfg.mkdir()
    (cfg / "config.toml").write_text(
        'window = "big"\nbogus_key = 1\n[fold]\ntrigger = 7\n[tools]\nspill_threshold = -1\n', encoding="utf-8"
    )
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(cfg))
    out = CliRunner().invoke(cli, ["config"])
    assert out.exit_code != 0 and "Traceback" not in out.output
    for key in ("unknown key 'bogus_key'", "window:", "fold.trigger:", "tools.spill_threshold:"):
        assert key in out.output, out.output
