"""The Windows platform: PE DLLs (pe.py), the DLL names of CUDA, cuBLAS, cuFFT, cuDNN, NVRTC, nvJitLink and
TensorRT per major (windows.md's table: `cudart64_12.dll`, `cudart64_110.dll` = CUDA 11.0, `nvrtc64_120_0.dll`,
`cudnn64_9.dll`, `cudnn_ops_infer64_8.dll`, `nvinfer_10.dll`...; compared case-insensitively), the machine's loader
folders (System32, the Windows folder), the driver (nvcuda.dll's version resource; NVML only in a subprocess), every
copy of every DLL that matters (the NVIDIA wheels' `nvidia\\<lib>\\bin` and `nvidia\\cu13\\bin\\x86_64`,
TensorRT's `tensorrt_libs`, `torch\\lib`, `%CUDA_PATH%\\bin`, conda's `Library\\bin`, System32, every PATH folder,
now and at the next login), ortfix's PATH hook and conda scripts (hooks.py), and the simulated process (loader.py,
set up from the probe: the exe's folder, System32 and the Windows folder, the current folder, PATH as the target
process has it, conda's default-dirs mode, the Store Python), put together behind `system/platform.Platform`; what
later stages ask about libraries and hooks is libraries.py's."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from types import MappingProxyType

from ortfix import subproc
from ortfix.compat.addons import TENSORRT_WHEEL_DIR
from ortfix.compat.matrix import Matrix
from ortfix.compat.model import WheelSpec
from ortfix.i18n import N_, Msg
from ortfix.system.driver import DriverFacts, Gpu, nvml_query_script, parse_nvidia_smi_csv
from ortfix.system.inventory import (
    ORIGIN_CONDA,
    ORIGIN_CUDA_HOME,
    ORIGIN_TORCH,
    ORIGIN_WHEEL,
    LibCopy,
)
from ortfix.system.loader import LoadReport
from ortfix.system.pathrules import within, within_resolved
from ortfix.system.platform import HookFile, InstalledHooks, MachineLoader
from ortfix.system.platform_protocols import LibraryReader, SimulatedProcess
from ortfix.system.windows import libraries
from ortfix.system.windows.hooks import (
    conda_windows_hook_paths,
    path_hook_paths,
    read_conda_windows_hook,
    read_path_hook,
)
from ortfix.system.windows.libraries import FAMILIES, dll_name_for_soname, wheel_dlls
from ortfix.system.windows.loader import WindowsLoader, WindowsLoaderConfig
from ortfix.system.windows.pe import PeError, PeInfo, PeReader
from ortfix.target.probe import ProbeFacts

DRIVER_LIBRARIES = ("nvcuda.dll", "nvml.dll", "nvcudart_hybrid64.dll")  # installed by the driver, never a wheel
PROVIDER_LIBRARIES: Mapping[str, str] = MappingProxyType(
    {"cuda": "onnxruntime_providers_cuda.dll", "tensorrt": "onnxruntime_providers_tensorrt.dll"})
ORIGIN_SYSTEM = "System32"
ORIGIN_PATH = "PATH"
ORIGIN_LOGIN_PATH = "PATH at login"

# <family>[64]_<version>[_<n>].dll; the families as the Linux inventory spells them (libraries.FAMILIES).
_FAMILIES = FAMILIES
_BY_LOWER = {f.lower(): f for f in _FAMILIES}
_DLL = re.compile(r"^(?P<family>[a-z_-]+?)(?:64)?_(?P<version>\d+)(?:_(?P<patch>\d+))?\.dll$", re.IGNORECASE)
# Families whose three-digit number is major and minor (cudart64_110.dll is CUDA 11.0; nvrtc64_120_0.dll 12.0).
_MAJOR_MINOR = ("cudart", "nvrtc", "nvrtc-builtins", "nvJitLink")
# Whose major names the CUDA major (cuFFT is one ahead: cufft64_11.dll ships with CUDA 12).
_CUDA_MAJOR_BY_NAME = {"cudart": 0, "cublas": 0, "cublasLt": 0, "nvrtc": 0, "nvJitLink": 0, "nvblas": 0, "cufft": 1,
                       "cufftw": 1}


def parse_dll_name(name: str) -> tuple[str, tuple[int, ...]] | None:
    """(family, version numbers) of a CUDA/cuDNN/TensorRT DLL's file name, case-insensitively; None for another."""
    m = _DLL.match(name)
    if not m:
        return None
    raw = m.group("family").lower()
    family = _BY_LOWER.get(raw) or (raw if raw == "cudnn" or raw.startswith("cudnn_") else None)
    if family is None:
        return None
    digits = m.group("version")
    if family in _MAJOR_MINOR and len(digits) >= 3:
        version: tuple[int, ...] = (int(digits[:-1]), int(digits[-1]))
    else:
        version = (int(digits),)
    return family, version


def cuda_major_by_dll_name(name: str) -> int | None:
    """The CUDA major a DLL's name alone says (cudart64_12.dll → 12, cufft64_11.dll → 12), else None."""
    parsed = parse_dll_name(name)
    if not parsed or parsed[0] not in _CUDA_MAJOR_BY_NAME:
        return None
    return parsed[1][0] + _CUDA_MAJOR_BY_NAME[parsed[0]]


def driver_version_from_file_version(version: tuple[int, ...] | None) -> str | None:
    """The driver version a Windows driver file's FileVersion encodes: its last five digits (32.0.15.6094 → 560.94)."""
    if not version or len(version) < 4:
        return None
    digits = f"{version[2] % 10}{version[3]:04d}"
    return f"{int(digits[:3])}.{digits[3:]}"


def split_path(value: str | None) -> tuple[str, ...]:
    """The entries of a Windows PATH value (empty ones dropped, surrounding quotes removed)."""
    return tuple(e.strip().strip('"') for e in (value or "").split(";") if e.strip().strip('"'))


@dataclass(frozen=True)
class _ScanDir:
    path: str
    origin: str


class WindowsPlatform:
    """Windows (see the module docstring); satisfies platform.Platform."""

    system = "Windows"
    is_windows = True
    sys_platform = "win32"
    os_name = "nt"
    matrix_os = "windows"
    driver_looked_at: tuple[str, ...] = ()
    no_driver_advice = N_("install the NVIDIA driver; to prepare an environment for another machine, use "
                          "`ortfix plan --driver VERSION`")
    provider_libraries = PROVIDER_LIBRARIES
    driver_libraries = DRIVER_LIBRARIES
    providers_shared_library = "onnxruntime_providers_shared.dll"
    search_path_variable = "PATH"
    search_path_separator = ";"
    preload_variable: str | None = None
    activation_note = N_("PATH simulated with the folders of ortfix's installed hook first (the PATH hook adds them "
                         "when onnxruntime is imported; conda's activate.d scripts on `conda activate`)")
    read_errors: tuple[type[Exception], ...] = (PeError,)

    library_names_are_sonames = False
    shadow_vias = libraries.SHADOW_VIAS
    versions_identify_copies = True
    findable_advice = libraries.FINDABLE_ADVICE
    shadow_advice = libraries.SHADOW_ADVICE

    def search_summary(self, search_path: str | None, index_source: str, default_dirs: Sequence[str]) -> Msg:
        return libraries.search_summary(search_path, default_dirs)

    def no_hook_advice(self, paths: Sequence[str]) -> str:
        return libraries.no_hook_advice(paths)

    hook_kinds = ("conda", "preload", "user-path")

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
        return libraries.with_nvrtc(hook_libs, copies, cuda_major)

    def new_reader(self) -> PeReader:
        return PeReader()

    def library_key(self, name: str) -> str:
        return name.lower()

    def library_name(self, soname: str) -> str | None:
        return dll_name_for_soname(soname)

    def wheel_libraries(self, wheel: WheelSpec) -> tuple[str, ...]:
        return wheel_dlls(wheel)

    def parse_library_name(self, name: str) -> tuple[str, tuple[int, ...]] | None:
        return parse_dll_name(name)

    def inside(self, path: str, prefix: str) -> bool:
        return within_resolved(path, prefix, windows=True)

    def library_major(self, name: str) -> int | None:
        parsed = parse_dll_name(name)
        return parsed[1][0] if parsed else None

    # -- the machine ---------------------------------------------------------------------------------------------
    @cached_property
    def _system_dirs(self) -> tuple[str, str]:
        root = os.environ.get("SYSTEMROOT") or os.environ.get("WINDIR") or "C:\\Windows"
        return os.path.join(root, "System32"), root

    def machine_loader(self) -> MachineLoader:
        return MachineLoader(index_source="KnownDLLs", default_dirs=self._system_dirs)

    def detect_driver(self) -> DriverFacts:
        return detect_windows_driver(self._system_dirs[0])

    def scan_libraries(self, probe: ProbeFacts, reader: LibraryReader, matrix: Matrix) -> list[LibCopy]:
        return scan_dlls(probe, reader, matrix)

    # -- the target's processes ----------------------------------------------------------------------------------
    def installed_hooks(self, probe: ProbeFacts) -> InstalledHooks:
        conda = read_conda_windows_hook(probe.prefix) if probe.env_kind == "conda" else None
        path_hook = read_path_hook(probe.purelib)
        prepend = tuple(dict.fromkeys((*(conda or ()), *(path_hook or ()))))
        paths = (*path_hook_paths(probe.purelib), *conda_windows_hook_paths(probe.prefix))
        return InstalledHooks(search_prepend=prepend, preloaded=(),
                              files_present=tuple(str(p) for p in paths if os.path.lexists(p)))

    def loader_config(self, probe: ProbeFacts, search_path: str | None) -> WindowsLoaderConfig:
        """What decides the DLL search in a process of the target with PATH=`search_path`."""
        win = probe.windows
        system_dirs = (win.system_dir, win.windows_dir) if win else self._system_dirs
        exe_dir = win.exe_dir if win else os.path.dirname(probe.executable)
        return WindowsLoaderConfig(
            exe_dir=exe_dir, system_dirs=system_dirs, cwd=probe.cwd, path=split_path(search_path),
            default_dirs_mode=bool(win and win.conda_dll_search_modification),
            packaged=bool(win and win.packaged))

    def new_process(self, probe: ProbeFacts, search_path: str | None, reader: LibraryReader) -> WindowsLoader:
        if not isinstance(reader, PeReader):
            raise TypeError(f"the Windows platform reads PE files with a PeReader, not "  # i18n: english (a bug)
                            f"{type(reader).__name__}")
        return WindowsLoader(self.loader_config(probe, search_path), reader)

    def start_interpreter(self, process: SimulatedProcess, probe: ProbeFacts) -> str | None:
        # An interpreter we cannot read: the DLLs it maps do not change where ORT's are found.
        with contextlib.suppress(PeError, OSError):
            process.start_process(probe.windows.process_exe if probe.windows and probe.windows.process_exe
                                  else probe.real_executable)
        return None

    def load_extension(self, process: SimulatedProcess, path: str, caller: str | None) -> LoadReport:
        if isinstance(process, WindowsLoader):
            return process.load_extension(path, caller)
        return process.dlopen(path, caller)

    def unreadable_dirs(self, search_path: str | None, cwd: str) -> list[str]:
        return []


# -- the library copies ----------------------------------------------------------------------------------------
def candidate_dirs(probe: ProbeFacts) -> list[_ScanDir]:
    """The folders to scan, the environment's first (folders are compared case-insensitively)."""
    dirs: list[_ScanDir] = []
    for sp in dict.fromkeys((*probe.site_packages, probe.purelib, probe.platlib,
                             *([probe.user_site] if probe.user_site else []))):
        nvidia = os.path.join(sp, "nvidia")
        try:
            subs = sorted(os.listdir(nvidia))
        except OSError:
            continue
        for sub in subs:
            dirs.append(_ScanDir(os.path.join(nvidia, sub, "bin"), ORIGIN_WHEEL))
            dirs.append(_ScanDir(os.path.join(nvidia, sub, "bin", "x86_64"), ORIGIN_WHEEL))  # CUDA 13's cu13
    for sp in dict.fromkeys((*probe.site_packages, probe.purelib, probe.platlib)):
        # tensorrt-cuNN-libs' DLLs: in its package folder, as on Linux (no bin folder; package_data "*.dll*")
        dirs.append(_ScanDir(os.path.join(sp, TENSORRT_WHEEL_DIR), ORIGIN_WHEEL))
    if probe.torch:
        dirs.append(_ScanDir(probe.torch.lib_dir, ORIGIN_TORCH))
    if probe.env_kind == "conda":
        dirs.append(_ScanDir(os.path.join(probe.prefix, "Library", "bin"), ORIGIN_CONDA))
    cuda_path = probe.environ.get("CUDA_PATH")
    if cuda_path:
        dirs.append(_ScanDir(os.path.join(cuda_path, "bin"), ORIGIN_CUDA_HOME))
    win = probe.windows
    if win:
        dirs.append(_ScanDir(win.system_dir, ORIGIN_SYSTEM))
    dirs += [_ScanDir(d, ORIGIN_PATH) for d in split_path(probe.environ.get("PATH"))]
    if win:
        dirs += [_ScanDir(d, ORIGIN_LOGIN_PATH) for d in win.login_path]
    seen: set[str] = set()
    out = []
    for d in dirs:
        key = os.path.normcase(os.path.normpath(d.path))
        if key in seen or not os.path.isdir(d.path):
            continue
        seen.add(key)
        out.append(d)
    return out


def _wheel_majors(probe: ProbeFacts, matrix: Matrix) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for dist in probe.distributions:
        for major, wheel in matrix.nvidia_wheels:
            if dist.normalized == wheel.distribution and wheel.windows_dir:
                key = os.path.normcase(os.path.normpath(os.path.join(dist.location, *wheel.windows_dir.split("/"))))
                out.setdefault(key, set()).add(major)
    return out


def scan_dlls(probe: ProbeFacts, reader: LibraryReader, matrix: Matrix) -> list[LibCopy]:
    """Every copy of every CUDA/cuDNN/TensorRT DLL (and zlibwapi.dll) in the folders of `candidate_dirs`."""
    prefix = os.path.realpath(probe.prefix)
    majors = _wheel_majors(probe, matrix)
    out: list[LibCopy] = []
    for d in candidate_dirs(probe):
        try:
            names = sorted(os.listdir(d.path))
        except OSError:
            continue
        inside = within(os.path.realpath(d.path), prefix, windows=True)
        folder_majors = majors.get(os.path.normcase(os.path.normpath(d.path)), set())
        for name in names:
            parsed = parse_dll_name(name)
            if parsed is None and name.lower() != "zlibwapi.dll":
                continue
            path = os.path.join(d.path, name)
            if not os.path.isfile(path):
                continue
            family, version = parsed if parsed else ("zlibwapi", ())
            cuda_major = cuda_major_by_dll_name(name)
            if cuda_major is None and len(folder_majors) == 1:
                cuda_major = next(iter(folder_majors))
            out.append(LibCopy(path=path, family=family, soname=name, major=version[0] if version else None,
                               version=_file_version(path, reader), origin=d.origin, inside_env=inside,
                               cuda_major=cuda_major))
    return out


def _file_version(path: str, reader: LibraryReader) -> str | None:
    try:
        info = reader.read(path)
    except (PeError, OSError):
        return None
    if isinstance(info, PeInfo) and info.file_version:
        return ".".join(map(str, info.file_version))
    return None


# -- the driver ----------------------------------------------------------------------------------------------
def detect_windows_driver(system_dir: str, *, query_gpus: bool = True) -> DriverFacts:
    """The driver from nvcuda.dll in System32 (its FileVersion encodes the driver version), the GPUs from NVML in a
    subprocess (loading a driver DLL may crash: never in ortfix's process), else from nvidia-smi.exe."""
    nvcuda = os.path.join(system_dir, "nvcuda.dll")
    smi = shutil.which("nvidia-smi")
    if not os.path.isfile(nvcuda) and smi is None:
        return DriverFacts(present=False, version=None,
                           source=f"no nvcuda.dll in {system_dir}, no nvidia-smi.exe on PATH")  # i18n: english (a fact)
    version = None
    if os.path.isfile(nvcuda):
        try:
            version = driver_version_from_file_version(PeReader().read(nvcuda).file_version)
        except (PeError, OSError):
            version = None
    gpus: tuple[Gpu, ...] = ()
    notes: list[str] = []
    cuda = None
    if query_gpus:
        queried = _query_nvml()
        if queried is not None:
            gpus, cuda, driver, error = queried
            version = version or driver
            if error:
                notes.append(error)
        if not gpus and smi is not None:
            run = subproc.run([smi, "--query-gpu=index,name,compute_cap,driver_version", "--format=csv,noheader"],
                              target_python=None, timeout=30)
            if run.returncode == 0:
                driver, gpus = parse_nvidia_smi_csv(run.stdout)
                version = version or driver
    return DriverFacts(present=True, version=version, userspace=version, libcuda=nvcuda if os.path.isfile(nvcuda)
                       else None, cuda_version=cuda, gpus=gpus,
                       source=nvcuda if os.path.isfile(nvcuda) else str(smi), notes=tuple(notes))


_NVML_QUERY = nvml_query_script('ctypes.WinDLL("nvml.dll")', r"""    out["error"] = "NVML: %s" % exc
""")


def _query_nvml() -> tuple[tuple[Gpu, ...], str | None, str | None, str | None] | None:
    try:
        proc = subproc.run([sys.executable, "-I", "-c", _NVML_QUERY], target_python=None, timeout=30)
    except OSError:
        return None
    if proc.returncode != 0:
        return (), None, None, f"GPU query process exited with {proc.returncode} (driver library crashed?)"
    try:
        doc = json.loads(proc.stdout)
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    gpus = []
    for g in _objects(doc.get("gpus")):
        index, cc = g.get("index"), g.get("cc")
        if isinstance(index, int):
            gpus.append(Gpu(index=index, name=str(g.get("name")),
                            compute_capability=cc if isinstance(cc, str) else None))
    text = {k: doc[k] if isinstance(doc.get(k), str) else None for k in ("cuda", "driver", "error")}
    return tuple(gpus), text["cuda"], text["driver"], text["error"]


def _objects(value: object) -> Iterable[dict[str, object]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []
