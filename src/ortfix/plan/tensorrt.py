"""`plan --with tensorrt`: the TensorRT libraries the build's TensorRT provider NEEDs (`libnvinfer.so.N`,
`libnvonnxparser.so.N`, before 1.23 `libnvinfer_plugin.so.N`; on Windows the DLLs `nvinfer_N.dll`,
`nvonnxparser_N.dll`, `nvinfer_plugin_N.dll`), made findable by the same hooks as the CUDA libraries (Windows: the PATH
hook): a copy the environment has already is hooked, unless it is of a `tensorrt-cuNN-libs` built for another CUDA
major than the build (TRT004: same library names, the other CUDA's runtime); else `tensorrt-cuNN-libs` of the build's
CUDA major is installed, pinned to the build's TensorRT major and at least the version ORT documents for it
(compat/addons.yaml), and its `tensorrt_libs/` copies are hooked (its DLLs on Windows too: the wheel has no bin
folder)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from ortfix.check.addons import is_nvinfer, tensorrt_other_cuda, tensorrt_provider
from ortfix.check.codes import FindingCode
from ortfix.check.facts import Facts, OrtInstall
from ortfix.compat.addons import TENSORRT_FAMILIES, TENSORRT_WHEEL_DIR
from ortfix.compat.matrix import Matrix
from ortfix.compat.model import WheelSpec
from ortfix.i18n import N_, Msg
from ortfix.plan.model import ChosenBuild
from ortfix.plan.needed_libraries import stack_majors, stack_version

TENSORRT_CODES = (FindingCode.TENSORRT_NOT_LOADING, FindingCode.TENSORRT_WRONG_MAJOR,
                  FindingCode.TENSORRT_OTHER_CUDA)


@dataclass(frozen=True)
class TensorrtChange:
    requirement: str | None = None  # tensorrt-cuNN-libs>=MIN,<MAJOR+1
    libraries: Mapping[str, str] = field(default_factory=dict)  # soname → the path the hooks make findable
    notes: tuple[str | Msg, ...] = ()
    wheel: WheelSpec | None = None  # what the requirement installs where (plan/needed_libraries.occupying)


def tensorrt_change(facts: Facts, matrix: Matrix, installed: OrtInstall | None,
                    target: ChosenBuild | None) -> TensorrtChange:
    version, (cuda, _) = stack_version(target, installed), stack_majors(target, installed)
    if not version or not cuda:
        return TensorrtChange(notes=(Msg(N_("--with tensorrt: no GPU build to add TensorRT to")),))
    sonames = [n for n in platform_names(facts, _provider_needed(matrix, installed, version, cuda))
               if (parsed := facts.parse_library_name(n)) is not None and parsed[0] in TENSORRT_FAMILIES]
    major = next((facts.platform.library_major(n) for n in sonames if is_nvinfer(facts, n)), None)
    if major is None:
        return TensorrtChange(notes=(Msg(N_("--with tensorrt: which TensorRT {version} needs is not known"),
                                         version=version),))
    libraries: dict[str, str] = {}
    install = False
    other = _other_cuda_folders(facts, cuda)
    for soname in sonames:
        found = facts.findable.get(soname)
        if found and not _under(facts, found, other):
            continue
        key = facts.platform.library_key(soname)
        own = [c.path for c in facts.libraries
               if c.inside_env and key in {facts.platform.library_key(n) for n in (c.soname or "", c.name)}
               and not _under(facts, c.path, other)]
        if own:
            libraries[soname] = own[0]
            continue
        install = True
        libraries[soname] = os.path.join(facts.probe.purelib, TENSORRT_WHEEL_DIR, soname)
    if not install:
        return TensorrtChange(libraries=libraries)
    row = matrix.addons.tensorrt_for(version)
    low = row.min_version if row and row.major == major and row.min_version else f"{major}.0"
    wheel = WheelSpec(f"tensorrt-cu{cuda}-libs", f">={low},<{major + 1}", tuple(sonames), TENSORRT_WHEEL_DIR)
    return TensorrtChange(wheel.distribution + wheel.specifier, libraries, wheel=wheel)


def _other_cuda_folders(facts: Facts, cuda: int) -> tuple[str, ...]:
    """The tensorrt_libs folders of the installed tensorrt-cuNN-libs of another CUDA major (TRT004): what is there
    is not hooked but replaced (plan/pip_actions.py uninstalls them, as occupants of the folder)."""
    return tuple(os.path.join(d.location, TENSORRT_WHEEL_DIR) for d in tensorrt_other_cuda(facts, cuda))


def _under(facts: Facts, path: str, folders: tuple[str, ...]) -> bool:
    return any(facts.platform.inside(path, f) for f in folders)


def platform_names(facts: Facts, names: tuple[str, ...]) -> tuple[str, ...]:
    """`names` as the target's platform spells them: the matrix lists SONAMEs (libnvinfer.so.10), a Windows target
    loads DLLs (nvinfer_10.dll); an installed provider's own imports are spelled so already."""
    spelled = (s if facts.parse_library_name(s) else facts.platform.library_name(s) for s in names)
    return tuple(n for n in spelled if n)


def _provider_needed(matrix: Matrix, installed: OrtInstall | None, version: str, cuda: int) -> tuple[str, ...]:
    """The TensorRT provider's NEEDED: the installed binary's when it is the build planned, else the matrix's."""
    provider = tensorrt_provider(installed) if installed is not None else None
    if (provider is not None and not provider.error and installed is not None and installed.version == version
            and installed.cuda_major == cuda):
        return provider.needed
    rows = [b for b in matrix.builds_for(version) if b.cuda_major == cuda]
    return rows[0].tensorrt_needed if rows else ()
