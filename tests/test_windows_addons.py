"""TensorRT and onnxruntime-genai on Windows (issue 24): the TensorRT provider's DLLs by their real names
(`onnxruntime_providers_tensorrt.dll` of the onnxruntime_gpu win_amd64 wheels imports nvinfer_10.dll,
nvonnxparser_10.dll and, up to 1.22, nvinfer_plugin_10.dll: no "64" as the CUDA DLLs have), found in the folder
tensorrt-cuNN-libs installs them into (site-packages\\tensorrt_libs, its package folder: no bin folder), judged by
check (TRT001-TRT003) and made findable by `plan --with tensorrt` with the PATH hook; and the genai package a
Windows user gets: onnxruntime-genai-directml beside onnxruntime-directml.

Judged on Linux by ortfix's own code over real PE DLLs built with mingw-w64 (support/winstubs.py) and a probe report
shaped as the probe writes it for a Windows CPython (test_windows_plan's), and once under wine's real loader:
check → plan → apply → a fresh Windows process loads the TensorRT provider → rollback leaves the target byte for byte
as it was."""

from __future__ import annotations

import ast
import json
import re
import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest

from ortfix.check.codes import FindingCode
from ortfix.check.diagnose import diagnose
from ortfix.check.facts import Facts
from ortfix.check.findings import Finding
from ortfix.compat.load import load_matrix
from ortfix.plan.genai import genai_change
from ortfix.plan.make import make_plan
from ortfix.plan.model import Plan, PlanOptions
from ortfix.system.windows.libraries import dll_name_for_soname
from ortfix.system.windows.platform import parse_dll_name
from ortfix.verify.genaicheck import genai_library
from support.fixtures import build_wheel
from support.winstubs import build_stub_dll, mingw_missing
from test_windows_check import _drop_target_scripts, _make_gpu_build, _nvidia_stubs
from test_windows_plan import DRIVER_CUDA12, _gather, _hook_folders, _probe
from txtools import assert_same_tree, tree_state
from wintools import WinPython, pip_install_windows, pip_install_windows_cached, to_windows, win_python

# What onnxruntime_providers_tensorrt.dll of the onnxruntime_gpu 1.23.2 win_amd64 wheel imports (pefile): 1.23 and
# later no longer import nvinfer_plugin_10.dll.
ORT_123_TRT_IMPORTS = ("cublas64_12.dll", "nvinfer_10.dll", "nvonnxparser_10.dll", "onnxruntime_providers_shared.dll",
                       "cudart64_12.dll", "cudnn64_9.dll", "MSVCP140.dll")
# What onnxruntime_providers_tensorrt.dll of the onnxruntime_gpu 1.22.0 win_amd64 wheel imports besides the system's
# (read with pefile): the CUDA DLLs, the three TensorRT 10 DLLs, ORT's shared provider library.
ORT_122_TRT_IMPORTS = ("cublas64_12.dll", "nvinfer_10.dll", "nvinfer_plugin_10.dll", "nvonnxparser_10.dll",
                       "onnxruntime_providers_shared.dll", "cudart64_12.dll", "cudnn64_9.dll")
TRT10 = ("nvinfer_10.dll", "nvinfer_plugin_10.dll", "nvonnxparser_10.dll")


@pytest.fixture(autouse=True)
def _mingw() -> None:
    missing = mingw_missing()
    if missing:
        pytest.skip(missing)


def test_tensorrt_sonames_map_to_tensorrt_s_dll_names() -> None:
    assert dll_name_for_soname("libnvinfer.so.10") == "nvinfer_10.dll"
    assert dll_name_for_soname("libnvinfer_plugin.so.10") == "nvinfer_plugin_10.dll"
    assert dll_name_for_soname("libnvonnxparser.so.8") == "nvonnxparser_8.dll"
    assert parse_dll_name("NVINFER_PLUGIN_10.DLL") == ("nvinfer_plugin", (10,))
    assert parse_dll_name("nvinfer_builder_resource_10.dll") is None  # not one the provider imports


def _trt_target(root: Path, *, ort_version: str = "1.22.0", trt_dlls: Sequence[str] = (),
                trt_version: str | None = None, trt_dist: str = "tensorrt-cu12-libs") -> Facts:
    """onnxruntime-gpu `ort_version` for Windows with both provider DLLs, the NVIDIA CUDA DLLs not installed, and
    `trt_dist` `trt_version` with `trt_dlls` in site-packages\\tensorrt_libs (none: not installed)."""
    sp = root / "Lib" / "site-packages"
    capi = sp / "onnxruntime" / "capi"
    build_stub_dll(capi / "onnxruntime_providers_shared.dll")
    build_stub_dll(capi / "onnxruntime_providers_cuda.dll", needed=("cublas64_12.dll", "cudart64_12.dll",
                                                                      "onnxruntime_providers_shared.dll"))
    build_stub_dll(capi / "onnxruntime_providers_tensorrt.dll", needed=ORT_122_TRT_IMPORTS)
    for name in trt_dlls:
        core = [n for n in trt_dlls if n.startswith("nvinfer_") and n[8:-4].isdigit()]
        build_stub_dll(sp / "tensorrt_libs" / name, needed=core if name not in core else ())
    dists = [(trt_dist, trt_version)] if trt_version else []
    return _gather(root, _probe(root, ort_version=ort_version, distributions=dists), DRIVER_CUDA12)


def _codes(facts: Facts, *, asked: bool = False) -> dict[str, dict[str, object]]:
    return {f.code: {"summary": str(f.summary), **dict(f.data)} for f in diagnose(facts, load_matrix(),
                                                                             with_tensorrt=asked)}


def _plan(facts: Facts) -> Plan:
    matrix = load_matrix()
    findings = diagnose(facts, matrix, with_tensorrt=True)
    return make_plan(facts, findings, matrix, PlanOptions(driver_version=DRIVER_CUDA12, with_tensorrt=True))


def _requirements(plan: Plan) -> list[str]:
    return [r for a in plan.actions if a.kind == "pip-install" for r in a.details["requirements"]]


def test_windows_tensorrt_of_another_major_is_trt002(tmp_path: Path) -> None:
    """tensorrt_libs holds TensorRT 8's DLLs; the provider imports nvinfer_10.dll: TRT002 names the DLL it needs and
    the copy of the other major (read in tensorrt_libs, the wheel's folder on Windows too)."""
    facts = _trt_target(tmp_path, trt_dlls=("nvinfer_8.dll", "nvinfer_plugin_8.dll", "nvonnxparser_8.dll"),
                        trt_version="8.6.1")
    found = _codes(facts)
    assert FindingCode.TENSORRT_WRONG_MAJOR in found, list(found)
    data = found[FindingCode.TENSORRT_WRONG_MAJOR]
    assert data["soname"] == "nvinfer_10.dll"
    assert str(tmp_path / "Lib" / "site-packages" / "tensorrt_libs" / "nvinfer_8.dll") in data["present"], data


def test_windows_tensorrt_installed_but_unfound_is_judged_and_hooked(tmp_path: Path) -> None:
    """tensorrt-cu12-libs 10.0.1 installed (its DLLs in tensorrt_libs, on no search path), not asked about: check
    judges it (TRT001 names the DLLs, TRT003 says 10.0.1 is older than 1.22's 10.9); `plan --with tensorrt` installs
    no TensorRT and puts tensorrt_libs on the PATH hook."""
    facts = _trt_target(tmp_path, trt_dlls=TRT10, trt_version="10.0.1")
    found = _codes(facts)
    assert set(TRT10) <= set(found[FindingCode.TENSORRT_NOT_LOADING]["sonames"]), found  # type: ignore[arg-type]
    assert "10.9" in str(found[FindingCode.TENSORRT_TOO_OLD]["summary"])
    plan = _plan(facts)
    assert not any("tensorrt" in r for r in _requirements(plan)), plan.actions
    folders = _hook_folders(plan)
    assert str(tmp_path / "Lib" / "site-packages" / "tensorrt_libs") in folders, folders
    hook = next(a for a in plan.actions if str(a.details.get("path", "")).endswith(".py"))
    assert FindingCode.TENSORRT_NOT_LOADING in hook.fixes, hook


def test_windows_with_tensorrt_installs_the_pinned_wheel_and_hooks_its_folder(tmp_path: Path) -> None:
    """No TensorRT installed: nothing is said unless asked; `--with tensorrt` installs tensorrt-cu12-libs of the
    major the provider imports (nvinfer_10.dll) and at least 1.22's 10.9, and its folder joins the PATH hook."""
    facts = _trt_target(tmp_path)
    assert not [c for c in _codes(facts) if c.startswith("TRT")]
    asked = _codes(facts, asked=True)
    assert set(TRT10) <= set(asked[FindingCode.TENSORRT_NOT_LOADING]["sonames"]), asked  # type: ignore[arg-type]
    plan = _plan(facts)
    assert "tensorrt-cu12-libs>=10.9,<11" in _requirements(plan), plan.actions
    assert str(tmp_path / "Lib" / "site-packages" / "tensorrt_libs") in _hook_folders(plan)


def test_tensorrt_of_another_cuda_major_is_trt004_and_replaced_not_hooked(tmp_path: Path) -> None:
    """tensorrt-cu13-libs 10.9.0 in tensorrt_libs: the very DLL names the CUDA 12 build's TensorRT provider imports
    (nvinfer_10.dll & co.), built for CUDA 13. Check says so (TRT004, from the distribution's name); `plan --with
    tensorrt` does not hook that folder as it is but uninstalls tensorrt-cu13-libs and installs tensorrt-cu12-libs."""
    facts = _trt_target(tmp_path, trt_dlls=TRT10, trt_version="10.9.0", trt_dist="tensorrt-cu13-libs")
    found = _codes(facts)
    assert FindingCode.TENSORRT_OTHER_CUDA in found, list(found)
    trt004 = found[FindingCode.TENSORRT_OTHER_CUDA]
    assert "CUDA 13" in str(trt004["summary"]) and "CUDA 12" in str(trt004["summary"]), trt004
    assert (trt004["installed"], trt004["replacement"]) == ("tensorrt-cu13-libs", "tensorrt-cu12-libs"), trt004
    plan = _plan(facts)
    assert "tensorrt-cu12-libs>=10.9,<11" in _requirements(plan), plan.actions
    removed = [a for a in plan.actions if a.kind == "pip-uninstall"]
    assert [a.details["distribution"] for a in removed] == ["tensorrt-cu13-libs"], plan.actions
    install = next(a for a in plan.actions if a.kind == "pip-install")
    assert plan.actions.index(removed[0]) < plan.actions.index(install)
    assert FindingCode.TENSORRT_OTHER_CUDA in install.fixes, install
    assert FindingCode.TENSORRT_OTHER_CUDA not in {f.code for f in plan.unresolved}
    same = _trt_target(tmp_path / "cu12", trt_dlls=TRT10, trt_version="10.9.0")  # the right CUDA major: hooked
    assert FindingCode.TENSORRT_OTHER_CUDA not in _codes(same)
    assert not any("tensorrt" in r for r in _requirements(_plan(same)))


# --------------------------------------------------------------------------------------------------------------------
# Under wine: the real flow on the Windows CPython, wine's loader the oracle
# --------------------------------------------------------------------------------------------------------------------

def _tensorrt_libs_wheel(house: Path, tmp: Path) -> Path:
    """tensorrt-cu12-libs 10.14.1 for win_amd64 laid out as NVIDIA builds it: its DLLs in the package folder
    tensorrt_libs (plugin and parser import nvinfer_10.dll), purelib with a platform tag."""
    dlls = {"nvinfer_10.dll": (), "nvinfer_plugin_10.dll": ("nvinfer_10.dll",),
            "nvonnxparser_10.dll": ("nvinfer_10.dll",)}
    files: dict[str, bytes | Path] = {"tensorrt_libs/__init__.py": b""}
    for name, needed in dlls.items():
        files[f"tensorrt_libs/{name}"] = build_stub_dll(tmp / name, needed=needed)
    return build_wheel(house, "tensorrt-cu12-libs", "10.14.1", files, tag="py3-none-win_amd64",
                       root_is_purelib=True)


def _wine_gpu_home(tmp_path: Path) -> tuple[WinPython, Path, list[Path]]:
    """A Windows CPython under wine with onnxruntime 1.23.2 made the GPU build, numpy (what `import onnxruntime`
    needs; 2.x does not run under wine 8) and the NVIDIA stub DLLs on no search path: wine's python, its home, the
    stubs' folders (_nvidia_stubs')."""
    w = win_python()
    home = w.new_home(tmp_path)
    sp = home / "Lib" / "site-packages"
    pip_install_windows_cached(sp, "onnxruntime==1.23.2", "numpy==1.26.4", no_deps=True)
    _drop_target_scripts(sp)
    _make_gpu_build(sp)
    return w, home, _nvidia_stubs(sp)


def _load_after_import(provider: Path) -> str:
    """A fresh process of the target: `import onnxruntime` (what runs the PATH hook), then the provider loaded as ORT
    loads it (LOAD_WITH_ALTERED_SEARCH_PATH: its folder, the system's, PATH)."""
    return (f"import ctypes, onnxruntime\nctypes.WinDLL({to_windows(provider)!r}, winmode=8)\n"
            "print('provider loaded')")


@pytest.mark.slow
def test_under_wine_tensorrt_is_judged_hooked_loaded_and_rolled_back(tmp_path: Path) -> None:
    w, home, _stubs = _wine_gpu_home(tmp_path)
    sp = home / "Lib" / "site-packages"
    provider = build_stub_dll(sp / "onnxruntime" / "capi" / "onnxruntime_providers_tensorrt.dll",
                              needed=ORT_123_TRT_IMPORTS)
    house = tmp_path / "house"
    house.mkdir()
    _tensorrt_libs_wheel(house, tmp_path / "dlls")
    pip_install_windows(sp, "tensorrt-cu12-libs==10.14.1", find_links=house, no_deps=True)
    python = to_windows(home / "python.exe")

    check = w.ortfix("check", "--json", "--fresh", "--python", python)
    doc = json.loads(check.stdout or "{}")
    by_code = {f["code"]: f for f in doc.get("findings", [])}
    assert "TRT001" in by_code, (check.stdout[-3000:], check.stderr[-3000:])  # installed: judged unasked
    assert {"nvinfer_10.dll", "nvonnxparser_10.dll"} <= set(by_code["TRT001"]["data"]["sonames"]), by_code["TRT001"]
    assert "TRT003" not in by_code  # 10.14.1 is what ORT 1.24 documents; 1.23 has no published minimum
    unfixed = w.run("-c", _load_after_import(provider), exe=home / "python.exe")
    assert "provider loaded" not in unfixed.stdout, unfixed.stdout

    before = tree_state(home)
    applied = w.ortfix("apply", "--json", "--python", python, "--with", "tensorrt", "--driver", "552.44", "--yes",
                       "--system")
    assert applied.returncode == 0, (applied.stdout[-3000:], applied.stderr[-3000:])
    steps = json.loads(applied.stdout)["transaction"]["steps"]
    assert [s["kind"] for s in steps] == ["write-file", "write-file"], steps  # installed already: the hook only
    hook = (sp / "_ortfix_dllpath.py").read_text(encoding="utf-8")
    listed = re.search(r"^FOLDERS = (\[.*\])$", hook, re.M)
    assert listed and to_windows(sp / "tensorrt_libs") in ast.literal_eval(listed.group(1)), hook
    fixed = w.run("-c", _load_after_import(provider), exe=home / "python.exe")
    assert "provider loaded" in fixed.stdout, fixed.stderr[-3000:]

    rolled = w.ortfix("rollback", "--json", "--python", python, "--yes")
    assert rolled.returncode == 0, (rolled.stdout[-3000:], rolled.stderr[-3000:])
    assert_same_tree(before, tree_state(home))
    assert "provider loaded" not in w.run("-c", _load_after_import(provider), exe=home / "python.exe").stdout
    shutil.rmtree(home, ignore_errors=True)


def _genai_cuda_windows_wheel(house: Path, tmp: Path) -> Path:
    """onnxruntime-genai-cuda 0.9.99 (a version no index has) for win_amd64, laid out as its wheel: the package and
    its CUDA DLL onnxruntime_genai\\onnxruntime-genai-cuda.dll, which imports cudart64_12.dll (as 0.11.4's does)."""
    files: dict[str, bytes | Path] = {
        "onnxruntime_genai/__init__.py": b"",
        "onnxruntime_genai/onnxruntime-genai-cuda.dll": build_stub_dll(tmp / "onnxruntime-genai-cuda.dll",
                                                                      needed=("cudart64_12.dll",))}
    return build_wheel(house, "onnxruntime-genai-cuda", "0.9.99", files, tag="py3-none-win_amd64",
                       root_is_purelib=True)


@pytest.mark.slow
def test_under_wine_verify_loads_genai_cuda_s_own_dll(tmp_path: Path) -> None:
    """verify's genai report on a Windows target loads onnxruntime-genai-cuda.dll in a fresh Windows process (before,
    only the Linux .so was looked for, so the DLL was never loaded and the report said "imports" only): without the
    CUDA runtime's folder on PATH it names cudart64_12.dll; with it, the DLL loads."""
    w, home, stubs = _wine_gpu_home(tmp_path)
    sp = home / "Lib" / "site-packages"
    runtime = stubs[1]
    house = tmp_path / "house"
    house.mkdir()
    _genai_cuda_windows_wheel(house, tmp_path / "dlls")
    pip_install_windows(sp, "onnxruntime-genai-cuda==0.9.99", find_links=house, no_deps=True)
    python = to_windows(home / "python.exe")

    plain = w.ortfix("verify", "--json", "--python", python)
    [genai] = json.loads(plain.stdout or "{}").get("genai", [None])
    assert genai is not None, (plain.stdout[-3000:], plain.stderr[-3000:])
    assert (genai["kind"], genai["cuda_major"], genai["imported"]) == ("CUDA", 12, "ok"), genai
    assert genai["library"] is not None and "cudart64_12.dll" in genai["library"] and not genai["ok"], genai
    found = w.ortfix("verify", "--json", "--python", python,
                     env={"WINEPATH": to_windows(runtime)})
    [genai] = json.loads(found.stdout or "{}").get("genai", [None])
    assert genai is not None and genai["library"] == "ok", (genai, found.stderr[-3000:])
    shutil.rmtree(home, ignore_errors=True)


def test_verify_picks_genai_s_own_library_by_the_target_s_platform(tmp_path: Path) -> None:
    """Which genai library verify loads by path: on a Windows target genai-cuda's onnxruntime-genai-cuda.dll and
    genai-directml's onnxruntime-genai.dll (the RECORD of its 0.11.4 win_amd64 wheel); on Linux genai-cuda's .so;
    nothing for the CPU package or where the file is absent."""
    sp = tmp_path / "Lib" / "site-packages"
    build_stub_dll(sp / "onnxruntime_genai" / "onnxruntime-genai-cuda.dll", needed=("cudart64_12.dll",))
    build_stub_dll(sp / "onnxruntime_genai" / "onnxruntime-genai.dll")
    assert genai_library(str(sp), "CUDA", windows=True) == "onnxruntime_genai/onnxruntime-genai-cuda.dll"
    assert genai_library(str(sp), "DirectML", windows=True) == "onnxruntime_genai/onnxruntime-genai.dll"
    assert genai_library(str(sp), "CPU", windows=True) == ""
    assert genai_library(str(sp), "CUDA", windows=False) == ""  # no libonnxruntime-genai-cuda.so here
    assert genai_library(str(tmp_path), "CUDA", windows=True) == ""


# --------------------------------------------------------------------------------------------------------------------
# onnxruntime-genai on Windows: onnxruntime-genai-directml beside onnxruntime-directml, genai-cuda beside the GPU build
# --------------------------------------------------------------------------------------------------------------------

def test_the_directml_genai_rows_pair_with_the_directml_ort_their_metadata_names() -> None:
    """Requires-Dist of the real onnxruntime-genai-directml win_amd64 wheels (read 2026-11-26): 0.10.0 needs
    onnxruntime-directml>=1.22.0, 0.11.4 >=1.23.2, 0.14.1 (the newest) >=1.26.0."""
    addons = load_matrix().addons
    assert addons.genai_directml_for("1.22.0") == "0.10.0"
    assert addons.genai_directml_for("1.23.1") == "0.10.0"  # 0.11.4 needs 1.23.2
    assert addons.genai_directml_for("1.23.2") == "0.11.4"
    assert addons.genai_directml_for("1.31.0") == "0.14.1"
    assert addons.genai_directml_for("1.18.1") is None


def _directml_target(root: Path, *, ort: str, genai: str = "0.11.4", package: str = "onnxruntime-genai") -> Facts:
    """onnxruntime-directml `ort` for Windows (DirectML.dll in capi, no CUDA provider) with the genai `package`
    (default: the CPU onnxruntime-genai) `genai` beside it."""
    sp = root / "Lib" / "site-packages"
    build_stub_dll(sp / "onnxruntime" / "capi" / "DirectML.dll")
    build_stub_dll(sp / "onnxruntime" / "capi" / "onnxruntime_providers_shared.dll")
    probe = _probe(root, ort_version=ort, distributions=[(package, genai)])
    dists = probe["distributions"]
    assert isinstance(dists, list)
    dists[0].update(name="onnxruntime-directml", normalized="onnxruntime-directml",
                    dist_info=str(sp / f"onnxruntime_directml-{ort}.dist-info"))
    ort_dirs = probe["onnxruntime_dirs"]
    assert isinstance(ort_dirs, list)
    ort_dirs[0]["build_info"]["package_name"] = "onnxruntime-directml"
    return _gather(root, probe, DRIVER_CUDA12)


def test_cpu_genai_beside_directml_names_genai_directml(tmp_path: Path) -> None:
    facts = _directml_target(tmp_path, ort="1.23.2")
    findings = {f.code: f for f in diagnose(facts, load_matrix())}
    genai = findings[FindingCode.GENAI_CPU]
    assert genai.data == {"installed": "onnxruntime-genai", "version": "0.11.4", "replacement": "0.11.4"}
    assert "onnxruntime-directml" in str(genai.summary) and "DirectML" in str(genai.summary), genai.summary
    assert "onnxruntime-genai-directml==0.11.4" in str(genai.fix), genai.fix


def test_directml_moved_to_the_gpu_build_takes_genai_to_genai_cuda(tmp_path: Path) -> None:
    """The plan replaces onnxruntime-directml with onnxruntime-gpu (ORT004): the CPU genai goes with it, to
    onnxruntime-genai-cuda of the GPU build's CUDA major and an ORT requirement 1.23.2 meets (as on Linux)."""
    facts = _directml_target(tmp_path, ort="1.23.2")
    matrix = load_matrix()
    findings = diagnose(facts, matrix)
    plan = make_plan(facts, findings, matrix, PlanOptions(driver_version=DRIVER_CUDA12))
    removed = [a.details["distribution"] for a in plan.actions if a.kind == "pip-uninstall"]
    assert "onnxruntime-genai" in removed and "onnxruntime-directml" in removed, plan.actions
    asked = _requirements(plan)
    assert "onnxruntime-genai-cuda==0.11.4" in asked and "onnxruntime-gpu==1.23.2" in asked, asked
    assert FindingCode.GENAI_CPU not in {f.code for f in plan.unresolved}


def test_where_directml_stays_the_cpu_genai_becomes_genai_directml(tmp_path: Path) -> None:
    """No GPU build planned (none chosen, none installed): the genai stage pairs genai with the onnxruntime-directml
    that stays, onnxruntime-genai-directml of the newest release 1.22.0 accepts."""
    facts = _directml_target(tmp_path, ort="1.22.0", genai="0.9.2")
    matrix = load_matrix()
    by_code: dict[str, list[Finding]] = {}
    for f in diagnose(facts, matrix):
        by_code.setdefault(f.code, []).append(f)
    change = genai_change(facts, matrix, by_code, None, None)
    assert change.remove == ("onnxruntime-genai",) and change.requirement == "onnxruntime-genai-directml==0.10.0"
    assert change.fixes == (FindingCode.GENAI_CPU,)


def test_windows_genai_cuda_s_cuda_major_is_read_from_its_dll(tmp_path: Path) -> None:
    """onnxruntime-genai-cuda for Windows ships onnxruntime_genai\\onnxruntime-genai-cuda.dll, which imports
    cudart64_N.dll (0.11.4: cudart64_12.dll, read with pefile): a release the matrix does not know, built for CUDA
    13, beside the CUDA 12 build is GENAI002, told by the DLL alone."""
    sp = tmp_path / "Lib" / "site-packages"
    build_stub_dll(sp / "onnxruntime" / "capi" / "onnxruntime_providers_shared.dll")
    build_stub_dll(sp / "onnxruntime" / "capi" / "onnxruntime_providers_cuda.dll",
                   needed=("cublas64_12.dll", "cudart64_12.dll", "onnxruntime_providers_shared.dll"))
    build_stub_dll(sp / "onnxruntime_genai" / "onnxruntime-genai-cuda.dll", needed=("cudart64_13.dll",))
    probe = _probe(tmp_path, ort_version="1.22.0", distributions=[("onnxruntime-genai-cuda", "0.99.0")])
    facts = _gather(tmp_path, probe, DRIVER_CUDA12)
    other = {f.code: f for f in diagnose(facts, load_matrix())}[FindingCode.GENAI_OTHER_CUDA]
    assert "built for CUDA 13" in str(other.summary)
    assert "onnxruntime-genai-cuda 0.99.0 (CUDA 13)" in str(other.evidence[0])


def _by_code(facts: Facts) -> dict[str, list[Finding]]:
    by_code: dict[str, list[Finding]] = {}
    for f in diagnose(facts, load_matrix()):
        by_code.setdefault(f.code, []).append(f)
    return by_code


def _gpu_target_with(root: Path, genai: tuple[str, str], *, required_by: str | None = None) -> Facts:
    """onnxruntime-gpu 1.22.0 for Windows (CUDA 12 provider) with the genai distribution `genai` beside it and, with
    `required_by`, an app whose Requires-Dist names it."""
    sp = root / "Lib" / "site-packages"
    build_stub_dll(sp / "onnxruntime" / "capi" / "onnxruntime_providers_shared.dll")
    build_stub_dll(sp / "onnxruntime" / "capi" / "onnxruntime_providers_cuda.dll",
                   needed=("cublas64_12.dll", "cudart64_12.dll", "onnxruntime_providers_shared.dll"))
    extra = [("genai-app", "1.0")] if required_by else []
    probe = _probe(root, ort_version="1.22.0", distributions=[genai, *extra])
    dists = probe["distributions"]
    assert isinstance(dists, list)
    if required_by:
        dists[-1]["requires"] = [required_by]
    return _gather(root, probe, DRIVER_CUDA12)


def test_genai_directml_beside_the_gpu_build_is_genai003_and_swapped_for_genai_cuda(tmp_path: Path) -> None:
    """onnxruntime-genai-directml beside onnxruntime-gpu: genai of another flavour than ORT's (no CUDA in it), GENAI003;
    the plan uninstalls it and installs onnxruntime-genai-cuda of the build's CUDA major (0.9.2, the newest whose
    onnxruntime-gpu>=1.22.0 the build meets), ORT unmoved."""
    facts = _gpu_target_with(tmp_path, ("onnxruntime-genai-directml", "0.10.0"))
    [other] = _by_code(facts)[FindingCode.GENAI_OTHER_FLAVOUR]
    assert "DirectML" in str(other.summary) and "onnxruntime-gpu" in str(other.summary), other.summary
    assert other.data == {"installed": "onnxruntime-genai-directml", "version": "0.10.0", "replacement": "0.9.2"}
    matrix = load_matrix()
    plan = make_plan(facts, diagnose(facts, matrix), matrix, PlanOptions(driver_version=DRIVER_CUDA12))
    removed = [a for a in plan.actions if a.kind == "pip-uninstall"]
    assert [a.details["distribution"] for a in removed] == ["onnxruntime-genai-directml"], plan.actions
    assert FindingCode.GENAI_OTHER_FLAVOUR in removed[0].fixes
    asked = _requirements(plan)
    assert "onnxruntime-genai-cuda==0.9.2" in asked and not any(r.startswith("onnxruntime-gpu") for r in asked), asked
    assert FindingCode.GENAI_OTHER_FLAVOUR not in {f.code for f in plan.unresolved}


def test_genai_directml_swap_never_breaks_a_package_that_requires_it(tmp_path: Path) -> None:
    """The neighbour rule: an installed app requires onnxruntime-genai-directml by name, so the swap is left out and
    the plan's note says who."""
    facts = _gpu_target_with(tmp_path, ("onnxruntime-genai-directml", "0.10.0"),
                             required_by="onnxruntime-genai-directml>=0.10")
    matrix = load_matrix()
    plan = make_plan(facts, diagnose(facts, matrix), matrix, PlanOptions(driver_version=DRIVER_CUDA12))
    assert not any(a.details.get("distribution") == "onnxruntime-genai-directml" for a in plan.actions), plan.actions
    assert not any("onnxruntime-genai-cuda" in r for r in _requirements(plan)), plan.actions
    assert any("genai-app 1.0 requires onnxruntime-genai-directml>=0.10" in str(n) for n in plan.notes), plan.notes


def test_genai_cuda_beside_directml_is_genai003_and_becomes_genai_directml_where_directml_stays(
        tmp_path: Path) -> None:
    """onnxruntime-genai-cuda beside onnxruntime-directml: GENAI003 (no DirectML in it); where DirectML stays (no GPU
    build planned) the genai stage swaps it for onnxruntime-genai-directml of the newest release 1.22.0 accepts."""
    facts = _directml_target(tmp_path, ort="1.22.0", genai="0.9.2", package="onnxruntime-genai-cuda")
    by_code = _by_code(facts)
    [other] = by_code[FindingCode.GENAI_OTHER_FLAVOUR]
    assert "onnxruntime-directml" in str(other.summary) and "CUDA" in str(other.summary), other.summary
    assert "onnxruntime-genai-directml==0.10.0" in str(other.fix), other.fix
    change = genai_change(facts, load_matrix(), by_code, None, None)
    assert change.remove == ("onnxruntime-genai-cuda",) and change.requirement == "onnxruntime-genai-directml==0.10.0"
    assert change.fixes == (FindingCode.GENAI_OTHER_FLAVOUR,)
