"""Validating one compat file: read the YAML keeping each node's line, check it against the schema of its kind
(compat/schemas.py), then what a schema cannot say (versions parse, no build listed twice, `published` is ordered).
Every problem is an OrtfixError `file:line: what is wrong`.

The schemas are read by `schema_errors`, an interpreter of exactly the subset of JSON Schema (draft 2020-12) they use
(type, const, enum, pattern, minLength, minimum, maximum, exclusiveMinimum, minItems, uniqueItems, items, properties,
required, additionalProperties, a local $ref): pure Python, so ortfix installs on Windows without jsonschema's Rust
dependency. A schema using any other keyword is refused (`check_schema`) rather than half-applied."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import cache
from typing import TYPE_CHECKING, Any, Union, cast

from packaging.version import InvalidVersion, Version

from ortfix.compat.addons import ADDONS_KIND, duplicate_minor
from ortfix.compat.schemas import MATRIX_KINDS, SCHEMA_VERSION, SCHEMAS, JsonSchema
from ortfix.compat.versions import driver_version
from ortfix.errors import OrtfixError
from ortfix.i18n import N_, Msg
from ortfix.record import frozen

if TYPE_CHECKING:
    from packaging.specifiers import SpecifierSet
    from yaml import Node


def validate_document(data: bytes, name: str, *, kind: str | None = None) -> dict[str, Any]:
    """Parse and validate one compat file (of `kind`, when given); every problem is an OrtfixError naming
    `file:line`."""
    import yaml

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise OrtfixError(Msg(N_("{where}: not UTF-8 text (byte {byte})"), where=name, byte=exc.start)) from exc
    loader = yaml.SafeLoader(text)
    try:  # one parse: the node tree (its lines name a problem) and the document built from it, as safe_load builds it
        node = loader.get_single_node()
        doc = loader.construct_document(node) if node is not None else None
    except RecursionError as exc:
        raise OrtfixError(Msg(N_("{where}: invalid YAML: nested too deeply"), where=name)) from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{name}:{mark.line + 1}" if mark is not None else name
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise OrtfixError(Msg(N_("{where}: invalid YAML: {problem}"), where=where, problem=problem)) from exc
    finally:
        loader.dispose()
    if not isinstance(doc, dict):
        raise OrtfixError(Msg(N_("{where}: a compat file must be a mapping with schema_version, kind and "
                                 "data_version"), where=f"{name}:1"))
    version = doc.get("schema_version")
    if version != SCHEMA_VERSION:
        raise OrtfixError(Msg(N_("{where}: schema_version {version} is not supported (this ortfix reads "
                                 "{supported})"), where=f"{name}:{_line(node, ['schema_version'])}",
                              version=repr(version), supported=SCHEMA_VERSION),
                          hint=Msg(N_("upgrade ortfix or use a matching matrix")))
    found = doc.get("kind")
    schema = SCHEMAS.get(str(found)) if kind is None or found == kind else None
    if schema is None:
        expected = kind or ", ".join(sorted(MATRIX_KINDS))
        where = f"{name}:{_line(node, ['kind'])}"
        raise OrtfixError(Msg(N_("{where}: unknown kind {kind} (expected one of {expected})") if kind is None else
                              N_("{where}: kind {kind} (expected {expected})"), where=where, kind=repr(found),
                              expected=expected))
    err = first_schema_error(schema, doc)
    if err is not None:
        path = list(err.path)
        raise OrtfixError(f"{name}:{_line(node, path)}: {err.where}: {err.message}")  # i18n: english (jsonschema's)
    _semantic_checks(doc, node, name)
    return doc


def _semantic_checks(doc: Mapping[str, Any], node: Node | None, name: str) -> None:
    """What a schema cannot say: versions parse, no build listed twice, specifiers parse, `published` is ordered."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    if doc["kind"] == ADDONS_KIND:
        twice = duplicate_minor(doc["tensorrt"])
        if twice is not None:
            i, j, minor = twice
            raise OrtfixError(Msg(N_("{where}: ORT {minor} is already in an earlier tensorrt row"),
                                  where=f"{name}:{_line(node, ['tensorrt', i, 'ort', j])}", minor=minor))
        return
    if doc["kind"] not in MATRIX_KINDS:
        return
    if doc["kind"] == "ort-releases":
        seen: dict[tuple[str, str, int, str], int] = {}
        for i, row in enumerate(doc["releases"]):
            for j, v in enumerate(row["versions"]):
                try:
                    Version(v)
                except InvalidVersion as exc:
                    raise OrtfixError(Msg(N_("{where}: not a version: {version}"), version=repr(v),
                                          where=f"{name}:{_line(node, ['releases', i, 'versions', j])}")) from exc
                key = (row["package"], row["index"], row["cuda_major"], str(Version(v)))
                if key in seen:
                    where = f"{name}:{_line(node, ['releases', i, 'versions', j])}"
                    raise OrtfixError(Msg(N_("{where}: {package} {version} (CUDA {cuda}, {index} index) is already "
                                             "in row {row}"), where=where, package=row["package"], version=v,
                                          cuda=row["cuda_major"], index=row["index"], row=seen[key] + 1))
                seen[key] = i
    else:
        for section in ("cuda", "cudnn"):
            for i, row in enumerate(doc[section]):
                wheels = row.get("wheels", []) if section == "cuda" else [row]
                for j, wheel in enumerate(wheels):
                    at: list[str | int] = [section, i, "wheels", j] if section == "cuda" else [section, i]
                    try:
                        spec = SpecifierSet(wheel["specifier"])
                    except InvalidSpecifier as exc:
                        raise OrtfixError(Msg(N_("{where}: not a version specifier: {specifier}"),
                                              where=f"{name}:{_line(node, [*at, 'specifier'])}",
                                              specifier=repr(wheel["specifier"]))) from exc
                    major = row["major"] if section == "cuda" else row["cuda_major"]
                    _check_published(wheel, spec, major, node, [*at, "published"], name)


def _check_published(wheel: Mapping[str, Any], spec: SpecifierSet, major: int, node: Node | None, at: list[str | int],
                     name: str) -> None:
    """`published`: CUDA minors of the wheel's major in ascending order, each with versions above the previous
    minor's (so the versions a driver runs are always the oldest ones and one `<` cap selects them), versions that
    the wheel's specifier admits, driver floors that never fall, `not_on` naming only listed versions."""
    def fail(where: list[str | int], what: Msg) -> OrtfixError:
        return OrtfixError(Msg(N_("{where}: {wheel}: {what}"), where=f"{name}:{_line(node, [*at, *where])}",
                               wheel=wheel["distribution"], what=what))

    seen: set[Version] = set()
    last: tuple[Version, Version, dict[str, tuple[int, ...]]] | None = None  # previous: cuda, newest, driver floors
    for g, group in enumerate(wheel["published"]["by_cuda"]):
        cuda = Version(group["cuda"])
        if cuda.major != major:
            raise fail(["by_cuda", g, "cuda"], Msg(N_("CUDA {cuda} is not a CUDA {major} minor"),
                                                       cuda=group["cuda"], major=major))
        floors = group.get("driver", {})
        floor = {os_name: driver_version(floors.get(os_name, "0")) for os_name in ("linux", "windows")}
        versions: list[Version] = []
        for k, text in enumerate(group["versions"]):
            v = Version(text)  # the schema's _WHEEL_VERSION admits valid versions only
            if v in seen:
                raise fail(["by_cuda", g, "versions", k], Msg(N_("{version} is listed twice"), version=text))
            if not spec.contains(v, prereleases=True):
                raise fail(["by_cuda", g, "versions", k], Msg(N_("{version} is outside its specifier {specifier}"),
                                                                  version=text, specifier=wheel["specifier"]))
            if versions and v <= versions[-1]:
                raise fail(["by_cuda", g, "versions", k], Msg(N_("{version}: versions must be in ascending order"),
                                                                  version=text))
            seen.add(v)
            versions.append(v)
        if last is not None:
            if cuda <= last[0]:
                raise fail(["by_cuda", g, "cuda"], Msg(N_("CUDA {cuda} after CUDA {previous}: ascending minors"),
                                                           cuda=group["cuda"], previous=str(last[0])))
            if versions[0] <= last[1]:
                raise fail(["by_cuda", g, "versions", 0], Msg(
                    N_("{version} (CUDA {cuda}) is not newer than {previous} (CUDA {previous_cuda})"),
                    version=str(versions[0]), cuda=group["cuda"], previous=str(last[1]),
                    previous_cuda=str(last[0])))
            if any(floor[os_name] < last[2][os_name] for os_name in floor):
                raise fail(["by_cuda", g, "driver"], Msg(N_("a driver floor lower than the previous minor's")))
        last = (cuda, versions[-1], floor)
    for platform, listed in wheel["published"].get("not_on", {}).items():
        for k, text in enumerate(listed):
            if Version(text) not in seen:
                raise fail(["not_on", platform, k], Msg(N_("{version} (not on {platform}) is not a listed version"),
                                                         version=text, platform=platform))


def _line(node: Node | None, path: Sequence[str | int]) -> int:
    """The 1-based line of the YAML node at `path` (or of its nearest existing parent)."""
    import yaml

    current = node
    for step in path:
        nxt = None
        if isinstance(current, yaml.MappingNode):
            for k, v in current.value:
                if k.value == str(step):
                    nxt = v
                    break
        elif isinstance(current, yaml.SequenceNode) and isinstance(step, int) and step < len(current.value):
            nxt = current.value[step]
        if nxt is None:
            break
        current = nxt
    return int(current.start_mark.line) + 1 if current is not None else 1


# --- the JSON Schema subset ------------------------------------------------------------------------------------------

SchemaPath = tuple[Union[str, int], ...]
_KEYWORDS = frozenset({"type", "const", "enum", "pattern", "minLength", "minimum", "maximum", "exclusiveMinimum",
                       "minItems", "uniqueItems", "items", "properties", "required", "additionalProperties", "$ref",
                       "$defs", "$schema", "title"})
_TYPES = frozenset({"string", "integer", "number", "boolean", "null", "object", "array"})


@frozen
class SchemaError:
    """One place where a document breaks its schema: the path to it and what is wrong, in jsonschema's wording (the
    English its users search for, compared with jsonschema's own by tests/test_schema_subset.py: `# i18n: english`)."""

    path: SchemaPath
    message: str

    @property
    def where(self) -> str:
        return ".".join(str(p) for p in self.path) or "(top level)"


def check_schema(schema: JsonSchema) -> None:
    """ValueError when `schema` uses a keyword or a type this interpreter does not implement."""
    unknown = sorted(set(schema) - _KEYWORDS)
    if unknown:
        raise ValueError(f"unsupported schema keyword(s): {', '.join(unknown)}")
    types = schema.get("type")
    for t in types if isinstance(types, list) else [] if types is None else [types]:
        if t not in _TYPES:
            raise ValueError(f"unsupported type {t!r}")
    subs: list[object] = [schema.get("items"), schema.get("additionalProperties")]
    for key in ("properties", "$defs"):
        subs += list(_mapping(schema.get(key, {})).values())
    for sub in subs:
        if isinstance(sub, dict):
            check_schema(cast(JsonSchema, sub))


def _mapping(value: object) -> dict[str, object]:
    if not isinstance(value, dict):
        raise ValueError(f"not a schema mapping: {value!r}")
    return cast(dict[str, object], value)


def _is_type(value: object, name: str) -> bool:
    if name == "string":
        return isinstance(value, str)
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "null":
        return value is None
    if name == "object":
        return isinstance(value, dict)
    return isinstance(value, list)  # "array": check_schema admits no other name


@cache
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _same(a: object, b: object) -> bool:
    """JSON equality: True is not 1, 1 is 1.0."""
    return type(a) is type(b) and a == b if isinstance(a, bool) or isinstance(b, bool) else a == b


def schema_errors(schema: JsonSchema, value: object, *, root: JsonSchema | None = None,
                  path: SchemaPath = ()) -> list[SchemaError]:
    """Every way `value` breaks `schema`, in document order (a value of the wrong type: that alone)."""
    root = schema if root is None else root
    ref = schema.get("$ref")
    if isinstance(ref, str):
        if not ref.startswith("#/$defs/"):
            raise ValueError(f"unsupported $ref {ref!r}")
        return schema_errors(_mapping(_mapping(root["$defs"])[ref[len("#/$defs/"):]]) , value, root=root, path=path)
    errors: list[SchemaError] = []

    def fail(message: str) -> None:
        errors.append(SchemaError(path, message))

    types = schema.get("type")
    if types is not None:
        names = cast(list[str], types) if isinstance(types, list) else [cast(str, types)]
        if not any(_is_type(value, t) for t in names):
            return [SchemaError(path, f"{value!r} is not of type {', '.join(repr(t) for t in names)}")]  # i18n: english
    if "const" in schema and not _same(value, schema["const"]):
        fail(f"{schema['const']!r} was expected")  # i18n: english
    if "enum" in schema and not any(_same(value, e) for e in cast(list[object], schema["enum"])):
        fail(f"{value!r} is not one of {schema['enum']!r}")  # i18n: english
    if isinstance(value, str):
        if len(value) < cast(int, schema.get("minLength", 0)):
            fail(f"{value!r} is too short")  # i18n: english
        pattern = schema.get("pattern")
        if isinstance(pattern, str) and not _regex(pattern).search(value):
            fail(f"{value!r} does not match {pattern!r}")  # i18n: english
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < cast(float, schema["minimum"]):
            fail(f"{value!r} is less than the minimum of {schema['minimum']!r}")  # i18n: english
        if "maximum" in schema and value > cast(float, schema["maximum"]):
            fail(f"{value!r} is greater than the maximum of {schema['maximum']!r}")  # i18n: english
        if "exclusiveMinimum" in schema and value <= cast(float, schema["exclusiveMinimum"]):
            fail(f"{value!r} is less than or equal to the minimum of {schema['exclusiveMinimum']!r}")  # i18n: english
    if isinstance(value, list):
        errors += _array_errors(schema, value, root, path)
    if isinstance(value, dict):
        errors += _object_errors(schema, cast(dict[object, object], value), root, path)
    return errors


def _array_errors(schema: JsonSchema, value: list[object], root: JsonSchema, path: SchemaPath) -> list[SchemaError]:
    errors: list[SchemaError] = []
    if len(value) < cast(int, schema.get("minItems", 0)):
        short = f"{value!r} should be non-empty" if not value else f"{value!r} is too short"  # i18n: english
        errors.append(SchemaError(path, short))
    if schema.get("uniqueItems") is True and any(_same(a, b) for i, a in enumerate(value) for b in value[i + 1:]):
        errors.append(SchemaError(path, f"{value!r} has non-unique elements"))  # i18n: english
    items = schema.get("items")
    if isinstance(items, dict):
        for i, item in enumerate(value):
            errors += schema_errors(cast(JsonSchema, items), item, root=root, path=(*path, i))
    return errors


def _object_errors(schema: JsonSchema, value: dict[object, object], root: JsonSchema,
                   path: SchemaPath) -> list[SchemaError]:
    errors = [SchemaError(path, f"{key!r} is a required property")  # i18n: english
              for key in cast(list[str], schema.get("required", [])) if key not in value]
    properties = _mapping(schema.get("properties", {}))
    extra = schema.get("additionalProperties", True)
    unexpected = [key for key in value if key not in properties]
    if extra is False and unexpected:
        listed = ", ".join(repr(k) for k in unexpected)
        errors.append(SchemaError(path, f"Additional properties are not allowed ({listed} "  # i18n: english
                                        f"{'was' if len(unexpected) == 1 else 'were'} unexpected)"))  # i18n: english
    for key, item in value.items():
        sub = properties.get(key) if isinstance(key, str) else None
        if sub is None and isinstance(extra, dict):
            sub = extra
        if isinstance(sub, dict):
            errors += schema_errors(cast(JsonSchema, sub), item, root=root, path=(*path, cast(str, key)))
    return errors


def first_schema_error(schema: JsonSchema, value: object) -> SchemaError | None:
    """The error to report: the shallowest, the first in document order among equals (jsonschema's best_match)."""
    errors = schema_errors(schema, value)
    return min(errors, key=lambda e: len(e.path)) if errors else None
