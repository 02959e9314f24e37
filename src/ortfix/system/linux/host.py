"""The host seam on Linux (`LinuxHost`) and the POSIX base it shares with any other POSIX system (`PosixHost`):
process groups and signals, `flock`, POSIX owners. Chosen by system/host.py."""

from __future__ import annotations

import errno
import os
import sys
import time

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    import subprocess
    from pathlib import Path


def _signal_group(pgid: int, sig: int) -> bool:
    """Send sig to the process group; False when it has no process left."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:  # a member became another user's (setuid): nothing more ortfix can do
        return False
    return True


def _running_member(pid: str, pgid: int) -> bool:
    """/proc/<pid>/stat says the process is in group `pgid` and not a zombie; a process gone meanwhile is not."""
    from pathlib import Path
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    fields = stat[stat.rfind(b")") + 2:].split()  # the name, in parentheses, may hold spaces and parentheses
    return len(fields) > 2 and fields[2] == str(pgid).encode() and fields[0] not in (b"Z", b"X")


def _runnable(path: str) -> bool:
    return os.path.exists(path) and os.access(path, os.F_OK | os.X_OK) and not os.path.isdir(path)


class PosixHost:
    """A POSIX host (see system/host.py's `Host` for what each member answers)."""

    scripts_folder = "bin"
    # python3 anywhere on PATH first, then python, as `uv` does.
    python_names = ("python3", "python")
    max_path: int | None = None
    has_owners = True
    records_checks = sys.version_info >= (3, 11)
    new_session = True
    creation_flags = 0
    held_errnos = (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES, errno.EDEADLK)
    unlink_while_open = True

    def runs_as_root(self) -> bool:
        return os.geteuid() == 0

    def cache_base(self) -> Path:
        from pathlib import Path

        from platformdirs import user_cache_dir

        return Path(user_cache_dir("ortfix", appauthor=False))

    def fold_path(self, path: str) -> str:
        return path

    def which(self, name: str) -> str | None:
        """`shutil.which(name)` as Python 3.11's POSIX branch answers it (tests/test_speed_fresh.py compares them)."""
        if os.path.dirname(name):
            return name if _runnable(name) else None
        path = os.environ.get("PATH")
        if path is None:
            try:
                path = os.confstr("CS_PATH")
            except (AttributeError, ValueError):
                path = os.defpath
        if not path:  # PATH='' finds nothing; PATH=':' looks in the working folder
            return None
        for folder in dict.fromkeys(path.split(os.pathsep)):  # each folder once, in order
            if _runnable(os.path.join(folder, name)):
                return os.path.join(folder, name)
        return None

    def after_start(self, proc: subprocess.Popen[str]) -> None:
        """Nothing to hold: `new_session` made the child the leader of a process group of its own."""

    def end_tree(self, proc: subprocess.Popen[str], timeout: float) -> None:
        import contextlib
        import signal
        import subprocess  # not at the top: a replayed `check` waits for its probe without it (speed/early.py)

        pgid = proc.pid  # start_new_session=True: the child is the leader of a group with its own pid as id
        deadline = time.monotonic() + max(timeout, 0.0)
        if _signal_group(pgid, signal.SIGTERM):
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(deadline - time.monotonic(), 0.0))
            # The leader may be gone while others of its group are still ending.
            while time.monotonic() < deadline and self._group_running(pgid):
                time.sleep(0.02)
            _signal_group(pgid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):  # SIGKILL cannot be ignored: only a hung kernel task
            proc.wait(timeout=max(timeout, 1.0))

    def _group_running(self, pgid: int) -> bool:
        """The group still has a process (a zombie counts: nothing more tells them apart here)."""
        return _signal_group(pgid, 0)

    def release(self, proc: subprocess.Popen[str]) -> None:
        """Nothing was held."""

    def installer_alive(self, pid: int, python: str) -> bool:
        """The process's command line (/proc) runs `python` with pip."""
        from pathlib import Path

        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return False
        args = [c.decode(errors="replace") for c in cmdline if c]
        return any(a == python for a in args) and ("pip" in args or "install" in args)

    def try_lock(self, fd: int, *, shared: bool) -> None:
        import fcntl

        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)

    def unlock(self, fd: int) -> None:
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_UN)


class LinuxHost(PosixHost):
    """Linux: as any POSIX host, with the XDG cache folder and /proc."""

    def _group_running(self, pgid: int) -> bool:
        """The group has a process that is not a zombie. An orphan the group's leader left is reparented to the
        system's reaper; under a container's PID 1 that reaps once a second or two (or never), its zombie kept
        `end_tree` waiting its whole grace period, though a zombie holds no file, pipe or memory."""
        if not _signal_group(pgid, 0):
            return False
        try:
            entries = os.listdir("/proc")
        except OSError:
            return True
        return any(_running_member(entry, pgid) for entry in entries if entry.isdigit())

    def cache_base(self) -> Path:
        # The XDG rule platformdirs applies on Linux, without its import cost on the hot path of `check`.
        from pathlib import Path

        from ortfix.system.cachebase import xdg_cache_base

        return Path(xdg_cache_base())
