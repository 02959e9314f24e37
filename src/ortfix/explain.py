"""`ortfix explain`: recognise known ONNX Runtime / CUDA / cuDNN failure messages in a log and say what they mean.

The patterns are data (compat/errors.yaml, kind `error-patterns`), validated against ERROR_PATTERNS_SCHEMA when loaded.
Every pattern is a case-insensitive regex that is searched in the whole text, so a message a log wrapped over several
lines is still recognised; named groups (`soname`, `dll`, ...) capture the library the message is about. Each pattern
is reported once, at its first match, in file order.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ortfix.errors import OrtfixError

ERRORS_FILE = "errors.yaml"
KIND = "error-patterns"
SCHEMA_VERSION = 1

# The finding codes of README.md's "Findings" table; a pattern names one of them, or null when none applies.
FINDING_CODES: tuple[str, ...] = (
    "ORT001", "ORT002", "ORT003", "ORT004", "ORT005", "ORT006", "ORT007", "ORT008",
    "DRV001", "DRV002", "DRV003",
    "GPU001",
    "LIB001", "LIB002", "LIB003", "LIB004", "LIB005", "LIB006", "LIB007",
    "TORCH001",
    "TX001",
    "MTX001", "MTX002",
)

_TEXT = {"type": "string", "minLength": 1}

ERROR_PATTERNS_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "ortfix error patterns (compat/errors.yaml)",
    "type": "object",
    "additionalProperties": False,
    "required": ["schema_version", "kind", "data_version", "patterns"],
    "properties": {
        "schema_version": {"const": SCHEMA_VERSION},
        "kind": {"const": KIND},
        "data_version": {"type": "string", "pattern": r"^\d{4}\.\d{2}\.\d{2}$"},
        "patterns": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["id", "finding", "regex", "title", "cause", "fix", "examples", "source"],
                "properties": {
                    "id": {"type": "string", "pattern": r"^[a-z0-9]+(-[a-z0-9]+)*$"},
                    "finding": {"enum": [*FINDING_CODES, None]},
                    "regex": _TEXT,
                    "title": {"type": "string", "minLength": 1, "pattern": r"^[^\r\n]+$"},
                    "cause": _TEXT,
                    "fix": _TEXT,
                    "examples": {"type": "array", "minItems": 1, "items": _TEXT},
                    "source": {"type": "string", "minLength": 3},
                },
            },
        },
    },
}

_SNIPPET_MAX = 300


@dataclass(frozen=True)
class Pattern:
    """One known failure message: how to recognise it and what it means."""

    id: str
    finding: str | None
    regex: re.Pattern[str]
    title: str
    cause: str
    fix: str
    examples: tuple[str, ...]
    source: str


@dataclass(frozen=True)
class Explanation:
    """A pattern that matched the input: where, on what text, and what it captured."""

    pattern_id: str
    finding: str | None
    title: str
    cause: str
    fix: str
    matched: str  # the matched text, whitespace collapsed to single spaces, cut to a readable length
    groups: dict[str, str]  # the regex's named groups that took part in the match
    line: int  # 1-based line of the input where the match starts


def load_patterns(doc: Mapping[str, Any]) -> list[Pattern]:
    """Build patterns from a parsed errors.yaml document (already validated, or trusted) and compile their regexes.

    Raises OrtfixError naming the pattern for a regex that does not compile or that matches empty text, for a
    duplicate id, and for a row that lacks a required key."""
    rows = doc.get("patterns")
    if not isinstance(rows, list):
        raise OrtfixError("error patterns: 'patterns' must be a list")
    patterns: list[Pattern] = []
    seen: set[str] = set()
    for index, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise OrtfixError(f"error patterns: entry {index} is not a mapping")
        pid = str(row.get("id", f"#{index}"))
        try:
            regex_text = str(row["regex"])
            pattern = Pattern(
                id=pid,
                finding=None if row["finding"] is None else str(row["finding"]),
                regex=_compile(pid, regex_text),
                title=str(row["title"]),
                cause=str(row["cause"]),
                fix=str(row["fix"]),
                examples=tuple(str(e) for e in row["examples"]),
                source=str(row["source"]),
            )
        except KeyError as exc:
            raise OrtfixError(f"error pattern '{pid}': missing key {exc.args[0]!r}") from exc
        if pid in seen:
            raise OrtfixError(f"error pattern '{pid}': the id is used twice")
        seen.add(pid)
        patterns.append(pattern)
    return patterns


def _compile(pid: str, text: str) -> re.Pattern[str]:
    try:
        rx = re.compile(text, re.IGNORECASE)
    except re.error as exc:
        raise OrtfixError(f"error pattern '{pid}': invalid regex: {exc}") from exc
    if rx.search("") is not None:
        raise OrtfixError(f"error pattern '{pid}': the regex matches empty text, so it would match anything")
    return rx


def explain_text(text: str, patterns: Sequence[Pattern]) -> list[Explanation]:
    """Every pattern that matches somewhere in `text`, once each (its first match), in the patterns' order."""
    found: list[Explanation] = []
    seen: set[str] = set()
    for pattern in patterns:
        if pattern.id in seen:
            continue
        m = pattern.regex.search(text)
        if m is None:
            continue
        seen.add(pattern.id)
        found.append(Explanation(
            pattern_id=pattern.id,
            finding=pattern.finding,
            title=pattern.title,
            cause=pattern.cause,
            fix=pattern.fix,
            matched=_snippet(m.group(0)),
            groups={k: v for k, v in m.groupdict().items() if v is not None},
            line=text.count("\n", 0, m.start()) + 1,
        ))
    return found


def _snippet(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _SNIPPET_MAX else flat[: _SNIPPET_MAX - 1] + "…"


def explanation_to_dict(e: Explanation) -> dict[str, Any]:
    """A JSON-ready form of an explanation (for `--json` output)."""
    return {
        "pattern": e.pattern_id,
        "finding": e.finding,
        "line": e.line,
        "matched": e.matched,
        "groups": dict(e.groups),
        "title": e.title,
        "cause": e.cause,
        "fix": e.fix,
    }


def default_errors_file() -> Path:
    """compat/errors.yaml in the compat folder ortfix uses (ORTFIX_COMPAT_DIR overrides it)."""
    # Imported here, not at the top: ortfix.matrix is expected to import ERROR_PATTERNS_SCHEMA from this module.
    from ortfix.matrix import default_compat_dir

    return default_compat_dir() / ERRORS_FILE


def load_default_patterns() -> list[Pattern]:
    """Read, validate and compile compat/errors.yaml (the compat folder ortfix uses; ORTFIX_COMPAT_DIR overrides it)."""
    path = default_errors_file()
    return load_patterns(read_patterns_document(path))


def read_patterns_document(path: Path) -> dict[str, Any]:
    """Parse an errors.yaml and validate it against ERROR_PATTERNS_SCHEMA; problems are OrtfixError `file: message`."""
    import yaml

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise OrtfixError(f"{path}: cannot read: {exc.strerror or exc}",
                          hint="reinstall ortfix, or point ORTFIX_COMPAT_DIR at a compat/ folder") from exc
    except UnicodeDecodeError as exc:
        raise OrtfixError(f"{path}: not UTF-8 text (byte {exc.start})") from exc
    try:
        doc = yaml.safe_load(text)
    except RecursionError as exc:
        raise OrtfixError(f"{path}: invalid YAML: nested too deeply") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise OrtfixError(f"{where}: invalid YAML: {problem}") from exc
    if not isinstance(doc, dict):
        raise OrtfixError(f"{path}: an error-patterns file must be a mapping with schema_version, kind and patterns")
    import jsonschema

    validator = jsonschema.Draft202012Validator(ERROR_PATTERNS_SCHEMA)
    errors = list(validator.iter_errors(doc))
    if errors:
        err = jsonschema.exceptions.best_match(errors) or errors[0]
        where = ".".join(str(p) for p in err.absolute_path) or "(top level)"
        raise OrtfixError(f"{path}: {where}: {err.message}")
    return doc
