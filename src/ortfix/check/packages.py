"""Which ONNX Runtime packages are installed, and the findings about them (ORT001-ORT006): nothing installed, the
CPU package, both builds in one folder, other builds sharing the `onnxruntime` import package, a GPU build without
its CUDA provider, and installed packages that pull the CPU package back in. Also the package names themselves."""

from __future__ import annotations

from collections.abc import Iterable

from ortfix.check.codes import FindingCode, Severity
from ortfix.check.facts import Facts
from ortfix.check.findings import Finding
from ortfix.compat.versions import InvalidVersion, Version
from ortfix.i18n import N_, Msg
from ortfix.system.resolved import realpath
from ortfix.target.probe import Distribution

CPU_PACKAGE = "onnxruntime"
GPU_PACKAGE = "onnxruntime-gpu"
# Other builds that install the same `onnxruntime` import package and therefore fight over its files.
OTHER_VARIANTS = ("onnxruntime-directml", "onnxruntime-openvino", "onnxruntime-training", "onnxruntime-qnn",
                  "onnxruntime-silicon", "onnxruntime-rocm", "onnxruntime-migraphx", "onnxruntime-cann",
                  "onnxruntime-vitisai", "onnxruntime-training-gpu", "ort-nightly", "ort-nightly-gpu",
                  "ort-nightly-directml", "onnxruntime-gpu-cuda11", "onnxruntime-gpu-cuda12")


def builds_onnxruntime(dist: Distribution) -> bool:
    """A build that installs the `onnxruntime` import package (not onnxruntime-extensions, -genai...)."""
    return (dist.normalized in (CPU_PACKAGE, GPU_PACKAGE, *OTHER_VARIANTS)
            or any(path.startswith("onnxruntime/") for path, _, _ in dist.files))


def first_version(candidates: Iterable[str | None]) -> str | None:
    """The first candidate that is a valid version, as written; None when none is."""
    for candidate in candidates:
        if candidate:
            try:
                Version(candidate)
                return candidate
            except InvalidVersion:
                continue
    return None


def package_findings(facts: Facts) -> list[Finding]:
    out: list[Finding] = []
    # Only the builds in the folder `import onnxruntime` picks compete: in a --system-site-packages venv, the base's
    # onnxruntime behind the venv's own is shadowed, not installed "into the same folder".
    active = facts.active_ort
    dists = {d.normalized: d for d in facts.ort_distributions
             if active is None or realpath(d.location) == realpath(active.dir.location)}
    cpu = dists.get(CPU_PACKAGE)
    gpu = dists.get(GPU_PACKAGE)
    variants = [d for n, d in dists.items() if n in OTHER_VARIANTS]
    if not dists and not facts.ort:
        out.append(Finding(FindingCode.NO_ORT, Severity.ERROR, N_("ONNX Runtime is not installed in this environment"),
                           (f"python: {facts.probe.executable}",
                            Msg(N_("searched: {folders}"), folders=", ".join(facts.probe.sys_path))),
                           Msg(N_("install {package} with the NVIDIA libraries it needs"), package=GPU_PACKAGE),
                           {"action": "install"}))
        return out
    if cpu and not gpu:
        out.append(Finding(
            FindingCode.CPU_ONLY, Severity.ERROR,
            Msg(N_("the CPU-only package {name} {version} is installed, not {gpu}: only CPUExecutionProvider (and "
                   "AzureExecutionProvider) exist"), name=cpu.name, version=cpu.version, gpu=GPU_PACKAGE),
            (Msg(N_("{name} {version} in {location}"), name=cpu.name, version=cpu.version, location=cpu.location),),
            Msg(N_("swap {name} for {gpu} of the matching version"), name=cpu.name, gpu=GPU_PACKAGE),
            {"remove": [cpu.name], "version": cpu.version}))
    if cpu and gpu:
        install = next((o for o in facts.ort if o.dir.location == cpu.location), None)
        winner = install.winner if install else None
        cpu_won = winner is not None and winner.lower() == cpu.name.lower()
        out.append(Finding(
            FindingCode.CPU_AND_GPU, Severity.ERROR if cpu_won or winner is None else Severity.WARNING,
            Msg(N_("both {cpu} {cpu_version} and {gpu} {gpu_version} are installed into the same 'onnxruntime' "
                   "folder; {which}"), cpu=cpu.name, cpu_version=cpu.version, gpu=gpu.name, gpu_version=gpu.version,
                which=Msg(N_("{name}'s files overwrote the GPU build"), name=cpu.name) if cpu_won else
                Msg(N_("{name}'s extension module is the one on disk, and uninstalling the other would delete files "
                       "both share"), name=winner) if winner else
                Msg(N_("the extension module on disk matches neither RECORD"))),
            (f"{cpu.name} {cpu.version}: {cpu.dist_info}", f"{gpu.name} {gpu.version}: {gpu.dist_info}",
             Msg(N_("extension module owned by: {owner}"), owner=winner or Msg(N_("unknown")))),
            Msg(N_("uninstall both, then reinstall {package} {version} alone"), package=GPU_PACKAGE,
                version=gpu.version),
            {"remove": [cpu.name, gpu.name], "version": gpu.version, "reinstall": True}))
    if variants:
        names = ", ".join(f"{d.name} {d.version}" for d in variants)
        out.append(Finding(
            FindingCode.VARIANT_CONFLICT, Severity.ERROR if not gpu else Severity.WARNING,
            Msg(N_("other ONNX Runtime builds share the 'onnxruntime' import package: {names}"), names=names),
            tuple(f"{d.name} {d.version}: {d.dist_info}" for d in variants),
            N_("uninstall them: only one ONNX Runtime build can own the 'onnxruntime' folder"),
            {"remove": [d.name for d in variants]}))
    if gpu and not any(i.providers for i in facts.ort):
        out.append(Finding(
            FindingCode.PROVIDER_MISSING, Severity.ERROR,
            Msg(N_("{name} {version} is installed but onnxruntime/capi has no libonnxruntime_providers_cuda.so"),
                name=gpu.name, version=gpu.version),
            tuple(Msg(N_("{folder}: {files}"), folder=o.dir.capi,
                      files=", ".join(o.dir.files) or Msg(N_("no libraries"))) for o in facts.ort),
            Msg(N_("reinstall {package} {version}"), package=GPU_PACKAGE, version=gpu.version),
            {"remove": [gpu.name], "version": gpu.version, "reinstall": True}))
    pulls = [(d, reqs) for d in facts.probe.dependents
             if (reqs := [r for r in d.requires if _names_cpu_package(r, facts)])]
    if pulls and (gpu or cpu):
        out.append(Finding(
            FindingCode.DEPENDENT_PULLS_CPU, Severity.WARNING,
            Msg(N_("{n} installed package(s) depend on the CPU package '{cpu}' and will pull it back in on the next "
                   "install or upgrade, overwriting the GPU build"), n=len(pulls), cpu=CPU_PACKAGE),
            tuple(Msg(N_("{name} {version} requires {requirements}"), name=d.name, version=d.version,
                      requirements="; ".join(reqs)) for d, reqs in pulls),
            Msg(N_("after upgrading them run `ortfix check` again; pin with a constraints file or install them with "
                   "--no-deps next to {package}"), package=GPU_PACKAGE),
            {"packages": [d.name for d, _reqs in pulls]}))
    return out



def _names_cpu_package(requirement: str, facts: Facts) -> bool:
    """Whether the requirement asks for the CPU package on this interpreter (its marker, if any, applies here; a
    requirement of an extra applies only when that extra is asked for, which nothing here says)."""
    if not requirement.lstrip().lower().startswith(CPU_PACKAGE):
        return False
    # Deferred: packaging.requirements costs 15 ms of `ortfix check`, paid only when a dependent names onnxruntime.
    from packaging.requirements import InvalidRequirement, Requirement

    from ortfix.check.requires import applies, marker_environment

    try:
        req = Requirement(requirement)
    except InvalidRequirement:
        return False
    if req.name.lower().replace("_", "-") != CPU_PACKAGE:
        return False
    return applies(req, marker_environment(facts))  # a marker ortfix cannot judge counts: said, not hidden
