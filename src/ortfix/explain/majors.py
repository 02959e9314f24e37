"""The `library-major` analysis of `ortfix explain`: which library family and major a SONAME or DLL in a message
means, in the wording of the OS the message came from. The number in a name is not always the major it belongs to:
libcufft.so.11 is CUDA 12's cuFFT, libcudart.so.11.0 the CUDA 11 runtime, libnvrtc.so.11.2 CUDA 11's NVRTC,
nvinfer_10.dll TensorRT 10, cudnn_engines_tensor_ir64_9.dll a cuDNN 9 sub-library that only 9.24 and later have
(JuliaPackaging/Yggdrasil#14741). With this machine's facts it adds which onnxruntime build is installed here."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ortfix.explain.context import AnalysisContext, installed_build
from ortfix.explain.windows_dlls import dll_soname
from ortfix.i18n import N_, Msg

if TYPE_CHECKING:
    from ortfix.explain.message_os import MessageOs

_TENSORRT = re.compile(r"^(?:lib)?nv(?P<part>infer(?:_plugin|_lean|_dispatch|_vc_plugin)?|onnxparser)"
                       r"(?:_(?P<dll>\d+)\.dll|\.so\.(?P<so>\d+))", re.IGNORECASE)
_CUDNN = re.compile(r"^(?:lib)?cudnn(?:_(?P<sub>\w+?))?(?:64_(?P<dll>\d+)\.dll|\.so\.(?P<so>\d+))", re.IGNORECASE)
_CUDA_SO = re.compile(r"^lib(?P<lib>cudart|cublasLt|cublas|cufft|curand|nvrtc|nvJitLink)\.so\.(?P<num>\d+)",
                      re.IGNORECASE)
_DRIVER = re.compile(r"^(?:libcuda\.so(?:\.1)?|libnvidia-ml\.so\.1|nvcuda\.dll|nvml\.dll)$", re.IGNORECASE)
# cuFFT's SONAME number is one below the CUDA major it ships with; cuRAND 10 ships with CUDA 11 and 12.
_CUFFT_CUDA = {10: "11", 11: "12", 12: "13"}
_LABELS = {"cudart": N_("the CUDA runtime"), "cublas": "cuBLAS", "cublaslt": "cuBLASLt", "cufft": "cuFFT",
           "curand": "cuRAND", "nvrtc": "NVRTC", "nvjitlink": "nvJitLink"}
# cuDNN 9 sub-libraries that later 9.x releases added (the rest exist from 9.0)
_CUDNN9_ADDED = {"engines_tensor_ir": "9.24", "ext": "9.24"}


def _tensorrt(name: str, os: MessageOs | None) -> list[Msg]:
    m = _TENSORRT.match(name)
    if m is None:
        return []
    major = m.group("dll") or m.group("so")
    where = (N_("its lib folder must be on PATH (pip's tensorrt wheels put the DLLs in site-packages\\tensorrt_libs)")
             if os == "windows" or m.group("dll") else
             N_("its lib folder (pip's `tensorrt_libs`, or NVIDIA's tarball) must be on the loader path "
                "(LD_LIBRARY_PATH)"))
    return [Msg(N_("{name} is part of TensorRT {major}: the TensorRT provider was built against TensorRT {major} and "
                   "loads only that major (onnxruntime-gpu up to 1.17 uses TensorRT 8, 1.18 and later TensorRT 10); "
                   "{where}. It is the TensorRT provider's dependency, not the CUDA provider's: without it only "
                   "TensorRT is skipped."), name=name, major=major, where=Msg(where))]


def _cudnn(name: str) -> list[Msg]:
    m = _CUDNN.match(name)
    if m is None:
        return []
    major = m.group("dll") or m.group("so")
    sub = (m.group("sub") or "").lower()
    out = [Msg(N_("{name} is part of cuDNN {major} (its {sub} sub-library)."), name=name, major=major, sub=sub) if sub
           else Msg(N_("{name} is part of cuDNN {major}."), name=name, major=major)]
    if major == "9" and sub in _CUDNN9_ADDED:
        out.append(Msg(N_("cuDNN added this sub-library in {since}: the cuDNN that asks for it is {since} or newer, so "
                          "the folder it loads from must hold the complete, same cuDNN {since}+ set (an older cuDNN 9 "
                          "copy or a program that ships only part of cuDNN has no such file)."),
                       since=_CUDNN9_ADDED[sub]))
    return out


def _cuda(name: str) -> list[Msg]:
    m = _CUDA_SO.match(name)
    if m is not None:
        lib, num = m.group("lib").lower(), int(m.group("num"))
        cuda: str | Msg | None = (_CUFFT_CUDA.get(num) if lib == "cufft" else Msg(N_("11 and 12"))
                                  if lib == "curand" and num == 10 else str(num))
    else:
        parsed = dll_soname(name)
        if parsed is None or parsed[1] is None:
            return []
        lib = re.sub(r"(?:64)?_\d+.*$", "", name).lower()
        cuda = str(parsed[1])
    if cuda is None:
        return []
    return [Msg(N_("{name} is {label} of CUDA {cuda}: whatever asks for it (here the onnxruntime build) was compiled "
                   "against CUDA {cuda} and needs that major's library; one of another CUDA major does not replace "
                   "it."), name=name, label=Msg(_LABELS.get(lib, lib)), cuda=cuda)]


def about_library(name: str, os: MessageOs | None) -> list[Msg]:
    """Sentences on what a SONAME or DLL is: its family and the major its number means."""
    base = re.split(r"[\\/]", name)[-1]
    if _DRIVER.match(base):
        return [Msg(N_("{name} belongs to the NVIDIA driver, not to CUDA, cuDNN or any pip wheel."), name=base)]
    return _tensorrt(base, os) or _cudnn(base) or _cuda(base)


def library_major(ctx: AnalysisContext) -> list[Msg]:
    """The analysis: the library a message names (group `soname`, `dll` or `plugin`), and the build here."""
    g = ctx.groups
    name = g.get("dll") or g.get("plugin") or g.get("soname")
    return (about_library(name, ctx.os) if name else []) + installed_build(ctx.facts)
