"""The Linux platform: glibc's loader (simulated by loader.py, with /etc/ld.so.cache read by ldcache.py), ELF SONAMEs
(system/inventory.py's naming rules; the scan: inventory.py), the driver (driver.py) and the conda activation and
preload hooks (hooks.py; what later stages ask about libraries and hooks: libraries.py), put together behind the
`Platform` Protocol of system/platform.py, with the Linux names the facts use (LD_LIBRARY_PATH, LD_PRELOAD,
libonnxruntime_providers_shared.so, libpython). It only delegates: the behaviour lives in those modules. One object
serves one check: the machine's loader set-up is read once, on first use."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from functools import cached_property
from types import MappingProxyType

from ortfix.compat.matrix import Matrix
from ortfix.compat.model import WheelSpec
from ortfix.i18n import N_, Msg
from ortfix.system import inventory
from ortfix.system.driver import DriverFacts
from ortfix.system.inventory import LibCopy
from ortfix.system.linux import hooks, libraries
from ortfix.system.linux import inventory as linux_inventory
from ortfix.system.linux.driver import detect_driver
from ortfix.system.linux.elf import NotElf
from ortfix.system.linux.elfcache import ElfReader
from ortfix.system.linux.ldcache import LdCache, load_ld_cache
from ortfix.system.linux.ldso import find_interpreter, system_search_dirs
from ortfix.system.linux.loader import LinuxLoader, LoaderConfig, unreadable_dirs
from ortfix.system.loader import LoadReport
from ortfix.system.pathrules import within_resolved
from ortfix.system.platform import HookFile, InstalledHooks, MachineLoader
from ortfix.target.probe import ProbeFacts

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ortfix.system.platform_protocols import LibraryReader, SimulatedProcess

# Installed by the NVIDIA driver, never by a wheel (ORT 1.27+ and cuDNN 9's sub-libraries link libcuda.so.1 directly).
DRIVER_LIBRARIES = ("libcuda.so.1", "libnvidia-ml.so.1")
PROVIDER_LIBRARIES: Mapping[str, str] = MappingProxyType(
    {"cuda": "libonnxruntime_providers_cuda.so", "tensorrt": "libonnxruntime_providers_tensorrt.so"})
_ELF_MACHINES = {"x86_64": "EM_X86_64", "aarch64": "EM_AARCH64"}


def _elf_reader(reader: LibraryReader) -> ElfReader:
    if not isinstance(reader, ElfReader):
        raise TypeError(f"the Linux platform reads ELF files with an ElfReader, not "  # i18n: english (a bug)
                        f"{type(reader).__name__}")
    return reader


class LinuxPlatform:
    """glibc's Linux (see the module docstring); satisfies platform.Platform."""

    system = "Linux"
    is_windows = False
    sys_platform = "linux"
    os_name = "posix"
    matrix_os = "linux"
    driver_looked_at = (N_("checked /sys/module/nvidia/version, /proc/driver/nvidia/version, libcuda.so.1"),)
    no_driver_advice = N_("install the NVIDIA driver (or run in a container with the GPU passed through: --gpus all); "
                          "to prepare an environment for another machine, use `ortfix plan --driver VERSION`")
    provider_libraries = PROVIDER_LIBRARIES
    driver_libraries = DRIVER_LIBRARIES
    providers_shared_library = "libonnxruntime_providers_shared.so"
    search_path_variable = "LD_LIBRARY_PATH"
    search_path_separator = ":"
    preload_variable: str | None = "LD_PRELOAD"
    activation_note = N_("LD_LIBRARY_PATH simulated as after `conda activate` (ortfix's activate.d hook is installed)")
    read_errors: tuple[type[Exception], ...] = (NotElf,)

    library_names_are_sonames = True
    shadow_vias = libraries.SHADOW_VIAS
    versions_identify_copies = False
    findable_advice = libraries.FINDABLE_ADVICE
    shadow_advice = libraries.SHADOW_ADVICE

    def search_summary(self, search_path: str | None, index_source: str, default_dirs: Sequence[str]) -> Msg:
        return libraries.search_summary(search_path, index_source, default_dirs)

    def no_hook_advice(self, paths: Sequence[str]) -> str:
        return libraries.no_hook_advice(paths)

    hook_kinds = ("conda", "preload")

    def hook_folders(self, paths: Sequence[str]) -> list[str]:
        return libraries.hook_folders(paths)

    def hook_files(self, kind: str, paths: Sequence[str], prefix: str, site: str) -> tuple[HookFile, ...]:
        return libraries.hook_files(kind, paths, prefix, site)

    def wheel_for_library(self, matrix: Matrix, name: str, cuda_major: int,
                          cudnn_major: int | None) -> WheelSpec | None:
        return libraries.wheel_for_library(matrix, name, cuda_major, cudnn_major)

    def installed_library_path(self, site: str, wheel: WheelSpec, soname: str) -> str:
        return libraries.installed_library_path(site, wheel, soname)

    def hook_libraries(self, hook_libs: Mapping[str, str], copies: Sequence[LibCopy], cuda_major: int | None,
                       cudnn_wheel: WheelSpec | None) -> dict[str, str]:
        return libraries.whole_cudnn(hook_libs, copies, cudnn_wheel)

    def new_reader(self) -> ElfReader:
        return ElfReader()

    def library_key(self, name: str) -> str:
        return name

    def library_name(self, soname: str) -> str | None:
        return soname

    def wheel_libraries(self, wheel: WheelSpec) -> tuple[str, ...]:
        return wheel.sonames

    def parse_library_name(self, name: str) -> tuple[str, tuple[int, ...]] | None:
        return inventory.parse_lib_name(name)

    def inside(self, path: str, prefix: str) -> bool:
        return within_resolved(path, prefix, windows=False)

    def library_major(self, name: str) -> int | None:
        return inventory.soname_major(name)


    # -- the machine, read once ------------------------------------------------------------------------------
    @cached_property
    def ld_cache(self) -> LdCache:
        return load_ld_cache()

    @cached_property
    def interpreter(self) -> str | None:
        """The machine's ld.so."""
        return find_interpreter()

    @cached_property
    def _search_dirs(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        return system_search_dirs(self.interpreter)

    def machine_loader(self) -> MachineLoader:
        return MachineLoader(index_source=self.ld_cache.source, default_dirs=self._search_dirs[0])

    def detect_driver(self) -> DriverFacts:
        return detect_driver(self.ld_cache)

    def scan_libraries(self, probe: ProbeFacts, reader: LibraryReader, matrix: Matrix) -> list[LibCopy]:
        return linux_inventory.scan(probe, self.ld_cache, _elf_reader(reader), matrix)

    # -- the target's processes ------------------------------------------------------------------------------
    def installed_hooks(self, probe: ProbeFacts) -> InstalledHooks:
        prepend = tuple(hooks.read_conda_hook(probe.prefix) or ()) if probe.env_kind == "conda" else ()
        paths = (*hooks.conda_hook_files(probe.prefix), *hooks.preload_files(probe.purelib))
        return InstalledHooks(
            search_prepend=prepend,
            preloaded=tuple(hooks.read_preload_hook(probe.purelib) or ()),
            files_present=tuple(p for p in paths if os.path.lexists(p)),
        )

    def loader_config(self, probe: ProbeFacts, search_path: str | None) -> LoaderConfig:
        """What decides the search in a process of the target with LD_LIBRARY_PATH=`search_path`."""
        dirs, hwcaps = self._search_dirs
        return LoaderConfig(
            ld_library_path=search_path,
            cache=self.ld_cache,
            default_dirs=dirs,
            hwcaps_subdirs=hwcaps,
            cwd=probe.cwd,
            elf_class=probe.pointer_bits,
            machine=_ELF_MACHINES.get(probe.machine, "EM_" + probe.machine.upper()),
        )

    def new_process(self, probe: ProbeFacts, search_path: str | None, reader: LibraryReader) -> LinuxLoader:
        loader = LinuxLoader(self.loader_config(probe, search_path), _elf_reader(reader))
        if self.interpreter:
            loader.preload(self.interpreter)
        return loader

    def start_interpreter(self, process: SimulatedProcess, probe: ProbeFacts) -> str | None:
        try:
            process.start_process(probe.real_executable)
        except (NotElf, OSError):
            return None  # an interpreter we cannot read (a wrapper script): its own libraries do not change the answer
        return next((p for p in process.loaded_paths() if "libpython" in os.path.basename(p)), None)

    def load_extension(self, process: SimulatedProcess, path: str, caller: str | None) -> LoadReport:
        return process.dlopen(path, caller)

    def unreadable_dirs(self, search_path: str | None, cwd: str) -> list[str]:
        return unreadable_dirs(search_path, cwd)
