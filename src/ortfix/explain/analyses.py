"""What a message, the compatibility matrix and, when given, this machine's facts add to an error pattern's general
explanation: the analyses an errors.yaml row may name (`analysis`). compat.schemas.Analysis is the one list of their
names; analysis_function gives each its function, and mypy checks that no name is left without one.

pip-version: the version pip was asked for against the versions it offered and the wheels each release has (and this
environment's Python, platform and glibc); numpy-abi / numpy-dtype: which way NumPy and a module disagree; gpu-count:
the device ids that exist here; driver: the driver here against the CUDA the installed build was made with;
windows-dll: what a Windows DLL a message names is and which wheel installs it (explain/windows_dlls.py);
library-major: the library family and major a SONAME or DLL means (explain/majors.py); glibcxx, wheel-platform, wsl:
the compiler, glibc, architecture or WSL a message points at (explain/hints.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NoReturn

from ortfix.compat.schemas import Analysis
from ortfix.explain.context import AnalysisContext, version_or_none, version_or_zero
from ortfix.explain.hints import glibcxx, wheel_platform, wsl
from ortfix.explain.majors import library_major
from ortfix.explain.pip_version import pip_version
from ortfix.explain.windows_dlls import windows_dll
from ortfix.i18n import Msg

if TYPE_CHECKING:
    from ortfix.check.facts import Facts

# Every analysis name, in the order compat.schemas.Analysis lists them.
ANALYSES: tuple[str, ...] = tuple(Analysis)

# The first onnxruntime release built against NumPy 2 (which also runs on NumPy 1.x): microsoft/onnxruntime#21063,
# closed with "onnxruntime>=1.19.0 ... is compatible with numpy>=2.0.0". compat/errors.yaml cites the sources.
_FIRST_NUMPY2_BUILD = "1.19.0"
# sizeof(PyArray_Descr) on 64-bit platforms: NumPy 1.x's struct (ndarraytypes.h), NumPy 2's (NumPy's C-API docs).
_DTYPE_SIZE_NUMPY1 = 96
_DTYPE_SIZE_NUMPY2 = 88


_ORT_TRACEBACK = re.compile(r"onnxruntime[\\/]+capi|onnxruntime_pybind11_state")


def _numpy_abi(ctx: AnalysisContext) -> list[str]:
    """A module and NumPy disagree: which NumPy the message names, whether the traceback runs through onnxruntime,
    and (with facts) which onnxruntime release is installed and whether it was built against NumPy 2."""
    out: list[str] = []
    g = ctx.groups
    if "numpy" in g:
        out.append(f"The NumPy in use is {g['numpy']}; the module was built against NumPy 1.x.")
    if "built" in g and "running" in g:
        built, running = int(g["built"], 16), int(g["running"], 16)
        kind = g.get("kind", "API")
        if built > running:
            out.append(f"The module was built against NumPy C-{kind} version 0x{g['built']}, the installed NumPy "
                       f"has 0x{g['running']}: NumPy is older than the one the module was built with.")
        elif built < running:
            out.append(f"The module was built against NumPy C-{kind} version 0x{g['built']}, the installed NumPy "
                       f"has 0x{g['running']}: the module predates this NumPy.")
    if _ORT_TRACEBACK.search(ctx.text):
        out.append("The traceback runs through onnxruntime's own native module (onnxruntime_pybind11_state), so "
                   "the installed onnxruntime is the module at odds with NumPy.")
    if ctx.facts is not None:
        out += _ort_numpy_here(ctx.facts)
    return out


def _ort_numpy_here(facts: Facts) -> list[str]:
    dists = [d for d in facts.ort_distributions if d.installed_version]
    if not dists:
        return ["No onnxruntime distribution is installed in this environment, so the module is another package."]
    out = []
    for d in dists:
        v = version_or_zero(d.installed_version or "0")
        if v < version_or_zero(_FIRST_NUMPY2_BUILD):
            out.append(f"This environment has {d.name} {v}, built against NumPy 1.x: it needs `numpy<2`, or "
                       f"{d.name} {_FIRST_NUMPY2_BUILD} or later.")
        else:
            out.append(f"This environment has {d.name} {v}; releases from {_FIRST_NUMPY2_BUILD} on are built "
                       "against NumPy 2 and run with NumPy 1.x and 2.x, so unless this build came from another feed, "
                       "the module at odds with NumPy is another package (the traceback's last import names it).")
    return out


def _numpy_dtype(ctx: AnalysisContext) -> list[str]:
    """numpy.dtype size changed: which NumPy the module was built against, from the two sizes Cython compared."""
    out: list[str] = []
    expected, got = ctx.groups.get("expected"), ctx.groups.get("got")
    if expected and got:
        sizes = {_DTYPE_SIZE_NUMPY1: "NumPy 1.x", _DTYPE_SIZE_NUMPY2: "NumPy 2.x"}
        built, running = sizes.get(int(expected)), sizes.get(int(got))
        if built and running and built != running:
            out.append(f"Expected {expected}, got {got}: the module was built against {built} and runs under "
                       f"{running}.")
    if ctx.facts is not None:
        old = [d for d in ctx.facts.ort_distributions
               if d.installed_version and version_or_zero(d.installed_version) < version_or_zero(_FIRST_NUMPY2_BUILD)]
        for d in old:
            out.append(f"This environment also has {d.name} {d.installed_version}, which needs NumPy 1.x: "
                       "`numpy<2` fits both, upgrading it to 1.19 or later lets NumPy 2 stay.")
    return out


def _gpu_count(ctx: AnalysisContext) -> list[str]:
    """Which device ids exist here: the GPUs the driver reports."""
    if ctx.facts is None:
        return []
    driver = ctx.facts.driver
    if not driver.present:
        return ["No NVIDIA driver was found in this environment, so no device_id is valid here."]
    gpus = driver.gpus
    if not gpus:
        return ["The NVIDIA driver here reports no GPU."]
    names = ", ".join(f"{g.index}: {g.name}" for g in gpus)
    return [f"The driver here reports {len(gpus)} GPU{'s' if len(gpus) != 1 else ''} ({names}); valid device_id "
            f"values are 0 to {len(gpus) - 1}, fewer when CUDA_VISIBLE_DEVICES lists fewer."]


def _driver(ctx: AnalysisContext) -> list[str]:
    """The driver here, the CUDA it runs, and the CUDA the installed onnxruntime-gpu was built with."""
    facts = ctx.facts
    if facts is None:
        return []
    driver = facts.driver
    if not driver.present or not driver.version:
        return ["No NVIDIA driver was found in this environment (`ortfix check` reports DRV001)."]
    runs = driver.cuda_version
    if runs is None:
        matrix = ctx.matrix.get()
        highest = matrix.highest_cuda_for_driver(driver.version) if matrix else None
        runs = str(highest) if highest else None
    gpus = len(driver.gpus)
    out = [f"The NVIDIA driver here is {driver.version}" + (f", which runs CUDA up to {runs}" if runs else "")
           + (f", with {gpus} GPU{'s' if gpus != 1 else ''}" if gpus else "") + "."]
    for install in facts.ort:
        built = install.cuda_version or next((b.cuda_build for b in install.builds if b.cuda_build), None)
        if not install.version or install.cuda_major is None:
            continue
        sentence = (f"The installed {install.package or 'onnxruntime'} {install.version} is a CUDA "
                    f"{install.cuda_major} build" + (f" compiled with CUDA {built}" if built else ""))
        b, r = version_or_none(built), version_or_none(runs)
        if b is not None and r is not None and b.release[:2] > r.release[:2]:
            sentence += f", newer than the driver's CUDA {runs}: that is the mismatch"
        out.append(sentence + ".")
    return out


AnalysisFunction = Callable[["AnalysisContext"], "Sequence[str | Msg]"]


def analysis_function(name: Analysis) -> AnalysisFunction:
    """The function of an analysis name (every member of Analysis has one: mypy fails on a member left out)."""
    if name is Analysis.PIP_VERSION:
        return pip_version
    if name is Analysis.NUMPY_ABI:
        return _numpy_abi
    if name is Analysis.NUMPY_DTYPE:
        return _numpy_dtype
    if name is Analysis.GPU_COUNT:
        return _gpu_count
    if name is Analysis.DRIVER:
        return _driver
    if name is Analysis.WINDOWS_DLL:
        return windows_dll
    if name is Analysis.LIBRARY_MAJOR:
        return library_major
    if name is Analysis.GLIBCXX:
        return glibcxx
    if name is Analysis.WHEEL_PLATFORM:
        return wheel_platform
    if name is Analysis.WSL:
        return wsl
    return _unreachable(name)


def _unreachable(name: NoReturn) -> NoReturn:
    raise AssertionError(f"analysis {name!r} has no function")
