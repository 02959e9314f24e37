"""`check` and `plan` for Windows layouts, judged on Linux by ortfix's own code: the real Windows platform
(system/windows/platform.py:
the DLL scan, FileVersion read from the version resource, the simulated loader) over folders of
real PE DLLs built with mingw-w64 (support/winstubs.py: real file names, real imports, FileVersion resources), and
a probe report shaped as the probe writes it for a Windows CPython. Nothing of the code under test is replaced.

Two layouts from issue 21:
- a CUDA 13 build (onnxruntime-gpu 1.31.1, win_amd64) whose NVIDIA DLLs are not installed: the plan installs the
  NVIDIA 13 wheels that ship them (nvidia-cublas 13 ships cublasLt64_13.dll in nvidia\\cu13\\bin\\x86_64, as its
  win_amd64 wheel's file list shows) and the PATH hook names that folder; with cuDNN 9 to make findable, NVRTC's
  folder joins the hook (cuDNN 9 loads nvrtc64_* by a name it builds, never imported);
- seed 002 (Windows 10, onnxruntime-gpu 1.16.1, CUDA 11.8 toolkit on PATH, torch with its own cuDNN 8.9.5.29 in
  torch\\lib, no zlibwapi.dll): WIN002 is an error read off cudnn64_8.dll's FileVersion, the plan moves to a build for
  cuDNN 9 (WIN002's own remedy) and check's and explain's zlibwapi advice is the same, and the toolkit's DLLs that are
  the same files as torch\\lib's (same FileVersion) give no LIB004 warning each."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from ortfix.check.codes import FindingCode, Severity
from ortfix.check.diagnose import diagnose
from ortfix.check.facts import Facts, gather
from ortfix.compat.load import load_matrix
from ortfix.explain.patterns import explain_text, load_default_patterns
from ortfix.explain.windows_dlls import about_dll
from ortfix.plan.make import make_plan
from ortfix.plan.model import Plan, PlanOptions
from ortfix.system.windows.pe import PeReader
from ortfix.system.windows.platform import WindowsPlatform
from support.winstubs import build_stub_dll, mingw_missing

DRIVER_CUDA12 = "552.44"  # a Windows driver of the CUDA 12.4 era
DRIVER_CUDA13 = "580.88"  # R580: runs CUDA 13
# What onnxruntime_providers_cuda.dll imports besides the system's: 1.16 (CUDA 11, cuDNN 8; windows.md's table) and
# 1.31.1 (read off its real win_amd64 provider with pefile: cuBLAS only; cudart is linked in, cuRAND not imported;
# cuDNN, cuFFT and NVRTC are loaded on demand).
ORT_116_IMPORTS = ("cublasLt64_11.dll", "cublas64_11.dll", "cudnn64_8.dll", "curand64_10.dll", "cufft64_10.dll",
                   "cudart64_110.dll")
ORT_131_IMPORTS = ("cublasLt64_13.dll", "cublas64_13.dll")
CU13_BIN = ("nvidia", "cu13", "bin", "x86_64")  # every NVIDIA 13 win_amd64 wheel's DLL folder (its file list)


@pytest.fixture(autouse=True)
def _mingw() -> None:
    missing = mingw_missing()
    if missing:
        pytest.skip(missing)


def _probe(root: Path, *, ort_version: str, distributions: Sequence[tuple[str, str]] = (), torch: bool = False,
           path: Sequence[Path] = (), cuda_path: Path | None = None) -> dict[str, object]:
    """The probe's report for a Windows CPython 3.11 at root\\python.exe with onnxruntime-gpu `ort_version`."""
    sp = root / "Lib" / "site-packages"
    environ = {"PATH": ";".join(str(p) for p in path)}
    if cuda_path is not None:
        environ["CUDA_PATH"] = str(cuda_path)
    dists = [("onnxruntime-gpu", ort_version), *distributions]
    doc: dict[str, object] = {
        "probe_schema": 2,
        "python": {"executable": str(root / "python.exe"), "real_executable": str(root / "python.exe"),
                   "version": "3.11.9", "has_pip": True},
        "os": {"system": "Windows", "machine": "AMD64"},
        "env": {"kind": "system", "prefix": str(root), "base_prefix": str(root), "purelib": str(sp),
                "platlib": str(sp), "site_packages": [str(sp)], "prefix_writable": True},
        "environ": environ, "cwd": str(root),
        "distributions": [{"name": n, "normalized": n, "version": v, "location": str(sp),
                           "dist_info": str(sp / f"{n.replace('-', '_')}-{v}.dist-info"), "requires": []}
                          for n, v in dists],
        "onnxruntime_dirs": [{"package_dir": str(sp / "onnxruntime"), "location": str(sp),
                              "build_info": {"package_name": "onnxruntime-gpu", "__version__": ort_version},
                              "files": sorted(os.listdir(sp / "onnxruntime" / "capi"))}],
        "windows": {"system_dir": str(root / "Windows" / "System32"), "windows_dir": str(root / "Windows"),
                    "exe_dir": str(root), "machine_path": None, "user_path": None,
                    "conda_dll_search_modification": None, "packaged": False},
    }
    if torch:
        lib = sp / "torch" / "lib"
        doc["torch"] = {"dir": str(sp / "torch"), "version": "2.1.2+cu118", "cuda": "11.8", "lib_dir": str(lib),
                        "libs": sorted(os.listdir(lib))}
    return doc


def _gather(root: Path, probe: Mapping[str, object], driver: str) -> Facts:
    (root / "Windows" / "System32").mkdir(parents=True, exist_ok=True)
    run = subprocess.CompletedProcess(["python.exe"], 0, json.dumps(probe), "")
    return gather(root / "python.exe", load_matrix(), probe_run=run, driver_version=driver,
                  reader=PeReader(use_disk=False), platform=WindowsPlatform())


def _provider(sp: Path, imports: Sequence[str]) -> None:
    build_stub_dll(sp / "onnxruntime" / "capi" / "onnxruntime_providers_cuda.dll", needed=imports)


def _plan(facts: Facts, driver: str) -> tuple[Plan, list[FindingCode]]:
    findings = diagnose(facts, load_matrix())
    plan = make_plan(facts, findings, load_matrix(), PlanOptions(driver_version=driver))
    return plan, [f.code for f in findings]


def _hook_folders(plan: Plan) -> list[str]:
    content = next(a.details["content"] for a in plan.actions if str(a.details.get("path", "")).endswith(".py"))
    line = next(line for line in content.splitlines() if line.startswith("FOLDERS = "))
    folders: list[str] = json.loads(line.removeprefix("FOLDERS = ").replace("'", '"'))
    return folders


def _requirement_names(plan: Plan) -> list[str]:
    return [r.split("~")[0].split("=")[0].split("<")[0].split(">")[0].split(",")[0]
            for a in plan.actions if a.kind == "pip-install" for r in a.details["requirements"]]


# -- CUDA 13 -------------------------------------------------------------------------------------------------------
def test_cuda13_build_gets_the_nvidia_13_wheels_and_their_folder_on_the_path_hook(tmp_path: Path) -> None:
    sp = tmp_path / "Lib" / "site-packages"
    _provider(sp, ORT_131_IMPORTS)
    facts = _gather(tmp_path, _probe(tmp_path, ort_version="1.31.1"), DRIVER_CUDA13)
    plan, codes = _plan(facts, DRIVER_CUDA13)
    assert FindingCode.LIB_MISSING in codes, codes
    assert not [n for n in plan.notes if "no NVIDIA pip wheel is known" in str(n)], plan.notes
    # The build's imports and what it loads on demand (cuFFT, cuDNN, NVRTC): ort.yaml's CUDA 13 set, not ORT itself.
    assert sorted(_requirement_names(plan)) == ["nvidia-cublas", "nvidia-cuda-nvrtc", "nvidia-cudnn-cu13",
                                                "nvidia-cufft"], plan.actions
    assert _hook_folders(plan) == [str(sp.joinpath(*CU13_BIN)), str(sp / "nvidia" / "cudnn" / "bin")]
    assert FindingCode.LIB_MISSING not in {f.code for f in plan.unresolved}



def test_a_windows_plan_caps_the_nvidia_wheels_by_their_windows_releases(tmp_path: Path) -> None:
    """The cap that keeps pip off wheels the driver cannot run is read from the win_amd64 releases for a Windows
    target (the Linux ones were used: NVRTC 13 has releases on Linux that win_amd64 lacks, so the caps differ)."""
    matrix = load_matrix()
    driver = "580.65"
    [nvrtc] = [w for c in matrix.cuda.values() for w in c.wheels if w.distribution == "nvidia-cuda-nvrtc"]
    windows = matrix.wheel_requirement(nvrtc, driver, "windows", "AMD64").requirement
    assert windows != matrix.wheel_requirement(nvrtc, driver, "linux", "x86_64").requirement  # the case that tells
    sp = tmp_path / "Lib" / "site-packages"
    _provider(sp, ORT_131_IMPORTS)
    plan, _codes = _plan(_gather(tmp_path, _probe(tmp_path, ort_version="1.31.1"), driver), driver)
    asked = [r for a in plan.actions if a.kind == "pip-install" for r in a.details["requirements"]]
    assert windows in asked, asked

def test_path_hook_names_nvrtc_s_folder_with_cudnn_9(tmp_path: Path) -> None:
    """onnxruntime-gpu 1.23.2 with the NVIDIA 12 wheels installed but not findable: cuDNN 9's folder goes on PATH,
    and so does nvidia\\cuda_nvrtc\\bin, which no import names (cuDNN builds nvrtc64_120_0.dll's name itself)."""
    sp = tmp_path / "Lib" / "site-packages"
    _provider(sp, ("cublasLt64_12.dll", "cublas64_12.dll", "cudnn64_9.dll", "cufft64_11.dll", "cudart64_12.dll"))
    wheels = {"cuda_runtime": ("cudart64_12.dll",), "cublas": ("cublas64_12.dll", "cublasLt64_12.dll"),
              "cufft": ("cufft64_11.dll",), "cudnn": ("cudnn64_9.dll", "cudnn_graph64_9.dll"),
              "cuda_nvrtc": ("nvrtc64_120_0.dll",)}
    for folder, dlls in wheels.items():
        for dll in dlls:
            build_stub_dll(sp / "nvidia" / folder / "bin" / dll)
    dists = [("nvidia-cuda-runtime-cu12", "12.9.79"), ("nvidia-cublas-cu12", "12.9.1.4"),
             ("nvidia-cufft-cu12", "11.4.1.4"), ("nvidia-cudnn-cu12", "9.10.2.21"),
             ("nvidia-cuda-nvrtc-cu12", "12.9.86")]
    facts = _gather(tmp_path, _probe(tmp_path, ort_version="1.23.2", distributions=dists), DRIVER_CUDA12)
    plan, codes = _plan(facts, DRIVER_CUDA12)
    assert FindingCode.LIB_NOT_ON_PATH in codes, codes
    assert not _requirement_names(plan), plan.actions  # installed already: the hook only
    folders = _hook_folders(plan)
    assert str(sp / "nvidia" / "cudnn" / "bin") in folders, folders
    assert str(sp / "nvidia" / "cuda_nvrtc" / "bin") in folders, folders


# -- seed 002: cuDNN 8 and zlibwapi -------------------------------------------------------------------------------
CUDNN_89 = (8, 9, 5, 29)
TOOLKIT_VERSIONS = {"cudart64_110.dll": (6, 14, 11, 11080), "cublas64_11.dll": (6, 14, 11, 11113),
                    "cublasLt64_11.dll": (6, 14, 11, 11113), "cufft64_10.dll": (6, 14, 11, 10903),
                    "curand64_10.dll": (6, 14, 11, 10300)}


def _seed_002(tmp: Path) -> tuple[Path, dict[str, object]]:
    """Seed 002's machine: a Python at tmp\\py with onnxruntime-gpu 1.16.1 and torch 2.1 (CUDA 11.8), whose torch\\lib
    has cuDNN 8.9.5.29 and the CUDA 11.8 DLLs; the CUDA 11.8 toolkit (tmp\\CUDA\\v11.8) on PATH with the same CUDA
    DLLs (same FileVersions) and no cuDNN; no zlibwapi.dll anywhere. Returns the Python's folder and its probe."""
    root = tmp / "py"
    sp = root / "Lib" / "site-packages"
    _provider(sp, ORT_116_IMPORTS)
    lib = sp / "torch" / "lib"
    build_stub_dll(lib / "cudnn64_8.dll", marker="torch cudnn64_8.dll", file_version=CUDNN_89)
    build_stub_dll(lib / "cudnn_ops_infer64_8.dll", needed=("cudnn64_8.dll",), file_version=CUDNN_89)
    toolkit = tmp / "CUDA" / "v11.8"
    for dll, version in TOOLKIT_VERSIONS.items():
        build_stub_dll(lib / dll, marker=f"11.8 {dll}", file_version=version)  # torch's copy of the same file
        build_stub_dll(toolkit / "bin" / dll, marker=f"11.8 {dll}", file_version=version)
    return root, _probe(root, ort_version="1.16.1", torch=True, path=(toolkit / "bin",), cuda_path=toolkit)


def test_cudnn_8_version_read_from_the_file_version_makes_win002_an_error(tmp_path: Path) -> None:
    facts = _gather(*_seed_002(tmp_path), DRIVER_CUDA12)
    win002 = [f for f in diagnose(facts, load_matrix()) if f.code is FindingCode.ZLIBWAPI_MISSING]
    assert [f.severity for f in win002] == [Severity.ERROR], win002
    assert "cuDNN 8.9.5.29" in str(win002[0].summary)


def test_seed_002_plan_moves_to_a_cudnn_9_build(tmp_path: Path) -> None:
    facts = _gather(*_seed_002(tmp_path), DRIVER_CUDA12)
    plan, codes = _plan(facts, DRIVER_CUDA12)
    assert {FindingCode.ZLIBWAPI_MISSING, FindingCode.TORCH_LIB_ONLY} <= set(codes), codes
    assert plan.target is not None and plan.target.cudnn_major == 9, plan.target
    installs = _requirement_names(plan)
    assert "onnxruntime-gpu" in installs and "nvidia-cudnn-cu12" in installs, installs
    sp = tmp_path / "py" / "Lib" / "site-packages"
    assert str(sp / "torch" / "lib") not in _hook_folders(plan)  # ORT gets its own cuDNN, not torch's
    unresolved = {f.code for f in plan.unresolved}
    assert not unresolved & {FindingCode.ZLIBWAPI_MISSING, FindingCode.TORCH_LIB_ONLY}, unresolved


def test_identical_toolkit_copies_give_no_lib004(tmp_path: Path) -> None:
    """The toolkit's cudart64_110.dll etc. load instead of torch\\lib's copies of the same files (same FileVersion):
    nothing to fix, no warning each. A toolkit copy of another version still is LIB004."""
    root, probe = _seed_002(tmp_path)
    codes = [f.code for f in diagnose(_gather(root, probe, DRIVER_CUDA12), load_matrix())]
    assert FindingCode.LIB_SHADOWED not in codes, codes
    build_stub_dll(tmp_path / "CUDA" / "v11.8" / "bin" / "cufft64_10.dll", marker="another cufft",
                   file_version=(6, 14, 11, 10902))
    shadowed = [f for f in diagnose(_gather(root, probe, DRIVER_CUDA12), load_matrix())
                if f.code is FindingCode.LIB_SHADOWED]
    assert [f.data["soname"] for f in shadowed] == ["cufft64_10.dll"], shadowed


def test_check_and_explain_give_one_zlibwapi_remedy(tmp_path: Path) -> None:
    """Seed 002's own message, explained, and check's WIN002 on seed 002's machine: the same finding, the same
    remedy (the move to cuDNN 9), and the same wherever explain names zlibwapi.dll."""
    facts = _gather(*_seed_002(tmp_path), DRIVER_CUDA12)
    win002 = next(f for f in diagnose(facts, load_matrix()) if f.code is FindingCode.ZLIBWAPI_MISSING)
    message = "Could not locate zlibwapi.dll. Please make sure it is in your library path!"
    explained = [e for e in explain_text(message, load_default_patterns()) if "zlibwapi" in e.title]
    assert [e.finding for e in explained] == ["WIN002"], explained
    assert "move to cuDNN 9" in win002.fix and "put an x64" not in win002.fix.split("Staying")[0]
    assert explained[0].fix.rstrip(".").lower() == win002.fix.lower()
    assert win002.fix in " ".join(map(str, about_dll("zlibwapi.dll", load_matrix())))


def test_seed_002_with_its_own_driver_says_what_the_cudnn_9_move_needs(tmp_path: Path) -> None:
    """Seed 002's driver (522, CUDA 11.8) runs no CUDA 12 build, so no cuDNN 9 build: the plan says which driver the
    move needs (528.33, CUDA 12's Windows minimum) instead of leaving WIN002 unexplained."""
    facts = _gather(*_seed_002(tmp_path), "522.06")
    plan, codes = _plan(facts, "522.06")
    assert FindingCode.ZLIBWAPI_MISSING in codes
    assert plan.target is None or plan.target.cudnn_major == 8, plan.target
    said = [str(n) for n in plan.notes if "cuDNN 9" in str(n)]
    assert len(said) == 1 and ">= 528.33" in said[0], plan.notes
