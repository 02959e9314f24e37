"""How long ortfix waits for a child: `ORTFIX_CHILD_TIMEOUT=SECONDS` (for tests) lowers every limit to at most that
many seconds. Standard library only, apart from subproc.py (which applies it to every child) because the probe
started first (speed/early.py) is waited for before `subprocess` is imported, and, where nothing else needs
`subprocess` (a replayed or fresh `check`), without it: `collect` reads such a child's output and reaps it."""

from __future__ import annotations

import os


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
    import math  # only when the variable is set: a replayed `check` passes here, and math is a library to load

    return min(seconds, cap) if math.isfinite(cap) and cap > 0 else seconds


def await_end(pid: int, timeout: float) -> bool:
    """Wait up to `timeout` seconds for the child `pid` to end, told by the kernel through a pidfd (Popen's own wait
    looks with growing sleeps: a replayed check lost 2-4 ms there); the child is not reaped (`collect` reaps it).
    False where the system has no pidfd: nothing was waited for."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        return False
    import select

    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        poller.poll(_ms(timeout))
    finally:
        os.close(fd)
    return True


class Finished:
    """What a child read by `collect` said, as subprocess.CompletedProcess has it (`returncode` negative: the signal
    that ended it; stdout and stderr decoded as Popen's text mode decodes them)."""

    __slots__ = ("args", "returncode", "stderr", "stdout")

    def __init__(self, args: list[str], returncode: int, stdout: str, stderr: str) -> None:
        self.args = args
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr


def collect(pid: int, args: list[str], stdout_fd: int, stderr_fd: int, timeout: float) -> Finished | None:
    """Read the output of the child `pid` (running `args`) from these descriptors to its end and reap it, within
    `timeout` seconds; its pipes are then closed. None when it has not ended by then: it is left as it is, for the
    caller to end (subproc.adopt, then subproc.overdue). What subproc.finish does for a Popen, without importing
    `subprocess` (~20M instructions, as many as the probe's own start)."""
    import select
    import time

    deadline = time.monotonic() + timeout
    chunks: dict[int, list[bytes]] = {stdout_fd: [], stderr_fd: []}
    poller = select.poll()
    for fd in chunks:
        poller.register(fd, select.POLLIN)
    reading = set(chunks)
    while reading:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        for fd, _event in poller.poll(_ms(left)):
            data = os.read(fd, 65536)
            if data:
                chunks[fd].append(data)
            else:  # the end of its output: every process that held this pipe has closed it
                poller.unregister(fd)
                reading.discard(fd)
    status = _reaped(pid, deadline - time.monotonic())
    if status is None:
        return None
    for fd in chunks:
        os.close(fd)
    out, err = (_text(b"".join(chunks[fd])) for fd in (stdout_fd, stderr_fd))
    return Finished(args, os.waitstatus_to_exitcode(status), out, err)


def _reaped(pid: int, timeout: float) -> int | None:
    """The wait status of the child `pid` once it has ended, within `timeout` seconds (told by a pidfd where there
    is one, else looked at every millisecond); None if it has not ended by then."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        if not await_end(pid, left):
            time.sleep(min(left, 0.001))


def _ms(seconds: float) -> int:
    """`seconds` as poll's milliseconds, rounded up (poll(0) would not wait at all)."""
    return max(int(seconds * 1000) + 1, 0)


def _text(data: bytes) -> str:
    """`data` as Popen's text mode reads a child's output: UTF-8 with errors replaced, universal newlines."""
    return data.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")
