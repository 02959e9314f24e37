"""The `windows-dll` analysis of `ortfix explain`: what a Windows DLL named in a message is (which library, which CUDA
or cuDNN major), which NVIDIA pip wheel installs it and into which folder (compat/cuda.yaml's `windows_dir`), or that
it is the MSVC runtime, cuDNN 8's zlibwapi.dll or the driver's own; for "Require cuDNN 9.* and CUDA 12.*" messages,
the wheels of those majors. With this machine's facts it adds which build is installed here.

DLL names follow docs/windows-dlls.md ("DLL names"): `cublasLt64_12.dll` is cuBLAS of CUDA 12, `cudart64_110.dll`
the CUDA 11 runtime, `cufft64_11.dll` cuFFT 11 (CUDA 12), `nvrtc64_120_0.dll` NVRTC of CUDA 12, `cudnn_graph64_9.dll`
a cuDNN 9 sub-library. The wheel is the one whose `dlls` (the DLLs its win_amd64 build installs) name the DLL; a DLL
no row names (a newer sub-library) is looked up by the SONAME of the same library and major (`libcublasLt.so.12`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ortfix.check.windows_remedies import MSVC_REMEDY_MSG, MSVC_WHY_MSG, ZLIBWAPI_REMEDY, ZLIBWAPI_WHY
from ortfix.explain.context import AnalysisContext, installed_build
from ortfix.i18n import N_, Joined, Msg

if TYPE_CHECKING:
    from ortfix.compat.matrix import Matrix
    from ortfix.compat.model import WheelSpec

# <library>64_<major>.dll (cudnn_graph64_9.dll, cufft64_11.dll), and NVRTC/nvJitLink's <library>[64]_<MM>0_0.dll
_DLL = re.compile(r"^(?P<lib>[A-Za-z]+(?:_[a-z_]+?)?)(?:64)?_(?P<num>\d+)(?:_\d+)?\.dll$", re.IGNORECASE)
# The CUDA major that a cuFFT / NVRTC / cudart number belongs to.
_CUFFT_CUDA = {10: 11, 11: 12, 12: 13}
_DRIVER_DLLS = ("nvcuda.dll", "nvcudart_hybrid64.dll", "nvml.dll")
_LABELS = {"cudart": N_("the CUDA runtime"), "cublas": "cuBLAS", "cublaslt": "cuBLASLt", "cufft": "cuFFT",
           "curand": "cuRAND", "nvrtc": "NVRTC", "nvjitlink": "nvJitLink", "cudnn": "cuDNN"}


def dll_soname(dll: str) -> tuple[str, int | None, int | None] | None:
    """(the Linux SONAME of the same library, its CUDA major, its cuDNN major) for an NVIDIA CUDA/cuDNN DLL name;
    None for another DLL."""
    m = _DLL.match(dll)
    if m is None:
        return None
    lib, num = m.group("lib"), int(m.group("num"))
    key = lib.lower()
    if key.startswith("cudnn"):
        return f"lib{lib}.so.{num}", None, num
    if key == "cudart":
        major = num // 10 if num >= 100 else num
        return ("libcudart.so.11.0" if major == 11 else f"libcudart.so.{major}"), major, None
    if key in ("cublas", "cublaslt"):
        return f"lib{lib}.so.{num}", num, None
    if key == "cufft":
        return f"libcufft.so.{num}", _CUFFT_CUDA.get(num), None
    if key == "curand":
        return f"libcurand.so.{num}", None, None
    if key in ("nvrtc", "nvjitlink"):
        major = num // 10 if num >= 100 else num
        name = "nvJitLink" if key == "nvjitlink" else "nvrtc"
        return (f"lib{name}.so.11.2" if key == "nvrtc" and major == 11 else f"lib{name}.so.{major}"), major, None
    return None


def _wheels_for(matrix: Matrix, dll: str, soname: str, cuda: int | None,
                cudnn: int | None) -> list[tuple[int, WheelSpec]]:
    """The wheels that install `dll`, with their CUDA major: by the matrix's Windows DLL names (`dlls`), else by the
    SONAME of the same library and major."""
    found = [(major, w) for major, w in matrix.nvidia_wheels if dll.lower() in (d.lower() for d in w.dlls)]
    if not found and cudnn is not None:
        found = [(r.cuda_major, r.wheel) for r in matrix.cudnn if r.major == cudnn and soname in r.wheel.sonames]
    elif not found:
        found = [(major, w) for major, w in matrix.nvidia_wheels
                 if soname in w.sonames and (cuda is None or major == cuda)]
    return list({w.distribution: (major, w) for major, w in found}.values())


def _where(wheel: WheelSpec, cudnn: bool) -> str:
    # cuDNN's wheels (cu11, cu12, cu13 alike) install into nvidia\cudnn\bin on Windows (windows.md)
    folder = wheel.windows_dir or ("nvidia/cudnn/bin" if cudnn else None)
    return "site-packages\\" + folder.replace("/", "\\") if folder else "site-packages"


def about_dll(dll: str, matrix: Matrix | None) -> list[Msg]:
    """Sentences about one DLL: what it is, and the wheel that installs it."""
    low = dll.lower()
    if low.startswith(("msvcp140", "vcruntime140")):
        return [Msg(N_("{dll} is the Microsoft Visual C++ runtime: {why}; {remedy}."), dll=dll, why=MSVC_WHY_MSG,
                    remedy=MSVC_REMEDY_MSG)]
    if low == "zlibwapi.dll":
        return [Msg(N_("{why}; {remedy}."), why=Msg(ZLIBWAPI_WHY), remedy=Msg(ZLIBWAPI_REMEDY))]
    if low in _DRIVER_DLLS:
        return [Msg(N_("{dll} comes with the NVIDIA display driver (System32), never with a pip wheel: install or "
                       "repair the driver."), dll=dll)]
    parsed = dll_soname(dll)
    m = _DLL.match(dll)
    if parsed is None or m is None:
        return []
    soname, cuda, cudnn = parsed
    family = m.group("lib").lower()
    label = Msg(_LABELS.get(family, family))
    what = (Msg(N_("{dll} is part of cuDNN {major}"), dll=dll, major=cudnn) if cudnn is not None
            else Msg(N_("{dll} is {label} of CUDA {major}"), dll=dll, label=label, major=cuda) if cuda is not None
            else Msg(N_("{dll} is {label}"), dll=dll, label=label))
    wheels = _wheels_for(matrix, dll, soname, cuda, cudnn) if matrix is not None else []
    if not wheels:
        return [Msg(N_("{what}."), what=what)]
    return [Msg(N_("{what}: {shown}. That folder is not on PATH by itself, and onnxruntime finds the DLL only through "
                   "PATH (or after `onnxruntime.preload_dlls()`, or `import torch` of the same CUDA major)."),
                what=what, shown=_shown(wheels, cudnn is not None))]


def _shown(wheels: list[tuple[int, WheelSpec]], cudnn: bool) -> Msg:
    """Which wheels install the DLL, and into which folder."""
    if cudnn:
        names = Joined(N_(", "), [Msg(N_("{wheel} (for CUDA {major} builds)"), wheel=w.distribution, major=major)
                              for major, w in wheels])
        template = N_("{wheels} installs it into {folder}") if len(wheels) == 1 else N_(
            "{wheels} install it into {folder}")
        return Msg(template, wheels=names, folder=_where(wheels[0][1], True))
    return Joined(N_("; "), [Msg(N_("{wheel} installs it into {folder}"), wheel=w.distribution, folder=_where(w, False))
                         for _, w in wheels])


def about_majors(cuda: int, cudnn: int, matrix: Matrix | None) -> list[Msg]:
    """The wheels a build of these majors needs, for "Require cuDNN N.* and CUDA M.*"."""
    if matrix is None:
        return []
    row = matrix.cuda_major(cuda)
    names = [w.distribution for w in row.wheels] if row else []
    cudnn_row = matrix.cudnn_wheel(cudnn, cuda)
    if cudnn_row:
        names.append(cudnn_row.wheel.distribution)
    if not names:
        return []
    return [Msg(N_("This build needs the DLLs of CUDA {cuda} and cuDNN {cudnn}; the pip wheels of those majors are "
                   "{wheels} (`pip install onnxruntime-gpu[cuda,cudnn]` installs the ones it needs), each in a "
                   "site-packages\\nvidia folder that must be on PATH when the session is created."),
                cuda=cuda, cudnn=cudnn, wheels=Joined(N_(", "), names))]


def windows_dll(ctx: AnalysisContext) -> list[Msg]:
    """The analysis: the DLL a message names (group `dll`), or the majors it names (`cuda_major`, `cudnn_major`);
    with facts, the build installed here."""
    out: list[Msg] = []
    g = ctx.groups
    dll = g.get("dll")
    if dll and not dll.lower().startswith("onnxruntime_providers"):
        out += about_dll(dll.rsplit("\\", 1)[-1], ctx.matrix.get())
    if "cuda_major" in g and "cudnn_major" in g:
        out += about_majors(int(g["cuda_major"]), int(g["cudnn_major"]), ctx.matrix.get())
        if re.search(r"latest\s+MSVC\s+runtime", ctx.text, re.IGNORECASE):
            out.append(Msg(N_("On Windows it also means the C++ runtime: {why}; if the DLLs are all found, "
                              "{remedy}."), why=MSVC_WHY_MSG, remedy=MSVC_REMEDY_MSG))
    return out + installed_build(ctx.facts)
