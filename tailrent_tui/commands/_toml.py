"""`tailrent config --toml`: the effective settings as a commented config.toml that tomllib reads back.

Each setting's description is its comment, with where its value came from;
an unset setting is a commented line, so the file documents every key.
Tables (keymap, then the groups [fold], [tools], [slots], [mcp]) come last, as TOML wants.
"""

from __future__ import annotations

import json
from typing import Any

from tailrent_tui.settings import setting_help, setting_keys

UNSET_EXAMPLES = {"keymap": 'fold = "ctrl+f"'}


def toml_value(value: Any) -> str:
    """A TOML literal for a JSON-shaped value (no nulls: the caller comments those out)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    if isinstance(value, str):
        # a JSON string without \u escapes of non-ASCII is a TOML basic string, but for DEL
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        # an inline table (mcp.servers): an unset key is left out, as TOML has no null
        return "{" + ", ".join(f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items() if v is not None) + "}"
    raise TypeError(f"no TOML literal for {type(value).__name__}")


def toml_key(key: str) -> str:
    bare = key.replace("_", "").replace("-", "").isalnum() and key.isascii()
    return key if bare else toml_value(key)


def _comment(text: str, width: int = 96) -> list[str]:
    words, lines, line = text.split(), [], "#"
    for word in words:
        if len(line) + 1 + len(word) > width and line != "#":
            lines.append(line)
            line = "#"
        line += " " + word
    return [*lines, line]


def settings_toml(values: dict[str, Any], source: dict[str, str], path: str) -> str:
    """The text of a config.toml that sets `values` (each key of `setting_keys()`: `model`, `fold.trigger`)."""
    help_ = setting_help()
    out = [f"# tailrent settings; save as {path}", "# (environment variables TAILRENT_* and flags override what is here)", ""]
    tables: dict[str, list[str]] = {}
    for key in setting_keys():
        group, _, name = key.rpartition(".")
        value = values[key]
        if not group and isinstance(value, dict):  # keymap: a table of its own, after the top-level keys
            group, lines = key, tables.setdefault(key, [])
            lines += _comment(f"{help_[key]} [{source[key]}]")
            if not value and key in UNSET_EXAMPLES:
                lines.append(f"# {UNSET_EXAMPLES[key]}")
            lines += [f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items()]
            lines.append("")
            continue
        lines = out if not group else tables.setdefault(group, [])
        lines += _comment(f"{help_[key]} [{source[key]}]")
        lines.append(f"# {toml_key(name)} =" if value is None else f"{toml_key(name)} = {toml_value(value)}")
        lines.append("")
    for group, lines in tables.items():
        out += [f"[{group}]", *lines]
    return "\n".join(out)
