#!/usr/bin/env python3
"""Extract ortfix's translatable strings and keep the catalogs in step with them (standard library and PyYAML, which
ortfix already needs).

What is marked: the first argument of `_()`, `N_()` and `tr()` calls, and both of `ngettext()`, when they are string
literals (an `ast` walk of src/ortfix), and the `title`, `cause` and `fix` of every row of compat/errors.yaml, as the
YAML loader gives them (folded `>-` text is one line: the key is exactly what the program looks up).

    python scripts/extract_messages.py            # list the marked strings (one JSON document)
    python scripts/extract_messages.py --update   # add new strings to every .po (empty msgstr), drop gone ones
    python scripts/extract_messages.py --unmarked [FILE ...]   # English text not marked yet (what to mark next)

Text that stays English by design (written into a file, JSON, a pattern matched against a tool's output) carries the
comment `# i18n: english` on its line: --unmarked and the tests then leave it alone.

Then translate the new entries, run scripts/compile_catalogs.py, and tests/test_i18n.py checks the rest.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
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


# Words that make an English sentence: a literal with two of them is text for people (or data to check by hand).
_GLUE = re.compile(r"\b(?:the|is|are|was|and|not|of|to|that|which|with|this|it|be|no|or|on|in|by|from|its)\b",
                   re.IGNORECASE)
_NOT_TEXT_CALLS = ("compile", "search", "match", "fullmatch", "sub", "split")  # regexes: patterns, not text


def _skipped(tree: ast.AST, function: str | None) -> set[int]:
    """The nodes that are not unmarked text: docstrings, marked calls, regexes; outside `function` when given."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)) and body:
            first = body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                skip.add(id(first.value))
        marked = isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _MARKERS
        regex = (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                 and node.func.attr in _NOT_TEXT_CALLS)
        outside = function is not None and isinstance(node, ast.FunctionDef) and node.name != function
        if marked or regex or (outside and node in getattr(tree, "body", [])):
            skip.update(id(sub) for sub in ast.walk(node))
    if function is not None:  # only the function's body counts
        skip.update(id(sub) for n in getattr(tree, "body", []) if not isinstance(n, ast.FunctionDef)
                    for sub in ast.walk(n))
    return skip


ENGLISH_ON_PURPOSE = "# i18n: english"  # on a literal's line(s): text that stays English (a file ortfix writes, data)


def _english_on_purpose(node: ast.AST, lines: list[str]) -> bool:
    """A literal whose lines carry ENGLISH_ON_PURPOSE: English by design (hook files, journals, JSON, matched text)."""
    first, last = getattr(node, "lineno", 0), getattr(node, "end_lineno", None) or getattr(node, "lineno", 0)
    return first > 0 and any(ENGLISH_ON_PURPOSE in line for line in lines[first - 1:last])


def unmarked(path: Path, function: str | None = None) -> list[tuple[int, str]]:
    """(line, text) of every string literal (or f-string's text) in `path` (in its top-level `function`, when given)
    that reads as English prose and is not marked: what a later phase marks with `_()`, `N_()` or `tr()`."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source, str(path))
    skip = _skipped(tree, function)
    lines = source.splitlines()
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if id(node) in skip or _english_on_purpose(node, lines):
            continue
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
            skip.update(id(v) for v in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        else:
            continue
        if len(_GLUE.findall(text)) >= 2:
            found.append((node.lineno, text))
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
    parser.add_argument("--unmarked", nargs="*", metavar="FILE",
                        help="list the English text not yet marked in these files (default: all of src/ortfix)")
    args = parser.parse_args(argv)
    if args.unmarked is not None:
        files = [Path(f) for f in args.unmarked] or sorted(SOURCE.rglob("*.py"))
        for path in files:
            for line, text in unmarked(path):
                print(f"{path}:{line}: {text[:100]!r}")
        return 0
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
