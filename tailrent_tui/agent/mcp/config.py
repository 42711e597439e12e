"""Where the MCP servers come from: config.toml's `[mcp.servers.NAME]`, and the workspace's `.mcp.json`.

`.mcp.json` (the shape other agents read: `{"mcpServers": {NAME: {...}}}`) is
read only when `mcp.project_file` is on, and each of its servers is checked
by the same model as config.toml's. A server named in both keeps
config.toml's. `${VAR}` in `args`, `env`, `url` and `headers` is taken from
tailrent's environment when the server starts; a variable that is not set is
that server's failure, said in one line.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tailrent_tui.settings import McpServer, McpSettings

PROJECT_FILE = ".mcp.json"
_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
#: what a stdio server inherits of tailrent's environment (its `env` adds to it): never the API keys
INHERITED = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR")


@dataclass
class ServerEntry:
    """One configured server: its name, its config, and where it came from (a file, for `mcp list`)."""

    name: str
    config: McpServer | None
    origin: str
    problem: str | None = None  # a config that could not be read: the server's one line


@dataclass
class Launch:
    """What a server is started with, its ${VAR}s expanded, and the values to mask in what it says."""

    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    secrets: list[str] = field(default_factory=list)


class MissingVariable(ValueError):
    pass


def expand(text: str, where: str, secrets: list[str]) -> str:
    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        got = os.environ.get(name)
        if got is None:
            raise MissingVariable(f"{where} needs ${name}, which is not set in tailrent's environment")
        secrets.append(got)
        return got

    return _REF.sub(value, text)


def launch_for(config: McpServer, workspace: Path) -> Launch:
    """The expanded command, environment, URL and headers; MissingVariable names what is not set."""
    secrets: list[str] = []
    out = Launch(secrets=secrets)
    if config.command is not None:
        out.argv = [config.command, *(expand(a, "an argument", secrets) for a in config.args)]
        out.env = {k: os.environ[k] for k in INHERITED if k in os.environ}
        for key, raw in config.env.items():
            value = expand(raw, f"env {key}", secrets)
            out.env[key] = value
            secrets.append(value)  # a value given in clear is the user's secret all the same
        out.cwd = str(config.cwd if config.cwd is not None else workspace)
    else:
        assert config.url is not None
        out.url = expand(config.url, "url", secrets)
        out.headers = {k: expand(v, f"header {k}", secrets) for k, v in config.headers.items()}
    return out


def _from_json(name: str, raw: Any, origin: str) -> ServerEntry:
    if not isinstance(raw, dict):
        return ServerEntry(name, None, origin, f"{origin}: server {name!r} is not a JSON object")
    known = {"command", "args", "env", "cwd", "url", "headers", "trust", "enabled", "timeout"}
    data = {k: v for k, v in raw.items() if k in known}
    kind = raw.get("type")
    if kind not in (None, "stdio", "http", "streamable-http"):
        return ServerEntry(name, None, origin, f"{origin}: server {name!r} has type {kind!r}: tailrent takes stdio and http")
    try:
        checked = McpSettings.model_validate({"servers": {name: data}}).servers[name]
    except ValidationError as exc:
        err = exc.errors()[0]
        return ServerEntry(name, None, origin, f"{origin}: server {name!r}: {err['msg'].removeprefix('Value error, ')}")
    return ServerEntry(name, checked, origin)


def server_entries(mcp: McpSettings, origin: str, workspace: Path) -> list[ServerEntry]:
    """config.toml's servers, then `.mcp.json`'s when the setting asks for them."""
    entries = [ServerEntry(name, config, origin) for name, config in mcp.servers.items()]
    if not mcp.project_file:
        return entries
    path = workspace / PROJECT_FILE
    if not path.exists():
        return entries
    shown = str(path)
    try:
        data = json.loads(path.read_bytes())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        entries.append(ServerEntry(PROJECT_FILE, None, shown, f"{shown}: cannot read it ({exc}); its servers are not started"))
        return entries
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        entries.append(ServerEntry(PROJECT_FILE, None, shown, f'{shown}: no "mcpServers" object; nothing to start'))
        return entries
    taken = {e.name for e in entries}
    for name, raw in servers.items():
        if name in taken:
            continue  # config.toml's wins; `mcp list` shows where each came from
        entries.append(_from_json(str(name), raw, shown))
    return entries
