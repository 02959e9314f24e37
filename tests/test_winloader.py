"""The Windows loader simulation (system/windows/loader.py) on real DLLs built with mingw-w64, and checked against
wine's real loader: the same trees loaded by a Windows CPython under wine, which reports the file each module came
from."""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import shutil
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PureWindowsPath
from typing import Any

import pytest

from ortfix.system.loader import VIA_LOADED, LoadReport
from ortfix.system.windows.loader import (
    VIA_API_SET,
    VIA_APPLICATION_FOLDER,
    VIA_CURRENT_FOLDER,
    VIA_DLL_DIRECTORY,
    VIA_DLL_FOLDER,
    VIA_FULL_PATH,
    VIA_KNOWN_DLLS,
    VIA_PACKAGE,
    VIA_PATH,
    VIA_SYSTEM32,
    VIA_WINDOWS_FOLDER,
    WindowsLoader,
    WindowsLoaderConfig,
)
from ortfix.system.windows.pe import PeReader
from support import winstubs


@pytest.fixture(autouse=True)
def _mingw() -> None:
    missing = winstubs.mingw_missing()
    if missing:
        pytest.skip(missing)


@dataclass(frozen=True)
class Tree:
    """The folders of one simulated Windows process."""

    root: Path
    app: Path  # the exe's folder
    system32: Path
    windows: Path
    cwd: Path
    path1: Path
    path2: Path
    provider: Path  # the folder of the DLL loaded by full path
    extra: Path  # an AddDllDirectory folder

    def config(self, **changes: Any) -> WindowsLoaderConfig:
        base = WindowsLoaderConfig(exe_dir=str(self.app), system_dirs=(str(self.system32), str(self.windows)),
                                   cwd=str(self.cwd), path=(str(self.path1), str(self.path2)))
        return dataclasses.replace(base, **changes)


def make_tree(root: Path, *, system32: Path | None = None, windows: Path | None = None,
              app: Path | None = None) -> Tree:
    names = ("app", "win/System32", "win", "cwd", "p1", "p2", "prov", "extra")
    dirs = {n: root / n for n in names}
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
    return Tree(root=root, app=app or dirs["app"], system32=system32 or dirs["win/System32"],
                windows=windows or dirs["win"], cwd=dirs["cwd"], path1=dirs["p1"], path2=dirs["p2"],
                provider=dirs["prov"], extra=dirs["extra"])


def stub(folder: Path, name: str, *needed: str) -> Path:
    return winstubs.build_stub_dll(folder / name, exports=["ortfix_fn"], needed=needed,
                                   marker=f"{folder.name}/{name}")


def as_i386(dll: Path) -> Path:
    """The DLL with its COFF header's Machine set to IMAGE_FILE_MACHINE_I386 (a DLL for another architecture)."""
    data = bytearray(dll.read_bytes())
    (pe_offset,) = struct.unpack_from("<I", data, 0x3C)
    struct.pack_into("<H", data, pe_offset + 4, 0x14C)
    dll.unlink()
    dll.write_bytes(bytes(data))
    return dll


def loader(tree: Tree, **changes: Any) -> WindowsLoader:
    return WindowsLoader(tree.config(**changes), PeReader(use_disk=False))


def where(report: LoadReport) -> dict[str, tuple[str | None, str | None]]:
    """Each resolved name (lower-case) → (path, via) of its first resolution in the call."""
    out: dict[str, tuple[str | None, str | None]] = {}
    for r in report.resolutions:
        out.setdefault(r.name.lower(), (r.path, r.via))
    return out


# -- hermetic: the simulation on its own ------------------------------------------------------------------------
def test_the_altered_search_path_order(tmp_path: Path) -> None:
    t = make_tree(tmp_path)
    # Each name is in its step's folder and in every later one: the first step must win.
    stub(t.provider, "s_own.dll"), stub(t.app, "s_own.dll"), stub(t.path1, "s_own.dll")
    stub(t.system32, "s_sys.dll"), stub(t.windows, "s_sys.dll"), stub(t.cwd, "s_sys.dll")
    stub(t.windows, "s_win.dll"), stub(t.cwd, "s_win.dll"), stub(t.path1, "s_win.dll")
    stub(t.cwd, "s_cwd.dll"), stub(t.path1, "s_cwd.dll")
    stub(t.path1, "s_p1.dll"), stub(t.path2, "s_p1.dll")
    stub(t.path2, "s_p2.dll")
    stub(t.app, "s_app.dll")  # the exe's folder is not searched for a full-path altered load ...
    stub(t.path2, "s_app.dll")  # ... so PATH serves it
    provider = stub(t.provider, "prov_a.dll", "s_own.dll", "s_sys.dll", "s_win.dll", "s_cwd.dll", "s_p1.dll",
                    "s_p2.dll", "s_app.dll")
    report = loader(t).dlopen(str(provider))
    assert report.missing == []
    got = where(report)
    assert got["s_own.dll"] == (str(t.provider / "s_own.dll"), VIA_DLL_FOLDER)
    assert got["s_sys.dll"] == (str(t.system32 / "s_sys.dll"), VIA_SYSTEM32)
    assert got["s_win.dll"] == (str(t.windows / "s_win.dll"), VIA_WINDOWS_FOLDER)
    assert got["s_cwd.dll"] == (str(t.cwd / "s_cwd.dll"), VIA_CURRENT_FOLDER)
    assert got["s_p1.dll"] == (str(t.path1 / "s_p1.dll"), VIA_PATH)
    assert got["s_p2.dll"] == (str(t.path2 / "s_p2.dll"), VIA_PATH)
    assert got["s_app.dll"] == (str(t.path2 / "s_app.dll"), VIA_PATH)
    assert got[str(provider).lower()] == (str(provider), VIA_FULL_PATH)
    assert got["kernel32.dll"] == (str(t.system32 / "kernel32.dll"), VIA_LOADED)  # in every process
    assert got["msvcrt.dll"] == (str(t.system32 / "msvcrt.dll"), VIA_KNOWN_DLLS)  # mingw's C runtime
    by_name = {r.name.lower(): r for r in report.resolutions}
    assert by_name["s_p2.dll"].searched == (str(t.provider), str(t.system32), str(t.windows), str(t.cwd),
                                            str(t.path1))


def test_a_bare_name_searches_the_exe_folder_not_the_dlls(tmp_path: Path) -> None:
    t = make_tree(tmp_path)
    stub(t.provider, "b_dep.dll"), stub(t.app, "b_dep.dll")
    stub(t.path1, "b_top.dll", "b_dep.dll")
    stub(t.provider, "b_only_own.dll")
    process = loader(t)
    report = process.dlopen("b_top")  # LoadLibrary appends ".dll"
    assert where(report)["b_top.dll"] == (str(t.path1 / "b_top.dll"), VIA_PATH)
    assert where(report)["b_dep.dll"] == (str(t.app / "b_dep.dll"), VIA_APPLICATION_FOLDER)
    miss = process.dlopen("b_only_own.dll")
    assert [r.name for r in miss.missing] == ["b_only_own.dll"]
    assert str(t.provider) not in miss.missing[0].searched
    assert process.locate("B_DEP.DLL").path == str(t.app / "b_dep.dll")  # already loaded, by base name


def test_the_calls_folders_serve_the_imports_of_imports(tmp_path: Path) -> None:
    """cublas64_12.dll imports cublasLt64_12.dll: found from the provider's folder too (the search path is the
    load call's), not from the folder of the DLL that imports it."""
    t = make_tree(tmp_path)
    stub(t.path1, "c_mid.dll", "c_leaf.dll")
    stub(t.path1, "c_leaf.dll")
    stub(t.provider, "c_leaf.dll")
    provider = stub(t.provider, "prov_c.dll", "c_mid.dll")
    got = where(loader(t).dlopen(str(provider)))
    assert got["c_mid.dll"] == (str(t.path1 / "c_mid.dll"), VIA_PATH)
    assert got["c_leaf.dll"] == (str(t.provider / "c_leaf.dll"), VIA_DLL_FOLDER)


def test_names_compare_case_insensitively_and_loaded_modules_win(tmp_path: Path) -> None:
    t = make_tree(tmp_path)
    stub(t.path2, "cublas_x.dll")
    stub(t.path1, "Loaded_Y.DLL")
    stub(t.provider, "loaded_y.dll")
    provider = stub(t.provider, "prov_d.dll", "CUBLAS_X.DLL", "LOADED_Y.dll")
    process = loader(t)
    assert process.dlopen(str(t.path1 / "Loaded_Y.DLL")).missing == []
    got = where(process.dlopen(str(provider)))
    assert got["cublas_x.dll"] == (str(t.path2 / "cublas_x.dll"), VIA_PATH)
    assert got["loaded_y.dll"] == (str(t.path1 / "Loaded_Y.DLL"), VIA_LOADED)  # not the provider folder's copy


def test_a_missing_import_names_who_needed_it_and_the_call_loads_nothing(tmp_path: Path) -> None:
    t = make_tree(tmp_path)
    stub(t.path1, "m_mid.dll", "m_absent.dll")
    provider = stub(t.provider, "prov_m.dll", "m_mid.dll")
    process = loader(t)
    before = process.loaded_paths()
    report = process.dlopen(str(provider))
    assert [(r.name, r.requested_by) for r in report.missing] == [("m_absent.dll", str(t.path1 / "m_mid.dll"))]
    assert report.missing[0].searched == (str(t.provider), str(t.system32), str(t.windows), str(t.cwd),
                                          str(t.path1), str(t.path2))
    assert process.loaded_paths() == before  # Windows unloads what a failed call mapped
    assert process.dlopen(str(t.provider / "absent.dll")).missing[0].rejected == (
        f"{t.provider / 'absent.dll'}: not found (error 126)",)


def test_default_dirs_mode_has_no_path_and_no_current_folder(tmp_path: Path) -> None:
    t = make_tree(tmp_path)
    stub(t.path1, "d_path.dll")
    stub(t.cwd, "d_cwd.dll")
    stub(t.windows, "d_win.dll")
    stub(t.extra, "d_user.dll"), stub(t.path2, "d_user.dll"), stub(t.system32, "d_user.dll")
    stub(t.app, "d_app.dll"), stub(t.extra, "d_app.dll")
    provider = stub(t.provider, "prov_e.dll", "d_user.dll", "d_app.dll")
    lost = stub(t.provider, "prov_f.dll", "d_path.dll", "d_cwd.dll", "d_win.dll")
    process = loader(t, default_dirs_mode=True, dll_directories=(str(t.path2), str(t.extra)))
    got = where(process.dlopen(str(provider)))
    assert got["d_user.dll"] == (str(t.extra / "d_user.dll"), VIA_DLL_DIRECTORY)  # the latest added first
    assert got["d_app.dll"] == (str(t.app / "d_app.dll"), VIA_APPLICATION_FOLDER)
    assert sorted(r.name for r in process.dlopen(str(lost)).missing) == ["d_cwd.dll", "d_path.dll", "d_win.dll"]


def test_a_pyd_is_loaded_with_the_dll_load_dir_and_added_folders(tmp_path: Path) -> None:
    t = make_tree(tmp_path)
    stub(t.path1, "x_dep.dll")
    stub(t.provider, "x_own.dll")
    ext = stub(t.provider, "ext_x.pyd", "x_own.dll", "x_dep.dll")
    plain = loader(t).load_extension(str(ext))
    assert [r.name for r in plain.missing] == ["x_dep.dll"]  # PATH is not searched
    assert where(plain)["x_own.dll"][1] == VIA_DLL_FOLDER
    added = loader(t, dll_directories=(str(t.path1),)).load_extension(str(ext))
    assert where(added)["x_dep.dll"] == (str(t.path1 / "x_dep.dll"), VIA_DLL_DIRECTORY)


def test_a_packaged_app_has_no_path(tmp_path: Path) -> None:
    t = make_tree(tmp_path)
    stub(t.path1, "k_dep.dll")
    stub(t.app, "k_app.dll")
    provider = stub(t.provider, "prov_k.dll", "k_dep.dll", "k_app.dll")
    report = loader(t, packaged=True).dlopen(str(provider))
    assert [r.name for r in report.missing] == ["k_dep.dll"]
    assert where(report)["k_app.dll"] == (str(t.app / "k_app.dll"), VIA_PACKAGE)


def test_a_32_bit_dll_first_on_the_search_path_fails_with_error_193(tmp_path: Path) -> None:
    t = make_tree(tmp_path)
    wrong = as_i386(stub(t.path1, "w_dep.dll"))
    stub(t.path2, "w_dep.dll")  # a good copy later on PATH: Windows does not go on to it
    provider = stub(t.provider, "prov_w.dll", "w_dep.dll")
    report = loader(t).dlopen(str(provider))
    assert [r.name for r in report.missing] == ["w_dep.dll"]
    assert report.missing[0].rejected == (f"{wrong}: I386 DLL, this process is AMD64 (error 193)",)
    (t.path1 / "not_pe.dll").write_text("not a DLL")
    assert "error 193" in loader(t).locate("not_pe.dll").rejected[0]


def test_api_sets_and_known_dlls_come_from_the_system(tmp_path: Path) -> None:
    t = make_tree(tmp_path)
    stub(t.provider, "kernel32.dll")  # a KnownDLL's name in the DLL's folder is never used
    provider = stub(t.provider, "prov_s.dll", "api-ms-win-crt-runtime-l1-1-0.dll", "SHLWAPI.dll")
    got = where(loader(t).dlopen(str(provider)))
    assert got["api-ms-win-crt-runtime-l1-1-0.dll"] == (str(t.system32 / "ucrtbase.dll"), VIA_API_SET)
    assert got["shlwapi.dll"] == (str(t.system32 / "shlwapi.dll"), VIA_KNOWN_DLLS)
    assert got["kernel32.dll"] == (str(t.system32 / "kernel32.dll"), VIA_LOADED)


# -- against wine's real loader ---------------------------------------------------------------------------------
# The Windows side: each step is ["altered", path] (LoadLibraryExW with LOAD_WITH_ALTERED_SEARCH_PATH, as ORT loads
# its provider), ["name", name] (plain LoadLibrary), ["pyd", path] (LOAD_LIBRARY_SEARCH_DEFAULT_DIRS |
# LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR, as CPython loads a .pyd), ["add", folder] (os.add_dll_directory) or
# ["default_dirs"] (SetDefaultDllDirectories(LOAD_LIBRARY_SEARCH_DEFAULT_DIRS)); after each step it reports the
# error (GetLastError) and, for every name asked about, the file its loaded module came from (GetModuleFileNameW).
WINE_SCRIPT = r"""
import ctypes, json, os, sys
from ctypes import wintypes

k32 = ctypes.WinDLL("kernel32", use_last_error=True)
k32.GetModuleHandleW.restype = wintypes.HMODULE
k32.GetModuleHandleW.argtypes = [wintypes.LPCWSTR]
k32.GetModuleFileNameW.argtypes = [wintypes.HMODULE, wintypes.LPWSTR, wintypes.DWORD]
k32.SetDefaultDllDirectories.argtypes = [wintypes.DWORD]
k32.LoadLibraryExW.restype = wintypes.HMODULE
k32.LoadLibraryExW.argtypes = [wintypes.LPCWSTR, wintypes.HANDLE, wintypes.DWORD]
FLAGS = {"altered": 0x8, "name": 0, "pyd": 0x1100}
steps = json.loads(sys.argv[1])
out, keep = [], []
for kind, arg, names in steps:
    error = None
    if kind in FLAGS:
        if not k32.LoadLibraryExW(arg, None, FLAGS[kind]):
            error = ctypes.get_last_error()
    elif kind == "add":
        keep.append(os.add_dll_directory(arg))
    elif kind == "default_dirs":
        assert k32.SetDefaultDllDirectories(0x1000)
    files = {}
    for name in names:
        handle = k32.GetModuleHandleW(name)
        if handle:
            buf = ctypes.create_unicode_buffer(1024)
            k32.GetModuleFileNameW(handle, buf, 1024)
            files[name] = buf.value
        else:
            files[name] = None
    out.append({"error": error, "files": files})
print("RESULT " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def wine_tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Tree, object, str]]:
    """One tree under wine: a copy of the Windows CPython (its folder is the application folder) and the wine
    prefix's own System32 and Windows folders, where this test's stubs get names no other run uses (removed after)."""
    from wintools import win_python

    w = win_python()
    root = tmp_path_factory.mktemp("wintree")
    home = w.new_home(root)
    windows = w.prefix / "drive_c" / "windows"
    tag = secrets.token_hex(3)
    tree = make_tree(root, system32=windows / "system32", windows=windows, app=home)
    placed = [stub(tree.system32, f"v_sys_{tag}.dll"), stub(tree.windows, f"v_sys_{tag}.dll"),
              stub(tree.windows, f"v_win_{tag}.dll")]
    try:
        yield tree, w, tag
    finally:
        for path in placed:
            path.unlink(missing_ok=True)
        shutil.rmtree(root, ignore_errors=True)


def _linux(path: str, prefix: Path) -> str:
    win = PureWindowsPath(path)
    if win.drive.upper() == "Z:":
        return str(Path("/", *win.parts[1:]))
    return str(prefix / "drive_c" / Path(*win.parts[1:]))


@pytest.mark.slow
def test_the_simulation_predicts_wines_loader(wine_tree: tuple[Tree, object, str]) -> None:
    from wintools import WinPython, to_windows

    t, w, tag = wine_tree
    assert isinstance(w, WinPython)
    v = f"_{tag}"
    sys_name, win_name = f"v_sys{v}.dll", f"v_win{v}.dll"
    # The altered order, step by step (System32 and the Windows folder are the prefix's: see the fixture).
    stub(t.provider, f"v_own{v}.dll"), stub(t.app, f"v_own{v}.dll"), stub(t.path1, f"v_own{v}.dll")
    stub(t.cwd, sys_name)
    stub(t.cwd, win_name), stub(t.path1, win_name)
    stub(t.cwd, f"v_cwd{v}.dll"), stub(t.path1, f"v_cwd{v}.dll")
    stub(t.path1, f"V_P1{v}.DLL"), stub(t.path2, f"v_p1{v}.dll")
    stub(t.path2, f"v_p2{v}.dll")
    stub(t.app, f"v_app{v}.dll"), stub(t.path2, f"v_app{v}.dll")
    stub(t.path1, f"v_mid{v}.dll", f"v_leaf{v}.dll"), stub(t.path1, f"v_leaf{v}.dll")
    stub(t.provider, f"v_leaf{v}.dll")
    altered = [f"v_own{v}.dll", sys_name, win_name, f"v_cwd{v}.dll", f"v_p1{v}.dll", f"v_p2{v}.dll",
               f"v_app{v}.dll", f"v_mid{v}.dll"]
    prov = stub(t.provider, f"prov_v{v}.dll", *altered)
    # A bare name: the exe's folder first; a missing import fails the whole call.
    stub(t.path1, f"n_top{v}.dll", f"n_dep{v}.dll"), stub(t.app, f"n_dep{v}.dll"), stub(t.provider, f"n_dep{v}.dll")
    stub(t.provider, f"f_mid{v}.dll", f"f_absent{v}.dll")
    failing = stub(t.provider, f"prov_f{v}.dll", f"f_mid{v}.dll")
    # The .pyd flags: the DLL's folder, then the added folders; PATH is not searched.
    stub(t.path1, f"x_dep{v}.dll"), stub(t.extra, f"x_add{v}.dll"), stub(t.path2, f"x_add{v}.dll")
    ext_lost = stub(t.provider, f"ext_l{v}.pyd", f"x_dep{v}.dll")
    ext = stub(t.provider, f"ext_x{v}.pyd", f"x_add{v}.dll")
    # SetDefaultDllDirectories: the DLL's folder for an altered load, the exe's, the added folders, System32.
    stub(t.path1, f"d_path{v}.dll"), stub(t.extra, f"d_user{v}.dll"), stub(t.path2, f"d_user{v}.dll")
    dd_lost = stub(t.provider, f"prov_dl{v}.dll", f"d_path{v}.dll")
    dd = stub(t.provider, f"prov_dd{v}.dll", f"d_user{v}.dll")
    # A file with the wanted name that this process cannot load ends the search: the good copy later on PATH is not
    # used (wine: STATUS_INVALID_IMAGE_FORMAT, STATUS_INVALID_IMAGE_NOT_MZ).
    as_i386(stub(t.path1, f"w_dep{v}.dll")), stub(t.path2, f"w_dep{v}.dll")
    (t.path1 / f"t_dep{v}.dll").write_text("not a DLL"), stub(t.path2, f"t_dep{v}.dll")
    wrong = stub(t.provider, f"prov_w{v}.dll", f"w_dep{v}.dll")
    text = stub(t.provider, f"prov_t{v}.dll", f"t_dep{v}.dll")

    def names_of(*paths: Path) -> list[str]:
        return sorted({p.name.lower() for p in paths} | {n.lower() for p in paths for n in _needed(p)})

    steps: list[tuple[str, str, list[str]]] = [
        ("altered", str(prov), names_of(prov, t.path1 / f"v_mid{v}.dll")),
        ("name", f"n_top{v}.dll", [f"n_top{v}.dll", f"n_dep{v}.dll"]),
        ("altered", str(failing), [failing.name, f"f_mid{v}.dll"]),
        ("pyd", str(ext_lost), [ext_lost.name, f"x_dep{v}.dll"]),
        ("altered", str(wrong), [wrong.name, f"w_dep{v}.dll"]),
        ("altered", str(text), [text.name, f"t_dep{v}.dll"]),
        ("add", str(t.path2), []),
        ("add", str(t.extra), []),
        ("pyd", str(ext), [ext.name, f"x_add{v}.dll"]),
        ("default_dirs", "", []),
        ("altered", str(dd_lost), [dd_lost.name, f"d_path{v}.dll"]),
        ("altered", str(dd), [dd.name, f"d_user{v}.dll"]),
    ]
    win_steps = [(kind, to_windows(arg) if kind in ("altered", "pyd", "add") else arg, names)
                 for kind, arg, names in steps]
    proc = w.run("-c", WINE_SCRIPT, json.dumps(win_steps), cwd=t.cwd, exe=t.app / "python.exe",
                 env={"WINEPATH": ";".join(to_windows(p) for p in (t.path1, t.path2))})
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line is not None, proc.stdout + proc.stderr
    real = json.loads(line[len("RESULT "):])

    # The same steps, simulated: python.exe's folder holds python311.dll and vcruntime140.dll, loaded at start.
    added: list[str] = []
    config = t.config(path=(str(t.path1), str(t.path2)))
    process = WindowsLoader(config, PeReader(use_disk=False))
    for dll in ("python311.dll", "vcruntime140.dll", "python3.dll"):
        process.preload(str(t.app / dll))
    for (kind, arg, names), seen in zip(steps, real, strict=True):
        report: LoadReport | None = None
        if kind == "altered" or kind == "name":
            report = process.dlopen(arg)
        elif kind == "pyd":
            report = process.load_extension(arg)
        elif kind == "add":
            added.append(arg)
        if kind in ("add", "default_dirs"):
            loaded = process.loaded_paths()
            config = t.config(path=(str(t.path1), str(t.path2)), dll_directories=tuple(added),
                              default_dirs_mode=config.default_dirs_mode or kind == "default_dirs")
            process = WindowsLoader(config, PeReader(use_disk=False))
            for path in loaded:
                process.preload(path)
        expected_error = (None if report is None or not report.missing else 126)
        assert seen["error"] == expected_error, (kind, arg, seen, report)
        loaded_now = {os.path.basename(p).lower(): p for p in process.loaded_paths()}
        for name in names:
            real_file = seen["files"][name]
            simulated = loaded_now.get(name.lower())
            assert (None if real_file is None else _linux(real_file, w.prefix).lower()) == (
                None if simulated is None else simulated.lower()), (kind, arg, name)


def _needed(path: Path) -> tuple[str, ...]:
    from ortfix.system.windows.pe import read_pe

    return tuple(n for n in read_pe(str(path)).needed if n.lower() not in ("kernel32.dll", "msvcrt.dll"))


def test_process_start_and_preloaded_modules(tmp_path: Path) -> None:
    t = make_tree(tmp_path)
    stub(t.app, "e_dep.dll"), stub(t.path1, "e_dep.dll")
    stub(t.provider, "e_pre.dll")
    stub(t.path2, "e_pre.dll")
    exe = stub(t.app, "tool.exe", "e_dep.dll")  # an image with imports: what the loader reads is the same
    process = loader(t)
    started = process.start_process(str(exe))
    assert where(started)["e_dep.dll"] == (str(t.app / "e_dep.dll"), VIA_APPLICATION_FOLDER)
    process.preload(str(t.provider / "e_pre.dll"))  # e.g. a DLL a hook loaded by full path
    assert process.locate("E_PRE").path == str(t.provider / "e_pre.dll")
    assert process.locate("e_pre.").rejected == () and process.locate("e_pre.").path is None  # "." : no extension
    ours = [p for p in process.loaded_paths() if Path(p).parent in (t.app, t.provider)]
    assert ours == [str(exe), str(t.app / "e_dep.dll"), str(t.provider / "e_pre.dll")]


@pytest.mark.slow
def test_a_venvs_bare_name_loads_search_its_base_interpreters_folder(wine_tree: tuple[Tree, object, str]) -> None:
    """A venv's python.exe is a launcher that starts the base python.exe: the process is the base's, and its folder,
    not venv\\Scripts, is the application folder of a bare-name load (cuDNN's sub-libraries, zlibwapi, ORT 1.28+'s
    cuDNN/cuFFT). The probe run in the venv says so, and the simulation set up from it agrees with wine."""
    from ortfix.target.choose import PROBE_SOURCE
    from ortfix.target.probe import parse_probe
    from wintools import WinPython, to_windows

    t, w, tag = wine_tree
    assert isinstance(w, WinPython)
    v = f"_{tag}"
    venv = t.root / "venv"
    made = w.run("-m", "venv", "--without-pip", to_windows(venv), exe=t.app / "python.exe")
    assert made.returncode == 0, made.stderr[-2000:]
    scripts = venv / "Scripts"
    stub(t.app, f"vb_dep{v}.dll"), stub(scripts, f"vb_dep{v}.dll")  # the base's folder and the venv's Scripts
    stub(t.path1, f"vb_top{v}.dll", f"vb_dep{v}.dll")
    names = [f"vb_top{v}.dll", f"vb_dep{v}.dll"]
    env = {"WINEPATH": ";".join(to_windows(p) for p in (t.path1, t.path2))}
    proc = w.run("-c", WINE_SCRIPT, json.dumps([("name", f"vb_top{v}.dll", names)]), cwd=t.cwd,
                 exe=scripts / "python.exe", env=env)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line is not None, proc.stdout + proc.stderr
    (real,) = json.loads(line[len("RESULT "):])
    assert real["error"] is None, real
    assert _linux(real["files"][f"vb_dep{v}.dll"], w.prefix) == str(t.app / f"vb_dep{v}.dll")  # wine: the base's

    probed = w.run("-S", to_windows(PROBE_SOURCE), exe=scripts / "python.exe", cwd=t.cwd)  # the probe, in the venv
    assert probed.returncode == 0, probed.stderr[-2000:]
    win = parse_probe(json.loads(probed.stdout)).windows
    assert win is not None and win.process_exe is not None, probed.stdout[-2000:]
    assert _linux(win.process_exe, w.prefix).lower() == str(t.app / "python.exe").lower()
    process = WindowsLoader(t.config(exe_dir=_linux(win.exe_dir, w.prefix)), PeReader(use_disk=False))
    process.start_process(_linux(win.process_exe, w.prefix))
    report = process.dlopen(f"vb_top{v}.dll")
    assert report.missing == []
    assert where(report)[f"vb_dep{v}.dll"] == (str(t.app / f"vb_dep{v}.dll"), VIA_APPLICATION_FOLDER)
