"""Output that never fails on encoding.

Standard output is not always UTF-8: redirected on an English Windows (`ortfix check > log.txt`, `| findstr`, a CI
log) it is cp1252, under a strict C locale (`LC_ALL=C PYTHONUTF8=0`) ASCII. Two things make every write succeed there:

- `prepare` (once, at the entry point, before anything is printed): a stream with strict errors writes what its
  encoding cannot carry as a backslash escape instead (a path's `\\u7528`), never a UnicodeEncodeError;
- `fit` (every text ortfix writes, the click path's and the click-free `check`'s): the report's symbols the stream's
  encoding cannot carry (`SYMBOLS`: x for \u2717, + for \u2713, * for \u25cf, -> for \u2192, ...) are written as ASCII.
  Everything else the stream cannot carry (a path's Chinese user name) comes out escaped by `prepare`.
"""

from __future__ import annotations

import codecs
import sys
from functools import cache

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing, on the path of a replayed `check`
if TYPE_CHECKING:
    from typing import TextIO

# Every non-ASCII symbol a renderer (cli/render*.py) or a shipped text (compat/errors.yaml) uses, and its ASCII form.
SYMBOLS = {"\u2717": "x", "\u2713": "+", "\u25cf": "*", "\u2192": "->", "\u2194": "<->", "\u2026": "...",
           "\u2014": "--", "\u00b5": "u"}
_LOSSLESS = ("backslashreplace", "namereplace", "xmlcharrefreplace", "replace")


def _encoding(stream: object) -> str:
    name = getattr(stream, "encoding", None) or "ascii"
    try:
        return codecs.lookup(name).name
    except LookupError:
        return "ascii"


def prepare(stream: TextIO) -> None:
    """Make `stream` write what its encoding cannot carry as an escape (errors="backslashreplace"). A UTF-8 stream
    with surrogateescape (a POSIX locale's) is left as it is: it writes an undecodable file name's bytes back."""
    errors = getattr(stream, "errors", None) or "strict"
    if errors in _LOSSLESS or (errors == "surrogateescape" and _encoding(stream) == "utf-8"):
        return
    reconfigure = getattr(stream, "reconfigure", None)
    if reconfigure is not None:
        try:  # noqa: SIM105 (no contextlib on the path of a replayed check)
            reconfigure(errors="backslashreplace")
        except (ValueError, OSError):  # a stream that cannot change (closed, detached)
            pass


@cache
def _table(encoding: str) -> dict[int, str]:
    """The symbols `encoding` cannot carry, as str.translate's table to their ASCII forms (empty: it carries all)."""
    table: dict[int, str] = {}
    for symbol, plain in SYMBOLS.items():
        try:
            symbol.encode(encoding)
        except (UnicodeEncodeError, LookupError):
            table[ord(symbol)] = plain
    return table


def ascii_symbols(stream: object) -> bool:
    """Whether `stream` gets the ASCII symbol set (its encoding cannot carry one of the report's symbols)."""
    return bool(_table(_encoding(stream)))


def fit(text: str, stream: object | None = None) -> str:
    """`text` with the symbols `stream` (default: standard output) cannot carry written as ASCII."""
    table = _table(_encoding(sys.stdout if stream is None else stream))
    return text.translate(table) if table else text


__all__ = ["SYMBOLS", "ascii_symbols", "fit", "prepare"]
