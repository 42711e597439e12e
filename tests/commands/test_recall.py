"""`tailrent recall` (issue 15's papercuts): `--expect` takes the README's `--expect A B` as well as one word each."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from tailrent_tui.cli import cli


def _env(tmp_path: Path) -> dict[str, str]:
    return {"TAILRENT_HOME": str(tmp_path / "data"), "TAILRENT_CONFIG_DIR": str(tmp_path / "cfg")}


def test_recall_takes_the_readmes_expect_a_b(tmp_path: Path) -> None:
    runner = CliRunner()
    env = _env(tmp_path)
    ws = tmp_path / "ws"
    ws.mkdir()
    asked = runner.invoke(
        cli,
        [
            "--workspace",
            str(ws),
            "ask",
            "--model",
            "mock",
            "--json",
            "DECISION: Redis with a 15 minute TTL, rotated on every use",
        ],
        env=env,
    )
    assert asked.exit_code == 0, asked.output
    session = __import__("json").loads(asked.stdout)["session"]
    for args in (
        ["--expect", "Redis", "15 minute", "mobile"],
        ["--expect", "Redis", "--expect", "15 minute", "--expect", "mobile"],
    ):
        r = runner.invoke(cli, ["recall", session, "What did we decide?", *args, "--json"], env=env)
        assert r.exit_code == 0, r.output
        data = __import__("json").loads(r.stdout)
        words = {i["word"]: i for i in data["items"]}
        assert set(words) == {"Redis", "15 minute", "mobile"}
