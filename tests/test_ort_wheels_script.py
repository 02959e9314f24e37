"""scripts/ort_wheels.py run as a user runs it (a subprocess with real pip), on real wheels.

The hermetic wheels are real zip files (support.fixtures.build_wheel: METADATA, WHEEL, RECORD) in a --find-links
folder that pip itself lists (--no-index, no pip configuration). Their CUDA provider is compiled by gcc: its DT_NEEDED
entries come from linking against stub libraries with the wanted SONAMEs, it holds the dlopen names as C strings,
builds one name on the stack (so that no string constant holds it), and carries a hand-made `.nv_fatbin` section.
The win_amd64 wheels hold a hand-made PE32+ DLL whose import directory names the DLLs a test plants. Every expected
value below is what the test planted, never something computed by the script.

The `realwheels` test downloads the real onnxruntime-gpu 1.19.2 wheels (Linux and Windows) through the configured
index and checks that the script finds compat/ort.yaml right about them.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.fixtures import build_stub_lib, build_wheel
from support.testcache import cache_root

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "ort_wheels.py"
PACKAGE = "onnxruntime-gpu"
LINUX_TAG = "{py}-{py}-manylinux_2_27_x86_64.manylinux_2_28_x86_64"
PYTHONS = ("cp311", "cp312")

CU12_NEEDED = ("libcublasLt.so.12", "libcublas.so.12", "libcurand.so.10", "libcufft.so.11", "libcudart.so.12")
TRT_NEEDED = ("libcublas.so.12", "libnvinfer.so.10", "libnvonnxparser.so.10", "libcudart.so.12", "libcudnn.so.9")
EXTRAS = {"cuda": ["nvidia-cuda-runtime-cu12~=12.0", "nvidia-cufft-cu12~=11.0"], "cudnn": ["nvidia-cudnn-cu12~=9.0"]}


@dataclass
class Build:
    """What one hermetic onnxruntime-gpu release holds (everything the script should read back)."""

    version: str
    needed: Sequence[str] = CU12_NEEDED
    strings: Sequence[str] = ("libnvrtc.so.12",)  # dlopen names held as C strings
    built: str | None = "libcudnn.so.9"  # a dlopen name assembled on the stack
    archs: Sequence[tuple[int, int]] = ((2, 75), (2, 86), (2, 90), (1, 90))  # fatbin entries (kind, arch)
    trt_needed: Sequence[str] | None = TRT_NEEDED
    cuda_version: str | None = "12.4"
    runpath: Sequence[str] | None = None
    preload: Sequence[str] = ()  # CDLL names of _ld_preload.py (builds before 1.16)
    extras: Mapping[str, Sequence[str]] = field(default_factory=lambda: EXTRAS)
    requires_python: str | None = ">=3.11"
    pythons: Sequence[str] = PYTHONS
    windows: Sequence[str] | None = ("cublas64_12.dll", "cudart64_12.dll", "cudnn64_9.dll", "KERNEL32.dll")


# --------------------------------------------------------------------------------------------------------------
# Building the wheels
# --------------------------------------------------------------------------------------------------------------


def fatbin(entries: Sequence[tuple[int, int]]) -> bytes:
    """One fatbin container (magic 0xBA55ED50) holding one entry per (kind, arch): kind 1 PTX, 2 cubin; 64-byte entry
    headers with the architecture at offset 28, then a small payload."""
    body = b""
    for kind, arch in entries:
        payload = bytes(range(16))
        body += struct.pack("<HHIQIIHHIIIQQQ", kind, 0x0101, 64, len(payload), 0, 0, 0, 0, arch, 0, 0, 0, 0, 0)
        body += payload
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body


def c_bytes(data: bytes) -> str:
    return ", ".join(str(b) for b in data)


def cuda_provider(tmp: Path, build: Build) -> Path:
    """libonnxruntime_providers_cuda.so compiled by gcc: NEEDED exactly `build.needed` (linked against SONAME stubs,
    -nostdlib), the `strings` as constants, `built` assembled from two overlapping 8-byte immediates on the stack,
    and a .nv_fatbin section with `archs`."""
    stubs = [str(build_stub_lib(tmp / f"stub-{name}", soname=name)) for name in build.needed]
    source = ["extern void *ortfix_open(const char *name, int flags);"]
    source += [f'__attribute__((used)) const char ortfix_name_{i}[] = "{s}";' for i, s in enumerate(build.strings)]
    if build.built:
        head, tail, n = build.built[:8], build.built[-8:], len(build.built)
        source.append(f'void *ortfix_load(void) {{ char name[32]; __builtin_memcpy(name, "{head}", 8); '
                      f'__builtin_memcpy(name + {n - 8}, "{tail}", 8); name[{n}] = 0; return ortfix_open(name, 2); }}')
    if build.archs:
        source.append('__attribute__((used, section(".nv_fatbin"), aligned(8))) const unsigned char ortfix_fatbin[] '
                      f"= {{{c_bytes(fatbin(build.archs))}}};")
    src = tmp / f"provider-{build.version}.c"
    src.write_text("\n".join(source) + "\n")
    out = tmp / f"libonnxruntime_providers_cuda-{build.version}.so"
    argv = ["gcc", "-shared", "-fPIC", "-O2", "-nostdlib", "-o", str(out), str(src), "-Xlinker", "--no-as-needed",
            *stubs]
    if build.runpath:
        argv += ["-Xlinker", "--enable-new-dtags", "-Xlinker", "-rpath", "-Xlinker", ":".join(build.runpath)]
    subprocess.run(argv, check=True, capture_output=True, text=True)
    if build.built:
        # The point of `built`: no string constant holds it, only the code that assembles it.
        assert build.built.encode() not in out.read_bytes(), "gcc kept the assembled name as a string constant"
    return out


def pe_dll(dlls: Sequence[str]) -> bytes:
    """A minimal PE32+ DLL (x86-64) whose import directory imports one function from each of `dlls`."""
    rva, file_align, section_align = 0x1000, 0x200, 0x1000
    body = bytearray(20 * (len(dlls) + 1))  # the import descriptors, then a null one
    for i, dll in enumerate(dlls):
        thunks = len(body)
        body += bytes(32)  # lookup table and address table, one entry and a terminator each
        hint = len(body)
        body += b"\0\0ortfix_fn\0\0"
        name = len(body)
        body += dll.encode() + b"\0"
        struct.pack_into("<QQQQ", body, thunks, rva + hint, 0, rva + hint, 0)
        struct.pack_into("<IIIII", body, 20 * i, rva + thunks, 0, 0, rva + name, rva + thunks + 16)
    raw = (len(body) + file_align - 1) // file_align * file_align
    image = rva + (len(body) + section_align - 1) // section_align * section_align
    dos = b"MZ" + bytes(0x3A) + struct.pack("<I", 0x40)
    coff = b"PE\0\0" + struct.pack("<HHIIIHH", 0x8664, 1, 0, 0, 0, 240, 0x2022)
    optional = struct.pack("<HBBIIIIIQIIHHHHHHIIIIHHQQQQII", 0x20B, 14, 0, 0, raw, 0, 0, rva, 0x180000000,
                           section_align, file_align, 6, 0, 0, 0, 6, 0, 0, image, file_align, 0, 2, 0x160,
                           0x100000, 0x1000, 0x100000, 0x1000, 0, 16)
    directories = [(0, 0)] * 16
    directories[1] = (rva, 20 * (len(dlls) + 1))
    optional += b"".join(struct.pack("<II", *d) for d in directories)
    section = struct.pack("<8sIIIIIIHHI", b".idata", len(body), rva, raw, file_align, 0, 0, 0, 0, 0xC0000040)
    headers = dos + coff + optional + section
    return headers + bytes(file_align - len(headers)) + bytes(body) + bytes(raw - len(body))


def build_release(out: Path, build: Build, tmp: Path) -> None:
    capi = "onnxruntime/capi"
    info = f"package_name = '{PACKAGE}'\n__version__ = '{build.version}'\n"
    if build.cuda_version:
        info += f"cuda_version = '{build.cuda_version}'\n"
    preload = "from ctypes import CDLL, RTLD_GLOBAL\ntry:\n"
    preload += "".join(f'    _l{i} = CDLL("{name}", mode=RTLD_GLOBAL)\n' for i, name in enumerate(build.preload))
    preload += '    pass\nexcept OSError:\n    import os\n    os.environ["ORT_CUDA_UNAVAILABLE"] = "1"\n'
    files: dict[str, bytes | Path] = {
        "onnxruntime/__init__.py": f'__version__ = "{build.version}"\n'.encode(),
        f"{capi}/build_and_package_info.py": info.encode(),
        f"{capi}/_ld_preload.py": (preload if build.preload else "# nothing to preload\n").encode(),
        f"{capi}/libonnxruntime_providers_cuda.so": cuda_provider(tmp, build),
        f"{capi}/libonnxruntime_providers_shared.so": build_stub_lib(tmp / "shared.so", soname=None),
        f"{capi}/onnxruntime_pybind11_state.cpython-311-x86_64-linux-gnu.so":
            build_stub_lib(tmp / "pybind.so", soname=None, runpath=["$ORIGIN"]),
    }
    if build.trt_needed is not None:
        files[f"{capi}/libonnxruntime_providers_tensorrt.so"] = build_stub_lib(
            tmp / f"trt-{build.version}.so", soname=None, needed=build.trt_needed)
    for py in build.pythons:
        build_wheel(out, PACKAGE, build.version, files, extras=build.extras, tag=LINUX_TAG.format(py=py),
                    requires_python=build.requires_python)
        if build.windows is not None:
            win = {"onnxruntime/__init__.py": files["onnxruntime/__init__.py"],
                   f"{capi}/onnxruntime_providers_cuda.dll": pe_dll(build.windows),
                   f"{capi}/onnxruntime_providers_shared.dll": pe_dll(["KERNEL32.dll"])}
            build_wheel(out, PACKAGE, build.version, win, extras=build.extras, tag=f"{py}-{py}-win_amd64",
                        requires_python=build.requires_python)


def wheelhouse(tmp: Path, *builds: Build) -> Path:
    house = tmp / "wheelhouse"
    work = tmp / "build"
    work.mkdir(parents=True, exist_ok=True)
    for build in builds:
        build_release(house, build, work)
    return house


# --------------------------------------------------------------------------------------------------------------
# The matrix file and the script
# --------------------------------------------------------------------------------------------------------------

# Right about 1.40.x but for the planted errors marked below (see Build's defaults for what the wheels hold).
MATRIX = """\
# A matrix for the tests: this comment, the alternate row and the note must survive a --write.
schema_version: 1
kind: "ort-releases"
data_version: "2020.01.01"

releases:
  - versions: ["1.40.0", "1.40.1"]
    package: "onnxruntime-gpu"
    index: "default"
    cuda_major: 12
    cuda_build: "12.2"
    cudnn_major: 9
    providers:
      cuda:
        needed: ["libcublasLt.so.12", "libcublas.so.12", "libcurand.so.10", "libcudart.so.12"]
        lazy: ["libcudnn.so.9"]
      tensorrt:
        needed: ["libcublas.so.12", "libnvinfer.so.10", "libnvonnxparser.so.10", "libcudart.so.12", "libcudnn.so.9"]
    compute_capabilities: ["7.5", "8.6"]
    extras:
      cuda: ["nvidia-cuda-runtime-cu12~=12.0", "nvidia-cufft-cu12~=11.0"]
      cudnn: ["nvidia-cudnn-cu12~=9.0"]
    requires_python: ">=3.11"
    python_tags: ["cp311"]
    platforms: ["linux_x86_64", "win_amd64"]
    source: "hand-written for the test"
    note: "a hand-written note"

  # Only on a separate feed: the script cannot read it and must leave it alone.
  - versions: ["1.40.0"]
    package: "onnxruntime-gpu"
    index: "alternate"
    cuda_major: 11
    cuda_build: null
    cudnn_major: 8
    providers:
      cuda:
        needed: ["libcudart.so.11.0"]
    source: "derived, not read"
"""
PLANTED = {
    "cuda_build": ('"12.2"', '"12.4"'),
    "providers.cuda.needed": ('["libcublasLt.so.12", "libcublas.so.12", "libcurand.so.10", "libcudart.so.12"]',
                              '["libcublasLt.so.12", "libcublas.so.12", "libcurand.so.10", "libcufft.so.11", '
                              '"libcudart.so.12"]'),
    "providers.cuda.lazy": ('["libcudnn.so.9"]', '["libcudnn.so.9", "libnvrtc.so.12"]'),
    "compute_capabilities": ('["7.5", "8.6"]', '["7.5", "8.6", "9.0"]'),
    "python_tags": ('["cp311"]', '["cp311", "cp312"]'),
}
# What the 1.40.x row must say once written: the Build defaults, spelled out.
RIGHT_ROW = {
    "cuda_major": 12,
    "cuda_build": "12.4",
    "cudnn_major": 9,
    "providers": {"cuda": {"needed": list(CU12_NEEDED), "lazy": ["libcudnn.so.9", "libnvrtc.so.12"]},
                  "tensorrt": {"needed": list(TRT_NEEDED)}},
    "compute_capabilities": ["7.5", "8.6", "9.0"],
    "extras": EXTRAS,
    "requires_python": ">=3.11",
    "python_tags": ["cp311", "cp312"],
    "platforms": ["linux_x86_64", "win_amd64"],
}


def hermetic_env() -> dict[str, str]:
    """No pip configuration (no index, no find-links from the machine): pip sees the test's folder only."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def run_script(matrix: Path, house: Path | None, *args: str, env: Mapping[str, str] | None = None,
               timeout: float = 300) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, str(SCRIPT), "--file", str(matrix), *args]
    if house is not None:
        argv += ["--find-links", str(house), "--no-index", "--pythons", "3.11-3.12",
                 "--platforms", "linux_x86_64,win_amd64"]
    return subprocess.run(argv, capture_output=True, text=True, env=dict(env or hermetic_env()), timeout=timeout,
                          check=False)


def rows(matrix: Path) -> list[dict[str, Any]]:
    releases: list[dict[str, Any]] = yaml.safe_load(matrix.read_text())["releases"]
    return releases


def validate(matrix: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "ortfix", "matrix", "validate", str(matrix)], capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def disagreements(proc: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in proc.stdout.splitlines() if ": file says " in line]


@pytest.fixture(scope="module")
def house(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """1.40.0 and 1.40.1, built alike (the Build defaults), for cp311 and cp312, Linux and Windows."""
    return wheelhouse(tmp_path_factory.mktemp("ort-wheels"), Build("1.40.0"), Build("1.40.1"))


# --------------------------------------------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_check_reports_every_planted_disagreement(house: Path, tmp_path: Path) -> None:
    matrix = tmp_path / "ort.yaml"
    matrix.write_text(MATRIX)
    proc = run_script(matrix, house, "--check")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    found = disagreements(proc)
    expected = [f"{version}: {name}: file says {old}, wheel says {new}"
                for version in ("1.40.0", "1.40.1") for name, (old, new) in PLANTED.items()]
    assert sorted(found) == sorted(expected), proc.stdout
    assert matrix.read_text() == MATRIX, "--check must not write"


@pytest.mark.slow
def test_write_fixes_the_row_and_keeps_the_rest(house: Path, tmp_path: Path) -> None:
    matrix = tmp_path / "ort.yaml"
    matrix.write_text(MATRIX)
    proc = run_script(matrix, house, "--write")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    validate(matrix)
    text = matrix.read_text()
    doc = yaml.safe_load(text)
    assert doc["data_version"] > "2020.01.01"
    default, alternate = doc["releases"]
    assert default["versions"] == ["1.40.0", "1.40.1"]
    assert {k: default[k] for k in RIGHT_ROW} == RIGHT_ROW
    assert default["note"] == "a hand-written note"
    assert default["source"].startswith("hand-written for the test; updated by scripts/ort_wheels.py")
    # What the script cannot read keeps its bytes: the comments and the whole alternate row.
    old_lines = MATRIX.splitlines()
    alternate_text = "\n".join(old_lines[old_lines.index("  # Only on a separate feed: the script cannot read it "
                                                         "and must leave it alone."):])
    assert alternate_text in text
    assert text.startswith(old_lines[0] + "\n")
    assert alternate == yaml.safe_load(MATRIX)["releases"][1]
    # Unchanged fields keep their lines; the changed ones are rewritten in the file's style.
    assert '    requires_python: ">=3.11"\n' in text
    assert '    compute_capabilities: ["7.5", "8.6", "9.0"]\n' in text

    again = run_script(matrix, house, "--check")
    assert again.returncode == 0, again.stdout + again.stderr
    assert disagreements(again) == []
    rewrite = run_script(matrix, house, "--write")
    assert rewrite.returncode == 0, rewrite.stdout + rewrite.stderr
    assert matrix.read_text() == text, "a --write with no new facts must leave the file byte for byte alone"


@pytest.mark.slow
def test_new_releases_join_a_matching_row_or_get_their_own(tmp_path: Path) -> None:
    old_style = Build("1.39.0", needed=(), strings=("libcuda.so.1",), built=None, cuda_version=None,
                      preload=("libcublasLt.so.11", "libcublas.so.11", "libcudnn.so.8", "libcudart.so.11.0"),
                      runpath=("/usr/local/cuda-11.8/lib64",), trt_needed=None, archs=((2, 52), (2, 80), (1, 80)),
                      extras={}, requires_python=None, pythons=("cp311",), windows=None)
    house = wheelhouse(tmp_path, old_style, Build("1.40.0"), Build("1.40.1"), Build("1.40.2"))
    matrix = tmp_path / "ort.yaml"
    right = MATRIX
    for old, new in PLANTED.values():
        right = right.replace(old, new, 1)
    right = right.replace('cuda_build: "12.2"', 'cuda_build: "12.4"')
    matrix.write_text(right)
    check = run_script(matrix, house, "--check")
    assert check.returncode == 1, check.stdout + check.stderr
    assert sorted(disagreements(check)) == ["1.39.0: versions: file says nothing, wheel says onnxruntime-gpu 1.39.0",
                                            "1.40.2: versions: file says nothing, wheel says onnxruntime-gpu 1.40.2"]

    proc = run_script(matrix, house, "--write")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    validate(matrix)
    first, second, alternate = rows(matrix)
    # 1.39.0 comes before the row above it, with what its wheel says: CUDA 11 from the preloaded libcudart.so.11.0,
    # the preload list as lazy names (the driver's libcuda.so.1 left out), cuda_build from the RUNPATH.
    assert first["versions"] == ["1.39.0"] and first["index"] == "default"
    assert first["cuda_major"] == 11 and first["cuda_build"] == "11.8" and first["cudnn_major"] == 8
    assert first["providers"] == {"cuda": {"needed": [], "lazy": list(old_style.preload)}}
    assert first["compute_capabilities"] == ["5.2", "8.0"]
    assert first["python_tags"] == ["cp311"] and first["platforms"] == ["linux_x86_64"]
    assert "extras" not in first and "requires_python" not in first
    # 1.40.2 has the same facts as 1.40.0-1.40.1 and joins their row.
    assert second["versions"] == ["1.40.0", "1.40.1", "1.40.2"]
    assert {k: second[k] for k in RIGHT_ROW} == RIGHT_ROW
    assert alternate["index"] == "alternate"
    again = run_script(matrix, house, "--check")
    assert again.returncode == 0, again.stdout + again.stderr


@pytest.mark.slow
def test_a_row_whose_releases_differ_is_split(tmp_path: Path) -> None:
    house = wheelhouse(tmp_path, Build("1.40.0"),
                       Build("1.40.1", needed=(*CU12_NEEDED, "libnvrtc.so.12"), strings=()))
    matrix = tmp_path / "ort.yaml"
    matrix.write_text(MATRIX)
    proc = run_script(matrix, house, "--write")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    validate(matrix)
    first, second, _ = rows(matrix)
    assert first["versions"] == ["1.40.0"] and second["versions"] == ["1.40.1"]
    assert first["providers"]["cuda"] == {"needed": list(CU12_NEEDED), "lazy": ["libcudnn.so.9", "libnvrtc.so.12"]}
    assert second["providers"]["cuda"] == {"needed": [*CU12_NEEDED, "libnvrtc.so.12"], "lazy": ["libcudnn.so.9"]}
    assert first["note"] == second["note"] == "a hand-written note"
    again = run_script(matrix, house, "--check")
    assert again.returncode == 0, again.stdout + again.stderr


@pytest.mark.slow
def test_windows_imports_are_read_with_pefile(tmp_path: Path) -> None:
    pytest.importorskip("pefile")
    house = wheelhouse(tmp_path, Build("1.40.0", windows=("cudart64_110.dll", "cudnn64_9.dll", "KERNEL32.dll")),
                       Build("1.40.1"))
    matrix = tmp_path / "ort.yaml"
    right = MATRIX
    for old, new in PLANTED.values():
        right = right.replace(old, new, 1)
    matrix.write_text(right.replace('cuda_build: "12.2"', 'cuda_build: "12.4"'))
    proc = run_script(matrix, house, "--check", "--windows")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert disagreements(proc) == ["1.40.0: win_amd64.cuda_major: file says 12, wheel says 11"]
    assert ("1.40.0: onnxruntime_gpu-1.40.0-cp311-cp311-win_amd64.whl: onnxruntime_providers_cuda.dll imports "
            "cudart64_110.dll, cudnn64_9.dll") in proc.stdout.splitlines()
    assert ("1.40.1: onnxruntime_gpu-1.40.1-cp311-cp311-win_amd64.whl: onnxruntime_providers_cuda.dll imports "
            "cublas64_12.dll, cudart64_12.dll, cudnn64_9.dll") in proc.stdout.splitlines()
    write = run_script(matrix, house, "--write", "--windows")
    assert write.returncode == 1, "a Windows disagreement has no field to fix: --write must say so"
    assert "not fixable" in write.stdout


@pytest.mark.slow
@pytest.mark.realwheels
def test_the_matrix_agrees_with_a_real_release(tmp_path: Path) -> None:
    """1.19.2 from the configured index (it has no build_and_package_info.py: cuda_build comes from the RUNPATH)."""
    pytest.importorskip("pefile")
    base = str(cache_root())
    cache = Path(base) / "ort-wheels"
    matrix = tmp_path / "ort.yaml"
    shutil.copyfile(REPO / "compat" / "ort.yaml", matrix)
    proc = run_script(matrix, None, "--check", "--versions", "1.19.2", "--windows", "--cache", str(cache), "-v",
                      env=os.environ, timeout=1800)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert disagreements(proc) == []
    out = proc.stdout
    assert "cuda_build: \"12.2\"  [provider RPATH/RUNPATH /usr/local/cuda-12.2]" in out
    assert "onnxruntime_providers_cuda.dll imports cublasLt64_12.dll, cublas64_12.dll, cudnn64_9.dll" in out


# --------------------------------------------------------------------------------------------------------------
# --addons: compat/addons.yaml from the wheels (TensorRT majors, genai CUDA majors and ORT minimums)
# --------------------------------------------------------------------------------------------------------------


def _addons_house(tmp: Path) -> Path:
    """onnxruntime-gpu wheels whose TensorRT provider NEEDs libnvinfer.so.10 (1.21.0, 1.40.0); onnxruntime-genai-cuda
    0.9.2 (NEEDs libcudart.so.12, requires onnxruntime-gpu>=1.22.0) and 0.19.0 (libcudart.so.13, >=1.40.0)."""
    house = tmp / "house"
    house.mkdir()
    libs = tmp / "libs"
    libs.mkdir()
    tag = "cp311-cp311-manylinux_2_27_x86_64"
    for version in ("1.21.0", "1.40.0"):
        provider = build_stub_lib(libs / f"trt-{version}.so", soname="libonnxruntime_providers_tensorrt.so",
                                  needed=("libnvinfer.so.10", "libnvonnxparser.so.10", "libcudart.so.12"))
        build_wheel(house, PACKAGE, version, {"onnxruntime/__init__.py": b"",
                                              "onnxruntime/capi/libonnxruntime_providers_tensorrt.so": provider},
                    tag=tag)
    for version, cudart, ort in (("0.9.2", "libcudart.so.12", "1.22.0"), ("0.19.0", "libcudart.so.13", "1.40.0")):
        lib = build_stub_lib(libs / f"genai-{version}.so", soname="libonnxruntime-genai-cuda.so", needed=(cudart,))
        build_wheel(house, "onnxruntime-genai-cuda", version,
                    {"onnxruntime_genai/__init__.py": b"", "onnxruntime_genai/libonnxruntime-genai-cuda.so": lib},
                    requires=[f"onnxruntime-gpu>={ort}", "numpy"], tag=tag)
    return house


def test_addons_mode_reads_the_wheels_and_fills_the_file(tmp_path: Path) -> None:
    """Planted in a copy of compat/addons.yaml: 1.21's TensorRT major 9 (its wheel NEEDs libnvinfer.so.10) and
    genai-cuda 0.8.3/0.9.2's CUDA 13 (0.9.2's library NEEDs libcudart.so.12); no row for 1.40 or for genai 0.19.0.
    --check names each; --write fixes 1.21, splits 0.9.2 off its row (0.8.3, which no wheel here shows, keeps what
    the file said) and adds the new rows; the result validates and a second --check finds nothing."""
    house = _addons_house(tmp_path)
    addons = tmp_path / "addons.yaml"
    text = (REPO / "compat" / "addons.yaml").read_text()
    planted = [('{ort: ["1.21"], major: 10,', '{ort: ["1.21"], major: 9,'),
               ('versions: ["0.8.3", "0.9.2"], cuda_major: 12,', 'versions: ["0.8.3", "0.9.2"], cuda_major: 13,')]
    for old, new in planted:
        assert old in text
        text = text.replace(old, new)
    addons.write_text(text)

    def script(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, str(SCRIPT), "--addons", "--file", str(addons), "--find-links",
                               str(house), *args], capture_output=True, text=True, env=hermetic_env(), timeout=120,
                              check=False)

    check = script("--check")
    assert check.returncode == 1, check.stdout + check.stderr
    assert "tensorrt 1.21: major: file says 9, wheel says 10" in check.stdout
    assert "onnxruntime-genai-cuda 0.9.2: cuda_major: file says 13, wheel says 12" in check.stdout
    assert "tensorrt 1.40: no row" in check.stdout and "onnxruntime-genai-cuda 0.19.0: no row" in check.stdout
    assert addons.read_text() == text  # --check writes nothing
    written = script("--write")
    assert written.returncode == 0, written.stdout + written.stderr
    validate(addons)
    doc = yaml.safe_load(addons.read_text())
    trt = {minor: row for row in doc["tensorrt"] for minor in row["ort"]}
    assert (trt["1.21"]["major"], trt["1.21"]["min_version"]) == (10, "10.8") and trt["1.40"]["major"] == 10
    genai = {(row["package"], v): row for row in doc["genai"] for v in row["versions"]}
    assert (genai[("onnxruntime-genai-cuda", "0.9.2")]["cuda_major"],
            genai[("onnxruntime-genai-cuda", "0.9.2")]["ort_min"]) == (12, "1.22.0")
    assert genai[("onnxruntime-genai-cuda", "0.8.3")]["cuda_major"] == 13  # no wheel of it here: as the file says
    assert (genai[("onnxruntime-genai-cuda", "0.19.0")]["cuda_major"],
            genai[("onnxruntime-genai-cuda", "0.19.0")]["ort_min"]) == (13, "1.40.0")
    assert doc["data_version"] != yaml.safe_load(text)["data_version"]
    again = script("--check")
    assert again.returncode == 0, again.stdout + again.stderr
