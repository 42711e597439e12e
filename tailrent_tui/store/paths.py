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


def resolve_data_dir(flag: Path | str | None = None) -> Path:
    """The data directory: the flag, else `$TAILRENT_HOME`, else the platform's user data dir."""
    if flag:
        return Path(flag).expanduser()
    env = os.environ.get(ENV_HOME)
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_data_dir("tailrent"))


def sessions_root(data_dir: Path) -> Path:
    return Path(data_dir) / "sessions"


def new_session_id(now: float | None = None) -> str:
    """A sortable, readable id: creation time plus a random suffix (`20261102-090000-3fa9c1`)."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(time.time() if now is None else now))
    return f"{stamp}-{secrets.token_hex(3)}"


def check_name(name: str, what: str) -> str:
    """A name that is safe as one path component (ids, keys); a clear error otherwise."""
    if not isinstance(name, str) or not _SAFE_NAME.match(name) or ".." in name:
        raise ValueError(
            f"invalid {what} {name!r}: use 1-128 letters, digits, '_', '-' or '.', starting with a letter or digit"
        )
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
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
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
