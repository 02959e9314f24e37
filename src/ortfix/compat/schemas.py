"""The JSON Schemas of every document kind in the compat folder: `ort-releases` (ort.yaml), `cuda` (cuda.yaml) and
`error-patterns` (errors.yaml, what `ortfix explain` recognises), with the names an error pattern may use (finding
codes, analyses). Validation (compat/validate.py) checks every file against the schema of its kind on every load.

This module is long (about 280 lines) because it is the schema literals themselves, one per kind, and a schema is
easier to read whole than spread over modules.
"""

from __future__ import annotations

from ortfix.check.codes import FindingCode
from ortfix.compat.addons import ADDONS_KIND, ADDONS_SCHEMA
from ortfix.compat.platforms import WHEEL_PLATFORMS
from ortfix.strenum import StrEnum

JsonSchema = dict[str, object]

SCHEMA_VERSION = 1
MATRIX_KINDS = ("ort-releases", "cuda")  # the kinds load_matrix builds the Matrix from
ERROR_PATTERNS_KIND = "error-patterns"  # versioned with the matrix, read by `ortfix explain`


class Analysis(StrEnum):
    """What an error pattern's `analysis` may name: the one definition of the analysis names (explain/analyses.py
    gives each its function; mypy checks that every member has one)."""

    PIP_VERSION = "pip-version"
    NUMPY_ABI = "numpy-abi"
    NUMPY_DTYPE = "numpy-dtype"
    GPU_COUNT = "gpu-count"
    DRIVER = "driver"
    WINDOWS_DLL = "windows-dll"
    LIBRARY_MAJOR = "library-major"
    GLIBCXX = "glibcxx"
    WHEEL_PLATFORM = "wheel-platform"
    WSL = "wsl"


_STR_LIST = {"type": "array", "items": {"type": "string", "minLength": 1}}
# File names a win_amd64 wheel installs (WheelSpec.dlls): plain names, no folder.
_DLL_LIST = {"type": "array", "minItems": 1, "uniqueItems": True,
             "items": {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9_.-]*\.dll$"}}
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

_MATRIX_SCHEMAS: dict[str, JsonSchema] = {
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
                        "dlls": _DLL_LIST,
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
                    "dlls": _DLL_LIST,
                    "size_mib": _SIZE,
                    "ptx_jit": {"type": "boolean"},
                    "published": _PUBLISHED,
                },
            }
        },
    },
}

_TEXT = {"type": "string", "minLength": 1}
_ID_PATTERN = r"^[a-z0-9]+(-[a-z0-9]+)*$"

ERROR_PATTERNS_SCHEMA: JsonSchema = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "ortfix error patterns (compat/errors.yaml)",
    "type": "object",
    "additionalProperties": False,
    "required": ["schema_version", "kind", "data_version", "patterns"],
    "properties": {
        **_HEADER,
        "kind": {"const": ERROR_PATTERNS_KIND},
        "patterns": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["id", "finding", "regex", "title", "cause", "fix", "examples", "source"],
                "properties": {
                    "id": {"type": "string", "pattern": _ID_PATTERN},
                    "finding": {"enum": [*(str(c) for c in FindingCode), None]},
                    "regex": _TEXT,
                    "title": {"type": "string", "minLength": 1, "pattern": r"^[^\r\n]+$"},
                    "cause": _TEXT,
                    "fix": _TEXT,
                    "examples": {"type": "array", "minItems": 1, "items": _TEXT},
                    "source": {"type": "string", "minLength": 3},
                    "analysis": {"enum": [str(a) for a in Analysis]},
                    "unless": {"type": "array", "minItems": 1, "uniqueItems": True,
                               "items": {"type": "string", "pattern": _ID_PATTERN}},
                    # the row applies only to a message recognisably from this OS (explain/message_os.py)
                    "os": {"enum": ["linux", "windows"]},
                },
            },
        },
    },
}

# Every kind a compat file may have, and its schema.
SCHEMAS: dict[str, JsonSchema] = {**_MATRIX_SCHEMAS, ADDONS_KIND: ADDONS_SCHEMA,
                                  ERROR_PATTERNS_KIND: ERROR_PATTERNS_SCHEMA}
