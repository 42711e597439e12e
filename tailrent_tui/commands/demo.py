"""`tailrent demo`: the article's scenario, live in the app."""

from __future__ import annotations

import click


@click.command()
@click.option("--pinned", is_flag=True, help="Pin the decision, as the article's fix does: it survives every fold.")
@click.option(
    "--speed", type=click.FloatRange(0.125, 64.0), default=1.0, show_default=True, help="Pace multiplier (2 = twice as fast)."
)
def demo(pinned: bool, speed: float) -> None:
    """Play the article's run: the tail grows, tool output spills, folds land, the decision's details vanish.

    Space pauses; + and - change the pace; every panel and key of the app works meanwhile.
    """
    import asyncio

    from tailrent_tui.agent.lifecycle import Signalled
    from tailrent_tui.ui.demo import open_demo

    async def play() -> None:
        async with open_demo(pinned=pinned, speed=speed) as app:
            await app.run_async()

    try:
        asyncio.run(play())
    except Signalled as exc:
        raise SystemExit(exc.exit_code) from None


COMMANDS = [demo]
