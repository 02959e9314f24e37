"""Paths as `str`, answered as `pathlib.Path` answers them, without importing `pathlib` on POSIX.

`pathlib` costs a replayed `check` 18M instructions with what it imports (`fnmatch`, `ntpath`, `urllib.parse`,
`ipaddress`), and its Path was used there only to name files: choosing the target (target/choose.py), the probe's
and the replay cache's files. These functions keep what those paths print and how their errors read identical:
`form` writes a path as str(Path(path)) does, `is_dir`/`is_file`/`exists` raise the errors Path's do (a name too
long, a folder that cannot be searched) and answer False for the ones it ignores. On Windows (drives, UNC names,
"\\" and "/") each asks pathlib itself."""

from __future__ import annotations

import errno
import os
import stat

_WINDOWS = os.name == "nt"
# pathlib's _IGNORED_ERRNOS: a path that does not exist (or names a file as a folder) is simply not there.
_IGNORED = (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP)


def form(path: str | os.PathLike[str]) -> str:
    """`path` as str(pathlib.Path(path)) writes it: "." parts and repeated or trailing slashes dropped, ".." kept,
    a leading "//" kept (POSIX leaves its meaning to the system)."""
    path = os.fspath(path)
    if _WINDOWS:
        from pathlib import Path

        return str(Path(path))
    root = "//" if path.startswith("//") and not path.startswith("///") else "/" if path.startswith("/") else ""
    return root + "/".join(part for part in path.split("/") if part and part != ".") or "."


def absolute(path: str | os.PathLike[str]) -> str:
    """str(pathlib.Path(path).absolute()): the working folder joined in front of a relative path, nothing resolved."""
    path = os.fspath(path)
    if _WINDOWS:
        from pathlib import Path

        return str(Path(path).absolute())
    path = form(path)
    return path if path.startswith("/") else form(os.path.join(os.getcwd(), path))


def parent(path: str) -> str:
    """str(pathlib.Path(path).parent) for a path in `form`'s form."""
    if _WINDOWS:
        from pathlib import Path

        return str(Path(path).parent)
    return os.path.dirname(path) or "."


def name(path: str) -> str:
    """pathlib.Path(path).name: the last part, "" for a root or an empty path."""
    if _WINDOWS:
        from pathlib import Path

        return Path(path).name
    last = os.path.basename(form(path))
    return "" if last == "." else last


def _mode(path: str) -> int | None:
    """The mode of what `path` names (links followed); None where pathlib's Path says it is not there; the errors
    Path raises (anything else: EACCES on the way, ENAMETOOLONG)."""
    try:
        return os.stat(path).st_mode
    except OSError as exc:
        if exc.errno in _IGNORED or getattr(exc, "winerror", None) in (21, 123, 1921):
            return None
        raise
    except ValueError:  # a NUL byte, a name the file system encoding cannot write
        return None


def exists(path: str) -> bool:
    """pathlib.Path(path).exists()."""
    if _WINDOWS:
        from pathlib import Path

        return Path(path).exists()
    return _mode(path) is not None


def is_dir(path: str) -> bool:
    """pathlib.Path(path).is_dir()."""
    if _WINDOWS:
        from pathlib import Path

        return Path(path).is_dir()
    mode = _mode(path)
    return mode is not None and stat.S_ISDIR(mode)


def is_file(path: str) -> bool:
    """pathlib.Path(path).is_file()."""
    if _WINDOWS:
        from pathlib import Path

        return Path(path).is_file()
    mode = _mode(path)
    return mode is not None and stat.S_ISREG(mode)
