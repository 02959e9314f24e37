"""What later stages ask the Windows platform about libraries: which NVIDIA wheel ships a DLL and where it puts it,
the NVRTC DLLs a hook must make findable beside cuDNN's, the search steps through which another copy wins, how
Windows' search is summed up in a finding, and what to do when no hook is wanted. `WindowsPlatform` (platform.py)
delegates here."""

from __future__ import annotations

import ntpath
import os
import re
from collections.abc import Mapping, Sequence

from ortfix.compat.addons import TENSORRT_FAMILIES
from ortfix.compat.matrix import Matrix
from ortfix.compat.model import WheelSpec
from ortfix.i18n import N_, Msg
from ortfix.system.inventory import LibCopy
from ortfix.system.loader import VIA_CACHE, VIA_DEFAULT, VIA_LD_LIBRARY_PATH
from ortfix.system.platform import HookFile
from ortfix.system.windows import hooks as winhooks
from ortfix.system.windows.loader import VIA_CURRENT_FOLDER, VIA_PATH, VIA_SYSTEM32, VIA_WINDOWS_FOLDER

# The families of the CUDA libraries' DLLs, as the Linux inventory spells them (cublasLt, nvJitLink).
FAMILIES = ("cudart", "cublas", "cublasLt", "cufft", "cufftw", "curand", "cusparse", "cusolver", "nvrtc",
            "nvrtc-builtins", "nvJitLink", "nvblas", *TENSORRT_FAMILIES)
# The search steps through which a copy outside the environment can win over its own (LIB004).
SHADOW_VIAS = (VIA_CACHE, VIA_DEFAULT, VIA_LD_LIBRARY_PATH, VIA_PATH, VIA_SYSTEM32, VIA_WINDOWS_FOLDER,
               VIA_CURRENT_FOLDER)
FINDABLE_ADVICE = N_("make them findable: ortfix's PATH hook (prepends their folders to PATH when onnxruntime is "
                     "imported), a conda activate.d hook, or the user PATH")
SHADOW_ADVICE = N_("put the environment's folder first: ortfix's PATH hook or a conda activate.d hook")


def search_summary(search_path: str | None, default_dirs: Sequence[str]) -> Msg:
    """The Windows search a provider's imports go through, for the evidence of LIB00x findings."""
    return Msg(N_("Windows searched (LOAD_WITH_ALTERED_SEARCH_PATH): the provider's folder, {folders}, the current "
                  "folder, then PATH={path}"), folders=", ".join(default_dirs),
               path=search_path if search_path else Msg(N_("(unset)")))


def no_hook_advice(paths: Sequence[str]) -> str:
    """`--hook none`: the folders of the DLLs at `paths` (in load order), each once, to put first on PATH."""
    return "put these folders first on PATH: " + ";".join(dict.fromkeys(ntpath.dirname(p) for p in paths))


def wheel_for_library(matrix: Matrix, name: str, cuda_major: int, cudnn_major: int | None) -> WheelSpec | None:
    """The NVIDIA pip wheel that ships the library `name` for this CUDA (and cuDNN) major: a SONAME, or also a DLL
    name, compared case-insensitively with the DLLs the win_amd64 wheel installs (cublasLt64_13.dll is nvidia-cublas
    13's, in nvidia/cu13/bin/x86_64), which a kept build's missing imports are named by."""
    wheel = matrix.wheel_for_soname(name, cuda_major, cudnn_major)
    if wheel is not None:
        return wheel
    cudnn = matrix.cudnn_wheel(cudnn_major, cuda_major) if cudnn_major is not None else None
    cuda = matrix.cuda_major(cuda_major)
    candidates: tuple[WheelSpec, ...] = (*((cudnn.wheel,) if cudnn else ()), *(cuda.wheels if cuda else ()))
    for candidate in candidates:
        if name.lower() in {d.lower() for d in wheel_dlls(candidate)}:
            return candidate
    return None


def installed_library_path(site: str, wheel: WheelSpec, soname: str) -> str:
    """Where `wheel` will install the library `soname` in `site`: its DLL in the wheel's Windows folder
    (nvidia\\cublas\\bin), else the SONAME in its folder."""
    if wheel.windows_dir:
        return os.path.join(site, *wheel.windows_dir.split("/"), dll_name_for_soname(soname) or soname)
    return os.path.join(site, wheel.dir, soname)


def with_nvrtc(hook_libs: Mapping[str, str], copies: Sequence[LibCopy], cuda_major: int | None) -> dict[str, str]:
    """`hook_libs` (DLL name → path) with the environment's own NVRTC DLLs of `cuda_major` when it makes a cuDNN DLL
    findable. cuDNN 9's runtime-compiled engines load NVRTC by a name they build (nvrtc64_%d%d_0.dll), by bare name
    through PATH, so nvidia\\cuda_nvrtc\\bin (CUDA 12; CUDA 13's nvidia\\cu13\\bin\\x86_64) must be on it too,
    although no import names it."""
    out = dict(hook_libs)
    if not any(name.lower().startswith("cudnn") for name in hook_libs):
        return out
    for c in copies:
        if (c.family == "nvrtc" and c.soname and c.inside_env
                and (cuda_major is None or c.cuda_major in (None, cuda_major))):
            out.setdefault(c.soname, c.path)
    return out


def dll_name_for_soname(soname: str) -> str | None:
    """The Windows DLL name of a Linux SONAME the matrix lists (libcudart.so.11.0 → cudart64_110.dll,
    libnvrtc.so.12 → nvrtc64_120_0.dll, libnvJitLink.so.12 → nvJitLink_120_0.dll, libcudnn_graph.so.9 →
    cudnn_graph64_9.dll); None for one with no Windows counterpart."""
    m = re.match(r"^lib(?P<family>[A-Za-z_-]+)\.so\.(?P<version>\d+(?:\.\d+)*)$", soname)
    if not m:
        return None
    family = m.group("family")
    parts = m.group("version").split(".")
    if family in ("nvrtc", "nvJitLink"):
        minor = parts[1] if len(parts) > 1 else "0"
        return f"{family}{'64' if family == 'nvrtc' else ''}_{parts[0]}{minor}_0.dll"
    if family == "cudart" and len(parts) > 1:
        return f"cudart64_{parts[0]}{parts[1]}.dll"
    # TensorRT's DLLs carry the major after an underscore only (nvinfer_10.dll, nvinfer_plugin_10.dll,
    # nvonnxparser_10.dll: the imports of onnxruntime_providers_tensorrt.dll in the onnxruntime_gpu win_amd64 wheels).
    if family in TENSORRT_FAMILIES:
        return f"{family}_{parts[0]}.dll"  # TensorRT 10's zip and wheels: nvinfer_10.dll, no "64"
    if family in FAMILIES or family == "cudnn" or family.startswith("cudnn_"):
        return f"{family}64_{parts[0]}.dll"
    return None


def wheel_dlls(wheel: WheelSpec) -> tuple[str, ...]:
    """The DLLs an NVIDIA wheel installs on Windows: the matrix's list where it has one, else its SONAMEs' names."""
    if wheel.dlls:
        return wheel.dlls
    return tuple(n for n in (dll_name_for_soname(s) for s in wheel.sonames) if n)


def hook_folders(paths: Sequence[str]) -> list[str]:
    """The folders of the DLLs to make findable, in load order, each once (Windows paths)."""
    return list(dict.fromkeys(ntpath.dirname(p) for p in paths))


def hook_files(kind: str, paths: Sequence[str], prefix: str, site: str) -> tuple[HookFile, ...]:
    """ORT finds its provider's DLLs through PATH, so each hook puts the DLLs' folders first on it: conda's
    activate.d/deactivate.d scripts for cmd, PowerShell and bash, or the PATH hook (prepended when onnxruntime is
    imported)."""
    dirs = hook_folders(paths)
    if kind == "conda":
        out = []
        for path, content in zip(winhooks.conda_windows_hook_paths(prefix),
                                 winhooks.render_conda_windows_hooks(dirs, prefix)):
            shell = {".bat": "cmd", ".ps1": "PowerShell", ".sh": "bash"}[path.suffix]
            summary = (Msg(N_("conda {folder} script for {shell}: put {n} folder(s) first on PATH"),
                           folder=path.parent.name, shell=shell, n=len(dirs)) if path.parent.name == "activate.d"
                       else Msg(N_("conda {folder} script for {shell}: restore PATH exactly"), folder=path.parent.name,
                                shell=shell))
            out.append(HookFile(str(path), content, summary))
        return tuple(out)
    module, pth = winhooks.path_hook_paths(site)
    return (HookFile(str(module), winhooks.render_path_hook_module(dirs, site),
                     Msg(N_("PATH hook: put {n} folder(s) first on PATH when onnxruntime is imported"), n=len(dirs))),
            HookFile(str(pth), winhooks.render_path_hook_pth(),
                     Msg(N_("activate the PATH hook at interpreter start-up"))))
