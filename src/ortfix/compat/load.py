"""Loading the compatibility matrix: finding the compat folder (ORTFIX_COMPAT_DIR, the wheel's _compat/, or the
checkout's compat/), validating every file in it (compat/validate.py) and building the Matrix from the two matrix
kinds.

Validating costs a YAML parse and a schema check (~100 ms), so the validated documents are cached as JSON in
ortfix's cache folder, keyed by each file's resolved path, size and modification time (nanoseconds): a warm
`ortfix check` pays only for reading that JSON, and any edit to a matrix file changes the key.

A check reads the folder with str paths (system/pathform.py answers as pathlib's Path): `pathlib`'s import is no part
of a check's work (speed/__init__.py); `default_compat_dir` and `compat_files` still give Path to their other users.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

from ortfix.cachedir import cache_folder, digest, write_json
from ortfix.compat.addons import ADDONS_KIND, build_addons
from ortfix.compat.matrix import Matrix
from ortfix.compat.model import CudaMajor, CudnnWheel, OrtBuild, Published, WheelSpec, WheelVersions
from ortfix.errors import OrtfixError
from ortfix.i18n import N_, Msg
from ortfix.system import pathform

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

# Bump when the cached JSON's shape changes (the validated documents and the list of matrix files).
_CACHE_FORMAT = 7


def default_compat_dir() -> Path:
    from pathlib import Path

    return Path(compat_folder())


def compat_folder() -> str:
    """The compat folder ortfix uses, as str(default_compat_dir()) writes it."""
    override = os.environ.get("ORTFIX_COMPAT_DIR")
    if override:
        return pathform.form(override)
    here = pathform.form(__file__)
    packaged = os.path.join(os.path.dirname(os.path.dirname(here)), "_compat")  # where the wheel puts compat/
    if pathform.is_dir(packaged):
        return packaged
    # An editable checkout: compat/ sits at the repository root, next to src/.
    return os.path.join(_up(pathform.form(os.path.realpath(here)), 4), "compat")


def _up(path: str, levels: int) -> str:
    for _ in range(levels):
        path = pathform.parent(path)
    return path


def compat_files(directory: str | os.PathLike[str]) -> list[Path]:
    from pathlib import Path

    return [Path(f) for f in matrix_files_in(pathform.form(directory))]


def matrix_files_in(folder: str) -> list[str]:
    """The *.yaml and *.yml files in `folder` (as `form` writes it), sorted: compat_files' answer as str."""
    if not pathform.is_dir(folder):
        raise OrtfixError(Msg(N_("compatibility matrix folder {folder} not found"), folder=folder),
                          hint=Msg(N_("reinstall ortfix, or point ORTFIX_COMPAT_DIR at a compat/ folder")))
    # sorted as Path sorts them: by name, without case on Windows (normcase)
    files = sorted((pathform.form(os.path.join(folder, name)) for name in os.listdir(folder)
                    if _suffix(name) in (".yaml", ".yml")), key=os.path.normcase)
    if not files:
        raise OrtfixError(Msg(N_("no matrix files (*.yaml) in {folder}"), folder=folder))
    return files


def _suffix(name: str) -> str:
    """pathlib's PurePath.suffix of a file name: from its last ".", none for a name that starts or ends with it."""
    dot = name.rfind(".")
    return name[dot:] if 0 < dot < len(name) - 1 else ""


def load_matrix(directory: str | os.PathLike[str] | None = None, *, use_cache: bool = True) -> Matrix:
    folder = pathform.form(directory) if directory else compat_folder()
    files = matrix_files_in(folder)
    # The cache is keyed by each file's identity (name, size, mtime): a warm load reads one JSON file and neither
    # parses YAML nor checks a schema. Any edit to a matrix file changes the key.
    identity = []
    for f in files:
        try:
            st = os.stat(f)
        except OSError as exc:
            raise _unreadable(f, exc) from exc
        identity.append(f"{pathform.form(os.path.realpath(f))}|{st.st_size}|{st.st_mtime_ns}")
    key = "\n".join(identity)
    cache_file = _cache_path(key) if use_cache else None
    cached = _cached(cache_file, key) if cache_file is not None else None
    if cached is not None:
        try:
            return _build(cached[0], tuple(cached[1]))
        except (KeyError, TypeError, ValueError, AttributeError, IndexError):
            pass  # not what this code wrote (damaged, or planted): validated again from the YAML, and rewritten
    # Only here: a warm load (every `check` after the first) never imports the schemas or their checker.
    from ortfix.compat.schemas import MATRIX_KINDS
    from ortfix.compat.validate import validate_document

    docs: dict[str, dict[str, Any]] = {}
    matrix_files: list[str] = []
    for f in files:
        doc = validate_document(_read_bytes(f), f)
        kind = doc["kind"]
        if kind not in (*MATRIX_KINDS, ADDONS_KIND):
            continue  # another versioned data file beside the matrix (explain's error patterns)
        if kind in docs:
            raise OrtfixError(Msg(N_("{file}: a second file of kind '{kind}' (one file per kind)"), file=f,
                                  kind=kind))
        docs[kind] = doc
        matrix_files.append(f)
    missing = set(MATRIX_KINDS) - set(docs)
    if missing:
        raise OrtfixError(Msg(N_("{folder}: no matrix file of kind {kinds}"), folder=folder,
                              kinds=", ".join(sorted(missing))))
    if cache_file is not None:
        write_json(cache_file, {"format": _CACHE_FORMAT, "key": key, "docs": docs, "files": matrix_files})
    return _build(docs, tuple(matrix_files))


def _read_bytes(path: str) -> bytes:
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError as exc:
        raise _unreadable(path, exc) from exc


def _cached(cache_file: str, key: str) -> tuple[dict[str, dict[str, Any]], list[str]] | None:
    """The validated documents and matrix files the cache file holds for `key` in this format."""
    try:
        with open(cache_file, encoding="utf-8") as file:
            cached = json.loads(file.read())
    except (OSError, ValueError):
        return None
    if not isinstance(cached, dict) or cached.get("format") != _CACHE_FORMAT or cached.get("key") != key:
        return None
    docs, files = cached.get("docs"), cached.get("files")
    if (not isinstance(docs, dict) or not all(isinstance(doc, dict) for doc in docs.values())
            or not isinstance(files, list) or not all(isinstance(f, str) for f in files)):
        return None
    return docs, files


def _cache_path(key: str) -> str | None:
    """The cache file for `key`, named by its digest (cachedir.digest, as every cache file is); the key itself is
    stored and compared."""
    base = cache_folder()
    name = f"matrix-{digest(key.encode())[:16]}.json"
    return pathform.form(os.path.join(base, name)) if base else None


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
                  widely_deployed_driver=widely["linux"] if widely else None,
                  addons=build_addons(docs.get(ADDONS_KIND)))


def _wheel(row: Mapping[str, Any], cuda_major: int) -> WheelSpec:
    published = row.get("published")
    return WheelSpec(
        distribution=row["distribution"],
        specifier=row["specifier"],
        sonames=tuple(row["sonames"]),
        dir=row["dir"],
        windows_dir=row.get("windows_dir"),
        dlls=tuple(row.get("dlls", ())),
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


def _unreadable(path: str, exc: OSError) -> OrtfixError:
    return OrtfixError(Msg(N_("cannot read matrix file {file}: {error}"), file=path,
                           error=str(exc.strerror or exc)))
