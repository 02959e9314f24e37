"""The driver and the GPU against the build `import onnxruntime` gets (DRV001-DRV003, GPU001): no driver, a reboot
pending after a driver upgrade, a driver too old for the build's CUDA major, and a GPU older than the build runs on
(or one it runs on only through PTX JIT)."""

from __future__ import annotations

from packaging.version import Version

from ortfix.check.codes import FindingCode, Severity
from ortfix.check.facts import Facts, OrtInstall
from ortfix.check.findings import Finding
from ortfix.compat.matrix import Matrix


def driver_findings(facts: Facts, matrix: Matrix, gpu: OrtInstall | None) -> list[Finding]:
    out: list[Finding] = []
    driver = facts.driver
    if not driver.present:
        out.append(Finding(
            FindingCode.NO_DRIVER, Severity.ERROR, "no NVIDIA driver found: CUDA cannot run on this machine",
            (driver.source, *facts.platform.driver_looked_at), facts.platform.no_driver_advice,
            {}))
        return out
    if driver.reboot_needed:
        out.append(Finding(
            FindingCode.REBOOT_NEEDED, Severity.ERROR,
            f"the loaded kernel module is {driver.kernel_module} but the driver libraries are {driver.userspace}: "
            "the driver was upgraded without a reboot",
            (f"kernel module: {driver.kernel_module} ({driver.source})", f"user-space: {driver.libcuda}"),
            "reboot (or reload the nvidia kernel modules)", {}))
    os_name = facts.platform.matrix_os
    if gpu is not None and gpu.cuda_major is not None and driver.version:
        ok = matrix.driver_supports_major(driver.version, gpu.cuda_major, os_name)
        cuda = matrix.cuda_major(gpu.cuda_major)
        if ok is False and cuda is not None:
            highest = matrix.highest_cuda_for_driver(driver.version, os_name)
            out.append(Finding(
                FindingCode.DRIVER_TOO_OLD, Severity.ERROR,
                f"driver {driver.version} is too old for CUDA {gpu.cuda_major}, which {gpu.package} {gpu.version} "
                f"is built with (needs >= {cuda.driver_min.get(os_name)})",
                (f"driver {driver.version} supports CUDA up to {highest or 'unknown'}",
                 f"{gpu.package} {gpu.version}: CUDA {gpu.cuda_major} ({cuda.source})"),
                f"upgrade the driver to >= {cuda.driver_min.get(os_name)}, or use an ONNX Runtime build for "
                f"CUDA {highest.major if highest else 'an older major'}",
                {"cuda_major": gpu.cuda_major, "driver": driver.version}))
    if gpu is not None:
        archs = next((b.compute_capabilities for b in gpu.builds if b.compute_capabilities), ())
        cuda = matrix.cuda_major(gpu.cuda_major) if gpu.cuda_major is not None else None
        for g in driver.gpus:
            if not g.compute_capability:
                continue
            have = Version(g.compute_capability)
            floor = min((Version(a) for a in archs), default=Version(cuda.cc_min) if cuda else None)
            if floor is not None and have < floor:
                built = (f"built for: {', '.join(archs)}" if archs
                         else f"CUDA {gpu.cuda_major} supports compute capability {floor} and newer")
                out.append(Finding(
                    FindingCode.GPU_ARCH, Severity.ERROR,
                    f"GPU {g.index} ({g.name}, compute capability {g.compute_capability}) is older than any "
                    f"architecture {gpu.package} {gpu.version} can run on",
                    (built,), "use an ONNX Runtime build for an older CUDA major",
                    {"compute_capability": g.compute_capability}))
            elif archs and have.major not in {Version(a).major for a in archs}:
                out.append(Finding(
                    FindingCode.GPU_ARCH, Severity.WARNING,
                    f"GPU {g.index} ({g.name}, compute capability {g.compute_capability}) is not among the "
                    f"architectures {gpu.package} {gpu.version} is built for; it relies on PTX JIT (slow first run)",
                    (f"built for: {', '.join(archs)}",), "use a newer ONNX Runtime build if one covers this GPU",
                    {"compute_capability": g.compute_capability}))
    return out
