"""An MCP server for the tests, written with the SDK's own server side (MCPServer).

    python tools_server.py [--mode MODE ...] [--http] [--name NAME]

Tools: echo(text), big(kb), slow(seconds), crash(), image(), fail(text),
resource(). Modes change how it behaves:

- garbage: print lines that are not JSON-RPC on stdout before serving;
- hang: never answer initialize (its lifespan never ends);
- errors: every call returns an error result;
- bad_schema: also offer a tool whose input schema is not valid JSON Schema;
- secret: print $SECRET_TOKEN to stderr at start;
- die_once: exit at the first call, unless the marker file $DIE_MARKER exists (then create it first);
- huge_line: big() writes its answer as one raw line of `kb` KB, without building it.

With --http it serves streamable HTTP on 127.0.0.1 at an ephemeral port, prints
`port N` on stdout, and also answers /moved with a redirect to another host.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import sys
from contextlib import asynccontextmanager

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, EmbeddedResource, ImageContent, TextContent, TextResourceContents

#: the real stdout, kept before the SDK diverts fd 1 to stderr
WIRE = os.dup(1)
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4).decode()


def build(modes: set[str], name: str) -> MCPServer:
    lifespan = None
    if "hang" in modes:

        @asynccontextmanager
        async def never(_server):  # type: ignore[no-untyped-def]
            await asyncio.Event().wait()
            yield None

        lifespan = never
    app: MCPServer = MCPServer(name, lifespan=lifespan)

    @app.tool()
    def echo(text: str) -> str:
        """Echo the text back."""
        if "errors" in modes:
            raise ToolError(f"refused: {text}")
        return text

    @app.tool()
    async def big(kb: int) -> str:
        """Return about kb kilobytes of numbered lines."""
        if "huge_line" in modes:
            # one raw line of kb KB, written a megabyte at a time (never built), and no other answer
            # (to the wire itself: the SDK diverts fd 1 to stderr while it serves)
            os.write(WIRE, b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"')
            chunk = b"x" * (1024 * 1024)
            for _ in range(max(1, kb // 1024)):
                view = memoryview(chunk)
                while view:
                    view = view[os.write(WIRE, view) :]
            os.write(WIRE, b'"}]}}\n')
            await asyncio.Event().wait()
        lines = [f"line {i:06d} of the big result" for i in range(kb * 1024 // 32)]
        return "\n".join(lines)

    @app.tool()
    def auth_header(ctx: Context) -> str:
        """The Authorization header this call came with (HTTP only)."""
        request = ctx.request_context.request
        return str(request.headers.get("authorization")) if request is not None else "no request"

    @app.tool()
    async def slow(seconds: float) -> str:
        """Sleep, then answer."""
        await asyncio.sleep(seconds)
        return f"slept {seconds}"

    @app.tool()
    def crash() -> str:
        """Exit the server in the middle of the call."""
        os._exit(3)

    @app.tool()
    def image() -> list[ImageContent | TextContent]:
        """Return a PNG image and a caption."""
        return [ImageContent(data=PNG, mime_type="image/png"), TextContent(text="a chart")]

    @app.tool()
    def resource() -> list[EmbeddedResource]:
        """Return an embedded text resource."""
        return [EmbeddedResource(resource=TextResourceContents(uri="file:///notes.txt", text="the notes"))]

    @app.tool()
    def rows(n: int) -> CallToolResult:
        """Return n rows as structured content only (no text block)."""
        return CallToolResult(content=[], structured_content={"rows": [{"id": i, "name": f"row {i}"} for i in range(n)]})

    @app.tool()
    def fail(text: str) -> str:
        """Raise an exception."""
        raise RuntimeError(f"it broke: {text}")

    if "bad_schema" in modes:

        @app.tool()
        def broken(x: int) -> str:
            """A tool whose schema is damaged below."""
            return str(x)

        app._tool_manager.get_tool("broken").parameters = {"type": "object", "properties": {"x": {"type": 12}}}

    if "die_once" in modes:
        marker = os.environ["DIE_MARKER"]
        original = echo

        @app.tool(name="echo")
        def echo_dies(text: str) -> str:
            """Echo the text back (the first server dies)."""
            if not os.path.exists(marker):
                open(marker, "w").close()
                os._exit(4)
            return original(text)

    return app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", action="append", default=[])
    parser.add_argument("--http", action="store_true")
    parser.add_argument("--name", default="fixture")
    opts = parser.parse_args()
    modes = set(opts.mode)
    if "secret" in modes:
        print(f"starting with token {os.environ.get('SECRET_TOKEN', '')}", file=sys.stderr, flush=True)
    if "garbage" in modes:
        print("hello from a server that prints to stdout", flush=True)
        print("{not json", flush=True)
    app = build(modes, opts.name)
    if not opts.http:
        app.run()
        return
    import socket

    import uvicorn
    from starlette.responses import RedirectResponse

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]

    @app.custom_route("/moved", methods=["GET", "POST", "DELETE"])
    async def moved(request):  # type: ignore[no-untyped-def]
        return RedirectResponse(f"http://127.0.0.2:{port}/mcp", status_code=307)

    server = uvicorn.Server(uvicorn.Config(app.streamable_http_app(), log_level="warning"))
    print(f"port {port}", flush=True)
    asyncio.run(server.serve(sockets=[sock]))


if __name__ == "__main__":
    main()
