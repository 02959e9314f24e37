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

`ORTFIX_CHILD_TIMEOUT=SECONDS` (for tests) lowers every limit to at most that many seconds (childtime.py).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence

from ortfix.childtime import child_timeout as child_timeout  # re-exported: every wait on a child applies it
from ortfix.errors import OrtfixError
from ortfix.i18n import N_, Msg
from ortfix.system import pathform
from ortfix.system.host import HOST
from ortfix.target.owner import require_trusted

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from pathlib import Path

CANNOT_RUN = N_("cannot run {program}: {reason}")  # a program that could not start (target/choose.py reads it)

# Variables that change what a child Python or pip does behind our back.
_PYTHON_NOISE = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONINSPECT", "PYTHONSAFEPATH")

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


def _name(proc: subprocess.Popen[str]) -> str:
    args = proc.args  # always a list here (_popen), but typed as anything Popen takes
    return pathform.name(str(args[0] if isinstance(args, list) and args else args))


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
    HOST.end_tree(proc, timeout)
    if close_pipes:
        close_child_pipes(proc)
    return proc.returncode


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
            start_new_session=HOST.new_session,
            creationflags=HOST.creation_flags,
        )
    except FileNotFoundError as exc:
        raise OrtfixError(Msg(CANNOT_RUN, program=str(args[0]), reason=Msg(N_("not found")))) from exc
    except PermissionError as exc:
        raise OrtfixError(Msg(CANNOT_RUN, program=str(args[0]), reason=Msg(N_("permission denied")))) from exc
    except OSError as exc:  # e.g. ENOEXEC: a file that is not a program
        raise OrtfixError(Msg(CANNOT_RUN, program=str(args[0]), reason=str(exc.strerror or exc))) from exc
    HOST.after_start(proc)
    return proc


def _communicate(proc: subprocess.Popen[str], timeout: float, input_text: str | None = None
                 ) -> subprocess.CompletedProcess[str]:
    """Wait for proc to end and close its output, at most `timeout` seconds; on timeout or interruption its whole
    process group is ended."""
    limit = child_timeout(timeout)
    try:
        out, err = proc.communicate(input_text, timeout=limit)
    except BaseException as exc:  # the limit, Ctrl-C (the child, in its own session, did not get it)...: no orphans
        if isinstance(exc, subprocess.TimeoutExpired):
            raise overdue(proc, limit) from exc
        terminate_group(proc, timeout=2.0)
        raise
    HOST.release(proc)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def overdue(proc: subprocess.Popen[str], limit: float) -> OrtfixError:
    """The error for a child still running (or holding its output) after `limit` seconds, once its whole process
    group has been ended."""
    terminate_group(proc, timeout=2.0)
    return OrtfixError(Msg(N_("{program} did not finish within {seconds} s"), program=_name(proc),
                           seconds=f"{limit:g}"),
                       hint=Msg(N_("it, or a process it started, kept running; all of them were stopped")))


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


class _Adopted(subprocess.Popen[str]):
    """A child started before `subprocess` was imported (speed/early.py), taken over as the Popen `start` would have
    made: Popen's own set-up, with the child's pipes and pid given instead of made (its two hooks for that)."""

    def __init__(self, argv: list[str], pid: int, stdout_fd: int, stderr_fd: int) -> None:
        self._given = (pid, stdout_fd, stderr_fd)
        super().__init__(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8",
                         errors="replace")

    def _get_handles(self, stdin: object, stdout: object, stderr: object) -> tuple[int, ...]:
        _pid, stdout_fd, stderr_fd = self._given
        return -1, -1, stdout_fd, -1, stderr_fd, -1  # (stdin's two ends, stdout's, stderr's): the parent's ends only

    def _execute_child(self, *_args: object) -> None:
        self.pid = self._given[0]
        self._child_created = True
        self._closed_child_pipe_fds = True


def adopt(argv: list[str], pid: int, stdout_fd: int, stderr_fd: int) -> subprocess.Popen[str]:
    """The child `pid`, started as `start` starts one (in a session of its own, stdin from the null device) with
    `argv`, its stdout and stderr read from these descriptors, as a Popen of `start`'s: `finish` and
    `terminate_group` treat it as theirs. Raises (and ends the child's group) if Popen cannot take it over."""
    try:
        return _Adopted(argv, pid, stdout_fd, stderr_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        raise


def finish(proc: subprocess.Popen[str], *, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Wait for a child of `start` (its output closed), at most `timeout` seconds; then its process group is killed
    and this is an OrtfixError."""
    return _communicate(proc, timeout)


def installer_alive(pid: int, python: str) -> bool:
    """Whether `pid` is still a process of the target's installer (a pip an interrupted apply left running). On
    Windows, whether `pid` still runs the target's python.exe (a process's command line is not readable there; a
    venv's python.exe is the launcher that waits for its interpreter, so its pid is the one ortfix started); an image
    that cannot be read counts as running, the safe answer."""
    return HOST.installer_alive(pid, python)
