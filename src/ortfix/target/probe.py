"""Host side of the probe: run `_probe.py` inside the target interpreter and type what it reports (one concept, the
probe's report: its types, their parsing from the untrusted JSON, starting and finishing the run).

The Windows part of the report (`WindowsInfo`, the registry's Path values) is typed in target/winreport.py and
imported only when a report has one: a Linux check does not define its classes."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

from ortfix.errors import OrtfixError
from ortfix.i18n import N_, Msg
from ortfix.record import field, frozen
from ortfix.safetext import visible
from ortfix.target.choose import resolve_target, start_probe
from ortfix.target.proberun import probe_result

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ortfix.target.proberun import ProbeRun
    from ortfix.target.winreport import RegistryPath, WindowsInfo

__all__ = [
    "Dependent",
    "Distribution",
    "OrtDir",
    "ProbeFacts",
    "RecordProblem",
    "TorchInfo",
    "finish_probe",
    "parse_probe",
    "resolve_target",
    "run_probe",
    "start_probe",
]

# 2: a RECORD row is [path, hash, size] only where it may list ORT's extension module (the size and hash tell two
# builds apart: check/facts.py), else its path alone. A report of another schema is refused (finish_probe), one of
# schema 1 included, whose probe is never the one started: the probe's module name comes from its source.
PROBE_SCHEMA = 2


@frozen
class Distribution:
    name: str
    normalized: str
    version: str
    location: str
    dist_info: str
    requires: tuple[str, ...]
    installer: str
    # RECORD rows (path, hash, size), read for ORT packages only; ("path", "", None) where the probe sent the path
    # alone (any row but those that may list the extension module, whose hash and size only check/facts.py reads)
    files: tuple[tuple[str, str, int | None], ...]
    # The installed files checked against the RECORD (ORT and NVIDIA .dist-info folders; by size, never by hash):
    has_record: bool | None = None  # None: not checked (torch, tensorrt, an .egg-info)
    checked: int = 0  # RECORD rows compared with the file on disk
    damaged: tuple[RecordProblem, ...] = ()  # the rows whose file is missing or has another size

    @property
    def installed_version(self) -> str | None:
        """The installed version, normalised: from METADATA, else from the .dist-info folder's name (METADATA may be
        what is damaged); None when neither is a version."""
        from ortfix.compat.versions import InvalidVersion, Version

        stem = os.path.basename(self.dist_info).rsplit(".", 1)[0]
        for candidate in (self.version, stem.rsplit("-", 1)[1] if "-" in stem else None):
            if candidate:
                try:
                    return str(Version(candidate))
                except InvalidVersion:
                    continue
        return None


@frozen
class RecordProblem:
    path: str  # as the RECORD lists it, relative to the distribution's location
    size: int  # what the RECORD says
    actual: int | None  # on disk; None: missing
    overwritten_by: str | None  # another checked distribution in the same folder that lists the file at this size


@frozen
class Dependent:
    name: str
    version: str
    requires: tuple[str, ...]


@frozen
class OrtDir:
    package_dir: str
    location: str
    build_info: Mapping[str, str]
    files: tuple[str, ...]  # shared libraries in onnxruntime/capi
    # What capi/_ld_preload.py loads at import, one tuple per provider (releases before 1.16; empty after).
    preload: tuple[tuple[str, ...], ...] = ()

    @property
    def preload_cuda(self) -> tuple[str, ...]:
        """The libraries `_ld_preload.py` loads for the CUDA provider (the block without TensorRT's libnvinfer)."""
        for block in self.preload:
            if not any(name.startswith("libnvinfer") for name in block):
                return block
        return ()

    @property
    def capi(self) -> str:
        return os.path.join(self.package_dir, "capi")

    def lib(self, name: str) -> str | None:
        return os.path.join(self.capi, name) if name in self.files else None

    @property
    def pybind(self) -> str | None:
        for f in self.files:
            if f.startswith("onnxruntime_pybind11_state"):
                return os.path.join(self.capi, f)
        return None


@frozen
class TorchInfo:
    dir: str
    version: str | None
    cuda: str | None
    lib_dir: str
    libs: tuple[str, ...]


@frozen
class ProbeFacts:
    executable: str
    real_executable: str
    python_version: str
    cache_tag: str
    pointer_bits: int
    has_pip: bool
    system: str
    machine: str
    glibc: str | None
    wsl: bool
    env_kind: str  # venv | conda | system
    prefix: str
    base_prefix: str
    site_packages: tuple[str, ...]
    purelib: str
    platlib: str
    user_site: str | None
    prefix_writable: bool
    environ: Mapping[str, str]
    cwd: str
    sys_path: tuple[str, ...]
    distributions: tuple[Distribution, ...]
    dependents: tuple[Dependent, ...]
    distribution_count: int
    ort_dirs: tuple[OrtDir, ...]
    torch: TorchInfo | None
    windows: WindowsInfo | None = None  # a Windows target only
    # PEP 508 marker values of the target interpreter (empty from a probe of an older ortfix: check/requires.py)
    markers: Mapping[str, str] = field(default_factory=dict)
    report: str = field(default="", repr=False, compare=False)  # the probe's output as it came (speed/replay.py)

    def dist(self, normalized: str) -> Distribution | None:
        for d in self.distributions:
            if d.normalized == normalized:
                return d
        return None

    @property
    def python_tag(self) -> str:
        major, minor = self.python_version.split(".")[:2]
        return f"cp{major}{minor}"


def finish_probe(run: ProbeRun, python: str | os.PathLike[str]) -> ProbeFacts:
    done = probe_result(run)
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        last: str | Msg = lines[-1] if lines else Msg(N_("no output"))
        raise OrtfixError(Msg(N_("{python} is not a working Python interpreter (probe exited {code}: {last})"),
                              python=str(python), code=done.returncode, last=last))
    try:
        doc = json.loads(done.stdout)
    except (ValueError, RecursionError) as exc:  # RecursionError: JSON nested too deep to decode
        raise OrtfixError(Msg(N_("{python} is not a Python interpreter ortfix can inspect (no JSON from the probe)"),
                              python=str(python))) from exc
    if not isinstance(doc, dict) or doc.get("probe_schema") != PROBE_SCHEMA:
        raise OrtfixError(Msg(N_("{python}: the probe answered in an unknown format"), python=str(python)))
    return parse_probe(doc, report=done.stdout, python=python)


def run_probe(python: str | os.PathLike[str]) -> ProbeFacts:
    return finish_probe(start_probe(python), python)


_ENV_KINDS = ("venv", "conda", "system")


class _Report:
    """Typed access to the probe's JSON: every field read is checked, and a missing one or one of the wrong type is
    a one-line OrtfixError naming it (a probe that was tampered with, or an interpreter that is not one)."""

    def __init__(self, python: str | os.PathLike[str] | None) -> None:
        self.python = python

    def fail(self, path: str, problem: str) -> OrtfixError:
        """`problem`: what is wrong with the field, in English (a validation detail, as fields.py's)."""
        who = (Msg(N_("the probe of {python}"), python=str(self.python)) if self.python is not None
               else Msg(N_("the probe")))
        return OrtfixError(Msg(N_("{who} returned an incomplete report: field {field} {problem}"), who=who,
                               field=path, problem=problem),
                           hint=Msg(N_("is it a Python interpreter?")))

    def get(self, obj: Mapping[str, object], key: str, path: str, kind: type[object] | tuple[type[object], ...],
            *, optional: bool = False) -> Any:
        if key not in obj or (optional and obj[key] is None):
            if optional:
                return None
            raise self.fail(f"{path}.{key}" if path else key, "is missing")
        value = obj[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        # bool is an int to isinstance; a report never means True where it says a number
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            names = " or ".join("object" if k is dict else "list" if k is list else k.__name__ for k in kinds)
            article = "an" if names[0] in "aeiou" else "a"
            raise self.fail(f"{path}.{key}" if path else key,
                            f"is not {article} {names} (got {type(value).__name__})")  # i18n: english
        return value

    def obj(self, obj: Mapping[str, object], key: str, path: str = "") -> Mapping[str, object]:
        value: Mapping[str, object] = self.get(obj, key, path, dict)
        return value

    def text(self, obj: Mapping[str, object], key: str, path: str = "") -> str:
        value: str = self.get(obj, key, path, str)
        return value

    def opt_text(self, obj: Mapping[str, object], key: str, path: str = "") -> str | None:
        value: str | None = self.get(obj, key, path, str, optional=True)
        return value

    def label(self, obj: Mapping[str, object], key: str, path: str = "") -> str:
        """A text that names something (a distribution's name or version, a build-info value), never a path that
        reaches a file: what a package wrote there is data, so its controls are escaped here, once, for every reader
        (safetext.visible). A METADATA `Version:` with a line end or an ESC inside is kept only in this escaped
        form, which is no PEP 440 version either: `Distribution.installed_version` falls back to the folder's name."""
        return visible(self.text(obj, key, path))

    def opt_label(self, obj: Mapping[str, object], key: str, path: str = "") -> str | None:
        value = self.opt_text(obj, key, path)
        return None if value is None else visible(value)

    def labels(self, obj: Mapping[str, object], key: str, path: str = "") -> tuple[str, ...]:
        return tuple(visible(v) for v in self.texts(obj, key, path))

    def label_map(self, obj: Mapping[str, object], key: str, path: str = "") -> dict[str, str]:
        return {visible(k): visible(v) for k, v in self.text_map(obj, key, path).items()}

    def flag(self, obj: Mapping[str, object], key: str, path: str = "") -> bool:
        return bool(self.get(obj, key, path, bool, optional=True))

    def integer(self, obj: Mapping[str, object], key: str, path: str = "", default: int = 0) -> int:
        value: int | None = self.get(obj, key, path, int, optional=True)
        if value is not None and value < 0:
            raise self.fail(f"{path}.{key}" if path else key, f"is negative ({value})")
        return default if value is None else value

    def items(self, obj: Mapping[str, object], key: str, path: str = "") -> list[object]:
        value: list[object] | None = self.get(obj, key, path, list, optional=True)
        return [] if value is None else value

    def texts(self, obj: Mapping[str, object], key: str, path: str = "") -> tuple[str, ...]:
        where = f"{path}.{key}" if path else key
        values: list[str] = []
        for i, v in enumerate(self.items(obj, key, path)):
            if not isinstance(v, str):
                raise self.fail(f"{where}[{i}]", f"is not a string (got {type(v).__name__})")  # i18n: english
            values.append(v)
        return tuple(values)

    def text_lists(self, obj: Mapping[str, object], key: str, path: str = "") -> tuple[tuple[str, ...], ...]:
        where = f"{path}.{key}" if path else key
        return tuple(self.texts({str(i): v}, str(i), where) for i, v in enumerate(self.items(obj, key, path)))

    def text_map(self, obj: Mapping[str, object], key: str, path: str = "") -> dict[str, str]:
        where = f"{path}.{key}" if path else key
        value: Mapping[str, object] | None = self.get(obj, key, path, dict, optional=True)
        out: dict[str, str] = {}
        for k, v in (value or {}).items():
            if not isinstance(v, str):
                raise self.fail(f"{where}.{k}", f"is not a string (got {type(v).__name__})")  # i18n: english
            out[k] = v
        return out

    def records(self, obj: Mapping[str, object], key: str, path: str) -> list[tuple[Mapping[str, object], str]]:
        """The objects of a list field, each with its path for messages."""
        where = f"{path}.{key}" if path else key
        out: list[tuple[Mapping[str, object], str]] = []
        for i, item in enumerate(self.items(obj, key, path)):
            if not isinstance(item, dict):
                raise self.fail(f"{where}[{i}]", f"is not an object (got {type(item).__name__})")  # i18n: english
            out.append((item, f"{where}[{i}]"))
        return out

    def record_rows(self, obj: Mapping[str, object], key: str, path: str) -> tuple[tuple[str, str, int | None], ...]:
        where = f"{path}.{key}"
        rows: list[tuple[str, str, int | None]] = []
        for i, row in enumerate(self.items(obj, key, path)):
            if isinstance(row, str):  # the path alone
                rows.append((row, "", None))
                continue
            if (not isinstance(row, list) or len(row) != 3 or not isinstance(row[0], str)
                    or not isinstance(row[1], str)
                    or not (row[2] is None or (isinstance(row[2], int) and not isinstance(row[2], bool)))):
                raise self.fail(f"{where}[{i}]", "is not a RECORD row [path, hash, size] nor a path")  # i18n: english
            rows.append((row[0], row[1], row[2]))
        return tuple(rows)


def _record_problems(r: _Report, d: Mapping[str, object], where: str) -> tuple[RecordProblem, ...]:
    out = []
    for i, row in enumerate(r.items(d, "damaged", where)):
        if (not isinstance(row, list) or len(row) != 4 or not isinstance(row[0], str)
                or not _is_int(row[1]) or not (row[2] is None or _is_int(row[2]))
                or not (row[3] is None or isinstance(row[3], str))):
            raise r.fail(f"{where}.damaged[{i}]", "is not [path, size, size on disk, overwritten by]")  # i18n: english
        out.append(RecordProblem(row[0], row[1], row[2], None if row[3] is None else visible(row[3])))
    return tuple(out)


_REGISTRY_PATH_KINDS = ("REG_SZ", "REG_EXPAND_SZ")


def _registry_path(r: _Report, w: Mapping[str, object], key: str) -> RegistryPath | None:
    from ortfix.target.winreport import RegistryPath

    value = r.get(w, key, "windows", list, optional=True)
    if value is None:
        return None
    if len(value) != 3 or not all(isinstance(v, str) for v in value):
        raise r.fail(f"windows.{key}", "is not [raw value, registry type, expanded value]")  # i18n: english
    if value[1] not in _REGISTRY_PATH_KINDS:
        kinds = " or ".join(_REGISTRY_PATH_KINDS)
        raise r.fail(f"windows.{key}", f"has a registry type that is not {kinds} ({value[1]!r})")  # i18n: english
    return RegistryPath(raw=value[0], kind=value[1], expanded=value[2])


def _windows_info(r: _Report, w: Mapping[str, object]) -> WindowsInfo:
    from ortfix.target.winreport import WindowsInfo

    return WindowsInfo(
        system_dir=r.text(w, "system_dir", "windows"),
        windows_dir=r.text(w, "windows_dir", "windows"),
        exe_dir=r.text(w, "exe_dir", "windows"),
        machine_path=_registry_path(r, w, "machine_path"),
        user_path=_registry_path(r, w, "user_path"),
        conda_dll_search_modification=r.opt_text(w, "conda_dll_search_modification", "windows"),
        packaged=r.flag(w, "packaged", "windows"),
        process_exe=r.opt_text(w, "process_exe", "windows"),
    )


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_probe(doc: Mapping[str, object], report: str = "", *,
                python: str | os.PathLike[str] | None = None) -> ProbeFacts:
    """The probe's report, typed. Every field read is checked: a missing field, or one of the wrong type, is an
    OrtfixError naming it (never a KeyError or TypeError)."""
    r = _Report(python)
    if not isinstance(doc, Mapping):
        raise r.fail("(top level)", f"is not an object (got {type(doc).__name__})")  # i18n: english
    py, osinfo, env = r.obj(doc, "python"), r.obj(doc, "os"), r.obj(doc, "env")
    version = r.text(py, "version", "python")
    parts = version.split(".")
    if len(parts) < 2 or not all(p.isascii() and p.isdigit() for p in parts[:2]):
        raise r.fail("python.version", f"is not a Python version ({version!r})")  # i18n: english
    kind = r.text(env, "kind", "env")
    if kind not in _ENV_KINDS:
        raise r.fail("env.kind", f"is not one of {', '.join(_ENV_KINDS)} ({kind!r})")  # i18n: english
    pointer_bits = r.integer(py, "pointer_bits", "python", default=64)
    if pointer_bits not in (32, 64):
        raise r.fail("python.pointer_bits", f"is not 32 or 64 ({pointer_bits})")  # i18n: english
    torch = r.get(doc, "torch", "", dict, optional=True)
    windows = r.get(doc, "windows", "", dict, optional=True)
    return ProbeFacts(
        executable=r.text(py, "executable", "python"),
        real_executable=r.text(py, "real_executable", "python"),
        python_version=visible(version),
        cache_tag=r.opt_text(py, "cache_tag", "python") or "",
        pointer_bits=pointer_bits,
        has_pip=r.flag(py, "has_pip", "python"),
        system=r.label(osinfo, "system", "os"),
        machine=r.label(osinfo, "machine", "os"),
        glibc=r.opt_label(osinfo, "glibc", "os"),
        wsl=r.flag(osinfo, "wsl", "os"),
        env_kind=kind,
        prefix=r.text(env, "prefix", "env"),
        base_prefix=r.text(env, "base_prefix", "env"),
        site_packages=r.texts(env, "site_packages", "env"),
        purelib=r.text(env, "purelib", "env"),
        platlib=r.text(env, "platlib", "env"),
        user_site=r.opt_text(env, "user_site", "env"),
        prefix_writable=r.flag(env, "prefix_writable", "env"),
        environ=r.text_map(doc, "environ"),
        cwd=r.opt_text(doc, "cwd") or "/",
        sys_path=r.texts(doc, "sys_path"),
        distributions=tuple(
            Distribution(
                name=r.label(d, "name", where),
                normalized=r.label(d, "normalized", where),
                version=r.label(d, "version", where),
                location=r.text(d, "location", where),
                dist_info=r.text(d, "dist_info", where),
                requires=r.labels(d, "requires", where),
                installer=r.opt_label(d, "installer", where) or "",
                files=r.record_rows(d, "files", where),
                has_record=r.get(d, "record", where, bool, optional=True),
                checked=r.integer(d, "checked", where),
                damaged=_record_problems(r, d, where),
            )
            for d, where in r.records(doc, "distributions", "")
        ),
        dependents=tuple(
            Dependent(name=r.label(d, "name", where), version=r.label(d, "version", where),
                      requires=r.labels(d, "requires", where))
            for d, where in r.records(doc, "dependents", "")
        ),
        distribution_count=r.integer(doc, "distribution_count"),
        ort_dirs=tuple(
            OrtDir(package_dir=r.text(o, "package_dir", where), location=r.text(o, "location", where),
                   build_info=r.label_map(o, "build_info", where), files=r.texts(o, "files", where),
                   preload=r.text_lists(o, "preload", where))
            for o, where in r.records(doc, "onnxruntime_dirs", "")
        ),
        torch=TorchInfo(dir=r.text(torch, "dir", "torch"), version=r.opt_label(torch, "version", "torch"),
                        cuda=r.opt_label(torch, "cuda", "torch"), lib_dir=r.text(torch, "lib_dir", "torch"),
                        libs=r.texts(torch, "libs", "torch")) if torch else None,
        windows=_windows_info(r, windows) if windows is not None else None,
        markers=r.label_map(doc, "markers"),
        report=report,
    )
