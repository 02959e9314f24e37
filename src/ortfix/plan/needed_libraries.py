"""Which CUDA libraries a plan must provide: those the chosen build needs (or, keeping the installed build, those
the loader misses or finds elsewhere), the installed copies by soname, and the NVIDIA wheels that occupy the folder
a wheel to install writes into, and the whole cuDNN copy that a cuDNN library to make findable belongs to.
`provide_libraries` is the plan's libraries stage: for each library, findable already, reused, or installed."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ortfix.check.codes import FindingCode as Code
from ortfix.check.facts import Facts, OrtInstall
from ortfix.check.findings import Finding, shadowing
from ortfix.compat.matrix import Matrix
from ortfix.compat.model import WheelSpec
from ortfix.plan.model import ChosenBuild
from ortfix.system.inventory import LibCopy, parse_lib_name
from ortfix.system.windows.platform import dll_name_for_soname, wheel_dlls
from ortfix.target.probe import Distribution


@dataclass(frozen=True)
class Provided:
    to_install: Mapping[str, WheelSpec]  # distribution → the NVIDIA wheel to install
    hook_libs: Mapping[str, str]  # soname → absolute path to make findable
    missing: tuple[str, ...]  # needed, not findable, and no NVIDIA wheel is known for it


def stack_majors(target: ChosenBuild | None, installed: OrtInstall | None) -> tuple[int | None, int | None]:
    """The CUDA and cuDNN majors the plan's stack uses: the target's, else the installed build's."""
    cuda_major = target.cuda_major if target else (installed.cuda_major if installed else None)
    cudnn_major = target.cudnn_major if target else (installed.cudnn_major if installed else None)
    return cuda_major, cudnn_major


def provide_libraries(facts: Facts, matrix: Matrix, by_code: Mapping[str, Sequence[Finding]],
                      target: ChosenBuild | None, installed: OrtInstall | None, swap: bool) -> Provided:
    """Which sonames the (target) build needs, and for each: findable, reusable, or to install."""
    site = facts.probe.purelib
    to_install: dict[str, WheelSpec] = {}
    hook_libs: dict[str, str] = {}
    missing_no_wheel: list[str] = []
    copies = copies_by_soname(facts.libraries)
    cuda_major, cudnn_major = stack_majors(target, installed)
    shadowed = {shadowing(f)["soname"]: f for f in by_code.get(Code.LIB_SHADOWED, [])}

    def fits(path: str) -> bool:
        """A copy built for the target's CUDA major (or one nothing tells the major of): a stack mixes no majors."""
        major = facts.cuda_major_at(path)
        return cuda_major is None or major is None or major == cuda_major

    driver_libraries = {facts.loader.key(n) for n in facts.loader.driver_libraries}
    windows = facts.platform.is_windows
    for soname in needed_sonames(facts, matrix, target, installed, swap):
        if facts.loader.key(soname) in driver_libraries:
            continue
        found = facts.findable.get(soname)
        if found and not fits(found):
            found = None  # the loader finds a copy of another CUDA major: it cannot stand in
        own = [c for c in copies.get(soname, []) if c.inside_env and fits(c.path)]
        if found and soname not in shadowed and not (own and not _inside(facts, found)):
            continue  # the loader already finds a copy: the environment's own, or the only one there is
        if own:
            hook_libs[soname] = own[0].path
            continue
        if found:  # shadowed but no own copy
            continue
        wheel = wheel_for_library(matrix, soname, cuda_major, cudnn_major, windows=windows) if cuda_major else None
        if wheel is None:
            missing_no_wheel.append(soname)
            continue
        to_install[wheel.distribution] = wheel
        hook_libs[soname] = _installed_path(site, wheel, soname, windows=windows)

    if windows:  # the PATH hook puts folders first: cuDNN's holds all of it; NVRTC's is loaded by a built name
        hook_libs = with_nvrtc(hook_libs, facts.libraries, cuda_major)
    else:
        cudnn_row = matrix.cudnn_wheel(cudnn_major, cuda_major) if cudnn_major and cuda_major else None
        hook_libs = whole_cudnn(hook_libs, facts.libraries, cudnn_row.wheel if cudnn_row else None)
    return Provided(to_install, hook_libs, tuple(missing_no_wheel))


def _installed_path(site: str, wheel: WheelSpec, soname: str, *, windows: bool) -> str:
    """Where `wheel` will install the library `soname` in the site-packages folder `site`: on Windows its DLL in the
    wheel's Windows folder (nvidia\\cublas\\bin), elsewhere the SONAME in its folder (nvidia/cublas/lib)."""
    if windows and wheel.windows_dir:
        return os.path.join(site, *wheel.windows_dir.split("/"), dll_name_for_soname(soname) or soname)
    return os.path.join(site, wheel.dir, soname)


def _inside(facts: Facts, path: str) -> bool:
    """Whether `path` lies in the target environment: an outside copy found first shadows the environment's own
    (what `check` reports as LIB004 once the build is installed)."""
    return (os.path.realpath(path) + os.sep).startswith(os.path.realpath(facts.probe.prefix) + os.sep)


def needed_sonames(facts: Facts, matrix: Matrix, target: ChosenBuild | None, installed: OrtInstall | None,
                   swap: bool) -> list[str]:
    if not swap and installed is not None:
        # Keep the installed build: exactly what the loader simulation says is missing or shadowed.
        names: list[str] = []
        for provider in installed.providers:
            if provider.provider != "cuda":
                continue
            for r in provider.resolutions:
                if (r.name not in names and facts.parse_library_name(r.name)
                        and (r.path is None or r.name in facts.findable)):
                    names.append(r.name)
        return [n for n in names if _is_missing_or_shadowed(facts, installed, n)]
    if target is None:
        return []
    build = next(b for b in matrix.builds if b.package == target.package and target.version in b.versions
                 and b.cuda_major == target.cuda_major)
    return list(dict.fromkeys((*build.cuda_needed, *build.cuda_lazy)))


def _is_missing_or_shadowed(facts: Facts, installed: OrtInstall, name: str) -> bool:
    for provider in installed.providers:
        for r in provider.resolutions:
            if r.name == name and r.path is None:
                return True
            if r.name == name and r.path is not None and installed.cuda_major is not None:
                major = facts.cuda_major_at(r.path)
                if major is not None and major != installed.cuda_major:
                    return True  # a copy of another CUDA major (LIB008)
    own = [c for c in facts.libraries if c.soname == name and c.inside_env]
    found = facts.findable.get(name)
    return bool(own and found and os.path.realpath(found) not in {os.path.realpath(c.path) for c in own})


def wheel_for_library(matrix: Matrix, name: str, cuda_major: int, cudnn_major: int | None, *,
                      windows: bool) -> WheelSpec | None:
    """The NVIDIA pip wheel that ships the library `name` for this CUDA (and cuDNN) major: a SONAME, or on Windows
    also a DLL name, compared case-insensitively with the DLLs the win_amd64 wheel installs (cublasLt64_13.dll is
    nvidia-cublas 13's, in nvidia/cu13/bin/x86_64), which a kept build's missing imports are named by."""
    wheel = matrix.wheel_for_soname(name, cuda_major, cudnn_major)
    if wheel is not None or not windows:
        return wheel
    cudnn = matrix.cudnn_wheel(cudnn_major, cuda_major) if cudnn_major is not None else None
    cuda = matrix.cuda_major(cuda_major)
    candidates: tuple[WheelSpec, ...] = (*((cudnn.wheel,) if cudnn else ()), *(cuda.wheels if cuda else ()))
    for candidate in candidates:
        if name.lower() in {d.lower() for d in wheel_dlls(candidate)}:
            return candidate
    return None


def with_nvrtc(hook_libs: Mapping[str, str], copies: Sequence[LibCopy], cuda_major: int | None) -> dict[str, str]:
    """Windows: `hook_libs` (DLL name → path) with the environment's own NVRTC DLLs of `cuda_major` when it makes a
    cuDNN DLL findable. cuDNN 9's runtime-compiled engines load NVRTC by a name they build (nvrtc64_%d%d_0.dll), by
    bare name through PATH, so nvidia\\cuda_nvrtc\\bin (CUDA 12; CUDA 13's nvidia\\cu13\\bin\\x86_64) must be on it
    too, although no import names it."""
    out = dict(hook_libs)
    if not any(name.lower().startswith("cudnn") for name in hook_libs):
        return out
    for c in copies:
        if (c.family == "nvrtc" and c.soname and c.inside_env
                and (cuda_major is None or c.cuda_major in (None, cuda_major))):
            out.setdefault(c.soname, c.path)
    return out


def occupying(facts: Facts, matrix: Matrix, wheel: WheelSpec) -> list[Distribution]:
    """Installed NVIDIA distributions, other than `wheel`'s, whose files live in the folder `wheel` installs into."""
    rows = {(w.distribution, w.dir) for _major, w in matrix.nvidia_wheels}
    site = os.path.realpath(facts.probe.purelib)
    return [d for d in facts.probe.distributions
            if d.normalized != wheel.distribution and os.path.realpath(d.location) == site
            and (d.normalized, wheel.dir) in rows]


def copies_by_soname(copies: Sequence[LibCopy]) -> dict[str, list[LibCopy]]:
    out: dict[str, list[LibCopy]] = {}
    for c in copies:
        if c.soname:
            out.setdefault(c.soname, []).append(c)
    return out


def whole_cudnn(hook_libs: Mapping[str, str], copies: Sequence[LibCopy], wheel: WheelSpec | None) -> dict[str, str]:
    """`hook_libs` (SONAME → path) with every library of each cuDNN copy it names: the libcudnn*.so.N of the same
    major in that folder (what the installed wheel holds, not only what the matrix lists: 9.28 has
    libcudnn_engines_tensor_ir and libcudnn_ext), or, for a folder the plan's wheel fills (`wheel`, nothing installed
    there yet), the SONAMEs that wheel ships. cuDNN loads its sub-libraries itself, by SONAME; a process that maps the
    environment's libcudnn but none of its sub-libraries gets them from LD_LIBRARY_PATH first, where a shadowing copy
    of another version may sit (cuDNN 9.1's libcudnn_graph beside 9.28's libcudnn: it aborts)."""
    out = dict(hook_libs)
    for soname, path in hook_libs.items():
        parsed = parse_lib_name(soname)
        if not parsed or not parsed[0].startswith("cudnn") or not parsed[1]:
            continue
        major, folder = parsed[1][0], os.path.dirname(path)
        there = [c for c in copies if c.directory == folder and c.family.startswith("cudnn") and c.major == major
                 and c.soname == c.name]
        names = [c.name for c in there] if there else list(wheel.sonames if wheel and soname in wheel.sonames
                                                                else ())
        for name in names:
            out.setdefault(name, os.path.join(folder, name))
    return out
