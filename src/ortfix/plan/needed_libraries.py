"""Which CUDA libraries a plan must provide: those the chosen build needs (or, keeping the installed build, those
the loader misses or finds elsewhere), the installed copies by soname, and the NVIDIA wheels that occupy the folder
a wheel to install writes into, and the whole cuDNN copy that a cuDNN library to make findable belongs to."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from ortfix.check.facts import Facts, OrtInstall
from ortfix.compat.matrix import Matrix
from ortfix.compat.model import WheelSpec
from ortfix.plan.model import ChosenBuild
from ortfix.system.inventory import LibCopy, parse_lib_name
from ortfix.system.windows import wheel_dlls
from ortfix.target.probe import Distribution


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
