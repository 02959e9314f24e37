"""How long ortfix waits for a child: `ORTFIX_CHILD_TIMEOUT=SECONDS` (for tests) lowers every limit to at most that
many seconds. Standard library only, apart from subproc.py (which applies it to every child) because the probe
started first (speed/early.py) is waited for before `subprocess` is imported."""

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
    looks with growing sleeps: a replayed check lost 2-4 ms there); the child is not reaped. False where the system
    has no pidfd: nothing was waited for."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        return False
    import select

    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        poller.poll(max(int(timeout * 1000) + 1, 0))
    finally:
        os.close(fd)
    return True
