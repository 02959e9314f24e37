"""The host seam: what ortfix's own process does differently on the machine it runs on, chosen once, here.

`HOST` is `system/linux/host.py`'s `LinuxHost` on Linux, `system/windows/host.py`'s `WindowsHost` on Windows, and
the POSIX base (`PosixHost`) on any other system; callers ask it (how a child's process tree is started and ended,
how a file is locked, where the cache folder and an environment's scripts are, whether files have POSIX owners)
instead of testing `sys.platform` or `os.name` themselves.

The target's operating system is a different question, asked of `Facts.platform` (system/platform.py): ortfix checks
a target on its own machine, so both name the same OS, but the host seam is needed before there is any target
(starting a subprocess, ortfix's cache, the environment's lock). So it sits at the bottom layer with `subproc.py` and
`cachedir.py`, which ask it, and imports nothing of ortfix's but `errors`. Where the environment's confined root is
chosen for the host: system/confine.py."""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (3 ms) before `check` starts its probe
if TYPE_CHECKING:  # the seam's type, for mypy: nothing imports it at run time
    import subprocess
    from pathlib import Path
    from typing import Protocol

    class Host(Protocol):
        """What is specific to the OS ortfix itself runs on (see the module docstring)."""

        @property
        def scripts_folder(self) -> str:
            """The folder below an environment's prefix where installers put its scripts ('bin'; Windows: 'Scripts')."""
            ...

        @property
        def python_names(self) -> tuple[str, ...]:
            """The interpreter names looked up on PATH when nothing names an environment, in order."""
            ...

        @property
        def max_path(self) -> int | None:
            """The path length (its terminating NUL counted) the Win32 calls refuse (MAX_PATH); None: no such limit."""
            ...

        @property
        def has_owners(self) -> bool:
            """Whether files carry POSIX owners and modes (uids), so a folder that only this user can write is told."""
            ...

        @property
        def records_checks(self) -> bool:
            """Whether `check`'s recorded shortcut can be used: POSIX stat semantics and Python 3.11 or later."""
            ...

        @property
        def new_session(self) -> bool:
            """Whether a child starts in a session (and process group) of its own (`start_new_session`)."""
            ...

        @property
        def creation_flags(self) -> int:
            """`creationflags` of a child (Windows: a process group of its own, so the console's Ctrl-C is not sent)."""
            ...

        @property
        def held_errnos(self) -> tuple[int, ...]:
            """The errnos of a lock another process holds."""
            ...

        @property
        def unlink_while_open(self) -> bool:
            """Whether an open file can be deleted (Windows refuses: the lock file is closed first)."""
            ...

        def runs_as_root(self) -> bool:
            """Whether ortfix runs as root (uid 0); never on Windows."""
            ...

        def cache_base(self) -> Path:
            """ortfix's cache folder when no variable names one."""
            ...

        def fold_path(self, path: str) -> str:
            """A path as this host compares paths: Windows folds case and takes "\\" for "/"."""
            ...

        def which(self, name: str) -> str | None:
            """`shutil.which(name)`: the program `name` on ortfix's own PATH (POSIX: without importing shutil, whose
            bz2 and lzma cost every check 12M instructions)."""
            ...

        def after_start(self, proc: subprocess.Popen[str]) -> None:
            """Hold a just-started child so that ending it ends what it started too (Windows: a job object)."""
            ...

        def end_tree(self, proc: subprocess.Popen[str], timeout: float) -> None:
            """End the child and every process it started (POSIX: its process group, SIGTERM then SIGKILL after
            `timeout` seconds; Windows: its job, else taskkill /T), then reap it."""
            ...

        def release(self, proc: subprocess.Popen[str]) -> None:
            """Let go of what `after_start` held for a child that has ended."""
            ...

        def installer_alive(self, pid: int, python: str) -> bool:
            """Whether `pid` is still a process of the target's installer (see subproc.installer_alive)."""
            ...

        def try_lock(self, fd: int, *, shared: bool) -> None:
            """Lock `fd` at once or raise OSError (one of `held_errnos` when another process holds it)."""
            ...

        def unlock(self, fd: int) -> None:
            """Drop the lock `try_lock` took."""
            ...


def _host() -> Host:
    if sys.platform == "win32":
        from ortfix.system.windows.host import WindowsHost

        return WindowsHost()
    if sys.platform.startswith("linux"):
        from ortfix.system.linux.host import LinuxHost

        return LinuxHost()
    from ortfix.system.linux.host import PosixHost

    return PosixHost()


HOST: Host = _host()
