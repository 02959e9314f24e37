"""compat/validate.py's JSON Schema subset (what replaced jsonschema): each keyword the compat schemas use means what
JSON Schema 2020-12 says, a keyword it does not implement is refused, and the error reported is the shallowest."""

from __future__ import annotations

import pytest

from ortfix.compat.schemas import SCHEMAS, JsonSchema
from ortfix.compat.validate import check_schema, first_schema_error, schema_errors

ROW: JsonSchema = {
    "type": "object",
    "additionalProperties": False,
    "required": ["n", "name"],
    "properties": {
        "n": {"type": "integer", "minimum": 1, "maximum": 9},
        "size": {"type": "number", "exclusiveMinimum": 0},
        "name": {"type": "string", "minLength": 2, "pattern": r"^[a-z]+$"},
        "kind": {"enum": ["a", "b", None]},
        "fixed": {"const": 1},
        "opt": {"type": ["string", "null"], "pattern": r"^\d+$"},
        "tags": {"type": "array", "minItems": 1, "uniqueItems": True, "items": {"$ref": "#/$defs/tag"}},
        "map": {"type": "object", "additionalProperties": {"type": "boolean"}},
    },
    "$defs": {"tag": {"type": "string", "pattern": "x"}},
}


def _messages(doc: object) -> list[tuple[str, str]]:
    return [(e.where, e.message) for e in schema_errors(ROW, doc)]


def test_every_shipped_schema_uses_only_the_subset() -> None:
    for schema in SCHEMAS.values():
        check_schema(schema)
    with pytest.raises(ValueError, match="oneOf"):
        check_schema({"type": "object", "properties": {"x": {"oneOf": []}}})
    with pytest.raises(ValueError, match="'date'"):
        check_schema({"type": "date"})


def test_a_valid_row() -> None:
    doc = {"n": 3, "size": 0.5, "name": "ok", "kind": None, "fixed": 1, "opt": None, "tags": ["x1", "ax"],
           "map": {"a": True}}
    assert schema_errors(ROW, doc) == []
    assert schema_errors(ROW, {**doc, "opt": "12", "fixed": 1.0}) == []  # 1.0 is 1 in JSON


@pytest.mark.parametrize(("change", "where", "needle"), [
    ({"n": True}, "n", "True is not of type 'integer'"),  # a boolean is not a number in JSON
    ({"n": 2.5}, "n", "is not of type 'integer'"),
    ({"n": 0}, "n", "less than the minimum of 1"),
    ({"n": 10}, "n", "greater than the maximum of 9"),
    ({"size": 0}, "size", "less than or equal to the minimum of 0"),
    ({"name": "a"}, "name", "is too short"),
    ({"name": "Ab"}, "name", "does not match"),
    ({"kind": "c"}, "kind", "is not one of"),
    ({"fixed": True}, "fixed", "1 was expected"),  # True is not 1 in JSON
    ({"opt": "x"}, "opt", "does not match"),
    ({"opt": 5}, "opt", "is not of type 'string', 'null'"),
    ({"tags": []}, "tags", "should be non-empty"),
    ({"tags": ["x", "x"]}, "tags", "non-unique"),
    ({"tags": ["x", "y"]}, "tags.1", "'y' does not match 'x'"),  # through the $ref
    ({"map": {"a": 1}}, "map.a", "is not of type 'boolean'"),
    ({"extra": 1}, "(top level)", "('extra' was unexpected)"),
])
def test_each_keyword_refuses(change: dict[str, object], where: str, needle: str) -> None:
    found = _messages({"n": 1, "name": "ok", **change})
    assert any(w == where and needle in m for w, m in found), found


def test_the_shallowest_error_is_reported() -> None:
    err = first_schema_error(ROW, {"name": "ok", "tags": ["y"]})
    assert err is not None and err.where == "(top level)" and err.message == "'n' is a required property"
    assert first_schema_error(ROW, ["not", "an", "object"]) is not None
