"""The probe started first of all: before ortfix imports `subprocess`, `pathlib` or any of its own modules.

A replayed `check` waits for the probe (~30 ms, most of it the target's own start) and did nothing else as long;
what ortfix imported before starting it (~20 ms: `subprocess`, `pathlib`, the target's choice) was spent before the
probe even began. So the entry point hands the command line here first, for the commands whose probe starts early
(cli/invocation.PREFETCHED), and the probe is started with `os.posix_spawn` and two pipes, in a session of its own,
with the command line and environment target/probecmd.py makes for it; speed/prefetch.py then takes it over
(target/proberun.EarlyProbe) once it has chosen the target the normal way: it is waited for without `subprocess`
(childtime.collect), with the normal path's time limit and errors, and ended as subproc.py ends any child. It is
taken over only when it runs exactly what the normal path would have started (the same interpreter path, command
line and environment), and is ended otherwise, or when choosing the target fails (that error is the normal path's to
report), or when ortfix exits before taking it over.

Only the plain cases are started here, each on the exact path target/choose.py would pick: `--python` naming an
interpreter called `python` or a folder with one of its interpreters in it, else an activated environment's
`bin/python`; on a POSIX host with `posix_spawn` and sessions, with the probe's copy already in ortfix's cache
folder; as root only where target/owner.py would let it start (checked here as subproc.start checks it, right
before the start). Anything else (a project's `.venv`, PATH, `~`, a
program that cannot be started) is left to the normal path, which reports what went wrong.

Imports nothing but `os`, `sys` and what it needs of ortfix that imports nothing more.
"""

from __future__ import annotations

import os

from ortfix.system.pathform import form

# Signals Python ignores in itself that a child gets back at their default (Popen's restore_signals).
_DEFAULT_SIGNALS = ("SIGPIPE", "SIGXFZ", "SIGXFSZ")


class Started:
    """The probe as started here: its pid, the read ends of its stdout and stderr, and what it runs."""

    __slots__ = ("argv", "env", "pid", "stderr_fd", "stdout_fd", "target")

    def __init__(self, target: str, argv: list[str], env: dict[str, str], pid: int, stdout_fd: int,
                 stderr_fd: int) -> None:
        self.target = target
        self.argv = argv
        self.env = env
        self.pid = pid
        self.stdout_fd = stdout_fd
        self.stderr_fd = stderr_fd


_started: Started | None = None


def spawn(given: tuple[str | None] | None) -> None:
    """Start the probe for `given` (cli/invocation.py's `prefetch`: (the --python value or None,), None for a
    command whose probe does not start early), where it is one of the plain cases; otherwise nothing."""
    global _started
    if given is None or os.environ.get("ORTFIX_NO_PREFETCH") or not hasattr(os, "posix_spawn"):
        return
    try:
        started = _spawn(given[0])
    except (OSError, ValueError):  # a working folder removed, a file that cannot be read: the normal path says so
        return
    if started is not None:
        import atexit

        _started = started
        atexit.register(drop)  # ortfix ending before speed/prefetch.py takes it over must not leave it running


def _spawn(python: str | None) -> Started | None:
    target = plain_target(python)
    if target is None:
        return None
    from ortfix.system.cachebase import plain_cache_dir
    from ortfix.target import owner, probecmd

    base = plain_cache_dir()
    if base is None or (os.geteuid() == 0 and not owner.only_root_controls(base)):
        return None  # as root, as choose._cached_probe: the probe's copy is imported only from a folder root's alone
    source = probecmd.probe_source()
    folder, name = probecmd.cached_module(base, source)
    if not probecmd.only_mine(folder) or not probecmd.holds(folder, name, source):
        return None
    argv, env = probecmd.probe_argv(target, source, (folder, name)), probecmd.probe_env()
    if owner.refusal(target) is not None:  # as subproc.start checks it, at the moment of launch; refused: the
        return None  # normal path says so
    return _start(target, argv, env)


def _start(target: str, argv: list[str], env: dict[str, str]) -> Started | None:
    """posix_spawn with stdin from /dev/null, stdout and stderr into pipes, in a new session, signals Python
    ignores back at their default, and no file descriptor but those three (Popen's close_fds); None where it could
    not be started."""
    import _signal  # type: ignore[import-not-found]  # signal's own module builds enums: ~1M instructions

    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    if min(out_r, out_w, err_r, err_w) <= 2:  # ortfix started without a standard stream: Popen sorts that out
        for fd in (out_r, out_w, err_r, err_w):
            os.close(fd)
        return None
    actions: list[tuple[int, int] | tuple[int, int, int] | tuple[int, int, str, int, int]] = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDWR, 0), (os.POSIX_SPAWN_DUP2, out_w, 1),
        (os.POSIX_SPAWN_DUP2, err_w, 2)]
    try:
        actions += [(os.POSIX_SPAWN_CLOSE, fd) for fd in _inherited_fds()]
        pid = os.posix_spawn(target, argv, env, file_actions=actions, setsid=True,
                             setsigdef=[getattr(_signal, name) for name in _DEFAULT_SIGNALS
                                        if hasattr(_signal, name)])
    except (OSError, NotImplementedError, ValueError, TypeError):
        for fd in (out_r, err_r):
            os.close(fd)
        return None
    finally:
        for fd in (out_w, err_w):
            os.close(fd)
    return Started(target, argv, env, pid, out_r, err_r)


def _inherited_fds() -> list[int]:
    """This process's open descriptors above 2 that a child would inherit (OSError where they cannot be listed)."""
    listed = os.listdir("/proc/self/fd" if os.path.isdir("/proc/self/fd") else "/dev/fd")
    fds = []
    for entry in listed:
        fd = int(entry)
        try:
            if fd > 2 and os.get_inheritable(fd):
                fds.append(fd)
        except OSError:  # the listing's own descriptor, closed by now
            continue
    return fds


def take() -> Started | None:
    """The probe started here, if any, handed out once: whoever takes it ends it."""
    global _started
    started, _started = _started, None
    return started


def drop() -> None:
    """End the probe started here if nobody took it over (atexit)."""
    started = take()
    if started is not None:
        end(started)


def end(started: Started) -> None:
    """End a probe started here that is not wanted: its process group, at once; then reap it and close its pipes."""
    import contextlib
    import signal

    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(started.pid, sig)
        except OSError:
            break
    with contextlib.suppress(OSError):
        os.waitpid(started.pid, 0)
    for fd in (started.stdout_fd, started.stderr_fd):
        os.close(fd)


def plain_target(python: str | None) -> str | None:
    """The interpreter target/choose.choose_target picks, as str(the Path it returns), in the plain cases; None for
    any other (the normal path decides). `--python` naming a folder: its first interpreter as choose.py looks for
    them; naming a file called `python`: that file (canonical() keeps such a name); not given: the activated
    environment's bin/python (VIRTUAL_ENV, then CONDA_PREFIX)."""
    if python is None:
        for var in ("VIRTUAL_ENV", "CONDA_PREFIX"):
            prefix = os.environ.get(var)
            if prefix:
                candidate = form(os.path.join(prefix, "bin", "python"))
                return candidate if os.path.exists(candidate) else None
        return None
    if not python or python.startswith("~"):
        return None
    path = form(os.path.join(os.getcwd(), python))
    if os.path.isdir(path):
        from ortfix.target.places import INTERPRETER_PLACES

        for place in INTERPRETER_PLACES:
            candidate = os.path.join(path, *place)
            if os.path.exists(candidate):
                return candidate
        return None
    return path if os.path.basename(path) == "python" and os.path.isfile(path) else None
