"""`ortfix verify`'s onnxruntime-genai report: for each genai package installed beside ORT, which it is (CPU, CUDA,
DirectML), its CUDA major against ORT's, and whether it loads in a fresh process of the target started as its user
starts it (`import onnxruntime, onnxruntime_genai`, then, for onnxruntime-genai-cuda, its CUDA library
`libonnxruntime-genai-cuda.so` by path, as genai loads it when a model asks for CUDA). On a Windows target genai's own
DLL (`onnxruntime_genai\\onnxruntime-genai-cuda.dll`; genai-directml's `onnxruntime-genai.dll`) is loaded by the Windows
load check verify's level 1 uses (verify/winloadcheck.py: after `import onnxruntime`, by full path with the altered
search path, the first missing DLL named), in a process with the PATH its user's gets. No genai installed: no
report."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ortfix import subproc
from ortfix.check.addons import GENAI_CUDA_DLL, GENAI_CUDA_LIBRARY, genai_built_major, genai_installs
from ortfix.check.facts import Facts
from ortfix.compat.addons import GENAI_CPU, GENAI_CUDA, GENAI_DIRECTML
from ortfix.compat.matrix import Matrix
from ortfix.i18n import N_, _, text, tr
from ortfix.target.launch import launch
from ortfix.verify.winloadcheck import check_loadable_windows, windows_child_env

_MARK = "ORTFIX-GENAI:"
# onnxruntime-genai-directml's own DLL (RECORD of the 0.11.4 win_amd64 wheel: beside it D3D12Core.dll).
GENAI_DIRECTML_DLL = "onnxruntime_genai/onnxruntime-genai.dll"
# Runs inside the target (any Python 3): standard library only, one JSON line out. argv[1]: the CUDA library's path
# relative to site-packages ("" when there is none to load).
_SCRIPT = r"""
import json, os, sys
out = {"library": None}
try:
    import onnxruntime
    import onnxruntime_genai
    out["import"] = "ok"
except BaseException as e:
    out["import"] = "%%s: %%s" %% (type(e).__name__, e)
if sys.argv[1] and out["import"] == "ok":
    import ctypes
    here = os.path.dirname(os.path.dirname(os.path.abspath(onnxruntime_genai.__file__)))
    try:
        ctypes.CDLL(os.path.join(here, sys.argv[1]))
        out["library"] = "ok"
    except OSError as e:
        out["library"] = str(e) or "not loaded"
print(%(mark)r + json.dumps(out))
"""  # i18n: english (a program the target runs)


@dataclass(frozen=True)
class GenaiReport:
    package: str
    version: str
    kind: str  # CPU | CUDA | DirectML
    cuda_major: int | None  # genai-cuda's: its library's NEEDED libcudart, else the matrix's row
    ort_cuda_major: int | None
    imported: str  # "ok", or why `import onnxruntime_genai` failed
    library: str | None  # genai-cuda's CUDA library: "ok", or why it did not load; None: nothing to load
    needs_driver: bool = False  # it did not load for want of the NVIDIA driver's libcuda.so.1, absent here

    @property
    def fits(self) -> bool:
        """Built for what ORT runs: the CPU package never is (it has no CUDA provider); DirectML is Windows' own."""
        if self.kind == "CUDA":
            return self.cuda_major is not None and self.cuda_major == self.ort_cuda_major
        return self.kind == "DirectML"

    @property
    def ok(self) -> bool:
        return self.fits and self.imported == "ok" and (self.library in (None, "ok") or self.needs_driver)

    def line(self) -> str:
        """The report in one line, in the user's language (i18n.py)."""
        built = f"CUDA {self.cuda_major if self.cuda_major is not None else '?'}" if self.kind == "CUDA" else self.kind
        ort = (tr("ONNX Runtime's CUDA {major}", major=self.ort_cuda_major) if self.ort_cuda_major is not None
               else "ONNX Runtime")
        fit = tr("fits {ort}", ort=ort) if self.fits else tr("does not fit {ort}", ort=ort)
        if self.imported != "ok":
            loads = tr("import fails: {error}", error=text(self.imported))
        elif self.library is None:
            loads = _("imports in a fresh process")
        elif self.needs_driver:
            loads = _("its CUDA library needs the NVIDIA driver's libcuda.so.1, absent here: not loaded")
        else:
            loads = (_("its CUDA library loads") if self.library == "ok"
                     else tr("its CUDA library does not load: {error}", error=text(self.library)))
        return tr("{package} {version} ({built}): {fit}; {loads}", package=self.package, version=self.version,
                  built=built, fit=fit, loads=loads)

    def to_json(self) -> dict[str, object]:
        return {"package": self.package, "version": self.version, "kind": self.kind, "cuda_major": self.cuda_major,
                "ort_cuda_major": self.ort_cuda_major, "fits": self.fits, "imported": self.imported,
                "library": self.library, "needs_driver": self.needs_driver, "ok": self.ok}


def genai_reports(facts: Facts, matrix: Matrix, python: str, *, conda_hook: Path | None, no_driver: bool,
                  timeout: float = 120.0) -> tuple[GenaiReport, ...]:
    """One report per installed genai package (none installed: none). `no_driver`: this machine has no NVIDIA
    driver, so a library that NEEDs its libcuda.so.1 cannot load here (said, not failed)."""
    ort = facts.active_ort
    windows = facts.platform.is_windows
    out = []
    for g in genai_installs(facts):
        name = g.dist.normalized
        kind = {GENAI_CPU: "CPU", GENAI_DIRECTML: "DirectML", GENAI_CUDA: "CUDA"}.get(name, "CUDA")
        major = genai_built_major(g, matrix)
        library = genai_library(g.dist.location, kind, windows=windows)
        if windows:
            path = os.path.join(g.dist.location, *library.split("/")) if library else ""
            imported, loaded, driver = _load_windows(facts, python, path, timeout=timeout)
            driver = driver and no_driver
        else:
            imported, loaded = _load(python, library, prefix=facts.probe.prefix, conda_hook=conda_hook,
                                     timeout=timeout)
            driver = bool(library) and "libcuda.so.1" in loaded and no_driver
        out.append(GenaiReport(g.dist.name, g.dist.version, kind, major, ort.cuda_major if ort else None, imported,
                               loaded if library else None, driver))
    return tuple(out)


def genai_library(location: str, kind: str, *, windows: bool) -> str:
    """The library of the genai package at `location` that verify loads by path, relative to site-packages ("": none
    there): genai-cuda's CUDA library (Linux: libonnxruntime-genai-cuda.so; Windows: onnxruntime-genai-cuda.dll), on
    Windows genai-directml's onnxruntime-genai.dll."""
    if windows:
        rel = {"CUDA": GENAI_CUDA_DLL, "DirectML": GENAI_DIRECTML_DLL}.get(kind, "")
    else:
        rel = GENAI_CUDA_LIBRARY if kind == "CUDA" else ""
    return rel if rel and os.path.isfile(os.path.join(location, *rel.split("/"))) else ""


def _load_windows(facts: Facts, python: str, library: str, *, timeout: float) -> tuple[str, str, bool]:
    """(import result, library result, whether only the NVIDIA driver's own DLLs were missing) on a Windows target:
    the import in a fresh process, then `library` (a full path; "": none) in the Windows load check's, both with the
    PATH its user's process gets."""
    env = windows_child_env(facts)
    imported, _ = _load(python, "", prefix=facts.probe.prefix, conda_hook=None, timeout=timeout, env=env)
    if not library or imported != "ok":
        return imported, N_("not reached"), False
    check = check_loadable_windows(python, library, [], prefix=facts.probe.prefix, timeout=timeout, env=env)
    lib = check.libraries[0] if check.libraries else None
    if check.process_error or lib is None:
        return imported, str(check.process_error or N_("not reached")), False
    if lib.error is None:
        return imported, "ok", False
    return imported, str(lib.error), bool(lib.driver_missing) and not lib.missing


def _load(python: str, library: str, *, prefix: str, conda_hook: Path | None, timeout: float,
          env: Mapping[str, str] | None = None) -> tuple[str, str]:
    """(import result, library result) from a fresh process of the target (`env`: its environment, else launch's)."""
    argv, child_env = launch(python, _SCRIPT % {"mark": _MARK}, [library.replace("/", os.sep)], prefix=prefix,
                             conda_hook=conda_hook)
    proc = subproc.run(argv, target_python=python, env=dict(env) if env is not None else child_env, timeout=timeout)
    line = next((ln for ln in reversed(proc.stdout.splitlines()) if ln.startswith(_MARK)), None)
    if line is None:
        why = f"killed by signal {-proc.returncode}" if proc.returncode < 0 else f"exit {proc.returncode}"
        return f"the check process failed ({why})", N_("not reached")  # English: the --json report's value
    try:
        doc = json.loads(line[len(_MARK):])
    except ValueError:
        return N_("the check process printed no valid report"), N_("not reached")
    imported, library = doc.get("import"), doc.get("library")
    return (imported if isinstance(imported, str) else N_("no report"),
            library if isinstance(library, str) else N_("not reached"))
