#!/usr/bin/env python3
"""Extract ortfix's translatable strings and keep the catalogs in step with them (standard library and PyYAML, which
ortfix already needs).

What is marked: the first argument of `_()`, `N_()` and `tr()` calls, and both of `ngettext()`, when they are string
literals (an `ast` walk of src/ortfix), and the `title`, `cause` and `fix` of every row of compat/errors.yaml, as the
YAML loader gives them (folded `>-` text is one line: the key is exactly what the program looks up).

    python scripts/extract_messages.py            # list the marked strings (one JSON document)
    python scripts/extract_messages.py --update   # add new strings to every .po (empty msgstr), drop gone ones

Then translate the new entries, run scripts/compile_catalogs.py, and tests/test_i18n.py checks the rest.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "src" / "ortfix"
ERRORS_YAML = ROOT / "compat" / "errors.yaml"
YAML_FIELDS = ("title", "cause", "fix")
_MARKERS = {"_": 1, "N_": 1, "tr": 1, "ngettext": 2}

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compile_catalogs import catalogs, parse_po  # noqa: E402


def python_messages(root: Path = SOURCE) -> dict[str, str]:
    """msgid → where it is first marked (path:line), for every marked literal under `root`."""
    found: dict[str, str] = {}
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _MARKERS):
                continue
            for arg in node.args[: _MARKERS[node.func.id]]:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    found.setdefault(arg.value, f"{path.relative_to(ROOT).as_posix()}:{node.lineno}")
    return found


def yaml_messages(path: Path = ERRORS_YAML) -> dict[str, str]:
    """msgid → `compat/errors.yaml:<id>.<field>` for every row's title, cause and fix."""
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    found: dict[str, str] = {}
    for row in doc["patterns"]:
        for name in YAML_FIELDS:
            found.setdefault(str(row[name]), f"{path.relative_to(ROOT).as_posix()}:{row['id']}.{name}")
    return found


def messages() -> dict[str, str]:
    return {**python_messages(), **yaml_messages()}


def _quote(text: str) -> str:
    body = json.dumps(text, ensure_ascii=False)  # JSON's escapes for ", \ and controls are the .po's as well
    return body


def po_entry(msgid: str, msgstr: str, where: str) -> str:
    return f"#: {where}\nmsgid {_quote(msgid)}\nmsgstr {_quote(msgstr)}\n"


def update(po: Path, marked: dict[str, str]) -> tuple[int, int]:
    """Rewrite `po` with every marked string (its translation kept, new ones empty); (added, dropped)."""
    old = parse_po(po.read_text(encoding="utf-8"), str(po)) if po.is_file() else {}
    header = old.get("", "Content-Type: text/plain; charset=UTF-8\n")
    parts = [po_entry("", header, "header").split("\n", 1)[1]]
    for msgid, where in marked.items():
        parts.append(po_entry(msgid, old.get(msgid, ""), where))
    po.write_text("\n".join(parts), encoding="utf-8")
    return len(set(marked) - set(old)), len(set(old) - set(marked) - {""})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--update", action="store_true", help="bring every .po in step with the marked strings")
    args = parser.parse_args(argv)
    marked = messages()
    if not args.update:
        print(json.dumps(marked, ensure_ascii=False, indent=1))
        return 0
    for po in catalogs():
        added, dropped = update(po, marked)
        print(f"{po.relative_to(ROOT)}: {added} new, {dropped} dropped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
