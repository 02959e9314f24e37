"""Hermetic, real test fixtures for ortfix: gcc-built ELF libraries, real wheels, real venvs, the real loader.

Nothing here is a mock. Libraries are compiled by gcc and carry exactly the dynamic-section entries a test asks for;
wheels are valid zip files that the real pip installs; venvs come from `python -m venv`; and `ld_so_list` asks
glibc's own ld.so what it would load, so it can serve as the oracle for ortfix's loader simulation.

Facts mirrored from the real wheels (onnxruntime-gpu 1.22.0 and the NVIDIA CUDA 12 wheels, checked with readelf):
  * the CUDA provider has no SONAME and no RUNPATH; its CUDA NEEDED entries are, in order, those in
    CU12_PROVIDER_NEEDED; the pybind extension and libonnxruntime.so.1.22.0 have RUNPATH $ORIGIN;
  * NVIDIA 12.4-era wheels ship nvidia/__init__.py, nvidia/<name>/__init__.py and nvidia/<name>/lib/__init__.py
    (newer ones such as nvidia-cuda-runtime-cu12 12.9.79 ship none: namespace packages; see `namespace=`);
  * most NVIDIA libraries have RUNPATH $ORIGIN, but libcudart.so.12 and libnvrtc-builtins have none, and cuDNN 9's
    sub-libraries have $ORIGIN:$ORIGIN/../../cublas/lib:$ORIGIN/../../nvrtc/lib (sic: "nvrtc", not "cuda_nvrtc");
  * libcublas.so.12 NEEDs libcublasLt.so.12; cuDNN's sub-libraries NEED libcudnn_graph.so.9 (and _ops), while
    libcudnn.so.9 itself NEEDs no CUDA library (it dlopens the rest).
System libraries (libc, libstdc++, libz...) are left out of the stubs' NEEDED lists on purpose: every stub is linked
with -nostdlib, so its NEEDED list is exactly what the caller asked for.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import importlib
import io
import json
import os
import platform
import re
import shutil
import stat
import struct
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from support.testcache import cache_root

__all__ = [
    "CU12_PROVIDER_NEEDED",
    "NVIDIA_CU12",
    "ORT_122_EXTRAS",
    "TENSORRT_PROVIDER_NEEDED",
    "NvidiaWheelSpec",
    "PipError",
    "build_stub_lib",
    "build_wheel",
    "fake_nvidia_wheel",
    "fake_ort_cpu_wheel",
    "fake_ort_gpu_wheel",
    "ld_so_list",
    "make_venv",
    "nvidia_cu12_set",
    "pip_install",
    "system_loader",
]

# The CUDA NEEDED entries of the real onnxruntime-gpu 1.22.0 libonnxruntime_providers_cuda.so, in file order.
CU12_PROVIDER_NEEDED: tuple[str, ...] = (
    "libcublasLt.so.12",
    "libcublas.so.12",
    "libcurand.so.10",
    "libcufft.so.11",
    "libcudart.so.12",
    "libcudnn.so.9",
    "libnvrtc.so.12",
)

# The non-system NEEDED entries of the real 1.22.0 libonnxruntime_providers_tensorrt.so, in file order.
TENSORRT_PROVIDER_NEEDED: tuple[str, ...] = (
    "libcublas.so.12",
    "libnvinfer.so.10",
    "libnvinfer_plugin.so.10",
    "libnvonnxparser.so.10",
    "libcudart.so.12",
    "libcudnn.so.9",
)

# The extras of the real onnxruntime-gpu 1.22.0 METADATA. Note that [cuda] has no cuBLAS: it arrives through
# nvidia-cudnn-cu12's own requirement.
ORT_122_EXTRAS: Mapping[str, tuple[str, ...]] = {
    "cuda": (
        "nvidia-cuda-nvrtc-cu12~=12.0",
        "nvidia-cuda-runtime-cu12~=12.0",
        "nvidia-cufft-cu12~=11.0",
        "nvidia-curand-cu12~=10.0",
    ),
    "cudnn": ("nvidia-cudnn-cu12~=9.0",),
}

ORIGIN: tuple[str, ...] = ("$ORIGIN",)
_CUDNN9_SUB_RUNPATH: tuple[str, ...] = ("$ORIGIN", "$ORIGIN/../../cublas/lib", "$ORIGIN/../../nvrtc/lib")


# --------------------------------------------------------------------------------------------------------------------
# ELF stubs
# --------------------------------------------------------------------------------------------------------------------

# Bump when the way stubs are built changes, so old cache entries are never reused.
_STUB_SCHEMA = 1
_STUB_SOURCE = """\
/* ortfix test stub: a real shared library that exports one function and one marker string. */
int {symbol}(void) {{ return 0; }}
const char {symbol}_marker[] = "{marker}";
"""



@cache
def _gcc() -> tuple[str, str]:
    """gcc's path and full version: the version is part of every cache key."""
    gcc = shutil.which("gcc")
    if gcc is None:
        raise RuntimeError("gcc is needed to build the test libraries and is not on PATH")
    version = subprocess.run([gcc, "-dumpfullversion", "-dumpversion"], capture_output=True, text=True,
                             check=True).stdout.strip()
    return gcc, version


def _c_identifier(text: str) -> str:
    return "ortfix_stub_" + re.sub(r"[^A-Za-z0-9_]", "_", text)


def _c_string(text: str) -> str:
    # The marker only makes the bytes unique; keep it to characters that need no escaping in C.
    return re.sub(r"[^A-Za-z0-9 ._+=:/-]", "_", text)


def _check_path_list(kind: str, entries: Sequence[str] | None) -> tuple[str, ...] | None:
    if entries is None or isinstance(entries, str):
        if isinstance(entries, str):
            raise TypeError(f"{kind} takes a sequence of directories, not a string")
        return None
    for entry in entries:
        if ":" in entry or "\0" in entry:
            raise ValueError(f"{kind} entry {entry!r} cannot hold ':' (it separates the entries)")
    return tuple(entries) or None


def _compile_cached(*, soname: str | None, needed: tuple[str, ...], runpath: tuple[str, ...] | None,
                    rpath: tuple[str, ...] | None, machine_32bit: bool, symbol: str, marker: str) -> Path:
    """Build the library once per distinct set of arguments; later calls get the cached file."""
    gcc, gcc_version = _gcc()
    source = _STUB_SOURCE.format(symbol=symbol, marker=marker)
    key = json.dumps({"schema": _STUB_SCHEMA, "gcc": gcc_version, "source": source, "soname": soname,
                      "needed": needed, "runpath": runpath, "rpath": rpath, "m32": machine_32bit}, sort_keys=True)
    cache = cache_root() / "stubs"
    cached = cache / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.so"
    if cached.is_file():
        return cached
    # Each NEEDED entry comes from linking against a throwaway library whose SONAME is that name: the linker
    # records the SONAME, not the file name. They are cached like any other stub.
    inputs = [str(_compile_cached(soname=name, needed=(), runpath=None, rpath=None, machine_32bit=machine_32bit,
                                  symbol=_c_identifier(name), marker=name)) for name in needed]
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        src = Path(tmp) / "stub.c"
        src.write_text(source)
        out = Path(tmp) / "stub.so"
        # -nostdlib: no crt files, no libc, no libgcc, so DT_NEEDED is exactly `needed` (without it gcc adds
        # libc.so.6 as soon as --no-as-needed is in force). The stubs have no relocations that need libc, so they
        # still load with ld.so and dlopen. Linker options go through -Xlinker, one argv item each: a ',' or a
        # literal $ORIGIN survives untouched, and no shell ever sees them.
        argv = [gcc, *(["-m32"] if machine_32bit else []), "-shared", "-fPIC", "-nostdlib", "-O0", "-o", str(out),
                str(src), "-Xlinker", "--no-as-needed", *inputs]
        if soname is not None:
            argv += ["-Xlinker", "-soname", "-Xlinker", soname]
        if runpath is not None:
            argv += ["-Xlinker", "--enable-new-dtags", "-Xlinker", "-rpath", "-Xlinker", ":".join(runpath)]
        if rpath is not None:
            argv += ["-Xlinker", "--disable-new-dtags", "-Xlinker", "-rpath", "-Xlinker", ":".join(rpath)]
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            what = "gcc -m32 cannot build 32-bit libraries on this machine" if machine_32bit else "gcc failed"
            raise RuntimeError(f"{what}: {' '.join(argv)}\n{proc.stderr.strip()}")
        # Publish atomically: parallel test workers may build the same stub.
        os.replace(out, cached)
    return cached


def _install_file(source: Path, target: Path, mode: int) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    shutil.copyfile(source, tmp)
    tmp.chmod(mode)
    os.replace(tmp, target)  # replaces a symlink at `target` rather than writing through it


def build_stub_lib(path: Path, *, soname: str | None, needed: Sequence[str] = (),
                   runpath: Sequence[str] | None = None, rpath: Sequence[str] | None = None,
                   machine_32bit: bool = False, marker: str | None = None) -> Path:
    """Compile a real shared library at `path` with gcc and return `path`.

    DT_SONAME is `soname` (none if None); DT_NEEDED is exactly `needed`, in order (built with -nostdlib, so gcc adds
    nothing: no libc.so.6); DT_RUNPATH is `runpath` or DT_RPATH is `rpath`, joined with ':' and kept literally
    ("$ORIGIN" included). An empty sequence means no such tag. The library exports one function named after the
    SONAME (or the file name) and embeds `marker`, so two stubs that should differ on disk can be made to.
    `machine_32bit` builds an ELFCLASS32 (i386) object with gcc -m32, or raises RuntimeError where that fails.
    Outputs are cached by argument hash under $ORTFIX_TEST_CACHE (default: a folder in the system temp dir).
    """
    run = _check_path_list("runpath", runpath)
    rp = _check_path_list("rpath", rpath)
    if run is not None and rp is not None:
        raise ValueError("give runpath (DT_RUNPATH) or rpath (DT_RPATH), not both: ld writes only one of them")
    if isinstance(needed, str):
        raise TypeError("needed takes a sequence of SONAMEs, not a string")
    if len(set(needed)) != len(needed):
        raise ValueError(f"duplicate NEEDED entries in {list(needed)}")
    name = soname if soname is not None else path.name
    cached = _compile_cached(soname=soname, needed=tuple(needed), runpath=run, rpath=rp,
                             machine_32bit=machine_32bit, symbol=_c_identifier(name),
                             marker=_c_string(marker if marker is not None else name))
    _install_file(cached, path, 0o755)
    return path


# --------------------------------------------------------------------------------------------------------------------
# Wheels
# --------------------------------------------------------------------------------------------------------------------

_ZIP_DATE = (2024, 1, 1, 0, 0, 0)  # fixed, so equal inputs give byte-identical wheels


def _normalize_dist(name: str) -> str:
    """The distribution part of a wheel file name and of its .dist-info folder (PEP 503 name, '-' -> '_')."""
    return re.sub(r"[-_.]+", "_", name).lower()


def _packaging_module(name: str) -> Any:
    """packaging.<name>, or pip's vendored copy when packaging is not installed (pip always is)."""
    for prefix in ("packaging", "pip._vendor.packaging"):
        try:
            return importlib.import_module(f"{prefix}.{name}")
        except ImportError:
            continue
    return None


def _normalize_version(version: str) -> str:
    versions = _packaging_module("version")
    if versions is not None:
        version = str(versions.Version(version))
    return version.replace("-", "_")


def _is_shared_object(name: str) -> bool:
    return re.search(r"\.so(\.[0-9.]+)?$", name.rsplit("/", 1)[-1]) is not None


def _expand_tag(tag: str) -> Iterator[str]:
    interpreters, abis, platforms = tag.split("-")
    for i in interpreters.split("."):
        for a in abis.split("."):
            for p in platforms.split("."):
                yield f"{i}-{a}-{p}"


def _with_extra(requirement: str, extra: str) -> str:
    spec, sep, marker = requirement.partition(";")
    if sep:
        return f'{spec.strip()}; ({marker.strip()}) and extra == "{extra}"'
    return f'{spec.strip()}; extra == "{extra}"'


def _top_level(paths: Sequence[str]) -> list[str]:
    names: set[str] = set()
    for p in paths:
        first = p.split("/", 1)[0]
        if first.endswith((".dist-info", ".data")):
            continue
        if "/" in p:
            names.add(first)
        elif first.endswith(".py"):
            names.add(first[: -len(".py")])
    return sorted(names)


def build_wheel(out_dir: Path, name: str, version: str, files: Mapping[str, bytes | Path], *,
                requires: Sequence[str] = (), extras: Mapping[str, Sequence[str]] | None = None,
                tag: str = "py3-none-any", requires_python: str | None = None,
                root_is_purelib: bool | None = None) -> Path:
    """Write a real, installable wheel into `out_dir` and return its path.

    `files` maps archive paths to contents (bytes, or a Path read from disk keeping its mode). Shared objects get
    mode 0o755. METADATA is 2.1 with Requires-Dist, Provides-Extra and `extra == "x"` markers; WHEEL says
    Root-Is-Purelib false for any tag but py3-none-any unless `root_is_purelib` says otherwise (the real NVIDIA
    wheels are purelib with a platform tag); RECORD holds sha256 hashes and sizes, its own row without them.
    """
    dist = _normalize_dist(name)
    ver = _normalize_version(version)
    dist_info = f"{dist}-{ver}.dist-info"
    if root_is_purelib is None:
        root_is_purelib = tag == "py3-none-any"

    entries: dict[str, tuple[bytes, int]] = {}
    for arcname, content in files.items():
        if arcname.startswith("/") or "\\" in arcname or ".." in arcname.split("/"):
            raise ValueError(f"bad archive path {arcname!r}")
        if isinstance(content, Path):
            data = content.read_bytes()
            mode = stat.S_IMODE(content.stat().st_mode) | 0o644
        else:
            data = bytes(content)
            mode = 0o644
        if _is_shared_object(arcname):
            mode |= 0o755  # pip keeps the executable bits from external_attr; loaders want readable objects
        entries[arcname] = (data, mode)

    metadata = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}",
                f"Summary: ortfix test fixture standing in for {name}"]
    if requires_python is not None:
        metadata.append(f"Requires-Python: {requires_python}")
    metadata += [f"Requires-Dist: {r}" for r in requires]
    for extra, reqs in (extras or {}).items():
        metadata.append(f"Provides-Extra: {extra}")
        metadata += [f"Requires-Dist: {_with_extra(r, extra)}" for r in reqs]
    entries.setdefault(f"{dist_info}/METADATA", ("\n".join(metadata).encode() + b"\n\n", 0o644))
    wheel = ["Wheel-Version: 1.0", "Generator: ortfix-test-fixtures (1)",
             f"Root-Is-Purelib: {'true' if root_is_purelib else 'false'}"]
    wheel += [f"Tag: {t}" for t in _expand_tag(tag)]
    entries.setdefault(f"{dist_info}/WHEEL", ("\n".join(wheel).encode() + b"\n\n", 0o644))
    top = _top_level(list(entries))
    if top:
        entries.setdefault(f"{dist_info}/top_level.txt", ("\n".join(top).encode() + b"\n", 0o644))

    record_name = f"{dist_info}/RECORD"
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    # Package files first, then .dist-info, RECORD last: the order bdist_wheel uses.
    ordered = sorted(entries, key=lambda p: (p.startswith(dist_info + "/"), p))
    for arcname in ordered:
        data = entries[arcname][0]
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        writer.writerow([arcname, f"sha256={digest}", len(data)])
    writer.writerow([record_name, "", ""])
    entries[record_name] = (record.getvalue().encode(), 0o644)
    ordered.append(record_name)

    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{dist}-{ver}-{tag}.whl"
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for arcname in ordered:
            data, mode = entries[arcname]
            info = zipfile.ZipInfo(arcname, date_time=_ZIP_DATE)
            info.external_attr = (stat.S_IFREG | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    os.replace(tmp, target)
    return target


def _tag_accepted(tag: str) -> bool | None:
    """Whether this interpreter's pip would install a wheel with `tag`; None when that cannot be told."""
    tags = _packaging_module("tags")
    if tags is None:
        return None
    supported = {str(t) for t in tags.sys_tags()}
    return any(t in supported for t in _expand_tag(tag))


def _native_tag() -> str:
    """The tag of a CPython extension wheel for the running interpreter, preferring the real ORT 1.22 tag."""
    machine = platform.machine()
    tags = _packaging_module("tags")
    if tags is not None:
        first = next(iter(tags.sys_tags()))
        real = f"{first.interpreter}-{first.abi}-manylinux_2_27_{machine}.manylinux_2_28_{machine}"
        return real if _tag_accepted(real) else str(first)
    py = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    return f"{py}-{py}-linux_{machine}"


def _nvidia_tag() -> str:
    """The real NVIDIA wheels' tag (py3-none-manylinux2014_<arch>) where accepted, else a plain linux one."""
    real = f"py3-none-manylinux2014_{platform.machine()}"
    return real if _tag_accepted(real) is not False else f"py3-none-linux_{platform.machine()}"


# --------------------------------------------------------------------------------------------------------------------
# The catalogue: onnxruntime and NVIDIA wheels that lay out like the real ones
# --------------------------------------------------------------------------------------------------------------------

_ORT_INIT = '''\
"""ortfix test fixture standing in for onnxruntime: the real layout, none of the real code.

Standard library only, and it loads no shared library: importing it says nothing about CUDA."""

__version__ = "{version}"
'''
_ORT_LICENSE = """\
# -------------------------------------------------------------------------
# Copyright (c) Microsoft Corporation. All rights reserved.
# Licensed under the MIT License.
# --------------------------------------------------------------------------
"""
_ORT_LD_PRELOAD = _ORT_LICENSE + """
# This file can be modified by setup.py when building a manylinux2010 wheel
# When modified, it will preload some libraries needed for the python C extension
"""


def _ext_suffix() -> str:
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    return suffix if isinstance(suffix, str) else ".so"


def _ort_files(tmp: Path, *, package: str, version: str, cuda_version: str | None,
               providers: Mapping[str, Sequence[str]],
               provider_runpath: Sequence[str] | None) -> dict[str, bytes | Path]:
    build_info = f"package_name = '{package}'\n__version__ = '{version}'\n"
    if cuda_version is not None:
        build_info += f"cuda_version = '{cuda_version}'\n"  # byte for byte like the real GPU file
    # The marker makes each variant's binaries differ on disk, as the real ones do: ortfix tells which
    # distribution's RECORD the extension module on disk belongs to by its hash.
    marker = f"{package} {version}" + (f" cuda {cuda_version}" if cuda_version else "")
    capi = "onnxruntime/capi"
    files: dict[str, bytes | Path] = {
        "onnxruntime/__init__.py": _ORT_INIT.format(version=version).encode(),
        f"{capi}/__init__.py": _ORT_LICENSE.encode(),
        f"{capi}/_ld_preload.py": _ORT_LD_PRELOAD.encode(),
        f"{capi}/build_and_package_info.py": build_info.encode(),
    }
    libs: list[tuple[str, str | None, Sequence[str], Sequence[str] | None]] = [
        (f"libonnxruntime.so.{version}", f"libonnxruntime.so.{version.split('.')[0]}", (), ORIGIN),
        ("libonnxruntime_providers_shared.so", "libonnxruntime_providers_shared.so", (), None),
        *((f"libonnxruntime_providers_{p}.so", None, needed, provider_runpath) for p, needed in providers.items()),
        (f"onnxruntime_pybind11_state{_ext_suffix()}", None, (), ORIGIN),
    ]
    for filename, soname, needed, runpath in libs:
        files[f"{capi}/{filename}"] = build_stub_lib(tmp / filename, soname=soname, needed=needed, runpath=runpath,
                                                     marker=f"{marker} {filename}")
    return files


def fake_ort_gpu_wheel(out_dir: Path, *, version: str = "1.22.0", cuda_version: str = "12.2",
                       package: str = "onnxruntime-gpu", provider_needed: Sequence[str] = CU12_PROVIDER_NEEDED,
                       provider_runpath: Sequence[str] | None = None, tensorrt: bool = False,
                       tensorrt_needed: Sequence[str] = TENSORRT_PROVIDER_NEEDED,
                       extras: Mapping[str, Sequence[str]] | None = ORT_122_EXTRAS,
                       requires_python: str | None = ">=3.10", tag: str | None = None,
                       requires: Sequence[str] = ()) -> Path:
    """A wheel laid out like onnxruntime-gpu: onnxruntime/capi with build_and_package_info.py, the shared and CUDA
    provider libraries (CUDA NEEDED = `provider_needed`), optionally the TensorRT provider (the real 1.22.0 wheel
    ships it), and a stub pybind extension. No Requires-Dist besides `extras`: numpy & co. would need an index."""
    providers: dict[str, Sequence[str]] = {"cuda": provider_needed}
    if tensorrt:
        providers["tensorrt"] = tensorrt_needed
    with tempfile.TemporaryDirectory() as tmp:
        files = _ort_files(Path(tmp), package=package, version=version, cuda_version=cuda_version,
                           providers=providers, provider_runpath=provider_runpath)
        return build_wheel(out_dir, package, version, files, extras=extras, tag=tag or _native_tag(),
                           requires_python=requires_python, requires=requires)


def fake_ort_cpu_wheel(out_dir: Path, *, version: str = "1.22.0", package: str = "onnxruntime",
                       requires_python: str | None = ">=3.10", tag: str | None = None) -> Path:
    """A wheel laid out like onnxruntime (CPU): the GPU layout without CUDA/TensorRT providers or cuda_version."""
    with tempfile.TemporaryDirectory() as tmp:
        files = _ort_files(Path(tmp), package=package, version=version, cuda_version=None, providers={},
                           provider_runpath=None)
        return build_wheel(out_dir, package, version, files, tag=tag or _native_tag(),
                           requires_python=requires_python)


def fake_nvidia_wheel(out_dir: Path, distribution: str, version: str, libs: Mapping[str, str], lib_dir: str, *,
                      needed: Mapping[str, Sequence[str]] | None = None,
                      runpath: Mapping[str, Sequence[str] | None] | None = None, requires: Sequence[str] = (),
                      namespace: bool = False, tag: str | None = None) -> Path:
    """A wheel laid out like an NVIDIA one: each `libs` item is a file name -> the SONAME it carries, put in
    `lib_dir` (e.g. "nvidia/cudnn/lib"). `needed` maps file names to their NEEDED lists; `runpath` overrides the
    default RUNPATH $ORIGIN per file (None: no RUNPATH). By default every folder of `lib_dir` gets an empty
    __init__.py, as in the 12.4-era wheels; `namespace=True` gives the newer layout with none at all."""
    lib_dir = lib_dir.strip("/")
    files: dict[str, bytes | Path] = {}
    if not namespace:
        parts = lib_dir.split("/")
        for i in range(1, len(parts) + 1):
            files["/".join(parts[:i]) + "/__init__.py"] = b""
    with tempfile.TemporaryDirectory() as tmp:
        for filename, soname in libs.items():
            rp = (runpath or {}).get(filename, ORIGIN)
            files[f"{lib_dir}/{filename}"] = build_stub_lib(
                Path(tmp) / filename, soname=soname, needed=(needed or {}).get(filename, ()), runpath=rp,
                marker=f"{distribution} {version} {filename}")
        return build_wheel(out_dir, distribution, version, files, requires=requires, tag=tag or _nvidia_tag(),
                           root_is_purelib=True)


@dataclass(frozen=True)
class NvidiaWheelSpec:
    """One real NVIDIA CUDA 12 wheel: distribution, a version the ORT 1.22 extras accept, and its libraries."""

    distribution: str
    version: str
    lib_dir: str
    libs: Mapping[str, str]  # file name -> SONAME
    needed: Mapping[str, Sequence[str]] = field(default_factory=dict)
    runpath: Mapping[str, Sequence[str] | None] = field(default_factory=dict)  # default: $ORIGIN
    requires: Sequence[str] = ()

    def build(self, out_dir: Path) -> Path:
        return fake_nvidia_wheel(out_dir, self.distribution, self.version, self.libs, self.lib_dir,
                                 needed=self.needed, runpath=self.runpath, requires=self.requires)


_CUDNN9_SUBLIBS = ("adv", "cnn", "engines_precompiled", "engines_runtime_compiled", "graph", "heuristic", "ops")

# Names, folders, SONAMEs, NEEDED (non-system entries only) and RUNPATHs as in the real wheels (readelf -d).
NVIDIA_CU12: tuple[NvidiaWheelSpec, ...] = (
    NvidiaWheelSpec("nvidia-cuda-runtime-cu12", "12.4.127", "nvidia/cuda_runtime/lib",
                    {"libcudart.so.12": "libcudart.so.12"}, runpath={"libcudart.so.12": None}),
    NvidiaWheelSpec("nvidia-cublas-cu12", "12.4.5.8", "nvidia/cublas/lib",
                    {"libcublas.so.12": "libcublas.so.12", "libcublasLt.so.12": "libcublasLt.so.12",
                     "libnvblas.so.12": "libnvblas.so.12"},
                    needed={"libcublas.so.12": ["libcublasLt.so.12"], "libnvblas.so.12": ["libcublas.so.12"]}),
    NvidiaWheelSpec("nvidia-cufft-cu12", "11.2.1.3", "nvidia/cufft/lib",
                    {"libcufft.so.11": "libcufft.so.11", "libcufftw.so.11": "libcufftw.so.11"},
                    needed={"libcufftw.so.11": ["libcufft.so.11"]}),
    NvidiaWheelSpec("nvidia-curand-cu12", "10.3.5.147", "nvidia/curand/lib", {"libcurand.so.10": "libcurand.so.10"}),
    NvidiaWheelSpec("nvidia-cuda-nvrtc-cu12", "12.4.127", "nvidia/cuda_nvrtc/lib",
                    {"libnvrtc.so.12": "libnvrtc.so.12", "libnvrtc-builtins.so.12.4": "libnvrtc-builtins.so.12.4"},
                    runpath={"libnvrtc-builtins.so.12.4": None}),
    NvidiaWheelSpec("nvidia-cudnn-cu12", "9.1.0.70", "nvidia/cudnn/lib",
                    {"libcudnn.so.9": "libcudnn.so.9",
                     **{f"libcudnn_{s}.so.9": f"libcudnn_{s}.so.9" for s in _CUDNN9_SUBLIBS}},
                    needed={"libcudnn_adv.so.9": ["libcudnn_ops.so.9", "libcudnn_graph.so.9"],
                            "libcudnn_cnn.so.9": ["libcudnn_ops.so.9", "libcudnn_graph.so.9"],
                            **{f"libcudnn_{s}.so.9": ["libcudnn_graph.so.9"]
                               for s in ("engines_precompiled", "engines_runtime_compiled", "heuristic", "ops")}},
                    runpath={f"libcudnn_{s}.so.9": _CUDNN9_SUB_RUNPATH for s in _CUDNN9_SUBLIBS},
                    requires=["nvidia-cublas-cu12"]),
)


def nvidia_cu12_set(out_dir: Path) -> list[Path]:
    """Fake-but-real wheels for every NVIDIA CUDA 12 distribution onnxruntime-gpu[cuda,cudnn]==1.22.0 pulls in."""
    return [spec.build(out_dir) for spec in NVIDIA_CU12]


# --------------------------------------------------------------------------------------------------------------------
# Venvs and pip
# --------------------------------------------------------------------------------------------------------------------


class PipError(RuntimeError):
    """pip failed; the message carries its stderr, `proc` the whole result."""

    def __init__(self, message: str, proc: subprocess.CompletedProcess[str]) -> None:
        super().__init__(message)
        self.proc = proc


def refuse_slow(what: str) -> None:
    """support.slowguard.refuse_slow, imported only under the fast tier's guard (scripts/bench_check.py imports this
    module without pytest)."""
    if os.environ.get("ORTFIX_TEST_FAST_ONLY"):
        from support.slowguard import refuse_slow as refuse

        refuse(what)


def make_venv(path: Path, *, system_site_packages: bool = False) -> Path:
    """Create a real venv at `path` (without pip: ensurepip costs seconds) and return its interpreter."""
    refuse_slow(f"a venv ({path})")
    argv = [sys.executable, "-m", "venv", "--without-pip", *(["--system-site-packages"] if system_site_packages
                                                               else []), str(path)]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"python -m venv failed for {path}:\n{proc.stderr.strip()}")
    return path / "bin" / "python"


def base_python(root: Path) -> Path | None:
    """A base installation of our own at root/base, not a venv (what ortfix calls a system Python): a copy of the
    interpreter running the tests with its standard library, not its site-packages; its `bin/python3`. None when that
    base is not a self-contained installation to copy (a distribution's /usr)."""
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    stdlib = Path(sys.base_prefix) / "lib" / version
    if not (Path(sys.base_prefix) / "bin" / version).exists() or not (stdlib / "os.py").exists() or \
            str(sys.base_prefix).startswith("/usr"):
        return None
    base = root / "base"
    (base / "bin").mkdir(parents=True)
    shutil.copy2(Path(sys.base_prefix) / "bin" / version, base / "bin" / version)
    (base / "bin" / "python3").symlink_to(version)
    (base / "lib").mkdir()
    for lib in (Path(sys.base_prefix) / "lib").glob("libpython*"):
        shutil.copy2(lib, base / "lib" / lib.name, follow_symlinks=False)
    shutil.copytree(stdlib, base / "lib" / version, symlinks=True,
                    ignore=lambda d, names: [n for n in names if n in ("site-packages", "test", "__pycache__")
                                             and Path(d) == stdlib])
    (base / "lib" / version / "site-packages").mkdir()
    return base / "bin" / "python3"


def _hermetic_pip_env() -> dict[str, str]:
    # PIP_CONFIG_FILE=os.devnull makes pip skip every config file (this machine's global one adds an extra index,
    # find-links and constraints); PIP_* variables would configure it just the same, so they go too.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") and k != "PYTHONPATH"}
    env["PIP_CONFIG_FILE"] = os.devnull
    return env


def pip_install(python: Path, *requirements: str, find_links: Path,
                no_deps: bool = False) -> subprocess.CompletedProcess[str]:
    """Install `requirements` into the environment of `python` from `find_links` only, with the real pip of the
    interpreter running the tests (pip >= 22.3's --python); raise PipError with pip's stderr on failure."""
    refuse_slow(f"pip (install {' '.join(requirements)})")
    argv = [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-index", "--find-links",
            str(find_links), "--disable-pip-version-check", "--no-input", "--no-cache-dir",
            "--no-warn-script-location", *(["--no-deps"] if no_deps else []), *requirements]
    proc = subprocess.run(argv, capture_output=True, text=True, env=_hermetic_pip_env(), check=False)
    if proc.returncode != 0:
        raise PipError(f"pip install {' '.join(requirements)} failed (exit {proc.returncode}):\n"
                       f"{proc.stderr.strip()}", proc)
    return proc


# --------------------------------------------------------------------------------------------------------------------
# The oracle: glibc's ld.so
# --------------------------------------------------------------------------------------------------------------------

_PT_INTERP = 3
_KNOWN_LOADERS = ("/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1", "/lib/ld-linux-x86-64.so.2",
                  "/lib/ld-linux.so.2")


def _read_pt_interp(path: Path) -> str | None:
    """PT_INTERP of an ELF executable, read straight from its program headers."""
    try:
        with path.open("rb") as f:
            ident = f.read(64)
            if len(ident) < 52 or ident[:4] != b"\x7fELF":
                return None
            is64, order = ident[4] == 2, "<" if ident[5] == 1 else ">"
            if is64:
                phoff, = struct.unpack_from(order + "Q", ident, 0x20)
                phentsize, phnum = struct.unpack_from(order + "HH", ident, 0x36)
            else:
                phoff, = struct.unpack_from(order + "I", ident, 0x1C)
                phentsize, phnum = struct.unpack_from(order + "HH", ident, 0x2A)
            for i in range(phnum):
                f.seek(phoff + i * phentsize)
                ph = f.read(phentsize)
                if struct.unpack_from(order + "I", ph, 0)[0] != _PT_INTERP:
                    continue
                if is64:
                    offset, = struct.unpack_from(order + "Q", ph, 8)
                    size, = struct.unpack_from(order + "Q", ph, 32)
                else:
                    offset, = struct.unpack_from(order + "I", ph, 4)
                    size, = struct.unpack_from(order + "I", ph, 16)
                f.seek(offset)
                return f.read(size).split(b"\0", 1)[0].decode()
    except (OSError, struct.error, UnicodeDecodeError):
        return None
    return None


@cache
def system_loader() -> Path:
    """glibc's dynamic loader: PT_INTERP of the real Python binary (or of /bin/sh), else a standard path."""
    for exe in (Path(sys.executable).resolve(), Path("/bin/sh").resolve()):
        interp = _read_pt_interp(exe)
        if interp and Path(interp).is_file():
            return Path(interp)
    for candidate in _KNOWN_LOADERS:
        if Path(candidate).is_file():
            return Path(candidate)
    raise RuntimeError("no glibc dynamic loader (ld-linux*.so) found on this machine")


_RESOLVED = re.compile(r"^(?P<name>\S+) => (?P<path>.+?)(?: \(0x[0-9a-fA-F]+\))?$")
_LOADED = re.compile(r"^(?P<path>.+?) \(0x[0-9a-fA-F]+\)$")


def ld_so_list(lib: Path, env: Mapping[str, str] | None = None) -> dict[str, str | None]:
    """What glibc's ld.so loads for `lib`: {name asked for: path it found, or None for "not found"}.

    Runs the loader in trace mode with exactly `env` (None: an empty environment) plus
    LD_TRACE_LOADED_OBJECTS=1, as ldd does. (`ld.so --list` stops at the first missing library with an error and
    exit 127 when the object is a shared library, so it cannot report a partial tree.) Objects printed by path
    only (the loader itself, `/abs/path (0x...)`) are keyed by that path; virtual DSOs (linux-vdso.so.1) have no
    file and are left out. A library without dependencies gives {}.
    """
    run_env = dict(env or {})
    run_env["LD_TRACE_LOADED_OBJECTS"] = "1"
    proc = subprocess.run([str(system_loader()), str(lib)], capture_output=True, text=True, env=run_env,
                          check=False)
    result: dict[str, str | None] = {}
    for raw in proc.stdout.splitlines():
        line = raw.strip()
        if m := _RESOLVED.match(line):
            path = m["path"]
            result.setdefault(m["name"], None if path == "not found" else path)
        elif (m := _LOADED.match(line)) and m["path"].startswith("/"):
            result.setdefault(m["path"], m["path"])
    statically = "statically linked" in proc.stdout
    if (proc.returncode != 0 and not result and not statically) or (proc.returncode == 0 and not proc.stdout):
        raise RuntimeError(f"{system_loader()} could not list {lib} (exit {proc.returncode}): "
                           f"{proc.stderr.strip() or proc.stdout.strip()}")
    return result
