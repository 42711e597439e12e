"""Hostile cases for the files settings.py finds and writes beside config.toml (issue 13): the
user's price sheets (one lookup for `bench`, the agent and every command) and `state.json`
(a pid-named temp file, what killed writers left, two writers, a kill mid-save). Marked
`fault(...)` for benchmarks/fault_bench.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from tailrent_tui.cli import cli


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


# ----------------------------------------------------------- price files

_MY_SHEET = """
[my-sheet]
description = "mine"
input_per_mtok = 1.0
cache_write_multiplier = 1.0
cache_read_multiplier = 0.1
output_per_mtok = 2.0
min_cacheable = 0
ttl_seconds = 300
"""


def _bench(tmp_path: Path, monkeypatch, *, config_dir: str | None, xdg_sheet: bool, cfg_sheet: str | None):
    cfg, xdg = tmp_path / "cfg", tmp_path / "xdg"
    cfg.mkdir(exist_ok=True)
    (xdg / "tailrent").mkdir(parents=True, exist_ok=True)
    if xdg_sheet:
        (xdg / "tailrent" / "prices.toml").write_text(_MY_SHEET)
    if cfg_sheet is not None:
        (cfg / "prices.toml").write_text(cfg_sheet)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(xdg))
    monkeypatch.setenv("TAILRENT_HOME", str(tmp_path / "home"))
    if config_dir is None:
        monkeypatch.delenv("TAILRENT_CONFIG_DIR", raising=False)
    else:
        monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(cfg) if config_dir == "cfg" else config_dir)
    return CliRunner().invoke(
        cli,
        ["bench", "--trace", "article", "--policy", "ladder", "--tokenizer", "chars4", "--price", "my-sheet", "--json"],
    )


@pytest.mark.fault("price files")
@pytest.mark.parametrize(
    "case",
    [
        "sheet in TAILRENT_CONFIG_DIR",
        "sheet only in the platform dir, TAILRENT_CONFIG_DIR set",
        "garbage prices.toml in TAILRENT_CONFIG_DIR",
        "sheet in the platform dir, TAILRENT_CONFIG_DIR empty",
    ],
)
def test_bench_reads_the_price_sheets_where_every_command_does(tmp_path: Path, monkeypatch, case: str) -> None:
    if sys.platform == "darwin":
        pytest.skip("the platform config dir is not XDG_CONFIG_HOME on macOS")
    if case == "sheet in TAILRENT_CONFIG_DIR":
        result = _bench(tmp_path, monkeypatch, config_dir="cfg", xdg_sheet=False, cfg_sheet=_MY_SHEET)
        assert result.exit_code == 0, result.output
        assert json.loads(result.output)["extras"][0]["price_sheet"] == "my-sheet"
    elif case == "sheet only in the platform dir, TAILRENT_CONFIG_DIR set":
        result = _bench(tmp_path, monkeypatch, config_dir="cfg", xdg_sheet=True, cfg_sheet=None)
        assert result.exit_code != 0
        assert "unknown price sheet 'my-sheet'" in result.output
    elif case == "garbage prices.toml in TAILRENT_CONFIG_DIR":
        result = _bench(tmp_path, monkeypatch, config_dir="cfg", xdg_sheet=True, cfg_sheet="[my-sheet\nnot toml")
        assert result.exit_code != 0
        assert "prices.toml" in result.output and "Traceback" not in result.output
        assert isinstance(result.exception, SystemExit)
    else:
        result = _bench(tmp_path, monkeypatch, config_dir="", xdg_sheet=True, cfg_sheet=None)
        assert result.exit_code == 0, result.output


@pytest.mark.fault("price files")
async def test_the_agent_and_bench_share_one_price_file_lookup(make_agent, tmp_path: Path, monkeypatch) -> None:
    import tailrent_tui.commands.bench as bench_cmd
    from tailrent_tui import settings
    from tailrent_tui.agent import startup

    assert startup.user_price_files is settings.user_price_files  # the agent reads its price sheet there
    assert bench_cmd.user_price_files is settings.user_price_files
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "prices.toml").write_text(_MY_SHEET)
    agent = make_agent(price_sheet="my-sheet")
    assert agent.rent is not None and agent.rent.sheet.name == "my-sheet"


# ----------------------------------------------------------- state.json


@pytest.fixture
def cfg(tmp_path: Path, monkeypatch) -> Path:
    d = tmp_path / "cfg"
    d.mkdir()
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(d))
    return d


@pytest.mark.fault("state.json")
def test_state_json_is_written_through_a_pid_named_temp_file(cfg: Path, monkeypatch) -> None:
    from tailrent_tui.settings import save_user_choice

    seen: list[str] = []
    real_replace = os.replace

    def spy(src, dst, *a, **kw):
        seen.append(os.path.basename(src))
        return real_replace(src, dst, *a, **kw)

    monkeypatch.setattr(os, "replace", spy)
    save_user_choice("theme", "nord")
    assert len(seen) == 1 and f".{os.getpid()}." in seen[0] and seen[0].endswith(".tailrent-tmp"), seen
    assert json.loads((cfg / "state.json").read_text()) == {"theme": "nord"}
    assert (cfg / "state.json").stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in cfg.iterdir()) == ["state.json"]


@pytest.mark.fault("state.json")
def test_state_json_cleans_what_killed_writers_left(cfg: Path) -> None:
    from tailrent_tui.settings import save_user_choice

    dead = cfg / f".state.json.{_dead_pid()}.0123abcd.tailrent-tmp"
    live = cfg / f".state.json.{os.getppid()}.0123abcd.tailrent-tmp"
    old_fixed = cfg / "state.tmp"  # the fixed name older versions used
    for p in (dead, live, old_fixed):
        p.write_text('{"theme": "half')
    hours_ago = time.time() - 2 * 3600
    os.utime(old_fixed, (hours_ago, hours_ago))
    save_user_choice("theme", "nord")
    assert not dead.exists() and not old_fixed.exists()
    assert live.exists()
    assert json.loads((cfg / "state.json").read_text()) == {"theme": "nord"}


_SAVER = """
import sys
from tailrent_tui.settings import save_user_choice
for i in range(int(sys.argv[1])):
    save_user_choice("theme", f"t{i}")
"""


@pytest.mark.fault("state.json")
@pytest.mark.timeout(120)
def test_two_processes_saving_choices_do_not_collide(cfg: Path) -> None:
    env = {**os.environ, "TAILRENT_CONFIG_DIR": str(cfg)}
    procs = [
        subprocess.Popen([sys.executable, "-c", _SAVER, "150"], env=env, stderr=subprocess.PIPE, text=True) for _ in range(4)
    ]
    errors = [p.communicate(timeout=100)[1] for p in procs]
    assert all(p.returncode == 0 for p in procs), [e.strip().splitlines()[-1:] for e in errors]
    assert json.loads((cfg / "state.json").read_text())["theme"].startswith("t")
    assert sorted(p.name for p in cfg.iterdir()) == ["state.json"]


@pytest.mark.fault("state.json")
@pytest.mark.timeout(120)
def test_a_kill_while_saving_leaves_a_whole_state_json(cfg: Path) -> None:
    env = {**os.environ, "TAILRENT_CONFIG_DIR": str(cfg)}
    for i in range(15):
        p = subprocess.Popen([sys.executable, "-c", _SAVER, "100000"], env=env, stderr=subprocess.DEVNULL)
        time.sleep(0.3 + 0.02 * i)
        p.kill()
        p.wait()
        if (cfg / "state.json").exists():
            assert json.loads((cfg / "state.json").read_text())["theme"].startswith("t")
    from tailrent_tui.settings import save_user_choice

    save_user_choice("theme", "nord")  # the next save cleans what the kills left
    assert sorted(p.name for p in cfg.iterdir()) == ["state.json"]
