"""Which CUDA libraries a plan must provide: those the chosen build needs (or, keeping the installed build, those
the loader misses or finds elsewhere), the installed copies by soname, and the NVIDIA wheels that occupy the folder
a wheel to install writes into. `provide_libraries` is the plan's libraries stage: for each library, findable
already, reused, or installed; which wheel ships a library, where it puts it and what a hook must make findable
beside it (the whole cuDNN copy; NVRTC on Windows) are the target platform's answers (`Facts.platform`)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ortfix.check.codes import FindingCode as Code
from ortfix.check.facts import Facts, OrtInstall
from ortfix.check.findings import Finding, shadowing
from ortfix.compat.addons import TENSORRT_WHEEL_DIR, tensorrt_libs_dists
from ortfix.compat.matrix import Matrix
from ortfix.compat.model import WheelSpec
from ortfix.plan.model import ChosenBuild
from ortfix.system.inventory import LibCopy
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


def stack_version(target: ChosenBuild | None, installed: OrtInstall | None) -> str | None:
    """The ONNX Runtime version the plan's stack ends with: the target's, else the installed build's."""
    return target.version if target else (installed.version if installed else None)


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
    plat = facts.platform
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
        wheel = plat.wheel_for_library(matrix, soname, cuda_major, cudnn_major) if cuda_major else None
        if wheel is None:
            missing_no_wheel.append(soname)
            continue
        to_install[wheel.distribution] = wheel
        hook_libs[soname] = plat.installed_library_path(site, wheel, soname)

    cudnn_row = matrix.cudnn_wheel(cudnn_major, cuda_major) if cudnn_major and cuda_major else None
    hook_libs = plat.hook_libraries(hook_libs, facts.libraries, cuda_major, cudnn_row.wheel if cudnn_row else None)
    return Provided(to_install, hook_libs, tuple(missing_no_wheel))


def _inside(facts: Facts, path: str) -> bool:
    """Whether `path` lies in the target environment: an outside copy found first shadows the environment's own
    (what `check` reports as LIB004 once the build is installed)."""
    return facts.platform.inside(path, facts.probe.prefix)


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


def occupying(facts: Facts, matrix: Matrix, wheel: WheelSpec) -> list[Distribution]:
    """Installed NVIDIA distributions, other than `wheel`'s, whose files live in the folder `wheel` installs into (the
    NVIDIA wheels' folders by the matrix's rows; tensorrt_libs/ by the TensorRT distributions' names)."""
    rows = {(w.distribution, w.dir) for _major, w in matrix.nvidia_wheels}
    site = os.path.realpath(facts.probe.purelib)
    return [d for d in facts.probe.distributions
            if d.normalized != wheel.distribution and os.path.realpath(d.location) == site
            and ((d.normalized, wheel.dir) in rows
                 or (wheel.dir == TENSORRT_WHEEL_DIR and tensorrt_libs_dists().fullmatch(d.normalized)))]


def copies_by_soname(copies: Sequence[LibCopy]) -> dict[str, list[LibCopy]]:
    out: dict[str, list[LibCopy]] = {}
    for c in copies:
        if c.soname:
            out.setdefault(c.soname, []).append(c)
    return out
