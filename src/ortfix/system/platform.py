"""The platform seam: everything about the target's operating system that the facts depend on, behind one Protocol —
how the OS loader resolves a library (simulated), how libraries are named, where the loader looks by default, the
driver and the library copies on the machine, and which hooks can make libraries findable. `check/facts.py` reaches
these only through a `Platform`; Linux is `system/linux.py`, and a Windows sibling plugs in through
`system/platforms.py` (`platform_for`) without touching callers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ortfix.compat.matrix import Matrix
from ortfix.errors import OrtfixError
from ortfix.system.driver import DriverFacts
from ortfix.system.elfcache import ElfReader
from ortfix.system.inventory import LibCopy
from ortfix.system.loader import LoadReport, Resolution
from ortfix.target.probe import ProbeFacts


@dataclass(frozen=True)
class MachineLoader:
    """How the machine's loader is set up, read once per check: where its index of installed libraries comes from
    (Linux: /etc/ld.so.cache) and the folders it searches when nothing else names one."""

    index_source: str
    default_dirs: tuple[str, ...]


@dataclass(frozen=True)
class InstalledHooks:
    """What ortfix's installed hooks do to a fresh process of the target."""

    search_prepend: tuple[str, ...]  # folders put first on the library search path on activation
    preloaded: tuple[str, ...]  # libraries loaded by absolute path at interpreter start-up
    files_present: tuple[str, ...]  # the files ortfix's hooks would occupy that exist already


class SimulatedProcess(Protocol):
    """One fresh process of the target, as the OS loader would build it, library by library."""

    def preload(self, path: str) -> None:
        """An object already in the process by absolute path (a preload hook, the loader itself)."""
        ...

    def start_process(self, executable: str) -> LoadReport:
        """Map an executable and its dependencies, as starting it would."""
        ...

    def dlopen(self, name: str, caller: str | None = None, *, lazy: bool = False) -> LoadReport:
        """Load `name` at run time from the object at `caller` (None: the executable), then its dependencies."""
        ...

    def locate(self, name: str) -> Resolution:
        """Where a bare load of `name` from the executable would find it (its dependencies are not followed)."""
        ...

    def loaded_paths(self) -> list[str]:
        """The files mapped so far, in load order."""
        ...


@runtime_checkable
class Platform(Protocol):
    """What is specific to one operating system (see the module docstring)."""

    @property
    def system(self) -> str:
        """`platform.system()` of the targets this platform serves ('Linux')."""
        ...

    @property
    def provider_libraries(self) -> Mapping[str, str]:
        """ORT's GPU provider → the file name of its provider library."""
        ...

    @property
    def driver_libraries(self) -> tuple[str, ...]:
        """The libraries the GPU driver installs (never a wheel)."""
        ...

    def parse_library_name(self, name: str) -> tuple[str, tuple[int, ...]] | None:
        """(family, version numbers) of a CUDA/cuDNN/TensorRT library's file name or SONAME; None for another."""
        ...

    def library_major(self, name: str) -> int | None:
        """The major version a library's name carries (libcudnn.so.9 → 9), else None."""
        ...

    def machine_loader(self) -> MachineLoader:
        """The machine's loader set-up (cached by the platform object: one read per check)."""
        ...

    def detect_driver(self) -> DriverFacts:
        """The GPU driver and GPUs of this machine."""
        ...

    def scan_libraries(self, probe: ProbeFacts, reader: ElfReader, matrix: Matrix) -> list[LibCopy]:
        """Every copy of every library that matters for the target."""
        ...

    def installed_hooks(self, probe: ProbeFacts) -> InstalledHooks:
        """What ortfix's hooks installed in the target's environment do."""
        ...

    def new_process(self, probe: ProbeFacts, search_path: str | None, reader: ElfReader) -> SimulatedProcess:
        """A fresh simulated process of the target interpreter, with `search_path` as its library search path
        variable (LD_LIBRARY_PATH on Linux) and the machine's loader preloaded."""
        ...

    def unreadable_dirs(self, search_path: str | None, cwd: str) -> list[str]:
        """Entries of a library search path that exist but cannot be listed (the loader silently skips them)."""
        ...


def unsupported(system: str) -> OrtfixError:
    """The one-line error for a target whose operating system has no Platform yet."""
    return OrtfixError(f"{system} is not supported yet: ortfix reads ELF libraries and glibc's loader",
                       hint="Windows support is on the roadmap")
