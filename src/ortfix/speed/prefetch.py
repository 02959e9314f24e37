"""Start the probe before the command line is even parsed.

The probe is a separate interpreter that needs ~20 ms of its own; importing the CLI takes about as long. For `check`
and `plan` (cli/invocation.PREFETCHED), the entry point starts the probe first so both happen at once, and
`facts.gather` takes the running process if it was started for the same interpreter. Anything unusual (a command
line cli/invocation.py cannot follow, an error resolving --python) simply leaves the work to the normal path, which
reports errors properly.

In the plain cases speed/early.py has started it already, before anything was imported; `start` keeps that one when
it runs exactly what would be started here. A replay, and the check that runs in full, wait for it without
`subprocess` (proberun.EarlyProbe, childtime.collect); `wait` returns its output (a CompletedProcess, or a Finished).
"""

from __future__ import annotations

import os

from ortfix.childtime import Finished
from ortfix.speed import early

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (2 ms) on the path of `check`
if TYPE_CHECKING:
    import subprocess

    from ortfix.target.proberun import ProbeRun

_started: tuple[str, ProbeRun | early.Started] | None = None


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
    """The early probe runs exactly what choose.start_probe would start for `target`: the same command line, which
    imports the probe's copy from ortfix's cache folder, and the same environment. speed/early.py checked that copy
    as choose._cached_probe checks it (the folder only this user's, as root root's alone, the text the probe's) right
    before starting it: once it runs, looking again would protect nothing, so the command line is compared as
    written, without reading the copy again."""
    from ortfix.cachedir import cache_folder
    from ortfix.target import probecmd

    base = cache_folder()
    if started.target != target or base is None:
        return False
    source = probecmd.probe_source()
    module = probecmd.cached_module(base, source)
    return started.argv == probecmd.probe_argv(target, source, module) and started.env == probecmd.probe_env()


def _drop() -> None:
    global _started
    run = _started[1] if _started is not None else None
    _started = None
    if isinstance(run, early.Started):
        early.end(run)
    elif run is not None and not isinstance(run, Finished):
        import subprocess  # a Popen or a CompletedProcess: imported already

        if isinstance(run, subprocess.Popen) and run.poll() is None:
            from ortfix import subproc

            subproc.terminate_group(run, timeout=0)


def finished(target: str | os.PathLike[str]) -> subprocess.CompletedProcess[str] | Finished:
    """The probe's result for `target`, waiting for the one started early (or starting one now); it stays here for
    the `take` that follows, so the probe runs once however many look at its report (a replayed check that turns
    out to need the full check)."""
    global _started
    target = os.fspath(target)
    done = wait(target)
    _started = (target, done)
    return done


def wait(target: str | os.PathLike[str]) -> subprocess.CompletedProcess[str] | Finished:
    """The probe's result for `target`: the one started early, else one started now, waited for."""
    from ortfix.target.choose import start_probe
    from ortfix.target.proberun import probe_result

    return probe_result(take(target) or start_probe(target))


def take(target: str | os.PathLike[str]) -> ProbeRun | None:
    """The probe started early for `target`, running or finished, if any (each is handed out once): one started by
    speed/early.py as a proberun.EarlyProbe, waited for without `subprocess`."""
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
        from ortfix.target.proberun import EarlyProbe

        return EarlyProbe(run.argv, run.pid, run.stdout_fd, run.stderr_fd)
    return run
