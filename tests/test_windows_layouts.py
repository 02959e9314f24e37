"""Windows layouts a plan must be honest about (issue 21): a Microsoft Store Python, where no hook reaches the DLL
search (WIN005, every hook refused in one line), and a copy of a CUDA DLL on the machine Path, which `--hook user-path`
cannot beat (the user Path comes after it). Hermetic on the planner's own functions, then the real `ortfix` run by the
Windows CPython under wine on the GPU build of test_windows_check (the real onnxruntime 1.23.2 CPU wheel made the GPU
build by name, a mingw stub provider importing what the real one imports, stub NVIDIA DLLs)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from factsdata import load_facts
from ortfix.check.codes import FindingCode, Severity
from ortfix.check.findings import Finding
from ortfix.check.winstore import store_python_findings
from ortfix.errors import ExitCode, OrtfixError
from ortfix.plan.hook_actions import hook_actions, machine_path_shadows
from ortfix.system.windows.platform import WindowsPlatform
from ortfix.target.winreport import RegistryPath, WindowsInfo
from support.winstubs import build_stub_dll, mingw_missing
from test_windows_check import _drop_target_scripts, _make_gpu_build, _nvidia_stubs
from txtools import assert_same_tree, tree_state
from wintools import WinPython, pip_install_windows_cached, to_windows, win_python

STORE_FOLDER = ("Program Files", "WindowsApps", "PythonSoftwareFoundation.Python.3.11_3.11.2800.0_x64__qbz5n2kfra8p0")
MACHINE_ENV = "HKLM\\System\\CurrentControlSet\\Control\\Session Manager\\Environment"


def _windows_info(*, packaged: bool, machine_path: str = "C:\\Windows\\system32") -> WindowsInfo:
    return WindowsInfo(system_dir="C:\\Windows\\system32", windows_dir="C:\\Windows", exe_dir="C:\\py",
                       machine_path=RegistryPath(machine_path, "REG_EXPAND_SZ", machine_path), user_path=None,
                       conda_dll_search_modification=None, packaged=packaged)


def _facts(windows: WindowsInfo) -> Any:
    facts = load_facts("cpu")
    return dataclasses.replace(facts, probe=dataclasses.replace(facts.probe, windows=windows),
                               platform=WindowsPlatform())


def _lib_finding(code: FindingCode, data: Mapping[str, Any]) -> Finding:
    return Finding(code, Severity.ERROR, "x", (), "y", dict(data))  # type: ignore[arg-type]


# -- hermetic: the planner's own functions ------------------------------------------------------------------------
def test_a_store_python_gets_win005_and_every_hook_is_refused_in_one_line() -> None:
    store, plain = _facts(_windows_info(packaged=True)), _facts(_windows_info(packaged=False))
    libs = {"cublas64_12.dll": "C:\\env\\Lib\\site-packages\\nvidia\\cublas\\bin\\cublas64_12.dll"}
    for kind in ("preload", "conda", "user-path"):
        with pytest.raises(OrtfixError) as exc:
            hook_actions(store, kind, libs, set())
        line = exc.value.one_line()
        assert exc.value.exit_code == ExitCode.USAGE and "\n" not in line, line
        assert "Microsoft Store Python" in line and "python.org" in line and "nothing was changed" in line, line
        assert hook_actions(plain, kind, libs, set())  # the same hook elsewhere: its actions
    unfound = [_lib_finding(FindingCode.LIB_NOT_ON_PATH, {"libraries": {}})]
    (win005,) = store_python_findings(store, unfound)
    assert (win005.code, win005.severity) == (FindingCode.STORE_PYTHON, Severity.ERROR)
    assert "python.org" in win005.fix and "preload_dlls" in win005.fix
    assert store_python_findings(plain, unfound) == [] and store_python_findings(store, []) == []


def test_only_a_copy_on_the_machine_path_is_one_user_path_cannot_beat() -> None:
    facts = _facts(_windows_info(packaged=False, machine_path="C:\\Windows\\system32;C:\\CUDA\\v12.4\\bin\\"))
    on_machine = _lib_finding(FindingCode.LIB_SHADOWED, {"soname": "cublas64_12.dll", "own": [],
                                                         "loaded": "c:\\cuda\\V12.4\\bin\\cublas64_12.dll"})
    on_user = _lib_finding(FindingCode.LIB_SHADOWED, {"soname": "cudart64_12.dll", "own": [],
                                                      "loaded": "C:\\Users\\me\\cuda\\cudart64_12.dll"})
    assert machine_path_shadows(facts, [on_machine, on_user]) == {"cublas64_12.dll": on_machine.data["loaded"]}


# -- under wine -------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def w() -> WinPython:
    missing = mingw_missing()
    if missing:
        pytest.skip(missing)
    return win_python()


def _gpu_home(w: WinPython, where: Path) -> tuple[Path, list[Path]]:
    """A Windows CPython at `where` with the GPU build whose NVIDIA DLLs are installed but on no search path."""
    home = w.new_home(where)
    sp = home / "Lib" / "site-packages"
    pip_install_windows_cached(sp, "onnxruntime==1.23.2", no_deps=True)
    _drop_target_scripts(sp)
    _make_gpu_build(sp)
    return home, _nvidia_stubs(sp)


def _ortfix(w: WinPython, home: Path, *args: str, env: Mapping[str, str] | None = None,
            ) -> subprocess.CompletedProcess[str]:
    proc = w.ortfix(*args, "--python", to_windows(home / "python.exe"), env=env)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc


@pytest.mark.slow
def test_a_store_layout_python_is_told_and_refused_with_nothing_changed(w: WinPython, tmp_path: Path) -> None:
    home, _folders = _gpu_home(w, tmp_path.joinpath(*STORE_FOLDER))
    check = _ortfix(w, home, "check", "--json", "--fresh")
    by_code = {f["code"]: f for f in json.loads(check.stdout)["findings"]}
    assert check.returncode == 1 and "WIN005" in by_code and "LIB002" in by_code, list(by_code)
    assert "python.org" in by_code["WIN005"]["fix"], by_code["WIN005"]
    before = tree_state(home)
    for args in (("plan",), ("plan", "--hook", "user-path"), ("apply", "--yes", "--system")):
        proc = _ortfix(w, home, *args)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1, (args, proc.returncode, proc.stdout[-2000:], proc.stderr)
        assert lines[0].startswith("ortfix: error: ") and "Microsoft Store Python" in lines[0], lines
    assert_same_tree(before, tree_state(home))
    nothing = _ortfix(w, home, "plan", "--json", "--hook", "none")  # the packages only: no hook, the advice as a note
    assert nothing.returncode == 1, nothing.stderr[-2000:]
    assert any("python.org" in n for n in json.loads(nothing.stdout)["notes"]), nothing.stdout[-2000:]


def _reg(w: WinPython, env: Mapping[str, str], *args: str) -> str:
    proc = subprocess.run(["wine", "reg", *args], capture_output=True, text=True, env=w.env(env),
                          stdin=subprocess.DEVNULL, timeout=120, check=False)
    assert proc.returncode == 0, (args, proc.stdout, proc.stderr)
    return proc.stdout


@pytest.fixture
def machine_cuda(w: WinPython, tmp_path: Path) -> Iterator[tuple[dict[str, str], Path]]:
    """A private wine prefix whose machine Path ends with a CUDA toolkit's bin folder holding cuBLAS."""
    prefix = w.private_prefix(tmp_path)
    env = {"WINEPREFIX": str(prefix)}
    toolkit = tmp_path / "CUDA" / "v12.4" / "bin"
    build_stub_dll(toolkit / "cublasLt64_12.dll", marker="the toolkit's")
    build_stub_dll(toolkit / "cublas64_12.dll", needed=["cublasLt64_12.dll"], marker="the toolkit's")
    try:
        current = next(line.strip().split("    ")[-1] for line in _reg(w, env, "query", MACHINE_ENV, "/v", "Path")
                       .splitlines() if line.strip().lower().startswith("path "))
        _reg(w, env, "add", MACHINE_ENV, "/v", "Path", "/t", "REG_EXPAND_SZ", "/d",
             f"{current};{to_windows(toolkit)}", "/f")
        yield env, toolkit
    finally:
        subprocess.run(["wineserver", "-k"], env=w.env(env), capture_output=True, timeout=60, check=False)


@pytest.mark.slow
def test_user_path_does_not_claim_lib004_against_a_copy_on_the_machine_path(
        w: WinPython, tmp_path: Path, machine_cuda: tuple[dict[str, str], Path]) -> None:
    env, toolkit = machine_cuda
    home, _folders = _gpu_home(w, tmp_path / "plain")
    check = _ortfix(w, home, "check", "--json", "--fresh", env=env)
    shadowed = [f for f in json.loads(check.stdout)["findings"] if f["code"] == "LIB004"]
    assert {f["data"]["soname"].lower() for f in shadowed} >= {"cublas64_12.dll"}, check.stdout[-3000:]
    assert all(f["data"]["loaded"].lower().startswith(to_windows(toolkit).lower()) for f in shadowed), shadowed

    plan = json.loads(_ortfix(w, home, "plan", "--json", "--hook", "user-path", env=env).stdout)
    (step,) = [a for a in plan["actions"] if a["kind"] == "user-path"]
    assert "LIB004" not in step["fixes"], step  # the user Path comes after the machine Path: it cannot fix it
    assert "LIB004" in {f["code"] for f in plan["unresolved"]}, plan["unresolved"]
    assert any("machine Path" in n and "PATH hook" in n for n in plan["notes"]), plan["notes"]
    auto = json.loads(_ortfix(w, home, "plan", "--json", env=env).stdout)  # the PATH hook, prepended in-process
    assert all("LIB004" in a["fixes"] for a in auto["actions"] if a["kind"] == "write-file"), auto["actions"]
    assert "LIB004" not in {f["code"] for f in auto["unresolved"]}, auto["unresolved"]
