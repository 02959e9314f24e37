"""The one output contract of `--json`: every command prints one envelope — `schema`, `command`, `exit_code`, then
its data — and a command that ends in an error prints an error envelope (`ortfix.error/1`) on standard output as
well as its one line on standard error. The schema names of every command's document live here, nowhere else.

Also how every command ends when something goes wrong (`ended`), for both the click-free `check` path and click.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping

from ortfix.errors import OrtfixError, exit_for, unexpected_message
from ortfix.plan.schema import PLAN_SCHEMA
from ortfix.strenum import StrEnum

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing, on the path of a replayed `check`
if TYPE_CHECKING:
    from typing import Any

    from ortfix.cli.invocation import Invocation


class Command(StrEnum):
    """The commands that print a JSON document with --json (`command` in the envelope)."""

    CHECK = "check"
    PLAN = "plan"
    APPLY = "apply"
    ROLLBACK = "rollback"
    HISTORY = "history"
    HISTORY_SHOW = "history show"
    HISTORY_PRUNE = "history prune"
    VERIFY = "verify"
    TUNE = "tune"
    EXPLAIN = "explain"
    MATRIX_SHOW = "matrix show"
    EXPORT = "export"
    WHEELHOUSE = "wheelhouse"


# The schema of each command's document. Version 2 of each added `command` (and `exit_code` where it was missing);
# the plan's document is also the saved-plan file format, which is read back by `apply` and accepts them.
SCHEMAS: dict[Command, str] = {
    Command.CHECK: "ortfix.check/2",
    Command.PLAN: PLAN_SCHEMA,
    Command.APPLY: "ortfix.apply/2",
    Command.ROLLBACK: "ortfix.rollback/2",
    Command.HISTORY: "ortfix.history/2",
    Command.HISTORY_SHOW: "ortfix.transaction/2",
    Command.HISTORY_PRUNE: "ortfix.prune/2",
    Command.VERIFY: "ortfix.verification/2",
    Command.TUNE: "ortfix.tune/2",
    Command.EXPLAIN: "ortfix.explain/2",
    Command.MATRIX_SHOW: "ortfix.matrix/2",
    Command.EXPORT: "ortfix.export/1",
    Command.WHEELHOUSE: "ortfix.wheelhouse/1",
}
ERROR_SCHEMA = "ortfix.error/1"


def dump_json(doc: object) -> str:
    """Every --json document is printed this way."""
    return json.dumps(doc, indent=2, default=str)


def envelope(command: Command, exit_code: int, data: Mapping[str, Any]) -> dict[str, Any]:
    """The document `command --json` prints: the envelope fields first, then the command's data."""
    return {"schema": SCHEMAS[command], "command": command.value, "exit_code": int(exit_code), **data}


def error_envelope(command: Command, exit_code: int, message: str, hint: str | None = None) -> dict[str, Any]:
    return {"schema": ERROR_SCHEMA, "command": command.value, "exit_code": int(exit_code),
            "error": {"message": message, "hint": hint}}


class Carried(Exception):
    """An exception carried out of click to the entry point unchanged: click would turn Ctrl-C into its own
    "Aborted!" (exit 1) instead of ending the command as interrupted (130)."""

    def __init__(self, exc: BaseException) -> None:
        super().__init__(str(exc))
        self.exc = exc


def _message(exc: BaseException) -> tuple[str, str | None]:
    if isinstance(exc, OrtfixError):
        return exc.message, exc.hint
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted", None
    return unexpected_message(exc), None


def ended(exc: BaseException, invocation: Invocation) -> int:
    """How a command ends when `exc` stops it: its one line on standard error (errors.exit_for), and under --json
    the error envelope on standard output. Returns the exit code. The entry point is the one caller: the click
    group hands what ends a command there (cli/app.py)."""
    if isinstance(exc, Carried):
        exc = exc.exc
    code = exit_for(exc, debug=invocation.debug)
    command = invocation.json_command()
    if command is not None and not isinstance(exc, BrokenPipeError):
        print_error(command, code, *_message(exc))
    return code


def print_error(command: Command, exit_code: int, message: str, hint: str | None = None) -> None:
    try:
        sys.stdout.write(dump_json(error_envelope(command, exit_code, message, hint)) + "\n")
        sys.stdout.flush()
    except (OSError, ValueError):
        pass  # standard output closed: the line on standard error is all there is


__all__ = ["SCHEMAS", "Carried", "Command", "dump_json", "ended", "envelope", "error_envelope"]
