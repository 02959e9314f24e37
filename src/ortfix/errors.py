"""The one exception type for problems the user can fix, and the exit codes every command uses."""

from __future__ import annotations

import os
import sys
from enum import IntEnum

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing

if TYPE_CHECKING:
    from ortfix.i18n import Msg


class ExitCode(IntEnum):
    """Exit codes shared by every command (documented in README.md)."""

    OK = 0
    PROBLEMS = 1  # the command ran and found (or left) problems
    USAGE = 2  # the command could not run: bad input, bad arguments, unreadable files
    INCOMPLETE = 3  # `verify`/`tune`: nothing failed, but some part could not run on this machine (no GPU, no driver)
    INTERRUPTED = 130  # Ctrl-C


class OrtfixError(Exception):
    """An error the user can fix; rendered as one line plus an exit code, never a traceback.

    `message` and `hint` may be an `i18n.Msg` (a marked template with its values): `message`/`hint`/`one_line()` are
    then the English (the `--json` error envelope, journals), `rendered()` the user's language."""

    def __init__(self, message: str | Msg, *, hint: str | Msg | None = None,
                 exit_code: ExitCode = ExitCode.USAGE) -> None:
        super().__init__(str(message))
        self.message = str(message)
        self.hint = None if hint is None else str(hint)
        self.message_msg = message
        self.hint_msg = hint
        self.exit_code = exit_code

    def one_line(self) -> str:
        """The English line (data: journals, the error envelope)."""
        return f"{self.message} ({self.hint})" if self.hint else self.message

    def text(self) -> str:
        """The line in the user's language: a Msg translated, a plain string as it is."""
        from ortfix.i18n import Msg, tr  # not at import: errors is imported before the probe starts

        def say(value: str | Msg) -> str:
            return value.text() if isinstance(value, Msg) else value

        message = say(self.message_msg)
        if not self.hint or self.hint_msg is None:
            return message
        return tr("{message} ({hint})", message=message, hint=say(self.hint_msg))

    def rendered(self) -> str:
        """The line every command prints on stderr: one line, whatever the message quotes (safetext.visible)."""
        from ortfix.i18n import tr  # not at import: errors is imported before the probe starts
        from ortfix.safetext import visible

        return visible("ortfix: " + tr("error: {message}", message=self.text()))


# ---------------------------------------------------------------------------------------------------------------------
# how every command ends when something goes wrong (the entry point and the click group both call `exit_for`)
# ---------------------------------------------------------------------------------------------------------------------


def exit_for(exc: BaseException, *, debug: bool = False) -> int:
    """Say on stderr how the command ended, in one line, and return its exit code: an OrtfixError as its line and
    code, Ctrl-C as 130, standard output closed by its reader quietly as 1, anything else (a bug) as one line saying
    so, with its traceback only with `--debug` or ORTFIX_DEBUG=1."""
    if isinstance(exc, OrtfixError):
        sys.stderr.write(exc.rendered() + "\n")
        return int(exc.exit_code)
    if isinstance(exc, KeyboardInterrupt):
        from ortfix.i18n import _

        sys.stderr.write("ortfix: " + _("interrupted") + "\n")
        return int(ExitCode.INTERRUPTED)
    if isinstance(exc, BrokenPipeError):
        return broken_pipe()
    return report_unexpected(exc, debug=debug)


def debug_requested() -> bool:
    """ORTFIX_DEBUG=1 (anything but empty or 0): unexpected errors come with their traceback."""
    return os.environ.get("ORTFIX_DEBUG", "") not in ("", "0")


def report_unexpected(exc: BaseException, *, debug: bool = False) -> int:
    """An exception nobody expected (a bug, or an input no check foresaw), as one line on stderr; the traceback
    before it only with `--debug` (`debug`) or ORTFIX_DEBUG=1. Returns the exit code (2: could not run)."""
    debug = debug or debug_requested()
    if debug:
        import traceback

        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    from ortfix.i18n import _, tr
    from ortfix.safetext import visible

    name, message = _unexpected(exc)
    said = tr("unexpected {error}", error=name) + (f": {message}" if message else "")
    line = "ortfix: " + tr("error: {message}", message=said)
    if not debug:
        line += _(" (run again with --debug, or ORTFIX_DEBUG=1, for the traceback)")

    sys.stderr.write(visible(line) + "\n")
    sys.stderr.flush()
    return int(ExitCode.USAGE)


def unexpected_message(exc: BaseException) -> str:
    """What an unexpected exception is called, on standard error and in --json's error envelope: its type and its
    text on one line, at most 500 characters of it."""
    name, message = _unexpected(exc)
    return f"unexpected {name}" + (f": {message}" if message else "")


def _unexpected(exc: BaseException) -> tuple[str, str]:
    """The exception's type name and its text on one line, at most 500 characters of it."""
    message = " ".join(str(exc).split())
    if len(message) > 500:
        message = message[:500] + "…"
    return type(exc).__name__, message


def broken_pipe() -> int:
    """Standard output was closed by its reader (`ortfix check | head -1`): not an error to report. Quietly, with
    exit code 1, as click does; later writes (the interpreter's own flush at exit) go nowhere."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return 1
