"""The error patterns of `ortfix explain`: loading compat/errors.yaml (kind `error-patterns`, validated by
compat.validate against compat.schemas.ERROR_PATTERNS_SCHEMA), matching a log against them and describing each match.

Every pattern is a case-insensitive regex that is searched in the whole text, so a message a log wrapped over several
lines is still recognised; named groups (`soname`, `dll`, ...) capture the library the message is about. Each pattern
is reported once, at its first match, in file order. A row may name rows that make it redundant (`unless`: a
generic line is not explained again when the specific message around it was), an OS (`os`: the row applies only to
a message recognisably from that OS, explain.message_os, so that wording follows the OS the message came from), and an
analysis (explain.analyses) that adds what this message, the compatibility matrix and, when given, this machine's
facts say.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from ortfix.check.codes import FindingCode
from ortfix.check.windows_remedies import MSVC_REMEDY, MSVC_REMEDY_MSG
from ortfix.compat.load import default_compat_dir
from ortfix.compat.schemas import ERROR_PATTERNS_KIND, Analysis
from ortfix.errors import OrtfixError
from ortfix.explain.analyses import ANALYSES, analysis_function
from ortfix.explain.context import AnalysisContext, MatrixOnDemand
from ortfix.explain.message_os import MessageOs, message_os
from ortfix.i18n import N_, Msg, _, text, tr

if TYPE_CHECKING:
    from ortfix.check.facts import Facts
    from ortfix.compat.matrix import Matrix

ERRORS_FILE = "errors.yaml"

# The finding codes of README.md's "Findings" table; a pattern names one of them, or null when none applies.
FINDING_CODES: tuple[str, ...] = tuple(FindingCode)

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
    analysis: Analysis | None = None  # what the message, the matrix and this machine add
    unless: tuple[str, ...] = ()  # ids of rows that, when they match too, make this one redundant
    os: MessageOs | None = None  # the row applies only to a message from this OS
    fix_source: str = ""  # the row's fix as written (`{msvc_remedy}` unreplaced): its catalog key


@dataclass(frozen=True)
class Explanation:
    """A pattern that matched the input: where, on what text, and what it captured."""

    pattern_id: str
    finding: str | None
    title: str
    cause: str  # what this message and machine add (`details`), then the pattern's general cause
    fix: str
    matched: str  # the matched text, whitespace collapsed to single spaces, cut to a readable length
    groups: dict[str, str]  # the regex's named groups that took part in the match
    line: int  # 1-based line of the input where the match starts
    details: tuple[str, ...] = ()  # the sentences the pattern's analysis found for this text (and machine)
    # For people, in their language (cli/render.py): the details as marked messages, the pattern's own cause and fix.
    detail_msgs: tuple[str | Msg, ...] = ()
    general_cause: str = ""
    fix_msg: str | Msg = ""

    def localized(self) -> tuple[str, str, str]:
        """(title, cause, fix) in the language chosen (ortfix/i18n.py); `--json` keeps the English fields."""
        if not self.general_cause:
            return _(self.title), _(self.cause), text(self.fix_msg or self.fix)
        cause = text(self.general_cause)
        for detail in reversed(self.detail_msgs):  # sentences follow each other as the language writes them
            cause = tr("{sentence} {following}", sentence=text(detail), following=cause)
        return _(self.title), cause, text(self.fix_msg or self.fix)


def load_patterns(doc: Mapping[str, Any]) -> list[Pattern]:
    """Build patterns from a parsed errors.yaml document (already validated, or trusted) and compile their regexes.

    Raises OrtfixError naming the pattern for a regex that does not compile or that matches empty text, for a
    duplicate id, for a row that lacks a required key, names an unknown analysis or an `unless` id no row has."""
    rows = doc.get("patterns")
    if not isinstance(rows, list):
        raise OrtfixError(Msg(N_("error patterns: 'patterns' must be a list")))
    patterns: list[Pattern] = []
    seen: set[str] = set()
    for index, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise OrtfixError(Msg(N_("error patterns: entry {index} is not a mapping"), index=index))
        pid = str(row.get("id", f"#{index}"))
        try:
            regex_text = str(row["regex"])
            pattern = Pattern(
                id=pid,
                finding=None if row["finding"] is None else str(row["finding"]),
                regex=_compile(pid, regex_text),
                title=str(row["title"]),
                cause=str(row["cause"]),
                fix=str(row["fix"]).replace("{msvc_remedy}", MSVC_REMEDY),
                fix_source=str(row["fix"]),
                examples=tuple(str(e) for e in row["examples"]),
                source=str(row["source"]),
                unless=tuple(str(u) for u in row.get("unless") or ()),
                os=_row_os(pid, row.get("os")),
            )
            analysis = None if row.get("analysis") is None else str(row["analysis"])  # checked below, after the id
        except KeyError as exc:
            raise OrtfixError(Msg(N_("error pattern '{id}': missing key {key}"), id=pid,
                                  key=repr(exc.args[0]))) from exc
        if pid in seen:
            raise OrtfixError(Msg(N_("error pattern '{id}': the id is used twice"), id=pid))
        if analysis is not None and analysis not in ANALYSES:
            raise OrtfixError(Msg(N_("error pattern '{id}': unknown analysis '{analysis}'"), id=pid, analysis=analysis))
        seen.add(pid)
        patterns.append(replace(pattern, analysis=Analysis(analysis)) if analysis is not None else pattern)
    for pattern in patterns:
        for other in pattern.unless:
            if other not in seen or other == pattern.id:
                raise OrtfixError(Msg(N_("error pattern '{id}': `unless` names '{other}', which is no other row"),
                                      id=pattern.id, other=other))
    return patterns


def _row_os(pid: str, value: object) -> MessageOs | None:
    if value is None:
        return None
    if value == "linux":
        return "linux"
    if value == "windows":
        return "windows"
    raise OrtfixError(Msg(N_("error pattern '{id}': os must be linux or windows, not {value}"), id=pid,
                          value=repr(value)))


def _compile(pid: str, text: str) -> re.Pattern[str]:
    try:
        rx = re.compile(text, re.IGNORECASE)
    except re.error as exc:
        raise OrtfixError(Msg(N_("error pattern '{id}': invalid regex: {error}"), id=pid, error=str(exc))) from exc
    if rx.search("") is not None:
        raise OrtfixError(Msg(N_("error pattern '{id}': the regex matches empty text, so it would match anything"),
                              id=pid))
    return rx


def explain_text(text: str, patterns: Sequence[Pattern], *, matrix: Matrix | None = None,
                 facts: Facts | None = None) -> list[Explanation]:
    """Every pattern that matches somewhere in `text` (match_patterns), explained (describe)."""
    return describe(text, match_patterns(text, patterns), matrix=matrix, facts=facts)


Hit = tuple[Pattern, "re.Match[str]"]


def match_patterns(text: str, patterns: Sequence[Pattern]) -> list[Hit]:
    """Every pattern that matches somewhere in `text`, once each (its first match), in the patterns' order; a pattern
    is left out when a row its `unless` names matched too, or when it is for another OS than the text shows."""
    hits: list[Hit] = []
    seen: set[str] = set()
    text_os = message_os(text)
    for pattern in patterns:
        if pattern.id in seen or (pattern.os is not None and pattern.os != text_os):
            continue
        m = pattern.regex.search(text)
        if m is None:
            continue
        seen.add(pattern.id)
        hits.append((pattern, m))
    return [(pattern, m) for pattern, m in hits if not seen.intersection(pattern.unless)]


def describe(text: str, hits: Sequence[Hit], *, matrix: Matrix | None = None,
             facts: Facts | None = None) -> list[Explanation]:
    """The explanation of each hit. Patterns with an `analysis` add sentences about this message: from the
    compatibility matrix (`matrix`; the default compat folder's when None, read only if such a pattern matched) and,
    when `facts` are given (`ortfix check` of the target environment), about this machine."""
    lazy = MatrixOnDemand(matrix)
    found: list[Explanation] = []
    for pattern, m in hits:
        groups = {k: v for k, v in m.groupdict().items() if v is not None}
        said: tuple[str | Msg, ...] = ()
        if pattern.analysis is not None:
            context = AnalysisContext(text, groups, lazy, facts, message_os(text))
            said = tuple(analysis_function(pattern.analysis)(context))
        details = tuple(str(d) for d in said)
        found.append(Explanation(
            pattern_id=pattern.id,
            finding=pattern.finding,
            title=pattern.title,
            cause=" ".join((*details, pattern.cause)),
            fix=pattern.fix,
            matched=_snippet(m.group(0)),
            groups=groups,
            line=text.count("\n", 0, m.start()) + 1,
            details=details,
            detail_msgs=said,
            general_cause=pattern.cause,
            fix_msg=_fix_msg(pattern),
        ))
    return found


def _fix_msg(pattern: Pattern) -> str | Msg:
    """The row's fix as a catalog key: with the MSVC remedy as its value where the row names it."""
    if "{msvc_remedy}" in pattern.fix_source:
        return Msg(pattern.fix_source, msvc_remedy=MSVC_REMEDY_MSG)
    return pattern.fix


def _snippet(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _SNIPPET_MAX else flat[: _SNIPPET_MAX - 1] + "…"


class ExplanationJson(TypedDict):
    """One explanation in `ortfix explain --json` output (schema ortfix.explain/2)."""

    pattern: str
    finding: str | None
    line: int
    matched: str
    groups: dict[str, str]
    title: str
    cause: str
    fix: str
    details: list[str]


def explanation_to_dict(e: Explanation) -> ExplanationJson:
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
        "details": list(e.details),
    }


def default_errors_file() -> Path:
    """compat/errors.yaml in the compat folder ortfix uses (ORTFIX_COMPAT_DIR overrides it)."""
    return default_compat_dir() / ERRORS_FILE


def load_default_patterns() -> list[Pattern]:
    """Read, validate and compile compat/errors.yaml (the compat folder ortfix uses; ORTFIX_COMPAT_DIR overrides it)."""
    path = default_errors_file()
    return load_patterns(read_patterns_document(path))


def read_patterns_document(path: Path) -> dict[str, Any]:
    """Parse an errors.yaml and validate it as every compat file is (compat.validate, kind `error-patterns`);
    problems are OrtfixError `file:line: message`."""
    from ortfix.compat.validate import validate_document  # deferred with YAML: only `explain` reads the patterns

    try:
        data = path.read_bytes()
    except OSError as exc:
        raise OrtfixError(Msg(N_("{file}: cannot read: {error}"), file=str(path), error=str(exc.strerror or exc)),
                          hint=Msg(N_("reinstall ortfix, or point ORTFIX_COMPAT_DIR at a compat/ folder"))) from exc
    return validate_document(data, str(path), kind=ERROR_PATTERNS_KIND)
