"""The one exception type for problems the user can fix, and the exit codes every command uses."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Exit codes shared by every command (documented in README.md)."""

    OK = 0
    PROBLEMS = 1  # the command ran and found (or left) problems
    USAGE = 2  # the command could not run: bad input, bad arguments, unreadable files
    INCOMPLETE = 3  # `verify`/`tune`: nothing failed, but some part could not run on this machine (no GPU, no driver)
    INTERRUPTED = 130  # Ctrl-C


class OrtfixError(Exception):
    """An error the user can fix; rendered as one line plus an exit code, never a traceback."""

    def __init__(self, message: str, *, hint: str | None = None, exit_code: ExitCode = ExitCode.USAGE) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.exit_code = exit_code

    def one_line(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message

    def rendered(self) -> str:
        """The line every command prints on stderr."""
        return f"ortfix: error: {self.one_line()}"
