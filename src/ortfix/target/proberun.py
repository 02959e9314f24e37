"""The probe's run once started: the one speed/early.py started (EarlyProbe) or start_probe's Popen (target/choose.py),
waited for at most choose.PROBE_TIMEOUT, or ended at once with its whole process group. Imports no `subprocess`
until a Popen is handed to it: a fresh `check` starts no other child."""

from __future__ import annotations

from ortfix.childtime import Finished
from ortfix.target.choose import PROBE_TIMEOUT

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    import subprocess
    from typing import Union

    # The probe's run as finish_probe takes it: started (a Popen, or one started early), or ended already.
    ProbeRun = Union["subprocess.Popen[str]", "EarlyProbe", "subprocess.CompletedProcess[str]", Finished]


class EarlyProbe:
    """The probe speed/early.py started before `subprocess` was imported, as start_probe's Popen is for
    `probe_result`: waited for without `subprocess` (childtime.collect; a fresh `check` starts no other child, and
    importing it is ~20M instructions), with the same time limit and error, its whole process group ended past
    that limit or when waiting is interrupted (Ctrl-C), as subproc.finish ends a Popen's."""

    __slots__ = ("args", "pid", "stderr_fd", "stdout_fd")

    def __init__(self, args: list[str], pid: int, stdout_fd: int, stderr_fd: int) -> None:
        self.args = args
        self.pid = pid
        self.stdout_fd = stdout_fd
        self.stderr_fd = stderr_fd

    def finish(self) -> Finished:
        """Its output and exit status, waited for once."""
        from ortfix.childtime import child_timeout, collect

        limit = child_timeout(PROBE_TIMEOUT)
        try:
            done = collect(self.pid, self.args, self.stdout_fd, self.stderr_fd, limit)
        except BaseException:
            from ortfix import subproc

            subproc.terminate_group(self.adopted(), timeout=2.0)
            raise
        if done is None:
            from ortfix import subproc

            raise subproc.overdue(self.adopted(), limit)
        return done

    def adopted(self) -> subprocess.Popen[str]:
        """It as a Popen of subproc.start's (importing `subprocess`): for ending it, or for a caller that wants one."""
        from ortfix import subproc

        return subproc.adopt(self.args, self.pid, self.stdout_fd, self.stderr_fd)


def probe_result(run: ProbeRun) -> subprocess.CompletedProcess[str] | Finished:
    """The probe's output and exit status, waiting for it (at most PROBE_TIMEOUT) where it is still running."""
    if isinstance(run, EarlyProbe):
        return run.finish()
    if isinstance(run, Finished):
        return run
    import subprocess  # `run` is a Popen or a CompletedProcess: imported already

    if isinstance(run, subprocess.CompletedProcess):
        return run
    from ortfix import subproc

    return subproc.finish(run, timeout=PROBE_TIMEOUT)


def stop_probe(run: ProbeRun) -> None:
    """End the probe `run` at once, with its whole process group, if it may still be running (a check that
    failed before it was waited for)."""
    if isinstance(run, Finished):
        return
    if isinstance(run, EarlyProbe):
        run = run.adopted()
    import subprocess  # `run` is a Popen or a CompletedProcess: imported already

    if not isinstance(run, subprocess.CompletedProcess):
        from ortfix import subproc

        subproc.terminate_group(run, timeout=0)
