#!/usr/bin/env python3
"""Compile ortfix's gettext catalogs: every src/ortfix/locale/<lang>/LC_MESSAGES/ortfix.po into the ortfix.mo beside
it (what the package ships and ortfix/i18n.py reads). Pure Python, standard library only, deterministic output (the
same .po always gives the same bytes: tests/test_i18n.py checks the committed .mo against a fresh compile).

    python scripts/compile_catalogs.py           # write every .mo
    python scripts/compile_catalogs.py --check   # exit 1 when a committed .mo differs from its .po

Entries marked `#, fuzzy` and entries with an empty msgstr are left out (English is shown for them), as msgfmt does.
"""

from __future__ import annotations

import argparse
import ast
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCALE = ROOT / "src" / "ortfix" / "locale"


class PoError(ValueError):
    """A .po file this compiler cannot read: the message names the file and line."""


def _unquote(text: str, where: str) -> str:
    if not (len(text) >= 2 and text[0] == text[-1] == '"'):
        raise PoError(f"{where}: expected a quoted string")
    value = ast.literal_eval(text)  # a .po string's escapes are C's, which Python's string literals include
    if not isinstance(value, str):
        raise PoError(f"{where}: expected a string")
    return value


def parse_po(text: str, name: str = "<po>") -> dict[str, str]:
    """msgid → msgstr of every translated, non-fuzzy entry (the header, msgid "", included)."""
    entries: dict[str, str] = {}
    fields: dict[str, str] = {}
    current: str | None = None
    fuzzy = False

    def flush() -> None:
        nonlocal fields, current, fuzzy
        if "msgid" in fields:
            key, value = fields["msgid"], fields.get("msgstr", "")
            if key in entries:
                raise PoError(f"{name}: msgid {key[:40]!r} appears twice")
            if value and not (fuzzy and key):
                entries[key] = value
        fields, current, fuzzy = {}, None, False

    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        where = f"{name}:{number}"
        if not line:
            flush()
        elif line.startswith("#,"):
            if "msgid" in fields:
                flush()
            fuzzy = "fuzzy" in line
        elif line.startswith("#"):
            continue
        elif line.startswith('"'):
            if current is None:
                raise PoError(f"{where}: a string continues no keyword")
            fields[current] += _unquote(line, where)
        else:
            keyword, _, rest = line.partition(" ")
            if keyword not in ("msgid", "msgstr", "msgctxt"):
                raise PoError(f"{where}: unknown keyword {keyword!r}")
            if keyword == "msgid" and "msgid" in fields:
                flush()
            current = keyword
            fields[keyword] = _unquote(rest.strip(), where)
    flush()
    return entries


def mo_bytes(entries: dict[str, str]) -> bytes:
    """The GNU .mo file of these entries (little endian, no hash table, keys sorted)."""
    keys = sorted(entries)
    ids = [k.encode("utf-8") for k in keys]
    strs = [entries[k].encode("utf-8") for k in keys]
    count = len(keys)
    key_table = 7 * 4
    value_table = key_table + count * 8
    data_start = value_table + count * 8
    offsets: list[tuple[int, int]] = []
    blob = b""
    for chunk in (*ids, *strs):
        offsets.append((len(chunk), data_start + len(blob)))
        blob += chunk + b"\0"
    header = struct.pack("<7I", 0x950412DE, 0, count, key_table, value_table, 0, data_start)
    tables = b"".join(struct.pack("<2I", n, o) for n, o in offsets)
    return header + tables + blob


def catalogs() -> list[Path]:
    return sorted(LOCALE.glob("*/LC_MESSAGES/*.po"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only compare the committed .mo files")
    args = parser.parse_args(argv)
    stale = []
    for po in catalogs():
        data = mo_bytes(parse_po(po.read_text(encoding="utf-8"), str(po.relative_to(ROOT))))
        mo = po.with_suffix(".mo")
        if args.check:
            if not mo.is_file() or mo.read_bytes() != data:
                stale.append(mo)
        else:
            mo.write_bytes(data)
    for mo in stale:
        print(f"{mo.relative_to(ROOT)} differs from its .po: run python scripts/compile_catalogs.py", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
