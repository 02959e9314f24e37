"""The driver and the GPU against the build `import onnxruntime` gets (DRV001-DRV003, GPU001): no driver, a reboot
pending after a driver upgrade, a driver too old for the build's CUDA major, and a GPU older than the build runs on
(or one it runs on only through PTX JIT)."""

from __future__ import annotations

from ortfix.check.codes import FindingCode, Severity
from ortfix.check.facts import Facts, OrtInstall
from ortfix.check.findings import Finding
from ortfix.compat.matrix import Matrix
from ortfix.compat.versions import Version
from ortfix.i18n import N_, Msg
from ortfix.system.driver import GIVEN_GPU


def driver_findings(facts: Facts, matrix: Matrix, gpu: OrtInstall | None) -> list[Finding]:
    out: list[Finding] = []
    driver = facts.driver
    if not driver.present:
        out.append(Finding(
            FindingCode.NO_DRIVER, Severity.ERROR, N_("no NVIDIA driver found: CUDA cannot run on this machine"),
            (driver.source, *facts.platform.driver_looked_at), facts.platform.no_driver_advice,
            {}))
        return out
    if driver.reboot_needed:
        out.append(Finding(
            FindingCode.REBOOT_NEEDED, Severity.ERROR,
            Msg(N_("the loaded kernel module is {kernel} but the driver libraries are {userspace}: the driver was "
                   "upgraded without a reboot"), kernel=str(driver.kernel_module), userspace=str(driver.userspace)),
            (Msg(N_("kernel module: {kernel} ({source})"), kernel=str(driver.kernel_module), source=driver.source),
             Msg(N_("user-space: {library}"), library=str(driver.libcuda))),
            N_("reboot (or reload the nvidia kernel modules)"), {}))
    os_name = facts.platform.matrix_os
    if gpu is not None and gpu.cuda_major is not None and driver.version:
        ok = matrix.driver_supports_major(driver.version, gpu.cuda_major, os_name)
        cuda = matrix.cuda_major(gpu.cuda_major)
        if ok is False and cuda is not None:
            highest = matrix.highest_cuda_for_driver(driver.version, os_name)
            out.append(Finding(
                FindingCode.DRIVER_TOO_OLD, Severity.ERROR,
                Msg(N_("driver {driver} is too old for CUDA {cuda}, which {package} {version} is built with (needs "
                       ">= {minimum})"), driver=driver.version, cuda=gpu.cuda_major, package=str(gpu.package),
                    version=str(gpu.version), minimum=str(cuda.driver_min.get(os_name))),
                (Msg(N_("driver {driver} supports CUDA up to {highest}"), driver=driver.version,
                     highest=str(highest) if highest else Msg(N_("unknown"))),
                 Msg(N_("{package} {version}: CUDA {cuda} ({source})"), package=str(gpu.package),
                     version=str(gpu.version), cuda=gpu.cuda_major, source=cuda.source)),
                Msg(N_("upgrade the driver to >= {minimum}, or use an ONNX Runtime build for CUDA {major}"),
                    minimum=str(cuda.driver_min.get(os_name)),
                    major=highest.major if highest else Msg(N_("an older major"))),
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
                built = (Msg(N_("built for: {archs}"), archs=", ".join(archs)) if archs
                         else Msg(N_("CUDA {cuda} supports compute capability {floor} and newer"),
                                  cuda=str(gpu.cuda_major), floor=str(floor)))
                out.append(Finding(
                    FindingCode.GPU_ARCH, Severity.ERROR,
                    Msg(N_("GPU {index} ({name}, compute capability {cc}) is older than any architecture {package} "
                           "{version} can run on"), index=g.index, name=_gpu_name(g.name), cc=g.compute_capability,
                        package=str(gpu.package), version=str(gpu.version)),
                    (built,), N_("use an ONNX Runtime build for an older CUDA major"),
                    {"compute_capability": g.compute_capability}))
            elif archs and have.major not in {Version(a).major for a in archs}:
                out.append(Finding(
                    FindingCode.GPU_ARCH, Severity.WARNING,
                    Msg(N_("GPU {index} ({name}, compute capability {cc}) is not among the architectures {package} "
                           "{version} is built for; it relies on PTX JIT (slow first run)"), index=g.index,
                        name=_gpu_name(g.name), cc=g.compute_capability, package=str(gpu.package),
                        version=str(gpu.version)),
                    (Msg(N_("built for: {archs}"), archs=", ".join(archs)),),
                    N_("use a newer ONNX Runtime build if one covers this GPU"),
                    {"compute_capability": g.compute_capability}))
    return out


def _gpu_name(name: str) -> str | Msg:
    """A GPU's name; the one --compute-capability stands for in the user's language."""
    return Msg(GIVEN_GPU) if name == GIVEN_GPU else name
