"""`ortfix check` on Windows.

Hermetic (run on Linux): the DLL names of windows.md's table, the driver version nvcuda.dll's FileVersion encodes,
the simulated process as the probe's Windows facts set it up (the search order itself: tests/test_winloader.py), and
the Windows-only rules (WIN001, WIN003, WIN004) on facts built by hand.

Under wine (`win_python()`): the real `ortfix check --json` run by a Windows CPython on a Windows site-packages built
here — the real `onnxruntime==1.23.2` win_amd64 wheel (the CPU package: ORT002), then the same install turned into
the GPU build (`onnxruntime-gpu`'s dist-info, a provider DLL that imports what the real 1.23 provider imports) with
stub NVIDIA DLLs in `nvidia\\<lib>\\bin`: not on PATH (LIB002, named, with the search as evidence; wine's own loader
refuses the provider too) and on PATH through WINEPATH (no library finding; wine's loader loads the provider). No
driver under wine: DRV001 and exit code 1 every time."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ortfix.check.codes import FindingCode, Severity
from ortfix.check.facts import Facts, LoaderContext, OrtInstall, ProviderLoad
from ortfix.check.windows import windows_findings
from ortfix.errors import OrtfixError
from ortfix.system.driver import DriverFacts
from ortfix.system.inventory import ORIGIN_TORCH, ORIGIN_WHEEL, LibCopy
from ortfix.system.loader import Resolution
from ortfix.system.windows.facts import DllAt, LoginDifference, WindowsFacts, windows_facts
from ortfix.system.windows.pe import PeReader
from ortfix.system.windows.platform import (
    WindowsPlatform,
    cuda_major_by_dll_name,
    dll_name_for_soname,
    driver_version_from_file_version,
    parse_dll_name,
)
from ortfix.target.probe import OrtDir, ProbeFacts, parse_probe
from support.winstubs import build_stub_dll, mingw_missing
from wintools import WinPython, pip_install_windows_cached, to_windows, win_python

# windows.md: what onnxruntime_providers_cuda.dll of 1.19 - 1.26 imports besides the system's and the C runtime's.
ORT_123_CUDA_IMPORTS = ("cublasLt64_12.dll", "cublas64_12.dll", "cudnn64_9.dll", "cufft64_11.dll", "cudart64_12.dll")
CUDNN9_SUBLIBS = ("cudnn_graph64_9.dll", "cudnn_ops64_9.dll", "cudnn_cnn64_9.dll", "cudnn_adv64_9.dll",
                  "cudnn_engines_precompiled64_9.dll", "cudnn_engines_runtime_compiled64_9.dll",
                  "cudnn_heuristic64_9.dll")


# -- DLL names (windows.md's table) ------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "parsed"), [
    ("cudart64_12.dll", ("cudart", (12,))),
    ("cudart64_110.dll", ("cudart", (11, 0))),  # CUDA 11.0's runtime, which every CUDA 11 build asks for
    ("cudart64_13.dll", ("cudart", (13,))),
    ("cublasLt64_12.dll", ("cublasLt", (12,))),
    ("CUBLASLT64_12.DLL", ("cublasLt", (12,))),  # Windows compares names case-insensitively
    ("cublas64_11.dll", ("cublas", (11,))),
    ("cudnn64_9.dll", ("cudnn", (9,))),
    ("cudnn_ops_infer64_8.dll", ("cudnn_ops_infer", (8,))),
    ("cudnn_engines_runtime_compiled64_9.dll", ("cudnn_engines_runtime_compiled", (9,))),
    ("cufft64_11.dll", ("cufft", (11,))),
    ("nvrtc64_120_0.dll", ("nvrtc", (12, 0))),
    ("nvJitLink_120_0.dll", ("nvJitLink", (12, 0))),
    ("nvrtc64_130_0.dll", ("nvrtc", (13, 0))),
    ("kernel32.dll", None), ("msvcp140.dll", None), ("nvcuda.dll", None), ("zlibwapi.dll", None),
    ("onnxruntime_providers_cuda.dll", None), ("cudart64_12.so", None),
])
def test_dll_names_are_read_as_windows_md_lists_them(name: str, parsed: tuple[str, tuple[int, ...]] | None) -> None:
    assert parse_dll_name(name) == parsed


def test_the_cuda_major_a_dll_name_says() -> None:
    assert [cuda_major_by_dll_name(n) for n in ("cudart64_110.dll", "cublas64_12.dll", "cufft64_11.dll",
                                                "cufft64_12.dll", "nvJitLink_130_0.dll", "cudnn64_9.dll")] == \
        [11, 12, 12, 13, 13, None]


def test_matrix_sonames_map_to_the_dlls_the_wheels_install() -> None:
    table = {"libcudart.so.11.0": "cudart64_110.dll", "libcudart.so.12": "cudart64_12.dll",
             "libcudart.so.13": "cudart64_13.dll", "libcublasLt.so.12": "cublasLt64_12.dll",
             "libcublas.so.13": "cublas64_13.dll", "libcufft.so.10": "cufft64_10.dll",
             "libcufft.so.12": "cufft64_12.dll", "libnvrtc.so.12": "nvrtc64_120_0.dll",
             "libnvrtc.so.13": "nvrtc64_130_0.dll", "libnvJitLink.so.12": "nvJitLink_120_0.dll",
             "libcudnn.so.8": "cudnn64_8.dll", "libcudnn_ops_infer.so.8": "cudnn_ops_infer64_8.dll",
             "libcudnn_graph.so.9": "cudnn_graph64_9.dll"}
    assert {s: dll_name_for_soname(s) for s in table} == table
    assert dll_name_for_soname("libc.so.6") is None


def test_the_driver_version_nvcuda_dll_encodes() -> None:
    # NVIDIA's Windows file versions end in the driver version: 32.0.15.6094 is driver 560.94.
    assert driver_version_from_file_version((32, 0, 15, 6094)) == "560.94"
    assert driver_version_from_file_version((31, 0, 15, 5222)) == "552.22"
    assert driver_version_from_file_version((6, 14, 0)) is None


# -- the simulated process, set up from a Windows probe ----------------------------------------------------------
@pytest.fixture
def stubs() -> None:
    missing = mingw_missing()
    if missing:
        pytest.skip(missing)


def _windows_probe(tmp_path: Path, windows: dict[str, object], path: str) -> ProbeFacts:
    sp = str(tmp_path / "Lib" / "site-packages")
    return parse_probe({
        "probe_schema": 2, "python": {"executable": str(tmp_path / "python.exe"),
                                      "real_executable": str(tmp_path / "python.exe"), "version": "3.11.11"},
        "os": {"system": "Windows", "machine": "AMD64"},
        "env": {"kind": "conda", "prefix": str(tmp_path), "base_prefix": str(tmp_path), "purelib": sp,
                "platlib": sp, "site_packages": [sp]},
        "environ": {"PATH": path}, "cwd": str(tmp_path / "cwd"), "windows": windows,
    })


def test_the_probe_s_windows_facts_set_up_the_simulated_process(tmp_path: Path, stubs: None) -> None:
    sys32, win, exe, on_path = (tmp_path / n for n in ("System32", "Windows", "py", "onpath"))
    windows = {"system_dir": str(sys32), "windows_dir": str(win), "exe_dir": str(exe),
               "machine_path": ["%SystemRoot%\\system32;C:\\CUDA\\bin", "REG_EXPAND_SZ",
                                "C:\\Windows\\system32;C:\\CUDA\\bin"],
               "user_path": ["C:\\Users\\me\\bin", "REG_SZ", "C:\\Users\\me\\bin"],
               "conda_dll_search_modification": "1", "packaged": False}
    probe = _windows_probe(tmp_path, windows, f'"{on_path}";;{tmp_path / "second"}')
    assert probe.windows is not None
    assert probe.windows.login_path == ("C:\\Windows\\system32", "C:\\CUDA\\bin", "C:\\Users\\me\\bin")
    plat = WindowsPlatform()
    config = plat.loader_config(probe, probe.environ["PATH"])
    assert (config.exe_dir, config.system_dirs, config.cwd) == (str(exe), (str(sys32), str(win)),
                                                               str(tmp_path / "cwd"))
    assert config.path == (str(on_path), str(tmp_path / "second"))  # quotes and empty entries dropped
    assert config.default_dirs_mode and not config.packaged  # CONDA_DLL_SEARCH_MODIFICATION_ENABLE was set
    build_stub_dll(on_path / "cudart64_12.dll")
    no_conda_mode = _windows_probe(tmp_path, {**windows, "conda_dll_search_modification": None},
                                   probe.environ["PATH"])
    process = plat.new_process(no_conda_mode, probe.environ["PATH"], PeReader(use_disk=False))
    assert process.locate("CUDART64_12.DLL").path == str(on_path / "cudart64_12.dll")
    with pytest.raises(OrtfixError, match=r"windows\.user_path"):
        _windows_probe(tmp_path, {**windows, "user_path": ["x", "REG_DWORD", "x"]}, "")


def test_windows_facts_msvc_runtime_zlibwapi_and_the_login_path(tmp_path: Path, stubs: None) -> None:
    sys32, exe, now_dir, login_dir = (tmp_path / n for n in ("System32", "py", "now", "login"))
    sys32.mkdir()
    build_stub_dll(exe / "zlibwapi.dll")  # next to python.exe: a bare LoadLibrary finds it first
    build_stub_dll(now_dir / "cublas64_12.dll", marker="this shell's")
    build_stub_dll(login_dir / "cublas64_12.dll", marker="the login's")
    build_stub_dll(login_dir / "cudart64_12.dll")  # found only at login: a new terminal will see it
    windows = {"system_dir": str(sys32), "windows_dir": str(tmp_path / "Windows"), "exe_dir": str(exe),
               "machine_path": [str(login_dir), "REG_SZ", str(login_dir)], "user_path": None,
               "conda_dll_search_modification": None, "packaged": False}
    probe = _windows_probe(tmp_path, windows, str(now_dir))
    plat, reader = WindowsPlatform(), PeReader(use_disk=False)
    needed = [Resolution(n, "provider", None, None) for n in ("cublas64_12.dll", "cudart64_12.dll",
                                                                 "cufft64_11.dll", "KERNEL32.dll")]
    facts = windows_facts(probe, plat, lambda path: plat.new_process(probe, path, reader), str(now_dir), (),
                          reader, needed)
    assert facts is not None
    assert facts.msvc_runtime.path is None and str(sys32) in facts.msvc_runtime.searched  # no VC++ runtime here
    assert facts.zlibwapi.path == str(exe / "zlibwapi.dll")
    assert facts.login_path == (str(login_dir),) and facts.path == (str(now_dir),)
    assert facts.login_differs == (
        LoginDifference("cublas64_12.dll", str(now_dir / "cublas64_12.dll"), str(login_dir / "cublas64_12.dll")),
        LoginDifference("cudart64_12.dll", None, str(login_dir / "cudart64_12.dll")))


# -- the Windows rules, on facts built by hand ---------------------------------------------------------------------
def _facts(tmp_path: Path, windows: WindowsFacts, *, version: str = "1.23.2", missing: tuple[str, ...] = (),
           libraries: tuple[LibCopy, ...] = (), cudnn: str | None = None) -> Facts:
    sp = str(tmp_path / "Lib" / "site-packages")
    probe = parse_probe({
        "probe_schema": 2, "python": {"executable": str(tmp_path / "python.exe"),
                                      "real_executable": str(tmp_path / "python.exe"), "version": "3.11.11"},
        "os": {"system": "Windows", "machine": "AMD64"},
        "env": {"kind": "system", "prefix": str(tmp_path), "base_prefix": str(tmp_path), "purelib": sp,
                "platlib": sp, "site_packages": [sp]},
        "distributions": [{"name": "nvidia-cudnn-cu11", "normalized": "nvidia-cudnn-cu11", "version": cudnn,
                           "location": sp, "dist_info": f"{sp}/nvidia_cudnn_cu11-{cudnn}.dist-info",
                           "requires": []}] if cudnn else [],
    })
    provider_dll = os.path.join(sp, "onnxruntime", "capi", "onnxruntime_providers_cuda.dll")
    provider = ProviderLoad("cuda", provider_dll, missing, tuple(Resolution(n, provider_dll, None, None)
                                                                 for n in missing))
    ort = OrtInstall(dir=OrtDir(os.path.join(sp, "onnxruntime"), sp, {}, ("onnxruntime_providers_cuda.dll",)),
                     package="onnxruntime-gpu", version=version, cuda_version=None, owners=(), winner=None,
                     cuda_major=11 if cudnn else 12, cuda_source="binary", cudnn_major=8 if cudnn else 9, builds=(),
                     providers=(provider,))
    loader = LoaderContext(None, (), (), (), "KnownDLLs", (), search_variable="PATH", fold_case=True)
    return Facts(target=str(tmp_path / "python.exe"), probe=probe, driver=DriverFacts(present=False, version=None),
                 libraries=libraries, ort=(ort,), loader=loader, matrix_version="test", findable={},
                 platform=WindowsPlatform(), windows=windows)


def _windows(msvc: DllAt, differs: tuple[LoginDifference, ...] = ()) -> WindowsFacts:
    return WindowsFacts(path=(), login_path=(), msvc_runtime=msvc, zlibwapi=DllAt("zlibwapi.dll", None, None, None),
                        login_differs=differs, default_dirs_mode=False, packaged=False)


def test_msvc_runtime_older_than_14_40_for_ort_1_22_and_later(tmp_path: Path) -> None:
    old = DllAt("msvcp140.dll", "C:\\Windows\\System32\\msvcp140.dll", "System32", (14, 29, 30133, 0))
    new = DllAt("msvcp140.dll", "C:\\Windows\\System32\\msvcp140.dll", "System32", (14, 40, 33810, 0))
    none = DllAt("msvcp140.dll", None, None, None, ("C:\\py", "C:\\Windows\\System32"))
    gpu = _facts(tmp_path, _windows(old)).ort[0]
    codes = [(f.code, f.severity, dict(f.data)) for f in windows_findings(_facts(tmp_path, _windows(old)), gpu)]
    assert codes == [(FindingCode.MSVC_RUNTIME_OLD, Severity.ERROR,
                      {"path": old.path, "version": "14.29.30133.0", "needs": "14.40"})]
    assert windows_findings(_facts(tmp_path, _windows(new)), gpu) == []
    assert windows_findings(_facts(tmp_path, _windows(old), version="1.21.1"), gpu) == []  # before 1.22: fine
    found = windows_findings(_facts(tmp_path, _windows(none)), gpu)
    assert [f.code for f in found] == [FindingCode.MSVC_RUNTIME_OLD] and found[0].data["path"] is None
    assert "C:\\Windows\\System32" in str(found[0].evidence[0])


def test_a_dll_only_in_torch_lib_and_a_login_path_that_differs(tmp_path: Path) -> None:
    new = DllAt("msvcp140.dll", "C:\\Windows\\System32\\msvcp140.dll", "System32", (14, 42, 0, 0))
    torch_copy = LibCopy("C:\\sp\\torch\\lib\\cudnn64_9.dll", "cudnn", "cudnn64_9.dll", 9, None, ORIGIN_TORCH, True)
    wheel_copy = LibCopy("C:\\sp\\nvidia\\cublas\\bin\\cublas64_12.dll", "cublas", "cublas64_12.dll", 12, None,
                         ORIGIN_WHEEL, True)
    differs = (LoginDifference("cublas64_12.dll", None, "C:\\CUDA\\bin\\cublas64_12.dll"),)
    facts = _facts(tmp_path, _windows(new, differs), missing=("CUDNN64_9.DLL", "cublas64_12.dll"),
                   libraries=(torch_copy, wheel_copy))
    found = {f.code: f for f in windows_findings(facts, facts.ort[0])}
    assert set(found) == {FindingCode.TORCH_LIB_ONLY, FindingCode.LOGIN_PATH_DIFFERS}
    assert found[FindingCode.TORCH_LIB_ONLY].data == {"dlls": {"CUDNN64_9.DLL": [torch_copy.path]}}
    assert found[FindingCode.LOGIN_PATH_DIFFERS].data == {"dlls": {"cublas64_12.dll": [None, differs[0].at_login]}}


# -- the real thing under wine -----------------------------------------------------------------------------------
def _check(w: WinPython, home: Path, winepath: str | None = None) -> tuple[int, dict[str, object]]:
    env = {"WINEPATH": winepath} if winepath else {}
    proc = w.ortfix("check", "--json", "--fresh", "--python", to_windows(home / "python.exe"), env=env)
    assert proc.stdout.strip(), proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["exit_code"] == proc.returncode, doc
    return proc.returncode, doc


def _codes(doc: dict[str, object]) -> list[str]:
    findings = doc["findings"]
    assert isinstance(findings, list)
    return [f["code"] for f in findings]


def _drop_target_scripts(sp: Path) -> None:
    """pip --target leaves the wheel's scripts in site-packages\\bin while RECORD lists them at ..\\..\\bin (a
    prefix's Scripts): drop those rows so the install is not judged damaged (ORT007) for it."""
    record = next(sp.glob("onnxruntime-*.dist-info")) / "RECORD"
    rows = record.read_text(encoding="utf-8").splitlines()
    record.write_text("".join(r + "\n" for r in rows if not r.startswith("../")), encoding="utf-8")


def _make_gpu_build(sp: Path) -> Path:
    """The CPU install turned into onnxruntime-gpu 1.23.2: its dist-info renamed and its METADATA's name changed (the
    RECORD still lists the real extension module), and a provider DLL importing what the real one imports."""
    cpu = sp / "onnxruntime-1.23.2.dist-info"
    gpu = sp / "onnxruntime_gpu-1.23.2.dist-info"
    cpu.rename(gpu)
    meta = gpu / "METADATA"
    data = meta.read_bytes()
    assert b"Name: onnxruntime\r\n" in data or b"Name: onnxruntime\n" in data
    meta.write_bytes(data.replace(b"Name: onnxruntime\r", b"Name: onnxruntime-gpu\r", 1)
                     .replace(b"Name: onnxruntime\n", b"Name: onnxruntime-gpu\n", 1))
    record = gpu / "RECORD"
    rows = record.read_text(encoding="utf-8").replace(cpu.name + "/", gpu.name + "/").splitlines()
    record.write_text("".join((f"{r.rsplit(',', 1)[0]},{meta.stat().st_size}" if r.startswith(f"{gpu.name}/METADATA,")
                               else r) + "\n" for r in rows), encoding="utf-8")
    capi = sp / "onnxruntime" / "capi"
    return build_stub_dll(capi / "onnxruntime_providers_cuda.dll",
                          needed=[*ORT_123_CUDA_IMPORTS, "onnxruntime_providers_shared.dll", "MSVCP140.dll"])


def _nvidia_stubs(sp: Path) -> list[Path]:
    folders = {name: sp / "nvidia" / name / "bin" for name in ("cublas", "cuda_runtime", "cufft", "cudnn")}
    build_stub_dll(folders["cublas"] / "cublasLt64_12.dll")
    build_stub_dll(folders["cublas"] / "cublas64_12.dll", needed=["cublasLt64_12.dll"])
    build_stub_dll(folders["cuda_runtime"] / "cudart64_12.dll")
    build_stub_dll(folders["cufft"] / "cufft64_11.dll")
    for name in ("cudnn64_9.dll", *CUDNN9_SUBLIBS):
        build_stub_dll(folders["cudnn"] / name)
    return list(folders.values())


def _wine_loads(w: WinPython, dll: Path, winepath: str | None) -> subprocess.CompletedProcess[str]:
    """Wine's own loader on the provider, as ORT loads it (LOAD_WITH_ALTERED_SEARCH_PATH): the oracle."""
    code = f"import ctypes\nctypes.WinDLL({to_windows(dll)!r}, winmode=8)\nprint('loaded')"
    return w.run("-c", code, env={"WINEPATH": winepath} if winepath else {})


@pytest.mark.slow
def test_check_under_wine_cpu_package_then_gpu_build_unfound_then_found(tmp_path: Path, stubs: None) -> None:
    w = win_python()
    home = w.new_home(tmp_path)
    sp = home / "Lib" / "site-packages"
    pip_install_windows_cached(sp, "onnxruntime==1.23.2", no_deps=True)
    _drop_target_scripts(sp)

    # 1. the CPU package, as text: ORT002; no driver under wine: DRV001, exit code 1
    text = w.ortfix("check", "--fresh", "--python", to_windows(home / "python.exe"))
    assert text.returncode == 1, text.stderr[-2000:]
    lines = text.stdout.splitlines()
    assert any(line.startswith("✗ ORT002 error: the CPU-only package onnxruntime 1.23.2") for line in lines)
    assert any(line.startswith("✗ DRV001 error") for line in lines) and "system      Windows AMD64" in lines
    assert not [line for line in lines if line.startswith(("✗ ORT007", "✗ LIB"))], text.stdout

    # 2. the GPU build, the NVIDIA DLLs installed in nvidia\<lib>\bin but on no search path: LIB002 names each one
    provider = _make_gpu_build(sp)
    folders = _nvidia_stubs(sp)
    code, doc = _check(w, home)
    by_code = {f["code"]: f for f in doc["findings"]}
    assert code == 1 and "ORT002" not in by_code and "DRV001" in by_code, list(by_code)
    assert "ORT007" not in by_code, by_code.get("ORT007")
    facts = doc["facts"]
    assert isinstance(facts, dict)
    assert facts["os"]["system"] == "Windows" and facts["loader"]["search_variable"] == "PATH"
    win = facts["windows"]
    assert win["msvc_runtime"]["path"].lower().endswith("\\system32\\msvcp140.dll"), win
    assert "c:\\windows\\system32" in [p.lower() for p in win["login_path"]]
    if "WIN001" in by_code:  # wine's msvcp140.dll has no version resource: told, as a warning
        assert by_code["WIN001"]["severity"] == "warning" and by_code["WIN001"]["data"]["version"] is None
    assert set(by_code["LIB002"]["data"]["libraries"]) == set(ORT_123_CUDA_IMPORTS), by_code["LIB002"]
    assert any(e.startswith("Windows searched (LOAD_WITH_ALTERED_SEARCH_PATH)") and "PATH=" in e
               for e in by_code["LIB002"]["evidence"])
    assert by_code["LIB002"]["data"]["libraries"]["cudart64_12.dll"] == [
        to_windows(sp / "nvidia" / "cuda_runtime" / "bin" / "cudart64_12.dll")]
    # what plan makes of these facts: ortfix's PATH hook with exactly those folders (fixes LIB002)
    plan = w.ortfix("plan", "--json", "--python", to_windows(home / "python.exe"))
    actions = json.loads(plan.stdout)["actions"]
    assert [a["kind"] for a in actions] == ["write-file", "write-file"], actions
    hook = actions[0]["details"]
    assert hook["path"] == to_windows(sp / "_ortfix_dllpath.py") and "LIB002" in actions[0]["fixes"], hook
    listed = re.search(r"^FOLDERS = (\[.*\])$", hook["content"], re.M)
    assert listed and set(ast.literal_eval(listed.group(1))) == {to_windows(f) for f in folders}, hook["content"]
    oracle = _wine_loads(w, provider, None)
    assert "loaded" not in oracle.stdout
    named = {line.split("Library ", 1)[1].split(" ", 1)[0] for line in oracle.stderr.splitlines()
             if "err:module:import_dll Library " in line}
    assert named and named <= set(ORT_123_CUDA_IMPORTS), oracle.stderr[-2000:]

    # 3. the same folders on PATH (WINEPATH): no library finding; every DLL and cuDNN's sub-libraries resolve
    winepath = ";".join(to_windows(f) for f in folders)
    code, doc = _check(w, home, winepath)
    assert not [c for c in _codes(doc) if c.startswith("LIB")], doc["findings"]
    assert code == 1 and "DRV001" in _codes(doc)
    (install,) = doc["facts"]["onnxruntime"]
    assert (install["package"], install["cuda_major"], install["cudnn_major"]) == ("onnxruntime-gpu", 12, 9)
    libs = {r["name"].lower(): r for r in install["providers"][0]["libraries"]}
    assert {n.lower() for n in (*ORT_123_CUDA_IMPORTS, *CUDNN9_SUBLIBS)} <= set(libs)
    assert all(libs[n.lower()]["path"] for n in (*ORT_123_CUDA_IMPORTS, *CUDNN9_SUBLIBS)), libs
    assert libs["cudnn_graph64_9.dll"]["via"] == "PATH" and libs["cudnn_graph64_9.dll"]["lazy"] is True
    assert "loaded" in _wine_loads(w, provider, winepath).stdout
    shutil.rmtree(home, ignore_errors=True)


def test_zlibwapi_for_cudnn_8_3_to_8_9_only(tmp_path: Path) -> None:
    new = DllAt("msvcp140.dll", "C:\\Windows\\System32\\msvcp140.dll", "System32", (14, 42, 0, 0))
    torch_copy = LibCopy("C:\\sp\\torch\\lib\\zlibwapi.dll", "zlibwapi", "zlibwapi.dll", None, None, ORIGIN_TORCH,
                         True)

    def codes(cudnn: str) -> list[tuple[FindingCode, Severity]]:
        facts = _facts(tmp_path, _windows(new), version="1.18.1", cudnn=cudnn, libraries=(torch_copy,))
        return [(f.code, f.severity) for f in windows_findings(facts, facts.ort[0])]

    assert codes("8.9.2.26") == [(FindingCode.ZLIBWAPI_MISSING, Severity.ERROR)]
    assert codes("8.3.0.98") == [(FindingCode.ZLIBWAPI_MISSING, Severity.ERROR)]
    assert codes("8.2.4.15") == []  # before 8.3 cuDNN had no zlib dependency
    facts = _facts(tmp_path, _windows(new), version="1.18.1", cudnn="8.9.2.26", libraries=(torch_copy,))
    (finding,) = windows_findings(facts, facts.ort[0])
    assert finding.data == {"dlls": {"zlibwapi.dll": [torch_copy.path]}}


def test_torch_s_cudnn_major_from_its_dlls(tmp_path: Path) -> None:
    from dataclasses import replace

    from ortfix.check.torch_compat import torch_cudnn_major
    from ortfix.target.probe import TorchInfo

    facts = _facts(tmp_path, _windows(DllAt("msvcp140.dll", None, None, None)))
    lib = str(tmp_path / "torch" / "lib")
    torch = TorchInfo(str(tmp_path / "torch"), "2.7.1+cu128", "12.8", lib, ("cublas64_12.dll", "cudnn64_9.dll"))
    assert torch_cudnn_major(replace(facts, probe=replace(facts.probe, torch=torch))) == 9


def test_derived_markers_of_a_windows_target_are_windows_ones(tmp_path: Path) -> None:
    """A probe report without measured markers: the values derived for a Windows target are what PEP 508 says a
    Windows interpreter has (sys_platform was 'windows' before the platform answered it)."""
    from ortfix.check.requires import marker_environment

    facts = _facts(tmp_path, _windows(DllAt("msvcp140.dll", None, None, None)))
    assert not facts.probe.markers
    env = marker_environment(facts)
    assert (env["sys_platform"], env["os_name"], env["platform_system"]) == ("win32", "nt", "Windows")
