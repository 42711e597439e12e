"""Theme files: TOML tables turned into Textual themes.

The packaged themes (`themes/` in the source tree, `tailrent_tui/_themes` in a
wheel) load first, then any `*.toml` in `<config_dir>/themes/`, so a user file
with the same name overrides a packaged one. Panel colors come from the theme:
Textual's own variables plus the ladder's (`CUSTOM_VARIABLES`).
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable
from pathlib import Path

from textual.theme import Theme

# The ladder's colors, as theme variables; a theme file may set each in its
# [variables] table, else it takes the named color of the theme's own palette.
CUSTOM_VARIABLES: dict[str, str] = {
    "tail-system": "secondary",
    "tail-pinned": "accent",
    "tail-summary": "warning",
    "tail-pointer": "success",
    "tail-live": "primary",
    "tail-free": "panel",
}

_THEME_KEYS = {
    "name", "primary", "secondary", "warning", "error", "success", "accent", "foreground",
    "background", "surface", "panel", "boost", "dark", "luminosity_spread", "text_alpha", "variables",
}


class ThemeFileError(ValueError):
    """A theme file that cannot be used; the message names the file and the key."""


def packaged_theme_dirs() -> list[Path]:
    """Where the shipped themes live: the wheel's copy, else the source tree's."""
    here = Path(__file__).resolve().parent.parent
    return [d for d in (here / "_themes", here.parent / "themes") if d.is_dir()]


def load_theme_file(path: Path) -> Theme:
    """One theme from a TOML file. Raises ThemeFileError naming the file and the bad key."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ThemeFileError(f"{path}: cannot read theme ({exc})") from None
    unknown = sorted(set(data) - _THEME_KEYS)
    if unknown:
        raise ThemeFileError(f"{path}: unknown key {unknown[0]!r}")
    data.setdefault("name", path.stem)
    if "primary" not in data:
        raise ThemeFileError(f"{path}: missing key 'primary'")
    variables = data.get("variables", {})
    if not isinstance(variables, dict) or not all(isinstance(v, str) for v in variables.values()):
        raise ThemeFileError(f"{path}: 'variables' must be a table of strings")
    try:
        theme = Theme(**data)
        theme.to_color_system().generate()
    except Exception as exc:  # Textual raises several types for bad colors
        raise ThemeFileError(f"{path}: {exc}") from None
    return theme


def load_themes(dirs: Iterable[Path]) -> tuple[list[Theme], list[str]]:
    """Every theme in these directories, in order (later ones override), and the errors.

    A bad user file must not stop the app: it is skipped and reported.
    """
    themes: dict[str, Theme] = {}
    errors: list[str] = []
    for directory in dirs:
        if not directory.is_dir():
            continue
        for path in sorted(directory.glob("*.toml")):
            try:
                theme = load_theme_file(path)
            except ThemeFileError as exc:
                errors.append(str(exc))
                continue
            themes[theme.name] = theme
    return list(themes.values()), errors
