"""One apply or rollback at a time per environment: a non-blocking lock on `<prefix>/.ortfix/lock` (`flock` on POSIX;
on Windows `msvcrt.locking` of one byte far past the file's end, so the pid written at its start stays readable by
the process that is refused).

The system drops the lock when the holder dies (Ctrl-C, kill -9, power loss), so a stale lock file never blocks
anyone: only a live process holds it. The holder's pid is written into the file for the error message.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ortfix.errors import OrtfixError

STATE_DIR = ".ortfix"
LOCK_NAME = "lock"
_WINDOWS_LOCK_OFFSET = 1 << 30  # the byte msvcrt.locking locks: Windows byte locks are mandatory, the pid stays free
# What a lock another process holds raises: flock's EWOULDBLOCK/EAGAIN; msvcrt.locking's EACCES (EDEADLK after its
# retries), and errno 0 from wine's C runtime, which leaves errno unset when LockFile fails.
_HELD_ERRNOS = (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES, errno.EDEADLK,
                *((0,) if sys.platform == "win32" else ()))


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
        os.lseek(fd, 0, os.SEEK_SET)
        text = os.read(fd, 32).decode("ascii", errors="replace").strip()
    except OSError:
        return ""
    return f" (pid {text})" if text.isdigit() else ""


def _open_lock(prefix: str | Path) -> int:
    """The lock file, opened (created when missing) below the environment's root without following any link (a link
    planted at `.ortfix/lock` must not make root truncate another file)."""
    from ortfix.transaction.confine import EnvRoot

    if sys.platform == "win32":
        with EnvRoot(prefix) as root:
            return root.open_file(f"{STATE_DIR}/{LOCK_NAME}")
    with EnvRoot(prefix) as root, root.parent(f"{STATE_DIR}/{LOCK_NAME}") as (dfd, name):
        fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o644, dir_fd=dfd)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OrtfixError(f"{lock_path(prefix)} is not a regular file", hint="remove it; nothing was changed")
    return fd


def _try_lock(fd: int, *, shared: bool = False) -> None:
    """Lock `fd` at once or raise OSError (EWOULDBLOCK, EAGAIN or EACCES when another process holds it)."""
    if sys.platform == "win32":
        import msvcrt

        os.lseek(fd, _WINDOWS_LOCK_OFFSET, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)  # Windows has no shared byte locks through msvcrt: one kind
        return
    import fcntl

    fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)


def _unlock(fd: int) -> None:
    if sys.platform == "win32":
        import msvcrt

        os.lseek(fd, _WINDOWS_LOCK_OFFSET, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
        return
    import fcntl

    fcntl.flock(fd, fcntl.LOCK_UN)


def acquire(prefix: str | Path) -> HeldLock:
    """Take the environment's lock at once or raise OrtfixError; `.ortfix` must exist already."""
    path = lock_path(prefix)
    created = not os.path.lexists(path)
    try:
        fd = _open_lock(prefix)
    except OSError as exc:
        raise OrtfixError(f"cannot create the lock file {path}: {exc.strerror or exc}",
                          hint="is the environment writable? is it a symbolic link?") from exc
    try:
        _try_lock(fd)
    except OSError as exc:
        holder = _holder(fd)
        os.close(fd)
        if exc.errno in _HELD_ERRNOS:
            raise OrtfixError(f"another ortfix apply or rollback is running on {Path(prefix)}{holder}",
                              hint="wait for it to finish, then try again") from exc
        raise OrtfixError(f"cannot lock {path}: {exc.strerror or exc}") from exc
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, str(os.getpid()).encode())
    return HeldLock(path=path, fd=fd, created=created)


def release(lock: HeldLock, *, remove: bool = False) -> None:
    """Drop the lock; `remove` also deletes the lock file (only a preflight that created it asks for that). On
    Windows the file is closed first: an open file cannot be deleted there."""
    if remove and sys.platform != "win32":
        _remove_lock_file(lock)
    with contextlib.suppress(OSError):
        _unlock(lock.fd)
    with contextlib.suppress(OSError):
        os.close(lock.fd)
    if remove and sys.platform == "win32":
        _remove_lock_file(lock)


def _remove_lock_file(lock: HeldLock) -> None:
    from ortfix.transaction.confine import EnvRoot

    with contextlib.suppress(OSError, OrtfixError), EnvRoot(lock.path.parent.parent) as root:
        root.unlink(f"{STATE_DIR}/{LOCK_NAME}")


@contextlib.contextmanager
def held(prefix: str | Path) -> Iterator[HeldLock]:
    lock = acquire(prefix)
    try:
        yield lock
    finally:
        release(lock)


def is_held(prefix: str | Path) -> bool:
    """Whether a live process holds the environment's lock right now (False when there is no lock file)."""
    from ortfix.transaction.confine import open_for_reading

    # Read-only, by path (`check` asks, and its cache records paths); never through a final link.
    try:
        fd = open_for_reading(lock_path(prefix))
    except (OSError, OrtfixError):
        return False
    try:
        _try_lock(fd, shared=True)
    except OSError:
        return True
    else:
        with contextlib.suppress(OSError):
            _unlock(fd)
    finally:
        os.close(fd)
    return False
