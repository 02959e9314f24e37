"""The compatibility matrix: ORT builds ↔ CUDA ↔ cuDNN ↔ driver, loaded from versioned YAML in compat/ and validated
against a JSON Schema on every load. A broken file is rejected with `file:line: what is wrong`.

Validating costs a YAML parse and a jsonschema import (~100 ms); the validated data is cached as JSON keyed by the
files' content hash, so a warm `ortfix check` pays only for reading that JSON.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from ortfix.cachedir import cache_dir, write_json
from ortfix.errors import OrtfixError

SCHEMA_VERSION = 1
_CACHE_FORMAT = 4

_STR_LIST = {"type": "array", "items": {"type": "string", "minLength": 1}}
_HEADER = {
    "schema_version": {"const": SCHEMA_VERSION},
    "data_version": {"type": "string", "pattern": r"^\d{4}\.\d{2}\.\d{2}$"},
}
_CC = {"type": "string", "pattern": r"^\d+\.\d+$"}
_VERSION = {"type": "string", "pattern": r"^\d+\.\d+(\.\d+)?([a-z]+\d*)?(\.post\d+)?$"}
_DRIVER = {"type": "string", "pattern": r"^\d+(\.\d+){0,2}$"}
# What one wheel costs on disk, read off a real wheel (`measured`: its file name): preflight's estimate when the
# index does not say (pip's --report gives no sizes for remote files).
_SIZE = {
    "type": "object",
    "additionalProperties": False,
    "required": ["download", "unpacked", "measured"],
    "properties": {
        "download": {"type": "number", "exclusiveMinimum": 0},
        "unpacked": {"type": "number", "exclusiveMinimum": 0},
        "measured": {"type": "string", "minLength": 3},
    },
}

SCHEMAS: dict[str, dict[str, Any]] = {
    "ort-releases": {
        "type": "object",
        "additionalProperties": False,
        "required": ["schema_version", "kind", "data_version", "releases"],
        "properties": {
            **_HEADER,
            "kind": {"const": "ort-releases"},
            "releases": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["versions", "package", "index", "cuda_major", "cudnn_major", "providers", "source"],
                    "properties": {
                        "versions": {"type": "array", "minItems": 1, "items": _VERSION},
                        "package": {"type": "string", "pattern": r"^[a-z0-9][a-z0-9._-]*$"},
                        "index": {"enum": ["default", "alternate", "withdrawn"]},
                        "cuda_major": {"type": "integer", "minimum": 9, "maximum": 20},
                        "cuda_build": {"type": ["string", "null"], "pattern": r"^\d+\.\d+(\.\d+)?$"},
                        "cudnn_major": {"type": ["integer", "null"], "minimum": 7, "maximum": 20},
                        "providers": {
                            "type": "object",
                            "additionalProperties": False,
                            "required": ["cuda"],
                            "properties": {
                                name: {
                                    "type": "object",
                                    "additionalProperties": False,
                                    "required": ["needed"],
                                    "properties": {"needed": _STR_LIST, "lazy": _STR_LIST},
                                }
                                for name in ("cuda", "tensorrt")
                            },
                        },
                        "compute_capabilities": {"type": "array", "items": _CC},
                        "extras": {"type": "object", "additionalProperties": _STR_LIST},
                        "requires_python": {"type": "string"},
                        "python_tags": {"type": "array", "items": {"type": "string", "pattern": r"^cp\d+t?$"}},
                        "platforms": {"type": "array",
                                      "items": {"enum": ["linux_x86_64", "linux_aarch64", "win_amd64", "win_arm64"]}},
                        "source": {"type": "string", "minLength": 3},
                        "note": {"type": "string"},
                        "size_mib": _SIZE,
                    },
                },
            },
        },
    },
    "cuda": {
        "type": "object",
        "additionalProperties": False,
        "required": ["schema_version", "kind", "data_version", "cuda", "cudnn"],
        "properties": {
            **_HEADER,
            "kind": {"const": "cuda"},
            "cuda": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["major", "driver_min", "releases", "compute_capability", "wheels", "source"],
                    "properties": {
                        "major": {"type": "integer", "minimum": 9, "maximum": 20},
                        "driver_min": {
                            "type": "object",
                            "additionalProperties": False,
                            "required": ["linux"],
                            "properties": {"linux": _DRIVER, "windows": _DRIVER},
                        },
                        "releases": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "additionalProperties": False,
                                "required": ["version", "linux"],
                                "properties": {
                                    "version": {"type": "string", "pattern": r"^\d+\.\d+(\.\d+)?$"},
                                    "linux": _DRIVER,
                                    "windows": {"type": ["string", "null"], "pattern": r"^\d+(\.\d+){0,2}$"},
                                },
                            },
                        },
                        "compute_capability": {
                            "type": "object",
                            "additionalProperties": False,
                            "required": ["min", "max"],
                            "properties": {"min": _CC, "max": _CC},
                        },
                        "wheels": {"type": "array", "items": {"$ref": "#/$defs/wheel"}},
                        "source": {"type": "string", "minLength": 3},
                    },
                },
            },
            "cudnn": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["major", "cuda_major", "distribution", "specifier", "dir", "sonames", "source"],
                    "properties": {
                        "major": {"type": "integer", "minimum": 7, "maximum": 20},
                        "cuda_major": {"type": "integer", "minimum": 9, "maximum": 20},
                        "distribution": {"type": "string", "pattern": r"^[a-z0-9][a-z0-9._-]*$"},
                        "specifier": {"type": "string", "minLength": 2},
                        "dir": {"type": "string", "minLength": 1},
                        "windows_dir": {"type": "string"},
                        "sonames": {**_STR_LIST, "minItems": 1},
                        "size_mib": _SIZE,
                        "compute_capability": {
                            "type": "object",
                            "additionalProperties": False,
                            "required": ["min", "max"],
                            "properties": {"min": _CC, "max": _CC},
                        },
                        "source": {"type": "string", "minLength": 3},
                    },
                },
            },
        },
        "$defs": {
            "wheel": {
                "type": "object",
                "additionalProperties": False,
                "required": ["distribution", "specifier", "sonames", "dir"],
                "properties": {
                    "distribution": {"type": "string", "pattern": r"^[a-z0-9][a-z0-9._-]*$"},
                    "specifier": {"type": "string", "minLength": 2},
                    "sonames": {**_STR_LIST, "minItems": 1},
                    "dir": {"type": "string", "minLength": 1},
                    "windows_dir": {"type": "string"},
                    "size_mib": _SIZE,
                },
            }
        },
    },
}


# -- typed rows ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OrtBuild:
    versions: tuple[str, ...]
    package: str
    index: str
    cuda_major: int
    cuda_build: str | None
    cudnn_major: int | None
    cuda_needed: tuple[str, ...]
    cuda_lazy: tuple[str, ...]
    tensorrt_needed: tuple[str, ...]
    compute_capabilities: tuple[str, ...]
    extras: Mapping[str, tuple[str, ...]]
    requires_python: str | None
    python_tags: tuple[str, ...]
    platforms: tuple[str, ...]
    source: str
    note: str | None
    size_mib: tuple[float, float] | None = None  # (download, unpacked) of one measured wheel

    @property
    def newest(self) -> Version:
        return max(Version(v) for v in self.versions)


@dataclass(frozen=True)
class WheelSpec:
    distribution: str
    specifier: str
    sonames: tuple[str, ...]
    dir: str
    windows_dir: str | None = None
    size_mib: tuple[float, float] | None = None  # (download, unpacked) of one measured wheel


@dataclass(frozen=True)
class CudaMajor:
    major: int
    driver_min: Mapping[str, str]
    releases: tuple[tuple[str, str, str | None], ...]  # (toolkit version, linux driver, windows driver)
    cc_min: str
    cc_max: str
    wheels: tuple[WheelSpec, ...]
    source: str


@dataclass(frozen=True)
class CudnnWheel:
    major: int
    cuda_major: int
    wheel: WheelSpec
    cc_min: str | None
    cc_max: str | None
    source: str


@dataclass(frozen=True)
class Matrix:
    builds: tuple[OrtBuild, ...]
    cuda: Mapping[int, CudaMajor]
    cudnn: tuple[CudnnWheel, ...]
    data_version: str
    files: tuple[str, ...] = field(default=())

    def builds_for(self, version: str) -> list[OrtBuild]:
        try:
            wanted = Version(version)
        except InvalidVersion:
            return []
        return [b for b in self.builds if any(_same_version(v, wanted) for v in b.versions)]

    def size_estimate(self, distribution: str) -> tuple[float, float] | None:
        """(download, unpacked) MiB of a wheel of `distribution`, the largest any row measured; None if none did."""
        name = distribution.lower().replace("_", "-")
        sizes = [b.size_mib for b in self.builds if b.package == name and b.size_mib]
        sizes += [w.size_mib for c in self.cuda.values() for w in c.wheels if w.distribution == name and w.size_mib]
        sizes += [r.wheel.size_mib for r in self.cudnn if r.wheel.distribution == name and r.wheel.size_mib]
        return max(sizes, key=lambda s: s[1]) if sizes else None

    def cuda_major(self, major: int) -> CudaMajor | None:
        return self.cuda.get(major)

    def cudnn_wheel(self, cudnn_major: int, cuda_major: int) -> CudnnWheel | None:
        for row in self.cudnn:
            if row.major == cudnn_major and row.cuda_major == cuda_major:
                return row
        return None

    def wheel_for_soname(self, soname: str, cuda_major: int, cudnn_major: int | None) -> WheelSpec | None:
        """The NVIDIA pip wheel that ships `soname` for this CUDA (and cuDNN) major."""
        if cudnn_major is not None:
            row = self.cudnn_wheel(cudnn_major, cuda_major)
            if row and soname in row.wheel.sonames:
                return row.wheel
        cuda = self.cuda.get(cuda_major)
        for wheel in cuda.wheels if cuda else ():
            if soname in wheel.sonames:
                return wheel
        return None

    def highest_cuda_for_driver(self, driver: str, os_name: str = "linux") -> Version | None:
        """The newest CUDA toolkit release whose GA driver requirement this driver meets (what nvidia-smi calls the
        driver's 'CUDA Version'); minor-version compatibility may let newer minors of the same major run too."""
        have = _driver_version(driver)
        best: Version | None = None
        for cuda in self.cuda.values():
            for version, linux, windows in cuda.releases:
                need = windows if os_name == "windows" else linux
                if need and have >= _driver_version(need) and (best is None or Version(version) > best):
                    best = Version(version)
        return best

    def driver_supports_major(self, driver: str, major: int, os_name: str = "linux") -> bool | None:
        cuda = self.cuda.get(major)
        if cuda is None:
            return None
        need = cuda.driver_min.get(os_name) or cuda.driver_min.get("linux")
        return _driver_version(driver) >= _driver_version(need) if need else None


def _same_version(text: str, wanted: Version) -> bool:
    try:
        return Version(text) == wanted
    except InvalidVersion:
        return False


def _driver_version(text: str) -> tuple[int, ...]:
    out = []
    for part in text.strip().split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        out.append(int(digits) if digits else 0)
    while len(out) < 3:
        out.append(0)
    return tuple(out)



# -- loading --------------------------------------------------------------------------------------------------


def default_compat_dir() -> Path:
    override = os.environ.get("ORTFIX_COMPAT_DIR")
    if override:
        return Path(override)
    packaged = Path(__file__).with_name("_compat")  # where the wheel puts compat/
    if packaged.is_dir():
        return packaged
    # An editable checkout: compat/ sits at the repository root, next to src/.
    return Path(__file__).resolve().parents[2] / "compat"


def compat_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        raise OrtfixError(f"compatibility matrix folder {directory} not found",
                          hint="reinstall ortfix, or point ORTFIX_COMPAT_DIR at a compat/ folder")
    files = sorted(p for p in directory.iterdir() if p.suffix in (".yaml", ".yml"))
    if not files:
        raise OrtfixError(f"no matrix files (*.yaml) in {directory}")
    return files


def load_matrix(directory: Path | None = None, *, use_cache: bool = True) -> Matrix:
    directory = directory or default_compat_dir()
    files = compat_files(directory)
    # The cache is keyed by each file's identity (name, size, mtime): a warm load reads one JSON file and neither
    # parses YAML nor imports jsonschema. Any edit to a matrix file changes the key.
    identity = []
    for f in files:
        try:
            st = f.stat()
        except OSError as exc:
            raise OrtfixError(f"cannot read matrix file {f}: {exc.strerror or exc}") from exc
        identity.append(f"{f.resolve()}|{st.st_size}|{st.st_mtime_ns}")
    key = "\n".join(identity)
    cache_file = _cache_path(key) if use_cache else None
    docs: dict[str, dict[str, Any]] | None = None
    matrix_files: list[str] = []
    if cache_file is not None:
        with contextlib.suppress(OSError, ValueError):
            cached = json.loads(cache_file.read_text(encoding="utf-8"))
            if cached.get("format") == _CACHE_FORMAT and cached.get("key") == key:
                docs, matrix_files = cached["docs"], cached["files"]
    if docs is None:
        docs = {}
        for f in files:
            doc = validate_document(_read_bytes(f), str(f))
            kind = doc["kind"]
            if kind not in MATRIX_KINDS:
                continue  # another versioned data file beside the matrix (explain's error patterns)
            if kind in docs:
                raise OrtfixError(f"{f}: a second file of kind '{kind}' (one file per kind)")
            docs[kind] = doc
            matrix_files.append(str(f))
        missing = {"ort-releases", "cuda"} - set(docs)
        if missing:
            raise OrtfixError(f"{directory}: no matrix file of kind {', '.join(sorted(missing))}")
        if cache_file is not None:
            write_json(cache_file, {"format": _CACHE_FORMAT, "key": key, "docs": docs, "files": matrix_files})
    return _build(docs, tuple(matrix_files))


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise OrtfixError(f"cannot read matrix file {path}: {exc.strerror or exc}") from exc


def _cache_path(key: str) -> Path | None:
    import zlib  # a cheap file name for the key; the key itself is stored and compared in full

    base = cache_dir()
    return base / f"matrix-{zlib.crc32(key.encode()):08x}.json" if base else None


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
    schema = _schema_for(str(kind))
    if schema is None:
        raise OrtfixError(f"{name}:{_line(node, ['kind'])}: unknown kind {kind!r} "
                          f"(expected one of {', '.join(sorted(SCHEMAS))})")
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


def _schema_for(kind: str) -> dict[str, Any] | None:
    if kind == "error-patterns":  # versioned with the matrix, owned by explain.py (imported here: no import cycle)
        from ortfix.explain import ERROR_PATTERNS_SCHEMA

        return ERROR_PATTERNS_SCHEMA
    return SCHEMAS.get(kind)


MATRIX_KINDS = ("ort-releases", "cuda")


def _semantic_checks(doc: Mapping[str, Any], node: Any, name: str) -> None:
    """What a schema cannot say: versions parse, no build listed twice, specifiers parse."""
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
                    try:
                        SpecifierSet(wheel["specifier"])
                    except InvalidSpecifier as exc:
                        where = [section, i, "wheels", j, "specifier"] if section == "cuda" else [section, i,
                                                                                                  "specifier"]
                        raise OrtfixError(f"{name}:{_line(node, where)}: not a version specifier: "
                                          f"{wheel['specifier']!r}") from exc


def _line(node: Any, path: Sequence[str | int]) -> int:
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


def _build(docs: Mapping[str, Mapping[str, Any]], files: tuple[str, ...]) -> Matrix:
    ort = docs["ort-releases"]
    cuda_doc = docs["cuda"]
    builds = []
    for row in ort["releases"]:
        providers = row["providers"]
        builds.append(
            OrtBuild(
                versions=tuple(row["versions"]),
                package=row["package"],
                index=row["index"],
                cuda_major=row["cuda_major"],
                cuda_build=row.get("cuda_build"),
                cudnn_major=row.get("cudnn_major"),
                cuda_needed=tuple(providers["cuda"]["needed"]),
                cuda_lazy=tuple(providers["cuda"].get("lazy", ())),
                tensorrt_needed=tuple(providers.get("tensorrt", {}).get("needed", ())),
                compute_capabilities=tuple(row.get("compute_capabilities", ())),
                extras={k: tuple(v) for k, v in row.get("extras", {}).items()},
                requires_python=row.get("requires_python"),
                python_tags=tuple(row.get("python_tags", ())),
                platforms=tuple(row.get("platforms", ())),
                source=row["source"],
                note=row.get("note"),
                size_mib=_size(row),
            )
        )
    cuda: dict[int, CudaMajor] = {}
    for row in cuda_doc["cuda"]:
        cuda[row["major"]] = CudaMajor(
            major=row["major"],
            driver_min=dict(row["driver_min"]),
            releases=tuple((r["version"], r["linux"], r.get("windows")) for r in row["releases"]),
            cc_min=row["compute_capability"]["min"],
            cc_max=row["compute_capability"]["max"],
            wheels=tuple(_wheel(w) for w in row["wheels"]),
            source=row["source"],
        )
    cudnn = tuple(
        CudnnWheel(
            major=row["major"],
            cuda_major=row["cuda_major"],
            wheel=_wheel(row),
            cc_min=row.get("compute_capability", {}).get("min"),
            cc_max=row.get("compute_capability", {}).get("max"),
            source=row["source"],
        )
        for row in cuda_doc["cudnn"]
    )
    data_version = max(str(d["data_version"]) for d in docs.values())
    return Matrix(builds=tuple(builds), cuda=cuda, cudnn=cudnn, data_version=data_version, files=files)


def _wheel(row: Mapping[str, Any]) -> WheelSpec:
    return WheelSpec(
        distribution=row["distribution"],
        specifier=row["specifier"],
        sonames=tuple(row["sonames"]),
        dir=row["dir"],
        windows_dir=row.get("windows_dir"),
        size_mib=_size(row),
    )


def _size(row: Mapping[str, Any]) -> tuple[float, float] | None:
    size = row.get("size_mib")
    return (float(size["download"]), float(size["unpacked"])) if size else None
