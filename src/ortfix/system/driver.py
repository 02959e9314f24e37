"""The NVIDIA driver and GPUs as ortfix sees them on any OS (`DriverFacts`, `Gpu`), `--driver` and
`--compute-capability` put in their place, and what both OSes read them with: nvidia-smi's CSV and the NVML child
script. Each OS detects its driver in its own folder (system/linux/driver.py, system/windows/platform.py)."""

from __future__ import annotations

import json
import re

from ortfix.i18n import N_
from ortfix.record import field, frozen

GIVEN_GPU = N_("(given with --compute-capability)")  # the name of the GPU --compute-capability stands for


@frozen
class Gpu:
    index: int
    name: str
    compute_capability: str | None


@frozen
class DriverFacts:
    present: bool
    version: str | None  # the version that counts for compatibility (user-space library, else kernel module)
    kernel_module: str | None = None
    userspace: str | None = None
    libcuda: str | None = None
    cuda_version: str | None = None  # highest CUDA the driver reports (cuDriverGetVersion / NVML)
    gpus: tuple[Gpu, ...] = ()
    source: str = ""
    overridden: bool = False
    notes: tuple[str, ...] = field(default=())

    @property
    def reboot_needed(self) -> bool:
        return bool(self.kernel_module and self.userspace and self.kernel_module != self.userspace)


def parse_nvidia_smi_csv(text: str) -> tuple[str | None, tuple[Gpu, ...]]:
    """Output of `nvidia-smi --query-gpu=index,name,compute_cap,driver_version --format=csv,noheader`."""
    gpus = []
    driver = None
    for line in text.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 4 or not parts[0].isdigit():
            continue
        cc = parts[2] if re.match(r"^\d+\.\d+$", parts[2]) else None
        gpus.append(Gpu(index=int(parts[0]), name=parts[1], compute_capability=cc))
        driver = parts[3]
    return driver, tuple(gpus)


def overridden_driver(version: str | None, compute_capability: str | None, base: DriverFacts) -> DriverFacts:
    """`--driver` / `--compute-capability`: plan for another machine (a CPU build host preparing a GPU deployment)."""
    gpus = base.gpus
    if compute_capability:
        gpus = (Gpu(index=0, name=GIVEN_GPU, compute_capability=compute_capability),)
    return DriverFacts(
        present=True if version else base.present,
        version=version or base.version,
        kernel_module=None if version else base.kernel_module,
        userspace=version or base.userspace,
        libcuda=base.libcuda,
        cuda_version=None if version else base.cuda_version,
        gpus=gpus,
        source="--driver" if version else base.source,
        overridden=True,
        notes=base.notes,
    )


# The child script that asks NVML (loaded by @LOAD@) for the driver version, the highest CUDA and the GPUs;
# @ON_ERROR@ runs when NVML cannot answer. It runs in a child interpreter: loading NVML or libcuda can crash or hang on
# a broken driver install.
_NVML_QUERY = r"""
import ctypes, json
out = {"gpus": []}
try:
    nvml = @LOAD@
    if nvml.nvmlInit_v2() != 0:
        raise OSError("nvmlInit failed")
    buf = ctypes.create_string_buffer(96)
    if nvml.nvmlSystemGetDriverVersion(buf, 96) == 0:
        out["driver"] = buf.value.decode()
    v = ctypes.c_int()
    if nvml.nvmlSystemGetCudaDriverVersion_v2(ctypes.byref(v)) == 0:
        out["cuda"] = "%d.%d" % (v.value // 1000, (v.value % 1000) // 10)
    n = ctypes.c_uint()
    nvml.nvmlDeviceGetCount_v2(ctypes.byref(n))
    for i in range(n.value):
        h = ctypes.c_void_p()
        if nvml.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(h)) != 0:
            continue
        name = ctypes.create_string_buffer(96)
        nvml.nvmlDeviceGetName(h, name, 96)
        ma, mi = ctypes.c_int(), ctypes.c_int()
        cc = None
        if nvml.nvmlDeviceGetCudaComputeCapability(h, ctypes.byref(ma), ctypes.byref(mi)) == 0:
            cc = "%d.%d" % (ma.value, mi.value)
        out["gpus"].append({"index": i, "name": name.value.decode(), "cc": cc})
except (OSError, AttributeError) as exc:
@ON_ERROR@print(json.dumps(out))
"""


def nvml_query_script(load: str, on_error: str) -> str:
    """The NVML child script, NVML loaded by the expression `load`; `on_error`: the except branch's body, indented."""
    return _NVML_QUERY.replace("@LOAD@", load).replace("@ON_ERROR@", on_error)


@frozen
class GpuQuery:
    gpus: tuple[Gpu, ...]
    cuda: str | None = None
    driver: str | None = None
    error: str | None = None


def parse_gpu_query(text: str) -> GpuQuery | None:
    """The GPU query child's JSON (NVML's answers, else libcuda's), or None when it is not that document."""
    try:
        doc = json.loads(text)
        gpus = tuple(Gpu(index=int(g["index"]), name=str(g["name"]), compute_capability=g.get("cc"))
                     for g in doc.get("gpus", []))
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return None
    return GpuQuery(gpus=gpus, cuda=doc.get("cuda"), driver=doc.get("driver"), error=doc.get("error"))
