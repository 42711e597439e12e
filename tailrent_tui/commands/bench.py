"""`tailrent bench`: every policy on the same trace, their tail rent and recall side by side."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from tailrent_tui.bench.runner import (
    DRIVERS,
    SUMMARIZERS,
    BenchError,
    BenchResult,
    PolicyResult,
    TraceResult,
    run_many,
)
from tailrent_tui.commands._common import load_settings_or_fail
from tailrent_tui.core.keepwarm import competitive_ratio
from tailrent_tui.core.policies import POLICY_NAMES, UnknownPolicy
from tailrent_tui.core.rent import PriceSheetError
from tailrent_tui.core.tokens import TOKENIZERS, UnknownTokenizer
from tailrent_tui.models.text import redact
from tailrent_tui.scenarios.traces import BUILTIN_TRACES, TraceError, get_trace
from tailrent_tui.settings import user_price_files

COLUMNS = (
    ("policy", "policy"),
    ("prompt", "prompt_tokens"),
    ("cached", "cached_tokens"),
    ("re-evaluated", "reevaluated_tokens"),
    ("$", "billed_usd"),
    ("pings", "pings"),
    ("folds", "folds"),
    ("peak ctx", "peak_context_tokens"),
    ("recall", "recall"),
    ("facts lost", "facts_lost"),
)
ENGINE_COLUMNS = ("srv prompt", "srv cached", "srv evaluated", "predicted eval", "error", "prompt s")


def fold_cost_lines(policies: dict[str, PolicyResult]) -> list[str]:
    """Per policy that folded: the summary requests' evaluated tokens against the spans, and the first
    request after each fold against an ordinary one (measured by the engine when there is one)."""

    def avg(total: int, n: int) -> str:
        return f"{total / n:,.0f}" if n else "–"

    lines = []
    for name, p in policies.items():
        c = p.fold_costs
        if not c.after_fold_requests and not c.summary_requests:
            continue
        src = "engine" if c.measured else "predicted"
        after = c.after_fold_evaluated if c.measured else c.after_fold_predicted_evaluated
        ordinary = c.ordinary_evaluated if c.measured else c.ordinary_predicted_evaluated
        line = (
            f"  {name}: first request after a fold evaluated {avg(after, c.after_fold_requests)} tokens on average "
            f"({c.after_fold_requests} folds, {src}; predicted {avg(c.after_fold_predicted_evaluated, c.after_fold_requests)}),"
            f" an ordinary one {avg(ordinary, c.ordinary_requests)}"
        )
        if c.summary_requests:
            read = c.summary_evaluated if c.measured else c.summary_predicted_evaluated
            share = f" ({read / c.summary_span_tokens:.1%} of the spans)" if c.summary_span_tokens else ""
            line += (
                f"; {c.summary_requests} summary requests evaluated {read:,} tokens{share},"
                f" predicted {c.summary_predicted_evaluated:,}"
            )
        lines.append(line)
    return (["folds:", *lines]) if lines else []


def format_table(result: BenchResult) -> str:
    out: list[str] = []
    for t in result.traces:
        out.append(
            f"trace {t.trace} · window {t.window:,} · tokenizer {t.tokenizer} · summarizer {t.summarizer}"
            f" · price {t.price_sheet} · driver {t.driver}" + (f" · engine {redact(t.engine)}" if t.engine else "")
        )
        header = [c for c, _ in COLUMNS] + (list(ENGINE_COLUMNS) if t.engine else [])
        rows = [header]
        for name, p in t.policies.items():
            # a context past the window is a request no server takes whole: its rent is no saving
            over = " ✗" if p.over_window else ""
            row = [
                name + over,
                f"{p.prompt_tokens:,}",
                f"{p.cached_tokens:,}",
                f"{p.reevaluated_tokens:,}",
                f"{p.billed_usd:.4f}",
                str(p.pings),
                str(p.folds),
                f"{p.peak_context_tokens:,}",
                f"{p.recall_hits}/{p.recall_total}",
                str(p.facts_lost),
            ]
            if t.engine and p.engine is not None:
                e = p.engine
                row += [
                    f"{e.prompt_tokens:,}",
                    f"{e.cached_tokens:,}",
                    f"{e.evaluated_tokens:,}",
                    f"{e.predicted_evaluated_tokens:,}",
                    e.evaluated_error_text,
                    f"{e.prompt_ms / 1000:.1f}",
                ]
            rows.append(row)
        widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
        for j, r in enumerate(rows):
            out.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))))
            if j == 0:
                out.append("  ".join("-" * w for w in widths))
        out += [
            f"  ✗ {name}: {p.over_window:,} request(s) past the {t.window:,}-token window (peak "
            f"{p.peak_context_tokens:,}): a server refuses or cuts them, so its rent is not comparable, not cheapest"
            for name, p in t.policies.items()
            if p.over_window
        ]
        out += fold_cost_lines(t.policies)
        extras = []
        for name, p in t.policies.items():
            rate = p.false_pin_rate
            extras.append(
                f"  {name}: guard {p.guard_share:.1%} of prompt tokens, pins {p.pins}"
                + (f", false pins {p.false_pins}/{p.chatter_lines} ({rate:.1%})" if rate is not None else "")
                + f", cache expiries {p.expiries}, spills {p.spills}"
                + (f", slot restores {p.restores}" if p.restores else "")
                + (f", pings ${p.ping_usd:.4f}" if p.pings else "")
            )
        out += extras
        out += keep_warm_lines(t)
        out.append("")
    return "\n".join(out)


def keep_warm_lines(t: TraceResult) -> list[str]:
    """The keep-warm rule's pauses and its competitive ratio, per policy that had a pause to decide."""
    lines = []
    for name, p in t.policies.items():
        cr = competitive_ratio(p.pauses)
        if not cr.pauses:
            continue
        lines.append(
            f"  {name} keep-warm: {cr.pauses} pauses ({cr.pinged_through} kept warm, {cr.expired} let expire), "
            f"pings+expiries ${cr.online_usd:.4f} against ${cr.best_usd:.4f} best in hindsight "
            f"(ratio {cr.ratio:.2f}, worst pause {cr.worst_pause:.2f}); fixed choices: always ping "
            f"${cr.always_ping_usd:.4f}, never ${cr.never_ping_usd:.4f} (ratio {cr.ratio_vs_fixed:.2f})"
        )
    return lines


def plot_top(t: TraceResult) -> float:
    """The y-axis' top: the window or the highest curve (`none` never folds and passes the window), with a margin."""
    return max([t.window, *(max(p.context_series, default=0) for p in t.policies.values())]) * 1.08


def write_plot(result: BenchResult, path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise click.ClickException("--plot needs matplotlib: pip install 'tailrent[plot]'") from None
    n = len(result.traces)
    fig, axes = plt.subplots(n, 1, figsize=(10, 3.5 * n), squeeze=False)
    for ax, t in zip(axes[:, 0], result.traces, strict=True):
        for name, p in t.policies.items():
            ax.plot(range(1, len(p.context_series) + 1), p.context_series, label=name, linewidth=1)
        ax.axhline(t.window, color="grey", linestyle=":", linewidth=1, label="window")
        ax.set_title(f"{t.trace}: context tokens per request")
        ax.set_xlabel("request")
        ax.set_ylabel("context tokens")
        ax.set_ylim(0, plot_top(t))
        ax.legend(fontsize="small")
    fig.tight_layout()
    try:
        fig.savefig(path, format="svg")
    except OSError as exc:
        raise click.ClickException(f"cannot write the plot to {path}: {exc.strerror or exc}") from exc
    finally:
        plt.close(fig)


@click.command()
@click.option(
    "--trace",
    "traces",
    multiple=True,
    metavar="NAME|FILE",
    help=f"A built-in trace ({', '.join(BUILTIN_TRACES)}) or a JSONL file; repeatable. Default: article.",
)
@click.option(
    "--policy", "policies", multiple=True, type=click.Choice(POLICY_NAMES), help="A policy to run; repeatable. Default: all."
)
@click.option("--tokenizer", default="cl100k", type=click.Choice(TOKENIZERS), show_default=True)
@click.option("--summarizer", default="mock-lossy", type=click.Choice(SUMMARIZERS), show_default=True)
@click.option(
    "--price",
    "price",
    default="anthropic-5m",
    show_default=True,
    metavar="SHEET",
    help="Price sheet: anthropic-5m, anthropic-1h, openai, local, local-slots, or one from your prices.toml.",
)
@click.option("--engine", metavar="SPEC", help="Also send every request to this server (openai:URL).")
@click.option(
    "--driver",
    default="agent",
    type=click.Choice(DRIVERS),
    show_default=True,
    help="Who drives the policies' plans: the agent's code (what the app runs) or core's synchronous driver.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
@click.option(
    "--plot",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE.svg",
    help="Draw context tokens per request for each policy.",
)
@click.option(
    "--fold-placement",
    "fold_placement",
    default="auto",
    type=click.Choice(["auto", "in_place", "after"]),
    show_default=True,
    help="Where folds put their summary; auto asks the engine (after the kept messages where its KV shifts).",
)
@click.pass_context
def bench(ctx, traces, policies, tokenizer, summarizer, price, engine, driver, as_json, plot, fold_placement) -> None:
    """Run every policy on the same trace and compare tail rent, folds and recall."""
    names = list(traces) or ["article"]
    chosen = list(policies) or list(POLICY_NAMES)

    def progress(policy: str, i: int, total: int) -> None:
        if total >= 1000 and (i % 1000 == 0 or i == total):
            click.echo(f"  {policy}: {i:,}/{total:,} lines", err=True)

    # the engine's read timeout is the app's: the `request_timeout` setting
    request_timeout = load_settings_or_fail(dict(ctx.obj or {})).request_timeout if engine else None
    try:
        loaded = [get_trace(n) for n in names]
        result = run_many(
            loaded,
            chosen,
            tokenizer=tokenizer,
            summarizer=summarizer,
            price_sheet=price,
            price_paths=[str(p) for p in user_price_files()],
            engine=engine,
            progress=progress,
            driver=driver,
            request_timeout=request_timeout,
            fold_placement=fold_placement,
        )
    except (TraceError, PriceSheetError, UnknownPolicy, UnknownTokenizer, BenchError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    if plot is not None:
        write_plot(result, plot)
        click.echo(f"plot written to {plot.resolve()}", err=True)
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2))
    else:
        click.echo(format_table(result))
    sys.stdout.flush()


COMMANDS = [bench]
