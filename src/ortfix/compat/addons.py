"""The `addons` compat kind (compat/addons.yaml): what runs beside onnxruntime-gpu. Its schema, its typed rows (the
TensorRT major and minimum version an ORT minor's TensorRT provider wants; an onnxruntime-genai release's CUDA major
and the ORT it needs) and the queries check and plan ask. The file is optional: a compat folder without it has no
rows, and every query answers "not known"."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import cache

from ortfix.compat.versions import InvalidVersion, Version
from ortfix.record import frozen

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

ADDONS_KIND = "addons"

# The genai distributions and what each is built for (the CPU one has no CUDA major).
GENAI_CPU = "onnxruntime-genai"
GENAI_CUDA = "onnxruntime-genai-cuda"
GENAI_DIRECTML = "onnxruntime-genai-directml"
GENAI_PACKAGES = (GENAI_CPU, GENAI_CUDA, GENAI_DIRECTML)
# TensorRT's libraries, as the Linux inventory spells their families (libnvinfer.so.10; on Windows nvinfer_10.dll).
TENSORRT_FAMILIES = ("nvinfer", "nvinfer_plugin", "nvonnxparser")
# Where the TensorRT wheels put those libraries (the .so files and the DLLs alike), relative to site-packages
# (NVIDIA/TensorRT python/packaging/libs_wheel: the package tensorrt_libs).
TENSORRT_WHEEL_DIR = "tensorrt_libs"
# The distributions that install the TensorRT libraries into site-packages/tensorrt_libs: tensorrt-cuNN-libs (10.x and
# later) and, before them, tensorrt-libs (8.6, 9.x); normalised names.


@cache
def tensorrt_libs_dists() -> re.Pattern[str]:
    return re.compile(r"tensorrt(?:-cu\d+)?-libs")

_MINOR = {"type": "string", "pattern": r"^\d+\.\d+$"}
_VERSION = {"type": "string", "pattern": r"^\d+\.\d+\.\d+$"}
_SOURCE = {"type": "string", "minLength": 3}

ADDONS_SCHEMA: dict[str, object] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["schema_version", "kind", "data_version", "tensorrt", "genai"],
    "properties": {
        "schema_version": {"const": 1},
        "kind": {"const": ADDONS_KIND},
        "data_version": {"type": "string", "pattern": r"^\d{4}\.\d{2}\.\d{2}$"},
        "tensorrt": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["ort", "major", "min_version", "source"],
                "properties": {
                    "ort": {"type": "array", "minItems": 1, "uniqueItems": True, "items": _MINOR},
                    "major": {"type": "integer", "minimum": 5, "maximum": 30},
                    "min_version": {"type": ["string", "null"], "pattern": r"^\d+\.\d+(\.\d+)*$"},
                    "source": _SOURCE,
                },
            },
        },
        "genai": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["package", "versions", "cuda_major", "ort_min", "source"],
                "properties": {
                    "package": {"enum": list(GENAI_PACKAGES)},
                    "versions": {"type": "array", "minItems": 1, "uniqueItems": True, "items": _VERSION},
                    "cuda_major": {"type": ["integer", "null"], "minimum": 11, "maximum": 20},
                    "ort_min": _VERSION,
                    "source": _SOURCE,
                },
            },
        },
    },
}


@frozen
class TensorrtRequirement:
    """What the TensorRT provider of the ORT minors `ort` was built against."""

    ort: tuple[str, ...]
    major: int
    min_version: str | None  # None: no published minimum, only the major is known
    source: str


@frozen
class GenaiRelease:
    package: str
    versions: tuple[str, ...]
    cuda_major: int | None
    ort_min: str
    source: str


@frozen
class Addons:
    tensorrt: tuple[TensorrtRequirement, ...] = ()
    genai: tuple[GenaiRelease, ...] = ()

    def tensorrt_for(self, ort_version: str) -> TensorrtRequirement | None:
        """The row of this ORT version's minor; None when the matrix does not know it."""
        minor = _minor(ort_version)
        return next((r for r in self.tensorrt if minor in r.ort), None)

    def genai_release(self, package: str, version: str) -> GenaiRelease | None:
        """The row of an installed genai release: its own version, else the row of the same minor."""
        rows = [r for r in self.genai if r.package == package]
        exact = next((r for r in rows if version in r.versions), None)
        minor = _minor(version)
        return exact or next((r for r in rows if any(_minor(v) == minor for v in r.versions)), None)

    def genai_cuda_for(self, ort_version: str, cuda_major: int) -> str | None:
        """The newest onnxruntime-genai-cuda version built for `cuda_major` whose ORT requirement the installed ORT
        meets (so installing it changes nothing else); None when none is known."""
        try:
            ort = Version(ort_version)
        except InvalidVersion:
            return None
        fits = [Version(v) for r in self.genai if r.package == GENAI_CUDA and r.cuda_major == cuda_major
                and Version(r.ort_min) <= ort for v in r.versions]
        return str(max(fits)) if fits else None


    def genai_directml_for(self, ort_version: str) -> str | None:
        """The newest onnxruntime-genai-directml version whose onnxruntime-directml requirement the installed
        onnxruntime-directml `ort_version` meets; None when none is known."""
        try:
            ort = Version(ort_version)
        except InvalidVersion:
            return None
        fits = [Version(v) for r in self.genai if r.package == GENAI_DIRECTML and Version(r.ort_min) <= ort
                for v in r.versions]
        return str(max(fits)) if fits else None


def build_addons(doc: Mapping[str, Any] | None) -> Addons:
    """The typed rows of a validated addons document (None: no such file, no rows)."""
    if doc is None:
        return Addons()
    return Addons(
        tensorrt=tuple(TensorrtRequirement(ort=tuple(r["ort"]), major=r["major"], min_version=r["min_version"],
                                           source=r["source"]) for r in doc["tensorrt"]),
        genai=tuple(GenaiRelease(package=r["package"], versions=tuple(r["versions"]), cuda_major=r["cuda_major"],
                                 ort_min=r["ort_min"], source=r["source"]) for r in doc["genai"]),
    )


def duplicate_minor(rows: Sequence[Mapping[str, Any]]) -> tuple[int, int, str] | None:
    """(row, index, minor) of the first ORT minor listed in two tensorrt rows; None when each appears once."""
    seen: set[str] = set()
    for i, row in enumerate(rows):
        for j, minor in enumerate(row["ort"]):
            if minor in seen:
                return i, j, minor
            seen.add(minor)
    return None


def _minor(version: str) -> str:
    parts = version.split(".")
    return ".".join(parts[:2])
