"""Start the probe before the command line is even parsed.

The probe is a separate interpreter that needs ~20 ms of its own; importing the CLI takes about as long. For `check`
and `plan` (cli/invocation.PREFETCHED), the entry point starts the probe first so both happen at once, and
`facts.gather` takes the running process if it was started for the same interpreter. Anything unusual (a command
line cli/invocation.py cannot follow, an error resolving --python) simply leaves the work to the normal path, which
reports errors properly.

In the plain cases speed/early.py has started it already, before anything was imported; `start` keeps that one when
it runs exactly what would be started here. A replay waits for it without `subprocess` (early.collect); anyone else
gets it as a Popen of subproc.py's (subproc.adopt), or, once it has ended, as a CompletedProcess.
"""

from __future__ import annotations

import os

from ortfix.speed import early

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (2 ms) on the path of `check`
if TYPE_CHECKING:
    import subprocess

    from ortfix.check.facts import ProbeRun

_started: tuple[str, ProbeRun | early.Started | early.Finished] | None = None


def start(given: tuple[str | None] | None) -> None:
    """Start the probe of the target the command line names, `given` as cli/invocation.py reads it: (the --python
    value or None,); None (a command whose probe is not started early, a command line that reading cannot
    follow): nothing. The probe speed/early.py started is kept when it runs what would be started here."""
    global _started
    early_run = early.take()
    if given is None or os.environ.get("ORTFIX_NO_PREFETCH"):
        if early_run is not None:
            early.end(early_run)
        return
    from ortfix.errors import OrtfixError
    from ortfix.target.choose import resolve_interpreter, start_probe

    try:
        target = resolve_interpreter(given[0])
        run: ProbeRun | early.Started
        if early_run is not None and _runs_as_started(early_run, target):
            run, early_run = early_run, None
        else:
            run = start_probe(target)
        _started = (target, run)
    except OrtfixError:
        _started = None
        return
    finally:
        if early_run is not None:  # another target, another command line, or no target at all
            early.end(early_run)
    import atexit

    atexit.register(_drop)  # an error before the check takes it (a bad option, Ctrl-C) must not leave it running


def _runs_as_started(started: early.Started, target: str) -> bool:
    """The early probe runs exactly what choose.start_probe would start for `target`."""
    from ortfix.target import probecmd
    from ortfix.target.choose import probe_argv

    return started.target == target and started.argv == probe_argv(target) and started.env == probecmd.probe_env()


def _drop() -> None:
    global _started
    run = _started[1] if _started is not None else None
    _started = None
    if isinstance(run, early.Started):
        early.end(run)
    elif run is not None and not isinstance(run, early.Finished):
        import subprocess

        if isinstance(run, subprocess.Popen) and run.poll() is None:
            from ortfix import subproc

            subproc.terminate_group(run, timeout=0)


def finished(target: str | os.PathLike[str]) -> subprocess.CompletedProcess[str] | early.Finished:
    """The probe's result for `target`, waiting for the one started early (or starting one now); it stays here for
    the `take` that follows, so the probe runs once however many look at its report (a replayed check that turns
    out to need the full check)."""
    global _started
    target = os.fspath(target)
    if _started is not None and _started[0] == target and isinstance(_started[1], early.Started):
        done: subprocess.CompletedProcess[str] | early.Finished = _collect(_started[1])
    else:
        done = wait(target)
    _started = (target, done)
    return done


def _collect(started: early.Started) -> early.Finished:
    """The early probe's result, as subproc.finish would have it: past its time limit (or interrupted), its
    process group is ended, and the limit is the same OrtfixError."""
    global _started
    from ortfix.childtime import child_timeout
    from ortfix.target.choose import PROBE_TIMEOUT

    _started = None  # taken: whatever happens next ends it
    limit = child_timeout(PROBE_TIMEOUT)
    try:
        done = early.collect(started, limit)
    except BaseException:
        from ortfix import subproc

        subproc.terminate_group(_adopted(started), timeout=2.0)
        raise
    if done is None:
        from ortfix import subproc

        raise subproc.overdue(_adopted(started), limit)
    return done


def _adopted(started: early.Started) -> subprocess.Popen[str]:
    from ortfix import subproc

    return subproc.adopt(started.argv, started.pid, started.stdout_fd, started.stderr_fd)


def wait(target: str | os.PathLike[str]) -> subprocess.CompletedProcess[str]:
    """The probe's result for `target`: the one started early, else one started now, waited for."""
    import subprocess

    from ortfix import subproc
    from ortfix.target.choose import PROBE_TIMEOUT, start_probe

    run = take(target) or start_probe(target)
    return run if isinstance(run, subprocess.CompletedProcess) else subproc.finish(run, timeout=PROBE_TIMEOUT)


def take(target: str | os.PathLike[str]) -> ProbeRun | None:
    """The probe started early for `target`, running or finished, if any (each is handed out once), as a Popen or a
    CompletedProcess."""
    global _started
    if _started is None:
        return None
    early_target, run = _started
    _started = None
    if early_target != os.fspath(target):
        _started = (early_target, run)
        _drop()
        return None
    if isinstance(run, early.Started):
        return _adopted(run)
    if isinstance(run, early.Finished):
        import subprocess

        return subprocess.CompletedProcess(run.args, run.returncode, run.stdout, run.stderr)
    return run
