"""Facts → findings. Each finding has a stable code, a severity, a one-line summary, the evidence, and the fix it
implies (as data the planner acts on, and as a sentence for people)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from packaging.version import InvalidVersion, Version

from ortfix.check.codes import FindingCode, Severity
from ortfix.check.facts import DRIVER_LIBRARIES, Facts, OrtInstall, ProviderLoad
from ortfix.compat.matrix import Matrix
from ortfix.system.inventory import LibCopy, parse_lib_name, soname_major
from ortfix.system.loader import VIA_CACHE, VIA_DEFAULT, VIA_LD_LIBRARY_PATH, VIA_LOADED
from ortfix.target.probe import Distribution

CPU_PACKAGE = "onnxruntime"
GPU_PACKAGE = "onnxruntime-gpu"
# Other builds that install the same `onnxruntime` import package and therefore fight over its files.
OTHER_VARIANTS = ("onnxruntime-directml", "onnxruntime-openvino", "onnxruntime-training", "onnxruntime-qnn",
                  "onnxruntime-silicon", "onnxruntime-rocm", "onnxruntime-migraphx", "onnxruntime-cann",
                  "onnxruntime-vitisai", "onnxruntime-training-gpu", "ort-nightly", "ort-nightly-gpu",
                  "ort-nightly-directml", "onnxruntime-gpu-cuda11", "onnxruntime-gpu-cuda12")






@dataclass(frozen=True)
class Finding:
    code: FindingCode
    severity: Severity
    summary: str
    evidence: tuple[str, ...]
    fix: str
    data: Mapping[str, Any] = field(default_factory=dict)  # what the planner needs, JSON-able




def diagnose(facts: Facts, matrix: Matrix) -> list[Finding]:
    findings: list[Finding] = []
    findings += _packages(facts)
    findings += _damaged(facts)
    findings += _orphaned(facts)
    gpu = gpu_install(facts)
    findings += _driver(facts, matrix, gpu)
    if gpu is not None:
        findings += _matrix_agreement(gpu)
        for provider in gpu.providers:
            if provider.provider == "cuda":
                findings += _libraries(facts, gpu, provider)
        findings += _torch(facts, gpu)
    findings += _soname_links(facts)
    findings += _unreadable(facts)
    findings += _interrupted(facts)
    findings.sort(key=lambda f: (f.severity.rank, f.code))
    return findings


def gpu_install(facts: Facts) -> OrtInstall | None:
    """The ORT folder `import onnxruntime` picks (the first on sys.path), if its build is a GPU one: what check
    judges, plan keeps or replaces, and verify checks."""
    active = facts.active_ort
    if active is not None and any(p.provider == "cuda" for p in active.providers) and active.package != CPU_PACKAGE:
        return active
    return None


def _packages(facts: Facts) -> list[Finding]:
    out: list[Finding] = []
    # Only the builds in the folder `import onnxruntime` picks compete: in a --system-site-packages venv, the base's
    # onnxruntime behind the venv's own is shadowed, not installed "into the same folder".
    active = facts.active_ort
    dists = {d.normalized: d for d in facts.ort_distributions
             if active is None or os.path.realpath(d.location) == os.path.realpath(active.dir.location)}
    cpu = dists.get(CPU_PACKAGE)
    gpu = dists.get(GPU_PACKAGE)
    variants = [d for n, d in dists.items() if n in OTHER_VARIANTS]
    if not dists and not facts.ort:
        out.append(Finding(FindingCode.NO_ORT, Severity.ERROR, "ONNX Runtime is not installed in this environment",
                           (f"python: {facts.probe.executable}", f"searched: {', '.join(facts.probe.sys_path)}"),
                           f"install {GPU_PACKAGE} with the NVIDIA libraries it needs", {"action": "install"}))
        return out
    if cpu and not gpu:
        out.append(Finding(
            FindingCode.CPU_ONLY, Severity.ERROR,
            f"the CPU-only package {cpu.name} {cpu.version} is installed, not {GPU_PACKAGE}: "
            "only CPUExecutionProvider (and AzureExecutionProvider) exist",
            (f"{cpu.name} {cpu.version} in {cpu.location}",),
            f"swap {cpu.name} for {GPU_PACKAGE} of the matching version",
            {"remove": [cpu.name], "version": cpu.version}))
    if cpu and gpu:
        install = next((o for o in facts.ort if o.dir.location == cpu.location), None)
        winner = install.winner if install else None
        cpu_won = winner is not None and winner.lower() == cpu.name.lower()
        out.append(Finding(
            FindingCode.CPU_AND_GPU, Severity.ERROR if cpu_won or winner is None else Severity.WARNING,
            f"both {cpu.name} {cpu.version} and {gpu.name} {gpu.version} are installed into the same "
            f"'onnxruntime' folder; " + (f"{cpu.name}'s files overwrote the GPU build" if cpu_won else
                                          f"{winner}'s extension module is the one on disk, and uninstalling the "
                                          "other would delete files both share" if winner else
                                          "the extension module on disk matches neither RECORD"),
            (f"{cpu.name} {cpu.version}: {cpu.dist_info}", f"{gpu.name} {gpu.version}: {gpu.dist_info}",
             f"extension module owned by: {winner or 'unknown'}"),
            f"uninstall both, then reinstall {GPU_PACKAGE} {gpu.version} alone",
            {"remove": [cpu.name, gpu.name], "version": gpu.version, "reinstall": True}))
    if variants:
        names = ", ".join(f"{d.name} {d.version}" for d in variants)
        out.append(Finding(
            FindingCode.VARIANT_CONFLICT, Severity.ERROR if not gpu else Severity.WARNING,
            f"other ONNX Runtime builds share the 'onnxruntime' import package: {names}",
            tuple(f"{d.name} {d.version}: {d.dist_info}" for d in variants),
            "uninstall them: only one ONNX Runtime build can own the 'onnxruntime' folder",
            {"remove": [d.name for d in variants]}))
    if gpu and not any(i.providers for i in facts.ort):
        out.append(Finding(
            FindingCode.PROVIDER_MISSING, Severity.ERROR,
            f"{gpu.name} {gpu.version} is installed but onnxruntime/capi has no libonnxruntime_providers_cuda.so",
            tuple(f"{o.dir.capi}: {', '.join(o.dir.files) or 'no libraries'}" for o in facts.ort),
            f"reinstall {GPU_PACKAGE} {gpu.version}",
            {"remove": [gpu.name], "version": gpu.version, "reinstall": True}))
    marker_env = _marker_environment(facts)
    pulls = [(d, reqs) for d in facts.probe.dependents
             if (reqs := [r for r in d.requires if _names_cpu_package(r, marker_env)])]
    if pulls and (gpu or cpu):
        out.append(Finding(
            FindingCode.DEPENDENT_PULLS_CPU, Severity.WARNING,
            f"{len(pulls)} installed package(s) depend on the CPU package '{CPU_PACKAGE}' and will pull it back in "
            "on the next install or upgrade, overwriting the GPU build",
            tuple(f"{d.name} {d.version} requires {'; '.join(reqs)}" for d, reqs in pulls),
            f"after upgrading them run `ortfix check` again; pin with a constraints file or install them with "
            f"--no-deps next to {GPU_PACKAGE}",
            {"packages": [d.name for d, _reqs in pulls]}))
    return out


# How many paths of a damaged distribution the evidence names.
_EVIDENCE_PATHS = 5
# Installers that always write RECORD: "" (no INSTALLER file: pip writes it just before RECORD), pip and uv. A
# .dist-info of theirs without a RECORD was cut short; any other installer may leave none on purpose, and so may
# the system's own folder (apt strips RECORD): those are left alone.
_RECORD_WRITERS = ("", "pip", "uv")
_SYSTEM_PACKAGES = "/usr/lib/"


def _builds_onnxruntime(dist: Distribution) -> bool:
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


def _damaged(facts: Facts) -> list[Finding]:
    """ORT and NVIDIA distributions whose files do not match their RECORD: missing, cut short, or no RECORD at all."""
    out: list[Finding] = []
    for dist in facts.probe.distributions:
        if dist.has_record is None:
            continue
        ort = _builds_onnxruntime(dist)
        if not ort and not dist.normalized.startswith("nvidia-"):
            continue
        code = FindingCode.ORT_DAMAGED if ort else FindingCode.LIB_DAMAGED
        version = dist.installed_version
        label = f"{dist.name} {version or dist.version or '(version unknown)'}"
        pin = f"{dist.name}=={version}" if version else dist.name
        if dist.has_record is False:
            if dist.installer not in _RECORD_WRITERS or dist.location.startswith(_SYSTEM_PACKAGES):
                continue
            out.append(Finding(
                code, Severity.ERROR,
                f"{label} has no RECORD: its install was stopped before it finished (pip writes RECORD last)",
                (f"{dist.dist_info}: no RECORD" + (f" (INSTALLER: {dist.installer})" if dist.installer else
                                                   ", no INSTALLER"),),
                f"move {dist.dist_info} out of {dist.location} (without a RECORD neither pip nor ortfix can "
                f"uninstall it exactly), then run `ortfix plan` again to reinstall {pin}",
                {"distribution": dist.name, "version": version, "record": False, "remove": []}))
            continue
        missing = [p for p in dist.damaged if p.actual is None]
        wrong = [p for p in dist.damaged if p.actual is not None and p.overwritten_by is None]
        if not missing and not wrong:
            continue
        parts = ([f"{len(missing)} of its {dist.checked} files {'is' if len(missing) == 1 else 'are'} missing"]
                 if missing else [])
        if wrong:
            parts.append(f"{len(wrong)} {'has' if len(wrong) == 1 else 'have'} another size than its RECORD says")
        shown = (missing + wrong)[:_EVIDENCE_PATHS]
        evidence = [f"{dist.dist_info}/RECORD: {dist.checked} files checked by size, {len(missing)} missing, "
                    f"{len(wrong)} with another size"]
        evidence += [f"missing: {p.path}" if p.actual is None else
                     f"cut short or changed: {p.path} ({p.actual} bytes on disk, RECORD says {p.size})" for p in shown]
        if len(missing) + len(wrong) > len(shown):
            evidence.append(f"... and {len(missing) + len(wrong) - len(shown)} more")
        data: dict[str, Any] = {"distribution": dist.name, "version": version, "record": True,
                                "missing": len(missing), "wrong_size": len(wrong), "paths": [p.path for p in shown],
                                "remove": [dist.name], "reinstall": True}
        if not ort and version and _plain_name(dist.name):
            data["requirement"] = pin  # else left unresolved: no exact wheel to reinstall is known
        out.append(Finding(
            code, Severity.ERROR,
            f"{label} is damaged: {' and '.join(parts)} (an install or uninstall stopped half-way, or files were "
            "deleted)",
            tuple(evidence),
            f"reinstall {pin}: move what is left of it aside, then install it again",
            data))
    return out


def _orphaned(facts: Facts) -> list[Finding]:
    """An `onnxruntime` folder that no installed distribution owns: pip writes the .dist-info last, so a pip stopped
    half-way leaves the package's files (the CUDA provider, perhaps) and nothing that says they are installed."""
    out: list[Finding] = []
    probe = facts.probe
    # Only where pip installs: an ONNX Runtime built from source and put on sys.path (PYTHONPATH, an editable
    # install's .pth) has no .dist-info next to it either, and nothing is wrong with it.
    installs_into = {os.path.realpath(d) for d in (*probe.site_packages, probe.purelib, probe.platlib,
                                                   probe.user_site) if d}
    for install in facts.ort:
        location = install.dir.location
        if os.path.realpath(location) not in installs_into:
            continue
        if any(d.location == location and _builds_onnxruntime(d) for d in facts.ort_distributions):
            continue
        build = " ".join(x for x in (install.package, install.version) if x)
        out.append(Finding(
            FindingCode.ORT_ORPHANED, Severity.ERROR,
            f"{install.dir.package_dir} belongs to no installed distribution: an install of "
            f"{build or 'ONNX Runtime'} was stopped before pip wrote its .dist-info",
            (f"{install.dir.capi}: {', '.join(install.dir.files) or 'no libraries'}",
             f"build_and_package_info.py: {build}" if build else "build_and_package_info.py: missing or unreadable",
             f"no .dist-info in {location} lists files in onnxruntime/"),
            f"install {GPU_PACKAGE} over it (pip overwrites what was left)",
            {"package_dir": install.dir.package_dir, "location": location, "package": install.package,
             "version": install.version}))
    return out


def _marker_environment(facts: Facts) -> dict[str, str]:
    """PEP 508 marker values of the target interpreter (from its probe), for the markers of its dependents."""
    version = facts.probe.python_version
    return {"python_version": ".".join(version.split(".")[:2]), "python_full_version": version,
            "implementation_version": version,
            "sys_platform": facts.probe.system.lower(), "platform_system": facts.probe.system,
            "platform_machine": facts.probe.machine, "os_name": "posix" if facts.probe.system != "Windows" else "nt",
            "implementation_name": "cpython", "platform_python_implementation": "CPython", "extra": ""}


def _names_cpu_package(requirement: str, environment: dict[str, str]) -> bool:
    """Whether the requirement asks for the CPU package on this interpreter (its marker, if any, applies here; a
    requirement of an extra applies only when that extra is asked for, which nothing here says)."""
    from packaging.markers import UndefinedComparison, UndefinedEnvironmentName
    from packaging.requirements import InvalidRequirement, Requirement  # costs 15 ms: only when needed

    try:
        req = Requirement(requirement)
    except InvalidRequirement:
        return False
    if req.name.lower().replace("_", "-") != CPU_PACKAGE:
        return False
    try:
        return req.marker is None or req.marker.evaluate(environment)
    except (UndefinedComparison, UndefinedEnvironmentName):
        return True  # a marker ortfix cannot judge: say it, rather than hide it


def _driver(facts: Facts, matrix: Matrix, gpu: OrtInstall | None) -> list[Finding]:
    out: list[Finding] = []
    driver = facts.driver
    if not driver.present:
        out.append(Finding(
            FindingCode.NO_DRIVER, Severity.ERROR, "no NVIDIA driver found: CUDA cannot run on this machine",
            (driver.source, "checked /sys/module/nvidia/version, /proc/driver/nvidia/version, libcuda.so.1"),
            "install the NVIDIA driver (or run in a container with the GPU passed through: --gpus all); to prepare "
            "an environment for another machine, use `ortfix plan --driver VERSION`",
            {}))
        return out
    if driver.reboot_needed:
        out.append(Finding(
            FindingCode.REBOOT_NEEDED, Severity.ERROR,
            f"the loaded kernel module is {driver.kernel_module} but the driver libraries are {driver.userspace}: "
            "the driver was upgraded without a reboot",
            (f"kernel module: {driver.kernel_module} ({driver.source})", f"user-space: {driver.libcuda}"),
            "reboot (or reload the nvidia kernel modules)", {}))
    os_name = "linux"
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


def _matrix_agreement(gpu: OrtInstall) -> list[Finding]:
    provider = next((p for p in gpu.providers if p.provider == "cuda"), None)
    if not gpu.builds:
        return [Finding(
            FindingCode.UNKNOWN_VERSION, Severity.INFO,
            f"{gpu.package or 'onnxruntime'} {gpu.version} is not in ortfix's compatibility matrix; "
            "its requirements were read from the binary itself",
            (f"{provider.library}: NEEDED {', '.join(provider.needed)}" if provider else gpu.dir.capi,),
            "none needed; update ortfix for a matrix that knows this release", {})]
    if provider is None or provider.error:
        return []
    build = gpu.builds[0]
    actual = {n for n in provider.needed if parse_lib_name(n)}
    expected = set(build.cuda_needed)
    if actual != expected:
        return [Finding(
            FindingCode.MATRIX_DISAGREES, Severity.INFO,
            f"the installed {os.path.basename(provider.library)} needs different libraries than the matrix says "
            f"for {gpu.version}; the binary wins",
            (f"binary: {', '.join(sorted(actual))}", f"matrix: {', '.join(sorted(expected))} ({build.source})"),
            "none needed", {})]
    return []


def _libraries(facts: Facts, gpu: OrtInstall, provider: ProviderLoad) -> list[Finding]:
    out: list[Finding] = []
    by_soname: dict[str, list[LibCopy]] = {}
    for copy in facts.libraries:
        if copy.soname:
            by_soname.setdefault(copy.soname, []).append(copy)
    missing_entirely: list[str] = []
    not_on_path: list[tuple[str, list[LibCopy]]] = []
    wrong_major: list[tuple[str, list[LibCopy]]] = []
    for res in provider.missing:
        if res.name in DRIVER_LIBRARIES:
            continue  # part of the driver, not of any wheel: DRV001 covers it
        copies = by_soname.get(res.name, [])
        if copies:
            not_on_path.append((res.name, copies))
            continue
        family = parse_lib_name(res.name)
        others = [c for c in facts.libraries if family and c.family == family[0] and c.soname != res.name]
        if others:
            wrong_major.append((res.name, others))
        else:
            missing_entirely.append(res.name)
    if not_on_path:
        names = ", ".join(n for n, _ in not_on_path)
        evidence = tuple(f"{n}: not found by the loader; present at {', '.join(c.path for c in cs)}"
                         for n, cs in not_on_path)
        out.append(Finding(
            FindingCode.LIB_NOT_ON_PATH, Severity.ERROR,
            f"{len(not_on_path)} needed librar{'y is' if len(not_on_path) == 1 else 'ies are'} installed but not on "
            f"the loader's path: {names}",
            (*evidence, _search_summary(facts)),
            "make them findable: a preload hook (venv) or conda activate.d hook that points at the folders above",
            {"libraries": {n: [c.path for c in cs] for n, cs in not_on_path}}))
    if missing_entirely:
        evidence = tuple(f"{n}: no copy anywhere ortfix looked" for n in missing_entirely)
        out.append(Finding(
            FindingCode.LIB_MISSING, Severity.ERROR,
            f"{len(missing_entirely)} needed librar{'y is' if len(missing_entirely) == 1 else 'ies are'} missing: "
            f"{', '.join(missing_entirely)}",
            (*evidence, _search_summary(facts)),
            "install the NVIDIA wheels that ship them and make them findable",
            {"sonames": missing_entirely}))
    for name, others in wrong_major:
        majors = sorted({c.major for c in others if c.major is not None})
        out.append(Finding(
            FindingCode.LIB_WRONG_MAJOR, Severity.ERROR,
            f"{name} is needed but only major version(s) {', '.join(map(str, majors))} of it are present",
            tuple(f"{c.path} ({c.origin}{', ' + c.version if c.version else ''})" for c in others),
            f"install the major that {gpu.package} {gpu.version} needs ({name}); the other major cannot stand in",
            {"soname": name, "present": [c.path for c in others]}))
    out += _other_cuda_major(facts, gpu, provider)
    prefix = os.path.realpath(facts.probe.prefix) + os.sep
    seen: set[str] = set()
    for res in provider.resolutions:
        if res.path is None or res.name in seen or res.via == VIA_LOADED:
            continue
        seen.add(res.name)
        if res.via not in (VIA_CACHE, VIA_DEFAULT, VIA_LD_LIBRARY_PATH):
            continue
        if (os.path.realpath(res.path) + os.sep).startswith(prefix):
            continue
        own = [c for c in by_soname.get(res.name, []) if c.inside_env and
               os.path.realpath(c.path) != os.path.realpath(res.path)]
        if not own or not parse_lib_name(res.name):
            continue
        loaded_version = _file_version(res.path)
        out.append(Finding(
            FindingCode.LIB_SHADOWED, Severity.WARNING,
            f"{res.name} loads from {res.path} ({res.via}) instead of this environment's own copy",
            (f"loaded: {res.path} (version {loaded_version or 'unknown'})",
             *(f"environment's copy: {c.path} (version {c.version or 'unknown'})" for c in own)),
            "put the environment's folder first: conda activate.d hook or preload hook",
            {"soname": res.name, "loaded": res.path, "own": [c.path for c in own]}))
    return out


def _other_cuda_major(facts: Facts, gpu: OrtInstall, provider: ProviderLoad) -> list[Finding]:
    """Libraries that resolve to a copy built for another CUDA major than the build's: the process would map two
    CUDA runtimes (a libcurand.so.10 of CUDA 13 NEEDs libcudart.so.13), or cuDNN would dlopen another cuBLAS."""
    if gpu.cuda_major is None:
        return []
    wrong: dict[str, tuple[str, int]] = {}
    for res in provider.resolutions:
        if res.path is None or res.name in wrong or res.name in DRIVER_LIBRARIES:
            continue
        major = facts.cuda_major_at(res.path)
        if major is not None and major != gpu.cuda_major:
            wrong[res.name] = (res.path, major)
    if not wrong:
        return []
    return [Finding(
        FindingCode.LIB_OTHER_CUDA, Severity.ERROR,
        f"{len(wrong)} librar{'y resolves' if len(wrong) == 1 else 'ies resolve'} to copies built for another CUDA "
        f"major than {gpu.package} {gpu.version} (CUDA {gpu.cuda_major}): {', '.join(wrong)}",
        tuple(f"{name}: {path} (CUDA {major})" for name, (path, major) in wrong.items()),
        f"install the CUDA {gpu.cuda_major} wheels that ship them and load those first; a process must not mix "
        "CUDA majors",
        {"sonames": list(wrong), "cuda_major": gpu.cuda_major})]


def _file_version(path: str) -> str | None:
    parsed = parse_lib_name(os.path.basename(os.path.realpath(path)))
    return ".".join(map(str, parsed[1])) if parsed and parsed[1] else None


def _search_summary(facts: Facts) -> str:
    ld = facts.loader.ld_library_path
    return (f"loader searched: LD_LIBRARY_PATH={ld if ld else '(unset)'}, {facts.loader.cache}, "
            f"{', '.join(facts.loader.default_dirs)}")


def _soname_links(facts: Facts) -> list[Finding]:
    """A versioned file whose SONAME has no file next to it: the loader asks for the SONAME and finds nothing."""
    out = []
    present = {(c.directory, c.name) for c in facts.libraries}
    for copy in facts.libraries:
        if not copy.soname or copy.name == copy.soname:
            continue
        if (copy.directory, copy.soname) in present or os.path.lexists(os.path.join(copy.directory, copy.soname)):
            continue
        out.append(Finding(
            FindingCode.SONAME_LINK_MISSING, Severity.ERROR if copy.inside_env else Severity.WARNING,
            f"{copy.path} has SONAME {copy.soname}, but no {copy.soname} link exists next to it",
            (f"{copy.directory}: has {copy.name}, lacks {copy.soname}",),
            f"create the link {copy.soname} -> {copy.name} in that folder",
            {"directory": copy.directory, "link": copy.soname, "target": copy.name,
             "inside_env": copy.inside_env}))
    return out


def _interrupted(facts: Facts) -> list[Finding]:
    out = []
    for t in facts.interrupted:
        if t.status is None:  # its journal cannot be read or trusted
            out.append(Finding(
                FindingCode.INTERRUPTED, Severity.ERROR,
                f"ortfix transaction {t.id} cannot be read: the environment may be half-changed",
                (f"journal and stash: {t.folder}", f"why: {t.error}"),
                f"inspect it: `ortfix history show {t.id}`; ortfix will not apply anything while it is there",
                {"transaction": t.id, "unreadable": True}))
            continue
        out.append(Finding(
            FindingCode.INTERRUPTED, Severity.ERROR,
            f"ortfix transaction {t.id} was interrupted ({t.status.value}, {t.steps_started} of {t.steps_total} "
            "steps begun): the environment may be half-changed",
            (f"journal and stash: {t.folder}", f"started {t.created}"),
            "run `ortfix rollback` to restore the state before it",
            {"transaction": t.id}))
    return out


def _unreadable(facts: Facts) -> list[Finding]:
    if not facts.loader.unreadable:
        return []
    return [Finding(
        FindingCode.UNREADABLE_DIR, Severity.WARNING,
        f"LD_LIBRARY_PATH has folder(s) this user cannot read: {', '.join(facts.loader.unreadable)}",
        tuple(f"{d}: permission denied" for d in facts.loader.unreadable),
        "fix the folder's permissions or drop it from LD_LIBRARY_PATH; the loader cannot list it", {})]


def _torch(facts: Facts, gpu: OrtInstall) -> list[Finding]:
    torch = facts.probe.torch
    if torch is None or not torch.cuda:
        return []
    torch_cuda = int(torch.cuda.split(".")[0])
    torch_cudnn = _torch_cudnn_major(facts)
    problems = []
    if gpu.cuda_major is not None and torch_cuda != gpu.cuda_major:
        problems.append(f"torch {torch.version} uses CUDA {torch.cuda}, {gpu.package} {gpu.version} CUDA "
                        f"{gpu.cuda_major}")
    if torch_cudnn is not None and gpu.cudnn_major is not None and torch_cudnn != gpu.cudnn_major:
        problems.append(f"torch {torch.version} uses cuDNN {torch_cudnn}, {gpu.package} {gpu.version} cuDNN "
                        f"{gpu.cudnn_major}")
    if not problems:
        return []
    return [Finding(
        FindingCode.TORCH_MISMATCH, Severity.WARNING,
        "torch and ONNX Runtime need different CUDA/cuDNN majors: each needs its own copy, and whichever is "
        "imported first decides what the process has loaded",
        (*problems, f"torch at {torch.dir}"),
        "use an ONNX Runtime build for the same CUDA/cuDNN majors as torch, or keep both sets of libraries "
        "installed and findable",
        {"torch_cuda": torch_cuda, "torch_cudnn": torch_cudnn})]


def _torch_cudnn_major(facts: Facts) -> int | None:
    torch = facts.probe.torch
    if torch is None:
        return None
    dist = facts.probe.dist("torch")
    if dist and dist.requires:
        from packaging.requirements import InvalidRequirement, Requirement
    for req in dist.requires if dist else ():
        try:
            parsed = Requirement(req)
        except InvalidRequirement:
            continue
        if parsed.name.startswith("nvidia-cudnn"):
            for spec in parsed.specifier:
                try:
                    return Version(spec.version.rstrip(".*")).major
                except InvalidVersion:
                    continue
    for lib in torch.libs:
        if lib.startswith("libcudnn.so."):
            return soname_major(lib)
    return None


def torch_cudnn_major(facts: Facts) -> int | None:
    return _torch_cudnn_major(facts)


def finding_json(f: Finding) -> dict[str, Any]:
    return {"code": f.code, "severity": f.severity.value, "summary": f.summary, "evidence": list(f.evidence),
            "fix": f.fix, "data": dict(f.data)}



def problems(findings: Sequence[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity is not Severity.INFO]


def _plain_name(name: str) -> bool:
    """A distribution name as read from METADATA is used in a requirement only when it is a plain name."""
    from ortfix.fields import BadField, distribution_name

    try:
        distribution_name(name)
    except BadField:
        return False
    return True
