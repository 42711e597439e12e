"""What a session approval of run_shell covers: one simple command with an approved prefix.

"Allow `ls` for the session" must mean `ls` and its arguments, never `ls && rm -rf ~`.
A command is covered only when it parses (shlex, punctuation mode) as a single
simple command: no operator (`;`, `&&`, `|`, `&`), no redirection, no
substitution or expansion (`$`, backticks, globs, braces), no comment, no
newline, no leading variable assignment. Anything else is asked about again.
Destructive commands (rm, mv, dd, sudo, git push --force, ...), commands that
run other commands (bash -c, env, xargs, python -c, uv run, docker exec, git
submodule foreach) and commands whose arguments can run code or write any file
(sed, tar, rsync, awk, sort -o, curl -o, --output=) get no session offer: only
"allow once". Pure functions: no I/O, no Textual.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass

#: Characters the shell gives a meaning that shlex does not model: substitution and
#: expansion ($, `), globs and braces, comments, history, and line breaks.
_UNSAFE_CHARS = frozenset("$`*?[]{}#!\n\r\x00\x0b\x0c")
_OPERATOR_CHARS = frozenset(";&|()<>")

#: Programs whose second word names what they do (`git status`, `npm test`):
#: a session approval covers that subcommand only.
_SUBCOMMAND_PROGRAMS = frozenset(
    {"git", "hg", "svn", "npm", "pnpm", "yarn", "bun", "cargo", "go", "pip", "pip3", "uv", "poetry",
     "docker", "podman", "kubectl", "gh", "dotnet", "apt", "apt-get", "brew", "conda", "systemctl", "make"}
)
#: Interpreters: a session approval covers one script (`python run.py`) or module
#: (`python -m pytest`), never inline code (`python -c ...`).
_INTERPRETERS = frozenset(
    {"python", "python3", "python2", "node", "deno", "perl", "ruby", "php", "lua", "Rscript"}
)

#: Programs that delete, overwrite, escalate or run other commands: allow once only.
DESTRUCTIVE_PROGRAMS = frozenset(
    {
        "rm", "rmdir", "unlink", "shred", "mv", "cp", "dd", "truncate", "mkfs", "fdisk", "sfdisk",
        "parted", "wipefs", "mkswap", "chmod", "chown", "chgrp", "chattr", "ln", "install",
        "sudo", "su", "doas", "pkexec", "kill", "killall", "pkill", "reboot", "shutdown", "halt",
        "poweroff", "crontab", "tee",
        # they run another command, which a prefix approval would then cover whole
        "sh", "bash", "zsh", "dash", "ksh", "csh", "tcsh", "fish", "eval", "exec", "source", ".",
        "env", "xargs", "nohup", "timeout", "nice", "ionice", "time", "command", "builtin", "watch",
        "parallel", "ssh", "strace", "chroot", "unshare", "setsid", "stdbuf", "flock", "script", "busybox",
        "coproc", "trap", "enable", "npx", "pnpx", "bunx",
        # their arguments can run code or write any file (sed's `e` and `w`, tar's --to-command,
        # rsync -e, awk's system()): no prefix of theirs is safe to approve whole
        "sed", "tar", "rsync", "awk", "gawk", "mawk", "nawk", "vim", "vi", "nvim", "emacs", "less", "more",
    }
)

#: Subcommands that run another command (`uv run rm ...`, `docker run ...`, `git submodule foreach ...`):
#: an approval of the subcommand would cover whatever follows it.
_RUNNER_SUBCOMMANDS = frozenset({"run", "exec", "x", "dlx", "foreach", "bisect", "shell", "debug", "attach"})
#: Programs whose second word is a noun and whose third is the action (`gh repo delete`): the
#: prefix covers the action too, so approving `gh repo view` never covers `gh repo delete`.
_NOUN_VERB_PROGRAMS = frozenset({"gh", "docker", "podman", "kubectl", "systemctl", "conda"})
#: Programs whose -o (or -O) writes wherever it points (`sort -o ~/.bashrc`, `curl -o`, `wget -O`);
#: elsewhere -o means something else (`grep -o`). Any program's --output=FILE is treated alike.
_WRITES_WITH_O = frozenset({"sort", "shuf", "uniq", "curl", "wget"})

_GIT_DESTRUCTIVE = frozenset({"reset", "clean", "checkout", "restore", "rebase", "filter-branch", "rm", "mv",
                              "update-ref", "reflog", "gc", "prune", "stash", "switch"})


@dataclass(frozen=True)
class ShellOffer:
    """What the approval dialog may offer for one run_shell command."""

    prefix: tuple[str, ...] | None
    """the words a session approval would cover; None: allow once only"""
    allows: str
    """one line for the dialog: exactly what a session approval allows, or why none is offered"""

    @property
    def shown(self) -> str | None:
        return shlex.join(self.prefix) if self.prefix else None


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


def destructive(argv: list[str]) -> str | None:
    """Why `argv` deletes, overwrites, escalates or runs another command; None if it does none of that."""
    program = os.path.basename(argv[0])
    args = argv[1:]
    if program in DESTRUCTIVE_PROGRAMS or program.startswith("mkfs."):
        return f"{program} is destructive or runs other commands"
    if program == "git" and args:
        sub = args[0]
        if sub == "push" and any(a in ("-f", "--force", "--mirror", "--delete", "-d") or a.startswith(("--force", "+"))
                                 for a in args[1:]):
            return "git push --force rewrites a remote"
        if sub == "branch" and any(a in ("-D", "-d", "--delete", "-M", "-f", "--force") for a in args[1:]):
            return "git branch -D deletes a branch"
        if sub in _GIT_DESTRUCTIVE:
            return f"git {sub} can discard work"
    if program == "find" and any(a in ("-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprintf", "-fls")
                                 for a in args):
        return "find with -delete or -exec changes files or runs commands"
    if program in ("sed", "perl") and any(a == "--in-place" or a.startswith(("-i", "--in-place="))
                                          for a in args):
        return f"{program} -i rewrites files in place"
    if program == "rsync" and any(a.startswith("--delete") or a == "--remove-source-files" for a in args):
        return "rsync --delete removes files"
    if program in _INTERPRETERS and any(a in ("-c", "-e", "-E", "--eval", "-p", "-r") for a in args[:2]):
        return f"{program} {args[0]} runs inline code"
    if program in _SUBCOMMAND_PROGRAMS:
        runner = next((a for a in args[:2] if a in _RUNNER_SUBCOMMANDS), None)
        if runner is not None:
            return f"{program} {runner} runs another command"
    writes = [a for a in args if a.startswith(("--output", "--output-file", "--output-document"))]
    if program in _WRITES_WITH_O:
        writes += [a for a in args if a.startswith(("-o", "-O"))]
    if writes:
        return f"{program} {writes[0]} writes a file wherever it points"
    return None


def _prefix_of(argv: list[str]) -> tuple[str, ...] | None:
    program = os.path.basename(argv[0])
    if program in _SUBCOMMAND_PROGRAMS:
        if len(argv) < 2 or argv[1].startswith("-"):
            return None  # a global option first (git -C elsewhere ...): nothing stable to approve
        if program in _NOUN_VERB_PROGRAMS:
            if len(argv) < 3 or argv[2].startswith("-"):
                return None
            return (argv[0], argv[1], argv[2])
        return (argv[0], argv[1])
    if program in _INTERPRETERS:
        if len(argv) >= 3 and argv[1] == "-m":
            return tuple(argv[:3])
        if len(argv) >= 2 and not argv[1].startswith("-"):
            return tuple(argv[:2])
        return None
    return (argv[0],)


def shell_offer(command: str) -> ShellOffer:
    """What a session approval of `command` would cover, said in one line for the dialog."""
    argv = simple_argv(command.strip())
    if isinstance(argv, str):
        return ShellOffer(None, f"Allow once only: {argv}.")
    why = destructive(argv)
    if why:
        return ShellOffer(None, f"Allow once only: this command is destructive ({why}).")
    prefix = _prefix_of(argv)
    if prefix is None:
        return ShellOffer(None, "Allow once only: no stable command prefix to approve for the session.")
    shown = shlex.join(prefix)
    return ShellOffer(
        prefix,
        f"'Allow for the session' runs `{shown}` with any arguments without asking, as one simple "
        "command only: never with ;, &&, |, &, redirection, $, backticks, globs or a line break, "
        "and never a destructive command.",
    )


def prefix_covers(prefix: tuple[str, ...], command: str) -> bool:
    """True when `command` is one simple, non-destructive command that starts with `prefix`."""
    argv = simple_argv(command.strip())
    if isinstance(argv, str) or destructive(argv):
        return False
    # the command's own prefix, as the dialog would offer it, must be the approved one:
    # approving `gh repo view` never covers `gh repo delete`
    return _prefix_of(argv) == prefix
