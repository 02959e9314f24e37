#!/usr/bin/env python3
"""Read the real onnxruntime-gpu wheels and check compat/ort.yaml against them, or regenerate it from them.

    python scripts/ort_wheels.py [--check | --write] [--versions 1.19.2,1.20.2] [--find-links DIR] [--cache DIR]
    python scripts/ort_wheels.py --addons [--check | --write] --find-links DIR   (compat/addons.yaml: addons_wheels.py)

The releases, the CPython tags and the platforms come from pip itself (`pip index versions` once per Python version
and platform; `pip download --no-deps --only-binary=:all:` for the wheels), so the index is whatever pip is
configured to use; `--find-links DIR` (alias `--wheelhouse`) adds a folder of wheels, used before any download, and
`--no-index` makes those folders the only source. `--cache DIR` keeps downloaded wheels, so a rerun downloads nothing.

From the Linux x86_64 wheel of each release (read from the zip, never unpacked to disk):
  * onnxruntime/capi/libonnxruntime_providers_cuda.so and _tensorrt.so: DT_NEEDED without the system libraries;
  * the CUDA/cuDNN sonames the CUDA provider dlopens: `lib*.so.N` strings, names the code assembles from immediate
    stores (`movabs` + `mov` to the stack: how 1.28+ builds "libcufft.so.12" and "libcudnn.so.9"), and, before
    1.16, the CDLL list of onnxruntime/capi/_ld_preload.py; sonames of another CUDA major (fallbacks such as
    libnvrtc.so.12 in a CUDA 13 build) and the driver's libcuda.so.1 are reported but not recorded;
  * build_and_package_info.py (package_name, __version__, cuda_version, cudnn_version) where the wheel has one,
    else a /usr/local/cuda-X.Y entry of the providers' or the extension module's RPATH/RUNPATH for cuda_build;
  * compute capabilities from the fatbin headers in .nv_fatbin (SASS and PTX architectures);
  * METADATA: Requires-Python and the extras; file and unpacked sizes (checked against a row's `size_mib` when it
    names this very wheel).
With `--windows`, the PE imports (and delay imports) of onnxruntime_providers_cuda.dll and _tensorrt.dll of the
win_amd64 wheel, read with pefile: printed, and their CUDA/cuDNN majors checked against the row (the matrix has no
field for Windows DLL names).

--check (the default) prints every disagreement as `VERSION: FIELD: file says X, wheel says Y` and exits 1 if there
is any. --write rewrites the wheel-derived fields of the `index: default` rows in place (the other rows, `note`,
`index`, comments and the order are kept; a row whose versions no longer agree is split; a new release joins the
row of the release before it when every fact matches, else gets a row of its own), bumps data_version, validates
the result with ortfix's schema, and leaves the file byte for byte alone when nothing changed.
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import copy
import datetime
import email.parser
import io
import json
import re
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

REPO = Path(__file__).resolve().parents[1]
DEFAULT_FILE = REPO / "compat" / "ort.yaml"
SCRIPT = "scripts/ort_wheels.py"

CAPI = "onnxruntime/capi"
PROVIDER_SO = {"cuda": f"{CAPI}/libonnxruntime_providers_cuda.so",
               "tensorrt": f"{CAPI}/libonnxruntime_providers_tensorrt.so"}
PROVIDER_DLL = {"cuda": f"{CAPI}/onnxruntime_providers_cuda.dll",
                "tensorrt": f"{CAPI}/onnxruntime_providers_tensorrt.dll"}
BUILD_INFO = f"{CAPI}/build_and_package_info.py"
LD_PRELOAD = f"{CAPI}/_ld_preload.py"

# glibc, libstdc++ and libgcc: every build needs them and no fix ever concerns them.
SYSTEM_SONAME = re.compile(r"^(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|libz|libutil|libresolv)\.so[.\d]*$"
                           r"|^ld-linux[-\w.]*\.so[.\d]*$")
# CUDA toolkit, cuDNN, TensorRT and NCCL libraries (libcuda.so.1, the driver, is handled apart).
GPU_SONAME = re.compile(r"^lib(cu[A-Za-z_]*|nv[A-Za-z_]*|nccl)\.so(\.\d+)+$")
DRIVER_SONAMES = frozenset({"libcuda.so.1"})
# Libraries whose soname carries the CUDA major: a libnvrtc.so.12 string in a CUDA 13 build is a fallback name.
CUDA_MAJOR_LIBS = frozenset({"cudart", "nvrtc", "cublas", "cublasLt", "nvJitLink"})
# No look-behind: a pattern that starts with a literal is searched for fast; the byte before is checked apart.
SONAME_IN_STRINGS = re.compile(rb"lib[A-Za-z0-9_]+\.so(?:\.[0-9]+)+(?![A-Za-z0-9_.])")
SONAME_TEXT = re.compile(r"^lib[A-Za-z0-9_]+\.so(\.\d+)+$")
CUDA_PATH = re.compile(r"/usr/local/cuda-(\d+\.\d+)(/|$)")

FATBIN_MAGIC = 0xBA55ED50
PLATFORM_ORDER = ("linux_x86_64", "linux_aarch64", "win_amd64", "win_arm64")
# The `--platform` values that make pip accept every wheel of a platform family.
_MANYLINUX = [f"manylinux_2_{minor}" for minor in range(45, 4, -1)]


def platform_tags(family: str) -> list[str]:
    if family.startswith("linux_"):
        arch = family[len("linux_"):]
        legacy = ["manylinux2014", "manylinux2010", "manylinux1"] if arch in ("x86_64", "i686") else ["manylinux2014"]
        return [*(f"{m}_{arch}" for m in (*_MANYLINUX, *legacy)), family]
    return [family]


def family_of(platform_tag: str) -> str | None:
    for family in PLATFORM_ORDER:
        arch = family.split("_", 1)[1]
        if family.startswith("linux_") and platform_tag.endswith("_" + arch) and (
                platform_tag.startswith("manylinux") or platform_tag == family):
            return family
        if platform_tag == family:
            return family
    return None


# Row fields this script derives from wheels (dotted paths into a row), in the order they appear in a row.
FIELDS = ("cuda_major", "cuda_build", "cudnn_major", "providers.cuda.needed", "providers.cuda.lazy",
          "providers.tensorrt.needed", "compute_capabilities", "extras", "requires_python", "python_tags", "platforms")
# Written even when null or empty (the others are left out then): cuda_build and cudnn_major are nullable, needed is
# required, and an empty `lazy` says that nothing is dlopened.
KEEP_EMPTY = ("cuda_build", "cudnn_major", "providers.cuda.needed", "providers.cuda.lazy")
SET_FIELDS = ("providers.cuda.needed", "providers.cuda.lazy", "providers.tensorrt.needed", "compute_capabilities",
              "python_tags", "platforms")
ROW_ORDER = ("versions", "package", "index", "size_mib", "cuda_major", "cuda_build", "cudnn_major", "providers",
             "compute_capabilities", "extras", "requires_python", "python_tags", "platforms", "source", "note")
NESTED_ORDER = {"providers": ("cuda", "tensorrt"), "cuda": ("needed", "lazy"), "tensorrt": ("needed", "lazy")}
WIDTH = 120  # the file's line width: a list that does not fit on its key's line is written as a block


class Failure(Exception):
    """Something the script cannot go on from (pip failed, a wheel is not what it should be)."""


# --------------------------------------------------------------------------------------------------------------
# Reading one wheel
# --------------------------------------------------------------------------------------------------------------


@dataclass
class ElfFacts:
    needed: list[str]
    paths: list[str]  # DT_RPATH and DT_RUNPATH entries
    dlopen: list[str] = field(default_factory=list)  # soname-like strings and code-built names, in file order
    sass: list[int] = field(default_factory=list)
    ptx: list[int] = field(default_factory=list)


@dataclass
class LinuxFacts:
    wheel: str
    download_mib: float
    unpacked_mib: float
    facts: dict[str, Any]  # dotted field -> value, only what the wheel tells
    how: dict[str, str]  # dotted field -> where it was read
    build_info: dict[str, str]
    info: list[str]  # things worth printing that have no field


@dataclass
class WindowsFacts:
    wheel: str
    imports: dict[str, list[str]]  # provider -> DLL names (imports, then delay imports)
    cuda_major: int | None
    cudnn_major: int | None


def _elf(data: bytes, *, scan: bool) -> ElfFacts:
    from elftools.common.exceptions import ELFError
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile

    needed: list[str] = []
    paths: list[str] = []
    try:
        elf = ELFFile(io.BytesIO(data))
        for section in elf.iter_sections():
            if isinstance(section, DynamicSection):
                for tag in section.iter_tags():
                    if tag.entry.d_tag == "DT_NEEDED":
                        needed.append(tag.needed)  # type: ignore[attr-defined]
                    elif tag.entry.d_tag == "DT_RPATH":
                        paths += tag.rpath.split(":")  # type: ignore[attr-defined]
                    elif tag.entry.d_tag == "DT_RUNPATH":
                        paths += tag.runpath.split(":")  # type: ignore[attr-defined]
                break
        fatbin = elf.get_section_by_name(".nv_fatbin")
        fat_range = (int(fatbin["sh_offset"]), int(fatbin["sh_offset"]) + int(fatbin["sh_size"])) if fatbin else None
    except (ELFError, ValueError, KeyError, AssertionError, struct.error) as exc:
        raise Failure(f"not a readable ELF file: {exc}") from exc
    facts = ElfFacts(needed=needed, paths=[p for p in paths if p])
    if scan:
        found = [(m.start(), m.group().decode()) for m in SONAME_IN_STRINGS.finditer(data)
                 if m.start() == 0 or not _NAME_BYTE[data[m.start() - 1]]]
        found += list(code_built_names(data))
        facts.dlopen = list(dict.fromkeys(name for _, name in sorted(found)))
        sass, ptx = fatbin_archs(data, *(fat_range or (0, len(data))))
        facts.sass, facts.ptx = sorted(sass), sorted(ptx)
    return facts


def fatbin_archs(data: bytes, start: int, end: int) -> tuple[set[int], set[int]]:
    """The SM architectures of the cubins (SASS) and PTX entries of every fatbin container in data[start:end].

    A container is `magic u32 (0xBA55ED50), version u16, header size u16, size of its entries u64`; each entry is
    `kind u16 (1 PTX, 2 cubin), u16, header size u32, payload size u64, ..., arch u32 at offset 28` (what cuobjdump
    lists as sm_XX / compute_XX)."""
    sass: set[int] = set()
    ptx: set[int] = set()
    magic = struct.pack("<I", FATBIN_MAGIC)
    pos = data.find(magic, start, end)
    while pos >= 0 and pos + 16 <= end:
        _, _, header, size = struct.unpack_from("<IHHQ", data, pos)
        entry, stop = pos + header, min(pos + header + size, end)
        while header >= 16 and entry + 32 <= stop:
            kind, _, entry_header, payload = struct.unpack_from("<HHIQ", data, entry)
            if kind not in (1, 2) or entry_header < 32:
                break
            (arch,) = struct.unpack_from("<I", data, entry + 28)
            (ptx if kind == 1 else sass).add(arch)
            entry += entry_header + payload
        pos = data.find(magic, max(stop, pos + 4), end)
    return sass, ptx


_LIB = re.compile(rb"lib[A-Za-z0-9_]")  # a literal, so the search is fast; the instruction around it is checked apart
_NAME_BYTE = [bytes([b]).isalnum() or b == ord("_") for b in range(256)]


def code_built_names(data: bytes, before: int = 64, after: int = 160) -> Iterator[tuple[int, str]]:
    """Sonames that x86-64 code assembles on the stack from immediates instead of reading a string constant.

    GCC builds a short string such as "libcufft.so.12" as `movabs $"libcufft", %rax; mov %rax, 0x30(%rsp);
    movabs $"ft.so.12", %rax; mov %rax, 0x36(%rsp); movb $0, 0x3e(%rsp)` (onnxruntime-gpu 1.28+), or with
    `movl $"libc", (%rsp)` and byte stores. Wherever an immediate that starts with "lib" is moved into a register or
    onto the stack, the moves around it are replayed (immediates into registers, registers and immediates into
    disp(%rsp)) and the string read back from the first store of "lib..." up to its NUL."""
    for match in _LIB.finditer(data):
        anchor = _anchor(data, match.start())
        if anchor is not None:
            name = _replay(data, max(0, anchor - before), min(len(data), anchor + after), anchor)
            if name is not None and SONAME_TEXT.match(name):
                yield anchor, name


def _anchor(data: bytes, at: int) -> int | None:
    """The start of the instruction whose immediate begins at `at` (movabs, mov $imm32 to a register or to
    disp(%rsp)), or None."""
    if at >= 2 and data[at - 2] in (0x48, 0x49) and 0xB8 <= data[at - 1] <= 0xBF:
        return at - 2
    if at >= 1 and 0xB8 <= data[at - 1] <= 0xBF and not (at >= 2 and data[at - 2] in (0x48, 0x49)):
        return at - 2 if at >= 2 and data[at - 2] == 0x41 else at - 1
    for length in (2, 3, 6):  # ModRM + SIB + disp0/disp8/disp32 of `movl $imm32, disp(%rsp)`
        start = at - 1 - length
        if start >= 0 and data[start] == 0xC7 and (data[start + 1] >> 3) & 7 == 0:
            operand = _rsp_operand(data, start + 1)
            if operand is not None and operand[1] == length:
                return start
    return None


def _replay(data: bytes, lo: int, hi: int, anchor: int) -> str | None:
    regs: dict[int, bytes] = {}
    memory: dict[int, int] = {}
    first: int | None = None
    pos = lo
    while pos < hi:
        step, writes = _move(data, pos, regs)
        for disp, value in writes:
            if first is None and pos >= anchor and value[:3] == b"lib":
                first = disp
            for i, byte in enumerate(value):
                memory[disp + i] = byte
        if first is not None and writes:
            out = bytearray()
            at = first
            while at in memory and memory[at] != 0 and len(out) < 64:
                out.append(memory[at])
                at += 1
            if at in memory and memory[at] == 0:
                return out.decode("latin-1")
        pos += step
    return None


def _move(data: bytes, pos: int, regs: dict[int, bytes]) -> tuple[int, list[tuple[int, bytes]]]:
    """Decode the move at `pos` if there is one: update `regs` for a load, return the stores it makes as (disp,
    bytes); the step is the instruction's length, or 1 where no move is recognised."""
    b0 = data[pos]
    nxt = data[pos + 1] if pos + 1 < len(data) else 0
    if b0 in (0x48, 0x49) and 0xB8 <= nxt <= 0xBF and pos + 10 <= len(data):  # movabs $imm64, %r64
        regs[(nxt - 0xB8) + (8 if b0 == 0x49 else 0)] = data[pos + 2:pos + 10]
        return 10, []
    rex = b0 if b0 in (0x41, 0x44, 0x48, 0x4C) else 0
    at = pos + (1 if rex else 0)
    op = data[at] if at < len(data) else 0
    if 0xB8 <= op <= 0xBF and rex in (0, 0x41) and at + 5 <= len(data):  # mov $imm32, %r32 (zero-extends)
        regs[(op - 0xB8) + (8 if rex == 0x41 else 0)] = data[at + 1:at + 5] + bytes(4)
        return at + 5 - pos, []
    if op == 0x89 and rex in (0, 0x44, 0x48, 0x4C):  # mov %r, disp(%rsp)
        operand = _rsp_operand(data, at + 1)
        if operand is not None:
            reg = ((data[at + 1] >> 3) & 7) + (8 if rex in (0x44, 0x4C) else 0)
            size = 8 if rex in (0x48, 0x4C) else 4
            value = regs.get(reg)
            return at + 1 + operand[1] - pos, ([(operand[0], value[:size])] if value is not None else [])
    if op in (0xC7, 0xC6) and rex in (0, 0x48):  # mov $imm, disp(%rsp): movl, movq (imm32 sign-extended), movb
        operand = _rsp_operand(data, at + 1)
        if operand is not None and (data[at + 1] >> 3) & 7 == 0:
            size = 1 if op == 0xC6 else 4
            imm = data[at + 1 + operand[1]:at + 1 + operand[1] + size]
            if rex == 0x48 and op == 0xC7:
                imm += (b"\xff" if imm[-1] & 0x80 else b"\x00") * 4
            return at + 1 + operand[1] + size - pos, [(operand[0], imm)]
    return 1, []


def _rsp_operand(data: bytes, at: int) -> tuple[int, int] | None:
    """(disp, bytes of ModRM+SIB+disp) for a ModRM at `at` addressing disp8/disp32(%rsp), else None."""
    if at + 3 > len(data):
        return None
    modrm, sib = data[at], data[at + 1]
    mod, rm = modrm >> 6, modrm & 7
    if rm != 4 or sib != 0x24:
        return None
    if mod == 1:
        return int.from_bytes(data[at + 2:at + 3], "little", signed=True), 3
    if mod == 2 and at + 6 <= len(data):
        return int.from_bytes(data[at + 2:at + 6], "little", signed=True), 6
    if mod == 0:
        return 0, 2
    return None


def _soname_major(soname: str) -> tuple[str, int] | None:
    m = re.match(r"^lib([A-Za-z_]+)\.so\.(\d+)", soname)
    return (m.group(1), int(m.group(2))) if m else None


def _preload_lists(text: str) -> dict[str, list[str]]:
    """The CDLL names of _ld_preload.py per provider: each try block ends in an except that sets ORT_<P>_UNAVAILABLE."""
    out: dict[str, list[str]] = {}
    block: list[str] = []
    for line in text.splitlines():
        if line.strip().startswith("try:"):
            block = []
        block += re.findall(r"""CDLL\(\s*["']([^"']+)["']""", line)
        flag = re.search(r"ORT_(CUDA|TENSORRT)_UNAVAILABLE", line)
        if flag and block:
            out.setdefault(flag.group(1).lower(), []).extend(block)
            block = []
    return out


def _build_info(text: str) -> dict[str, str]:
    info: dict[str, str] = {}
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    info[target.id] = node.value.value
    return info


def _metadata(text: str) -> tuple[str | None, dict[str, list[str]]]:
    msg = email.parser.HeaderParser().parsestr(text)
    requires_python = msg.get("Requires-Python")
    extras: dict[str, list[str]] = {e.strip(): [] for e in msg.get_all("Provides-Extra") or []}
    for req in msg.get_all("Requires-Dist") or []:
        spec, _, marker = req.partition(";")
        for extra in re.findall(r"""extra\s*==\s*["']([^"']+)["']""", marker):
            extras.setdefault(extra, []).append(spec.strip())
    return (requires_python.strip() if requires_python else None), extras


def _major(version: str | None) -> int | None:
    m = re.match(r"^(\d+)", version or "")
    return int(m.group(1)) if m else None


def installed_names(wheel: zipfile.ZipFile) -> dict[str, str]:
    """Archive member by the path it installs to: old wheels (1.11-1.14) keep the package under
    onnxruntime_gpu-V.data/purelib/."""
    out: dict[str, str] = {}
    for name in wheel.namelist():
        m = re.match(r"^[^/]+\.data/(?:purelib|platlib)/(.+)$", name)
        out[m.group(1) if m else name] = name
    return out


def read_linux_wheel(path: Path) -> LinuxFacts:
    """Every fact one Linux wheel tells (see the module docstring)."""
    with zipfile.ZipFile(path) as wheel:
        names = installed_names(wheel)
        infos = wheel.infolist()

        def read(name: str) -> bytes:
            return wheel.read(names[name])

        def text(name: str) -> str | None:
            return read(name).decode("utf-8", "replace") if name in names else None

        dist_info = sorted({n.split("/", 1)[0] for n in names if n.split("/", 1)[0].endswith(".dist-info")})
        if not dist_info:
            raise Failure(f"{path.name}: no .dist-info folder")
        metadata = text(f"{dist_info[0]}/METADATA")
        if metadata is None:
            raise Failure(f"{path.name}: no METADATA")
        if PROVIDER_SO["cuda"] not in names:
            raise Failure(f"{path.name}: no {PROVIDER_SO['cuda']} (not a CUDA build?)")
        elves = {p: _elf(read(m), scan=True) for p, m in PROVIDER_SO.items() if m in names}
        pybind = sorted(n for n in names if re.match(rf"^{CAPI}/onnxruntime_pybind11_state[^/]*\.so$", n))
        build_info = _build_info(text(BUILD_INFO) or "")
        preload = _preload_lists(text(LD_PRELOAD) or "")
        pybind_paths = _elf(read(pybind[0]), scan=False).paths if pybind and not build_info.get(
            "cuda_version") else []

    facts: dict[str, Any] = {}
    how: dict[str, str] = {}
    info: list[str] = []
    cuda = elves["cuda"]
    needed = [n for n in cuda.needed if not SYSTEM_SONAME.match(n)]
    facts["providers.cuda.needed"] = needed
    how["providers.cuda.needed"] = "DT_NEEDED"

    # The CUDA major: the provider's libcudart.so.N (NEEDED, preloaded or dlopened), else the build info.
    cuda_major = None
    for source in (needed, preload.get("cuda", []), cuda.dlopen):
        majors = {m[1] for m in map(_soname_major, source) if m and m[0] == "cudart"}
        if len(majors) == 1:
            cuda_major = majors.pop()
            break
    if cuda_major is None:
        cuda_major = _major(build_info.get("cuda_version"))
    if cuda_major is None:
        raise Failure(f"{path.name}: cannot tell the CUDA major (no libcudart.so.N, no cuda_version)")
    facts["cuda_major"] = cuda_major

    lazy: list[str] = []
    skipped: list[str] = []
    for name in [*preload.get("cuda", []), *cuda.dlopen]:
        if name in needed or name in lazy or name in skipped or not GPU_SONAME.match(name):
            continue
        lib = _soname_major(name)
        if name in DRIVER_SONAMES or (lib and lib[0] in CUDA_MAJOR_LIBS and lib[1] != cuda_major):
            skipped.append(name)
        else:
            lazy.append(name)
    facts["providers.cuda.lazy"] = lazy
    how["providers.cuda.lazy"] = ("_ld_preload.py and " if preload.get("cuda") else "") + "strings and code"
    if skipped:
        info.append(f"dlopen names not recorded (driver, or another CUDA major's fallback): {', '.join(skipped)}")

    if "tensorrt" in elves:
        trt = elves["tensorrt"]
        facts["providers.tensorrt.needed"] = [n for n in trt.needed if not SYSTEM_SONAME.match(n)]
        trt_lazy = [n for n in [*preload.get("tensorrt", []), *trt.dlopen] if GPU_SONAME.match(n) and n not in
                    facts["providers.tensorrt.needed"]]
        if trt_lazy:
            info.append(f"TensorRT provider, preloaded or named in strings but not NEEDED (not recorded): "
                        f"{', '.join(dict.fromkeys(trt_lazy))}")
    else:
        facts["providers.tensorrt.needed"] = []

    cudnn = {m[1] for m in map(_soname_major, [*needed, *lazy]) if m and m[0] == "cudnn"}
    if not cudnn:
        cudnn = {m[1] for m in map(_soname_major, facts["providers.tensorrt.needed"]) if m and m[0] == "cudnn"}
    facts["cudnn_major"] = max(cudnn) if cudnn else _major(build_info.get("cudnn_version"))

    cuda_build = build_info.get("cuda_version")
    if cuda_build:
        how["cuda_build"] = "cuda_version of build_and_package_info.py"
    else:
        for what, paths in (("provider RPATH/RUNPATH", [p for e in elves.values() for p in e.paths]),
                            ("extension module RPATH/RUNPATH", pybind_paths)):
            found = {m.group(1) for m in map(CUDA_PATH.search, paths) if m}
            if len(found) == 1:
                cuda_build = found.pop()
                how["cuda_build"] = f"{what} /usr/local/cuda-{cuda_build}"
                break
    if cuda_build:
        facts["cuda_build"] = ".".join(cuda_build.split(".")[:2])
    else:
        info.append("cuda_build: neither build_and_package_info.py nor an RPATH/RUNPATH names the CUDA version")
    meta = email.parser.HeaderParser().parsestr(metadata)
    for key, expected in (("__version__", meta.get("Version")), ("package_name", meta.get("Name"))):
        if key in build_info and expected and build_info[key] != expected:
            info.append(f"build_and_package_info.py says {key} {build_info[key]!r}, METADATA says {expected!r}")
    if build_info.get("cudnn_version"):
        info.append(f"cudnn_version {build_info['cudnn_version']} (build_and_package_info.py)")

    archs = sorted(set(cuda.sass) | set(cuda.ptx))
    if archs:
        facts["compute_capabilities"] = [f"{a // 10}.{a % 10}" for a in archs]
        how["compute_capabilities"] = "fatbin headers"
        info.append("fatbin: SASS " + ", ".join(f"sm_{a}" for a in cuda.sass) + "; PTX " +
                    (", ".join(f"compute_{a}" for a in cuda.ptx) or "none"))
    else:
        info.append("no fatbin in the CUDA provider: compute capabilities not read")

    requires_python, extras = _metadata(metadata)
    facts["requires_python"] = requires_python
    facts["extras"] = extras
    return LinuxFacts(wheel=path.name, download_mib=round(path.stat().st_size / 2**20, 1),
                      unpacked_mib=round(sum(i.file_size for i in infos) / 2**20, 1), facts=facts, how=how,
                      build_info=build_info, info=info)


_DLL_MAJOR = re.compile(r"^(cudart|cudnn)64_(\d+)\.dll$", re.IGNORECASE)


def read_windows_wheel(path: Path) -> WindowsFacts:
    import pefile  # type: ignore[import-untyped,unused-ignore]

    wanted = [pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_IMPORT"],
              pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_DELAY_IMPORT"]]
    imports: dict[str, list[str]] = {}
    with zipfile.ZipFile(path) as wheel:
        names = installed_names(wheel)
        for provider, member in PROVIDER_DLL.items():
            if member not in names:
                continue
            try:
                pe = pefile.PE(data=wheel.read(names[member]), fast_load=True)
                pe.parse_data_directories(directories=wanted)
            except pefile.PEFormatError as exc:
                raise Failure(f"{path.name}: {member}: {exc}") from exc
            dlls = [e.dll.decode("ascii", "replace") for e in getattr(pe, "DIRECTORY_ENTRY_IMPORT", [])]
            dlls += [e.dll.decode("ascii", "replace") for e in getattr(pe, "DIRECTORY_ENTRY_DELAY_IMPORT", [])]
            imports[provider] = list(dict.fromkeys(dlls))
    if "cuda" not in imports:
        raise Failure(f"{path.name}: no {PROVIDER_DLL['cuda']}")
    majors: dict[str, set[int]] = {"cudart": set(), "cudnn": set()}
    for dll in [*imports["cuda"], *imports.get("tensorrt", [])]:
        m = _DLL_MAJOR.match(dll)
        if m:
            digits = m.group(2)
            # cudart64_110.dll is CUDA 11.0, cudart64_12.dll CUDA 12, cudart64_101.dll CUDA 10.1.
            value = int(digits[:-1]) if m.group(1).lower() == "cudart" and len(digits) == 3 else int(digits)
            majors[m.group(1).lower()].add(value)
    return WindowsFacts(wheel=path.name, imports=imports,
                        cuda_major=max(majors["cudart"]) if majors["cudart"] else None,
                        cudnn_major=max(majors["cudnn"]) if majors["cudnn"] else None)


def is_system_dll(name: str) -> bool:
    lower = name.lower()
    return lower.startswith(("api-ms-win-", "msvcp", "vcruntime", "ucrtbase", "kernel32", "advapi32", "user32",
                             "ole32", "shell32", "ws2_32", "bcrypt", "dbghelp", "setupapi", "onnxruntime"))


# --------------------------------------------------------------------------------------------------------------
# pip: releases, tags, wheels
# --------------------------------------------------------------------------------------------------------------


@dataclass
class Pip:
    python: str
    find_links: list[Path]
    no_index: bool

    def index_args(self) -> list[str]:
        args = [a for d in self.find_links for a in ("--find-links", str(d))]
        return [*args, "--no-index"] if self.no_index else args

    def run(self, args: Sequence[str]) -> subprocess.CompletedProcess[str]:
        cmd = [self.python, "-m", "pip", *args, *self.index_args(), "--disable-pip-version-check"]
        return subprocess.run(cmd, capture_output=True, text=True, check=False)

    def versions(self, package: str, python: str, family: str) -> list[str]:
        args = ["index", "versions", package, "--python-version", python]
        args += [a for tag in platform_tags(family) for a in ("--platform", tag)]
        proc = self.run(args)
        if proc.returncode != 0:
            if "No matching distribution" in proc.stderr:
                return []
            raise Failure(f"pip index versions failed (python {python}, {family}): "
                          f"{_last_line(proc.stderr) or proc.returncode}")
        m = re.search(r"^Available versions: (.*)$", proc.stdout, re.MULTILINE)
        if m:
            return [v.strip() for v in m.group(1).split(",") if v.strip()]
        m = re.search(rf"^{re.escape(package)} \(([^)]+)\)", proc.stdout, re.MULTILINE | re.IGNORECASE)
        return [m.group(1)] if m else []

    def listing(self, package: str, pythons: Sequence[str],
                families: Sequence[str]) -> dict[str, dict[str, set[str]]]:
        """version -> {"python_tags": {...}, "platforms": {...}, "<family>": {python tags}}, from one `pip index
        versions` per Python and platform family. The range of Pythons grows past either end while that end still
        has wheels, so a new CPython is found without changing the default."""
        out: dict[str, dict[str, set[str]]] = {}

        def probe(batch: Sequence[str]) -> set[str]:
            """Probe these Pythons on every family; the Pythons that have at least one wheel."""
            combos = [(py, fam) for fam in families for py in batch]
            hits: set[str] = set()
            with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
                for (py, fam), versions in zip(combos, pool.map(lambda c: self.versions(package, *c), combos)):
                    for v in versions:
                        hits.add(py)
                        entry = out.setdefault(str(Version(v)), {"python_tags": set(), "platforms": set()})
                        tag = "cp" + py.replace(".", "")
                        entry["python_tags"].add(tag)
                        entry["platforms"].add(fam)
                        entry.setdefault(fam, set()).add(tag)
            return hits

        minors = sorted(int(py.split(".")[1]) for py in pythons)
        hits = probe(pythons)
        low, high = minors[0], minors[-1]
        while f"3.{high}" in hits:
            high += 1
            hits |= probe([f"3.{high}"])
        while f"3.{low}" in hits and low > 0:
            low -= 1
            hits |= probe([f"3.{low}"])
        return out

    def download(self, package: str, version: str, python: str, family: str, dest: Path) -> None:
        args = ["download", "--no-deps", "--only-binary=:all:", "--python-version", python, "-d", str(dest),
                f"{package}=={version}", *(a for tag in platform_tags(family) for a in ("--platform", tag))]
        proc = self.run(args)
        if proc.returncode != 0:
            raise Failure(f"pip download {package}=={version} (python {python}, {family}) failed: "
                          f"{_last_line(proc.stderr) or proc.returncode}")


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip() and not line.startswith("WARNING")]
    return lines[-1] if lines else ""


def local_wheels(folders: Iterable[Path], package: str) -> list[tuple[Path, str, set[str], set[str]]]:
    """(path, version, python tags, platform families) of every wheel of `package` in `folders`."""
    out = []
    want = canonicalize_name(package)
    for folder in folders:
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.whl")):
            try:
                name, version, _, tags = parse_wheel_filename(path.name)
            except (InvalidWheelFilename, InvalidVersion):
                continue
            if name != want:
                continue
            families = {f for t in tags if (f := family_of(t.platform))}
            out.append((path, str(version), {t.interpreter for t in tags}, families))
    return out


def _py_key(tag: str) -> tuple[int, ...]:
    digits = tag[2:].rstrip("t")
    return (int(digits[0]), int(digits[1:] or 0)) if digits.isdigit() else (0,)


def pick_wheel(version: str, family: str, prefer: str, folders: Sequence[Path], package: str) -> Path | None:
    candidates = [(p, tags) for p, v, tags, fams in local_wheels(folders, package)
                  if Version(v) == Version(version) and family in fams]
    if not candidates:
        return None
    candidates.sort(key=lambda c: (prefer in c[1], max((_py_key(t) for t in c[1]), default=(0,))), reverse=True)
    return candidates[0][0]


def obtain(pip: Pip, package: str, version: str, family: str, prefer: str, folders: Sequence[Path],
           cache: Path, listing: Mapping[str, Any] | None, download: bool) -> Path | None:
    path = pick_wheel(version, family, prefer, [*folders, cache], package)
    if path is not None or not download:
        return path
    tags = sorted((listing or {}).get(family, set()), key=_py_key)
    python_tag = prefer if (not tags or prefer in tags) else tags[-1]
    python = f"{python_tag[2]}.{python_tag[3:]}"
    pip.download(package, version, python, family, cache)
    path = pick_wheel(version, family, prefer, [cache], package)
    if path is None:
        raise Failure(f"pip download {package}=={version} ({family}) left no wheel in {cache}")
    return path


# --------------------------------------------------------------------------------------------------------------
# Comparing facts with rows
# --------------------------------------------------------------------------------------------------------------


def get_path(row: Mapping[str, Any], dotted: str) -> Any:
    node: Any = row
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def set_path(row: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = row
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value


def del_path(row: dict[str, Any], dotted: str) -> None:
    parts = dotted.split(".")
    chain = [row]
    for part in parts[:-1]:
        if part not in chain[-1]:
            return
        chain.append(chain[-1][part])
    chain[-1].pop(parts[-1], None)
    for parent, part in zip(reversed(chain[:-1]), reversed(parts[:-1])):
        if parent[part] == {} or (part == "tensorrt" and not parent[part].get("needed")):
            parent.pop(part)


def normal(dotted: str, value: Any) -> Any:
    """The value as compared: lists of names as sets, absent lists and maps as empty, specifiers parsed."""
    if dotted in SET_FIELDS:
        return frozenset(value or ())
    if dotted == "extras":
        return frozenset((k, frozenset(v or ())) for k, v in (value or {}).items())
    if dotted == "requires_python" and value:
        try:
            return str(SpecifierSet(value))
        except InvalidSpecifier:
            return value
    return value


def same(dotted: str, a: Any, b: Any) -> bool:
    return bool(normal(dotted, a) == normal(dotted, b))


def canonical(dotted: str, value: Any) -> Any:
    """The value as written."""
    if dotted == "compute_capabilities":
        return sorted(value, key=Version)
    if dotted == "python_tags":
        return sorted(value, key=_py_key)
    if dotted == "platforms":
        return [p for p in PLATFORM_ORDER if p in value]
    return value


def show(value: Any) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, (set, frozenset)):
        value = sorted(value)
    return json.dumps(value, ensure_ascii=False)


@dataclass
class Release:
    version: str
    linux: LinuxFacts | None = None
    windows: WindowsFacts | None = None
    listing: dict[str, set[str]] | None = None

    def facts(self, skip: Sequence[str]) -> dict[str, Any]:
        """Every field this run read for this version."""
        out: dict[str, Any] = dict(self.linux.facts) if self.linux else {}
        if self.listing is not None:
            out["python_tags"] = canonical("python_tags", self.listing["python_tags"])
            out["platforms"] = canonical("platforms", self.listing["platforms"])
        return {k: v for k, v in out.items() if k not in skip}


def version_key(v: str) -> Version:
    return Version(v)


# --------------------------------------------------------------------------------------------------------------
# Writing: patch the YAML text field by field, so that what did not change keeps its bytes
# --------------------------------------------------------------------------------------------------------------


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(str(value), ensure_ascii=False)


def emit(key: str, value: Any, indent: int) -> list[str]:
    """`key: value` in the file's style: quoted strings, flow lists that fit in WIDTH columns else block lists,
    block maps (size_mib as a flow map)."""
    pad = " " * indent
    if isinstance(value, list):
        flow = "[" + ", ".join(_scalar(v) for v in value) + "]"
        if not value or len(pad) + len(key) + 2 + len(flow) <= WIDTH:
            return [f"{pad}{key}: {flow}"]
        return [f"{pad}{key}:", *(f"{pad}  - {_scalar(v)}" for v in value)]
    if isinstance(value, dict):
        if key == "size_mib":
            return [f"{pad}{key}: {{" + ", ".join(f"{k}: {_scalar(v)}" for k, v in value.items()) + "}"]
        lines = [f"{pad}{key}:"]
        for k, v in value.items():
            lines += emit(k, v, indent + 2)
        return lines
    return [f"{pad}{key}: {_scalar(value)}"]


def emit_row(row: Mapping[str, Any]) -> list[str]:
    lines: list[str] = []
    for key in [*(k for k in ROW_ORDER if k in row), *(k for k in row if k not in ROW_ORDER)]:
        lines += emit(key, row[key], 4)
    lines[0] = "  - " + lines[0][4:]
    return lines


def last_line(node: yaml.Node) -> int:
    """The last line (0-based) holding text of `node`: block collections end where their last child ends."""
    if isinstance(node, yaml.ScalarNode) or getattr(node, "flow_style", False):
        end = node.end_mark
        return int(end.line if end.column > 0 else end.line - 1)
    children: list[yaml.Node] = []
    if isinstance(node, yaml.MappingNode):
        children = [n for pair in node.value for n in pair]
    elif isinstance(node, yaml.SequenceNode):
        children = list(node.value)
    return max([int(node.start_mark.line), *(last_line(c) for c in children)])


def patch_mapping(lines: list[str], node: yaml.MappingNode, old: Mapping[str, Any], new: Mapping[str, Any],
                  indent: int, order: Sequence[str], base: int) -> list[tuple[int, int, list[str]]]:
    """Edits (first line, last line + 1, replacement) that turn `old` (the mapping `node` spans, block style) into
    `new`; line numbers relative to `base`. Unchanged keys keep their text; `providers` is patched key by key."""
    edits: list[tuple[int, int, list[str]]] = []
    spans = {k.value: (int(k.start_mark.line) - base, last_line(v) - base + 1, v) for k, v in node.value}
    first_key = node.value[0][0].value if node.value else None
    for key in old:
        if key not in new and key in spans:
            start, end, _ = spans[key]
            edits.append((start, end, []))
    for key, value in new.items():
        if key in old and old[key] == value:
            continue
        if key in spans:
            start, end, child = spans[key]
            if (isinstance(value, dict) and isinstance(old.get(key), dict) and isinstance(child, yaml.MappingNode)
                    and not child.flow_style and key in NESTED_ORDER and child.value):
                edits += patch_mapping(lines, child, old[key], value, indent + 2, NESTED_ORDER[key], base)
                continue
            text = emit(key, value, indent)
            if key == first_key and lines[start].lstrip().startswith("- "):
                text[0] = lines[start][: len(lines[start]) - len(lines[start].lstrip()) + 2] + text[0][indent:]
            edits.append((start, end, text))
        else:
            # A new key goes after the nearest key before it in `order`, or before the first key when none is.
            position = list(order).index(key) if key in order else len(order)
            before = [k for k in order[:position] if k in spans] or ([k for k in spans if k not in order][-1:])
            at = max(spans[k][1] for k in before) if before else min(s[0] for s in spans.values())
            edits.append((at, at, emit(key, value, indent)))
    return edits


def apply_edits(lines: list[str], edits: Iterable[tuple[int, int, list[str]]]) -> list[str]:
    out = list(lines)
    for start, end, text in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        out[start:end] = text
    return out


# --------------------------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------------------------


@dataclass
class Plan:
    """What the file says against what the wheels say, and what --write would make of each row."""
    problems: list[str] = field(default_factory=list)
    unfixable: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # Per row of the file, in order: the rows it becomes, each with its text (a split row gives several; a release
    # the file lacks is added to the slot of the row it follows).
    slots: list[list[tuple[dict[str, Any], list[str]]]] = field(default_factory=list)
    changed: bool = False

    def rows(self) -> list[dict[str, Any]]:
        return [row for slot in self.slots for row, _ in slot]


def plan(doc: Mapping[str, Any], node: yaml.MappingNode, lines: list[str], releases: Mapping[str, Release],
         package: str, skip: Sequence[str], authoritative_listing: bool, today: str) -> Plan:
    result = Plan()
    rows: list[dict[str, Any]] = doc["releases"]
    row_nodes: list[yaml.Node] = next(v for k, v in node.value if k.value == "releases").value

    def ours(row: Mapping[str, Any]) -> bool:
        return bool(row["index"] == "default" and row["package"] == package)

    def compare(version: str, row: Mapping[str, Any]) -> dict[str, Any]:
        """This version's facts: as the wheels say them where read, as the row says them otherwise."""
        rel = releases.get(version)
        facts = {f: get_path(row, f) for f in FIELDS}
        if rel is None:
            return facts
        for f, value in rel.facts(skip).items():
            if not same(f, facts[f], value):
                result.problems.append(f"{version}: {f}: file says {show(facts[f])}, wheel says {show(value)}")
                facts[f] = canonical(f, value)
        if rel.windows is not None:
            for f, value in (("cuda_major", rel.windows.cuda_major), ("cudnn_major", rel.windows.cudnn_major)):
                if value is not None and f"win_amd64.{f}" not in skip and value != row.get(f):
                    message = f"{version}: win_amd64.{f}: file says {show(row.get(f))}, wheel says {value}"
                    result.problems.append(message)
                    result.unfixable.append(f"{message} (the matrix has no Windows field)")
        size = row.get("size_mib")
        if rel.linux is not None and size and size.get("measured") == rel.linux.wheel and "size_mib" not in skip:
            read = {"download": rel.linux.download_mib, "unpacked": rel.linux.unpacked_mib}
            if any(abs(float(size[k]) - read[k]) > 0.05 for k in read):
                result.problems.append(f"{version}: size_mib: file says {show({k: size[k] for k in read})}, "
                                       f"wheel says {show(read)}")
        return facts

    placed: set[str] = set()
    for i, row in enumerate(rows):
        text = lines[int(row_nodes[i].start_mark.line):last_line(row_nodes[i]) + 1]
        if not ours(row):
            result.slots.append([(row, text)])
            continue
        groups: list[tuple[list[str], dict[str, Any]]] = []
        for v in row["versions"]:
            placed.add(str(Version(v)))
            facts = compare(str(Version(v)), row)
            key = {f: normal(f, facts[f]) for f in FIELDS}
            for versions, group_facts in groups:
                if {f: normal(f, group_facts[f]) for f in FIELDS} == key:
                    versions.append(v)
                    break
            else:
                groups.append(([v], facts))
        unread = [v for v in row["versions"] if (r := releases.get(str(Version(v)))) is None or r.linux is None]
        if len(groups) > 1 and unread:
            result.notes.append(f"row {', '.join(row['versions'])}: split; {', '.join(unread)} not read, so "
                                f"{'it keeps' if len(unread) == 1 else 'they keep'} the file's facts (read "
                                f"{'it' if len(unread) == 1 else 'them'} too to tell whether the whole row is wrong)")
        slot = []
        for versions, facts in groups:
            new = rewrite_row(row, versions, facts, releases, today)
            slot.append((row, text) if new == row else (new, patch_text(text, row, new)))
        result.slots.append(slot)

    for version in sorted(releases, key=version_key):
        if version in placed:
            continue
        rel = releases[version]
        if rel.linux is None or any(f in skip for f in ("cuda_major", "cudnn_major", "providers.cuda.needed")):
            result.problems.append(f"{version}: versions: file says nothing, wheel says {package} {version} is "
                                   f"published (not read, so not added)")
            result.unfixable.append(f"{version}: not in the file and its wheel was not read")
            continue
        facts = {f: canonical(f, v) for f, v in rel.facts(skip).items()}
        result.problems.append(f"{version}: versions: file says nothing, wheel says {package} {version}")
        add_release(result.slots, version, facts, releases, package, today, ours)

    if authoritative_listing:
        for row in rows:
            for v in row["versions"] if ours(row) else ():
                if str(Version(v)) not in releases:
                    message = (f"{v}: index: file says \"default\", wheel says pip lists no {package} {v} for any "
                               f"probed Python and platform")
                    result.problems.append(message)
                    result.unfixable.append(message)
    result.changed = any(len(slot) != 1 or slot[0][0] is not row for slot, row in zip(result.slots, rows))
    return result


def add_release(slots: list[list[tuple[dict[str, Any], list[str]]]], version: str, facts: Mapping[str, Any],
                releases: Mapping[str, Release], package: str, today: str, ours: Any) -> None:
    """Put a release the file lacks into the nearest default row below or above it when every fact matches, else
    into a row of its own right after the row below it (before the row above it when none is below)."""
    where = [(s, k) for s, slot in enumerate(slots) for k, (row, _) in enumerate(slot) if ours(row)]
    want = Version(version)
    lower = [w for w in where if max(Version(v) for v in slots[w[0]][w[1]][0]["versions"]) < want]
    upper = [w for w in where if min(Version(v) for v in slots[w[0]][w[1]][0]["versions"]) > want]
    below = max(lower, key=lambda w: max(Version(v) for v in slots[w[0]][w[1]][0]["versions"]), default=None)
    above = min(upper, key=lambda w: min(Version(v) for v in slots[w[0]][w[1]][0]["versions"]), default=None)
    for w in (below, above):
        if w is None:
            continue
        row, text = slots[w[0]][w[1]]
        if all(same(f, get_path(row, f), facts.get(f, get_path(row, f))) for f in FIELDS):
            versions = sorted([*row["versions"], version], key=version_key)
            new = rewrite_row(row, versions, {f: get_path(row, f) for f in FIELDS}, releases, today)
            slots[w[0]][w[1]] = (new, patch_text(text, row, new))
            return
    new = new_row(version, facts, releases, package, today)
    if below is not None:
        slots[below[0]].insert(below[1] + 1, (new, emit_row(new)))
    elif above is not None:
        slots[above[0]].insert(above[1], (new, emit_row(new)))
    else:
        slots[-1].append((new, emit_row(new)))


def _wheels(read: Sequence[LinuxFacts]) -> str:
    """'the onnxruntime_gpu 1.21.0, 1.22.0 cp311 manylinux x86_64 wheels'."""
    versions, pythons = [], set()
    for lf in read:
        name, version, _, tags = parse_wheel_filename(lf.wheel)
        versions.append(str(version))
        pythons |= {t.interpreter for t in tags}
    dist = re.sub(r"[-_.]+", "_", str(name))
    return (f"the {dist} {', '.join(versions)} {'/'.join(sorted(pythons, key=_py_key))} manylinux x86_64 "
            f"wheel{'s' if len(read) > 1 else ''}")


def _source(versions: Sequence[str], releases: Mapping[str, Release], fields: Sequence[str], today: str) -> str:
    """A new row's `source`, or (with `fields`) the '; updated by' note of a rewritten one."""
    read = [lf for v in versions if (r := releases.get(str(Version(v)))) and (lf := r.linux)]
    listed = any((r := releases.get(str(Version(v)))) and r.listing is not None for v in versions)
    hows = sorted({lf.how["cuda_build"] for lf in read if "cuda_build" in lf.how})
    cuda_build = f"; cuda_build from {' / '.join(hows)}" if hows and (not fields or "cuda_build" in fields) else ""
    index = "python tags and platforms from pip index versions"
    date = today.replace(".", "-")
    if fields:
        origin = " and ".join(([_wheels(read)] if read else []) + (["pip index versions"] if listed else []))
        return f"updated by {SCRIPT} on {date} ({', '.join(fields)}){' from ' + origin if origin else ''}{cuda_build}"
    parts = []
    if read:
        parts.append("DT_NEEDED, dlopen names (strings, names built in code, _ld_preload.py) and fatbin headers of "
                     f"libonnxruntime_providers_*.so, build_and_package_info.py and METADATA of {_wheels(read)} "
                     f"(read {date} by {SCRIPT}){cuda_build}")
    if listed:
        parts.append(index)
    return "; ".join(parts) or f"{SCRIPT} {date}"


_UPDATED = re.compile(r"; updated by scripts/ort_wheels\.py .*$")


def rewrite_row(row: Mapping[str, Any], versions: Sequence[str], facts: Mapping[str, Any],
                releases: Mapping[str, Release], today: str) -> dict[str, Any]:
    """`row` for `versions` with `facts`; `source` gains a dated '; updated by' note naming what changed."""
    new = copy.deepcopy(dict(row))
    new["versions"] = list(versions)
    changed = [] if list(versions) == list(row["versions"]) else ["versions"]
    for f in FIELDS:
        old = get_path(row, f)
        if same(f, old, facts[f]):
            continue
        changed.append(f)
        value = facts[f]
        if value in (None, [], {}) and f not in KEEP_EMPTY:
            del_path(new, f)
        else:
            set_path(new, f, [] if value is None and f in KEEP_EMPTY[2:] else value)
    size = row.get("size_mib")
    if size:
        measured = next((lf for v in versions if (r := releases.get(str(Version(v)))) and (lf := r.linux)
                         and lf.wheel == size.get("measured")), None)
        if measured is not None:
            read = {"download": measured.download_mib, "unpacked": measured.unpacked_mib}
            if any(abs(float(size[k]) - read[k]) > 0.05 for k in read):
                new["size_mib"] = {**size, **read}
                changed.append("size_mib")
        elif not any(str(size.get("measured", "")).startswith(f"{_dist(row['package'])}-{v}-") for v in versions):
            new.pop("size_mib")  # the measured wheel went to the other part of a split row
    if changed:
        new["source"] = _UPDATED.sub("", row["source"]) + "; " + _source(versions, releases, changed, today)
    return new


def _dist(package: str) -> str:
    return re.sub(r"[-_.]+", "_", package).lower()


def new_row(version: str, facts: Mapping[str, Any], releases: Mapping[str, Release], package: str,
            today: str) -> dict[str, Any]:
    row: dict[str, Any] = {"versions": [version], "package": package, "index": "default"}
    for f in FIELDS:
        value = facts.get(f)
        if f in KEEP_EMPTY:
            set_path(row, f, [] if value is None and f in KEEP_EMPTY[2:] else value)
        elif value not in (None, [], {}):
            set_path(row, f, value)
    row["source"] = _source([version], releases, [], today)
    return row


def patch_text(text: list[str], old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """The lines of a row (`text`, which holds `old`) rewritten to hold `new`."""
    wrapped = ["releases:", *text]
    root = yaml.compose("\n".join(wrapped) + "\n", Loader=yaml.SafeLoader)
    if not isinstance(root, yaml.MappingNode):
        raise Failure("internal error: a row's text does not parse as a row")
    row_node = root.value[0][1].value[0]
    return apply_edits(wrapped, patch_mapping(wrapped, row_node, old, new, 4, ROW_ORDER, 0))[1:]


def render(text: str, node: yaml.MappingNode, doc: Mapping[str, Any], result: Plan, today: str) -> str:
    lines = text.split("\n")
    row_nodes = next(v for k, v in node.value if k.value == "releases").value
    out: list[str] = []
    cursor = 0
    for row_node, slot in zip(row_nodes, result.slots):
        out += lines[cursor:int(row_node.start_mark.line)]
        for j, (_, row_text) in enumerate(slot):
            out += ([""] if j else []) + row_text
        cursor = last_line(row_node) + 1
    out += lines[cursor:]
    new_text = "\n".join(out)
    old_version = str(doc["data_version"])
    new_text, n = re.subn(r'^(data_version:\s*["\']?)' + re.escape(old_version),
                          lambda m: m.group(1) + bump(old_version, today), new_text, count=1, flags=re.MULTILINE)
    if n != 1:
        raise Failure("cannot find the data_version line to bump")
    return new_text


def bump(old: str, today: str) -> str:
    if today > old:
        return today
    day = datetime.datetime.strptime(old, "%Y.%m.%d").date() + datetime.timedelta(days=1)
    return day.strftime("%Y.%m.%d")


def parse_versions(text: str | None) -> list[str] | None:
    if not text:
        return None
    out = []
    for part in text.split(","):
        part = part.strip()
        if part:
            try:
                out.append(str(Version(part)))
            except InvalidVersion as exc:
                raise Failure(f"--versions: not a version: {part!r}") from exc
    return out


def parse_pythons(text: str) -> list[str]:
    out: list[str] = []
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        a, b = (int(x) for x in lo.split("."))
        c, d = (int(x) for x in (hi or lo).split("."))
        if a != 3 or c != 3:
            raise Failure(f"--pythons: only CPython 3.x ranges such as 3.7-3.14 are understood, not {part!r}")
        out += [f"3.{m}" for m in range(b, d + 1)]
    return list(dict.fromkeys(out))


def _validate(text: str, name: str) -> None:
    """ortfix's own validation (schema and semantic checks), as `ortfix matrix validate` runs it."""
    import importlib

    try:
        matrix = importlib.import_module("ortfix.compat.validate")
    except ImportError:
        sys.path.insert(0, str(REPO / "src"))
        matrix = importlib.import_module("ortfix.compat.validate")
    errors = importlib.import_module("ortfix.errors")
    try:
        matrix.validate_document(text.encode("utf-8"), name)
    except errors.OrtfixError as exc:
        raise Failure(f"the rewritten file would not be valid: {exc}") from exc


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="report disagreements, exit 1 if any (the default)")
    mode.add_argument("--write", action="store_true", help="rewrite the wheel-derived fields of the file")
    parser.add_argument("--file", type=Path, help="the ort-releases file (default compat/ort.yaml; with --addons, "
                                                  "the addons file, default compat/addons.yaml)")
    parser.add_argument("--addons", action="store_true",
                        help="check or write compat/addons.yaml from the wheels in the --find-links folders instead "
                             "(scripts/addons_wheels.py: TensorRT majors, genai CUDA majors and ORT minimums)")
    parser.add_argument("--package", default="onnxruntime-gpu")
    parser.add_argument("--versions", help="comma-separated releases to read (default: every one pip lists)")
    parser.add_argument("--find-links", "--wheelhouse", dest="find_links", type=Path, action="append", default=[],
                        metavar="DIR", help="a folder of wheels, used before downloading (repeatable; passed to pip)")
    parser.add_argument("--no-index", action="store_true", help="pip sees only --find-links folders")
    parser.add_argument("--no-download", action="store_true",
                        help="read only wheels already in --find-links / --cache folders")
    parser.add_argument("--cache", type=Path, help="keep downloaded wheels here (default: a temporary folder)")
    parser.add_argument("--windows", action="store_true",
                        help="also read the win_amd64 wheels' PE imports (one more download per release)")
    parser.add_argument("--python", default="3.11", help="the CPython whose wheel is read when there is a choice")
    parser.add_argument("--pythons", default="3.7-3.14",
                        help="CPython versions probed for python_tags (extended past an end that has wheels)")
    parser.add_argument("--platforms", default=",".join(PLATFORM_ORDER), help="platform families probed")
    parser.add_argument("--skip", default="", help="comma-separated fields neither checked nor written")
    parser.add_argument("--jobs", type=int, default=1, help="wheels read in parallel (each holds up to ~4 GB)")
    parser.add_argument("--pip-python", default=sys.executable, help="the Python whose pip is asked")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every fact read")
    args = parser.parse_args(argv)
    try:
        if args.addons:
            return run_addons_mode(args)
        args.file = args.file or DEFAULT_FILE
        return run(args)
    except Failure as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def run_addons_mode(args: argparse.Namespace) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from addons_wheels import AddonsFailure, run_addons

    today = datetime.date.today().strftime("%Y.%m.%d")
    try:
        return run_addons(args.file or REPO / "compat" / "addons.yaml", [d.resolve() for d in args.find_links],
                          write=args.write, bump=bump, validate=_validate, today=today)
    except AddonsFailure as exc:
        raise Failure(str(exc)) from exc


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    skip = [s.strip() for s in args.skip.split(",") if s.strip()]
    unknown = [s for s in skip if s not in (*FIELDS, "size_mib", "win_amd64.cuda_major", "win_amd64.cudnn_major")]
    if unknown:
        raise Failure(f"--skip: unknown field(s) {', '.join(unknown)}; known: {', '.join(FIELDS)}, size_mib")
    wanted = parse_versions(args.versions)
    families = [f.strip() for f in args.platforms.split(",") if f.strip()]
    if any(f not in PLATFORM_ORDER for f in families):
        raise Failure(f"--platforms: choose from {', '.join(PLATFORM_ORDER)}")
    prefer = "cp" + args.python.replace(".", "")
    if args.windows:
        try:
            import pefile  # type: ignore[import-untyped,unused-ignore]  # noqa: F401
        except ImportError as exc:
            raise Failure("--windows reads PE imports with pefile: pip install pefile") from exc
    text = args.file.read_text(encoding="utf-8")
    doc = yaml.safe_load(text)
    node = yaml.compose(text, Loader=yaml.SafeLoader)
    if not isinstance(doc, dict) or doc.get("kind") != "ort-releases" or not isinstance(node, yaml.MappingNode):
        raise Failure(f"{args.file}: not an ort-releases file")
    pip = Pip(python=args.pip_python, find_links=[d.resolve() for d in args.find_links], no_index=args.no_index)

    listing = pip.listing(args.package, parse_pythons(args.pythons), families)
    if not listing and not args.no_index:
        raise Failure(f"pip lists no {args.package} release for any probed Python and platform")
    versions = sorted(listing, key=version_key)
    if wanted is not None:
        missing = [v for v in wanted if v not in listing]
        if missing:
            print(f"note: pip lists no {', '.join(missing)}; reading them from the folders only", file=sys.stderr)
        versions = wanted
    releases = {v: Release(v, listing=listing.get(v)) for v in versions}

    with tempfile.TemporaryDirectory(prefix="ort-wheels-") as tmp:
        cache = args.cache.resolve() if args.cache else Path(tmp)
        cache.mkdir(parents=True, exist_ok=True)
        jobs: list[tuple[str, str, Path]] = []
        errors: list[str] = []
        for v in versions:
            want = ["linux_x86_64", *(["win_amd64"] if args.windows else [])]
            for family in want:
                lst = releases[v].listing
                if lst is not None and family not in lst["platforms"]:
                    print(f"{v}: no {family} wheel on the index", file=sys.stderr)
                    continue
                try:
                    path = obtain(pip, args.package, v, family, prefer, pip.find_links, cache, lst,
                                  download=not args.no_download)
                except Failure as exc:
                    errors.append(f"{v}: {exc}")
                    continue
                if path is None:
                    print(f"{v}: no {family} wheel in the folders (not read)", file=sys.stderr)
                    continue
                jobs.append((v, family, path))
        read_started = time.monotonic()
        with concurrent.futures.ProcessPoolExecutor(max_workers=max(1, args.jobs)) if args.jobs > 1 else \
                _Serial() as pool:
            futures = {pool.submit(read_linux_wheel if fam == "linux_x86_64" else read_windows_wheel, path): (v, fam)
                       for v, fam, path in jobs}
            for future, (v, _) in futures.items():
                try:
                    got = future.result()
                except Failure as exc:
                    errors.append(f"{v}: {exc}")
                    continue
                if isinstance(got, LinuxFacts):
                    releases[v].linux = got
                elif isinstance(got, WindowsFacts):
                    releases[v].windows = got
        read_s = time.monotonic() - read_started

    for v in versions:
        report_release(releases[v], args.verbose)
    today = datetime.date.today().strftime("%Y.%m.%d")
    # A release asked for that pip does not list and no folder holds tells nothing: leave it out.
    selected = {v: r for v, r in releases.items() if r.linux is not None or r.listing is not None}
    result = plan(doc, node, text.split("\n"), selected, args.package, skip,
                  authoritative_listing=wanted is None and not args.no_index, today=today)
    for note in result.notes:
        print(f"note: {note}")
    for problem in result.problems:
        print(problem)
    linux = sum(1 for r in releases.values() if r.linux)
    windows = sum(1 for r in releases.values() if r.windows)
    print(f"{linux} Linux" + (f" and {windows} win_amd64" if args.windows else "") + f" wheel(s) read in "
          f"{read_s:.1f} s ({time.monotonic() - started:.1f} s in all): {len(result.problems)} disagreement(s) "
          f"with {args.file}")
    for error in errors:
        print(f"error: {error}", file=sys.stderr)
    if errors:
        print(f"{len(errors)} wheel(s) could not be read: nothing written", file=sys.stderr)
        return 2
    if not args.write:
        return 1 if result.problems else 0
    if result.changed:
        new_text = render(text, node, doc, result, today)
        expected = {**doc, "data_version": bump(str(doc["data_version"]), today), "releases": result.rows()}
        if yaml.safe_load(new_text) != expected:
            raise Failure("internal error: the patched text does not parse to the rows it should hold; "
                          "file not written")
        _validate(new_text, str(args.file))
        args.file.write_text(new_text, encoding="utf-8")
        print(f"{args.file}: written (data_version {expected['data_version']})")
    else:
        print(f"{args.file}: nothing to change")
    for left in result.unfixable:
        print(f"not fixable here: {left}")
    return 1 if result.unfixable else 0


class _Serial:
    """ProcessPoolExecutor's interface, run in this process (--jobs 1)."""

    def __enter__(self) -> _Serial:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def submit(self, fn: Any, *args: Any) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        try:
            future.set_result(fn(*args))
        except BaseException as exc:  # re-raised by result()
            future.set_exception(exc)
        return future


def report_release(rel: Release, verbose: bool) -> None:
    if rel.linux is not None:
        lf = rel.linux
        f = lf.facts
        line = (f"{rel.version}: {lf.wheel} ({lf.download_mib} MiB, {lf.unpacked_mib} MiB unpacked): "
                f"CUDA {f['cuda_major']}" + (f" (built with {f['cuda_build']})" if f.get("cuda_build") else "")
                + f", cuDNN {f['cudnn_major']}")
        print(line)
        if verbose:
            for key in FIELDS:
                if key in f:
                    print(f"    {key}: {show(f[key])}" + (f"  [{lf.how[key]}]" if key in lf.how else ""))
            if lf.build_info:
                print(f"    build_and_package_info.py: {show(lf.build_info)}")
        for item in lf.info:
            print(f"    {item}")
    if rel.windows is not None:
        for provider, dlls in rel.windows.imports.items():
            gpu = [d for d in dlls if not is_system_dll(d)]
            print(f"{rel.version}: {rel.windows.wheel}: onnxruntime_providers_{provider}.dll imports "
                  f"{', '.join(gpu) or 'no CUDA DLL'}")
    if verbose and rel.listing is not None:
        print(f"    index: {', '.join(canonical('python_tags', rel.listing['python_tags']))} on "
              f"{', '.join(canonical('platforms', rel.listing['platforms']))}")


if __name__ == "__main__":
    sys.exit(main())
