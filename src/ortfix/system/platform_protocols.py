"""The Protocols of the platform seam (system/platform.py): `Platform`, what one operating system answers, and the
`LibraryReader`, `BinaryInfo` and `SimulatedProcess` it hands out. Types for mypy, and for `isinstance(x, Platform)`
(tests/factsdata.py): check's path imports them only under TYPE_CHECKING, so that a check does not import `typing`
(speed/__init__.py)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ortfix.compat.matrix import Matrix
    from ortfix.compat.model import WheelSpec
    from ortfix.i18n import Msg
    from ortfix.system.driver import DriverFacts
    from ortfix.system.inventory import LibCopy
    from ortfix.system.loader import LoadReport, Resolution
    from ortfix.system.platform import HookFile, InstalledHooks, MachineLoader
    from ortfix.target.probe import ProbeFacts


class BinaryInfo(Protocol):
    """What the facts read of any library file (an ELF `ElfInfo`, a PE `PeInfo`)."""

    @property
    def needed(self) -> tuple[str, ...]:
        """The libraries it needs at load time (DT_NEEDED; the PE import table)."""
        ...


class LibraryReader(Protocol):
    """A cached reader of library files (`elfcache.ElfReader`, `pe.PeReader`)."""

    def read(self, path: str) -> BinaryInfo:
        """The file's info; OSError when it cannot be read, the platform's `read_errors` when it is no library."""
        ...

    def save(self) -> None:
        """Write the cache back (best effort)."""
        ...


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
    def is_windows(self) -> bool:
        """Whether this is Windows: the one answer to "is the target Windows" (`Facts.platform.is_windows`), for the
        judgements that only Windows has (its own findings, the PATH-based hooks, its loader level); a question
        that has an answer on every platform is a member of its own instead."""
        ...

    @property
    def sys_platform(self) -> str:
        """`sys.platform` of its targets, as a PEP 508 marker names it ('linux'; Windows: 'win32')."""
        ...

    @property
    def os_name(self) -> str:
        """`os.name` of its targets, as a PEP 508 marker names it ('posix'; Windows: 'nt')."""
        ...

    @property
    def matrix_os(self) -> str:
        """The compatibility matrix's name for this OS (its driver minimums are per OS: 'linux', 'windows')."""
        ...

    @property
    def driver_looked_at(self) -> tuple[str, ...]:
        """What the driver detection read besides the driver's own source, said when no driver is found."""
        ...

    @property
    def no_driver_advice(self) -> str:
        """What to do when no NVIDIA driver is found."""
        ...

    @property
    def provider_libraries(self) -> Mapping[str, str]:
        """ORT's GPU provider → the file name of its provider library."""
        ...

    @property
    def driver_libraries(self) -> tuple[str, ...]:
        """The libraries the GPU driver installs (never a wheel)."""
        ...

    @property
    def providers_shared_library(self) -> str:
        """The file name of ORT's providers_shared library, loaded before any provider."""
        ...

    @property
    def search_path_variable(self) -> str:
        """The environment variable the loader searches ('LD_LIBRARY_PATH'; Windows: 'PATH')."""
        ...

    @property
    def search_path_separator(self) -> str:
        """The separator of that variable's entries (':'; Windows: ';')."""
        ...

    @property
    def preload_variable(self) -> str | None:
        """The variable naming libraries loaded before everything else ('LD_PRELOAD'), None where there is none."""
        ...

    @property
    def activation_note(self) -> str:
        """What the check notes when it judges the search path as after ortfix's installed hook ran."""
        ...

    @property
    def read_errors(self) -> tuple[type[Exception], ...]:
        """What the reader raises for a file that is not a library of this platform."""
        ...

    @property
    def library_names_are_sonames(self) -> bool:
        """Whether this platform names libraries by the SONAMEs the matrix lists (Linux). Where it does not, the
        matrix's needed lists and the sub-libraries of a cuDNN wheel cannot be compared with the files on disk."""
        ...

    @property
    def shadow_vias(self) -> tuple[str, ...]:
        """The loader's search steps through which a copy outside the environment can win over its own (LIB004)."""
        ...

    @property
    def versions_identify_copies(self) -> bool:
        """Whether two copies that carry the same version are the same build (Windows' FileVersion: torch\\lib's
        copy of the toolkit's DLL), so one that shadows another of its version is nothing to fix."""
        ...

    @property
    def findable_advice(self) -> str:
        """What to do about needed libraries that are installed but not on the loader's path (LIB001)."""
        ...

    @property
    def shadow_advice(self) -> str:
        """What to do about a copy outside the environment that wins over its own (LIB004)."""
        ...

    def search_summary(self, search_path: str | None, index_source: str, default_dirs: Sequence[str]) -> str | Msg:
        """The loader's search as the evidence of a library finding says it."""
        ...

    def no_hook_advice(self, paths: Sequence[str]) -> str:
        """`--hook none`: how the user makes the libraries at `paths` (in load order) findable themselves."""
        ...

    def wheel_for_library(self, matrix: Matrix, name: str, cuda_major: int,
                          cudnn_major: int | None) -> WheelSpec | None:
        """The NVIDIA pip wheel that ships the library `name` (a SONAME, or this platform's name of it)."""
        ...

    def installed_library_path(self, site: str, wheel: WheelSpec, soname: str) -> str:
        """Where `wheel` will put the library the matrix names `soname` below the site-packages folder `site`."""
        ...

    def hook_libraries(self, hook_libs: Mapping[str, str], copies: Sequence[LibCopy], cuda_major: int | None,
                       cudnn_wheel: WheelSpec | None) -> dict[str, str]:
        """`hook_libs` (name → path) with what a hook must make findable beside them: Linux, the whole cuDNN copy
        (cuDNN loads its sub-libraries itself); Windows, NVRTC beside cuDNN (loaded by a name cuDNN builds)."""
        ...

    @property
    def hook_kinds(self) -> tuple[str, ...]:
        """The `--hook` kinds this platform offers besides auto and none ('conda', 'preload'; Windows also
        'user-path', a step of its own rather than a file)."""
        ...

    def hook_folders(self, paths: Sequence[str]) -> list[str]:
        """The folders of the libraries at `paths` (in load order), in that order, each once."""
        ...

    def hook_files(self, kind: str, paths: Sequence[str], prefix: str, site: str) -> tuple[HookFile, ...]:
        """The files of hook `kind` ('conda' or 'preload') that make the libraries at `paths` (in load order)
        findable in the environment at `prefix` (its site-packages folder `site`)."""
        ...

    def new_reader(self) -> LibraryReader:
        """A reader of this platform's library files (disk-cached)."""
        ...

    def library_key(self, name: str) -> str:
        """The form of a library name that compares as the loader compares names (Windows: case-insensitive)."""
        ...

    def library_name(self, soname: str) -> str | None:
        """This platform's name of a library the matrix names by its Linux SONAME (Windows: libcudart.so.12 →
        cudart64_12.dll); None when it has none."""
        ...

    def wheel_libraries(self, wheel: WheelSpec) -> tuple[str, ...]:
        """The library names an NVIDIA wheel installs on this platform (Linux: its SONAMEs)."""
        ...

    def parse_library_name(self, name: str) -> tuple[str, tuple[int, ...]] | None:
        """(family, version numbers) of a CUDA/cuDNN/TensorRT library's file name or SONAME; None for another."""
        ...

    def inside(self, path: str, prefix: str) -> bool:
        """Whether the file or folder `path` lies in the environment at `prefix` (or is it), links resolved, by
        this OS's path rules (system/pathrules.py: Windows compares without case)."""
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

    def scan_libraries(self, probe: ProbeFacts, reader: LibraryReader, matrix: Matrix) -> list[LibCopy]:
        """Every copy of every library that matters for the target."""
        ...

    def installed_hooks(self, probe: ProbeFacts) -> InstalledHooks:
        """What ortfix's hooks installed in the target's environment do."""
        ...

    def new_process(self, probe: ProbeFacts, search_path: str | None, reader: LibraryReader) -> SimulatedProcess:
        """A fresh simulated process of the target interpreter, with `search_path` as its library search path
        variable (LD_LIBRARY_PATH on Linux, PATH on Windows) and the machine's loader preloaded."""
        ...

    def start_interpreter(self, process: SimulatedProcess, probe: ProbeFacts) -> str | None:
        """Start the target's interpreter in `process`; the object later loads are made from (Linux: libpython when
        the interpreter links it; None: the executable)."""
        ...

    def load_extension(self, process: SimulatedProcess, path: str, caller: str | None) -> LoadReport:
        """Load a Python extension module (ORT's pybind module) as the interpreter does."""
        ...

    def unreadable_dirs(self, search_path: str | None, cwd: str) -> list[str]:
        """Entries of a library search path that exist but cannot be listed (the loader silently skips them)."""
        ...
