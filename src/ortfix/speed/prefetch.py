"""Start the probe before the command line is even parsed.

The probe is a separate interpreter that needs ~20 ms of its own; importing the CLI takes about as long. For `check`
and `plan` (cli/invocation.PREFETCHED), the entry point starts the probe first so both happen at once, and
`facts.gather` takes the running process if it was started for the same interpreter. Anything unusual (a command
line cli/invocation.py cannot follow, an error resolving --python) simply leaves the work to the normal path, which
reports errors properly.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from ortfix.speed import early

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (2 ms) on the path of `check`
if TYPE_CHECKING:
    from ortfix.check.facts import ProbeRun

_started: tuple[Path, ProbeRun] | None = None


def start(given: tuple[str | None] | None) -> None:
    """Start the probe of the target the command line names, `given` as cli/invocation.py reads it: (the --python
    value or None,); None (a command whose probe is not started early, a command line that reading cannot
    follow): nothing. The probe speed/early.py started is taken over when it runs what would be started here."""
    global _started
    early_run = _take_early()
    if given is None or os.environ.get("ORTFIX_NO_PREFETCH"):
        return
    from ortfix.errors import OrtfixError
    from ortfix.target.choose import resolve_target, start_probe

    try:
        target = resolve_target(given[0])
        if early_run is not None and _runs_as_started(early_run, target):
            run, early_run = early_run[1], None
        else:
            run = start_probe(target)
        _started = (target, run)
    except OrtfixError:
        _started = None
        return
    finally:
        if early_run is not None:  # another target, another command line, or no target at all
            from ortfix import subproc

            subproc.terminate_group(early_run[1], timeout=0)
    import atexit

    atexit.register(_drop)  # an error before the check takes it (a bad option, Ctrl-C) must not leave it running


def _take_early() -> tuple[early.Started, subprocess.Popen[str]] | None:
    """The probe speed/early.py started, taken over as a Popen of subproc.py's."""
    started = early.take()
    if started is None:
        return None
    from ortfix import subproc

    return started, subproc.adopt(started.argv, started.pid, started.stdout_fd, started.stderr_fd)


def _runs_as_started(early_run: tuple[early.Started, subprocess.Popen[str]], target: Path) -> bool:
    """The early probe runs exactly what choose.start_probe would start for `target`."""
    from ortfix.target import probecmd
    from ortfix.target.choose import probe_argv

    started = early_run[0]
    return (started.target == str(target) and started.argv == probe_argv(target)
            and started.env == probecmd.probe_env())


def _drop() -> None:
    run = take_any()
    if isinstance(run, subprocess.Popen) and run.poll() is None:
        from ortfix import subproc

        subproc.terminate_group(run, timeout=0)


def take_any() -> ProbeRun | None:
    """Whatever probe was started early, taken so that nobody else gets it."""
    global _started
    run = _started[1] if _started is not None else None
    _started = None
    return run


def finished(target: Path) -> subprocess.CompletedProcess[str]:
    """The probe's result for `target`, waiting for the one started early (or starting one now); it stays here for
    the `take` that follows, so the probe runs once however many look at its report (a replayed check that turns
    out to need the full check)."""
    global _started
    done = wait(target)
    _started = (target, done)
    return done


def wait(target: Path) -> subprocess.CompletedProcess[str]:
    """The probe's result for `target`: the one started early, else one started now, waited for."""
    from ortfix import subproc
    from ortfix.target.choose import PROBE_TIMEOUT, start_probe

    run = take(target) or start_probe(target)
    return run if isinstance(run, subprocess.CompletedProcess) else subproc.finish(run, timeout=PROBE_TIMEOUT)


def take(target: Path) -> ProbeRun | None:
    """The probe started early for `target`, running or finished, if any (each is handed out once)."""
    global _started
    if _started is None:
        return None
    early_target, run = _started
    _started = None
    if early_target == target:
        return run
    if isinstance(run, subprocess.Popen):
        from ortfix import subproc

        subproc.terminate_group(run, timeout=0)
    return None
