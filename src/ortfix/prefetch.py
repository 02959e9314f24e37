"""Start the probe before the command line is even parsed.

The probe is a separate interpreter that needs ~20 ms of its own; importing the CLI takes about as long. For `check`
and `plan`, the entry point starts the probe first so both happen at once, and `facts.gather` takes the running
process if it was started for the same interpreter. Anything unusual (a parse this sketch cannot follow, an error
resolving --python) simply leaves the work to the normal path, which reports errors properly.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

_started: tuple[Path, subprocess.Popen[str]] | None = None
_COMMANDS = ("check", "plan")


def _python_arg(argv: Sequence[str]) -> tuple[bool, str | None]:
    """(understood, --python value) from argv after the command name."""
    value = None
    for i, arg in enumerate(argv):
        if arg == "--python":
            if i + 1 >= len(argv):
                return False, None
            value = argv[i + 1]
        elif arg.startswith("--python="):
            value = arg.split("=", 1)[1]
        elif arg in ("-h", "--help"):
            return False, None
    return True, value


def start(argv: Sequence[str]) -> None:
    global _started
    if not argv or argv[0] not in _COMMANDS or os.environ.get("ORTFIX_NO_PREFETCH"):
        return
    understood, python = _python_arg(argv[1:])
    if not understood:
        return
    from ortfix.errors import OrtfixError
    from ortfix.target import resolve_target, start_probe

    try:
        target = resolve_target(python)
        _started = (target, start_probe(target))
    except OrtfixError:
        _started = None


def take(target: Path) -> subprocess.Popen[str] | None:
    """The probe started early for `target`, if any (each is handed out once)."""
    global _started
    if _started is None:
        return None
    early_target, proc = _started
    _started = None
    if early_target == target:
        return proc
    proc.kill()
    proc.communicate()
    return None
