"""`ortfix verify`'s library-load check on Windows, proven under wine's real loader: ortfix itself runs on the
Windows CPython (its host side, `verify/winloadcheck.py`), starts a fresh Windows Python that runs
`target/_winload.py`, and reads its `ortfix.loadcheck/1` report back.

The DLLs are real x86-64 PE files built with mingw-w64: the provider stands in for onnxruntime_providers_cuda.dll
with the imports a 1.19-1.26 provider has (cublasLt64_12.dll, cudnn64_9.dll) or a 1.16-1.18 one (cudnn64_8.dll);
cudnn64_8.dll is a stub that does what the real cuDNN 8 does when a DLL it loads by name is absent: it prints
"Could not locate cudnn_ops_infer64_8.dll. Please make sure it is in your library path!" and ends the process with
exit code 9 (here in its DllMain, so loading it is enough). All scenarios run in one Windows process (each starts
its own fresh child, as verify does).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from factsdata import load_facts
from ortfix.check.facts import Facts, ProviderLoad
from ortfix.system.driver import DriverFacts
from ortfix.system.loader import Resolution
from ortfix.system.windows.platform import WindowsPlatform
from ortfix.verify.levels import BUILTIN_MODEL, Level, Status, level_loader, session_levels
from support.testcache import cache_root
from support.winstubs import MINGW_GCC, build_stub_dll, exports_imported_by, mingw_missing
from wintools import pip_install_windows, to_windows, win_python

pytestmark = pytest.mark.slow  # every test here builds a venv, runs pip or starts wine

# What the real cuDNN 8 does when a DLL it loads on demand is not found (docs/windows-dlls.md).
CUDNN8_SOURCE = r"""
#include <windows.h>
#include <stdio.h>
__declspec(dllexport) int cudnnGetVersion(void) { return 8907; }
BOOL WINAPI DllMain(HINSTANCE self, DWORD reason, LPVOID reserved) {
    if (reason == DLL_PROCESS_ATTACH && LoadLibraryA(WANT) == NULL) {
        printf("Could not locate %s. Please make sure it is in your library path!\n", WANT);
        fflush(stdout);
        ExitProcess(9);
    }
    return TRUE;
}
"""

HOST = r"""
import json, os, sys
from ortfix.verify.winloadcheck import check_loadable_windows
cases = json.loads(sys.argv[1])
out = {}
for name, case in cases.items():
    env = dict(os.environ)
    env["PATH"] = ";".join(case["path"] + [env.get("PATH", "")])
    env.pop("PYTHONPATH", None)
    env["PYTHONPATH"] = case["pythonpath"]
    check = check_loadable_windows(sys.executable, case["provider"], case["by_name"], prefix=sys.prefix,
                                   env=env, timeout=120)
    out[name] = check.to_json()
# A session whose cuDNN 8 ends the process (as level 2's child would see it): how ortrun reads that death.
from ortfix.target.ortrun import MARK, stream
child = ("import ctypes, json, sys; print(sys.argv[1] + json.dumps({'stage': 'import'}), flush=True); "
         "ctypes.WinDLL(sys.argv[2])")
dead = stream([sys.executable, "-c", child, MARK, sys.argv[2]], dict(os.environ), target_python=None, timeout=120)
out["session-death"] = {"death": str(dead.death()), "returncode": dead.returncode, "evidence": dead.evidence}
print("RESULT:" + json.dumps(out))
"""


def _msvcp140_stub(path: Path, version: tuple[int, int, int, int]) -> Path:
    """An msvcp140.dll carrying a version resource of `version` (windres), as the redistributable's does."""
    path.parent.mkdir(parents=True, exist_ok=True)
    numbers = ",".join(str(v) for v in version)
    rc, obj, src = path.with_suffix(".rc"), path.with_suffix(".res.o"), path.with_suffix(".c")
    rc.write_text(f"1 VERSIONINFO\nFILEVERSION {numbers}\nPRODUCTVERSION {numbers}\nBEGIN\nEND\n")
    src.write_text("int ortfix_stub(void) { return 0; }\n")
    for argv in (["x86_64-w64-mingw32-windres", str(rc), "-O", "coff", "-o", str(obj)],
                 [MINGW_GCC, "-shared", "-o", str(path), str(src), str(obj)]):
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stderr
    for leftover in (rc, obj, src):
        leftover.unlink()
    return path


def _cudnn8_stub(path: Path, wants: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    src = path.parent / f"{path.stem}-{wants}.c"
    src.write_text(CUDNN8_SOURCE)
    proc = subprocess.run([MINGW_GCC, "-shared", "-O0", f'-DWANT="{wants}"', "-o", str(path), str(src)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    src.unlink()
    return path


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    missing = mingw_missing()
    if missing:
        pytest.skip(missing)
    w = win_python()
    root = tmp_path_factory.mktemp("winverify")
    site = root / "site"
    (site / "onnxruntime").mkdir(parents=True)
    (site / "onnxruntime" / "__init__.py").write_text("__version__ = '0+stub'\n")
    nvidia = site / "nvidia"
    cublas, cudnn = nvidia / "cublas" / "bin", nvidia / "cudnn" / "bin"
    build_stub_dll(cublas / "cublasLt64_12.dll", exports=["cublasLtCreate"])
    build_stub_dll(cudnn / "cudnn64_9.dll", exports=["cudnnGetVersion"])
    build_stub_dll(cudnn / "cudnn_graph64_9.dll", exports=["cudnnBackendCreateDescriptor"])
    # cublas64_12.dll alone in a folder: it imports cublasLt64_12.dll, which is not beside it
    lone = root / "lone"
    build_stub_dll(lone / "cublas64_12.dll", exports=["cublasCreate_v2"], needed=["cublasLt64_12.dll"])
    cu8 = root / "cudnn8"
    _cudnn8_stub(cu8 / "cudnn64_8.dll", "cudnn_ops_infer64_8.dll")
    z8 = root / "cudnn8z"
    _cudnn8_stub(z8 / "cudnn64_8.dll", "zlibwapi.dll")
    providers = {}
    for tag, needed in {"v12": ["cublasLt64_12.dll", "cudnn64_9.dll"], "chain": ["cublas64_12.dll"],
                        "v8": ["cudnn64_8.dll"], "driver": ["nvcudart_hybrid64.dll", "cublasLt64_12.dll"]}.items():
        capi = root / tag / "onnxruntime" / "capi"
        build_stub_dll(capi / "onnxruntime_providers_cuda.dll", needed=needed, marker=f"provider-{tag}")
        providers[tag] = to_windows(capi / "onnxruntime_providers_cuda.dll")
    both = [to_windows(cublas), to_windows(cudnn)]
    cases: dict[str, dict[str, Any]] = {
        "complete": {"provider": providers["v12"], "by_name": ["cudnn_graph64_9.dll"], "path": both},
        "cublaslt-missing": {"provider": providers["v12"], "by_name": [], "path": [to_windows(cudnn)]},
        "chain": {"provider": providers["chain"], "by_name": [], "path": [to_windows(lone)]},
        "sublib-missing": {"provider": None, "by_name": ["cudnn_adv64_9.dll"], "path": both},
        "cudnn8-exit": {"provider": providers["v8"], "by_name": ["cudnn_ops_infer64_8.dll"], "path": [to_windows(cu8)]},
        "zlibwapi-exit": {"provider": providers["v8"], "by_name": [], "path": [to_windows(z8)]},
        "driver": {"provider": providers["driver"], "by_name": [], "path": both},
        "driver-and-missing": {"provider": providers["driver"], "by_name": [], "path": [to_windows(cudnn)]},
    }
    for case in cases.values():
        case["pythonpath"] = ";".join(to_windows(p) for p in (site, Path(__file__).resolve().parents[1] / "src",
                                                              w.deps))
    proc = w.run("-c", HOST, json.dumps(cases), to_windows(cu8 / "cudnn64_8.dll"), timeout=600)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT:")), None)
    assert line is not None, (proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:])
    doc: dict[str, dict[str, Any]] = json.loads(line[len("RESULT:"):])
    return doc


def _provider_entry(doc: dict[str, Any]) -> tuple[str, Any]:
    return next((k, v) for k, v in doc["libraries"].items() if k.lower().endswith("onnxruntime_providers_cuda.dll"))


def test_every_dll_found_through_path_loads(results: dict[str, dict[str, Any]]) -> None:
    doc = results["complete"]
    assert doc["schema"] == "ortfix.loadcheck/1" and doc["platform"] == "windows"
    assert doc["ok"] is True, doc
    assert doc["imported"] is True and doc["process_error"] is None and doc["exit_code"] is None
    assert doc["libraries"]["cudnn_graph64_9.dll"] is None
    assert _provider_entry(doc)[1] is None


def test_the_first_missing_dll_is_named(results: dict[str, dict[str, Any]]) -> None:
    doc = results["cublaslt-missing"]
    assert doc["ok"] is False
    name, error = _provider_entry(doc)
    assert "error 126" in error and "cublasLt64_12.dll" in error, error
    assert doc["missing"][name] == ["cublasLt64_12.dll"]


def test_a_missing_dll_of_a_dependency_is_followed_down(results: dict[str, dict[str, Any]]) -> None:
    """cublas64_12.dll is found on PATH, but what it imports is not: the chain names both, the missing one last."""
    doc = results["chain"]
    name, error = _provider_entry(doc)
    assert doc["missing"][name] == ["cublas64_12.dll", "cublasLt64_12.dll"], doc
    assert "cublas64_12.dll -> cublasLt64_12.dll, which is not found" in error


def test_a_library_loaded_by_name_that_is_nowhere_is_named(results: dict[str, dict[str, Any]]) -> None:
    doc = results["sublib-missing"]
    assert doc["ok"] is False and doc["imported"] is True
    assert doc["missing"]["cudnn_adv64_9.dll"] == ["cudnn_adv64_9.dll"]
    assert "error 126" in doc["libraries"]["cudnn_adv64_9.dll"]
    assert "in none of the folders a load by name searches" in doc["libraries"]["cudnn_adv64_9.dll"]


def test_cudnn8_ending_the_process_with_exit_code_9_is_a_verdict(results: dict[str, dict[str, Any]]) -> None:
    doc = results["cudnn8-exit"]
    assert doc["ok"] is False
    assert doc["exit_code"] == 9 and doc["cudnn8_missing"] == "cudnn_ops_infer64_8.dll"
    assert doc["process_error"].startswith("cuDNN 8 could not load its sub-library cudnn_ops_infer64_8.dll"), doc
    assert "Traceback" not in json.dumps(doc)
    _, error = _provider_entry(doc)
    assert "the process ended while loading it" in error
    # the process was gone before the sub-library's own check
    assert doc["libraries"]["cudnn_ops_infer64_8.dll"] == "not reached"


def test_cudnn8_without_zlibwapi_is_named_as_such(results: dict[str, dict[str, Any]]) -> None:
    doc = results["zlibwapi-exit"]
    assert doc["exit_code"] == 9 and doc["cudnn8_missing"] == "zlibwapi.dll"
    assert doc["process_error"].startswith("cuDNN 8 could not load zlibwapi.dll"), doc


def test_a_session_ended_by_cudnn8_reads_as_a_verdict(results: dict[str, dict[str, Any]]) -> None:
    """What verify's levels 2-3 (and tune) say when cuDNN 8 ends their child: the verdict, and the message."""
    doc = results["session-death"]
    assert doc["returncode"] == 9
    assert doc["death"].startswith("exited with status 9: cuDNN 8 could not load its sub-library "
                                   "cudnn_ops_infer64_8.dll"), doc
    assert any("Could not locate cudnn_ops_infer64_8.dll" in line for line in doc["evidence"]), doc


def test_a_driver_dll_is_named_when_the_driver_is_absent(results: dict[str, dict[str, Any]]) -> None:
    """1.27's provider imports the driver's nvcudart_hybrid64.dll: under wine there is no driver, and the chain says
    so (levels.py turns it into 'needs the NVIDIA driver', not an environment failure)."""
    doc = results["driver"]
    name, error = _provider_entry(doc)
    assert doc["driver_missing"][name] == ["nvcudart_hybrid64.dll"], doc
    assert name not in doc["missing"], doc  # every other import (cublasLt64_12.dll here) was found and loaded
    assert "the NVIDIA driver's nvcudart_hybrid64.dll is not installed" in error


def test_a_driver_dll_does_not_hide_a_missing_one(results: dict[str, dict[str, Any]]) -> None:
    doc = results["driver-and-missing"]
    name, _ = _provider_entry(doc)
    assert doc["driver_missing"][name] == ["nvcudart_hybrid64.dll"] and doc["missing"][name] == ["cublasLt64_12.dll"]


# --- verify's level 1 on a Windows target: the verdicts -------------------------------------------------------------


def _windows_facts(provider: Path, lazy: list[str], prefix: Path, version: str = "1.20.2") -> Facts:
    """A recorded environment's facts made into a Windows target's (the host side only reads these fields): the
    provider at `provider`, the libraries loaded later by bare name, no NVIDIA driver (wine has none)."""
    base = load_facts("e120")
    install = base.ort[0]
    cuda = ProviderLoad("cuda", to_windows(provider), (), tuple(
        Resolution(n, "cudnn64_9.dll", None, None, lazy=True) for n in lazy), by_name=tuple(lazy))
    probe = dataclasses.replace(base.probe, system="Windows", prefix=to_windows(prefix))
    return dataclasses.replace(base, probe=probe, platform=WindowsPlatform(),
                               driver=DriverFacts(present=False, version=None),
                               ort=(dataclasses.replace(install, version=version, providers=(cuda,)),))


def _wine_python(script: Path, site: Path, overrides: str | None = None) -> Path:
    """Write `script`: a `python` that is the Windows CPython under wine with `site` on its PYTHONPATH and the
    folders of $ORTFIX_TEST_WINEPATH in front of its PATH, for ortfix's host side on Linux to start. `overrides`:
    WINEDLLOVERRIDES entries to add (wine uses its own msvcp140.dll for that name unless told `msvcp140=n,b`)."""
    w = win_python()
    env = w.env(pythonpath=[site])
    if overrides:
        env["WINEDLLOVERRIDES"] += ";" + overrides
    exports = "".join(f"export {k}={shlex.quote(env[k])}\n" for k in ("WINEPREFIX", "WINEDEBUG", "WINEDLLOVERRIDES"))
    script.write_text(f"#!/bin/sh\n{exports}export PYTHONPATH={shlex.quote(to_windows(site))}\n"
                      f"export WINEPATH=\"$ORTFIX_TEST_WINEPATH\"\nexec wine {shlex.quote(str(w.exe))} \"$@\"\n")
    script.chmod(0o755)
    return script


@pytest.fixture(scope="module")
def launcher(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(a `python` that is the Windows CPython under wine, the folder for the test's DLLs): ortfix's host side runs
    here on Linux and starts the Windows Python as it would start the target's own."""
    missing = mingw_missing()
    if missing:
        pytest.skip(missing)
    win_python()
    root = tmp_path_factory.mktemp("winlevel")
    site = root / "site"
    (site / "onnxruntime").mkdir(parents=True)
    (site / "onnxruntime" / "__init__.py").write_text("")
    return _wine_python(root / "python", site, "msvcp140=n,b"), root


def test_level_1_verdicts_on_windows(launcher: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    python, root = launcher
    build_stub_dll(root / "cublas" / "cublasLt64_12.dll", exports=["cublasLtCreate"])
    build_stub_dll(root / "cudnn" / "cudnn64_9.dll", exports=["cudnnGetVersion"])
    build_stub_dll(root / "cudnn" / "cudnn_graph64_9.dll", exports=["cudnnBackendCreateDescriptor"])
    _cudnn8_stub(root / "cudnn8z" / "cudnn64_8.dll", "zlibwapi.dll")
    v12 = build_stub_dll(root / "v12" / "capi" / "onnxruntime_providers_cuda.dll",
                         needed=["cublasLt64_12.dll", "cudnn64_9.dll"], marker="level-v12")
    v8 = build_stub_dll(root / "v8" / "capi" / "onnxruntime_providers_cuda.dll", needed=["cudnn64_8.dll"],
                        marker="level-v8")
    hybrid = build_stub_dll(root / "v27" / "capi" / "onnxruntime_providers_cuda.dll",
                            needed=["nvcudart_hybrid64.dll", "cublasLt64_12.dll"], marker="level-v27")
    both = ";".join(to_windows(root / d) for d in ("cublas", "cudnn"))

    def level(provider: Path, lazy: list[str], winepath: str) -> Level:
        monkeypatch.setenv("ORTFIX_TEST_WINEPATH", winepath)
        return level_loader(_windows_facts(provider, lazy, root), str(python), conda_hook=None)

    ok = level(v12, ["cudnn_graph64_9.dll"], both)
    assert ok.status is Status.PASS, (ok.verdict, ok.evidence)
    assert ok.load_check is not None and ok.load_check.platform == "windows"
    assert [lib.soname for lib in ok.load_check.libraries][1:] == ["cudnn_graph64_9.dll"]  # loaded by name

    missing = level(v12, ["cudnn_graph64_9.dll"], to_windows(root / "cudnn"))
    assert missing.status is Status.FAIL
    assert str(missing.verdict).startswith("onnxruntime_providers_cuda.dll cannot be loaded: it needs "
                                           "cublasLt64_12.dll, which is not found"), missing.verdict

    zlib = level(v8, [], to_windows(root / "cudnn8z"))
    assert zlib.status is Status.FAIL, zlib.verdict
    assert str(zlib.verdict).startswith("cuDNN 8 could not load zlibwapi.dll"), zlib.verdict
    assert zlib.fix is not None and "cuDNN 9" in zlib.fix and "1.19" in zlib.fix
    assert zlib.load_check is not None and zlib.load_check.exit_code == 9

    # The msvcp140.dll the provider gets (here: beside it) is 14.29: too old for 1.22+, fine for 1.20.
    _msvcp140_stub(root / "v22" / "capi" / "msvcp140.dll", (14, 29, 30133, 0))
    v22 = build_stub_dll(root / "v22" / "capi" / "onnxruntime_providers_cuda.dll",
                         needed=["msvcp140.dll", "cublasLt64_12.dll"], marker="level-v22")
    monkeypatch.setenv("ORTFIX_TEST_WINEPATH", both)
    old_runtime = level_loader(_windows_facts(v22, [], root, version="1.22.0"), str(python), conda_hook=None)
    assert old_runtime.status is Status.FAIL, old_runtime.verdict
    assert "msvcp140.dll is version 14.29.30133.0" in str(old_runtime.verdict), old_runtime.verdict
    assert "14.40" in str(old_runtime.verdict)
    assert old_runtime.fix is not None and "Visual C++ Redistributable" in old_runtime.fix
    older_ort = level_loader(_windows_facts(v22, [], root, version="1.20.2"), str(python), conda_hook=None)
    assert older_ort.status is Status.PASS, older_ort.verdict

    # No driver here: the driver's own DLL missing is not the environment's fault, and says so.
    driverless = level(hybrid, [], both)
    assert driverless.status is Status.PASS, (driverless.verdict, driverless.evidence)
    assert any(str(n).startswith("onnxruntime_providers_cuda.dll: not loaded: it imports the NVIDIA driver's "
                            "nvcudart_hybrid64.dll") for n in driverless.evidence), driverless.evidence
    assert driverless.load_check is not None and driverless.load_check.ok and not driverless.load_check.failures
    # ... but not when another import is missing too
    monkeypatch.setenv("ORTFIX_TEST_WINEPATH", to_windows(root / "cudnn"))
    both_missing = level_loader(_windows_facts(hybrid, [], root), str(python), conda_hook=None)
    assert both_missing.status is Status.FAIL and "cublasLt64_12.dll" in str(both_missing.verdict), both_missing.verdict


def _ort_site(version: str) -> Path:
    """A win_amd64 site folder with the real onnxruntime-gpu `version` (numpy 1.26.4: 2.x does not start under wine
    8), installed once per machine into the test cache (pip reads the configured index)."""
    site = cache_root() / f"win-ort-{version}"
    if not (site / "done").is_file():
        tmp = Path(tempfile.mkdtemp(dir=cache_root()))
        pip_install_windows(tmp, f"onnxruntime-gpu=={version}", "numpy==1.26.4")
        (tmp / "done").write_text("ok\n")
        shutil.rmtree(site, ignore_errors=True)
        os.replace(tmp, site)
    return site


@pytest.mark.realwheels
def test_the_real_onnxruntime_provider_under_wine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real onnxruntime-gpu 1.23.2 win_amd64 wheel, its NVIDIA DLLs replaced by stubs with the exports its
    provider imports: level 1 names the first import it cannot find, then passes with the stubs on PATH; levels 2
    and 3, with no driver here, are the documented "not run" verdict, not a failure and not a crash."""
    missing = mingw_missing()
    if missing:
        pytest.skip(missing)
    win_python()
    site = _ort_site("1.23.2")
    provider = site / "onnxruntime" / "capi" / "onnxruntime_providers_cuda.dll"
    nvbin = tmp_path / "nvbin"
    for dll, functions in exports_imported_by(provider.read_bytes()).items():
        if dll.lower().startswith(("cublas", "cudart", "cufft", "cudnn")):
            build_stub_dll(nvbin / dll, exports=list(functions))
    python = _wine_python(tmp_path / "python", site)
    facts = _windows_facts(provider, [], tmp_path, version="1.23.2")

    monkeypatch.setenv("ORTFIX_TEST_WINEPATH", "")
    gone = level_loader(facts, str(python), conda_hook=None)
    assert gone.status is Status.FAIL
    assert str(gone.verdict).startswith("onnxruntime_providers_cuda.dll cannot be loaded: it needs "
                                        "cublasLt64_12.dll"), gone.verdict

    monkeypatch.setenv("ORTFIX_TEST_WINEPATH", to_windows(nvbin))
    loader = level_loader(facts, str(python), conda_hook=None)
    assert loader.status is Status.PASS, (loader.verdict, loader.evidence)
    provider_level, numbers = session_levels(facts, str(python), Path(to_windows(BUILTIN_MODEL)), None, loader,
                                             user_model=False, conda_hook=None, timeout=120)
    assert provider_level.status is Status.NOT_RUN, (provider_level.verdict, provider_level.evidence)
    assert "libraries complete; no NVIDIA driver, so the provider cannot start here" in str(provider_level.verdict)
    assert numbers.status is Status.NOT_RUN


HOST_CONDA = r"""
import dataclasses, json, sys
from factsdata import load_facts
from ortfix.check.facts import ProviderLoad
from ortfix.system.driver import DriverFacts
from ortfix.system.windows.platform import WindowsPlatform
from ortfix.system.windows.hooks import conda_windows_hook_paths, render_conda_windows_hooks
from ortfix.verify.levels import level_loader

provider, dirs, hooked, plain = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], sys.argv[4]
# ortfix's own conda scripts, written by the hook code, in one environment; none in the other
for path, text in zip(conda_windows_hook_paths(hooked), render_conda_windows_hooks(dirs, hooked)):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
base = load_facts("e120")
out = {}
for name, prefix in (("hooked", hooked), ("plain", plain)):
    probe = dataclasses.replace(base.probe, system="Windows", env_kind="conda", prefix=prefix)
    install = dataclasses.replace(base.ort[0], providers=(ProviderLoad("cuda", provider, (), ()),))
    facts = dataclasses.replace(base, probe=probe, platform=WindowsPlatform(),
                                driver=DriverFacts(present=False, version=None), ort=(install,))
    level = level_loader(facts, sys.executable, conda_hook=None)
    out[name] = {"status": level.status.value, "verdict": str(level.verdict)}
print("RESULT:" + json.dumps(out))
"""


def test_a_conda_environment_is_checked_as_conda_activate_leaves_it(tmp_path: Path) -> None:
    """In a Windows conda environment the fresh process gets PATH as ortfix's activate.d scripts leave it: ortfix's
    host side runs on the Windows Python, piece D's code writes the scripts, and the provider's DLLs are found only
    through them."""
    missing = mingw_missing()
    if missing:
        pytest.skip(missing)
    w = win_python()
    home = w.new_home(tmp_path)
    (home / "Lib" / "site-packages" / "onnxruntime").mkdir()
    (home / "Lib" / "site-packages" / "onnxruntime" / "__init__.py").write_text("")
    cublas = build_stub_dll(tmp_path / "cublas" / "cublasLt64_12.dll", exports=["cublasLtCreate"]).parent
    provider = build_stub_dll(tmp_path / "capi" / "onnxruntime_providers_cuda.dll", needed=["cublasLt64_12.dll"],
                              marker="conda-provider")
    tests = Path(__file__).resolve().parent
    proc = w.run("-c", HOST_CONDA, to_windows(provider), json.dumps([to_windows(cublas)]),
                 to_windows(tmp_path / "env"), to_windows(tmp_path / "bare"), exe=home / "python.exe",
                 pythonpath=[tests], timeout=300)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT:")), None)
    assert line is not None, (proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:])
    doc = json.loads(line[len("RESULT:"):])
    assert doc["hooked"]["status"] == "pass", doc
    assert doc["plain"]["status"] == "fail" and "cublasLt64_12.dll" in doc["plain"]["verdict"], doc
