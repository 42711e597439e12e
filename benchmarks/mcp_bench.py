"""MCP figures (issue 25): start-up with three servers, overhead per call, schema tokens per server.

    .venv/bin/python benchmarks/mcp_bench.py

1. Process start to first frame with three stdio servers configured against
   none: the same child as ui_bench.py's cold start (bytecode cached), runs
   alternated so a drift of the host hits both. The servers start after the
   first frame; how long after it they are all ready is measured in process.
2. One tools/call through tailrent (the registry's door: the argument check,
   the bounded transport, rung 1) and through the whole agent path (approval
   check, rung 2, the journal), against the same call made directly with the
   SDK's own client, on the same test server (tests/support/mcp_servers/tools_server.py).
3. The schema tokens each server's tools add to every request, as the Tail
   panel shows them (the session's counter over the tools' wire JSON).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "tests" / "support" / "mcp_servers" / "tools_server.py"
UI_BENCH = ROOT / "benchmarks" / "ui_bench.py"
CALLS = 300


def server_config(names: list[str]) -> str:
    return "".join(
        f"[mcp.servers.{name}]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(SERVER))}]\n" for name in names
    )


def first_frames(runs: int = 8) -> tuple[list[float], list[float]]:
    """(with three servers, with none): seconds from process start to the first frame."""
    cache = tempfile.mkdtemp()
    envs = {}
    for label, names in (("three", ["a", "b", "c"]), ("none", [])):
        cfg = Path(tempfile.mkdtemp())
        (cfg / "config.toml").write_text(server_config(names))
        env = {**os.environ, "TAILRENT_CONFIG_DIR": str(cfg), "PYTHONPYCACHEPREFIX": cache}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        subprocess.run([sys.executable, str(UI_BENCH), "--child-cold-start"], capture_output=True, check=True, env=env)
        envs[label] = env
    out: dict[str, list[float]] = {"three": [], "none": []}
    for _ in range(runs):
        for label in ("three", "none"):
            t0 = time.time()
            proc = subprocess.run(
                [sys.executable, str(UI_BENCH), "--child-cold-start"],
                capture_output=True,
                text=True,
                check=True,
                env=envs[label],
            )
            out[label].append(float(proc.stdout.split()[4]) - t0)
    return out["three"], out["none"]


async def servers_after_first_frame() -> tuple[float, float]:
    """In process: (first frame, all three servers ready), seconds from the app's start."""
    from tailrent_tui.agent.lifecycle import open_agent
    from tailrent_tui.settings import Settings
    from tailrent_tui.ui.app import TailrentApp

    tmp = Path(tempfile.mkdtemp())
    os.environ["TAILRENT_CONFIG_DIR"] = str(tmp / "config")
    servers = {name: {"command": sys.executable, "args": [str(SERVER)]} for name in "abc"}
    settings = Settings(model="mock", data_dir=tmp / "data", workspace=tmp, fsync=False, mcp={"servers": servers})
    frame: list[float] = []

    class Timed(TailrentApp):
        def on_mount(self) -> None:
            super().on_mount()
            self.call_after_refresh(lambda: frame.append(time.perf_counter()))

    async with open_agent(settings, {}, new=True) as agent:
        app = Timed(agent, settings)
        t0 = time.perf_counter()
        async with app.run_test(size=(140, 40)) as pilot:
            while not frame:
                await pilot.pause()
            while any(link.state != "ready" for link in agent.mcp.links.values()):
                await asyncio.sleep(0.01)
            ready = time.perf_counter()
    return frame[0] - t0, ready - t0


async def per_call(calls: int) -> tuple[list[float], list[float], list[float]]:
    """Seconds per echo call: (the SDK's client directly, tailrent's registry door, the agent's whole path
    with rung 2 and the journal), each against its own server process, the three interleaved call by call
    so a drift of the host hits all three alike."""
    from mcp import ClientSession, StdioServerParameters, stdio_client

    from tailrent_tui.agent.build import build_agent
    from tailrent_tui.agent.events import TurnCallbacks
    from tailrent_tui.agent.tools import run_tool_async
    from tailrent_tui.core.messages import ToolCall
    from tailrent_tui.models.base import ToolCallChunk
    from tailrent_tui.settings import Settings

    tmp = Path(tempfile.mkdtemp())
    os.environ["TAILRENT_CONFIG_DIR"] = str(tmp / "config")
    servers = {name: {"command": sys.executable, "args": [str(SERVER)], "trust": True} for name in ("door", "whole")}
    settings = Settings(model="mock", data_dir=tmp / "data", workspace=tmp, fsync=False, mcp={"servers": servers})
    agent = build_agent(settings, {}, async_writer=False, new=True)
    hub = agent.mcp
    direct: list[float] = []
    door: list[float] = []
    whole: list[float] = []
    cb = TurnCallbacks()
    params = StdioServerParameters(command=sys.executable, args=[str(SERVER)])
    try:
        await hub.start()
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await session.list_tools()
            await hub.wait_ready()
            for i in range(calls + 20):  # the first 20 warm up
                t = time.perf_counter()
                await session.call_tool("echo", {"text": f"call {i}"})
                t1 = time.perf_counter()
                await run_tool_async("door__echo", {"text": f"call {i}"}, agent.tools.ctx)
                t2 = time.perf_counter()
                call = ToolCall(id=f"c{i}", name="whole__echo", arguments={"text": f"call {i}"})
                await agent.tools.run_call((call, ToolCallChunk(id=call.id, name=call.name, arguments=dict(call.arguments))), cb)
                t3 = time.perf_counter()
                if i >= 20:
                    direct.append(t1 - t)
                    door.append(t2 - t1)
                    whole.append(t3 - t2)
    finally:
        await agent.aclose()  # the close `open_agent` runs (the servers, the journal, the lock)
    return direct, door, whole


async def schema_tokens() -> dict[str, tuple[int, dict[str, int]]]:
    """Per counter: (the server's schema tokens as the Tail panel shows them, each tool's own)."""
    from tailrent_tui.agent.mcp import hub_for
    from tailrent_tui.agent.tools import TOOLS
    from tailrent_tui.core.tokens import get_counter
    from tailrent_tui.models.base import wire_tools
    from tailrent_tui.settings import Settings

    out: dict[str, tuple[int, dict[str, int]]] = {}
    for counter in ("cl100k", "chars4"):
        count = get_counter(counter).count
        hub = hub_for(Settings(mcp={"servers": {"fixture": {"command": sys.executable, "args": [str(SERVER)]}}}), {}, Path.cwd())
        hub.count = count
        try:
            await hub.start()
            await hub.wait_ready()
            each = {n: count(json.dumps(wire_tools([TOOLS[n].spec.to_wire()]))) for n in hub.registered["fixture"]}
            out[counter] = (hub.schema_tokens()["fixture"], each)
        finally:
            await hub.aclose()
    return out


def ms(xs: list[float]) -> str:
    return f"median {statistics.median(xs) * 1000:.3f} ms (p90 {sorted(xs)[int(len(xs) * 0.9)] * 1000:.3f})"


def main() -> None:
    print("tailrent MCP benchmark (stdio test server written with the SDK, tests/support/mcp_servers/tools_server.py)")
    three, none = first_frames()
    ratios = [a / b for a, b in zip(three, none, strict=True)]
    print(f"process start to first frame, bytecode cached, runs alternated ({len(three)} each):")
    print(
        f"  three stdio servers configured: median {statistics.median(three):.3f} s (min {min(three):.3f}, max {max(three):.3f})"
    )
    print(f"  no server configured:           median {statistics.median(none):.3f} s (min {min(none):.3f}, max {max(none):.3f})")
    print(f"  paired ratio three/none: median {statistics.median(ratios):.3f}")
    frame, ready = asyncio.run(servers_after_first_frame())
    print(f"in process: first frame at {frame:.3f} s, all three servers ready at {ready:.3f} s ({ready - frame:.3f} s after it)")
    direct, door, whole = asyncio.run(per_call(CALLS))
    med = statistics.median
    print(f"one tools/call (echo), {CALLS} calls each, the three interleaved call by call:")
    print(f"  the SDK's client directly:                 {ms(direct)}")
    print(
        f"  tailrent's registry door (run_tool_async): {ms(door)}; paired difference median "
        f"{med(b - a for a, b in zip(direct, door, strict=True)) * 1000:+.3f} ms"
    )
    print(
        f"  the agent's whole path (rung 2, journal):  {ms(whole)}; paired difference median "
        f"{med(b - a for a, b in zip(direct, whole, strict=True)) * 1000:+.3f} ms"
    )
    tokens = asyncio.run(schema_tokens())
    print("schema tokens each request carries for the fixture server (as the Tail panel shows them):")
    for counter, (total, each) in tokens.items():
        print(
            f"  {counter}: {total:,} for its {len(each)} tools; each alone: "
            + ", ".join(f"{name.removeprefix('fixture__')} {n}" for name, n in each.items())
        )


if __name__ == "__main__":
    main()
