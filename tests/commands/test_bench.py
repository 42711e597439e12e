"""`tailrent bench --plot` (issue 15's papercuts): it says where the plot went, and the `none` curve is not clipped."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from tailrent_tui.cli import cli
from tailrent_tui.commands.bench import plot_top


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
