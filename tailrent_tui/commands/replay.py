"""`tailrent replay`: replay recorded or published runs."""

from __future__ import annotations

import json

import click

from tailrent_tui.scenarios.article import SpillDirError, format_article, run_article
from tailrent_tui.scenarios.dotnet_random import INT_MAX, INT_MIN

# The harness's parameters are C# ints, so the flags take the same range.
_INT32 = click.IntRange(INT_MIN, INT_MAX)


@click.group()
def replay() -> None:
    """Replay a run: the article's harness, exactly."""


@replay.command("article")
@click.option("--pinned", is_flag=True, help="Pin the decision message (the article's second run).")
@click.option("--seed", type=_INT32, default=42, show_default=True, help="Seed of .NET's System.Random.")
@click.option("--batch", type=click.IntRange(1, INT_MAX), default=6, show_default=True, help="Messages folded per fold.")
@click.option(
    "--max-tail",
    type=click.IntRange(0, INT_MAX),
    default=900,
    show_default=True,
    help="Tail budget in estimated tokens; a fold happens above it.",
)
@click.option(
    "--spill-threshold",
    type=click.IntRange(0, INT_MAX),
    default=120,
    show_default=True,
    help="Tool results above this many estimated tokens are spilled.",
)
@click.option("--turns", type=click.IntRange(0, INT_MAX), default=40, show_default=True, help="Filler turns after the decision.")
@click.option(
    "--spill-dir", metavar="DIR", default=None, help="Where spills are written (default: the temp directory plus tailrent-spill)."
)
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def article(
    pinned: bool, seed: int, batch: int, max_tail: int, spill_threshold: int, turns: int, spill_dir: str | None, as_json: bool
) -> None:
    """Reproduce the article's C# harness run and print it in the article's format."""
    try:
        run = run_article(
            pinned=pinned,
            seed=seed,
            batch=batch,
            max_tail=max_tail,
            spill_threshold=spill_threshold,
            turns=turns,
            spill_dir=spill_dir,
        )
    except SpillDirError as exc:
        raise click.ClickException(str(exc)) from exc
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    if as_json:
        click.echo(json.dumps(run.summary_dict()))
    else:
        state = "pinned" if pinned else "not pinned"
        click.echo(
            f'The article\'s harness ("Tail Rent"), reproduced: seed {seed}, fold batch {batch}, tail budget {max_tail}, '
            f"spill threshold {spill_threshold}, {turns} turns, decision {state}\n"
        )
        click.echo(format_article(run), nl=False)


COMMANDS = [replay]
