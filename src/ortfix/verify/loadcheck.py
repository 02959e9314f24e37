"""Out-of-process proof that the GPU provider's libraries now load: a fresh process of the target interpreter, started
as a user starts it, imports onnxruntime (so an ortfix preload hook fires) and `ctypes.CDLL`s every library the
provider needs by its SONAME, as the provider's own loading would. The CUDA provider library itself is never loaded:
without a GPU driver it can crash the process.

Conda environments are checked as `conda activate` leaves them: the activate.d hook is sourced by a real `sh` first,
with every path passed as a positional argument (never pasted into a shell string).
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ortfix import subproc
from ortfix.i18n import N_, Msg
from ortfix.system.inventory import CUDA_MAJOR_FILES, cuda_major_by_name
from ortfix.system.loader import VIA_RPATH, VIA_RUNPATH, Resolution
from ortfix.target.launch import launch
from ortfix.verify.cudnncheck import CudnnCheck, check_cudnn, cudnn_soname

LOADCHECK_SCHEMA = "ortfix.loadcheck/1"  # the library-load check inside apply's and verify's JSON
PROVIDER_PREFIX = "libonnxruntime_providers_cuda"
_MARK = "ORTFIX-VERIFY:"

# Runs inside the target (any Python 3): standard library only, one JSON line out. A library that its requester
# finds through the requester's own DT_RUNPATH/DT_RPATH (cuDNN 9 dlopens its sub-libraries by SONAME from
# libcudnn.so.9, whose RUNPATH is $ORIGIN) cannot be found by a bare dlopen from this script, which has no RUNPATH:
# for those the parent passes the folders that RUNPATH names, and the script loads the file from there, as the
# requester's dlopen would.
_SCRIPT = r"""
import ctypes, json, os, sys
names = json.loads(%(names)r)
runpaths = json.loads(%(runpaths)r)
out = {"import": None, "module": None, "libraries": {}, "via_requester": {}}
try:
    import onnxruntime
    out["import"] = "ok"
    out["module"] = getattr(onnxruntime, "__file__", None)
except BaseException as exc:
    out["import"] = "%%s: %%s" %% (type(exc).__name__, exc)
for name in names:
    if name.startswith(%(provider)r):
        continue
    try:
        ctypes.CDLL(name)
        out["libraries"][name] = None
        continue
    except OSError as exc:
        out["libraries"][name] = str(exc)
    for folder in runpaths.get(name, []):
        path = os.path.join(folder, name)
        if not os.path.exists(path):
            continue
        try:
            ctypes.CDLL(path)
            out["libraries"][name] = None
            out["via_requester"][name] = path
        except OSError as exc:
            out["libraries"][name] = str(exc)
        break
mapped = []
try:
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(None, 5)
            if len(fields) == 6:
                path = fields[5].strip()
                if os.path.basename(path).startswith(%(families)r) and path not in mapped:
                    mapped.append(path)
except (OSError, ValueError):
    mapped = None
out["mapped"] = mapped
sys.stdout.write(%(mark)r + json.dumps(out) + "\n")
"""  # i18n: english (a program the target runs)


@dataclass(frozen=True)
class LibLoad:
    soname: str  # on Windows: the DLL's name (the provider: its path, as onnxruntime loads it)
    error: str | Msg | None  # None: loaded (a Msg: English in --json, translated on the screen)
    via_requester: str | None = None  # loaded from this path, found through its requester's RUNPATH/RPATH
    # Windows: the import chain down to the first DLL that is not found (error 126 itself names none)
    missing: tuple[str, ...] = ()
    driver_missing: tuple[str, ...] = ()  # Windows: the NVIDIA driver's own DLLs it imports that are absent


@dataclass(frozen=True)
class LoadCheck:
    argv: tuple[str, ...]
    imported: bool
    import_error: str | None
    libraries: tuple[LibLoad, ...]
    process_error: str | Msg | None  # the process itself failed (crashed, no JSON)
    mapped: tuple[str, ...] = ()  # CUDA libraries in the process's /proc/self/maps afterwards
    cuda_major: int | None = None  # the major the build needs (None: not known)
    platform: str = "linux"  # linux | windows (verify/winloadcheck.py)
    exit_code: int | None = None  # the process's exit status when it ended early (None: it finished, or Linux)
    cudnn8_missing: str | None = None  # Windows: the DLL cuDNN 8 could not locate before it ended the process
    msvcp140: str | None = None  # Windows: the msvcp140.dll the process had loaded at the end
    msvcp140_version: tuple[int, ...] | None = None  # its FileVersion, as the process read it
    # Windows, set by verify's level 1 on a machine without the NVIDIA driver: a DLL that failed only for want of the
    # driver's own DLLs (every other import loaded) is not a failure of the environment
    driver_absent: bool = False
    cudnn: CudnnCheck | None = None  # cuDNN's own version checks, in a process of their own (cudnncheck.py)

    @property
    def majors(self) -> dict[int, list[str]]:
        """CUDA major → the mapped files of that major."""
        out: dict[int, list[str]] = {}
        for path in self.mapped:
            major = cuda_major_by_name(os.path.basename(path))
            if major is not None:
                out.setdefault(major, []).append(path)
        return out

    @property
    def mixed_majors(self) -> Msg | None:
        """Why the process's CUDA libraries are not one stack of the build's major; None when they are."""
        majors = self.majors
        if len(majors) > 1:
            stacks = [Msg("CUDA {major} ({path})", major=m, path=majors[m][0]) for m in sorted(majors)]
            both = functools.reduce(lambda a, b: Msg(N_("{a} and {b}"), a=a, b=b), stacks)
            return Msg(N_("libraries of {stacks} are mapped into one process: a stack mixes no majors"), stacks=both)
        if majors and self.cuda_major is not None and self.cuda_major not in majors:
            major = next(iter(majors))
            return Msg(N_("the process maps CUDA {major} libraries ({path}); the build needs CUDA {needed}"),
                       major=major, path=majors[major][0], needed=self.cuda_major)
        return None

    def excused(self, lib: LibLoad) -> bool:
        """`lib` failed only because the NVIDIA driver's own DLLs are absent, on a machine without the driver."""
        return self.driver_absent and bool(lib.driver_missing) and not lib.missing

    @property
    def ok(self) -> bool:
        return (self.imported and self.process_error is None
                and all(x.error is None or self.excused(x) for x in self.libraries) and self.mixed_majors is None
                and (self.cudnn is None or self.cudnn.ok))

    @property
    def failures(self) -> list[str | Msg]:
        out: list[str | Msg] = []
        if self.process_error:
            out.append(self.process_error)
        if self.mixed_majors:
            out.append(self.mixed_majors)
        if not self.imported:
            out.append(Msg(N_("import onnxruntime failed: {error}"), error=str(self.import_error)))
        out += [Msg("{soname}: {error}", soname=x.soname, error=x.error) for x in self.libraries
                if x.error and not self.excused(x)]
        return out + (self.cudnn.failures if self.cudnn else [])

    def to_json(self) -> dict[str, object]:
        return {"schema": LOADCHECK_SCHEMA, "ok": self.ok, "argv": list(self.argv), "imported": self.imported,
                "import_error": self.import_error, "process_error": _english(self.process_error),
                "libraries": {x.soname: _english(x.error) for x in self.libraries},
                "via_requester": {x.soname: x.via_requester for x in self.libraries if x.via_requester},
                "mapped": list(self.mapped), "cuda_major": self.cuda_major, "mixed_majors": _english(self.mixed_majors),
                "platform": self.platform, "exit_code": self.exit_code, "cudnn8_missing": self.cudnn8_missing,
                "driver_absent": self.driver_absent, "cudnn": self.cudnn.to_json() if self.cudnn else None,
                "msvcp140": self.msvcp140,
                "msvcp140_version": list(self.msvcp140_version) if self.msvcp140_version else None,
                "missing": {x.soname: list(x.missing) for x in self.libraries if x.missing},
                "driver_missing": {x.soname: list(x.driver_missing) for x in self.libraries if x.driver_missing}}


def script(sonames: Sequence[str], requester_dirs: Mapping[str, Sequence[str]] | None = None) -> str:
    names = [n for n in dict.fromkeys(sonames) if not n.startswith(PROVIDER_PREFIX)]
    runpaths = {n: list(d) for n, d in (requester_dirs or {}).items() if n in names}
    return _SCRIPT % {"names": json.dumps(names), "runpaths": json.dumps(runpaths), "provider": PROVIDER_PREFIX,
                      "mark": _MARK, "families": CUDA_MAJOR_FILES}


def check_loadable(python: str, sonames: Sequence[str], *, prefix: str, conda_hook: Path | None = None,
                   requester_dirs: Mapping[str, Sequence[str]] | None = None, timeout: float = 300.0,
                   cuda_major: int | None = None) -> LoadCheck:
    """Start the target as a user would (plain `python -c`, or after sourcing the conda activate.d hook) and load
    every SONAME; the provider library itself is filtered out whatever the caller passes. `requester_dirs`: for a
    SONAME its requester finds through its own RUNPATH/RPATH, the folders that names (see _SCRIPT)."""
    code = script(sonames, requester_dirs)
    names = [n for n in dict.fromkeys(sonames) if not n.startswith(PROVIDER_PREFIX)]
    argv, env = launch(python, code, prefix=prefix, conda_hook=conda_hook)
    shown = tuple(a if a != code else "<verification script>" for a in argv)
    proc = subproc.run(argv, target_python=python, env=env, timeout=timeout)
    line = next((ln for ln in reversed(proc.stdout.splitlines()) if ln.startswith(_MARK)), None)
    if line is None:
        why = (f"killed by signal {-proc.returncode}" if proc.returncode < 0
               else f"exit {proc.returncode}") + (f": {proc.stderr.strip().splitlines()[-1]}"
                                                  if proc.stderr.strip() else "")
        return LoadCheck(shown, False, None, tuple(LibLoad(n, N_("not reached")) for n in names),
                         Msg(N_("the verification process failed ({why})"), why=why))
    doc = json.loads(line[len(_MARK):])
    imported = doc.get("import") == "ok"
    via = doc.get("via_requester") or {}
    libs = tuple(LibLoad(n, doc["libraries"].get(n, N_("not reported")), via.get(n)) for n in names)
    mapped = tuple(p for p in doc.get("mapped") or () if isinstance(p, str))
    cudnn = cudnn_soname(names)
    versions = (check_cudnn(python, cudnn, prefix=prefix, conda_hook=conda_hook, timeout=timeout,
                            folders=(requester_dirs or {}).get(cudnn, ())) if cudnn else None)
    return LoadCheck(shown, imported, None if imported else str(doc.get("import")), libs, None, mapped, cuda_major,
                     cudnn=versions)


def _english(value: str | Msg | None) -> str | None:
    """A message as --json and the journal keep it: English."""
    return None if value is None else str(value)


def requester_runpath_dirs(resolutions: Iterable[Resolution]) -> dict[str, list[str]]:
    """SONAME -> folders, for the libraries the loader simulation found through their requester's own
    DT_RUNPATH/DT_RPATH: a bare dlopen from another object would not search there."""
    out: dict[str, list[str]] = {}
    for r in resolutions:
        if r.path and r.via in (VIA_RUNPATH, VIA_RPATH):
            folders = out.setdefault(r.name, [])
            if os.path.dirname(r.path) not in folders:
                folders.append(os.path.dirname(r.path))
    return out
