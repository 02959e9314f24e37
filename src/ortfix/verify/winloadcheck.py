"""The library-load check of `ortfix verify` (level 1) and of apply's verification on Windows: a fresh process of the
target interpreter, started as the user starts it, runs `target/_winload.py`, which imports onnxruntime (an ortfix
hook then puts the NVIDIA folders on PATH), loads the CUDA provider as onnxruntime does (full path,
LOAD_WITH_ALTERED_SEARCH_PATH) and the libraries loaded later by bare name (cuDNN's sub-libraries; cuDNN and cuFFT
for onnxruntime 1.28+) with a plain LoadLibrary, as cuDNN and onnxruntime do.

On Linux the provider is never loaded (it can crash without a driver); on Windows loading it is the point, since
whether its imports resolve depends on the provider's own folder and PATH, and loading a DLL runs nothing of the CUDA
provider but its DLL initialisation. Whatever the process does becomes data: the first missing DLL is named (the
child walks the import tables, since error 126 names none), and cuDNN 8, which ends the process with exit code 9 when
it cannot locate a sub-library (or zlibwapi.dll), becomes the verdict "cuDNN 8 could not load its sub-library X",
never a crash. The result is the same `LoadCheck` (schema `ortfix.loadcheck/1`) the Linux check returns.

Also here, for verify's Windows levels and genai check: the environment a Windows target's fresh process gets
(`windows_child_env`) and the C++ runtime verdict (`msvc_verdict`).
"""

from __future__ import annotations

import json
import ntpath
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

from ortfix import subproc
from ortfix.check.windows_remedies import MSVC_DLL, MSVC_MIN_ORT, MSVC_MIN_VERSION, msvc_version_ok
from ortfix.i18n import N_, Msg
from ortfix.system.windows.hooks import read_conda_windows_hook
from ortfix.target.launch import launch
from ortfix.target.ortrun import RunOutcome, cudnn8_exit, cudnn8_verdict, stream
from ortfix.verify.loadcheck import LibLoad, LoadCheck

if TYPE_CHECKING:
    from ortfix.check.facts import Facts, OrtInstall

SOURCE = Path(__file__).resolve().parents[1] / "target" / "_winload.py"
PROVIDER_DLL = "onnxruntime_providers_cuda.dll"
# DLLs only the NVIDIA display driver installs (System32): never in an environment, never a wheel.
DRIVER_DLLS = frozenset({"nvcuda.dll", "nvcudart_hybrid64.dll", "nvml.dll", "nvapi64.dll", "nvcuda64.dll"})


def check_loadable_windows(python: str, provider: str | None, by_name: Sequence[str], *, prefix: str,
                           timeout: float = 300.0, cuda_major: int | None = None,
                           env: Mapping[str, str] | None = None) -> LoadCheck:
    """Start `python` plainly (the .pth hook acts on `import onnxruntime`), load `provider` (a full path; None: none)
    as onnxruntime does and each of `by_name` by bare name; report each as a `LibLoad` (the provider under its full
    path). `env`: the child's environment (default: this process's, as subproc gives it)."""
    names = list(dict.fromkeys(by_name))
    code = SOURCE.read_text(encoding="utf-8")
    doc = {"provider": provider, "by_name": names, "driver_dlls": sorted(DRIVER_DLLS)}
    argv, child_env = launch(python, code, [json.dumps(doc)], prefix=prefix)
    shown = tuple("<ortfix load-check script>" if a == code else a for a in argv)
    run = stream(argv, dict(env) if env is not None else child_env, target_python=python, timeout=timeout,
                 shown=shown)
    return read_outcome(run, provider, names, cuda_major)


def read_outcome(run: RunOutcome, provider: str | None, names: Sequence[str], cuda_major: int | None) -> LoadCheck:
    """The child's stage lines (and how it ended) as a LoadCheck; `provider`/`names` as asked, in that order."""
    wanted = ([provider] if provider else []) + list(names)
    imported = run.stage("import")
    loaded: dict[str, Mapping[str, object]] = {}
    for report in run.all("loaded"):
        reported = report.get("name")
        if isinstance(reported, str) and reported in wanted:
            loaded[reported] = report
    in_flight = _in_flight(run)
    cudnn8 = None if run.finished else cudnn8_exit(run.log, run.returncode)
    libs: list[LibLoad] = []
    for name in wanted:
        stage = loaded.get(name)
        if stage is not None:
            error = stage.get("error")
            missing = _names(stage.get("missing"))
            driver = _names(stage.get("driver_missing"))
            libs.append(LibLoad(name, _with_missing(name, str(error), missing, driver) if error else None,
                                missing=missing, driver_missing=driver))
        elif run.finished:
            libs.append(LibLoad(name, N_("not reported")))
        elif in_flight is not None and in_flight[0] == name:
            libs.append(LibLoad(name, Msg(N_("the process ended while loading it ({how})"), how=_ended(run, cudnn8))))
        elif in_flight is not None and in_flight[1] == name:
            libs.append(LibLoad(name, Msg(N_("the process ended while loading {name}, which it imports ({how})"),
                                          name=in_flight[0], how=_ended(run, cudnn8)),
                                missing=(in_flight[0],) if cudnn8 else ()))
        else:
            libs.append(LibLoad(name, N_("not reached")))
    runtime = run.stage("runtime") or {}
    process_error = None if run.finished else (cudnn8_verdict(cudnn8) if cudnn8 else
                                               Msg(N_("the verification process {death}"), death=run.death()))
    import_error = None if imported is None else imported.get("error")
    return LoadCheck(argv=run.argv, imported=imported is not None and not import_error,
                     import_error=None if imported is None else (str(import_error) if import_error else None),
                     libraries=tuple(libs), process_error=process_error, cuda_major=cuda_major, platform="windows",
                     exit_code=None if run.finished else run.returncode, cudnn8_missing=cudnn8,
                     msvcp140=_text(runtime.get("msvcp140")), msvcp140_version=_version(runtime.get("version")))


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _version(value: object) -> tuple[int, ...] | None:
    """A FileVersion the child reported: four numbers of 0-65535, else None (untrusted output)."""
    if (isinstance(value, list) and len(value) == 4
            and all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 0xFFFF for v in value)):
        return tuple(value)
    return None


def _in_flight(run: RunOutcome) -> tuple[str, str | None] | None:
    """(the DLL being loaded when the process ended, the requested library whose load or diagnosis it was part of),
    or None when every load it started was reported."""
    requested: str | None = None
    current: str | None = None
    for stage in run.stages:
        kind = stage.get("stage")
        name = stage.get("name")
        if kind == "loading" and isinstance(name, str):
            current = name
            if stage.get("how") in ("path", "name"):
                requested = name
        elif kind == "loaded":
            current = None
    return None if current is None else (current, requested if requested != current else None)


def _ended(run: RunOutcome, cudnn8: str | None) -> Msg:
    return cudnn8_verdict(cudnn8) if cudnn8 else run.death()


def _names(value: object) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()


def _with_missing(name: str, error: str, missing: Sequence[str], driver: Sequence[str] = ()) -> str | Msg:
    said: str | Msg = error
    if driver:
        said = Msg(N_("{error}; the NVIDIA driver's {dlls} is not installed") if len(driver) == 1 else
                   N_("{error}; the NVIDIA driver's {dlls} are not installed"), error=error, dlls=", ".join(driver))
    if not missing:
        return said
    if list(missing) == [name]:
        return Msg(N_("{error}; {name} is in none of the folders a load by name searches (PATH included)"),
                   error=said, name=name)
    chain = " -> ".join(missing)
    if "(found at" in missing[-1]:
        return Msg(N_("{error}; it needs {chain}"), error=said, chain=chain)
    return Msg(N_("{error}; it needs {chain}, which is not found"), error=said, chain=chain)


def first_missing(lib: LibLoad) -> str | None:
    """The DLL whose absence made this load fail (the last of its import chain), by name; None when none is known."""
    if not lib.missing:
        return None
    return lib.missing[-1].split(" ", 1)[0]


def is_driver_dll(name: str) -> bool:
    return ntpath.basename(name).lower() in DRIVER_DLLS


def windows_child_env(facts: Facts) -> dict[str, str] | None:
    """The environment of a Windows target's fresh process as its user starts it: in a conda environment with
    ortfix's activate.d scripts, as `conda activate` leaves it (their folders first on PATH, CONDA_PREFIX set; running
    the environment's python.exe directly runs no script); None: this process's own (the PATH hook needs no help:
    it acts when onnxruntime is imported). Outside conda, when the user Path in the registry has entries this
    process's PATH lacks (`--hook user-path` added them after this shell started), the fresh process gets PATH as a
    program started afterwards does: the machine Path, then the user Path, then what else this process has."""
    win = facts.probe.windows
    if facts.probe.env_kind != "conda":
        if win is None or win.user_path is None:
            return None
        now = [e for e in os.environ.get("PATH", "").split(";") if e]
        have = {e.rstrip("\\/").lower() for e in now}
        if all(e.rstrip("\\/").lower() in have for e in win.user_path.expanded.split(";") if e):
            return None
        login = list(win.login_path)
        at_login = {e.rstrip("\\/").lower() for e in login}
        return subproc.child_env(PATH=";".join([*login, *(e for e in now if e.rstrip("\\/").lower() not in at_login)]))
    dirs = read_conda_windows_hook(facts.probe.prefix)
    if not dirs:
        return None
    return subproc.child_env(CONDA_PREFIX=facts.probe.prefix, PATH=";".join([*dirs, os.environ.get("PATH", "")]))


def msvc_verdict(install: OrtInstall, check: LoadCheck) -> Msg | None:
    """Why the C++ runtime the process loaded is too old for this onnxruntime, or None (new enough, or not known)."""
    version = check.msvcp140_version
    try:
        if version is None or Version(install.version or "0").release[:2] < Version(MSVC_MIN_ORT).release[:2]:
            return None
    except InvalidVersion:
        return None
    if msvc_version_ok(version) is not False:
        return None
    shown = ".".join(str(v) for v in version)
    return Msg(N_("{dll} is version {version}: onnxruntime-gpu {ort} and newer need {needed} {minimum} or newer"),
               dll=str(check.msvcp140), version=shown, ort=MSVC_MIN_ORT, needed=MSVC_DLL,
               minimum=f"{MSVC_MIN_VERSION[0]}.{MSVC_MIN_VERSION[1]}")
