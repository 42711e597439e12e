"""Hostile cases of issue 13 for settings, the commands' start-up paths and themes.

Each drives the `tailrent` command through its console-script entry point
(`tailrent_tui.cli:main`), with its data dir and config dir in tmp_path, and
checks what a user would see: a non-zero exit, one line on stderr, no
traceback, and nothing lost (journals unchanged, no orphan session directory).

Most run the entry point in this process (tests/cli_inprocess.py: argv, the
environment and the working directory set as a process would see them, stdout,
stderr and the exit code captured; an escaping exception is printed as the
interpreter would). A subprocess adds nothing to what they check, and a few
hundred of them were almost half the suite's CPU time. The cases marked
`real_process` (at least one per class), the TUI's and those that need a file
size limit or a patched interpreter run the real `tailrent` in a subprocess.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from cli_inprocess import run_cli

ROOT = Path(__file__).resolve().parent.parent
TAILRENT = str(Path(sys.executable).parent / "tailrent")


class Env:
    """A data dir, a config dir and a working directory, all under tmp_path."""

    def __init__(self, tmp_path: Path, *, real_process: bool = False) -> None:
        self.real_process = real_process
        self.tmp = tmp_path
        self.home = tmp_path / "home"
        self.cfg = tmp_path / "cfg"
        self.cwd = tmp_path / "work"
        self.cfg.mkdir()
        self.cwd.mkdir()
        self.vars = {
            **os.environ,
            "TAILRENT_HOME": str(self.home),
            "TAILRENT_CONFIG_DIR": str(self.cfg),
            # the platform dirs, should anything fall back to them
            "XDG_DATA_HOME": str(tmp_path / "xdg-data"),
            "XDG_CONFIG_HOME": str(tmp_path / "xdg-config"),
            "OLLAMA_HOST": "http://127.0.0.1:9",
        }
        for key in [k for k in self.vars if k.startswith("TAILRENT_") and k not in ("TAILRENT_HOME", "TAILRENT_CONFIG_DIR")]:
            del self.vars[key]

    def run(self, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None, **kw) -> subprocess.CompletedProcess:
        """`tailrent ARGS`: in this process, or a real one when the test is marked `real_process` or
        needs what only a process has (`stdin`, `preexec_fn`)."""
        if not self.real_process and not kw:
            return run_cli(args, env={**self.vars, **(env or {})}, cwd=cwd or self.cwd)
        return subprocess.run(
            [TAILRENT, *args],
            capture_output=True,
            text=True,
            env={**self.vars, **(env or {})},
            cwd=cwd or self.cwd,
            timeout=120,
            check=False,
            **kw,
        )

    def ask(self, *args: str, **kw) -> subprocess.CompletedProcess:
        return self.run("--model", "mock", "ask", *args, **kw)

    def session(self) -> Path:
        out = self.ask("We use port 8443.")
        assert out.returncode == 0, out.stderr
        (sd,) = self.session_dirs()
        return sd

    def session_dirs(self, home: Path | None = None) -> list[Path]:
        root = (home or self.home) / "sessions"
        return sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


@pytest.fixture
def env(tmp_path: Path, request: pytest.FixtureRequest) -> Env:
    return Env(tmp_path, real_process=request.node.get_closest_marker("real_process") is not None)


def refused(out: subprocess.CompletedProcess, *words: str) -> str:
    """A non-zero exit with one line on stderr, no traceback, naming `words`."""
    assert out.returncode != 0, f"accepted: {out.stdout!r} {out.stderr!r}"
    assert "Traceback" not in out.stderr, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


def tree(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


# -- TAILRENT_HOME empty or relative ---------------------------------------------


@pytest.mark.fault("TAILRENT_HOME empty or relative")
@pytest.mark.parametrize("value", ["", "   "])
def test_empty_tailrent_home_means_unset(env: Env, value: str):
    out = env.ask("hello", env={"TAILRENT_HOME": value})
    assert out.returncode == 0, out.stderr
    assert list(env.cwd.iterdir()) == [], "a session was written into the working directory"
    default = env.tmp / "xdg-data" / "tailrent"
    assert len(env.session_dirs(default)) == 1
    listed = json.loads(env.run("sessions", "--json", env={"TAILRENT_HOME": value}).stdout)
    assert [s["id"] for s in listed] == [p.name for p in env.session_dirs(default)]


@pytest.mark.fault("TAILRENT_HOME empty or relative")
@pytest.mark.parametrize("how", ["env", "flag", "config"])
def test_relative_data_dir_is_made_absolute_once(env: Env, how: str):
    if how == "env":
        extra, flags, expected = {"TAILRENT_HOME": "rel/home"}, [], env.cwd / "rel" / "home"
    elif how == "flag":
        extra, flags, expected = {}, ["--data-dir", "rel/home"], env.cwd / "rel" / "home"
    else:
        (env.cfg / "config.toml").write_text('data_dir = "rel/home"\n')
        # a relative path in the config file is taken from the file's directory, not from wherever tailrent runs
        extra, flags, expected = {"TAILRENT_HOME": ""}, [], env.cfg / "rel" / "home"
    shown = json.loads(env.run(*flags, "config", "--json", env=extra).stdout)["data_dir"]
    assert shown["value"] == str(expected)
    out = env.run(*flags, "--model", "mock", "ask", "hello", env=extra)
    assert out.returncode == 0, out.stderr
    (sd,) = env.session_dirs(expected)
    # every command agrees on where sessions are, wherever it runs from
    elsewhere = env.tmp / "elsewhere"
    elsewhere.mkdir()
    if how == "env":
        extra = {"TAILRENT_HOME": str(expected)}
    elif how == "flag":
        flags = ["--data-dir", str(expected)]
    listed = json.loads(env.run(*flags, "sessions", "--json", env=extra, cwd=elsewhere).stdout)
    assert [s["id"] for s in listed] == [sd.name]
    assert env.run(*flags, "export", sd.name, env=extra, cwd=elsewhere).returncode == 0


@pytest.mark.fault("TAILRENT_HOME empty or relative")
@pytest.mark.real_process
def test_data_dir_of_the_config_file_is_where_every_command_looks(env: Env):
    (env.cfg / "config.toml").write_text(f'data_dir = "{env.tmp / "from-config"}"\n')
    out = env.ask("hello", env={"TAILRENT_HOME": ""})
    assert out.returncode == 0, out.stderr
    (sd,) = env.session_dirs(env.tmp / "from-config")
    listed = json.loads(env.run("sessions", "--json", env={"TAILRENT_HOME": ""}).stdout)
    assert [s["id"] for s in listed] == [sd.name]
    probe = env.run("recall", sd.name[:8], "which port?", "--expect", "hello", env={"TAILRENT_HOME": ""})
    assert probe.returncode == 0, probe.stderr


@pytest.mark.fault("TAILRENT_HOME empty or relative")
def test_empty_config_dir_means_unset(env: Env):
    (env.cwd / "config.toml").write_text("this is not toml = = =\n")
    out = env.run("config", "--json", env={"TAILRENT_CONFIG_DIR": ""})
    assert out.returncode == 0, out.stderr
    assert not (env.cwd / "state.json").exists()


# -- start-up tracebacks -------------------------------------------------------------

JOURNALS = {
    "garbage header": b"this is not json\n",
    "empty": b"",
    "header only half": b'{"journal": "tailrent", "vers',
    "newer version": b'{"journal": "tailrent", "version": 99, "session": "x", "created": 1}\n',
    "header not an object": b"[1, 2, 3]\n",
}


@pytest.mark.fault("start-up tracebacks")
@pytest.mark.parametrize("journal", list(JOURNALS), ids=list(JOURNALS))
@pytest.mark.parametrize("how", ["ask --continue", "--resume ask", "recall", "tui"])
def test_a_bad_journal_is_one_line(env: Env, journal: str, how: str):
    sd = env.session()
    (sd / "journal.jsonl").write_bytes(JOURNALS[journal])
    before = tree(env.home)
    if how == "ask --continue":
        out = env.ask("--continue", "again")
    elif how == "--resume ask":
        out = env.run("--model", "mock", "--resume", sd.name, "ask", "again")
    elif how == "recall":
        out = env.run("recall", sd.name, "which port?", "--expect", "8443")
    else:
        out = env.run("--model", "mock", "--resume", sd.name, stdin=subprocess.DEVNULL)
    refused(out, "journal")
    assert tree(env.home) == before
    assert env.session_dirs() == [sd]


@pytest.mark.fault("start-up tracebacks")
@pytest.mark.real_process
def test_lock_that_is_a_directory_is_one_line(env: Env):
    sd = env.session()
    (sd / "lock").unlink(missing_ok=True)
    (sd / "lock").mkdir()
    before = tree(env.home)
    refused(env.ask("--continue", "again"), "lock")
    assert tree(env.home) == before


CONFIGS = {
    "config.toml is a directory": lambda cfg: (cfg / "config.toml").mkdir(),
    "config.toml not UTF-8": lambda cfg: (cfg / "config.toml").write_bytes(b'theme = "caf\xe9"\n'),
    "state.json a list": lambda cfg: (cfg / "state.json").write_text("[1, 2]"),
    "state.json a string": lambda cfg: (cfg / "state.json").write_text('"tailrent-dark"'),
    "state.json a number": lambda cfg: (cfg / "state.json").write_text("3"),
    "unknown price_sheet": lambda cfg: (cfg / "config.toml").write_text('price_sheet = "nope"\n'),
    "prices.toml garbage": lambda cfg: (cfg / "prices.toml").write_text("[[[ not toml\n"),
    "prices.toml bad value": lambda cfg: (cfg / "prices.toml").write_text(
        '[mine]\ninput_per_mtok = "cheap"\ncache_write_multiplier = 1\ncache_read_multiplier = 0.1\n'
        "output_per_mtok = 1\nmin_cacheable = 0\nttl_seconds = 300\n"
    ),
    "prices.toml not a table": lambda cfg: (cfg / "prices.toml").write_text("mine = 3\n"),
    "prices.toml not UTF-8": lambda cfg: (cfg / "prices.toml").write_bytes(b"# caf\xe9\n"),
    "prices.toml is a directory": lambda cfg: (cfg / "prices.toml").mkdir(),
}


@pytest.mark.fault("start-up tracebacks")
@pytest.mark.parametrize("case", list(CONFIGS), ids=list(CONFIGS))
@pytest.mark.parametrize("command", ["config", "ask"])
def test_a_bad_config_file_is_one_line_and_no_session(env: Env, case: str, command: str):
    CONFIGS[case](env.cfg)
    out = env.run("config") if command == "config" else env.ask("hello")
    refused(out, str(env.cfg))
    assert env.session_dirs() == []


def _no_room(errno_name: str):
    """A wrapper that runs tailrent with every write under the data dir failing with `errno_name`."""
    return textwrap.dedent(
        f"""
        import errno, os, sys
        home = os.environ["TAILRENT_HOME"]
        def under(path):
            return os.path.abspath(os.fsdecode(path)).startswith(home)
        real_open, real_mkdir, real_write = os.open, os.mkdir, os.write
        written = set()
        def fail(path):
            raise OSError(errno.{errno_name}, os.strerror(errno.{errno_name}), os.fsdecode(path))
        def open_(path, flags, *a, **k):
            if under(path) and flags & (os.O_WRONLY | os.O_RDWR):
                fd = real_open(path, flags, *a, **k)
                written.add(fd)
                return fd
            return real_open(path, flags, *a, **k)
        def mkdir(path, *a, **k):
            if under(path) and "{errno_name}" == "EROFS":
                fail(path)
            return real_mkdir(path, *a, **k)
        def write(fd, data):
            if fd in written:
                raise OSError(errno.{errno_name}, os.strerror(errno.{errno_name}))
            return real_write(fd, data)
        os.open, os.mkdir, os.write = open_, mkdir, write
        sys.argv = ["tailrent", *sys.argv[1:]]
        from tailrent_tui.cli import main
        main()
        """
    )


@pytest.mark.fault("start-up tracebacks")
@pytest.mark.parametrize("errno_name", ["ENOSPC", "EROFS", "EDQUOT", "EIO"])
def test_no_room_at_start_is_one_line_and_leaves_no_orphan(env: Env, errno_name: str):
    env.home.mkdir()
    out = subprocess.run(
        [sys.executable, "-c", _no_room(errno_name), "--model", "mock", "ask", "hello"],
        capture_output=True,
        text=True,
        env=env.vars,
        cwd=env.cwd,
        timeout=120,
        check=False,
    )
    refused(out, str(env.home))
    assert env.session_dirs() == [], "a half-made session directory was left behind"


def _fsize_zero() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))


@pytest.mark.fault("start-up tracebacks")
def test_file_size_limit_at_start_is_one_line_and_leaves_no_orphan(env: Env):
    out = env.ask("hello", preexec_fn=_fsize_zero)
    refused(out)
    assert env.session_dirs() == []


@pytest.mark.fault("start-up tracebacks")
@pytest.mark.parametrize("what", ["data dir is a file", "sessions is a file"])
def test_data_dir_that_cannot_hold_sessions_is_one_line(env: Env, what: str):
    if what == "data dir is a file":
        env.home.write_text("not a directory")
    else:
        env.home.mkdir()
        (env.home / "sessions").write_text("not a directory")
    refused(env.ask("hello"), str(env.home))


# -- --resume with ask ---------------------------------------------------------------


@pytest.mark.fault("--resume with ask")
@pytest.mark.parametrize("where", ["group option", "ask option", "id prefix"])
def test_resume_with_ask_continues_that_session(env: Env, where: str):
    first = env.session()
    env.ask("another session, made later")
    assert len(env.session_dirs()) == 2
    size = (first / "journal.jsonl").stat().st_size
    if where == "group option":
        out = env.run("--model", "mock", "--resume", first.name, "ask", "which port?")
    elif where == "ask option":
        out = env.ask("--resume", first.name, "which port?")
    else:
        # the shortest prefix past the timestamp that names only the first: two sessions made in
        # the same second share "YYYYmmdd-HHMMSS-" and, one time in sixteen, the next hex digit
        other = next(p.name for p in env.session_dirs() if p != first)
        cut = next(n for n in range(17, len(first.name) + 1) if not other.startswith(first.name[:n]))
        out = env.run("--model", "mock", "--resume", first.name[:cut], "ask", "which port?")
    assert out.returncode == 0, out.stderr
    assert len(env.session_dirs()) == 2, "--resume was ignored: a new session was made"
    assert (first / "journal.jsonl").stat().st_size > size
    assert "which port?" in (first / "journal.jsonl").read_text()


@pytest.mark.fault("--resume with ask")
@pytest.mark.parametrize("ref", [pytest.param("nope", marks=pytest.mark.real_process), "2"])
def test_resume_with_ask_of_an_unknown_session_is_one_line(env: Env, ref: str):
    env.session()
    env.ask("a second one")
    refused(env.run("--model", "mock", "--resume", ref, "ask", "hello"), ref)
    assert len(env.session_dirs()) == 2


# -- export into the data dir --------------------------------------------------------


@pytest.mark.fault("export into the data dir")
@pytest.mark.parametrize(
    "target",
    ["own journal", "own meta", "other journal", "new file in session", "data dir root", "symlink to journal", "relative path"],
)
def test_export_into_the_data_dir_is_refused(env: Env, target: str):
    sd = env.session()
    assert env.ask("second").returncode == 0
    other = next(p for p in env.session_dirs() if p != sd)
    before = tree(env.home)
    cwd = env.cwd
    out_path = {
        "own journal": sd / "journal.jsonl",
        "own meta": sd / "meta.json",
        "other journal": other / "journal.jsonl",
        "new file in session": sd / "export.md",
        "data dir root": env.home / "export.md",
        "symlink to journal": env.cwd / "link.md",
        "relative path": Path("journal.jsonl"),
    }[target]
    if target == "symlink to journal":
        out_path.symlink_to(sd / "journal.jsonl")
    if target == "relative path":
        cwd = sd
    refused(env.run("export", sd.name, "-o", str(out_path), cwd=cwd), "data dir")
    assert tree(env.home) == before


@pytest.mark.fault("export into the data dir")
@pytest.mark.real_process
def test_export_outside_the_data_dir_still_works(env: Env):
    sd = env.session()
    out = env.run("export", sd.name, "-o", "out.md")
    assert out.returncode == 0, out.stderr
    assert "8443" in (env.cwd / "out.md").read_text()


# -- bad user theme --------------------------------------------------------------------

THEMES = {
    'dark = "yes"': 'primary = "#123456"\ndark = "yes"\n',
    "dark = 1": 'primary = "#123456"\ndark = 1\n',
    "bad primary": 'primary = "#12345"\n',
    "bad background": 'primary = "#123456"\nbackground = "notacolor"\n',
    "bad variable": 'primary = "#123456"\n[variables]\ntail-live = "zzz"\n',
    "variable not a string": 'primary = "#123456"\n[variables]\ntail-live = 3\n',
    "luminosity_spread a string": 'primary = "#123456"\nluminosity_spread = "x"\n',
    "text_alpha out of range": 'primary = "#123456"\ntext_alpha = 7\n',
    "name not a string": 'name = 3\nprimary = "#123456"\n',
    "unknown key": 'primary = "#123456"\ncolour = "#ffffff"\n',
    "not UTF-8": b'primary = "#123456"\n# caf\xe9\n',
}


@pytest.mark.fault("bad user theme")
@pytest.mark.parametrize("case", list(THEMES), ids=list(THEMES))
@pytest.mark.parametrize("chosen", ["mine", "tailrent-dark"])
async def test_a_bad_user_theme_is_skipped_with_a_notice(tmp_path: Path, case: str, chosen: str):
    from ui_helpers import make_agent, make_app

    from tailrent_tui.settings import Settings
    from tailrent_tui.ui.themes import packaged_theme_dirs

    user = tmp_path / "themes"
    user.mkdir()
    body = THEMES[case]
    path = user / f"{chosen}.toml"
    path.write_bytes(body if isinstance(body, bytes) else body.encode())
    settings = Settings(tools={"spill_threshold": 200}, tokenizer="chars4", theme=chosen)
    app = make_app(make_agent(tmp_path, settings=settings), theme_dirs=[*packaged_theme_dirs(), user])
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        assert app.theme == "tailrent-dark"
        assert app.get_theme("tailrent-dark").dark is True, "the bad file replaced the packaged theme"
        assert any(str(path) in e for e in app.theme_errors), app.theme_errors


@pytest.mark.fault("bad user theme")
@pytest.mark.parametrize(
    "value",
    [pytest.param("../x.md", marks=pytest.mark.real_process), "/tmp/x.md", "a/../../x.md", "docs/../../x.md", "", "~/x.md"],
)
def test_decisions_file_outside_the_workspace_is_refused_at_load(env: Env, value: str):
    (env.cfg / "config.toml").write_text(f"decisions_file = {json.dumps(value)}\n")
    refused(env.run("config"), "decisions_file", str(env.cfg / "config.toml"))
    refused(env.ask("DECISION: we use port 8443 because the proxy wants it"), "decisions_file")
    assert env.session_dirs() == []


def test_decisions_file_inside_the_workspace_is_taken(env: Env):
    (env.cfg / "config.toml").write_text('decisions_file = "docs/DECISIONS.md"\n')
    assert env.run("config").returncode == 0


# -- settings values ---------------------------------------------------------------------

BAD_VALUES = {
    "fold.target = fold.trigger": ("[fold]\ntarget = 0.5\ntrigger = 0.5\n", "fold.target"),
    "fold.target > fold.trigger": ("[fold]\ntarget = 0.8\ntrigger = 0.6\n", "fold.target"),
    "fold.target > default trigger": ("[fold]\ntarget = 0.95\n", "fold.target"),
    "shell_timeout = inf": ("[tools]\nshell_timeout = inf\n", "tools.shell_timeout"),
    "shell_timeout = nan": ("[tools]\nshell_timeout = nan\n", "tools.shell_timeout"),
    "shell_timeout = -1": ("[tools]\nshell_timeout = -1\n", "tools.shell_timeout"),
    "request_timeout = inf": ("request_timeout = inf\n", "request_timeout"),
    "pin_share = nan": ("[fold]\npin_share = nan\n", "fold.pin_share"),
    "(a+)+$": ('[fold]\ndecision_patterns = ["(a+)+$"]\n', "decision_patterns"),
    "(a*)*b": ('[fold]\ndecision_patterns = ["(a*)*b"]\n', "decision_patterns"),
    "(\\w+\\s?)+$": ('[fold]\ndecision_patterns = ["(\\\\w+\\\\s?)+$"]\n', "decision_patterns"),
    "((ab)*c?)+$": ('[fold]\ndecision_patterns = ["DECISION:", "((ab)*c?)+$"]\n', "decision_patterns"),
    "(?:x+y?){2,}z": ('[fold]\ndecision_patterns = ["(?:x+y?){2,}z"]\n', "decision_patterns"),
    "(a|a)+$": ('[fold]\ndecision_patterns = ["(a|a)+$"]\n', "decision_patterns"),
    "(a|aa)+$": ('[fold]\ndecision_patterns = ["decided (a|aa)+$"]\n', "decision_patterns"),
    "(.*a){20}": ('[fold]\ndecision_patterns = ["(.*a){20}"]\n', "decision_patterns"),
    "an unknown group": ("[fodl]\ntrigger = 0.5\n", "unknown group [fodl]"),
    "a key outside its group": ("[tools]\ntrigger = 0.5\n", "unknown key 'trigger' in [tools]"),
    "a group written as a key": ("fold = 0.5\n", "fold is a group"),
}


@pytest.mark.fault("settings values")
@pytest.mark.parametrize("case", list(BAD_VALUES), ids=list(BAD_VALUES))
def test_a_bad_value_is_refused_at_load_naming_setting_and_file(env: Env, case: str):
    text, key = BAD_VALUES[case]
    (env.cfg / "config.toml").write_text(text)
    refused(env.run("config"), key, str(env.cfg / "config.toml"))
    refused(env.ask("hello"), key)
    assert env.session_dirs() == []


@pytest.mark.fault("settings values")
@pytest.mark.parametrize(
    ("var", "value"),
    [
        ("TAILRENT_FOLD_DECISION_PATTERNS", '["(a+)+$"]'),
        ("TAILRENT_REQUEST_TIMEOUT", "inf"),
        ("TAILRENT_FOLD_TARGET", "0.95"),
        ("TAILRENT_TOOLS_SHELL_TIMEOUT", "1e999"),
        ("TAILRENT_SLOTS_SAVE", "sometimes"),
        # the old names, read for one release
        ("TAILRENT_DECISION_PATTERNS", '["(a+)+$"]'),
        ("TAILRENT_CAPS", '{"shell_timeout": 1e999}'),
    ],
)
def test_a_bad_value_from_the_environment_is_refused(env: Env, var: str, value: str):
    refused(env.run("config", env={var: value}), var)


def test_safe_patterns_and_values_are_still_taken(env: Env):
    from tailrent_tui.core.guard import DEFAULT_DECISION_PATTERNS
    from tailrent_tui.settings import FoldSettings

    FoldSettings(decision_patterns=list(DEFAULT_DECISION_PATTERNS))
    FoldSettings(
        decision_patterns=[
            r"^(?:DECISION|Decided)+:",
            r"\bwe (?:will|shall) \w+ because\b",
            r"(?:ab)+c",
            r"a{2,5}b*",
            r"(?:\d+\.)+\d",
            r"(a|ab)*c",
            r"(?>a+)+$",
            r"(a++)+$",
            r"(?:\w+\s+)+decided",
        ]
    )
    (env.cfg / "config.toml").write_text("[fold]\ntarget = 0.5\ntrigger = 0.8\n[tools]\nshell_timeout = 30\n")
    assert env.run("config").returncode == 0


@pytest.mark.fault("settings values")
@pytest.mark.real_process
def test_every_error_of_a_config_is_said_at_once(env: Env):
    (env.cfg / "config.toml").write_text(
        'windw = 4096\npolicy = "ladderr"\n[fodl]\ntrigger = 0.5\n[fold]\ntrigger = 2\n[tools]\nshell_timeout = -1\n'
    )
    out = env.run("config")
    assert out.returncode != 0 and "Traceback" not in out.stderr
    lines = out.stderr.strip().removeprefix("Error: ").splitlines()
    where = str(env.cfg / "config.toml")
    assert len(lines) == 5 and all(line.startswith(where + ": ") for line in lines), out.stderr
    said = "\n".join(lines)
    for what in ("'windw'; did you mean 'window'", "unknown group [fodl]", "policy:", "fold.trigger:", "tools.shell_timeout:"):
        assert what in said, said
    assert env.ask("hello").returncode != 0 and env.session_dirs() == []


OLD_FLAT = (
    'fold_trigger = 0.8\nfold_target = 0.5\nsummarizer = "extractive"\nspill_threshold = 300\nslots = "off"\n'
    'slot_dir = "slots"\n[caps]\nshell_timeout = 30\n'
)


@pytest.mark.fault("settings values")
def test_old_flat_keys_are_read_for_one_release_with_one_warning(env: Env):
    (env.cfg / "config.toml").write_text(OLD_FLAT)
    out = env.run("config", "--json")
    assert out.returncode == 0, out.stderr
    shown = {k: v["value"] for k, v in json.loads(out.stdout).items()}
    assert (shown["fold.trigger"], shown["fold.target"], shown["fold.summarizer"]) == (0.8, 0.5, "extractive")
    assert (shown["tools.spill_threshold"], shown["tools.shell_timeout"], shown["slots.save"]) == (300, 30.0, "off")
    assert shown["slots.dir"] == str(env.cfg / "slots")  # relative to the file, as before
    (warning,) = out.stderr.strip().splitlines()
    assert warning.startswith(f"warning: {env.cfg / 'config.toml'}: old flat keys")
    assert "fold_trigger -> [fold] trigger" in warning
    # the session runs with them, and `ask` says the same line
    asked = env.ask("hello")
    assert asked.returncode == 0 and "old flat keys" in asked.stderr
    # a key that is a fixed value now is ignored, said in one line of its own
    (env.cfg / "config.toml").write_text("prune_watermark_lines = 500\n")
    out = env.run("config")
    assert out.returncode == 0 and out.stderr.strip() == (
        f"warning: {env.cfg / 'config.toml'}: prune_watermark_lines is no longer a setting (a fixed value now) and is ignored"
    )


@pytest.mark.fault("settings values")
def test_a_grouped_key_that_is_a_constant_now_is_ignored_with_one_line_each(env: Env):
    (env.cfg / "config.toml").write_text("resume_fold_target = 0.2\n[fold]\nresume_target = 0.1\n[slots]\nsession_mb = 0\n")
    out = env.run("config", env={"TAILRENT_SLOTS_TOTAL_MB": "7"})
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    where = env.cfg / "config.toml"
    assert out.stderr.strip().splitlines() == [
        f"warning: {where}: resume_fold_target is no longer a setting (a fixed value now) and is ignored",
        f"warning: {where}: [fold] resume_target is no longer a setting (a fixed value now) and is ignored",
        f"warning: {where}: [slots] session_mb is no longer a setting (a fixed value now) and is ignored",
        "warning: $TAILRENT_SLOTS_TOTAL_MB: [slots] total_mb is no longer a setting (a fixed value now) and is ignored",
    ]
    assert "resume_target" not in out.stdout and "session_mb" not in out.stdout


def test_the_grouped_key_wins_over_its_old_flat_name(env: Env):
    (env.cfg / "config.toml").write_text("fold_trigger = 0.7\n[fold]\ntrigger = 0.6\n")
    out = env.run("config", "--json", env={"TAILRENT_SPILL_THRESHOLD": "99"})
    shown = json.loads(out.stdout)
    assert shown["fold.trigger"]["value"] == 0.6
    assert shown["tools.spill_threshold"] == {"value": 99, "source": "$TAILRENT_SPILL_THRESHOLD"}
    assert "$TAILRENT_SPILL_THRESHOLD: old flat keys, read this release only: spill_threshold -> [tools]" in out.stderr
