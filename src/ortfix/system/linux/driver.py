"""The NVIDIA driver and GPUs on Linux, read the cheap way first (the types: system/driver.py).

Order: the kernel module's version (`/sys/module/nvidia/version`, `/proc/driver/nvidia/version`), the user-space
`libcuda.so.1` (its file name carries the version; WSL keeps it in /usr/lib/wsl/lib), then NVML or libcuda through
ctypes in a subprocess (loading a driver library may crash; it never happens in ortfix's own process), and
`nvidia-smi` only as a last resort: it is slow and often absent in containers. A kernel module whose version differs
from the user-space library means the driver was upgraded without a reboot, not that there is no GPU.
"""

from __future__ import annotations

import os
import re
import sys
from functools import cache

from ortfix.i18n import N_
from ortfix.system.driver import DriverFacts, Gpu, GpuQuery, nvml_query_script, parse_gpu_query, parse_nvidia_smi_csv
from ortfix.system.host import HOST
from ortfix.system.linux.ldcache import LdCache
from ortfix.system.pathform import form


@cache
def _nvrm() -> re.Pattern[str]:
    return re.compile(r"Kernel Module(?:\s+for\s+\S+)?\s+(\d+\.\d+(?:\.\d+)?)")


@cache
def _libcuda_versioned() -> re.Pattern[str]:
    return re.compile(r"^libcuda\.so\.(\d+\.\d+(?:\.\d+)?)$")


WSL_LIB_DIR = "/usr/lib/wsl/lib"


def parse_proc_version(text: str) -> str | None:
    """The driver version in /proc/driver/nvidia/version ('NVRM version: NVIDIA UNIX x86_64 Kernel Module  535...')."""
    m = _nvrm().search(text)
    return m.group(1) if m else None


def _under(root: str, path: str) -> str:
    """str(Path(root) / path) for a `path` relative to `root`."""
    return form(os.path.join(root, path))


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            return file.read()
    except OSError:
        return None


def find_libcuda(cache: LdCache, root: str | os.PathLike[str] = "/") -> str | None:
    root = form(root)
    candidates = []
    cached = cache.lookup("libcuda.so.1")
    if cached:
        candidates.append(cached)
    candidates.append(_under(root, WSL_LIB_DIR.lstrip("/") + "/libcuda.so.1"))
    for c in candidates:
        if os.path.exists(c):
            return c
    return None


def userspace_version(libcuda: str) -> str | None:
    m = _libcuda_versioned().match(os.path.basename(os.path.realpath(libcuda)))
    return m.group(1) if m else None


def detect_driver(cache: LdCache, *, root: str | os.PathLike[str] = "/", query_gpus: bool = True) -> DriverFacts:
    root = form(root)
    notes: list[str] = []
    kernel = (_read(_under(root, "sys/module/nvidia/version")) or "").strip() or None
    source = "/sys/module/nvidia/version" if kernel else ""
    if kernel is None:
        proc_text = _read(_under(root, "proc/driver/nvidia/version"))
        if proc_text:
            kernel = parse_proc_version(proc_text)
            source = "/proc/driver/nvidia/version"
    libcuda = find_libcuda(cache, root)
    userspace = userspace_version(libcuda) if libcuda else None
    if libcuda and not source:
        source = libcuda
    if kernel is None and libcuda is None:
        return DriverFacts(present=False, version=None, source=N_("no nvidia kernel module, no libcuda.so.1"))
    gpus: tuple[Gpu, ...] = ()
    cuda_version = None
    if query_gpus and libcuda and root == "/":
        queried = query_gpu_subprocess()
        if queried is not None:
            gpus = queried.gpus
            cuda_version = queried.cuda
            userspace = userspace or queried.driver
            if queried.error:
                notes.append(queried.error)
        elif HOST.which("nvidia-smi"):
            from ortfix import subproc

            smi = subproc.run(["nvidia-smi", "--query-gpu=index,name,compute_cap,driver_version",
                               "--format=csv,noheader"], target_python=None, timeout=30)
            if smi.returncode == 0:
                driver, gpus = parse_nvidia_smi_csv(smi.stdout)
                userspace = userspace or driver
                source += " + nvidia-smi"
    if libcuda and kernel is None:
        notes.append(N_("libcuda.so.1 is present but the nvidia kernel module is not loaded (a container without the "
                        "GPU passed through, or the module failed to load)"))
    return DriverFacts(
        present=kernel is not None or (libcuda is not None and os.path.isdir(_under(root, WSL_LIB_DIR.lstrip("/")))),
        version=userspace or kernel,
        kernel_module=kernel,
        userspace=userspace,
        libcuda=libcuda,
        cuda_version=cuda_version,
        gpus=gpus,
        source=source,
        notes=tuple(notes),
    )


_GPU_QUERY = nvml_query_script('ctypes.CDLL("libnvidia-ml.so.1")', r"""    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        rc = cuda.cuInit(0)
        v = ctypes.c_int()
        if cuda.cuDriverGetVersion(ctypes.byref(v)) == 0:
            out["cuda"] = "%d.%d" % (v.value // 1000, (v.value % 1000) // 10)
        n = ctypes.c_int()
        if rc == 0 and cuda.cuDeviceGetCount(ctypes.byref(n)) == 0:
            for i in range(n.value):
                d = ctypes.c_int()
                cuda.cuDeviceGet(ctypes.byref(d), i)
                ma, mi = ctypes.c_int(), ctypes.c_int()
                cuda.cuDeviceGetAttribute(ctypes.byref(ma), 75, d)
                cuda.cuDeviceGetAttribute(ctypes.byref(mi), 76, d)
                name = ctypes.create_string_buffer(96)
                cuda.cuDeviceGetName(name, 96, d)
                out["gpus"].append({"index": i, "name": name.value.decode(), "cc": "%d.%d" % (ma.value, mi.value)})
        elif rc != 0:
            out["error"] = "cuInit failed with CUDA error %d" % rc
    except OSError as exc2:
        out["error"] = str(exc2)
""")  # i18n: english (a program run in the target)


def query_gpu_subprocess() -> GpuQuery | None:
    from ortfix import subproc  # here, not at the top: a `check` that runs no child does not import `subprocess`

    try:
        proc = subproc.run([sys.executable, "-I", "-c", _GPU_QUERY], target_python=None, timeout=30)
    except Exception:
        return None
    if proc.returncode != 0:
        return GpuQuery(gpus=(), error=f"GPU query process exited with {proc.returncode} (driver library crashed?)")
    return parse_gpu_query(proc.stdout)
