"""Every copy of every CUDA/cuDNN/TensorRT library that matters for the target: NVIDIA pip wheels, torch's bundled
libraries, the conda prefix, CUDA_HOME/CUDA_PATH, /usr/local/cuda*, the ldconfig cache and LD_LIBRARY_PATH."""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

from ortfix.compat.matrix import Matrix
from ortfix.system.linux.elf import NotElf, cudnn_version_mark
from ortfix.system.linux.elfcache import ElfReader
from ortfix.system.linux.ldcache import LdCache
from ortfix.target.probe import ProbeFacts

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


@dataclass(frozen=True)
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


def _wheel_majors(probe: ProbeFacts, matrix: Matrix) -> dict[str, set[int]]:
    """Folder of an installed NVIDIA wheel → the CUDA majors of the wheels installed there (nvidia-cudnn-cu12 and
    nvidia-cudnn-cu13 both install into nvidia/cudnn/lib; nvidia-curand-cu11 and -cu12 into nvidia/curand/lib)."""
    out: dict[str, set[int]] = {}
    wheels = matrix.nvidia_wheels
    for dist in probe.distributions:
        for major, wheel in wheels:
            if dist.normalized == wheel.distribution:
                out.setdefault(os.path.realpath(os.path.join(dist.location, wheel.dir)), set()).add(major)
    return out


def cuda_major_of(copy: LibCopy, reader: ElfReader, wheel_majors: dict[str, set[int]]) -> int | None:
    """The CUDA major a copy was built for: its SONAME (libcudart.so.12), else the CUDA libraries it NEEDs
    (libcurand.so.10 of CUDA 13 NEEDs libcudart.so.13), else the NVIDIA wheel installed in its folder."""
    by_name = cuda_major_by_name(copy.soname or copy.name)
    if by_name is not None:
        return by_name
    if not copy.family.startswith(("cudnn", "nvinfer", "nvonnxparser")):
        try:
            needed = reader.read(os.path.realpath(copy.path)).needed
        except (NotElf, OSError):
            needed = ()
        for name in needed:
            major = cuda_major_by_name(name)
            if major is not None:
                return major
    majors = wheel_majors.get(os.path.realpath(copy.directory), set())
    return next(iter(majors)) if len(majors) == 1 else None


def candidate_dirs(probe: ProbeFacts, cache: LdCache) -> list[tuple[str, str]]:
    """(directory, origin) pairs to scan, environment first."""
    dirs: list[tuple[str, str]] = []
    for sp in dict.fromkeys((*probe.site_packages, probe.purelib, probe.platlib)):
        nvidia = os.path.join(sp, "nvidia")
        if os.path.isdir(nvidia):
            for sub in sorted(os.listdir(nvidia)):
                for leaf in ("lib", "lib64"):
                    d = os.path.join(nvidia, sub, leaf)
                    if os.path.isdir(d):
                        dirs.append((d, ORIGIN_WHEEL))
        trt = os.path.join(sp, "tensorrt_libs")  # where tensorrt-cuNN-libs puts libnvinfer.so.N
        if os.path.isdir(trt):
            dirs.append((trt, ORIGIN_WHEEL))
    if probe.torch:
        dirs.append((probe.torch.lib_dir, ORIGIN_TORCH))
    if probe.env_kind == "conda":
        dirs.append((os.path.join(probe.prefix, "lib"), ORIGIN_CONDA))
    for var in ("CUDA_HOME", "CUDA_PATH"):
        home = probe.environ.get(var)
        if home:
            dirs += [(os.path.join(home, leaf), ORIGIN_CUDA_HOME) for leaf in ("lib64", "lib")]
    for toolkit in sorted(glob.glob("/usr/local/cuda*")):
        dirs += [(os.path.join(toolkit, leaf), ORIGIN_TOOLKIT) for leaf in ("lib64", "lib")]
        dirs += [(d, ORIGIN_TOOLKIT) for d in sorted(glob.glob(os.path.join(toolkit, "targets", "*", "lib")))]
    for entry in (probe.environ.get("LD_LIBRARY_PATH") or "").split(":"):
        if entry:
            dirs.append((entry, ORIGIN_ENV))
    for name in cache.names():
        if parse_lib_name(name):
            path = cache.lookup(name)
            if path:
                dirs.append((os.path.dirname(path), ORIGIN_CACHE))
    seen: set[str] = set()
    out = []
    for d, origin in dirs:
        real = os.path.realpath(d)
        if real in seen or not os.path.isdir(real):
            continue
        seen.add(real)
        out.append((d, origin))
    return out


def scan(probe: ProbeFacts, cache: LdCache, reader: ElfReader, matrix: Matrix) -> list[LibCopy]:
    prefix = os.path.realpath(probe.prefix) + os.sep
    copies: list[LibCopy] = []
    for directory, origin in candidate_dirs(probe, cache):
        copies.extend(_scan_dir(directory, origin, prefix, reader))
    wheel_majors = _wheel_majors(probe, matrix)
    wheel_versions = _wheel_versions(probe, matrix)
    return [replace(c, cuda_major=cuda_major_of(c, reader, wheel_majors), version=full_version(c, wheel_versions))
            for c in copies]


def _wheel_versions(probe: ProbeFacts, matrix: Matrix) -> dict[str, set[str]]:
    """Folder of an installed NVIDIA wheel → the versions of the wheels installed there."""
    out: dict[str, set[str]] = {}
    for dist in probe.distributions:
        for _major, wheel in matrix.nvidia_wheels:
            if dist.normalized == wheel.distribution and dist.installed_version:
                out.setdefault(os.path.realpath(os.path.join(dist.location, wheel.dir)), set()).add(
                    dist.installed_version)
    return out


def full_version(copy: LibCopy, wheel_versions: dict[str, set[str]]) -> str | None:
    """The copy's full version (see LibCopy.version); what its name says when nothing says more."""
    if copy.version and copy.version.count(".") >= 2:
        return copy.version
    versions = wheel_versions.get(os.path.realpath(copy.directory), set())
    if len(versions) == 1:
        return next(iter(versions))
    if copy.family.startswith("cudnn") and copy.major is not None:
        # cuDNN 9's libcudnn.so.9 is a shim that records no version; its libcudnn_graph beside it does
        for name in dict.fromkeys((copy.name, f"libcudnn_graph.so.{copy.major}")):
            mark = cudnn_version_mark(os.path.join(copy.directory, name))
            if mark and mark.split(".")[0] == str(copy.major):
                return mark
    return copy.version


def _scan_dir(directory: str, origin: str, prefix: str, reader: ElfReader) -> Iterable[LibCopy]:
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    inside = (os.path.realpath(directory) + os.sep).startswith(prefix)
    out = []
    for name in names:
        parsed = parse_lib_name(name)
        if parsed is None:
            continue
        family, version = parsed
        if not version:
            continue  # the unversioned libfoo.so is a link-time name; the loader never asks for it
        path = os.path.join(directory, name)
        real = os.path.realpath(path)
        if not os.path.isfile(real):
            continue  # a dangling link
        # A name with one or two version parts is a SONAME (libcudnn.so.9, libcudart.so.11.0); only fully
        # versioned files (libcudnn_cnn_train.so.8.9.2) need their ELF read, to learn the SONAME they should have.
        soname = name if len(version) <= 2 else _read_soname(real, reader)
        real_parsed = parse_lib_name(os.path.basename(real))
        full = ".".join(map(str, real_parsed[1])) if real_parsed and real_parsed[1] else None
        out.append(LibCopy(path=path, family=family, soname=soname,
                           major=soname_major(soname) if soname else version[0], version=full,
                           origin=origin, inside_env=inside))
    return out


def _read_soname(path: str, reader: ElfReader) -> str | None:
    try:
        return reader.read(path).soname
    except (NotElf, OSError):
        return None
