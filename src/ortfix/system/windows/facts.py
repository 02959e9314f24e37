"""The facts only a Windows target has, gathered with the same simulated processes as the rest of the facts: the
MSVC runtime (`msvcp140.dll`) that ORT's provider would get and its FileVersion, where `zlibwapi.dll` (cuDNN 8.3-8.9)
would be found, PATH now and as a new login builds it (machine Path, then user Path), and the DLLs a new login's
processes would find elsewhere than this one. `check/windows.py` judges them."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ortfix.system.loader import Resolution
from ortfix.system.windows.pe import PeError, PeInfo
from ortfix.target.probe import ProbeFacts

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ortfix.system.platform_protocols import LibraryReader, Platform, SimulatedProcess

MSVC_RUNTIME = "msvcp140.dll"
ZLIBWAPI = "zlibwapi.dll"


@dataclass(frozen=True)
class DllAt:
    """Where a DLL would load from (path None: nowhere), how, and its FileVersion."""

    name: str
    path: str | None
    via: str | None
    version: tuple[int, ...] | None
    searched: tuple[str, ...] = ()


@dataclass(frozen=True)
class LoginDifference:
    """A DLL that a process started after a new login would find elsewhere than a process of this shell."""

    name: str
    now: str | None
    at_login: str | None


@dataclass(frozen=True)
class WindowsFacts:
    path: tuple[str, ...]  # PATH as the target process has it (ortfix's PATH hook's folders in front when installed)
    login_path: tuple[str, ...]  # machine Path then user Path, expanded: what a new login's processes start with
    msvc_runtime: DllAt  # the msvcp140.dll ORT's provider gets
    zlibwapi: DllAt  # a bare LoadLibrary("zlibwapi.dll"), as cuDNN 8's sub-libraries import it
    login_differs: tuple[LoginDifference, ...]
    default_dirs_mode: bool  # CONDA_DLL_SEARCH_MODIFICATION_ENABLE: conda's Python called SetDefaultDllDirectories
    packaged: bool  # a Microsoft Store Python: no PATH step in its DLL search

    def to_json(self) -> dict[str, object]:
        def dll(d: DllAt) -> dict[str, object]:
            return {"name": d.name, "path": d.path, "via": d.via,
                    "version": ".".join(map(str, d.version)) if d.version else None}

        return {"path": list(self.path), "login_path": list(self.login_path),
                "msvc_runtime": dll(self.msvc_runtime), "zlibwapi": dll(self.zlibwapi),
                "login_differs": [{"name": d.name, "now": d.now, "at_login": d.at_login} for d in self.login_differs],
                "default_dirs_mode": self.default_dirs_mode, "packaged": self.packaged}


def windows_facts(
    probe: ProbeFacts,
    plat: Platform,
    new_process: Callable[[str | None], SimulatedProcess],
    search_path: str | None,
    prepend: tuple[str, ...],
    reader: LibraryReader,
    resolutions: Iterable[Resolution],
) -> WindowsFacts | None:
    """The Windows facts of a target (None for another); `resolutions`: every provider load's, `new_process(path)`:
    a fresh process of the target with PATH=`path`, `search_path` the target's PATH, `prepend` the hook's folders."""
    win = probe.windows
    if win is None:
        return None
    sep = plat.search_path_separator
    resolved = list(resolutions)
    now = new_process(search_path)
    plat.start_interpreter(now, probe)
    msvc = next((r for r in resolved if r.name.lower() == MSVC_RUNTIME and r.path), None) or now.locate(MSVC_RUNTIME)
    zlib = now.locate(ZLIBWAPI)
    login_path = (*prepend, *win.login_path)
    login = new_process(sep.join(login_path))
    plat.start_interpreter(login, probe)
    differs = []
    names = dict.fromkeys(r.name for r in resolved if plat.parse_library_name(r.name) or r.name.lower() == ZLIBWAPI)
    for name in names:
        here, there = now.locate(name).path, login.locate(name).path
        if there is not None and (here is None or here.lower() != there.lower()):
            differs.append(LoginDifference(name, here, there))
    return WindowsFacts(
        path=tuple(e for e in (search_path or "").split(sep) if e),
        login_path=login_path,
        msvc_runtime=_dll_at(msvc, reader),
        zlibwapi=_dll_at(zlib, reader),
        login_differs=tuple(differs),
        default_dirs_mode=bool(win.conda_dll_search_modification),
        packaged=win.packaged,
    )


def _dll_at(res: Resolution, reader: LibraryReader) -> DllAt:
    version = None
    if res.path:
        try:
            info = reader.read(res.path)
        except (PeError, OSError):
            info = None
        version = info.file_version if isinstance(info, PeInfo) else None
    return DllAt(res.name, res.path, res.via, version, res.searched)
