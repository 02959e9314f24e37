"""One apply or rollback at a time per environment: a non-blocking lock on `<prefix>/.ortfix/lock` (`flock` on POSIX;
on Windows `msvcrt.locking` of one byte far past the file's end, so the pid written at its start stays readable by
the process that is refused).

The system drops the lock when the holder dies (Ctrl-C, kill -9, power loss), so a stale lock file never blocks
anyone: only a live process holds it. The holder's pid is written into the file for the error message.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ortfix.errors import OrtfixError
from ortfix.i18n import N_, Msg
from ortfix.system.host import HOST

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
        os.lseek(fd, 0, os.SEEK_SET)
        text = os.read(fd, 32).decode("ascii", errors="replace").strip()
    except OSError:
        return ""
    return f" (pid {text})" if text.isdigit() else ""


def _open_lock(prefix: str | Path) -> int:
    """The lock file, opened (created when missing) below the environment's root without following any link (a link
    planted at `.ortfix/lock` must not make root truncate another file)."""
    from ortfix.system.confine import EnvRoot

    with EnvRoot(prefix) as root:
        fd = root.open_file(f"{STATE_DIR}/{LOCK_NAME}")
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OrtfixError(Msg(N_("{path} is not a regular file"), path=str(lock_path(prefix))),
                          hint=Msg(N_("remove it; nothing was changed")))
    return fd


def acquire(prefix: str | Path) -> HeldLock:
    """Take the environment's lock at once or raise OrtfixError; `.ortfix` must exist already."""
    path = lock_path(prefix)
    created = not os.path.lexists(path)
    try:
        fd = _open_lock(prefix)
    except OSError as exc:
        raise OrtfixError(Msg(N_("cannot create the lock file {path}: {error}"), path=str(path),
                              error=str(exc.strerror or exc)),
                          hint=Msg(N_("is the environment writable? is it a symbolic link?"))) from exc
    try:
        HOST.try_lock(fd, shared=False)
    except OSError as exc:
        holder = _holder(fd)
        os.close(fd)
        if exc.errno in HOST.held_errnos:
            raise OrtfixError(Msg(N_("another ortfix apply or rollback is running on {prefix}{holder}"),
                                  prefix=str(Path(prefix)), holder=holder),
                              hint=Msg(N_("wait for it to finish, then try again"))) from exc
        raise OrtfixError(Msg(N_("cannot lock {path}: {error}"), path=str(path),
                              error=str(exc.strerror or exc))) from exc
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, str(os.getpid()).encode())
    return HeldLock(path=path, fd=fd, created=created)


def release(lock: HeldLock, *, remove: bool = False) -> None:
    """Drop the lock; `remove` also deletes the lock file (only a preflight that created it asks for that). On
    Windows the file is closed first: an open file cannot be deleted there."""
    if remove and HOST.unlink_while_open:
        _remove_lock_file(lock)
    with contextlib.suppress(OSError):
        HOST.unlock(lock.fd)
    with contextlib.suppress(OSError):
        os.close(lock.fd)
    if remove and not HOST.unlink_while_open:
        _remove_lock_file(lock)


def _remove_lock_file(lock: HeldLock) -> None:
    from ortfix.system.confine import EnvRoot

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
    from ortfix.system.confine import open_for_reading

    # Read-only, by path (`check` asks, and its cache records paths); never through a final link.
    try:
        fd = open_for_reading(lock_path(prefix))
    except (OSError, OrtfixError):
        return False
    try:
        HOST.try_lock(fd, shared=True)
    except OSError:
        return True
    else:
        with contextlib.suppress(OSError):
            HOST.unlock(fd)
    finally:
        os.close(fd)
    return False
