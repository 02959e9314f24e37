"""PE reading on the real `onnxruntime-gpu` win_amd64 wheels, one per release line of `docs/windows-dlls.md`'s
table (downloaded once with `pip download --platform win_amd64`, kept in the test cache's `ort-wheels` folder that
scripts/ort_wheels.py's real-wheel test shares), and the matrix's Windows DLL names checked against that file's table
of DLL names. The expected values are that page's, written here by hand, not taken from ortfix."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

from ortfix.compat.load import load_matrix
from ortfix.system.windows.libraries import dll_name_for_soname
from ortfix.system.windows.pe import read_pe
from support.testcache import cache_root

# The runtime every release imports besides its CUDA DLLs (windows.md: "besides KERNEL32, MSVCP140, VCRUNTIME140,
# VCRUNTIME140_1, api-ms-win-crt-*"; MSVCP140_ATOMIC_WAIT is also the MSVC runtime, imported by 1.31.1).
_RUNTIME = {"kernel32.dll", "msvcp140.dll", "msvcp140_atomic_wait.dll", "vcruntime140.dll", "vcruntime140_1.dll"}

# windows.md, "PE imports of onnxruntime_providers_cuda.dll": release line → (the version read, its CUDA imports in
# order). Every release also imports onnxruntime_providers_shared.dll, from its own folder (windows.md's rows name it
# up to 1.26 only; the 1.27.0 and 1.28.0 wheels import it too, read here).
SHARED = "onnxruntime_providers_shared.dll"
PROVIDER_IMPORTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "1.16.3 - 1.18.1": ("1.18.1", ("cublasLt64_11.dll", "cublas64_11.dll", "cudnn64_8.dll", "cufft64_10.dll",
                                   "cudart64_110.dll")),
    "1.19 - 1.26": ("1.19.2", ("cublasLt64_12.dll", "cublas64_12.dll", "cudnn64_9.dll", "cufft64_11.dll",
                               "cudart64_12.dll")),
    "1.27.0": ("1.27.0", ("cublasLt64_13.dll", "cublas64_13.dll", "cufft64_12.dll", "cudnn64_9.dll")),
    "1.28 - 1.31.1": ("1.28.0", ("cublasLt64_13.dll", "cublas64_13.dll")),
}


def _cache() -> Path:
    base = str(cache_root())
    return Path(base) / "ort-wheels"


def ort_windows_wheel(version: str) -> Path:
    """The real onnxruntime-gpu `version` wheel for win_amd64 / CPython 3.11 (downloaded once, with pip)."""
    cache = _cache()
    name = f"onnxruntime_gpu-{version}-cp311-cp311-win_amd64.whl"
    if not (cache / name).is_file():
        cache.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=cache) as tmp:
            proc = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
                                   "--no-deps", "--only-binary=:all:", "--platform", "win_amd64", "--python-version",
                                   "3.11", "-d", tmp, f"onnxruntime-gpu=={version}"],
                                  capture_output=True, text=True, check=False, timeout=1800)
            assert proc.returncode == 0, proc.stderr[-2000:]
            os.replace(Path(tmp) / name, cache / name)
    return cache / name


def _read_member(wheel: Path, member: str) -> bytes:
    with zipfile.ZipFile(wheel) as zf:
        return zf.read(member)


@pytest.mark.realwheels
@pytest.mark.parametrize("line", list(PROVIDER_IMPORTS))
def test_the_cuda_providers_imports_match_windows_md(line: str) -> None:
    version, expected = PROVIDER_IMPORTS[line]
    wheel = ort_windows_wheel(version)
    info = read_pe(f"{wheel.name}!onnxruntime_providers_cuda.dll",
                   data=_read_member(wheel, "onnxruntime/capi/onnxruntime_providers_cuda.dll"))
    assert info.machine == "AMD64"
    cuda = tuple(n for n in info.needed
                 if n.lower() not in _RUNTIME and not n.lower().startswith("api-ms-win-crt-") and n != SHARED)
    assert cuda == expected, f"{version}: {info.needed}"
    assert SHARED in info.needed
    assert {n.lower() for n in info.needed} >= {"kernel32.dll", "msvcp140.dll", "vcruntime140.dll"}


@pytest.mark.realwheels
def test_the_122_pybind_extension_imports_dxcore() -> None:
    """windows.md: onnxruntime_pybind11_state.pyd of 1.22.0 alone also imports dxcore.dll (absent under wine)."""
    member = "onnxruntime/capi/onnxruntime_pybind11_state.pyd"
    needed = {n.lower() for n in read_pe("1.22.0", data=_read_member(ort_windows_wheel("1.22.0"), member)).needed}
    assert "dxcore.dll" in needed
    assert "python311.dll" in needed  # a cp311 extension
    later = {n.lower() for n in read_pe("1.19.2", data=_read_member(ort_windows_wheel("1.19.2"), member)).needed}
    assert "dxcore.dll" not in later


# windows.md, "DLL names": CUDA major → the DLLs of each library; cuDNN major → its DLLs.
CUDA_DLLS: dict[int, dict[str, set[str]]] = {
    11: {"nvidia-cuda-runtime-cu11": {"cudart64_110.dll"},
         "nvidia-cublas-cu11": {"cublas64_11.dll", "cublasLt64_11.dll"},
         "nvidia-cufft-cu11": {"cufft64_10.dll"}},
    12: {"nvidia-cuda-runtime-cu12": {"cudart64_12.dll"},
         "nvidia-cublas-cu12": {"cublas64_12.dll", "cublasLt64_12.dll"},
         "nvidia-cufft-cu12": {"cufft64_11.dll"},
         "nvidia-cuda-nvrtc-cu12": {"nvrtc64_120_0.dll"},
         "nvidia-nvjitlink-cu12": {"nvJitLink_120_0.dll"}},
    13: {"nvidia-cuda-runtime": {"cudart64_13.dll"},
         "nvidia-cublas": {"cublas64_13.dll", "cublasLt64_13.dll"},
         "nvidia-cufft": {"cufft64_12.dll"},
         "nvidia-cuda-nvrtc": {"nvrtc64_130_0.dll"},
         "nvidia-nvjitlink": {"nvJitLink_130_0.dll"}},
}
CUDNN_DLLS: dict[int, set[str]] = {
    8: {"cudnn64_8.dll", *(f"cudnn_{k}_{m}64_8.dll" for k in ("ops", "cnn", "adv") for m in ("infer", "train"))},
    9: {"cudnn64_9.dll", *(f"cudnn_{k}64_9.dll" for k in ("graph", "ops", "cnn", "adv", "engines_precompiled",
                                                          "engines_runtime_compiled", "heuristic"))},
}
WINDOWS_DIRS = {11: "nvidia/{}/bin", 12: "nvidia/{}/bin", 13: "nvidia/cu13/bin/x86_64"}


def test_the_matrix_names_the_windows_dlls_of_windows_md() -> None:
    matrix = load_matrix(use_cache=False)
    wheels = {w.distribution: (major, w) for major, row in matrix.cuda.items() for w in row.wheels}
    for major, libs in CUDA_DLLS.items():
        for distribution, dlls in libs.items():
            wheel_major, wheel = wheels[distribution]
            assert wheel_major == major
            assert dlls <= set(wheel.dlls), distribution
            folder = wheel.dir.split("/")[1]
            assert wheel.windows_dir == WINDOWS_DIRS[major].format(folder), distribution
    for row in matrix.cudnn:
        assert set(row.wheel.dlls) == CUDNN_DLLS[row.major], row.wheel.distribution
        assert row.wheel.windows_dir == "nvidia/cudnn/bin"  # cu13 too: the same folder as the cu12 cuDNN
    every = [name for _, w in wheels.values() for name in w.dlls] + [n for r in matrix.cudnn for n in r.wheel.dlls]
    assert "zlibwapi.dll" not in {n.lower() for n in every}  # no wheel ships it


# windows-dlls.md, "TensorRT": what onnxruntime_providers_tensorrt.dll imports of TensorRT, by release (written by
# hand from the wheels' import tables; no "64" in TensorRT's names).
TENSORRT_IMPORTS = {"1.18.1": ("nvinfer_10.dll", "nvinfer_plugin_10.dll", "nvonnxparser_10.dll"),
                    "1.22.0": ("nvinfer_10.dll", "nvinfer_plugin_10.dll", "nvonnxparser_10.dll"),
                    "1.28.0": ("nvinfer_10.dll", "nvonnxparser_10.dll")}


@pytest.mark.realwheels
@pytest.mark.parametrize("version", list(TENSORRT_IMPORTS))
def test_the_tensorrt_providers_imports_are_the_matrix_s_sonames_as_dlls(version: str) -> None:
    """The real provider imports exactly the TensorRT DLLs windows-dlls.md lists, and ortfix's Windows names of the
    matrix's TensorRT SONAMEs for that release (what `plan --with tensorrt` provides) are those DLLs."""
    info = read_pe(version, data=_read_member(ort_windows_wheel(version),
                                              "onnxruntime/capi/onnxruntime_providers_tensorrt.dll"))
    trt = tuple(n for n in info.needed if n.lower().startswith(("nvinfer", "nvonnxparser")))
    assert trt == TENSORRT_IMPORTS[version], info.needed
    [build] = [b for b in load_matrix(use_cache=False).builds
               if version in b.versions and b.package == "onnxruntime-gpu" and b.index == "default"]
    mapped = {dll_name_for_soname(s) for s in build.tensorrt_needed if s.startswith(("libnvinfer", "libnvonnx"))}
    assert mapped == set(TENSORRT_IMPORTS[version]), build.tensorrt_needed
