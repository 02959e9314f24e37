"""The installer of a pip-install step (pip_install.py) as it runs: its output streamed line by line to the terminal
and kept for reading afterwards, its pid handed over as soon as it has started (journaled: a rollback waits for a
live one), and the test-only fault injection that kills it once it has started writing into the environment."""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import IO

from ortfix import subproc
from ortfix.transaction.actions.base import StepContext, test_crash


def _pump(stream: IO[str], is_err: bool, output: Callable[[str, bool], None]) -> None:
    for line in iter(stream.readline, ""):
        output(line.rstrip("\n"), is_err)


def run_installer(argv: Sequence[str], python: str, environ: Mapping[str, str] | None, ctx: StepContext,
                  roots: Sequence[str], lines: list[str], started: Callable[[int], None]) -> int:
    """Run `argv` (the target's `python`'s installer) to its end; its exit status. Every output line goes to `ctx`
    and into `lines`; `started(pid)` is called before anything else happens."""

    def output(line: str, is_err: bool) -> None:
        lines.append(line)
        ctx.output(line, is_err)

    proc = subproc.start(argv, target_python=python, env=environ)
    started(proc.pid)
    threads = [threading.Thread(target=_pump, args=(proc.stdout, False, output), daemon=True),
               threading.Thread(target=_pump, args=(proc.stderr, True, output), daemon=True)]
    for t in threads:
        t.start()
    try:
        if ctx.crash_midway:
            _crash_when_writing(proc, roots)
        rc = proc.wait()
    except BaseException:
        subproc.terminate_group(proc, timeout=30, close_pipes=False)  # the output threads are still reading
        raise
    for t in threads:
        t.join(timeout=5)
    return rc


def _crash_when_writing(proc: subprocess.Popen[str], roots: Sequence[str]) -> None:
    # Fault injection: as soon as pip has started writing into the environment, kill it and die (kill -9).
    tops = {r: set(os.listdir(r)) if os.path.isdir(r) else set() for r in roots}
    while proc.poll() is None:
        for root, names in tops.items():
            with contextlib.suppress(OSError):
                if set(os.listdir(root)) - names:
                    proc.kill()
                    proc.wait()
                    test_crash()
        time.sleep(0.005)
    test_crash()
