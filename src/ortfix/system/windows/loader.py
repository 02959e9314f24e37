"""Simulate the Windows loader: which file each DLL load resolves to in a fresh Windows process, or that none does.

The order is Microsoft's "Dynamic-link library search order" (SafeDllSearchMode on, as it is by default), checked
against wine's ntdll (`LdrGetDllPath`, `get_dll_load_path`, `get_dll_load_path_search_flags`) and against wine's real
loader by tests/test_winloader.py. For a name without a path: API sets (`api-ms-win-*`, `ext-ms-*`, mapped by the
system to a host DLL in System32), the modules already loaded (by base name, case-insensitively), KnownDLLs (mapped
from System32 at boot), then the folders of the search path that applies to the load call:
- `dlopen(full path)`: ORT's `LoadLibraryExW(path, LOAD_WITH_ALTERED_SEARCH_PATH)`: the DLL's own folder, System32,
  (the 16-bit system folder, never holding a CUDA DLL, left out), the Windows folder, the current folder, PATH;
- `dlopen(bare name)`: a plain `LoadLibrary` (cuDNN's sub-libraries, ORT 1.28+'s cuDNN/cuFFT): the same with the
  application's (the exe's) folder first instead of the DLL's;
- a process that called `SetDefaultDllDirectories(LOAD_LIBRARY_SEARCH_DEFAULT_DIRS)` (`default_dirs_mode`: conda's
  Python with CONDA_DLL_SEARCH_MODIFICATION_ENABLE): the DLL's folder (for an altered-search-path load only), the
  application folder, the AddDllDirectory folders, System32 — no Windows folder, no current folder, no PATH;
- a packaged (Microsoft Store) app: the package (its application folder), the DLL's folder for an altered load,
  System32 — no PATH (Microsoft's documented order; wine cannot show it);
- `load_extension(path)`: CPython >= 3.8's `.pyd` (and ctypes') `LoadLibraryExW(path, LOAD_LIBRARY_SEARCH_DEFAULT_DIRS
  | LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR)`: the DLL's folder, the application folder, the `os.add_dll_directory` folders,
  System32.
The folders of one load call serve every DLL that call loads (its imports, their imports): the search path belongs to
the call, not to the importing DLL. AddDllDirectory folders are searched most recently added first (Microsoft leaves
the order unspecified; wine searches so). Dependencies are the load-time imports (`PeInfo.needed`); delay-load imports
are loaded on first call, not with the file. A file with the wanted name that is not a PE file for this machine (a
32-bit DLL in a 64-bit process) ends the search with error 193 (ERROR_BAD_EXE_FORMAT): Windows does not skip it
(wine does, and searches on). A load call that fails leaves nothing loaded: Windows unloads what the call mapped.

File names compare case-insensitively, so the simulation also finds `CUBLAS64_12.DLL` on a case-sensitive file system
(the tests' trees on Linux); results carry the file's own spelling. Results are `system.loader`'s `LoadReport` and
`Resolution`, so callers treat both platforms alike; `Resolution.via` is one of the `VIA_*` constants below.
"""

from __future__ import annotations

import os
import re
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from ortfix.strenum import StrEnum
from ortfix.system.loader import VIA_LOADED, LoadReport, Resolution, folder_listing
from ortfix.system.windows.pe import PeError, PeInfo, PeReader

VIA_API_SET = "API set"
VIA_KNOWN_DLLS = "KnownDLLs"
VIA_FULL_PATH = "full path"
VIA_DLL_FOLDER = "DLL's folder"
VIA_APPLICATION_FOLDER = "application folder"
VIA_DLL_DIRECTORY = "AddDllDirectory folder"
VIA_SYSTEM32 = "System32"
VIA_WINDOWS_FOLDER = "Windows folder"
VIA_CURRENT_FOLDER = "current folder"
VIA_PATH = "PATH"
VIA_PACKAGE = "package"

ERROR_MOD_NOT_FOUND = 126  # "The specified module could not be found."
ERROR_BAD_EXE_FORMAT = 193  # "%1 is not a valid Win32 application."

# HKLM\SYSTEM\CurrentControlSet\Control\Session Manager\KnownDLLs of 64-bit Windows 10/11 (wow64 entries left out).
KNOWN_DLLS: frozenset[str] = frozenset({
    "advapi32.dll", "clbcatq.dll", "combase.dll", "comdlg32.dll", "coml2.dll", "difxapi.dll", "gdi32.dll",
    "gdiplus.dll", "imagehlp.dll", "imm32.dll", "kernel32.dll", "msctf.dll", "msvcrt.dll", "normaliz.dll", "nsi.dll",
    "ole32.dll", "oleaut32.dll", "psapi.dll", "rpcrt4.dll", "sechost.dll", "setupapi.dll", "shcore.dll", "shell32.dll",
    "shlwapi.dll", "user32.dll", "wldap32.dll", "ws2_32.dll",
})
# Loaded into every process before its first instruction runs.
PROCESS_MODULES = ("ntdll.dll", "kernel32.dll", "kernelbase.dll")
# The host DLL an API set contract maps to, by prefix (the schema maps each contract; these are the hosts of the
# contracts ORT and the CUDA DLLs import). Another contract is reported with System32's copy of the contract name.
API_SET_HOSTS: tuple[tuple[str, str], ...] = (("api-ms-win-crt-", "ucrtbase.dll"),
                                              ("api-ms-win-core-rtlsupport-", "ntdll.dll"),
                                              ("api-ms-win-core-", "kernelbase.dll"),
                                              ("api-ms-win-security-", "kernelbase.dll"))


class LoadMode(StrEnum):
    """Which search path a load call uses (see the module docstring)."""

    ALTERED = "LoadLibraryExW(LOAD_WITH_ALTERED_SEARCH_PATH)"
    STANDARD = "LoadLibrary"
    SEARCH_FLAGS = "LoadLibraryExW(LOAD_LIBRARY_SEARCH_DEFAULT_DIRS | LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR)"


@dataclass(frozen=True)
class WindowsLoaderConfig:
    """What decides the search in one Windows process. Paths are the target's own (Windows paths on Windows)."""

    exe_dir: str  # the folder of the process's .exe (the "application folder")
    system_dirs: tuple[str, ...]  # System32, then the Windows folder
    cwd: str
    path: tuple[str, ...]  # PATH entries, environment variables expanded, in order
    dll_directories: tuple[str, ...] = ()  # os.add_dll_directory / AddDllDirectory folders, in the order added
    default_dirs_mode: bool = False  # the process called SetDefaultDllDirectories (conda's DLL search modification)
    packaged: bool = False  # a packaged (Microsoft Store) app
    machine: str = "AMD64"  # pe.MACHINES name of the process's architecture
    known_dlls: frozenset[str] = KNOWN_DLLS  # lower-case names


class _LoadFailed(Exception):
    """A candidate that ends the search with an error instead of letting it go on."""


@dataclass
class _Module:
    path: str
    key: str  # the base name, lower-case
    info: PeInfo | None  # None: a system module or a preloaded one, whose imports are not followed


@dataclass
class _Call:
    """One load call: its search folders, and what it mapped (to unload if it fails)."""

    mode: LoadMode
    folders: tuple[tuple[str, str], ...]  # (via, folder) in search order
    mapped: list[_Module] = field(default_factory=list)


class WindowsLoader:
    """One simulated Windows process (satisfies system.platform.SimulatedProcess)."""

    def __init__(self, config: WindowsLoaderConfig, reader: PeReader | None = None) -> None:
        self.config = config
        self.reader = reader or PeReader(use_disk=False)
        self._modules: list[_Module] = []
        system32 = config.system_dirs[0] if config.system_dirs else ""
        for name in PROCESS_MODULES:
            self._modules.append(_Module(os.path.join(system32, name), name, None))

    # -- the SimulatedProcess protocol ----------------------------------------------------------------------
    def preload(self, path: str) -> None:
        """A module already in the process by full path (python311.dll, vcruntime140.dll next to python.exe, or a
        DLL a hook loaded); its imports are taken as loaded with it and not followed."""
        if self._loaded_at(path) is None:
            self._modules.append(_Module(path, _base_key(path), None))

    def start_process(self, executable: str) -> LoadReport:
        """Map an .exe and its imports (searched from the application folder, as process start-up does)."""
        call = _Call(LoadMode.STANDARD, self._folders(LoadMode.STANDARD, None))
        report = LoadReport(root=executable)
        module = self._map_file(executable, "", call, report, lazy=False)
        if module is not None:
            self._load_imports(module, call, report, lazy=False)
        return report

    def dlopen(self, name: str, caller: str | None = None, *, lazy: bool = False) -> LoadReport:
        """A full path: `LoadLibraryExW(path, LOAD_WITH_ALTERED_SEARCH_PATH)` as ORT loads its providers; a bare
        name: a plain `LoadLibrary(name)` (`caller` only names who asked: Windows searches the same way for all)."""
        if _has_path(name):
            return self._load_file(name, caller or "", LoadMode.ALTERED, lazy)
        return self._load_name(name, caller or "", lazy)

    def load_extension(self, path: str, caller: str | None = None) -> LoadReport:
        """A `.pyd` as CPython >= 3.8 imports it (also ctypes.CDLL(full path) with the default winmode)."""
        return self._load_file(path, caller or "", LoadMode.SEARCH_FLAGS, lazy=False)

    def locate(self, name: str) -> Resolution:
        """Where a plain `LoadLibrary(name)` would find `name` (nothing is loaded; imports are not followed)."""
        call = _Call(LoadMode.STANDARD, self._folders(LoadMode.STANDARD, None))
        try:
            res, _, _ = self._find(_module_name(name), "", call, lazy=False)
        except _LoadFailed as exc:
            return Resolution(name, "", None, None, rejected=(str(exc),))
        return res

    def loaded_paths(self) -> list[str]:
        return [m.path for m in self._modules]

    # -- load calls ---------------------------------------------------------------------------------------
    def _load_name(self, name: str, requester: str, lazy: bool) -> LoadReport:
        call = _Call(LoadMode.STANDARD, self._folders(LoadMode.STANDARD, None))
        report = LoadReport(root=name)
        try:
            res, found, new = self._find(_module_name(name), requester, call, lazy=lazy)
        except _LoadFailed as exc:
            report.resolutions.append(Resolution(name, requester, None, None, lazy, rejected=(str(exc),)))
            return report
        report.resolutions.append(res)
        if found is not None and new:
            self._load_imports(found, call, report, lazy=lazy)
        self._settle(call, report)
        return report

    def _load_file(self, path: str, requester: str, mode: LoadMode, lazy: bool) -> LoadReport:
        full = path if os.path.isabs(path) else os.path.join(self.config.cwd, path)
        report = LoadReport(root=path)
        loaded = self._loaded_at(full)
        if loaded is not None:
            report.resolutions.append(Resolution(path, requester, loaded.path, VIA_LOADED, lazy))
            return report
        call = _Call(mode, self._folders(mode, os.path.dirname(full)))
        module = self._map_file(full, requester, call, report, lazy=lazy)
        if module is not None:
            self._load_imports(module, call, report, lazy=lazy)
        self._settle(call, report)
        return report

    def _map_file(self, full: str, requester: str, call: _Call, report: LoadReport, *, lazy: bool) -> _Module | None:
        actual = _existing(os.path.dirname(full), os.path.basename(full))
        if actual is None:
            report.resolutions.append(Resolution(full, requester, None, None, lazy, searched=(os.path.dirname(full),),
                                                 rejected=(f"{full}: not found (error {ERROR_MOD_NOT_FOUND})",)))
            return None
        try:
            info = self._verify(actual)
        except _LoadFailed as exc:
            report.resolutions.append(Resolution(full, requester, None, None, lazy, rejected=(str(exc),)))
            return None
        module = _Module(actual, _base_key(actual), info)
        self._modules.append(module)
        call.mapped.append(module)
        report.resolutions.append(Resolution(full, requester, actual, VIA_FULL_PATH, lazy))
        return module

    def _load_imports(self, root: _Module, call: _Call, report: LoadReport, *, lazy: bool) -> None:
        queue: deque[_Module] = deque([root])
        while queue:
            module = queue.popleft()
            for name in module.info.needed if module.info else ():
                try:
                    res, found, new = self._find(name, module.path, call, lazy=lazy)
                except _LoadFailed as exc:
                    res, found, new = Resolution(name, module.path, None, None, lazy, rejected=(str(exc),)), None, False
                report.resolutions.append(res)
                if found is not None and new:
                    queue.append(found)

    def _settle(self, call: _Call, report: LoadReport) -> None:
        """A failed load call unloads every module it mapped."""
        if report.missing and call.mapped:
            gone = {id(m) for m in call.mapped}
            self._modules = [m for m in self._modules if id(m) not in gone]

    # -- finding one module by name ----------------------------------------------------------------------------
    def _find(self, name: str, requester: str, call: _Call, *, lazy: bool) -> tuple[Resolution, _Module | None, bool]:
        """(resolution, module, newly mapped) for a DLL name without a path."""
        key = name.lower()
        system32 = self.config.system_dirs[0] if self.config.system_dirs else ""
        if key.startswith(("api-ms-win-", "ext-ms-")):
            host = next((h for prefix, h in API_SET_HOSTS if key.startswith(prefix)), key)
            return Resolution(name, requester, os.path.join(system32, host), VIA_API_SET, lazy), None, False
        loaded = self._loaded_named(key)
        if loaded is not None:
            return Resolution(name, requester, loaded.path, VIA_LOADED, lazy), loaded, False
        if key in self.config.known_dlls:
            module = _Module(os.path.join(system32, key), key, None)
            self._modules.append(module)
            call.mapped.append(module)
            return Resolution(name, requester, module.path, VIA_KNOWN_DLLS, lazy), module, False
        searched: list[str] = []
        for via, folder in call.folders:
            actual = _existing(folder, name)
            if actual is None:
                searched.append(folder)
                continue
            info = self._verify(actual)
            module = _Module(actual, key, info)
            self._modules.append(module)
            call.mapped.append(module)
            return Resolution(name, requester, actual, via, lazy, tuple(searched)), module, True
        return Resolution(name, requester, None, None, lazy, tuple(searched)), None, False

    def _verify(self, path: str) -> PeInfo:
        """The file's PE info, or _LoadFailed when Windows would stop on it (error 193)."""
        try:
            info = self.reader.read(path)
        except PeError as exc:
            raise _LoadFailed(f"{path}: not a PE file (error {ERROR_BAD_EXE_FORMAT}): {exc}") from exc
        except OSError as exc:
            raise _LoadFailed(f"{path}: cannot be read: {exc}") from exc
        if info.machine != self.config.machine:
            raise _LoadFailed(f"{path}: {info.machine} DLL, this process is {self.config.machine} "  # i18n: english
                              f"(error {ERROR_BAD_EXE_FORMAT})")
        return info

    def _loaded_named(self, key: str) -> _Module | None:
        for module in self._modules:
            if module.key == key:
                return module
        return None

    def _loaded_at(self, path: str) -> _Module | None:
        wanted = _path_key(path)
        for module in self._modules:
            if _path_key(module.path) == wanted:
                return module
        return None

    def _folders(self, mode: LoadMode, dll_dir: str | None) -> tuple[tuple[str, str], ...]:
        cfg = self.config
        system32 = cfg.system_dirs[:1]
        windows = cfg.system_dirs[1:2]
        own = [(VIA_DLL_FOLDER, dll_dir)] if dll_dir and mode is not LoadMode.STANDARD else []
        app = [(VIA_APPLICATION_FOLDER, cfg.exe_dir)]
        user = [(VIA_DLL_DIRECTORY, d) for d in reversed(cfg.dll_directories)]
        sys32 = [(VIA_SYSTEM32, d) for d in system32]
        if mode is LoadMode.SEARCH_FLAGS or cfg.default_dirs_mode:
            return tuple([*own, *app, *user, *sys32])
        if cfg.packaged:
            return tuple([(VIA_PACKAGE, cfg.exe_dir), *own, *sys32])
        first = own or app
        rest = [*sys32, *((VIA_WINDOWS_FOLDER, d) for d in windows), (VIA_CURRENT_FOLDER, cfg.cwd),
                *((VIA_PATH, _absolute(p, cfg.cwd)) for p in cfg.path if p.strip())]
        return tuple([*first, *rest])


def _has_path(name: str) -> bool:
    return "\\" in name or "/" in name


def _module_name(name: str) -> str:
    """LoadLibrary's rule: no extension → ".dll" appended; a trailing "." means "no extension"."""
    if name.endswith("."):
        return name[:-1]
    return name if "." in name else name + ".dll"


def _base_key(path: str) -> str:
    return re.split(r"[\\/]", path)[-1].lower()


def _path_key(path: str) -> str:
    return os.path.normcase(os.path.normpath(path)).lower()


def _absolute(entry: str, cwd: str) -> str:
    entry = entry.strip()
    return entry if os.path.isabs(entry) else os.path.join(cwd, entry)


@lru_cache(maxsize=1024)
def _folded(listing: frozenset[str]) -> Mapping[str, str]:
    out: dict[str, str] = {}
    for name in sorted(listing):
        out.setdefault(name.lower(), name)
    return out


def _existing(folder: str, name: str) -> str | None:
    """The path of `name` in `folder` compared as Windows compares names (case-insensitively), or None."""
    listing = folder_listing(folder)
    if listing is None:  # searchable but not listable
        candidate = os.path.join(folder, name)
        return candidate if os.path.isfile(candidate) else None
    actual = _folded(listing).get(name.lower())
    if actual is None:
        return None
    candidate = os.path.join(folder, actual)
    return candidate if os.path.isfile(candidate) else None
