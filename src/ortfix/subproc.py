"""Every subprocess ortfix starts goes through here: argv lists only, UTF-8, an environment chosen on purpose.

Every child runs in a session (and so a process group) of its own, and every wait has a limit: when it is reached, or
when ortfix is interrupted, the child's whole process group is killed and its pipes closed. Killing only the child
is not enough: a child that leaves a background process holding its stdout would keep `communicate` waiting forever.
A child in its own session does not get the terminal's Ctrl-C; ortfix gets it (KeyboardInterrupt) and ends the
group itself.

Windows has no sessions or process groups to signal: there a child is started in a new process group (so the
console's Ctrl-C goes to ortfix only) and put into a job object of its own right after it starts (what it starts
later joins the job), and ending it terminates the job: the child and everything it started. The one gap: a process
the child starts in the instant before it is assigned to the job is not in it. Where a job cannot be made, `taskkill
/T /F` (System32's) ends the tree, then TerminateProcess the child itself (wine's taskkill has no /T).

A child that runs a target environment's code (its interpreter, pip or uv for it, the load check, ORT runs) is
started with `target_python=` that interpreter: right before the start, target/owner.py refuses it when ortfix runs
as root and another user controls that environment. Every caller says, `None` for ortfix's own interpreter and the
system's tools: the argument has no default.

`ORTFIX_CHILD_TIMEOUT=SECONDS` (for tests) lowers every limit to at most that many seconds.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from ortfix.errors import OrtfixError
from ortfix.target.owner import require_trusted

# Variables that change what a child Python or pip does behind our back.
_PYTHON_NOISE = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONINSPECT", "PYTHONSAFEPATH")

# Windows: the child gets a process group of its own (the console's Ctrl-C is not sent to it).
_NEW_GROUP = getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0) if sys.platform == "win32" else 0

# How long a process group gets to end after SIGTERM before it gets SIGKILL.
TERMINATE_GRACE = 5.0


def child_env(base: Mapping[str, str] | None = None, **overrides: str | None) -> dict[str, str]:
    """A copy of the environment (the current one by default) without variables that would skew a child Python.

    `LD_LIBRARY_PATH` is kept: it decides what the loader sees, exactly as it would for the user.
    An override of None removes the variable.
    """
    env = dict(os.environ if base is None else base)
    for name in _PYTHON_NOISE:
        env.pop(name, None)
    env["PYTHONIOENCODING"] = "utf-8"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    for key, value in overrides.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def child_timeout(seconds: float) -> float:
    """`seconds`, or less when ORTFIX_CHILD_TIMEOUT asks for less (a value that is not a positive number is
    ignored)."""
    text = os.environ.get("ORTFIX_CHILD_TIMEOUT")
    if not text:
        return seconds
    try:
        cap = float(text)
    except ValueError:
        return seconds
    return min(seconds, cap) if math.isfinite(cap) and cap > 0 else seconds


def _name(proc: subprocess.Popen[str]) -> str:
    args = proc.args  # always a list here (_popen), but typed as anything Popen takes
    return Path(str(args[0] if isinstance(args, list) and args else args)).name


def _signal_group(pgid: int, sig: int) -> bool:
    """Send sig to the process group; False when it has no process left."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:  # a member became another user's (setuid): nothing more ortfix can do
        return False
    return True


def close_child_pipes(proc: subprocess.Popen[str]) -> None:
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()


def terminate_group(proc: subprocess.Popen[str], *, timeout: float = TERMINATE_GRACE,
                    close_pipes: bool = True) -> int | None:
    """End `proc` and every process of its process group (a child of `start`/`run` leads a group of its own):
    SIGTERM to the group, up to `timeout` seconds for it to end, then SIGKILL to whatever is left; then its pipes
    are closed. Returns the child's exit status (None only if it could not be reaped).

    Safe to call on a process that has already ended. Never waits for a pipe: a process that left the group (a
    daemon that called setsid) can hold the child's output open forever. `close_pipes=False` when another thread is
    reading them (it gets end-of-file once the group is gone; closing under it would break its read)."""
    if sys.platform == "win32":
        _end_tree_windows(proc, timeout)
        if close_pipes:
            close_child_pipes(proc)
        return proc.returncode
    pgid = proc.pid  # start_new_session=True: the child is the leader of a group with its own pid as id
    deadline = time.monotonic() + max(timeout, 0.0)
    if _signal_group(pgid, signal.SIGTERM):
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=max(deadline - time.monotonic(), 0.0))
        # The leader may be gone while others of its group are still ending.
        while time.monotonic() < deadline and _signal_group(pgid, 0):
            time.sleep(0.02)
        _signal_group(pgid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):  # SIGKILL cannot be ignored: only a hung kernel task
        proc.wait(timeout=max(timeout, 1.0))
    if close_pipes:
        close_child_pipes(proc)
    return proc.returncode


_JOBS: dict[int, int] = {}  # Windows: child pid -> the handle of the job object holding it and what it started


def _put_in_job(proc: subprocess.Popen[str]) -> None:
    """Windows: a job object of its own for the child, so that ending it ends what it started too."""
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


def running_image(pid: int) -> str | None:
    """Windows: the executable of the process `pid` while it runs (QueryFullProcessImageNameW), None when no such
    process runs (or it cannot be opened); "" when it runs but its image cannot be read. Elsewhere None: /proc says
    more there, and the callers read it."""
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
    """Windows: end every process in the child's job (`terminate`) and let the job go; False when it had none."""
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


def _end_tree_windows(proc: subprocess.Popen[str], timeout: float) -> None:
    """End the child and every process it started (its job; else taskkill /T, which walks the parent links), then
    reap it."""
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


def _popen(args: list[str], env: Mapping[str, str] | None, *, stdin: int, target_python: str | Path | None,
           cwd: Path | None = None) -> subprocess.Popen[str]:
    if target_python is not None:
        require_trusted(target_python)  # at the moment of launch: what is checked is what starts
    try:
        proc = subprocess.Popen(
            args,
            env=dict(env) if env is not None else child_env(),
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            errors="replace",
            cwd=cwd,
            start_new_session=sys.platform != "win32",
            creationflags=_NEW_GROUP,
        )
    except FileNotFoundError as exc:
        raise OrtfixError(f"cannot run {args[0]}: not found") from exc
    except PermissionError as exc:
        raise OrtfixError(f"cannot run {args[0]}: permission denied") from exc
    except OSError as exc:  # e.g. ENOEXEC: a file that is not a program
        raise OrtfixError(f"cannot run {args[0]}: {exc.strerror or exc}") from exc
    _put_in_job(proc)
    return proc


def _communicate(proc: subprocess.Popen[str], timeout: float, input_text: str | None = None
                 ) -> subprocess.CompletedProcess[str]:
    """Wait for proc to end and close its output, at most `timeout` seconds; on timeout or interruption its whole
    process group is ended."""
    limit = child_timeout(timeout)
    try:
        out, err = proc.communicate(input_text, timeout=limit)
    except BaseException as exc:  # the limit, Ctrl-C (the child, in its own session, did not get it)...: no orphans
        terminate_group(proc, timeout=2.0)
        if isinstance(exc, subprocess.TimeoutExpired):
            raise OrtfixError(f"{_name(proc)} did not finish within {limit:g} s",
                              hint="it, or a process it started, kept running; all of them were stopped") from exc
        raise
    _close_job(proc, terminate=False)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def run(
    argv: Sequence[str | Path],
    *,
    target_python: str | Path | None,
    env: Mapping[str, str] | None = None,
    timeout: float = 60.0,
    input_text: str | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run argv to completion and capture its output; a missing program is an OrtfixError, not a traceback, and so
    is a child (or anything it started) still holding its output after `timeout` seconds. `target_python`: the
    target interpreter whose environment's code the child runs (checked by target/owner.py), None when it runs only
    ortfix's own or the system's code."""
    args = [str(a) for a in argv]
    proc = _popen(args, env, stdin=subprocess.PIPE if input_text is not None else subprocess.DEVNULL,
                  target_python=target_python, cwd=cwd)
    return _communicate(proc, timeout, input_text)


def start(argv: Sequence[str | Path], *, target_python: str | Path | None,
          env: Mapping[str, str] | None = None) -> subprocess.Popen[str]:
    """Start argv in the background (so ortfix can do other work meanwhile), in a session of its own; read it with
    `finish`, or end it (and everything it started) with `terminate_group`. `target_python`: as for `run`."""
    return _popen([str(a) for a in argv], env, stdin=subprocess.DEVNULL, target_python=target_python)


def finish(proc: subprocess.Popen[str], *, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Wait for a child of `start` (its output closed), at most `timeout` seconds; then its process group is killed
    and this is an OrtfixError."""
    return _communicate(proc, timeout)


def installer_alive(pid: int, python: str) -> bool:
    """Whether `pid` is still a process of the target's installer (a pip an interrupted apply left running). On
    Windows, whether `pid` still runs the target's python.exe (a process's command line is not readable there; a
    venv's python.exe is the launcher that waits for its interpreter, so its pid is the one ortfix started); an image
    that cannot be read counts as running, the safe answer."""
    if sys.platform == "win32":
        image = running_image(pid)
        return image is not None and (image == "" or os.path.normcase(image) == os.path.normcase(python))
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    args = [c.decode(errors="replace") for c in cmdline if c]
    return any(a == python for a in args) and ("pip" in args or "install" in args)
