"""Theme files: TOML tables turned into Textual themes.

The packaged themes (`themes/` in the source tree, which the wheel carries as
`tailrent_tui/_themes`, read with importlib.resources) load first, then any
`*.toml` in `<config_dir>/themes/`, so a user file with the same name overrides
a packaged one. Each file is checked against
`ThemeFile` before Textual sees it: a bad color, `dark = "yes"` or an unknown
key skips that file with a notice, and the app starts with the others. Panel colors come from the theme:
Textual's own variables plus the ladder's (`CUSTOM_VARIABLES`).
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Annotated

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictStr,
    ValidationError,
)
from textual.color import Color, ColorParseError
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


class ThemeFileError(ValueError):
    """A theme file that cannot be used; the message names the file and the key."""


def packaged_theme_dirs() -> list[Traversable]:
    """Where the shipped themes live: the package's `_themes` (an installed wheel, even a zipped one),
    else the source tree's `themes/` (a checkout, an editable install)."""
    packaged = resources.files("tailrent_tui") / "_themes"
    if packaged.is_dir():
        return [packaged]
    source = Path(__file__).resolve().parents[2] / "themes"
    return [source] if source.is_dir() else []


def _color(value: str) -> str:
    try:
        Color.parse(value)
    except ColorParseError:
        raise ValueError(f"{value!r} is not a color (use #rrggbb, rgb(...), or a color name)") from None
    return value


ColorText = Annotated[StrictStr, AfterValidator(_color)]


def _variables(values: dict[str, str]) -> dict[str, str]:
    # the ladder's variables are colors the panels mix (`$tail-live 30%`): a bad one breaks every stylesheet
    for key, value in values.items():
        if key.startswith("tail-"):
            if key not in CUSTOM_VARIABLES:
                raise ValueError(f"unknown variable {key!r} (the ladder's are {', '.join(CUSTOM_VARIABLES)})")
            _color(value)
    return values


class ThemeFile(BaseModel):
    """What a theme file may hold: Textual's theme fields, each checked before Textual sees it."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    name: StrictStr = Field(min_length=1)
    primary: ColorText
    secondary: ColorText | None = None
    warning: ColorText | None = None
    error: ColorText | None = None
    success: ColorText | None = None
    accent: ColorText | None = None
    foreground: ColorText | None = None
    background: ColorText | None = None
    surface: ColorText | None = None
    panel: ColorText | None = None
    boost: ColorText | None = None
    dark: StrictBool = True
    luminosity_spread: float = Field(0.15, ge=0, le=1)
    text_alpha: float = Field(0.95, ge=0, le=1)
    variables: Annotated[dict[str, StrictStr], AfterValidator(_variables)] = Field(default_factory=dict)


def load_theme_file(path: Traversable) -> Theme:
    """One theme from a TOML file. Raises ThemeFileError naming the file and the bad key."""
    try:
        data = tomllib.loads(path.read_bytes().decode("utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ThemeFileError(f"{path}: cannot read theme ({exc})") from None
    data.setdefault("name", path.name.removesuffix(".toml"))
    try:
        checked = ThemeFile.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"]) or "?"
        msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"].removeprefix("Value error, ")
        raise ThemeFileError(f"{path}: {key}: {msg}; the theme is skipped") from None
    try:
        theme = Theme(**checked.model_dump(exclude_unset=True) | {"name": checked.name})
        theme.to_color_system().generate()
    except Exception as exc:
        raise ThemeFileError(f"{path}: {exc}; the theme is skipped") from None
    return theme


def load_themes(dirs: Iterable[Traversable]) -> tuple[list[Theme], list[str]]:
    """Every theme in these directories, in order (later ones override), and the errors.

    A bad user file must not stop the app: it is skipped and reported.
    """
    themes: dict[str, Theme] = {}
    errors: list[str] = []
    for directory in dirs:
        if not directory.is_dir():
            continue
        for path in sorted((p for p in directory.iterdir() if p.name.endswith(".toml")), key=lambda p: p.name):
            try:
                theme = load_theme_file(path)
            except ThemeFileError as exc:
                errors.append(str(exc))
                continue
            themes[theme.name] = theme
    return list(themes.values()), errors
