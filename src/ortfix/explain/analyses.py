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
from ortfix.i18n import N_, Joined, Msg

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


def _numpy_abi(ctx: AnalysisContext) -> list[Msg]:
    """A module and NumPy disagree: which NumPy the message names, whether the traceback runs through onnxruntime,
    and (with facts) which onnxruntime release is installed and whether it was built against NumPy 2."""
    out: list[Msg] = []
    g = ctx.groups
    if "numpy" in g:
        out.append(Msg(N_("The NumPy in use is {numpy}; the module was built against NumPy 1.x."), numpy=g["numpy"]))
    if "built" in g and "running" in g:
        built, running = int(g["built"], 16), int(g["running"], 16)
        kind = g.get("kind", "API")
        versions = {"kind": kind, "built": f"0x{g['built']}", "running": f"0x{g['running']}"}
        if built > running:
            out.append(Msg(N_("The module was built against NumPy C-{kind} version {built}, the installed NumPy has "
                              "{running}: NumPy is older than the one the module was built with."), **versions))
        elif built < running:
            out.append(Msg(N_("The module was built against NumPy C-{kind} version {built}, the installed NumPy has "
                              "{running}: the module predates this NumPy."), **versions))
    if _ORT_TRACEBACK.search(ctx.text):
        out.append(Msg(N_("The traceback runs through onnxruntime's own native module (onnxruntime_pybind11_state), "
                          "so the installed onnxruntime is the module at odds with NumPy.")))
    if ctx.facts is not None:
        out += _ort_numpy_here(ctx.facts)
    return out


def _ort_numpy_here(facts: Facts) -> list[Msg]:
    dists = [d for d in facts.ort_distributions if d.installed_version]
    if not dists:
        return [Msg(N_("No onnxruntime distribution is installed in this environment, so the module is another "
                       "package."))]
    out = []
    for d in dists:
        v = version_or_zero(d.installed_version or "0")
        if v < version_or_zero(_FIRST_NUMPY2_BUILD):
            out.append(Msg(N_("This environment has {name} {version}, built against NumPy 1.x: it needs `numpy<2`, or "
                              "{name} {first} or later."), name=d.name, version=str(v), first=_FIRST_NUMPY2_BUILD))
        else:
            out.append(Msg(N_("This environment has {name} {version}; releases from {first} on are built against "
                              "NumPy 2 and run with NumPy 1.x and 2.x, so unless this build came from another feed, "
                              "the module at odds with NumPy is another package (the traceback's last import names "
                              "it)."), name=d.name, version=str(v), first=_FIRST_NUMPY2_BUILD))
    return out


def _numpy_dtype(ctx: AnalysisContext) -> list[Msg]:
    """numpy.dtype size changed: which NumPy the module was built against, from the two sizes Cython compared."""
    out: list[Msg] = []
    expected, got = ctx.groups.get("expected"), ctx.groups.get("got")
    if expected and got:
        sizes = {_DTYPE_SIZE_NUMPY1: "NumPy 1.x", _DTYPE_SIZE_NUMPY2: "NumPy 2.x"}
        built, running = sizes.get(int(expected)), sizes.get(int(got))
        if built and running and built != running:
            out.append(Msg(N_("Expected {expected}, got {got}: the module was built against {built} and runs under "
                              "{running}."), expected=expected, got=got, built=built, running=running))
    if ctx.facts is not None:
        old = [d for d in ctx.facts.ort_distributions
               if d.installed_version and version_or_zero(d.installed_version) < version_or_zero(_FIRST_NUMPY2_BUILD)]
        for d in old:
            out.append(Msg(N_("This environment also has {name} {version}, which needs NumPy 1.x: `numpy<2` fits both, "
                              "upgrading it to 1.19 or later lets NumPy 2 stay."), name=d.name,
                           version=d.installed_version or ""))
    return out


def _gpu_count(ctx: AnalysisContext) -> list[Msg]:
    """Which device ids exist here: the GPUs the driver reports."""
    if ctx.facts is None:
        return []
    driver = ctx.facts.driver
    if not driver.present:
        return [Msg(N_("No NVIDIA driver was found in this environment, so no device_id is valid here."))]
    gpus = driver.gpus
    if not gpus:
        return [Msg(N_("The NVIDIA driver here reports no GPU."))]
    names = Joined(N_(", "), [f"{g.index}: {g.name}" for g in gpus])
    template = (N_("The driver here reports {count} GPU ({names}); valid device_id values are 0 to {last}, fewer when "
                   "CUDA_VISIBLE_DEVICES lists fewer.") if len(gpus) == 1 else
                N_("The driver here reports {count} GPUs ({names}); valid device_id values are 0 to {last}, fewer "
                   "when CUDA_VISIBLE_DEVICES lists fewer."))
    return [Msg(template, count=len(gpus), names=names, last=len(gpus) - 1)]


def _driver(ctx: AnalysisContext) -> list[Msg]:
    """The driver here, the CUDA it runs, and the CUDA the installed onnxruntime-gpu was built with."""
    facts = ctx.facts
    if facts is None:
        return []
    driver = facts.driver
    if not driver.present or not driver.version:
        return [Msg(N_("No NVIDIA driver was found in this environment (`ortfix check` reports DRV001)."))]
    runs = driver.cuda_version
    if runs is None:
        matrix = ctx.matrix.get()
        highest = matrix.highest_cuda_for_driver(driver.version) if matrix else None
        runs = str(highest) if highest else None
    gpus = len(driver.gpus)
    clauses: list[Msg] = [Msg(N_(", which runs CUDA up to {cuda}"), cuda=runs)] if runs else []
    if gpus:
        clauses.append(Msg(N_(", with {count} GPU") if gpus == 1 else N_(", with {count} GPUs"), count=gpus))
    out = [Msg(N_("The NVIDIA driver here is {version}{clauses}."), version=driver.version,
               clauses=Joined("", clauses))]
    for install in facts.ort:
        built = install.cuda_version or next((b.cuda_build for b in install.builds if b.cuda_build), None)
        if not install.version or install.cuda_major is None:
            continue
        b, r = version_or_none(built), version_or_none(runs)
        tail: list[Msg] = [Msg(N_(" compiled with CUDA {cuda}"), cuda=built)] if built else []
        if b is not None and r is not None and b.release[:2] > r.release[:2]:
            tail.append(Msg(N_(", newer than the driver's CUDA {cuda}: that is the mismatch"), cuda=runs or ""))
        out.append(Msg(N_("The installed {package} {version} is a CUDA {major} build{tail}."),
                       package=install.package or "onnxruntime", version=install.version, major=install.cuda_major,
                       tail=Joined("", tail)))
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
