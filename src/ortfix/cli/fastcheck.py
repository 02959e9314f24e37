"""`ortfix check` without importing click.

`check` is the command people run most and the one whose speed is measured (scripts/bench_check.py); click alone
costs about a quarter of its run time. The entry point hands the plain forms of `check` here (`--python P`, `--json`,
`--driver V`, `--compute-capability X.Y`, `--fresh`, `--verbose`/`-v`, each at most once); anything else (help, a
typo, a repeated option, another command) goes to the click CLI, which owns every message about the command line.
Both paths call `check_command`, so they print the same thing and exit the same way (tests/test_fastcheck.py compares
them).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (2 ms) on the path of a replayed `check`
if TYPE_CHECKING:
    from typing import Any

_FLAGS = {"--json": "as_json", "--fresh": "fresh", "--verbose": "verbose", "-v": "verbose"}
_VALUED = {"--python": "python", "--driver": "driver_version", "--compute-capability": "compute_capability"}


def parse_check(argv: Sequence[str]) -> dict[str, Any] | None:
    """The keyword arguments of `check_command` for a plain `check` command line, or None to leave it to click."""
    if not argv or argv[0] != "check":
        return None
    opts: dict[str, Any] = {"python": None, "as_json": False, "driver_version": None, "compute_capability": None,
                            "fresh": False, "verbose": False}
    seen: set[str] = set()
    i = 1
    while i < len(argv):
        arg = argv[i]
        name, eq, inline = arg.partition("=")
        value: str | None = None
        if arg in _FLAGS:
            key = _FLAGS[arg]
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
                  echo: Callable[[str], None], fresh: bool = False, verbose: bool = False,
                  with_tensorrt: bool = False) -> int:
    """Run `check` and print its report; the exit code. OrtfixError is the caller's to render.

    An identical earlier check is replayed while nothing it depended on has changed (speed/replay.py); `fresh` skips
    that. `verbose`: every library row of the report, not only those that are a problem. `with_tensorrt` (`--with
tensorrt`): TensorRT is judged and shown even where none is installed."""
    from ortfix.speed.replay import saved_check
    from ortfix.versions import validate_machine_options

    validate_machine_options(driver_version, compute_capability)

    key = (as_json, driver_version, compute_capability, verbose, with_tensorrt)
    saved = None if fresh else saved_check(python, key)
    if saved is None:
        output, code, _report = _check(python, *key)
    else:
        replayed = saved.replay()
        if replayed is not None:
            echo(replayed[0])
            return replayed[1]
        output, code = saved.record(lambda: _check(python, *key))
    echo(output)
    return code


def _check(python: str | None, as_json: bool, driver_version: str | None, compute_capability: str | None,
           verbose: bool, with_tensorrt: bool = False) -> tuple[str, int, str]:
    """(what `check` prints, its exit code, the probe's report it was made from)."""
    from ortfix.cli.output import Command, dump_json, envelope
    from ortfix.cli.render import check_json, render_check
    from ortfix.commands.check import own_environment_note, run_check

    result = run_check(python, driver_version=driver_version, compute_capability=compute_capability,
                       with_tensorrt=with_tensorrt)
    code = int(result.exit_code)
    if as_json:
        output = dump_json(envelope(Command.CHECK, code, check_json(result)))
    else:
        output = render_check(result.facts, result.findings, result.target, own_environment_note(result.target),
                              verbose=verbose, with_tensorrt=with_tensorrt)
    return output, code, result.facts.probe.report


def run(opts: dict[str, Any]) -> int:
    """The exit code of a plain `check`; what goes wrong is rendered by the entry point (output.ended)."""

    from ortfix.safetext import visible_lines

    def echo(text: str) -> None:  # as cli/app.py's: what the environment said is shown escaped
        sys.stdout.write(visible_lines(text) + "\n")

    code = check_command(**opts, echo=echo)
    sys.stdout.flush()
    return code
