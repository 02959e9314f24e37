"""Command lines printed for the user to paste (`Undo:`, `via:`): quoted for the target's shell. A Linux target's
for a POSIX shell (shlex: single quotes); a Windows target's for cmd and PowerShell: an argument holding a space or
one of their special characters (`<`, `>`, `&`, `|`, `^`, ...) in double quotes, with a quote or the backslashes
before it escaped by the C runtime's rules (subprocess.list2cmdline's), which Python and ortfix read back. Double
quotes do not stop cmd expanding `%NAME%` (nor PowerShell `$name`): such an argument is printed as it is.

A control or line-separator character in an argument (a hostile path) is printed as its escape (safetext.visible):
the line stays one line on the terminal, at the cost of not being pasteable as it stands.

Where the target is Windows is told by its interpreter's absolute path: "/..." is a POSIX path; "C:\\..." or
"\\\\server\\..." a Windows one.
"""

from __future__ import annotations

from collections.abc import Sequence

from ortfix.safetext import visible

# Characters cmd or PowerShell would read as syntax outside double quotes.
_WINDOWS_SPECIAL = frozenset(" \t\"&|<>^()%!;,'`$@{}#")


def windows_target(python: str) -> bool:
    """Whether the target interpreter `python` (an absolute path) is a Windows one."""
    return not python.startswith("/")


def _ms_quoted(arg: str) -> str:
    """`arg` in double quotes, as the C runtime (CommandLineToArgvW, Python's) reads it back."""
    out: list[str] = []
    backslashes = 0
    for c in arg:
        if c == "\\":
            backslashes += 1
            continue
        out.append("\\" * (backslashes * 2 + 1) + '"' if c == '"' else "\\" * backslashes + c)
        backslashes = 0
    out.append("\\" * (backslashes * 2))
    return '"' + "".join(out) + '"'


def quote(arg: str, windows: bool) -> str:
    """One argument, quoted for the target's shell."""
    arg = visible(arg)
    if not windows:
        import shlex  # here: a check's screen rarely quotes, and shlex compiles a pattern at import

        return shlex.quote(arg)
    return arg if arg and not _WINDOWS_SPECIAL.intersection(arg) else _ms_quoted(arg)


def join(argv: Sequence[str], windows: bool) -> str:
    """A command line, quoted for the target's shell."""
    return " ".join(quote(a, windows) for a in argv)


__all__ = ["join", "quote", "windows_target"]
