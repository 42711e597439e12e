"""What a session approval of run_shell covers: a read-only allowlist, or one exact command line.

A denylist of programs and flags cannot keep the dialog's promise (issue 27:
after `pytest -q t.py` was allowed, `pytest -q t.py --basetemp=../x` deleted
`../x`; `git grep -O'cmd'`, `make -f ../evil.mk`, `sqlite3 db '.shell …'`,
`sort -uo`, `find -fprint0` ran or wrote what they liked). So "allow for the
session" is offered in two forms only, and everything else is allowed once:

- **read-only**: the program (and, for git, the subcommand) is on `READ_ONLY`,
  every flag is on that program's own allowlist, every flag value is a short
  word (never a path), and every other argument names a path that stays inside
  the workspace (symlinks followed). The approval covers later commands of the
  same program/subcommand that pass the same checks. git is covered only while
  the repository's `.git/config` sets nothing that runs a program (fsmonitor,
  a pager, an external diff, a textconv, an include...).
- **exact**: any other simple command that is not a test runner, a build tool,
  an interpreter, a package manager, a database shell, a script, or a command
  that takes a config, a script or an output path, and none of whose words
  names a path outside the workspace. The approval covers that exact command
  line again, nothing else.

A command is one simple command only when it parses (shlex, punctuation mode)
with no operator (`;`, `&&`, `|`, `&`), redirection, substitution or expansion
(`$`, backticks, globs, braces), comment, newline or leading assignment.
"""

from __future__ import annotations

import os
import re
import shlex
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

#: Characters the shell gives a meaning that shlex does not model: substitution and
#: expansion ($, `), globs and braces, comments, history, and line breaks.
_UNSAFE_CHARS = frozenset("$`*?[]{}#!\n\r\x00\x0b\x0c")
_OPERATOR_CHARS = frozenset(";&|()<>")


@dataclass(frozen=True)
class Flags:
    """The flags one read-only program may take under a session approval."""

    short: str = ""
    """single-letter flags without a value, which may be clustered (`-la`)"""
    words: frozenset[str] = frozenset()
    """whole flags without a value (`--oneline`, find's `-print`)"""
    valued: frozenset[str] = frozenset()
    """flags that take a value, as the next word or after `=` (`-n 20`, `--max-count=3`)"""
    pattern_first: bool = False
    """the first operand is a pattern, not a path (grep, rg, git grep), unless -e gave one"""
    operands: bool = True
    """False: no operand at all (`git branch NAME` creates a branch)"""
    digit_flags: bool = False
    """`-20` (head, tail) is a count"""


def _f(short: str = "", words: str = "", valued: str = "", **kw: bool) -> Flags:
    return Flags(short, frozenset(words.split()), frozenset(valued.split()), **kw)


#: Programs whose every allowlisted use only reads, with the flags they may take.
READ_ONLY: dict[str, Flags] = {
    "ls": _f(
        "1aAlhRtrSdFGinpsuUXc",
        "--all --almost-all --human-readable --recursive --classify --color=never "
        "--color=auto --color=always --directory --reverse --size --inode --numeric-uid-gid",
        "--sort --time-style",
    ),
    "cat": _f("nAbeEsTv", "--number --show-all --number-nonblank --squeeze-blank --show-nonprinting"),
    "head": _f("qv", "--quiet --verbose", "-n -c --lines --bytes", digit_flags=True),
    "tail": _f("qv", "--quiet --verbose", "-n -c --lines --bytes", digit_flags=True),
    "wc": _f("lwcmL", "--lines --words --bytes --chars --max-line-length"),
    "pwd": _f("LP", operands=False),
    "echo": _f("neE"),
    "stat": _f("Lt", "--dereference --terse"),
    "file": _f("bLNhiz", "--brief --mime --mime-type --dereference"),
    "du": _f("shacbkmLx", "--summarize --human-readable --all --total", "-d --max-depth"),
    "df": _f("hTiPk", "--human-readable --print-type --inodes"),
    "tree": _f("adfiCsDhpugFnNL", "--noreport --dirsfirst", "-L --charset"),
    "which": _f("a"),
    "realpath": _f("eLPqsz"),
    "basename": _f("asz"),
    "dirname": _f("z"),
    "diff": _f(
        "uqsrNwbBiyt",
        "--unified --brief --recursive --ignore-all-space --side-by-side --color=never --color=auto --color=always",
        "-U --unified",
    ),
    "grep": _f(
        "inrRvwlLcoHhEFsqxZzbT",
        "--line-number --ignore-case --recursive --invert-match --word-regexp "
        "--files-with-matches --files-without-match --count --only-matching --with-filename --no-filename "
        "--extended-regexp --fixed-strings --no-messages --quiet --line-regexp --color=never --color=auto "
        "--color=always",
        "-e -A -B -C -m --max-count --regexp --context --after-context --before-context",
        pattern_first=True,
    ),
    "rg": _f(
        "inlvwcFSsUHNoqx",
        "--line-number --ignore-case --files-with-matches --invert-match --word-regexp "
        "--count --fixed-strings --smart-case --case-sensitive --hidden --no-heading --heading --files "
        "--only-matching --quiet --vimgrep --json --no-ignore --color=never --color=auto --color=always",
        "-e -A -B -C -m -t -T -g --max-count --type --type-not --context --regexp --max-depth --glob --sort",
        pattern_first=True,
    ),
    "find": _f(
        "",
        "-print -print0 -ls -follow -depth -empty -readable -prune -not -o -a -true -false",
        "-name -iname -type -maxdepth -mindepth -path -ipath -size -mtime -mmin -newer -regex -iregex -perm",
    ),
}

#: git subcommands that only read, with their flags (`git log --oneline -n 5`).
GIT_READ_ONLY: dict[str, Flags] = {
    "status": _f(
        "sbuv",
        "--short --branch --porcelain --porcelain=v1 --porcelain=v2 --long --ignored "
        "--untracked-files=no --untracked-files=all --untracked-files=normal --no-renames",
        operands=True,
    ),
    "log": _f(
        "p",
        "--oneline --stat --shortstat --graph --decorate --all --patch --name-only --name-status "
        "--reverse --first-parent --no-merges --merges --abbrev-commit --no-color --follow --date=short "
        "--date=iso --date=relative --no-ext-diff --no-textconv",
        "-n --max-count --since --until --author --grep --format --pretty --skip -L",
        digit_flags=True,
    ),
    "diff": _f(
        "wbR",
        "--stat --shortstat --cached --staged --name-only --name-status --word-diff --no-color "
        "--numstat --check --ignore-all-space --no-ext-diff --no-textconv",
        "-U --unified",
    ),
    "show": _f(
        "s",
        "--stat --shortstat --name-only --name-status --oneline --no-patch --no-color --no-ext-diff --no-textconv",
        "--format --pretty -U",
    ),
    "branch": _f("avr", "--list --show-current --all --remotes --verbose --no-color --merged --no-merged", operands=False),
    "rev-parse": _f("q", "--show-toplevel --abbrev-ref --short --verify --git-dir --is-inside-work-tree --symbolic-full-name"),
    "ls-files": _f("comdstz", "--cached --others --modified --deleted --stage --exclude-standard --full-name"),
    "blame": _f("lswe", "--porcelain --line-porcelain --show-email", "-L"),
    "grep": _f(
        "inwlcEFvh",
        "--line-number --ignore-case --word-regexp --files-with-matches --count "
        "--extended-regexp --fixed-strings --invert-match --cached --untracked --no-color",
        "-e -A -B -C -m",
        pattern_first=True,
    ),
    "shortlog": _f("sne", "--summary --numbered --email"),
    "describe": _f("", "--tags --always --long --dirty --abbrev"),
    "remote": _f("v", "--verbose", operands=False),
}

#: Programs never covered for the session, by why: they run code the workspace (or the model) supplies,
#: or their arguments can. Each is "allow once" only, whatever its arguments.
ONCE_ONLY: dict[str, str] = {}
for _why, _names in {
    "a test runner runs code from the workspace (conftest, fixtures, its config)": (
        "pytest py.test tox nox jest vitest mocha ava karma phpunit rspec ctest unittest"
    ),
    "a build tool runs whatever its build files say": (
        "make gmake cmake ninja meson bazel bazelisk buck gradle gradlew mvn ant scons just rake task cargo go "
        "dotnet msbuild xcodebuild swift zig"
    ),
    "an interpreter runs a script or inline code": (
        "python python2 python3 pypy pypy3 node deno bun perl ruby php lua luajit Rscript R julia tclsh wish "
        "osascript java jshell groovy scala kotlin erl elixir iex ghci runghc"
    ),
    "a package manager runs install scripts": (
        "pip pip3 pipx uv uvx poetry pdm hatch conda mamba npm pnpm yarn npx pnpx bunx gem bundle composer "
        "apt apt-get dnf yum brew pacman apk nix"
    ),
    "a database shell can run commands (.shell, \\!)": "sqlite3 psql mysql mariadb mongo mongosh redis-cli duckdb",
    "it runs another command, or a shell": (
        "sh bash zsh dash ksh csh tcsh fish eval exec source . env xargs nohup timeout nice ionice time command "
        "builtin watch parallel ssh scp sftp strace ltrace gdb chroot unshare setsid stdbuf flock script busybox "
        "coproc trap enable sudo su doas pkexec docker podman kubectl vagrant gh"
    ),
    "it is destructive (it deletes, moves, overwrites or changes permissions)": (
        "rm rmdir unlink shred mv cp dd truncate mkfs fdisk sfdisk parted wipefs mkswap chmod chown chgrp chattr "
        "ln install touch mkdir tee kill killall pkill reboot shutdown halt poweroff crontab"
    ),
    "its config (in the workspace) can load plugins, run hooks or write outside it": (
        "eslint prettier stylelint mypy pylint flake8 ruff black isort pyright pre-commit lefthook husky webpack vite "
        "rollup esbuild babel parcel tsc terraform tofu ansible ansible-playbook docker-compose direnv mise asdf "
        "hg svn"
    ),
    "a compiler reads any file its sources include and writes what it builds": ("gcc g++ cc c++ clang clang++ rustc javac ld as"),
    "it can run a command given in its input or open a connection": (
        "m4 ed ex expect socat nc ncat netcat telnet tmux screen xdg-open open"
    ),
    "its arguments can run code or write any file": (
        "sed tar rsync awk gawk mawk nawk vim vi nvim emacs nano less more sort shuf uniq curl wget gzip gunzip "
        "zip unzip xz unxz bzip2 bunzip2 zstd 7z patch split csplit openssl git"
    ),
}.items():
    for _name in _names.split():
        ONCE_ONLY[_name] = _why

#: Words in a flag that mean it names a config, a script or an output: never covered, even exactly.
_RISKY_FLAG = re.compile(
    r"^--?[\w-]*(config|conf|rc|script|output|out|exec|eval|command|cmd|plugin|load|hook|"
    r"pre|init|setup|profile|require|import|file)",
    re.IGNORECASE,
)
#: A flag value under a read-only approval: a short word, never a path.
_FLAG_VALUE = re.compile(r"^[\w.,:%+=@^~ -]{0,80}$")
#: Keys of a git config that make a read-only git command run a program.
_GIT_RUNS = re.compile(
    r"^\s*(fsmonitor|pager|external|textconv|sshcommand|editor|hookspath|askpass|command|cmd|program|path|"
    r"helper|tool|clean|smudge|process|gpgprogram|proxy|alias|difftool|mergetool)\b\s*=?|^\s*\[(include|alias|"
    r"includeif|filter|diff|pager)",
    re.IGNORECASE,
)

_BUILTIN_FSMONITOR = re.compile(r"^\s*fsmonitor\s*=\s*(true|false|yes|no|on|off|1|0)\s*$", re.IGNORECASE)

Kind = Literal["read-only", "exact"]


@dataclass(frozen=True)
class ShellOffer:
    """What the approval dialog may offer for one run_shell command."""

    kind: Kind | None
    """read-only: the program (subcommand) under its flag allowlist; exact: this command line only;
    None: allow once only"""
    scope: tuple[str, ...] | None
    """what the approval covers: the program (and git subcommand), or the exact command line"""
    allows: str
    """one line for the dialog: which session approval is offered and why, or why none is"""

    @property
    def shown(self) -> str | None:
        """The button's label for the covered scope; None when only "allow once" is offered."""
        if self.kind == "read-only" and self.scope:
            return f"`{shlex.join(self.scope)}` (read-only)"
        if self.kind == "exact":
            return "this exact command"
        return None

    @property
    def prefix(self) -> tuple[str, ...] | None:
        return (self.kind or "", *self.scope) if self.kind and self.scope else None


def simple_argv(command: str) -> list[str] | str:
    """The words of `command` when it is one simple command; else why it is not."""
    unsafe = sorted({c for c in command if c in _UNSAFE_CHARS or (ord(c) < 32 and c != "\t")})
    if unsafe:
        shown = ", ".join(repr(c) if c in "\n\r\x00\x0b\x0c" or ord(c) < 32 else c for c in unsafe)
        return f"it holds {shown} (substitution, expansion, a glob, a comment or a line break)"
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        words = list(lexer)
    except ValueError as exc:
        return f"it does not parse ({exc})"
    operators = [w for w in words if w and set(w) <= _OPERATOR_CHARS]
    if operators:
        return f"it is not one simple command (it has {' '.join(dict.fromkeys(operators))})"
    if not words:
        return "it is empty"
    if "=" in words[0]:
        return f"it sets a variable before the command ({words[0].split('=', 1)[0]}=)"
    return words


def path_outside(root: str | Path, word: str) -> bool:
    """True when `word`, taken as a path from the workspace root, lands outside it (symlinks followed)."""
    if word.startswith("~"):
        return True
    real_root = Path(os.path.realpath(root))
    target = Path(os.path.realpath(real_root / word))  # an absolute word replaces the root
    return not target.is_relative_to(real_root)


def _pathish(word: str) -> bool:
    return "/" in word or word.startswith(("~", "..")) or word == ".."


def _words_leave(root: str | Path, words: list[str]) -> str | None:
    """The first word (or flag value) that names a path outside the workspace."""
    for word in words:
        candidates = [word]
        if word.startswith("-"):
            candidates = [word.split("=", 1)[1]] if "=" in word else [word.lstrip("-")[1:]] if not word.startswith("--") else []
        for c in candidates:
            # a bare name counts too when the workspace holds it as a symlink (`jq . data.json`, data.json -> ~/.env)
            if c and (_pathish(c) or os.path.islink(os.path.join(root, c))) and path_outside(root, c):
                return word
    return None


def _git_dirs(root: str | Path) -> list[Path]:
    """The git directories whose config a git command run in `root` reads: the repository's
    (found upward from the workspace, as git finds it; a `.git` file's `gitdir:` followed) and,
    for a linked worktree, its common directory too."""
    here = Path(os.path.realpath(root))
    for folder in (here, *here.parents):
        dot = folder / ".git"
        try:
            if dot.is_dir():
                gitdir = dot
            elif dot.is_file():
                with open(dot, "rb") as f:
                    line = f.read(4096).decode("utf-8", "replace").strip()
                if not line.startswith("gitdir:"):
                    return []
                gitdir = folder / line.removeprefix("gitdir:").strip()
            else:
                continue
        except OSError:
            return []
        dirs = [gitdir]
        try:
            with open(gitdir / "commondir", "rb") as f:
                dirs.append(gitdir / f.read(4096).decode("utf-8", "replace").strip())
        except OSError:
            pass
        return dirs
    return []


def _read_config(path: Path) -> str | None:
    """A config file's text (the first MB); None when there is none. Never waits on a FIFO."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"[unreadable: {exc.strerror or exc}]"
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return "[not a regular file]"
        return f.read(1 << 20).decode("utf-8", "replace")


def git_config_runs_programs(root: str | Path) -> str | None:
    """The first line of the repository's own config (`config`, `config.worktree`, a linked
    worktree's common `config`) that makes git run a program, or that cannot be read as a plain
    file; None if none. A section and its first key may share a line (`[core] fsmonitor = x`)."""
    for gitdir in _git_dirs(root):
        for name in ("config", "config.worktree"):
            text = _read_config(gitdir / name)
            if text is None:
                continue
            if text.startswith("[unreadable") or text == "[not a regular file]":
                return f"{name}: {text.strip('[]')}"
            for line in text.splitlines():
                header = re.match(r"^\s*\[[^\]]*\]", line)
                rest = line[header.end() :] if header else line
                if _BUILTIN_FSMONITOR.match(rest):
                    continue  # git's own daemon, no program of the repository's
                if (header and _GIT_RUNS.search(header.group(0))) or _GIT_RUNS.search(rest):
                    return line.strip()[:80]
    return None


def _read_only_check(root: str | Path, program: str, flags: Flags, args: list[str]) -> str | None:
    """Why `args` step out of the program's read-only allowlist; None when they stay in it."""
    operands: list[str] = []
    pattern_given = False
    i = 0
    only_operands = False
    while i < len(args):
        word = args[i]
        i += 1
        if only_operands or word == "-" or not word.startswith("-"):
            operands.append(word)
            continue
        if word == "--":
            only_operands = True
            continue
        if word in flags.words:
            continue
        name, eq, value = word.partition("=")
        if name in flags.valued:
            if not eq:
                if i >= len(args):
                    return f"{name} needs a value"
                value = args[i]
                i += 1
            if name in ("-e", "--regexp"):
                pattern_given = True  # a pattern: any text, never opened as a path
                continue
            if not _FLAG_VALUE.match(value):
                return f"the value of {name} is not a short word ({value[:40]!r})"
            continue
        if flags.digit_flags and word[1:].isascii() and word[1:].isdigit():
            continue
        if not word.startswith("--") and flags.short and all(c in flags.short for c in word[1:]):
            continue
        return f"{program} {word} is not on its read-only allowlist"
    if operands and not flags.operands:
        return f"{program} with an argument ({operands[0]!r}) can change things"
    if flags.pattern_first and operands and not pattern_given:
        operands = operands[1:]
    for word in operands:
        if path_outside(root, word):
            return f"{word!r} is outside the workspace"
    return None


def _read_only(root: str | Path, argv: list[str]) -> tuple[tuple[str, ...], str | None] | None:
    """The read-only scope of `argv` and why it steps out of it; None when no read-only scope fits."""
    program = argv[0]
    if "/" in program:
        return None  # ./ls or /tmp/ls: not the program on the allowlist
    if program == "git":
        if len(argv) < 2 or argv[1] not in GIT_READ_ONLY:
            return None
        why = _read_only_check(root, "git " + argv[1], GIT_READ_ONLY[argv[1]], argv[2:])
        if why is None and (line := git_config_runs_programs(root)):
            why = f"the repository's .git/config makes git run a program ({line})"
        return (program, argv[1]), why
    flags = READ_ONLY.get(program)
    if flags is None:
        return None
    return (program,), _read_only_check(root, program, flags, argv[1:])


def _exact_refusal(root: str | Path, argv: list[str]) -> str | None:
    """Why even the exact command line may not be approved for the session; None when it may."""
    program = os.path.basename(argv[0])
    if program in ONCE_ONLY or program.startswith(("mkfs.", "python", "pip")):
        return ONCE_ONLY.get(program, "an interpreter runs a script or inline code")
    if "/" in argv[0]:
        return f"{argv[0]} is a script or a program named by its path, which can change between runs"
    risky = next((w for w in argv[1:] if w.startswith("-") and _RISKY_FLAG.match(w)), None)
    if risky:
        return f"{risky} may name a config, a script or an output"
    leaving = _words_leave(root, argv[1:])
    if leaving:
        return f"{leaving!r} names a path outside the workspace"
    return None


def shell_offer(command: str, root: str | Path = ".") -> ShellOffer:
    """Which session approval `command` may get (read-only, exact or none), said in one line for the dialog."""
    argv = simple_argv(command.strip())
    if isinstance(argv, str):
        return ShellOffer(None, None, f"Allow once only: {argv}.")
    read_only = _read_only(root, argv)
    if read_only is not None and read_only[1] is None:
        scope = read_only[0]
        shown = shlex.join(scope)
        return ShellOffer(
            "read-only",
            scope,
            f"'Allow for the session' runs `{shown}` without asking when it only reads: as one simple command, "
            f"with the flags on its read-only allowlist and paths inside the workspace; anything else is asked again.",
        )
    # a read-only program used otherwise says why; any other program may get the exact line
    why = read_only[1] if read_only is not None else _exact_refusal(root, argv)
    if why is None:
        return ShellOffer(
            "exact",
            (command.strip(),),
            "'Allow for the session' covers this exact command line only (it is not on the read-only "
            "allowlist); any other arguments are asked again.",
        )
    return ShellOffer(None, None, f"Allow once only: {why}.")


def offer_covers(prefix: tuple[str, ...], command: str, root: str | Path = ".") -> bool:
    """True when a session approval (`ShellOffer.prefix`) covers `command`."""
    kind, *scope = prefix
    if kind == "exact":
        return tuple(scope) == (command.strip(),) and shell_offer(command, root).kind == "exact"
    offer = shell_offer(command, root)
    return offer.kind == "read-only" and offer.scope == tuple(scope)
