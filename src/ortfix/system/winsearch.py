"""Windows' DLL search order for one simulated process, as facts/windows.md measured it: a DLL loaded by full path
with LOAD_WITH_ALTERED_SEARCH_PATH (ORT's providers) has its imports searched in its own folder, System32, the
Windows folder, the current folder, then PATH; a bare `LoadLibrary` (cuDNN's sub-libraries) in the exe's folder,
System32, the Windows folder, the current folder, then PATH; a Python extension module (CPython >= 3.8) in its own
folder, the exe's folder, System32 and the `os.add_dll_directory` folders — never PATH. A DLL already in the process
(compared by file name, case-insensitively) is reused; API sets (`api-ms-win-*`, `ext-ms-*`) resolve in the system.
The imports of a DLL found in a system folder are not followed (the system's own are complete).

A compact stand-in for the full loader of `system/winloader.py` (KnownDLLs, conda's default-dirs mode, the Store
Python), producing the same `loader.LoadReport` and `Resolution`."""

from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass

from ortfix.system.loader import LoadReport, Resolution
from ortfix.system.pe import PeError
from ortfix.system.platform import LibraryReader

VIA_LOADED = "already loaded"
VIA_DLL_DIR = "the DLL's own folder"
VIA_EXE_DIR = "the exe's folder"
VIA_SYSTEM = "System32"
VIA_WINDOWS = "the Windows folder"
VIA_CWD = "the current folder"
VIA_PATH = "PATH"
VIA_DLL_DIRECTORY = "add_dll_directory"
VIA_API_SET = "API set"
_API_SET_PREFIXES = ("api-ms-win-", "ext-ms-")


@dataclass(frozen=True)
class SearchConfig:
    exe_dir: str
    system_dirs: tuple[str, ...]  # System32, then the Windows folder
    cwd: str
    path: tuple[str, ...]  # PATH entries
    dll_directories: tuple[str, ...] = ()


class WindowsSearch:
    """One fresh process (satisfies platform.SimulatedProcess)."""

    def __init__(self, config: SearchConfig, reader: LibraryReader,
                 listings: dict[str, dict[str, str]] | None = None) -> None:
        self.config = config
        self.reader = reader
        self._loaded: dict[str, str] = {}  # lower-case file name → path, in load order
        # folder → {lower-case name: name}: shared by the processes of one check (System32 is listed once)
        self._listings = {} if listings is None else listings

    # -- the SimulatedProcess contract ---------------------------------------------------------------------------
    def preload(self, path: str) -> None:
        self._loaded.setdefault(os.path.basename(path).lower(), path)

    def start_process(self, executable: str) -> LoadReport:
        return self._load_path(executable, self._standard_order())

    def dlopen(self, name: str, caller: str | None = None, *, lazy: bool = False) -> LoadReport:
        if os.path.isabs(name):  # LoadLibraryExW(path, LOAD_WITH_ALTERED_SEARCH_PATH), as ORT loads its providers
            return self._load_path(name, self._altered_order(os.path.dirname(name)), lazy=lazy)
        report = LoadReport(root=name)
        self._resolve_all(name, caller or "(the executable)", self._standard_order(), report, lazy)
        return report

    def locate(self, name: str) -> Resolution:
        return self._find(name, "(the executable)", self._standard_order(), lazy=False)

    def loaded_paths(self) -> list[str]:
        return list(self._loaded.values())

    def load_extension(self, path: str) -> LoadReport:
        """A .pyd as CPython >= 3.8 loads it (LOAD_LIBRARY_SEARCH_DEFAULT_DIRS | LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR)."""
        order = [(os.path.dirname(path), VIA_DLL_DIR), (self.config.exe_dir, VIA_EXE_DIR),
                 (self.config.system_dirs[0], VIA_SYSTEM),
                 *((d, VIA_DLL_DIRECTORY) for d in self.config.dll_directories)]
        return self._load_path(path, order)

    # -- the search ----------------------------------------------------------------------------------------------
    def _standard_order(self) -> list[tuple[str, str]]:
        return [(self.config.exe_dir, VIA_EXE_DIR), *self._after_first()]

    def _altered_order(self, folder: str) -> list[tuple[str, str]]:
        return [(folder, VIA_DLL_DIR), *self._after_first()]

    def _after_first(self) -> list[tuple[str, str]]:
        system, windows = ((*self.config.system_dirs, "", ""))[:2]
        return [(system, VIA_SYSTEM), (windows, VIA_WINDOWS), (self.config.cwd, VIA_CWD),
                *((d, VIA_PATH) for d in self.config.path)]

    def _load_path(self, path: str, order: list[tuple[str, str]], *, lazy: bool = False) -> LoadReport:
        report = LoadReport(root=path)
        name = os.path.basename(path)
        report.resolutions.append(Resolution(name, "(by path)", path, "absolute path", lazy=lazy))
        if name.lower() in self._loaded:
            return report
        self._loaded[name.lower()] = path
        self._resolve_imports(path, order, report, lazy)
        return report

    def _resolve_all(self, name: str, requester: str, order: list[tuple[str, str]], report: LoadReport,
                     lazy: bool) -> None:
        res = self._find(name, requester, order, lazy=lazy)
        report.resolutions.append(res)
        if res.path and res.via not in (VIA_LOADED, VIA_API_SET):
            self._loaded[name.lower()] = res.path
            if res.via not in (VIA_SYSTEM, VIA_WINDOWS):
                self._resolve_imports(res.path, order, report, lazy)

    def _resolve_imports(self, path: str, order: list[tuple[str, str]], report: LoadReport, lazy: bool) -> None:
        """The imports of `path`, breadth first, each searched in `order` (a load's whole tree uses one order)."""
        queue = deque([path])
        while queue:
            current = queue.popleft()
            try:
                needed = self.reader.read(current).needed
            except (PeError, OSError):
                continue
            for dep in needed:
                res = self._find(dep, current, order, lazy=lazy)
                report.resolutions.append(res)
                if res.path and res.via not in (VIA_LOADED, VIA_API_SET):
                    self._loaded[dep.lower()] = res.path
                    if res.via not in (VIA_SYSTEM, VIA_WINDOWS):
                        queue.append(res.path)

    def _find(self, name: str, requester: str, order: list[tuple[str, str]], *, lazy: bool) -> Resolution:
        key = name.lower()
        if key in self._loaded:
            return Resolution(name, requester, self._loaded[key], VIA_LOADED, lazy=lazy)
        if key.startswith(_API_SET_PREFIXES):
            return Resolution(name, requester, os.path.join(self.config.system_dirs[0], name), VIA_API_SET,
                              lazy=lazy)
        searched: list[str] = []
        for folder, via in order:
            if not folder:
                continue
            actual = self._listing(folder).get(key)
            if actual is not None:
                return Resolution(name, requester, os.path.join(folder, actual), via, lazy=lazy,
                                  searched=tuple(searched))
            searched.append(folder)
        return Resolution(name, requester, None, None, lazy=lazy, searched=tuple(searched))

    def _listing(self, folder: str) -> dict[str, str]:
        key = os.path.normcase(folder)
        if key not in self._listings:
            try:
                self._listings[key] = {n.lower(): n for n in os.listdir(folder)}
            except OSError:
                self._listings[key] = {}
        return self._listings[key]
