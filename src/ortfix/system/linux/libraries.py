"""What later stages ask the Linux platform about libraries: the whole cuDNN copy a hook must make findable, where a
wheel puts a library, how the loader's search is summed up in a finding, and what to do when no hook is wanted.
`LinuxPlatform` (platform.py) delegates here."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from ortfix.compat.matrix import Matrix
from ortfix.compat.model import WheelSpec
from ortfix.i18n import N_, Msg
from ortfix.system.inventory import LibCopy, parse_lib_name
from ortfix.system.linux import hooks
from ortfix.system.loader import VIA_CACHE, VIA_DEFAULT, VIA_LD_LIBRARY_PATH
from ortfix.system.platform import HookFile

# The loader's steps through which a copy outside the environment can win over its own (LIB004).
SHADOW_VIAS = (VIA_CACHE, VIA_DEFAULT, VIA_LD_LIBRARY_PATH)
FINDABLE_ADVICE = N_("make them findable: a preload hook (venv) or conda activate.d hook that points at the folders "
                     "above")
SHADOW_ADVICE = N_("put the environment's folder first: conda activate.d hook or preload hook")


def search_summary(search_path: str | None, index_source: str, default_dirs: Sequence[str]) -> Msg:
    """glibc's search, for the evidence of LIB00x findings."""
    return Msg(N_("loader searched: LD_LIBRARY_PATH={path}, {index}, {folders}"),
               path=search_path if search_path else Msg(N_("(unset)")), index=index_source,
               folders=", ".join(default_dirs))


def no_hook_advice(paths: Sequence[str]) -> str:
    """`--hook none`: the LD_LIBRARY_PATH that would make the libraries at `paths` findable."""
    return "set LD_LIBRARY_PATH to " + ":".join(sorted({os.path.dirname(p) for p in paths}))


def wheel_for_library(matrix: Matrix, name: str, cuda_major: int, cudnn_major: int | None) -> WheelSpec | None:
    """The NVIDIA pip wheel that ships the library SONAME `name` for this CUDA (and cuDNN) major."""
    return matrix.wheel_for_soname(name, cuda_major, cudnn_major)


def installed_library_path(site: str, wheel: WheelSpec, soname: str) -> str:
    """Where `wheel` will install `soname` in the site-packages folder `site`: its folder (nvidia/cublas/lib)."""
    return os.path.join(site, wheel.dir, soname)


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


def hook_folders(paths: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(os.path.dirname(p) for p in paths))


def hook_files(kind: str, paths: Sequence[str], prefix: str, site: str) -> tuple[HookFile, ...]:
    """The conda activate.d/deactivate.d hooks (their folders first on LD_LIBRARY_PATH), or the preload hook (a venv:
    the libraries loaded by absolute path when onnxruntime is imported)."""
    if kind == "conda":
        dirs = hook_folders(paths)
        activate, deactivate = hooks.conda_hook_paths(prefix)
        return (HookFile(str(activate), hooks.render_conda_activate(dirs, prefix),
                         Msg(N_("conda activate.d hook: put {n} folder(s) first on LD_LIBRARY_PATH"), n=len(dirs))),
                HookFile(str(deactivate), hooks.render_conda_deactivate(prefix),
                         Msg(N_("conda deactivate.d hook: restore LD_LIBRARY_PATH exactly"))))
    module, pth = hooks.preload_paths(site)
    libs = list(paths)
    return (HookFile(str(module), hooks.render_preload_module(libs, site),
                     Msg(N_("preload hook: load 1 library by absolute path when onnxruntime is imported")
                         if len(libs) == 1 else
                         N_("preload hook: load {n} libraries by absolute path when onnxruntime is imported"),
                         n=len(libs))),
            HookFile(str(pth), hooks.render_preload_pth(),
                     Msg(N_("activate the preload hook at interpreter start-up"))))
