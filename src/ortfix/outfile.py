"""Every file ortfix writes for the user (`plan -o`, `export -o` and its undo script, the wheelhouse's manifest) and
its own cache files: created new and renamed into place, never written through what is already at the name.

The folder is opened once; in it a new file with a name nobody else knows is created (`O_CREAT | O_EXCL |
O_NOFOLLOW`, owner-only until it is complete), written, given its mode (on that file, never on what the name pointed
to), flushed, and renamed over the name, relative to the same folder descriptor. A link planted at the name, or at
a name derived from it (`fix.undo.sh`), is replaced, and whatever it pointed to keeps its content and its mode; a
file of another user in a sticky folder (/tmp) cannot be replaced, which is said in one line. Windows has no folder
descriptors: the same steps run by path (O_EXCL refuses anything, a link included, at the temporary name)."""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

from ortfix.errors import OrtfixError

_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(
    os, "O_BINARY", 0)
_DIR = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)


def _create(folder: str, name: str, dir_fd: int | None) -> tuple[str, int]:
    """A new file of a fresh name in the folder: (its path, relative to `dir_fd` when there is one; its descriptor)."""
    for _ in range(100):
        tmp = f".{name[:80]}.{secrets.token_hex(6)}.tmp"
        where = tmp if dir_fd is not None else os.path.join(folder, tmp)
        try:
            return where, os.open(where, _NEW, 0o600, dir_fd=dir_fd)
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name for {name}")


def write_new(path: Path, data: bytes, mode: int) -> None:
    """Put `data` at `path` as a new file of `mode`, renamed into place (OSError when it cannot be)."""
    folder, name = str(path.parent), path.name
    with_fds = os.rename in os.supports_dir_fd and os.open in os.supports_dir_fd
    dir_fd = os.open(folder, _DIR) if with_fds else None
    try:
        where, fd = _create(folder, name, dir_fd)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                if hasattr(os, "fchmod"):
                    os.fchmod(f.fileno(), mode)
                f.flush()
                os.fsync(f.fileno())
            if not hasattr(os, "fchmod"):
                os.chmod(where, mode)
            if dir_fd is not None:
                os.replace(where, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            else:
                os.replace(where, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(where, dir_fd=dir_fd)
            raise
    finally:
        if dir_fd is not None:
            os.close(dir_fd)


def write_output(path: Path, text: str, *, mode: int = 0o644) -> None:
    """`write_new` of UTF-8 text (as it is: no newline translation) for a file the user asked for; one line
    (OrtfixError) when it cannot be written."""
    try:
        write_new(path, text.encode("utf-8"), mode)
    except OSError as exc:
        raise OrtfixError(f"cannot write {path}: {exc.strerror or exc}", hint="choose another file or folder") from exc
