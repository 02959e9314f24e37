"""What the probe reports about a Windows target only (target/probe.py parses it): the folders its DLL search uses
besides PATH, the registry's Path values, and the modes that change the search. Apart from the rest of the report so
that a Linux check never defines these classes (a frozen dataclass costs about 4M instructions to define)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RegistryPath:
    """A `Path` value from the registry, as stored and as a new process would get it."""

    raw: str
    kind: str  # REG_EXPAND_SZ | REG_SZ (another type is not a Path the system uses)
    expanded: str  # %VARS% expanded


@dataclass(frozen=True)
class WindowsInfo:
    """What a Windows target adds to the report: the folders its DLL search uses besides PATH, PATH as a new login
    would build it, and the modes that change the search."""

    system_dir: str  # System32
    windows_dir: str
    exe_dir: str  # the folder of the process's .exe (the first place a bare LoadLibrary searches): a venv's base's
    machine_path: RegistryPath | None  # HKLM\...\Session Manager\Environment
    user_path: RegistryPath | None  # HKCU\Environment
    conda_dll_search_modification: str | None  # CONDA_DLL_SEARCH_MODIFICATION_ENABLE as set in the process
    packaged: bool  # a Microsoft Store (packaged) Python
    process_exe: str | None = None  # the .exe the process runs (a venv's python.exe starts its base's: this one)

    @property
    def login_path(self) -> tuple[str, ...]:
        """PATH as a new login's processes get it: the machine Path, then the user Path (expanded)."""
        parts = [p.expanded for p in (self.machine_path, self.user_path) if p is not None]
        return tuple(e for part in parts for e in part.split(";") if e)
