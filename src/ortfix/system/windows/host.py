"""The host seam on Windows (`WindowsHost`): job objects and taskkill, `msvcrt.locking`, paths that compare without
case, MAX_PATH. Chosen by system/host.py; imported only on Windows (the tests on Linux run its portable parts)."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import sys
from pathlib import Path

# The byte msvcrt.locking locks: Windows byte locks are mandatory, so the pid written at the file's start stays
# readable by the process that is refused.
LOCK_OFFSET = 1 << 30
# Windows' MAX_PATH: a path of this many characters or more (its terminating NUL counted) is refused by the Win32
# calls that start a program or open a file, unless long paths are enabled (and even then by some).
MAX_PATH = 260

_JOBS: dict[int, int] = {}  # child pid -> the handle of the job object holding it and what it started


def running_image(pid: int) -> str | None:
    """The executable of the process `pid` while it runs (QueryFullProcessImageNameW), None when no such process
    runs (or it cannot be opened); "" when it runs but its image cannot be read. None off Windows."""
    if sys.platform != "win32" or pid <= 0:
        return None
    import ctypes
    from ctypes import wintypes

    k32 = ctypes.WinDLL("kernel32", use_last_error=True)
    k32.OpenProcess.restype = wintypes.HANDLE
    k32.OpenProcess.argtypes = [wintypes.DWORD, wintypes.BOOL, wintypes.DWORD]
    k32.GetExitCodeProcess.argtypes = [wintypes.HANDLE, ctypes.POINTER(wintypes.DWORD)]
    k32.QueryFullProcessImageNameW.argtypes = [wintypes.HANDLE, wintypes.DWORD, wintypes.LPWSTR,
                                               ctypes.POINTER(wintypes.DWORD)]
    k32.CloseHandle.argtypes = [wintypes.HANDLE]
    handle = k32.OpenProcess(0x1000, False, pid)  # PROCESS_QUERY_LIMITED_INFORMATION
    if not handle:
        return None
    try:
        code = wintypes.DWORD()
        if not k32.GetExitCodeProcess(handle, ctypes.byref(code)) or code.value != 259:  # STILL_ACTIVE
            return None
        size = wintypes.DWORD(32768)
        buf = ctypes.create_unicode_buffer(size.value)
        return buf.value if k32.QueryFullProcessImageNameW(handle, 0, buf, ctypes.byref(size)) else ""
    finally:
        k32.CloseHandle(handle)


def _close_job(proc: subprocess.Popen[str], *, terminate: bool) -> bool:
    """End every process in the child's job (`terminate`) and let the job go; False when it had none."""
    job = _JOBS.pop(proc.pid, None)
    if sys.platform != "win32" or job is None:
        return False
    import ctypes
    from ctypes import wintypes

    k32 = ctypes.WinDLL("kernel32", use_last_error=True)
    k32.TerminateJobObject.argtypes = [wintypes.HANDLE, wintypes.UINT]
    k32.CloseHandle.argtypes = [wintypes.HANDLE]
    ended = bool(k32.TerminateJobObject(job, 1)) if terminate else True
    k32.CloseHandle(job)
    return ended


class WindowsHost:
    """A Windows host (see system/host.py's `Host` for what each member answers)."""

    scripts_folder = "Scripts"  # venv, conda and python.org alike
    # Windows has no python3.exe worth running (the Store's alias opens the Store).
    python_names = ("python.exe",)
    max_path: int | None = MAX_PATH
    has_owners = False
    records_checks = False
    new_session = False
    creation_flags = getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)
    # msvcrt.locking's EACCES (EDEADLK after its retries), and errno 0 from wine's C runtime, which leaves errno unset
    # when LockFile fails.
    held_errnos = (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES, errno.EDEADLK, 0)
    unlink_while_open = False

    def runs_as_root(self) -> bool:
        return False

    def cache_base(self) -> Path:
        from platformdirs import user_cache_dir

        return Path(user_cache_dir("ortfix", appauthor=False))

    def fold_path(self, path: str) -> str:
        return path.replace("\\", "/").lower()

    def which(self, name: str) -> str | None:
        import shutil  # PATHEXT and the working folder first: shutil's Windows rules

        return shutil.which(name)

    def after_start(self, proc: subprocess.Popen[str]) -> None:
        """A job object of its own for the child, so that ending it ends what it started too."""
        if sys.platform != "win32":
            return
        import ctypes
        from ctypes import wintypes

        k32 = ctypes.WinDLL("kernel32", use_last_error=True)
        k32.CreateJobObjectW.restype = wintypes.HANDLE
        k32.CreateJobObjectW.argtypes = [ctypes.c_void_p, wintypes.LPCWSTR]
        k32.OpenProcess.restype = wintypes.HANDLE
        k32.OpenProcess.argtypes = [wintypes.DWORD, wintypes.BOOL, wintypes.DWORD]
        k32.AssignProcessToJobObject.argtypes = [wintypes.HANDLE, wintypes.HANDLE]
        k32.CloseHandle.argtypes = [wintypes.HANDLE]
        job = k32.CreateJobObjectW(None, None)
        if not job:
            return
        process = k32.OpenProcess(0x0100 | 0x0001, False, proc.pid)  # PROCESS_SET_QUOTA | PROCESS_TERMINATE
        assigned = bool(process) and bool(k32.AssignProcessToJobObject(job, process))
        if process:
            k32.CloseHandle(process)
        if assigned:
            _JOBS[proc.pid] = job
        else:
            k32.CloseHandle(job)

    def end_tree(self, proc: subprocess.Popen[str], timeout: float) -> None:
        """Its job; else taskkill /T, which walks the parent links."""
        if not _close_job(proc, terminate=True) and proc.poll() is None:
            taskkill = os.path.join(os.environ.get("SYSTEMROOT", "C:\\Windows"), "System32", "taskkill.exe")
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                subprocess.run([taskkill, "/T", "/F", "/PID", str(proc.pid)], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=max(timeout, 1.0),
                               check=False)
            with contextlib.suppress(OSError):
                proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=max(timeout, 1.0))

    def release(self, proc: subprocess.Popen[str]) -> None:
        _close_job(proc, terminate=False)

    def installer_alive(self, pid: int, python: str) -> bool:
        """Whether `pid` still runs the target's python.exe (a process's command line is not readable there; a venv's
        python.exe is the launcher that waits for its interpreter, so its pid is the one ortfix started); an image
        that cannot be read counts as running, the safe answer."""
        image = running_image(pid)
        return image is not None and (image == "" or os.path.normcase(image) == os.path.normcase(python))

    def try_lock(self, fd: int, *, shared: bool) -> None:
        """One kind of lock: Windows has no shared byte locks through msvcrt."""
        if sys.platform != "win32":
            raise OSError(errno.ENOSYS, "msvcrt.locking exists only on Windows")
        import msvcrt

        os.lseek(fd, LOCK_OFFSET, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)

    def unlock(self, fd: int) -> None:
        if sys.platform != "win32":
            return
        import msvcrt

        os.lseek(fd, LOCK_OFFSET, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
