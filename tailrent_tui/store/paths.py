"""Where sessions live, and how private files are written.

The data directory is `platformdirs.user_data_dir("tailrent")`, overridden by
the `TAILRENT_HOME` environment variable, overridden by the `--data-dir` flag.
Session directories are created with mode 0700 and every file with 0600: a
transcript holds whatever the user pasted into it.
"""

from __future__ import annotations

import os
import re
import secrets
import time
from pathlib import Path

import platformdirs

ENV_HOME = "TAILRENT_HOME"
DIR_MODE = 0o700
FILE_MODE = 0o600

_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


#: the environment variables that name directories: empty means unset, relative is made absolute
PATH_VARIABLES = ("TAILRENT_HOME", "TAILRENT_CONFIG_DIR")


def absolute_path(value: str | Path) -> Path:
    """`~` expanded and made absolute from the working directory (not resolved: symlinks stay)."""
    return Path(os.path.abspath(Path(value).expanduser()))


def path_from_env(var: str) -> Path | None:
    """A directory named by an environment variable: None when unset or empty, else absolute."""
    raw = os.environ.get(var, "")
    return absolute_path(raw) if raw.strip() else None


def normalize_path_env() -> None:
    """Make TAILRENT_HOME and TAILRENT_CONFIG_DIR absolute (or drop them when empty), once, at start.

    Everything this process runs afterwards (a tool's shell, a `tailrent` it
    starts) then finds the same directories, whatever its working directory.
    """
    for var in PATH_VARIABLES:
        path = path_from_env(var)
        if path is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = str(path)


def resolve_data_dir(flag: Path | str | None = None) -> Path:
    """The data directory, absolute: the flag, else `$TAILRENT_HOME`, else the platform's user data dir.

    An empty flag or variable means unset (`TAILRENT_HOME= tailrent` must not put
    sessions in the working directory); a relative one is taken from the working
    directory, once: the result is absolute.
    """
    if flag is not None and str(flag).strip():
        return absolute_path(flag)
    return path_from_env(ENV_HOME) or Path(platformdirs.user_data_dir("tailrent"))


def inside(path: Path | str, directory: Path | str) -> bool:
    """Whether `path`, once its symlinks are followed, lies in `directory` (or is it)."""
    return Path(path).resolve().is_relative_to(Path(directory).resolve())


def sessions_root(data_dir: Path) -> Path:
    return Path(data_dir) / "sessions"


def new_session_id(now: float | None = None) -> str:
    """A sortable, readable id: creation time plus a random suffix (`20261102-090000-3fa9c1`)."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(time.time() if now is None else now))
    return f"{stamp}-{secrets.token_hex(3)}"


def check_name(name: str, what: str) -> str:
    """A name that is safe as one path component (ids, keys); a clear error otherwise."""
    if not isinstance(name, str) or not _SAFE_NAME.match(name) or ".." in name:
        raise ValueError(f"invalid {what} {name!r}: use 1-128 letters, digits, '_', '-' or '.', starting with a letter or digit")
    return name


def ensure_private_dir(path: Path) -> Path:
    """Create a directory (and parents) with mode 0700; tighten it if it already exists."""
    path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    # mkdir's mode is filtered by the umask; chmod makes 0700 exact
    os.chmod(path, DIR_MODE)
    return path


def fsync_dir(path: Path) -> None:
    """Make a rename or a new file in `path` durable (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_file_atomic(path: Path, data: bytes) -> Path:
    """Write `data` to a temp file beside `path` (mode 0600), fsync it, rename it over `path`.

    A crash leaves either the old file or the new one, never half of either.
    """
    path = Path(path)
    tmp = path.with_name(temp_name(path.name))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)
    return path


# Temp files. A kill between the create and the rename of `write_file_atomic`
# leaves its temp file behind. Each one names its writer's pid, so the next
# start can tell a dead writer's leftover from a file that a live process is
# still writing: `clean_stale_temp_files` removes one only if that pid is not
# running (or, against a reused pid, if it has not been touched for a day).
# The names of older versions (no pid: the store's `.tmp`, the file tools'
# `.tailrent-tmp`) are removed once an hour old.

TEMP_SUFFIX = ".tailrent-tmp"
_TEMP_NAME = re.compile(r"^\..+\.(\d+)\.[0-9a-f]{8}\.tailrent-tmp$")
_OLD_TEMP_NAME = re.compile(r"^\..+\.[0-9a-f]{8}\.(tmp|tailrent-tmp)$")
STALE_LIVE_PID_SECONDS = 24 * 3600
STALE_NO_PID_SECONDS = 3600


def temp_name(name: str) -> str:
    """The temp file name for writing `name`: hidden, with the writer's pid and a random part.

    A long `name` is shortened (to 128 bytes of UTF-8) so that the temp name
    stays within the file system's 255-byte limit.
    """
    while len(name.encode("utf-8", "surrogateescape")) > 128:
        name = name[:-1]
    return f".{name}.{os.getpid()}.{secrets.token_hex(4)}{TEMP_SUFFIX}"


def _pid_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return pid > 0
    return True


def is_stale_temp(name: str, mtime: float, now: float | None = None) -> bool:
    """Whether `name` is a tailrent temp file that nobody will finish (see above)."""
    age = (time.time() if now is None else now) - mtime
    if m := _TEMP_NAME.match(name):
        pid = int(m.group(1))
        return pid != os.getpid() and (not _pid_running(pid) or age > STALE_LIVE_PID_SECONDS)
    return bool(_OLD_TEMP_NAME.match(name)) and age > STALE_NO_PID_SECONDS


def clean_stale_temp_files(*directories: Path | int) -> list[Path]:
    """Remove stale tailrent temp files directly inside `directories` (not below); returns what went.

    A directory is a path or an open directory fd (the file tools clean the
    directory they write into through the fd they opened beneath the workspace;
    what goes is then named by its bare name). Only tailrent's own temp names
    are touched, and only regular files, never through a symlink.
    """
    removed = []
    for directory in directories:
        at = directory if isinstance(directory, int) else None
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            try:
                if not entry.is_file(follow_symlinks=False):
                    continue
                if is_stale_temp(entry.name, entry.stat(follow_symlinks=False).st_mtime):
                    os.unlink(entry.name if at is not None else entry.path, dir_fd=at)
                    removed.append(Path(entry.path))
            except OSError:
                continue
    return removed
