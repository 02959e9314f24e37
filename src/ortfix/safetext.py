"""Text read from the environment is data: the one definition of the characters that must never reach a terminal or
a file ortfix writes as they are, and the one way of showing them.

A METADATA `Version:`, a RECORD row, a folder's name, a build-info value, pip's or the probe's output may hold any
character. Those that end a line for some reader (`\\n`, `\\r`, `\\v`, `\\f`, U+0085, U+2028, U+2029: pip reads a
requirements file with `str.splitlines()`, PowerShell ends a comment at a lone `\\r`), that drive a terminal (ESC, BEL,
the C1 controls such as CSI U+009B) or reorder what is shown (the bidirectional formatting characters) are the
*controls* below. `visible` writes each of them as a backslash escape (`\\x1b`, `\\u2028`), as do lone surrogates
(bytes of a file name that are not UTF-8, which a UTF-8 terminal cannot even be sent); everything else, including
every printable non-ASCII character, is kept. `first_control` finds one, for writers that must refuse rather than
escape (a value inside a command or a path)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache

# C0 controls, DEL, C1 controls (U+0085 among them), the Arabic letter mark, LRM/RLM, the line and paragraph
# separators, the bidirectional embeddings and overrides (U+202A-U+202E) and isolates (U+2066-U+2069).
_CONTROLS = "\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069"


@cache
def _control() -> re.Pattern[str]:
    return re.compile(f"[{_CONTROLS}]")


# Compiled at their first use, as `_control`: the entry point imports this module before the probe starts (through
# system/host.py), and compiling both cost that start 0.8 ms.
@cache
def _shown() -> re.Pattern[str]:
    return re.compile(f"[{_CONTROLS}\ud800-\udfff]")


@cache
def _shown_in_lines() -> re.Pattern[str]:
    return re.compile(f"\r\n|\n|[{_CONTROLS}\ud800-\udfff]")


def escaped(ch: str) -> str:
    """One character as a visible escape: `\\x1b`, `\\u2028`, `\\udcff`, `\\U000e0001`."""
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _escape(match: re.Match[str]) -> str:
    return escaped(match.group(0))


def _escape_in_lines(match: re.Match[str]) -> str:
    text = match.group(0)
    return text if text in ("\n", "\r\n") else escaped(text)


# Every character the patterns above match is one `str.isprintable` refuses (categories Cc, Cf, Zl, Zp, Cs): text
# it accepts has nothing to escape, and is returned without compiling a pattern (compiling `_shown` and
# `_shown_in_lines` cost a fresh `check` 8M instructions; tests/test_speed_fresh.py checks the claim).
def visible(text: str) -> str:
    """`text` as one line a terminal shows as it is: every control (line ends included) and lone surrogate escaped."""
    return text if text.isprintable() else _shown().sub(_escape, text)


def visible_lines(text: str) -> str:
    """Like `visible`, but line ends (`\\n`, `\\r\\n`) stay: for text ortfix itself laid out in lines."""
    return text if text.replace("\n", "").isprintable() else _shown_in_lines().sub(_escape_in_lines, text)


def join_lines(lines: Iterable[str]) -> str:
    """Lines that a renderer laid out, each made `visible` (so a value with a line end inside cannot start a line of
    its own), joined with newlines."""
    return "\n".join(visible(line) for line in lines)


def first_control(text: str, *, surrogates: bool = False) -> str | None:
    """The first control in `text` (a character that could end a line, drive a terminal or reorder text), else
    None; with `surrogates`, a lone surrogate (a file name's byte that is not UTF-8) counts as one too."""
    if text.isprintable():
        return None
    match = (_shown() if surrogates else _control()).search(text)
    return match.group(0) if match else None
