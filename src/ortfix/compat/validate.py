"""Validating one compat file: read the YAML keeping each node's line, check it against the schema of its kind
(compat/schemas.py), then what a schema cannot say (versions parse, no build listed twice, `published` is ordered).
Every problem is an OrtfixError `file:line: what is wrong`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from packaging.version import InvalidVersion, Version

from ortfix.compat.schemas import MATRIX_KINDS, SCHEMA_VERSION, SCHEMAS
from ortfix.compat.versions import driver_version
from ortfix.errors import OrtfixError

if TYPE_CHECKING:
    from packaging.specifiers import SpecifierSet
    from yaml import Node


def validate_document(data: bytes, name: str) -> dict[str, Any]:
    """Parse and validate one matrix file; every problem is an OrtfixError naming `file:line`."""
    import yaml

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise OrtfixError(f"{name}: not UTF-8 text (byte {exc.start})") from exc
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        doc = yaml.safe_load(text)
    except RecursionError as exc:
        raise OrtfixError(f"{name}: invalid YAML: nested too deeply") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{name}:{mark.line + 1}" if mark is not None else name
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise OrtfixError(f"{where}: invalid YAML: {problem}") from exc
    if not isinstance(doc, dict):
        raise OrtfixError(f"{name}:1: a matrix file must be a mapping with schema_version, kind and data_version")
    version = doc.get("schema_version")
    if version != SCHEMA_VERSION:
        raise OrtfixError(f"{name}:{_line(node, ['schema_version'])}: schema_version {version!r} is not supported "
                          f"(this ortfix reads {SCHEMA_VERSION})", hint="upgrade ortfix or use a matching matrix")
    kind = doc.get("kind")
    schema = SCHEMAS.get(str(kind))
    if schema is None:
        raise OrtfixError(f"{name}:{_line(node, ['kind'])}: unknown kind {kind!r} "
                          f"(expected one of {', '.join(sorted(MATRIX_KINDS))})")
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(doc), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    if errors:
        err = jsonschema.exceptions.best_match(errors) or errors[0]
        path = list(err.absolute_path)
        where = ".".join(str(p) for p in path) or "(top level)"
        raise OrtfixError(f"{name}:{_line(node, path)}: {where}: {err.message}")
    _semantic_checks(doc, node, name)
    return doc


def _semantic_checks(doc: Mapping[str, Any], node: Node | None, name: str) -> None:
    """What a schema cannot say: versions parse, no build listed twice, specifiers parse, `published` is ordered."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    if doc["kind"] not in MATRIX_KINDS:
        return
    if doc["kind"] == "ort-releases":
        seen: dict[tuple[str, str, int, str], int] = {}
        for i, row in enumerate(doc["releases"]):
            for j, v in enumerate(row["versions"]):
                try:
                    Version(v)
                except InvalidVersion as exc:
                    raise OrtfixError(f"{name}:{_line(node, ['releases', i, 'versions', j])}: "
                                      f"not a version: {v!r}") from exc
                key = (row["package"], row["index"], row["cuda_major"], str(Version(v)))
                if key in seen:
                    raise OrtfixError(f"{name}:{_line(node, ['releases', i, 'versions', j])}: {row['package']} {v} "
                                      f"(CUDA {row['cuda_major']}, {row['index']} index) is already in row "
                                      f"{seen[key] + 1}")
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
                        raise OrtfixError(f"{name}:{_line(node, [*at, 'specifier'])}: not a version specifier: "
                                          f"{wheel['specifier']!r}") from exc
                    major = row["major"] if section == "cuda" else row["cuda_major"]
                    _check_published(wheel, spec, major, node, [*at, "published"], name)


def _check_published(wheel: Mapping[str, Any], spec: SpecifierSet, major: int, node: Node | None, at: list[str | int],
                     name: str) -> None:
    """`published`: CUDA minors of the wheel's major in ascending order, each with versions above the previous
    minor's (so the versions a driver runs are always the oldest ones and one `<` cap selects them), versions that
    the wheel's specifier admits, driver floors that never fall, `not_on` naming only listed versions."""
    def fail(where: list[str | int], what: str) -> OrtfixError:
        return OrtfixError(f"{name}:{_line(node, [*at, *where])}: {wheel['distribution']}: {what}")

    seen: set[Version] = set()
    last: tuple[Version, Version, dict[str, tuple[int, ...]]] | None = None  # previous: cuda, newest, driver floors
    for g, group in enumerate(wheel["published"]["by_cuda"]):
        cuda = Version(group["cuda"])
        if cuda.major != major:
            raise fail(["by_cuda", g, "cuda"], f"CUDA {group['cuda']} is not a CUDA {major} minor")
        floors = group.get("driver", {})
        floor = {os_name: driver_version(floors.get(os_name, "0")) for os_name in ("linux", "windows")}
        versions: list[Version] = []
        for k, text in enumerate(group["versions"]):
            v = Version(text)  # the schema's _WHEEL_VERSION admits valid versions only
            if v in seen:
                raise fail(["by_cuda", g, "versions", k], f"{text} is listed twice")
            if not spec.contains(v, prereleases=True):
                raise fail(["by_cuda", g, "versions", k], f"{text} is outside its specifier {wheel['specifier']}")
            if versions and v <= versions[-1]:
                raise fail(["by_cuda", g, "versions", k], f"{text}: versions must be in ascending order")
            seen.add(v)
            versions.append(v)
        if last is not None:
            if cuda <= last[0]:
                raise fail(["by_cuda", g, "cuda"], f"CUDA {group['cuda']} after CUDA {last[0]}: ascending minors")
            if versions[0] <= last[1]:
                raise fail(["by_cuda", g, "versions", 0], f"{versions[0]} (CUDA {group['cuda']}) is not newer than "
                                                          f"{last[1]} (CUDA {last[0]})")
            if any(floor[os_name] < last[2][os_name] for os_name in floor):
                raise fail(["by_cuda", g, "driver"], "a driver floor lower than the previous minor's")
        last = (cuda, versions[-1], floor)
    for platform, listed in wheel["published"].get("not_on", {}).items():
        for k, text in enumerate(listed):
            if Version(text) not in seen:
                raise fail(["not_on", platform, k], f"{text} (not on {platform}) is not a listed version")


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
