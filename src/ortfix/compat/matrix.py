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
from typing import TYPE_CHECKING, Any

from packaging.version import InvalidVersion, Version

from ortfix.errors import OrtfixError
from ortfix.system.cachedir import cache_dir, write_json

if TYPE_CHECKING:
    from packaging.specifiers import SpecifierSet

SCHEMA_VERSION = 1
_CACHE_FORMAT = 6

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

# Platforms an NVIDIA wheel is published for (`published.not_on` keys); see Matrix.wheel_requirement.
WHEEL_PLATFORMS = ("linux_x86_64", "linux_aarch64", "win_amd64")
_WHEEL_VERSION = {"type": "string", "pattern": r"^\d+(\.\d+)+(\.post\d+)?$"}  # always a valid PEP 440 version
# A driver per OS (Linux required): a CUDA major's minimum, or a published version group's floor.
_OS_DRIVERS = {
    "type": "object",
    "additionalProperties": False,
    "required": ["linux"],
    "properties": {"linux": _DRIVER, "windows": _DRIVER},
}
# Which published versions of a wheel exist and which CUDA toolkit minor each ships with (scripts/wheel_caps.py).
_PUBLISHED = {
    "type": "object",
    "additionalProperties": False,
    "required": ["source", "by_cuda"],
    "properties": {
        "source": {"type": "string", "minLength": 3},
        "by_cuda": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["cuda", "versions"],
                "properties": {
                    "cuda": {"type": "string", "pattern": r"^\d+\.\d+$"},
                    "driver": _OS_DRIVERS,
                    "versions": {"type": "array", "minItems": 1, "items": _WHEEL_VERSION},
                },
            },
        },
        "not_on": {
            "type": "object",
            "additionalProperties": False,
            "properties": {p: {"type": "array", "minItems": 1, "items": _WHEEL_VERSION} for p in WHEEL_PLATFORMS},
        },
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
            # The oldest long-term driver branch still widely deployed: with no driver to go by, plan prefers a build
            # whose CUDA major runs on it.
            "widely_deployed_driver": {
                "type": "object",
                "additionalProperties": False,
                "required": ["linux", "source"],
                "properties": {"linux": _DRIVER, "source": {"type": "string", "minLength": 3}},
            },
            "cuda": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["major", "driver_min", "releases", "compute_capability", "wheels", "source"],
                    "properties": {
                        "major": {"type": "integer", "minimum": 9, "maximum": 20},
                        "driver_min": _OS_DRIVERS,
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
                    "required": ["major", "cuda_major", "distribution", "specifier", "dir", "sonames", "published",
                                 "source"],
                    "properties": {
                        "major": {"type": "integer", "minimum": 7, "maximum": 20},
                        "cuda_major": {"type": "integer", "minimum": 9, "maximum": 20},
                        "distribution": {"type": "string", "pattern": r"^[a-z0-9][a-z0-9._-]*$"},
                        "specifier": {"type": "string", "minLength": 2},
                        "dir": {"type": "string", "minLength": 1},
                        "windows_dir": {"type": "string"},
                        "sonames": {**_STR_LIST, "minItems": 1},
                        "size_mib": _SIZE,
                        "ptx_jit": {"type": "boolean"},
                        "published": _PUBLISHED,
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
                "required": ["distribution", "specifier", "sonames", "dir", "published"],
                "properties": {
                    "distribution": {"type": "string", "pattern": r"^[a-z0-9][a-z0-9._-]*$"},
                    "specifier": {"type": "string", "minLength": 2},
                    "sonames": {**_STR_LIST, "minItems": 1},
                    "dir": {"type": "string", "minLength": 1},
                    "windows_dir": {"type": "string"},
                    "size_mib": _SIZE,
                    "ptx_jit": {"type": "boolean"},
                    "published": _PUBLISHED,
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

    def admits_python(self, python_version: str) -> bool:
        """Its Requires-Python admits this Python (an unreadable one admits everything)."""
        if not self.requires_python:
            return True
        from packaging.specifiers import InvalidSpecifier, SpecifierSet

        try:
            return SpecifierSet(self.requires_python).contains(python_version)
        except InvalidSpecifier:
            return True

    def installs_for(self, python_tag: str, python_version: str, platform: str | None) -> bool:
        """A wheel of this build exists for the interpreter and the platform (`linux_x86_64`), as far as the row says;
        None, a platform no wheel is for (macOS), has none."""
        return (platform is not None and (not self.platforms or platform in self.platforms)
                and (not self.python_tags or python_tag in self.python_tags)
                and self.admits_python(python_version))


@dataclass(frozen=True)
class WheelVersions:
    """Published versions of a wheel that ship with one CUDA toolkit minor."""

    cuda: str  # "12.4"
    versions: tuple[str, ...]  # ascending
    driver: Mapping[str, str] = field(default_factory=dict)  # lowest driver they need whatever the CUDA minor (cuDNN)


@dataclass(frozen=True)
class Published:
    """Which versions of a wheel the index has, by CUDA minor (ascending: a later minor only has later versions)."""

    by_cuda: tuple[WheelVersions, ...]
    not_on: Mapping[str, tuple[str, ...]]  # platform (WHEEL_PLATFORMS) -> published versions with no wheel for it
    source: str


@dataclass(frozen=True)
class WheelSpec:
    distribution: str
    specifier: str
    sonames: tuple[str, ...]
    dir: str
    windows_dir: str | None = None
    size_mib: tuple[float, float] | None = None  # (download, unpacked) of one measured wheel
    cuda_major: int | None = None  # the CUDA major whose row (or cuDNN row) lists the wheel
    ptx_jit: bool = False  # hands PTX it generates to the driver to compile: minor-version compatibility does not cover
    published: Published | None = None


@dataclass(frozen=True)
class WheelRequirement:
    """What to ask pip for: `requirement` = distribution + specifier + `cap` (see Matrix.wheel_requirement)."""

    requirement: str  # "nvidia-cuda-nvrtc-cu12~=12.0,<12.1"
    cap: str | None  # "<12.1"; None when the driver runs every published version, or when no cap can be satisfied
    admitted: tuple[str, ...]  # published versions for the platform that the requirement admits and the driver runs
    note: str | None  # why no cap could be given (no published version runs with this driver), for the user


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
    widely_deployed_driver: str | None = None  # cuda.yaml's: what a plan with no driver known prefers to run on

    def builds_for(self, version: str) -> list[OrtBuild]:
        try:
            wanted = Version(version)
        except InvalidVersion:
            return []
        return [b for b in self.builds if any(_same_version(v, wanted) for v in b.versions)]

    @property
    def nvidia_wheels(self) -> tuple[tuple[int, WheelSpec], ...]:
        """Every NVIDIA pip wheel the matrix knows, CUDA libraries and cuDNN alike, with its CUDA major."""
        return (*((c.major, w) for c in self.cuda.values() for w in c.wheels),
                *((r.cuda_major, r.wheel) for r in self.cudnn))

    def size_estimate(self, distribution: str) -> tuple[float, float] | None:
        """(download, unpacked) MiB of a wheel of `distribution`, the largest any row measured; None if none did."""
        name = distribution.lower().replace("_", "-")
        sizes = [b.size_mib for b in self.builds if b.package == name and b.size_mib]
        sizes += [w.size_mib for _, w in self.nvidia_wheels if w.distribution == name and w.size_mib]
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

    def wheel_requirement(self, wheel: WheelSpec, driver: str | None, os_name: str = "linux",
                          machine: str = "x86_64") -> WheelRequirement:
        """Distribution + specifier + a version cap that keeps pip off wheels this driver cannot run.

        plan.make_plan asks for every NVIDIA wheel it installs this way and adds `note` to the plan's notes.

        `os_name` is "linux" or "windows"; `machine` as platform.machine() says it ("x86_64", "aarch64", "AMD64").
        No driver (or no `published` data): the bare distribution + specifier.

        One rule for every wheel, from the `published` data (which versions ship with which CUDA minor):
        a version runs when the driver supports its CUDA minor natively (Matrix.highest_cuda_for_driver), or when
        minor-version compatibility covers it: the driver meets its CUDA major's `driver_min` and the wheel is not
        `ptx_jit`. NVIDIA's CUDA Compatibility guide, "Minor Version Compatibility": from CUDA 11 on, anything built
        with a toolkit of a major family runs on that family's minimum driver, with the caveat "Applications using
        PTX will see runtime issues: applications that compile device code to PTX will not work on older drivers".
        NVRTC (ptx_jit) hands PTX to the driver's JIT compiler, so it must not be newer than the driver's CUDA.
        nvJitLink is not ptx_jit: it links to a cubin itself, and its guide says it is compatible across the
        minors of a major (it must only be >= the toolkit that produced its inputs: cuFFT's LTO kernels), and the
        cuDNN support matrix runs every cuDNN 9 for CUDA 12 on >= 525.60.13 for toolkits 12.0-12.9. A version group
        may also carry its own `driver` floor (the cuDNN support matrix's driver column).

        The cap is `<B`, B the shortest version prefix between the newest version that runs and the oldest one that
        does not, so it admits at least one published version with a wheel for this platform. When none runs (or
        none that runs has a wheel for the platform), no cap is given and `note` says which driver the oldest one
        needs; versions newer than the data knows are not capped (scripts/wheel_caps.py keeps the data current).
        """
        base = wheel.distribution + wheel.specifier
        published = wheel.published
        if not driver or published is None:
            return WheelRequirement(base, None, (), None)
        platform = _wheel_platform(os_name, machine)
        missing = set(published.not_on.get(platform, ())) if platform else set()
        # Loading made sure every published version lies inside the wheel's specifier (_check_published).
        rows = [(Version(v), group) for group in published.by_cuda for v in group.versions]
        highest = self.highest_cuda_for_driver(driver, os_name)
        mvc = (not wheel.ptx_jit and wheel.cuda_major is not None
               and self.driver_supports_major(driver, wheel.cuda_major, os_name) is True)
        runs = [(v, g) for v, g in rows if _runs(g, driver, os_name, highest, mvc)]
        here = [str(v) for v, _ in runs if str(v) not in missing]
        if len(runs) == len(rows):
            return WheelRequirement(base, None, tuple(here), None if here else self._no_wheel(wheel, platform))
        if not here:
            offered = [(v, g) for v, g in rows if str(v) not in missing]
            if not offered:
                return WheelRequirement(base, None, (), self._no_wheel(wheel, platform))
            oldest, group = offered[0]
            supports = f" (CUDA {highest.major}.{highest.minor})" if highest else ""
            if runs:
                what = f"none of the versions driver {driver} runs has a wheel for {platform}"
                which = f" for {platform}"
            else:
                what, which = f"no published version runs with driver {driver}{supports}", ""
            why = " for the driver to compile the PTX it generates" if wheel.ptx_jit else ""
            note = (f"{wheel.distribution}: {what}, so it is left uncapped; the oldest{which}, {oldest} (CUDA "
                    f"{group.cuda}), needs {self._needed_driver(wheel, group, os_name)}{why}")
            return WheelRequirement(base, None, (), note)
        newest = max(v for v, _ in runs)
        bound = _cap_bound(newest, min(v for v, _ in rows if v > newest))
        return WheelRequirement(f"{base},<{bound}", f"<{bound}", tuple(here), None)

    def _needed_driver(self, wheel: WheelSpec, group: WheelVersions, os_name: str) -> str:
        """The lowest driver at which `group` runs, in words."""
        wanted = Version(group.cuda)
        native = [r[2] if os_name == "windows" else r[1] for c in self.cuda.values() for r in c.releases
                  if Version(r[0]).release[:2] == wanted.release[:2]]
        options = [d for d in native if d]
        cuda = self.cuda.get(wheel.cuda_major) if wheel.cuda_major is not None else None
        if cuda is not None and not wheel.ptx_jit:
            mvc = cuda.driver_min.get(os_name) or cuda.driver_min.get("linux")
            options += [mvc] if mvc else []
        if not options:
            return f"a driver newer than any this matrix knows (it has no CUDA {group.cuda} release)"
        need = min(options, key=_driver_version)
        floor = group.driver.get(os_name)
        if floor and _driver_version(floor) > _driver_version(need):
            need = floor
        return f"driver >= {need}"

    @staticmethod
    def _no_wheel(wheel: WheelSpec, platform: str | None) -> str:
        return f"{wheel.distribution}{wheel.specifier}: no published version has a wheel for {platform}"


def _same_version(text: str, wanted: Version) -> bool:
    try:
        return Version(text) == wanted
    except InvalidVersion:
        return False


def _runs(group: WheelVersions, driver: str, os_name: str, highest: Version | None, mvc: bool) -> bool:
    """Whether this driver runs the versions of `group`: its own driver floor met, and its CUDA minor supported
    natively or through minor-version compatibility (`mvc`: the wheel's major's driver_min met, not ptx_jit)."""
    floor = group.driver.get(os_name)
    if floor and _driver_version(driver) < _driver_version(floor):
        return False
    return mvc or (highest is not None and Version(group.cuda) <= highest)


def _wheel_platform(os_name: str, machine: str) -> str | None:
    """The WHEEL_PLATFORMS name of a machine; None for one the data does not cover (then no version is ruled out)."""
    arch = {"x86_64": "x86_64", "amd64": "x86_64", "x64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}.get(
        machine.strip().lower())
    if os_name == "linux" and arch:
        return f"linux_{arch}"
    if os_name == "windows" and arch == "x86_64":
        return "win_amd64"
    return None


def _cap_bound(newest_ok: Version, oldest_not: Version) -> str:
    """The shortest prefix of `oldest_not` above `newest_ok`: `<12.1` rather than `<12.1.55` (the same versions)."""
    release = oldest_not.release
    for n in range(1, len(release) + 1):
        prefix = ".".join(map(str, release[:n]))
        if Version(prefix) > newest_ok:
            return prefix
    return str(oldest_not)


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
    packaged = Path(__file__).parents[1] / "_compat"  # where the wheel puts compat/
    if packaged.is_dir():
        return packaged
    # An editable checkout: compat/ sits at the repository root, next to src/.
    return Path(__file__).resolve().parents[3] / "compat"


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


def _check_published(wheel: Mapping[str, Any], spec: SpecifierSet, major: int, node: Any, at: list[str | int],
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
        floor = {os_name: _driver_version(floors.get(os_name, "0")) for os_name in ("linux", "windows")}
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
            wheels=tuple(_wheel(w, row["major"]) for w in row["wheels"]),
            source=row["source"],
        )
    cudnn = tuple(
        CudnnWheel(
            major=row["major"],
            cuda_major=row["cuda_major"],
            wheel=_wheel(row, row["cuda_major"]),
            cc_min=row.get("compute_capability", {}).get("min"),
            cc_max=row.get("compute_capability", {}).get("max"),
            source=row["source"],
        )
        for row in cuda_doc["cudnn"]
    )
    data_version = max(str(d["data_version"]) for d in docs.values())
    widely = cuda_doc.get("widely_deployed_driver")
    return Matrix(builds=tuple(builds), cuda=cuda, cudnn=cudnn, data_version=data_version, files=files,
                  widely_deployed_driver=widely["linux"] if widely else None)


def _wheel(row: Mapping[str, Any], cuda_major: int) -> WheelSpec:
    published = row.get("published")
    return WheelSpec(
        distribution=row["distribution"],
        specifier=row["specifier"],
        sonames=tuple(row["sonames"]),
        dir=row["dir"],
        windows_dir=row.get("windows_dir"),
        size_mib=_size(row),
        cuda_major=cuda_major,
        ptx_jit=bool(row.get("ptx_jit", False)),
        published=Published(
            by_cuda=tuple(WheelVersions(g["cuda"], tuple(g["versions"]), dict(g.get("driver", {})))
                          for g in published["by_cuda"]),
            not_on={k: tuple(v) for k, v in published.get("not_on", {}).items()},
            source=published["source"],
        ) if published else None,
    )


def _size(row: Mapping[str, Any]) -> tuple[float, float] | None:
    size = row.get("size_mib")
    return (float(size["download"]), float(size["unpacked"])) if size else None
