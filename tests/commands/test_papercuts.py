"""Issue 15's command-line papercuts, each as the user met it."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from tailrent_tui.cli import cli
from tailrent_tui.commands.bench import plot_top
from tailrent_tui.core.messages import Kind, Message, Spilled
from tailrent_tui.ui.screens.spill_viewer import viewer_title
from tailrent_tui.ui.widgets.message import header_content


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


def test_replay_article_starts_with_a_heading() -> None:
    r = CliRunner().invoke(cli, ["replay", "article"])
    assert r.exit_code == 0
    first, second, third = r.stdout.splitlines()[:3]
    assert first.startswith('The article\'s harness ("Tail Rent"), reproduced: seed 42') and "decision not pinned" in first
    assert second == "" and third == "Final tail tokens (est.): 872"


def test_bench_plot_says_where_and_shows_the_none_curve(tmp_path: Path) -> None:
    svg = tmp_path / "ctx.svg"
    r = CliRunner().invoke(
        cli, ["bench", "--trace", "article", "--policy", "none", "--policy", "naive", "--json", "--plot", str(svg)]
    )
    assert r.exit_code == 0, r.output
    assert f"plot written to {svg.resolve()}" in r.stderr
    from tailrent_tui.bench.runner import run_many
    from tailrent_tui.scenarios.traces import get_trace

    (t,) = run_many([get_trace("article")], ["none", "naive"]).traces
    assert max(t.policies["none"].context_series) > t.window  # what used to be clipped
    assert plot_top(t) > max(t.policies["none"].context_series)


def test_titles_and_headers_say_things_once_in_words() -> None:
    s = Spilled(id="m1", spill_id="abc", tool="grep", location="", tokens_before=1200, pointer="p", pointer_tokens=5)
    assert viewer_title(s) == "spill abc · grep · 1,200 tokens"
    tool = Message(role="tool", content="ok", kind=Kind.tool_result, tool="run_shell", tokens=3)
    assert header_content(tool).plain == "tool · run_shell · 3 tok"
    assert Kind.spill_pointer.label == "spill pointer" and Kind.fold_summary.label == "fold summary"
