"""Typed reading of JSON that ortfix reads back from disk (saved plans, journals, their records and sidecars): all of
it is untrusted, so every field is checked for exactly its type and size before it is used, and a bad one is a
`BadField` (a ValueError) naming it.

`where` is put in front of the field's name in the message ("action 3 field 'summary' …")."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import cache

from ortfix.i18n import N_, Msg

TYPE_CHECKING = False
if TYPE_CHECKING:  # `typing` for mypy only: a check imports this module (speed/__init__.py)
    from typing import Any, Union

    # A JSON document as `json.loads` returns it; read it through the checks below before trusting its shape.
    JsonValue = Union[None, bool, int, float, str, list["JsonValue"], dict[str, "JsonValue"]]


class BadField(ValueError):
    """A field of the wrong type, shape or size. `str()` is the English (journals, the error envelope); `message`
    may be a Msg, translated where it is printed for people (`i18n.text(exc.message)`)."""

    def __init__(self, message: str | Msg) -> None:
        super().__init__(str(message))
        self.message = message


def _name(key: str, where: str) -> Msg:
    if where:
        return Msg(N_("{where} field {key}"), where=where, key=repr(key))
    return Msg(N_("field {key}"), key=repr(key))


def exact_fields(doc: object, expected: Sequence[str], where: str) -> dict[str, Any]:
    """`doc` as a dict with exactly the `expected` keys, else BadField naming the first missing or unknown one."""
    if not isinstance(doc, dict):
        raise BadField(Msg(N_("{where} is not an object"), where=where))
    missing = [k for k in expected if k not in doc]
    unknown = sorted(k for k in doc if k not in expected)
    if missing:
        raise BadField(Msg(N_("{where} lacks field {key}"), where=where, key=repr(missing[0])))
    if unknown:
        raise BadField(Msg(N_("{where} has an unknown field {key}"), where=where, key=repr(unknown[0])))
    return doc


def want_str(doc: Mapping[str, object], key: str, *, limit: int = 4096, where: str = "") -> str:
    value = doc.get(key)
    if not isinstance(value, str) or len(value) > limit or "\0" in value:
        raise BadField(Msg(N_("{field} is not a string of at most {limit} characters"), field=_name(key, where),
                           limit=limit))
    return value


def want_opt_str(doc: Mapping[str, object], key: str, *, limit: int = 4096, where: str = "") -> str | None:
    return None if doc.get(key) is None else want_str(doc, key, limit=limit, where=where)


def want_bool(doc: Mapping[str, object], key: str, *, where: str = "") -> bool:
    value = doc.get(key)
    if not isinstance(value, bool):
        raise BadField(Msg(N_("{field} is not true or false"), field=_name(key, where)))
    return value


def want_int(doc: Mapping[str, object], key: str, *, low: int = 0, high: int = 1 << 62, where: str = "") -> int:
    value = doc.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise BadField(Msg(N_("{field} is not a whole number from {low} to {high}"), field=_name(key, where), low=low,
                           high=high))
    return value


def want_list(doc: Mapping[str, object], key: str, *, limit: int = 1_000_000, where: str = "") -> list[Any]:
    value = doc.get(key)
    if not isinstance(value, list) or len(value) > limit:
        raise BadField(Msg(N_("{field} is not a list of at most {limit} items"), field=_name(key, where), limit=limit))
    return value


def want_str_list(doc: Mapping[str, object], key: str, *, items: int = 200, limit: int = 4096,
                  where: str = "") -> list[str]:
    values = want_list(doc, key, limit=items, where=where)
    if not all(isinstance(v, str) and len(v) <= limit and "\0" not in v for v in values):
        raise BadField(Msg(N_("{field} is not a list of strings of at most {limit} characters"),
                           field=_name(key, where), limit=limit))
    return values


def want_dict(doc: Mapping[str, object], key: str, *, where: str = "") -> dict[str, Any]:
    value = doc.get(key)
    if not isinstance(value, dict):
        raise BadField(Msg(N_("{field} is not an object"), field=_name(key, where)))
    return value


@cache
def _sha256() -> re.Pattern[str]:
    return re.compile(r"[0-9a-f]{64}")


def want_sha(doc: Mapping[str, object], key: str, *, where: str = "") -> str:
    value = want_str(doc, key, limit=64, where=where)
    if not _sha256().fullmatch(value):
        raise BadField(Msg(N_("{field} is not a sha256"), field=_name(key, where)))
    return value


@cache
def _dist_name() -> re.Pattern[str]:
    return re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,198}[A-Za-z0-9])?")


_VERSION_CLAUSE = r"\s*(?:===|==|~=|>=|<=|!=|<|>)\s*[0-9][0-9A-Za-z.+!*_-]{0,63}\s*"


@cache
def _requirement() -> re.Pattern[str]:
    return re.compile(_dist_name().pattern + rf"(?:{_VERSION_CLAUSE}(?:,{_VERSION_CLAUSE})*)?")


def requirement(text: str) -> str:
    """A requirement as ortfix installs it: a distribution name and version specifiers, nothing else (no URL, no
    path, no option, no extras, no marker). Raises BadField otherwise."""
    if not isinstance(text, str) or not _requirement().fullmatch(text):
        raise BadField(_not_plain(text))
    from packaging.requirements import InvalidRequirement, Requirement  # here: rollback never needs it

    try:
        req = Requirement(text)
    except InvalidRequirement as exc:
        raise BadField(Msg(N_("{text} is not a valid requirement: {error}"), text=repr(text), error=str(exc))) from exc
    if req.url or req.marker or req.extras:
        raise BadField(_not_plain(text))
    return text


def distribution_name(text: str) -> str:
    if not isinstance(text, str) or not _dist_name().fullmatch(text):
        raise BadField(Msg(N_("{text} is not a distribution name"), text=repr(text)))
    return text


def _not_plain(text: str) -> Msg:
    return Msg(N_("{text} is not a plain requirement (a name and version specifiers only)"), text=repr(text))
