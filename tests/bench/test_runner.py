"""`tailrent bench`: the CLI on the article trace, and the engine path on the real llama.cpp."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tailrent_tui.bench.runner import run_bench
from tailrent_tui.cli import cli
from tailrent_tui.scenarios.traces import load_trace

KEYS = {
    "prompt_tokens",
    "cached_tokens",
    "reevaluated_tokens",
    "billed_usd",
    "folds",
    "peak_context_tokens",
    "recall_hits",
    "recall_total",
    "facts_lost",
    "pings",
}


@pytest.fixture(scope="module")
def article_json() -> dict:
    result = CliRunner().invoke(cli, ["bench", "--trace", "article", "--json"])
    assert result.exit_code == 0, result.output + (result.stderr or "")
    return json.loads(result.stdout)


def test_json_structure(article_json):
    (trace,) = article_json["traces"]
    assert trace["trace"] == "article"
    assert set(trace["policies"]) == {"none", "naive", "naive-pin", "autocompact", "ladder"}
    for figures in trace["policies"].values():
        assert set(figures) == KEYS
        assert figures["prompt_tokens"] == figures["cached_tokens"] + figures["reevaluated_tokens"]


def test_article_recall_as_in_the_article(article_json):
    p = article_json["traces"][0]["policies"]
    assert (p["naive"]["recall_hits"], p["naive"]["recall_total"]) == (0, 4)  # the article's unpinned run
    assert (p["naive-pin"]["recall_hits"], p["naive-pin"]["recall_total"]) == (4, 4)  # the article's fix
    assert (p["ladder"]["recall_hits"], p["ladder"]["recall_total"]) == (4, 4)  # no manual pin
    assert p["ladder"]["facts_lost"] == 0 < p["naive"]["facts_lost"]


def test_floor_and_relations(article_json):
    p = article_json["traces"][0]["policies"]
    floor = p["none"]["reevaluated_tokens"]
    assert p["none"]["folds"] == 0
    for name in ("naive", "naive-pin", "autocompact", "ladder"):
        assert p[name]["reevaluated_tokens"] >= floor, name
    assert p["ladder"]["reevaluated_tokens"] < p["naive"]["reevaluated_tokens"]


def test_table_and_plot(tmp_path):
    svg = tmp_path / "ctx.svg"
    result = CliRunner().invoke(
        cli, ["bench", "--trace", "article", "--policy", "naive", "--policy", "ladder", "--plot", str(svg)]
    )
    assert result.exit_code == 0, result.output
    assert "re-evaluated" in result.stdout and "ladder" in result.stdout and "naive-pin" not in result.stdout
    assert svg.read_text(encoding="utf-8").lstrip().startswith("<?xml")


def test_bad_options_are_clear(tmp_path):
    runner = CliRunner()
    r = runner.invoke(cli, ["bench", "--trace", "no-such-trace"])
    assert r.exit_code != 0 and "no trace 'no-such-trace'" in r.stderr
    r = runner.invoke(cli, ["bench", "--price", "gold"])
    assert r.exit_code != 0 and "unknown price sheet 'gold'" in r.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"role": "user", "content": "hi"}\n{"role": 3}\n', encoding="utf-8")
    r = runner.invoke(cli, ["bench", "--trace", str(bad)])
    assert r.exit_code != 0 and "line 2" in r.stderr


@pytest.mark.engine
@pytest.mark.slow
def test_engine_measures_what_we_predict(llama_server):
    records = [{"trace": "tiny", "window": 3000, "system": "You are a terse assistant for a migration."}]
    for i in range(6):
        records += [
            {"role": "user", "content": f"Step {i}: look at the orders service config and report."},
            {"role": "tool", "tool": "read_file", "content": "\n".join(f"key_{i}_{j} = {j * 7}" for j in range(40))},
            {"role": "assistant", "content": f"Step {i} done: the config has 40 keys, nothing odd."},
        ]
    trace = load_trace(records)
    res = run_bench(trace, ["none", "naive"], engine=f"openai:{llama_server}", price_sheet="local")
    for name, p in res.traces[0].policies.items():
        e = p.engine
        assert e is not None and e.requests == 6, name
        assert e.prompt_tokens > 0 and e.evaluated_tokens > 0
        # prediction and measurement in the engine's own tokens agree within 10%
        assert abs(e.predicted_prompt_tokens - e.prompt_tokens) <= 0.1 * e.prompt_tokens, name
        assert abs(e.evaluated_error) <= 0.10, (name, e)


@pytest.mark.engine
@pytest.mark.slow
def test_engine_model_writes_the_summaries_and_the_prediction_still_agrees(llama_server):
    records = [{"trace": "tiny-folds", "window": 1200, "system": "You are a terse assistant for a migration."}]
    for i in range(6):
        records += [
            {"role": "user", "content": f"Step {i}: look at the orders service config and report."},
            {"role": "tool", "tool": "read_file", "content": "\n".join(f"key_{i}_{j} = {j * 7}" for j in range(30))},
            {"role": "assistant", "content": f"Step {i} done: the config has 30 keys, nothing odd."},
        ]
    trace = load_trace(records)
    res = run_bench(trace, ["ladder"], engine=f"openai:{llama_server}", price_sheet="local", summarizer="model")
    t = res.traces[0]
    p = t.policies["ladder"]
    assert t.summarizer.startswith("model:")  # the engine's model, by name
    assert p.folds > 0, "the trace must fold for the model to summarize"
    e = p.engine
    assert e is not None and e.requests == 6
    # summary requests in between leave the conversation's cache in place, as predicted
    assert e.cached_tokens > 0
    assert abs(e.evaluated_error) <= 0.10, e


def test_a_policy_past_the_window_is_marked_not_ranked_cheapest():
    """`none` never folds: on the article's trace its context passes the window, and its rent looks
    low only because those requests could never be sent whole."""
    result = CliRunner().invoke(cli, ["bench", "--trace", "article", "--policy", "none", "--policy", "ladder"])
    assert result.exit_code == 0, result.output
    rows = {line.split()[0]: line for line in result.stdout.splitlines() if line.startswith(("none", "ladder"))}
    assert "✗" in rows["none"] and "✗" not in rows["ladder"], rows
    said = [line for line in result.stdout.splitlines() if line.strip().startswith("✗ none:")]
    assert len(said) == 1 and "past the 2,048-token window" in said[0] and "not comparable" in said[0]
