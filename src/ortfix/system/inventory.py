"""A copy of a CUDA/cuDNN/TensorRT library as `check` reports it on any OS (`LibCopy`, with where it came from), and
the SONAME naming rules (lib<family>.so.<version>) and what a SONAME says about the CUDA major. The Linux scan of every
copy that matters for the target is system/linux/inventory.py; Windows' is system/windows/platform.py."""

from __future__ import annotations

import os
import re

from ortfix.record import frozen

# lib<family>.so[.<version>]: the families ORT's CUDA and TensorRT providers use.
_LIB = re.compile(
    r"^lib(?P<family>cudart|cublas|cublasLt|cufft|curand|cusparse|cusolver|nvrtc|nvrtc-builtins|nvJitLink|cuda"
    r"|cudnn(?:_[a-z_]+)?|nvinfer(?:_plugin)?|nvonnxparser)\.so(?P<version>(?:\.\d+)*)$"
)

ORIGIN_WHEEL = "nvidia pip wheel"
ORIGIN_TORCH = "torch"
ORIGIN_CONDA = "conda prefix"
ORIGIN_CUDA_HOME = "CUDA_HOME/CUDA_PATH"
ORIGIN_TOOLKIT = "CUDA toolkit"
ORIGIN_CACHE = "ld.so.cache"
ORIGIN_ENV = "LD_LIBRARY_PATH"


@frozen
class LibCopy:
    path: str  # as found: a SONAME link or the versioned file itself
    family: str  # 'cudnn', 'cublasLt', 'cudnn_cnn_train'...
    soname: str | None  # DT_SONAME of the file (None: not an ELF file, or none recorded)
    major: int | None  # from the SONAME (libcudnn.so.9 → 9; libcudart.so.11.0 → 11)
    # The full version: from the real file's name (libcudnn.so.8.9.2 → 8.9.2), else, for a file named by its SONAME
    # only, the version of the NVIDIA wheel installed in its folder (nvidia-cudnn-cu12 9.28.0.42), else, for cuDNN,
    # the version it records (elf.cudnn_version_mark: 9.1.0.70); else what the name has (libcudnn.so.9 → 9).
    version: str | None
    origin: str
    inside_env: bool  # under the target environment's prefix
    # The CUDA major the copy was built for (see cuda_major_of); None when nothing tells.
    cuda_major: int | None = None

    @property
    def name(self) -> str:
        return os.path.basename(self.path)

    @property
    def directory(self) -> str:
        return os.path.dirname(self.path)


def parse_lib_name(name: str) -> tuple[str, tuple[int, ...]] | None:
    m = _LIB.match(name)
    if not m:
        return None
    version = tuple(int(p) for p in m.group("version").split(".") if p)
    return m.group("family"), version


def soname_major(soname: str) -> int | None:
    parsed = parse_lib_name(soname)
    if parsed and parsed[1]:
        return parsed[1][0]
    return None


# Families whose SONAME major names the CUDA major: libcudart.so.12 is CUDA 12; cuFFT is one ahead (libcufft.so.11
# ships with CUDA 12). libcurand.so.10, cuSPARSE, cuSOLVER and cuDNN do not tell: their ELF or their wheel must.
_CUDA_MAJOR_BY_SONAME = {"cudart": 0, "cublas": 0, "cublasLt": 0, "nvrtc": 0, "nvJitLink": 0, "cufft": 1}


# The file-name prefixes of those families ("libcudart.so."): what to look for in a process's mapped files.
CUDA_MAJOR_FILES = tuple(f"lib{family}.so." for family in _CUDA_MAJOR_BY_SONAME)


def cuda_major_by_name(soname: str) -> int | None:
    """The CUDA major a library's SONAME (or fully versioned file name) alone says (libcudart.so.12 → 12,
    libcudart.so.12.9.79 → 12, libcufft.so.12 → 13), else None."""
    parsed = parse_lib_name(soname)
    if not parsed or not parsed[1] or parsed[0] not in _CUDA_MAJOR_BY_SONAME:
        return None
    return parsed[1][0] + _CUDA_MAJOR_BY_SONAME[parsed[0]]
