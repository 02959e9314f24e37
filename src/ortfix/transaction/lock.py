"""One apply or rollback at a time per environment: a non-blocking `flock` on `<prefix>/.ortfix/lock`.

The kernel drops the lock when the holder dies (Ctrl-C, kill -9, power loss), so a stale lock file never blocks
anyone: only a live process holds it. The holder's pid is written into the file for the error message.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ortfix.errors import OrtfixError

STATE_DIR = ".ortfix"
LOCK_NAME = "lock"


def state_dir(prefix: str | Path) -> Path:
    return Path(prefix) / STATE_DIR


def lock_path(prefix: str | Path) -> Path:
    return state_dir(prefix) / LOCK_NAME


@dataclass(frozen=True)
class HeldLock:
    path: Path
    fd: int
    created: bool  # the lock file did not exist before (so a preflight that fails removes it again)


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", errors="replace").strip()
    except OSError:
        return ""
    return f" (pid {text})" if text.isdigit() else ""


def _open_lock(prefix: str | Path, flags: int) -> int:
    """The lock file, opened below the environment's descriptor without following any link (a link planted at
    `.ortfix/lock` must not make root truncate another file)."""
    from ortfix.transaction.confine import EnvRoot

    with EnvRoot(prefix) as root, root.parent(f"{STATE_DIR}/{LOCK_NAME}") as (dfd, name):
        fd = os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o644, dir_fd=dfd)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise OrtfixError(f"{lock_path(prefix)} is not a regular file", hint="remove it; nothing was changed")
        return fd


def acquire(prefix: str | Path) -> HeldLock:
    """Take the environment's lock at once or raise OrtfixError; `.ortfix` must exist already."""
    path = lock_path(prefix)
    created = not os.path.lexists(path)
    try:
        fd = _open_lock(prefix, os.O_RDWR | os.O_CREAT)
    except OSError as exc:
        raise OrtfixError(f"cannot create the lock file {path}: {exc.strerror or exc}",
                          hint="is the environment writable? is it a symbolic link?") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        holder = _holder(fd)
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise OrtfixError(f"another ortfix apply or rollback is running on {Path(prefix)}{holder}",
                              hint="wait for it to finish, then try again") from exc
        raise OrtfixError(f"cannot lock {path}: {exc.strerror or exc}") from exc
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    return HeldLock(path=path, fd=fd, created=created)


def release(lock: HeldLock, *, remove: bool = False) -> None:
    """Drop the lock; `remove` also deletes the lock file (only a preflight that created it asks for that)."""
    if remove:
        from ortfix.transaction.confine import EnvRoot

        with contextlib.suppress(OSError, OrtfixError), EnvRoot(lock.path.parent.parent) as root:
            root.unlink(f"{STATE_DIR}/{LOCK_NAME}")
    with contextlib.suppress(OSError):
        fcntl.flock(lock.fd, fcntl.LOCK_UN)
    with contextlib.suppress(OSError):
        os.close(lock.fd)


@contextlib.contextmanager
def held(prefix: str | Path) -> Iterator[HeldLock]:
    lock = acquire(prefix)
    try:
        yield lock
    finally:
        release(lock)


def is_held(prefix: str | Path) -> bool:
    """Whether a live process holds the environment's lock right now (False when there is no lock file)."""
    # Read-only, by path (`check` asks, and its cache records paths); never through a final link.
    try:
        fd = os.open(lock_path(prefix), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False
