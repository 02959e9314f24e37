"""`ortfix check` without importing click.

`check` is the command people run most and the one whose speed is measured (scripts/bench_check.py); click alone
costs about a quarter of its run time. The entry point hands the plain forms of `check` here (`--python P`, `--json`,
`--driver V`, `--compute-capability X.Y`, each at most once); anything else (help, a typo, a repeated option,
another command) goes to the click CLI, which owns every message about the command line. Both paths call
`check_command`, so they print the same thing and exit the same way (tests/test_fastpath.py compares them).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

from ortfix.errors import ExitCode, OrtfixError

_VALUED = {"--python": "python", "--driver": "driver_version", "--compute-capability": "compute_capability"}


def parse_check(argv: Sequence[str]) -> dict[str, Any] | None:
    """The keyword arguments of `check_command` for a plain `check` command line, or None to leave it to click."""
    if not argv or argv[0] != "check":
        return None
    opts: dict[str, Any] = {"python": None, "as_json": False, "driver_version": None, "compute_capability": None}
    seen: set[str] = set()
    i = 1
    while i < len(argv):
        arg = argv[i]
        name, eq, inline = arg.partition("=")
        value: str | None = None
        if arg == "--json":
            key = "as_json"
        elif name in _VALUED and eq:
            key, value = _VALUED[name], inline
        elif arg in _VALUED and i + 1 < len(argv):
            key, value = _VALUED[arg], argv[i + 1]
            i += 1
        else:
            return None
        if key in seen or (value is not None and (not value or value.startswith("-"))):
            return None
        seen.add(key)
        opts[key] = True if value is None else value
        i += 1
    return opts


def check_command(python: str | None, as_json: bool, driver_version: str | None, compute_capability: str | None,
                  echo: Callable[[str], None]) -> int:
    """Run `check` and print its report; the exit code. OrtfixError is the caller's to render."""
    from ortfix.commands import run_check
    from ortfix.report import check_json, dump_json, render_check

    result = run_check(python, driver_version=driver_version, compute_capability=compute_capability)
    if as_json:
        echo(dump_json(check_json(result.facts, result.findings, int(result.exit_code))))
    else:
        echo(render_check(result.facts, result.findings))
    return int(result.exit_code)


def run(opts: dict[str, Any]) -> int:
    def echo(text: str) -> None:
        sys.stdout.write(text + "\n")

    try:
        code = check_command(**opts, echo=echo)
        sys.stdout.flush()
        return code
    except OrtfixError as exc:
        sys.stderr.write(exc.rendered() + "\n")
        return int(exc.exit_code)
    except KeyboardInterrupt:
        sys.stderr.write("ortfix: interrupted\n")
        return int(ExitCode.INTERRUPTED)
