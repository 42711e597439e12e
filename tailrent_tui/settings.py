"""Settings: one documented model, read from config.toml, then the environment, then flags.

The user-facing knobs only, in groups: the top level, `[fold]`, `[tools]`,
`[slots]` (and `[mcp]` for tool servers). Internal tunables are named
constants beside the code that uses them. Every key documents itself
(`tailrent config` prints each value, its description, and where it came
from). Bad values are errors naming the key and the file (or variable, or
flag) they came from, all of them at once. The flat keys of the last release
(`fold_trigger`, `slot_dir`, `[caps]`) are read for one release, with a
one-line warning.

The layers are merged here (`load_settings`) and the merged values validated
once by the `Settings` model. pydantic-settings was weighed for the merge and
not adopted: it builds the model from its sources without recording which
source gave each value, and both `tailrent config`'s provenance column and the
errors that name the file, variable or flag need exactly that.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal, NamedTuple

import platformdirs
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from tailrent_tui.store.paths import (
    STALE_NO_PID_SECONDS,
    absolute_path,
    clean_stale_temp_files,
    path_from_env,
    write_file_atomic,
)

ENV_PREFIX = "TAILRENT_"

# Ollama unloads an idle model (and its KV cache) after its own default of 5
# minutes; every unload makes the next turn re-read the whole context. A day
# covers lunch, meetings and the night of a session resumed every morning, and
# still frees the memory of a forgotten model within a day. Ollama evicts an
# idle model sooner when another model needs the memory. Whatever is chosen is
# also the local price sheet's TTL for an Ollama model (agent/build.py).
DEFAULT_KEEP_ALIVE = "24h"

_GO_DURATION = re.compile(r"[-+]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|μs|ms|s|m|h))+")
_GO_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def ollama_keep_alive(value: Any) -> str | int:
    """A keep_alive as Ollama takes it: a Go duration string (``30m``, ``1h30m``) or whole seconds.

    Whole seconds given as text (``"3600"``, ``"-1"``: from the environment) become a
    number, because Ollama reads a string only as a duration with a unit. A ValueError
    says what is accepted.
    """
    if isinstance(value, bool):
        # a ValueError, not a TypeError: pydantic reports only the former as a bad value of the key
        raise ValueError("a duration (30m, 24h, 1h30m), whole seconds, -1 (never unload) or 0 (unload at once) expected")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        text = value.strip()
        if re.fullmatch(r"[-+]?\d+", text):
            return int(text)
        if _GO_DURATION.fullmatch(text):
            return text
    raise ValueError(
        f"{value!r} is not a duration: use e.g. 30m, 24h or 1h30m, whole seconds, -1 (never unload) or 0 (unload at once)"
    )


def keep_alive_seconds(value: str | int) -> float:
    """How long Ollama keeps the model after a request with this keep_alive; inf when negative."""
    if isinstance(value, int):
        return math.inf if value < 0 else float(value)
    sign = -1.0 if value.startswith("-") else 1.0
    seconds = sum(float(n) * _GO_UNITS[u] for n, u in re.findall(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)", value))
    return math.inf if sign < 0 and seconds > 0 else seconds


class SettingsError(ValueError):
    """A setting with a bad value; the message names the key and its source."""


_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_SERVER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")


class McpServer(BaseModel):
    """One MCP server: a command run on stdio (`command`, `args`, `env`, `cwd`) or a streamable-HTTP `url`."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    command: str | None = Field(None, description="stdio: the program to run")
    args: list[str] = Field(default_factory=list, description="stdio: its arguments")
    env: dict[str, str] = Field(
        default_factory=dict, description="stdio: extra environment variables; ${VAR} takes one from tailrent's environment"
    )
    cwd: Path | None = Field(None, description="stdio: its working directory (unset: the workspace)")
    url: str | None = Field(None, description="streamable HTTP: the endpoint (http:// or https://)")
    headers: dict[str, str] = Field(
        default_factory=dict,
        description='HTTP headers, each from the environment: {Authorization = "Bearer ${API_TOKEN}"}; '
        "a value written in clear is refused",
    )
    trust: bool = Field(False, description="Run this server's tools without asking (default: every call asks)")
    enabled: bool = Field(True, description="false: configured but not started")
    timeout: float = Field(120.0, gt=0, description="Seconds one tool call may take before it is abandoned")
    startup_timeout: float | None = Field(
        None, gt=0, description="Seconds this server may take to start and list its tools; unset = mcp.startup_timeout"
    )

    @field_validator("headers")
    @classmethod
    def _headers_from_env(cls, v: dict[str, str]) -> dict[str, str]:
        for name, value in v.items():
            if not _ENV_REF.search(value):
                raise ValueError(
                    f"header {name!r} is written in clear: put the value in an environment variable and write "
                    f'"${{VAR}}" (e.g. {name} = "Bearer ${{API_TOKEN}}")'
                )
        return v

    @field_validator("url")
    @classmethod
    def _http_url(cls, v: str | None) -> str | None:
        if v is not None and not re.match(r"https?://[^/\s]+", v):
            raise ValueError(f"url {v!r} is not an http:// or https:// address")
        return v

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "http" if self.url else "stdio"


class McpSettings(BaseModel):
    """The `[mcp]` group: tool servers and how their results are capped."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    servers: dict[str, McpServer] = Field(default_factory=dict, description="[mcp.servers.NAME] tables")
    project_file: bool = Field(
        False, description="Also start the servers of the workspace's .mcp.json (the JSON shape other agents use)"
    )
    startup_timeout: float = Field(15.0, gt=0, description="Seconds a server may take to start and list its tools")
    max_result_bytes: int = Field(
        1024 * 1024, ge=1024, description="Rung 1: a tool result keeps at most this many bytes (text and structured alike)"
    )
    max_message_bytes: int = Field(
        64 * 1024 * 1024,
        ge=64 * 1024,
        description="A stdio message longer than this is dropped unread (the call it answered fails)",
    )

    @field_validator("servers")
    @classmethod
    def _servers(cls, v: dict[str, McpServer]) -> dict[str, McpServer]:
        for name, server in v.items():
            if not _SERVER_NAME.fullmatch(name) or "__" in name:
                raise ValueError(
                    f"server name {name!r}: use letters, digits, - and _ (not __, which separates it from a tool's name)"
                )
            if (server.command is None) == (server.url is None):
                raise ValueError(f"server {name!r}: give either command (stdio) or url (streamable HTTP)")
        return v


_GROUP_CONFIG = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)


class FoldSettings(BaseModel):
    """The `[fold]` group: when the ladder folds, how far, who writes the summary and what it must keep."""

    model_config = _GROUP_CONFIG

    trigger: float = Field(0.9, gt=0, le=1, description="Fold when the context passes this share of the window")
    target: float = Field(0.35, gt=0, lt=1, description="A fold brings the context down to this share of the window")
    preview: Literal["manual", "always", "never"] = Field(
        "manual",
        description="Show a fold before it applies (Enter applies, e edits the summary, escape cancels): "
        "manual = your folds (f, /fold); always = the policy's too; never",
    )
    placement: Literal["auto", "in_place", "after"] = Field(
        "auto",
        description="Where a fold puts its summary: in place (where the span was: the cache before it stays), or after "
        "the kept messages (llama.cpp shifts their KV, asked with n_cache_reuse: the request after a fold reads the "
        "summary and the new message only); auto = after on llama.cpp with a model whose KV can shift, confirmed at the "
        "first fold, else in place",
    )
    prepare: bool = Field(
        True,
        description="Past 80% of the trigger, write the next fold's summary while you read (the model's "
        "summaries only); your next message cancels it, and at the trigger the fold applies at once",
    )
    summarizer: Literal["auto", "model", "extractive", "lossy"] = Field(
        "auto",
        description="Who writes fold summaries: the model, the extractive mock, the article's lossy mock; "
        "auto = the model unless it is the mock",
    )
    guard: Literal["repair", "report", "off"] | None = Field(
        None,
        description="Fold guard: repair appends lost facts to the summary verbatim; report only records them; "
        "unset = the policy's own (ladder repairs; the baselines report, as the harnesses they reproduce)",
    )
    decision_patterns: list[str] | None = Field(
        None, description="Regexes that auto-pin decision messages; unset = the built-in list"
    )
    pin_share: float = Field(
        0.55,
        gt=0,
        le=1,
        description="Pins and the ledger may hold this share of what the system prompt, the tools and the reply leave of "
        "the window; past it auto-pinning stops and asks you to unpin",
    )

    @field_validator("decision_patterns")
    @classmethod
    def _patterns_compile(cls, v: list[str] | None) -> list[str] | None:
        from tailrent_tui.core.regex_risk import catastrophic_repeat

        for p in v or []:
            try:
                risk = catastrophic_repeat(p)
            except re.error as exc:
                raise ValueError(f"pattern {p!r} is not a valid regex: {exc}") from None
            if risk:
                raise ValueError(f"pattern {p!r} can freeze the app: {risk}")
        return v

    @field_validator("target")
    @classmethod
    def _target_below_trigger(cls, v: float, info: ValidationInfo) -> float:
        trigger = info.data.get("trigger")
        if trigger is not None and v >= trigger:
            raise ValueError(f"fold.target ({v}) must be below fold.trigger ({trigger}): a fold must end below where it starts")
        return v


class ToolSettings(BaseModel):
    """The `[tools]` group: how the model acts and how much of a tool's output enters the context."""

    model_config = _GROUP_CONFIG

    spill_threshold: int = Field(2000, ge=1, description="Tool results over this many tokens are spilled (rung 2)")
    protocol: Literal["auto", "native", "text"] = Field(
        "auto",
        description="How the model acts: native tool calls; text = `!cmd` lines and fenced write/edit blocks the "
        "agent parses into the same tools; auto = native, and text once the model is found unable to call tools",
    )
    shell_timeout: float = Field(120.0, gt=0, description="run_shell's default timeout in seconds (a call may ask for more)")


class SlotSettings(BaseModel):
    """The `[slots]` group: llama.cpp's KV slot saved to disk and restored on resume."""

    model_config = _GROUP_CONFIG

    save: Literal["auto", "off"] = Field(
        "auto",
        description="Save llama.cpp's KV slot to disk when a session goes idle, on quit and before a model switch, and "
        "restore it on resume when its prefix hash matches (the server needs --slot-save-path DIR/); "
        "auto = when the server has slots",
    )
    id: int = Field(
        0, ge=0, description="The llama.cpp slot this session's requests are pinned to (id_slot) when slots are saved"
    )
    dir: Path | None = Field(
        None,
        description="The directory the llama.cpp server was given as --slot-save-path, when tailrent can see it: then "
        "tailrent sizes its slot files, deletes the oldest past 512 MB a session / 4 GB in all and lists them in "
        "`tailrent sessions --json`; unset = the files are only recorded in each session's meta.json (no cleanup)",
    )

    @field_validator("dir", mode="before")
    @classmethod
    def _dir_absolute(cls, v: Any) -> Any:
        return _absolute_or_unset(v)


def _absolute_or_unset(v: Any) -> Any:
    if v is None or (isinstance(v, str) and not v.strip()):
        return None
    if isinstance(v, str | Path):
        return absolute_path(v)
    return v


class Settings(BaseModel):
    """tailrent's settings. Sources, lowest first: defaults, config.toml, TAILRENT_* env, flags."""

    # inf and nan are valid TOML and JSON floats, and no setting means either
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

    model: str | None = Field(
        None,
        description="Model spec: mock, ollama, ollama:NAME, openai:URL, openai:URL#MODEL, embedded or embedded:FILE.gguf; "
        "unset = probe Ollama, else the embedded engine when installed, else the mock",
    )
    window: int | None = Field(
        None, ge=256, description="Context window in tokens; unset = ask the server (Ollama /api/show, num_ctx) or 32768"
    )
    policy: Literal["none", "naive", "naive-pin", "autocompact", "ladder"] = Field(
        "ladder",
        description="Folding policy: ladder (this tool's), or a baseline the bench compares: "
        "none, naive, naive-pin, autocompact (see the README)",
    )
    price_sheet: str = Field(
        "local", description="Price sheet for the rent figures (local, anthropic-5m, anthropic-1h, openai, or your own)"
    )
    keep_alive: str | int = Field(
        DEFAULT_KEEP_ALIVE,
        description="Ollama keep_alive sent with every request and the preload: how long Ollama keeps the model and its "
        "KV cache after the last request, so the TTL of the local cache (a duration such as 30m, 24h or 1h30m; "
        "seconds; -1 never unloads; 0 unloads at once)",
    )
    tokenizer: Literal["auto", "cl100k", "chars4"] = Field(
        "auto",
        description="Token counter for the context budget of new sessions; auto = the model server's own tokenizer "
        "and chat template when it can count (llama.cpp), else cl100k; a resumed session counts as it did",
    )
    max_reply_tokens: int | None = Field(
        None,
        ge=1,
        description="Cap on each reply's tokens (sent as max_tokens / num_predict), kept free in the window; "
        "unset = an eighth of the window (at least 256)",
    )
    request_timeout: float = Field(300.0, gt=0, description="Read timeout for model requests, in seconds")
    system_prompt: str = Field(
        "You are a careful coding agent working in the user's workspace. Use the tools to read, search and edit. "
        "Keep decisions explicit: state them as 'DECISION: ... because ...'.",
        description="System prompt of new sessions",
    )
    workspace: Path | None = Field(None, description="Workspace root for tools; unset = the current directory")
    data_dir: Path | None = Field(
        None,
        description="Where sessions live; unset = TAILRENT_HOME or the user data dir. Empty means unset; a relative path "
        "is made absolute at start (from the working directory, or from the config file's directory when set there)",
    )
    decisions_file: str | None = Field(
        None,
        description="Also write pinned decisions to this file in the workspace (a relative path without '..', e.g. DECISIONS.md)",
    )
    yolo: bool = Field(False, description="Run shell and file-writing tools without asking")
    fsync: bool = Field(True, description="fsync the journal after every event")
    theme: str = Field("tailrent-dark", description="UI theme name")
    keymap: dict[str, str] = Field(default_factory=dict, description='Binding id -> keys, e.g. {pin = "ctrl+p"}')
    fold: FoldSettings = Field(default_factory=FoldSettings, description="When and how the ladder folds")
    tools: ToolSettings = Field(default_factory=ToolSettings, description="Tool output and the tool protocol")
    slots: SlotSettings = Field(default_factory=SlotSettings, description="llama.cpp KV slots saved to disk")
    mcp: McpSettings = Field(
        default_factory=McpSettings, description="MCP tool servers ([mcp.servers.NAME]) and the .mcp.json opt-in"
    )

    @field_validator("keep_alive", mode="before")
    @classmethod
    def _keep_alive_is_a_duration(cls, v: Any) -> Any:
        return ollama_keep_alive(v)

    @field_validator("data_dir", mode="before")
    @classmethod
    def _data_dir_absolute(cls, v: Any) -> Any:
        return _absolute_or_unset(v)

    @field_validator("decisions_file")
    @classmethod
    def _decisions_file_inside(cls, v: str | None) -> str | None:
        if v is None:
            return v
        path = PurePosixPath(v)
        if not v.strip() or "\0" in v or path.is_absolute() or v.startswith("~") or ".." in path.parts or v.endswith("/"):
            raise ValueError(
                f"{v!r} is not a file name inside the workspace: give a relative path without '..', e.g. DECISIONS.md"
            )
        return v


#: the groups: `[fold]`, `[tools]`, `[slots]` and `[mcp]` in config.toml, `fold.trigger` in `tailrent config`
GROUPS: dict[str, type[BaseModel]] = {"fold": FoldSettings, "tools": ToolSettings, "slots": SlotSettings, "mcp": McpSettings}


def setting_keys() -> list[str]:
    """Every setting's key, in the order `tailrent config` shows them: top level first, then `group.key`."""
    top = [name for name in Settings.model_fields if name not in GROUPS]
    return top + [f"{group}.{name}" for group, model in GROUPS.items() for name in model.model_fields]


def setting_help() -> dict[str, str]:
    """Each key's description (`tailrent config`, `--toml`)."""
    out = {name: f.description or "" for name, f in Settings.model_fields.items() if name not in GROUPS}
    for group, model in GROUPS.items():
        out.update({f"{group}.{name}": f.description or "" for name, f in model.model_fields.items()})
    return out


#: the flat keys of the last release: old key -> its key now (read, with a warning, for one release);
#: None: no longer a setting (an internal constant beside its code), ignored with a warning
FLAT_KEYS: dict[str, str | None] = {
    "fold_trigger": "fold.trigger",
    "fold_target": "fold.target",
    "resume_fold_target": None,
    "fold_preview": "fold.preview",
    "fold_placement": "fold.placement",
    "prepare_folds": "fold.prepare",
    "summarizer": "fold.summarizer",
    "guard": "fold.guard",
    "decision_patterns": "fold.decision_patterns",
    "spill_threshold": "tools.spill_threshold",
    "tool_protocol": "tools.protocol",
    "slot_dir": "slots.dir",
    "slot_session_mb": None,
    "slot_total_mb": None,
    "pin_share": "fold.pin_share",
    "prune_watermark_lines": None,
    "delegate_answer_cap": None,
    "slot_id": "slots.id",
    "slot_save_idle": None,
}
#: keys of the groups that are no longer settings (named constants beside their code: the resume fold's target
#: in core/policies.py, the slot files' caps in agent/kv_slots.py): read for one release, ignored with a warning
RETIRED_KEYS = frozenset({"fold.resume_target", "slots.session_mb", "slots.total_mb"})
#: the old `slots = "auto"` (a flat key that is now the group's name) and the old `[caps]` table
_OLD_SLOTS, _OLD_CAPS = "slots.save", "caps"


def config_dir() -> Path:
    return path_from_env("TAILRENT_CONFIG_DIR") or Path(platformdirs.user_config_dir("tailrent"))


def config_file() -> Path:
    return config_dir() / "config.toml"


def state_file() -> Path:
    """Choices the app remembers (the theme), kept apart from the user's config.toml."""
    return config_dir() / "state.json"


def user_price_files() -> list[Path]:
    """The user's price sheets: prices.toml in the config dir, if there is one."""
    path = config_dir() / "prices.toml"
    return [path] if path.exists() else []


#: TAILRENT_* variables that are not settings
OTHER_ENV = ("HOME", "CONFIG_DIR", "CACHE_DIR", "API_KEY")


def did_you_mean(word: str, choices: Any) -> str:
    """`; did you mean 'window'?` when a choice is close to `word`, else ''."""
    import difflib

    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def _env_name(key: str) -> str:
    return ENV_PREFIX + key.replace(".", "_").upper()


def _env_keys() -> dict[str, str]:
    """Each TAILRENT_* variable that sets something -> the key it sets (an old flat name -> its old key)."""
    out = {ENV_PREFIX + old.upper(): old for old in [*FLAT_KEYS, "slots", _OLD_CAPS]}
    # data_dir comes from TAILRENT_HOME (TAILRENT_DATA_DIR was never read)
    out.update({_env_name(key): key for key in [*setting_keys(), *RETIRED_KEYS] if key != "data_dir"})
    out[ENV_PREFIX + "HOME"] = "data_dir"
    return out


def env_warnings() -> list[str]:
    """TAILRENT_* variables that name no setting (a misspelling is ignored, so it is said)."""
    names = [var.removeprefix(ENV_PREFIX) for var in _env_keys()] + list(OTHER_ENV)
    out = []
    for var in sorted(os.environ):
        name = var[len(ENV_PREFIX) :]
        if var.startswith(ENV_PREFIX) and name not in names:
            hint = did_you_mean(name, names)
            hint = hint.replace("'", "").replace("mean ", f"mean {ENV_PREFIX}") if hint else ""
            out.append(f"${var} is not a setting and is ignored{hint}")
    return out


_STATE = TypeAdapter(dict[str, JsonValue])


def _read_state(path: Path) -> dict[str, Any]:
    """The app's remembered choices; a file that is not a JSON object of them is an error naming it."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise SettingsError(f"{path}: cannot read ({exc.strerror or exc}); delete it, it only remembers the theme") from None
    try:
        return _STATE.validate_json(raw)
    except ValidationError as exc:
        what = exc.errors()[0]["msg"]
        raise SettingsError(
            f"{path}: not a JSON object of remembered choices ({what}); delete it, it only remembers the theme"
        ) from None


def _read_toml(cfg: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(cfg.read_bytes().decode("utf-8"))
    except OSError as exc:
        raise SettingsError(f"{cfg}: cannot read ({exc.strerror or exc}); it should be a TOML file") from None
    except UnicodeDecodeError as exc:
        raise SettingsError(f"{cfg}: not UTF-8 (byte {exc.start}); save it as UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"{cfg}: not valid TOML ({exc})") from None


class LoadedSettings(NamedTuple):
    """What `load_settings` gives: the settings, where each key's value came from, and the old keys it read
    (one line each file or variable; `env_warnings` says which TAILRENT_* variables name nothing)."""

    settings: Settings
    source: dict[str, str]
    warnings: list[str]


@dataclass
class _Layers:
    """The values read so far (nested as Settings takes them), each key's source, and what was found wrong."""

    values: dict[str, Any] = field(default_factory=dict)
    source: dict[str, str] = field(default_factory=lambda: dict.fromkeys(setting_keys(), "default"))
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def put(self, key: str, value: Any, where: str) -> None:
        group, _, name = key.rpartition(".")
        (self.values.setdefault(group, {}) if group else self.values)[name] = value
        self.source[key] = where

    def read(self, data: dict[str, Any], where: str) -> None:
        """One layer written as config.toml is (groups as tables); an old flat key is read as its new one, and said."""
        moved: list[str] = []
        for key, value in data.items():
            if key in GROUPS and isinstance(value, dict):
                self._read_group(key, value, where)
            elif key in Settings.model_fields and key not in GROUPS:
                self.put(key, value, where)
            elif key in FLAT_KEYS or (key == "slots" and not isinstance(value, dict)):
                moved += self._read_old(key, value, where)
            elif key == _OLD_CAPS and isinstance(value, dict):
                moved += self._read_old_caps(value, where)
            elif key in GROUPS:
                self.errors.append(f"{where}: {key} is a group: write [{key}] and its keys under it")
            elif isinstance(value, dict):
                self.errors.append(
                    f"{where}: unknown group [{key}]: the groups are {', '.join(f'[{g}]' for g in GROUPS)}"
                    f"{did_you_mean(key, GROUPS)}"
                )
            else:
                self.errors.append(f"{where}: unknown key {key!r}{did_you_mean(key, setting_keys())}")
        if moved:
            self.warnings.append(
                f"{where}: old flat keys, read this release only: {', '.join(moved)}; move them into their groups"
            )

    def _read_group(self, group: str, table: dict[str, Any], where: str) -> None:
        fields = GROUPS[group].model_fields
        for name, value in table.items():
            if name in fields:
                self.put(f"{group}.{name}", value, where)
            elif f"{group}.{name}" in RETIRED_KEYS:
                self.warnings.append(f"{where}: [{group}] {name} is no longer a setting (a fixed value now) and is ignored")
            else:
                self.errors.append(f"{where}: unknown key {name!r} in [{group}]{did_you_mean(name, fields)}")

    def _read_old(self, old: str, value: Any, where: str) -> list[str]:
        new = _OLD_SLOTS if old == "slots" else FLAT_KEYS[old]
        if new is None:
            self.warnings.append(f"{where}: {old} is no longer a setting (a fixed value now) and is ignored")
            return []
        if self.source[new] != where:  # the grouped key, when both are written, wins
            self.put(new, value, where)
        group, _, name = new.partition(".")
        return [f"{old} -> [{group}] {name}"]

    def _read_old_caps(self, caps: dict[str, Any], where: str) -> list[str]:
        moved = []
        for name, value in caps.items():
            if name == "shell_timeout":
                if self.source["tools.shell_timeout"] != where:
                    self.put("tools.shell_timeout", value, where)
                moved.append("caps.shell_timeout -> [tools] shell_timeout")
            else:
                self.warnings.append(f"{where}: caps.{name} is no longer a setting (a fixed value now) and is ignored")
        return moved

    def read_file(self, cfg: Path) -> None:
        data = _read_toml(cfg)
        # a relative data_dir or slot dir is from the file, not from wherever tailrent runs
        for table, name in ((data, "data_dir"), (data.get("slots"), "dir"), (data, "slot_dir")):
            value = table.get(name) if isinstance(table, dict) else None
            if isinstance(value, str) and value.strip() and not Path(value).expanduser().is_absolute():
                table[name] = str(cfg.parent / value)  # type: ignore[index]
        self.read(data, str(cfg))

    def read_env(self) -> None:
        """TAILRENT_* variables that are set; an empty one means unset, as in a shell's `VAR= cmd`."""
        for var, key in _env_keys().items():
            raw = os.environ.get(var, "")
            if not raw.strip():
                continue
            value = path_from_env(var) if var == ENV_PREFIX + "HOME" else _coerce_env(key, raw, var, self.errors)
            if value is None or value is _UNREADABLE:
                continue
            group, _, name = key.rpartition(".")
            self.read({group: {name: value}} if group else {key: value}, f"${var}")

    def read_flags(self, flags: dict[str, Any]) -> None:
        for name, value in flags.items():
            if value is None or name not in Settings.model_fields or name in GROUPS:
                continue
            if isinstance(value, bool) and value is False:
                continue
            self.put(name, value, f"--{name.replace('_', '-')}")

    def validate(self) -> Settings:
        try:
            settings = Settings(**self.values)
        except ValidationError as exc:
            settings = None
            self.errors += [self._error_line(err) for err in exc.errors()]
        if self.errors:
            raise SettingsError("\n".join(self.errors))
        assert settings is not None
        return settings

    def _error_line(self, err: Any) -> str:
        loc = [str(p) for p in err["loc"]]
        key = ".".join(loc) or "?"
        owner = ".".join(loc[:2]) if loc and loc[0] in GROUPS else (loc[0] if loc else key)
        where = self.source.get(owner, self.source.get(loc[0], "settings") if loc else "settings")
        message = err["msg"].removeprefix("Value error, ")
        if where == "default":
            # a default that clashes with a value set elsewhere (fold.target against fold.trigger): name that one
            where = next((w for k, w in self.source.items() if w != "default" and k in message), where)
        return f"{where}: {key}: {message}"


_UNREADABLE = object()
_JSON_KEYS = ("keymap", "fold.decision_patterns", "mcp.servers", "decision_patterns", _OLD_CAPS)


def _coerce_env(key: str, raw: str, var: str, errors: list[str]) -> Any:
    if key in _JSON_KEYS:
        try:
            return json.loads(raw)
        except json.JSONDecodeError as exc:
            errors.append(f"${var}: expected JSON ({exc.msg})")
            return _UNREADABLE
    if raw.lower() in ("1", "true", "yes", "on", "0", "false", "no", "off") and _is_bool(key):
        return raw.lower() in ("1", "true", "yes", "on")
    return raw


def _is_bool(key: str) -> bool:
    group, _, name = key.rpartition(".")
    model: type[BaseModel] = GROUPS[group] if group else Settings
    field_ = model.model_fields.get(name)
    return field_ is not None and field_.annotation is bool


def load_settings(flags: dict[str, Any] | None = None, *, path: Path | None = None) -> LoadedSettings:
    """Effective settings, each key's source, and warnings; every error found is in the one SettingsError."""
    layers = _Layers()
    cfg = path or config_file()
    if cfg.exists():
        layers.read_file(cfg)
    state = state_file()
    if state.exists():
        for key, value in _read_state(state).items():
            if key in Settings.model_fields and key not in GROUPS and layers.source[key] == "default":
                layers.put(key, value, str(state))
    layers.read_env()
    layers.read_flags(flags or {})
    settings = layers.validate()
    _check_price_sheet(settings, layers.source)
    return LoadedSettings(settings, layers.source, layers.warnings)


def _check_price_sheet(settings: Settings, source: dict[str, str]) -> None:
    """The price sheet must exist and every price file parse: refused at load, not at the first turn."""
    from tailrent_tui.core.rent import PriceSheetError, get_price_sheet

    try:
        get_price_sheet(settings.price_sheet, user_price_files())
    except PriceSheetError as exc:
        message = str(exc)
        if message.startswith("unknown price sheet"):
            message = f"{source['price_sheet']}: price_sheet: {message}"
        raise SettingsError(message) from None


def save_user_choice(key: str, value: Any) -> None:
    """Remember a choice made in the app (e.g. the theme) for the next start."""
    if key not in Settings.model_fields:
        raise SettingsError(f"unknown setting {key!r}")
    path = state_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        data = _read_state(path) if path.exists() else {}
    except SettingsError:
        data = {}  # a damaged memory of choices is replaced, not kept
    data[key] = value
    # as the store writes: a temp file named with this pid, renamed over; stale ones (killed writers) go first
    clean_stale_temp_files(path.parent)
    write_file_atomic(path, json.dumps(data, indent=2).encode("utf-8"))
    _drop_old_temp(path.with_suffix(".tmp"))


def _drop_old_temp(old: Path) -> None:
    """Older versions wrote state.json through a fixed `state.tmp`, never removed after a kill."""
    try:
        if time.time() - old.lstat().st_mtime > STALE_NO_PID_SECONDS:
            old.unlink()
    except OSError:
        pass
