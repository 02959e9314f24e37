"""Every copy of every CUDA/cuDNN/TensorRT library that matters for the target: NVIDIA pip wheels, torch's bundled
libraries, the conda prefix, CUDA_HOME/CUDA_PATH, /usr/local/cuda*, the ldconfig cache and LD_LIBRARY_PATH."""

from __future__ import annotations

import os
from collections.abc import Iterable

from ortfix.compat.addons import TENSORRT_WHEEL_DIR
from ortfix.compat.matrix import Matrix
from ortfix.record import replace
from ortfix.system.inventory import (
    ORIGIN_CACHE,
    ORIGIN_CONDA,
    ORIGIN_CUDA_HOME,
    ORIGIN_ENV,
    ORIGIN_TOOLKIT,
    ORIGIN_TORCH,
    ORIGIN_WHEEL,
    LibCopy,
    cuda_major_by_name,
    parse_lib_name,
    soname_major,
)
from ortfix.system.linux.elf import NotElf, cudnn_version_mark
from ortfix.system.linux.elfcache import ElfReader
from ortfix.system.linux.ldcache import LdCache
from ortfix.system.pathrules import within
from ortfix.system.resolved import realpath
from ortfix.target.probe import ProbeFacts


def _names(folder: str) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []


def toolkits(root: str = "/usr/local") -> list[str]:
    """sorted(glob.glob(root + "/cuda*")), without importing glob (its patterns and fnmatch's: 5M instructions on
    the way of every check): the entries of `root` whose name starts with "cuda", whatever they are."""
    return sorted(os.path.join(root, name) for name in _names(root) if name.startswith("cuda"))


def target_lib_dirs(toolkit: str) -> list[str]:
    """sorted(glob.glob(toolkit + "/targets/*/lib")), `toolkit` taken as it is (glob would read a `[` in its name as
    a pattern): the `lib` entry (a broken link too, as glob's lexists) of every folder (or link to one) in `targets`
    whose name does not start with "."."""
    targets = os.path.join(toolkit, "targets")
    folders = [os.path.join(targets, name) for name in _names(targets) if not name.startswith(".")]
    libs = [os.path.join(f, "lib") for f in folders if os.path.isdir(f)]
    return sorted(lib for lib in libs if os.path.lexists(lib))


def _wheel_majors(probe: ProbeFacts, matrix: Matrix) -> dict[str, set[int]]:
    """Folder of an installed NVIDIA wheel → the CUDA majors of the wheels installed there (nvidia-cudnn-cu12 and
    nvidia-cudnn-cu13 both install into nvidia/cudnn/lib; nvidia-curand-cu11 and -cu12 into nvidia/curand/lib)."""
    out: dict[str, set[int]] = {}
    wheels = matrix.nvidia_wheels
    for dist in probe.distributions:
        for major, wheel in wheels:
            if dist.normalized == wheel.distribution:
                out.setdefault(realpath(os.path.join(dist.location, wheel.dir)), set()).add(major)
    return out


def cuda_major_of(copy: LibCopy, reader: ElfReader, wheel_majors: dict[str, set[int]]) -> int | None:
    """The CUDA major a copy was built for: its SONAME (libcudart.so.12), else the CUDA libraries it NEEDs
    (libcurand.so.10 of CUDA 13 NEEDs libcudart.so.13), else the NVIDIA wheel installed in its folder."""
    by_name = cuda_major_by_name(copy.soname or copy.name)
    if by_name is not None:
        return by_name
    if not copy.family.startswith(("cudnn", "nvinfer", "nvonnxparser")):
        try:
            needed = reader.read(realpath(copy.path)).needed
        except (NotElf, OSError):
            needed = ()
        for name in needed:
            major = cuda_major_by_name(name)
            if major is not None:
                return major
    majors = wheel_majors.get(realpath(copy.directory), set())
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
        trt = os.path.join(sp, TENSORRT_WHEEL_DIR)  # where tensorrt-cuNN-libs puts libnvinfer.so.N
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
    for toolkit in toolkits():
        dirs += [(os.path.join(toolkit, leaf), ORIGIN_TOOLKIT) for leaf in ("lib64", "lib")]
        dirs += [(d, ORIGIN_TOOLKIT) for d in target_lib_dirs(toolkit)]
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
        real = realpath(d)
        if real in seen or not os.path.isdir(real):
            continue
        seen.add(real)
        out.append((d, origin))
    return out


def scan(probe: ProbeFacts, cache: LdCache, reader: ElfReader, matrix: Matrix) -> list[LibCopy]:
    prefix = realpath(probe.prefix)
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
                out.setdefault(realpath(os.path.join(dist.location, wheel.dir)), set()).add(
                    dist.installed_version)
    return out


def full_version(copy: LibCopy, wheel_versions: dict[str, set[str]]) -> str | None:
    """The copy's full version (see LibCopy.version); what its name says when nothing says more."""
    if copy.version and copy.version.count(".") >= 2:
        return copy.version
    versions = wheel_versions.get(realpath(copy.directory), set())
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
    inside = within(realpath(directory), prefix, windows=False)  # prefix: resolved
    out = []
    for name in names:
        parsed = parse_lib_name(name)
        if parsed is None:
            continue
        family, version = parsed
        if not version:
            continue  # the unversioned libfoo.so is a link-time name; the loader never asks for it
        path = os.path.join(directory, name)
        real = realpath(path)
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
