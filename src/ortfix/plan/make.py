"""Findings → plan: the exact, ordered changes that would fix the environment, each with how it is undone.

`make_plan` is a pure function of facts, findings, the matrix and the options: it reads no file and changes nothing.
The least invasive fix wins: make libraries that are already installed findable before downloading anything, reuse
compatible copies (torch's, the conda prefix's) before installing duplicates, and never touch system folders.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ortfix import __version__
from ortfix.check import diagnose as dx
from ortfix.check.codes import FindingCode as Code
from ortfix.check.codes import Severity
from ortfix.check.diagnose import Finding, finding_json
from ortfix.check.facts import DRIVER_LIBRARIES, Facts, OrtInstall
from ortfix.compat.matrix import Matrix
from ortfix.compat.model import OrtBuild, WheelSpec
from ortfix.errors import OrtfixError
from ortfix.plan.kinds import PIP_INSTALL, PIP_UNINSTALL, SYMLINK, WRITE_FILE
from ortfix.system import hooks
from ortfix.system.inventory import LibCopy, parse_lib_name
from ortfix.target.probe import Distribution

PLAN_SCHEMA = "ortfix.plan/2"


# Load order for the preload hook: a library's dependencies first (cuBLAS needs cuBLASLt, cuDNN needs cuBLAS...).
_LOAD_ORDER = ("cudart", "nvJitLink", "nvrtc", "nvrtc-builtins", "cublasLt", "cublas", "cufft", "curand",
               "cusparse", "cusolver", "cudnn", "nvinfer", "nvinfer_plugin", "nvonnxparser")


HOOK_CHOICES = ("auto", "conda", "preload", "none")


# Package findings whose data names distributions to uninstall.
_UNINSTALL_CODES = (Code.CPU_ONLY, Code.CPU_AND_GPU, Code.VARIANT_CONFLICT, Code.PROVIDER_MISSING)


@dataclass(frozen=True)
class PlanOptions:
    """What the user asked for: part of the plan (a saved plan is re-planned from them and must come out the same)."""

    ort_version: str | None = None
    cuda_major: int | None = None
    hook: str = "auto"  # auto | conda | preload | none
    driver_version: str | None = None  # planned for a machine with this driver (a CPU build host's plan)
    compute_capability: str | None = None


@dataclass(frozen=True)
class Action:
    kind: str
    summary: str
    changes: tuple[str, ...]  # "+ path", "- distribution", "~ path": what exactly changes
    undo: str
    fixes: tuple[str, ...]  # finding codes this action addresses
    details: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Target:
    package: str
    version: str
    cuda_major: int
    cudnn_major: int | None
    index: str
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class Plan:
    schema: str
    created: str
    ortfix_version: str
    python: str
    prefix: str
    environment: str
    fingerprint: str  # of the facts, the options and the actions: what `apply PLAN.json` must find again
    facts_fingerprint: str  # of the facts alone: tells "the environment changed" from "the file was edited"
    options: PlanOptions
    matrix_version: str
    installer: str | None
    target: Target | None
    actions: tuple[Action, ...]
    unresolved: tuple[Finding, ...]  # problems no action here can fix (the driver, a reboot...)
    notes: tuple[str, ...]

    @property
    def empty(self) -> bool:
        return not self.actions

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["unresolved"] = [finding_json(f) for f in self.unresolved]
        return doc


def plan_fingerprint(facts_fingerprint: str, options: PlanOptions, actions: Sequence[Action]) -> str:
    doc = {"facts": facts_fingerprint, "options": asdict(options),
           "actions": [{"kind": a.kind, "details": dict(a.details)} for a in actions]}
    data = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return hashlib.sha256(data).hexdigest()[:16]


def make_plan(facts: Facts, findings: Sequence[Finding], matrix: Matrix, options: PlanOptions,
              *, now: datetime | None = None) -> Plan:
    codes = {f.code for f in findings}
    by_code: dict[str, list[Finding]] = {}
    for f in findings:
        by_code.setdefault(f.code, []).append(f)
    notes: list[str] = []
    actions: list[Action] = []
    installer = _installer(facts)
    installed = dx.gpu_install(facts)
    target = choose_target(facts, matrix, options, installed)
    asked: list[str] = []  # what the package findings ask to uninstall
    for code in _UNINSTALL_CODES:
        for f in by_code.get(code, []):
            asked += [r for r in f.data.get("remove", []) if r not in asked]
    repairs = _repairs(facts, by_code, target, asked)
    arch_error = any(f.severity is Severity.ERROR for f in by_code.get(Code.GPU_ARCH, []))
    swap = _needs_swap(codes, installed, target, options, reinstall_ort=repairs.reinstall_ort, arch_error=arch_error)
    if not swap and installed is not None:
        # The plan keeps the installed build: that is the target, and every action serves it.
        target = _installed_target(installed) or target

    # 1. packages
    remove = [*asked, *(r for r in repairs.remove if r not in asked)]
    if swap and installed is not None and installed.package and target is not None:
        gpu_dist = next((d for d in facts.ort_distributions if d.normalized == installed.package), None)
        # Another version, or the same version built for another CUDA major (from a separate feed): pip would take
        # the installed one as satisfying `==version`, so it is uninstalled first.
        other_build = gpu_dist is not None and (gpu_dist.installed_version != target.version
                                                or installed.cuda_major != target.cuda_major)
        if gpu_dist and other_build and gpu_dist.name not in remove:
            remove.append(gpu_dist.name)
    # 2. libraries: which sonames the (target) build needs, and for each: findable, reusable, or to install
    needs = _needed_sonames(facts, matrix, target, installed, swap)
    site = facts.probe.purelib
    to_install: dict[str, WheelSpec] = {}
    hook_libs: dict[str, str] = {}  # soname → absolute path to make findable
    missing_no_wheel: list[str] = []
    copies = _copies_by_soname(facts.libraries)
    cuda_major = target.cuda_major if target else (installed.cuda_major if installed else None)
    cudnn_major = target.cudnn_major if target else (installed.cudnn_major if installed else None)
    shadowed = {f.data["soname"]: f for f in by_code.get(Code.LIB_SHADOWED, [])}

    def fits(path: str) -> bool:
        """A copy built for the target's CUDA major (or one nothing tells the major of): a stack mixes no majors."""
        major = facts.cuda_major_at(path)
        return cuda_major is None or major is None or major == cuda_major

    for soname in needs:
        if soname in DRIVER_LIBRARIES:
            continue
        found = facts.findable.get(soname)
        if found and not fits(found):
            found = None  # the loader finds a copy of another CUDA major: it cannot stand in
        own = [c for c in copies.get(soname, []) if c.inside_env and fits(c.path)]
        if found and soname not in shadowed:
            continue  # the loader already finds a copy
        if own:
            hook_libs[soname] = own[0].path
            continue
        if found:  # shadowed but no own copy
            continue
        wheel = matrix.wheel_for_soname(soname, cuda_major, cudnn_major) if cuda_major else None
        if wheel is None:
            missing_no_wheel.append(soname)
            continue
        to_install[wheel.distribution] = wheel
        hook_libs[soname] = os.path.join(site, wheel.dir, soname)

    # NVIDIA wheels of another CUDA major in the folder a wheel to install writes (nvidia-cudnn-cu13 and -cu12 both
    # own nvidia/cudnn/lib): uninstalled first, or pip would overwrite their files and leave both half-installed.
    replaced: dict[str, WheelSpec] = {}
    for wheel in to_install.values():
        for occupant in _occupying(facts, matrix, wheel):
            if occupant.name not in remove:
                remove.append(occupant.name)
                replaced[occupant.name] = wheel
    inside = os.path.realpath(facts.probe.prefix) + os.sep
    for name in remove:
        dist = next((d for d in facts.probe.distributions if d.name == name), None)
        if dist is None:
            continue
        if not (os.path.realpath(dist.location) + os.sep).startswith(inside):
            # Never a change outside the environment: what is installed into it comes first on its sys.path.
            notes.append(f"{dist.name} {dist.version} in {dist.location} is outside this environment and stays; "
                         "what this plan installs into the environment is imported before it")
            continue
        why = (f" ({replaced[name].distribution} installs into the same folder, {replaced[name].dir})"
               if name in replaced else "")
        actions.append(Action(
            PIP_UNINSTALL, f"uninstall {dist.name} {dist.version}{why}",
            (f"- {dist.name} {dist.version} ({len(dist.files) or 'all'} files under {dist.location})",),
            "its files are moved aside into the transaction's stash and moved back on rollback, byte for byte",
            tuple(sorted({*(c for c in codes if c in _UNINSTALL_CODES), *repairs.remove.get(name, ())})),
            {"distribution": dist.name, "version": dist.version, "location": dist.location,
             "dist_info": dist.dist_info}))

    requirements: list[str] = []
    if swap and target is not None:
        requirements.append(f"{target.package}=={target.version}")
    for wheel in to_install.values():
        if canonicalize_name(wheel.distribution) not in repairs.requirements:  # reinstalled at its own version instead
            wanted = matrix.wheel_requirement(wheel, facts.driver.version, "linux", facts.probe.machine)
            requirements.append(wanted.requirement)
            if wanted.note:
                notes.append(wanted.note)
    requirements += [r for r in repairs.requirements.values() if r not in requirements]
    if requirements:
        if installer is None:
            notes.append("the target environment has no pip (and no uv was found): install pip into it first")
        fixes = tuple(sorted({*(c for c in codes if c in (*_UNINSTALL_CODES, Code.NO_ORT, Code.LIB_MISSING,
                                                          Code.LIB_WRONG_MAJOR, Code.DRIVER_TOO_OLD,
                                                          Code.LIB_OTHER_CUDA)),
                              *repairs.installed_by(swap and target is not None, codes),
                              *((Code.GPU_ARCH,) if swap and arch_error else ())}))
        actions.append(Action(
            PIP_INSTALL, f"install {', '.join(requirements)}",
            tuple(f"+ {r}" for r in requirements),
            "the installed distributions are uninstalled by moving their files aside, then discarded",
            fixes,
            {"requirements": requirements, "installer": installer,
             "reinstall": any(f.data.get("reinstall") for f in by_code.get(Code.CPU_AND_GPU, []))}))
        if target is not None and target.index == "alternate":
            notes.append(f"{target.package} {target.version} for CUDA {target.cuda_major} is not on the default "
                         "package index but on a separate feed: configure it in your pip configuration first")

    # 3. symlinks missing next to versioned files inside the environment
    for f in by_code.get(Code.SONAME_LINK_MISSING, []):
        if not f.data.get("inside_env"):
            continue
        link = os.path.join(f.data["directory"], f.data["link"])
        actions.append(Action(
            SYMLINK, f"create {link} -> {f.data['target']}", (f"+ {link} -> {f.data['target']}",),
            "the link is removed", (Code.SONAME_LINK_MISSING,),
            {"path": link, "target": f.data["target"]}))
        hook_libs.setdefault(f.data["link"], link)

    # 4. make the libraries findable
    hook_kind = _hook_kind(facts, options)
    if hook_libs and hook_kind != "none":
        actions += _hook_actions(facts, hook_kind, hook_libs, codes)
    elif hook_libs:
        notes.append("libraries need to be made findable but --hook none was given: set LD_LIBRARY_PATH to "
                     + ":".join(sorted({os.path.dirname(p) for p in hook_libs.values()})))

    unresolved = [f for f in findings if f.severity is not Severity.INFO and not _addressed(f, actions)]
    for soname in missing_no_wheel:
        notes.append(f"no NVIDIA pip wheel is known for {soname} (CUDA {cuda_major}): install it from the CUDA "
                     "toolkit or your distribution")
    if swap and target is not None:
        notes += list(target.reasons)
    facts_fingerprint = facts.fingerprint()
    return Plan(
        schema=PLAN_SCHEMA,
        created=(now or datetime.now(timezone.utc)).isoformat(timespec="seconds"),
        ortfix_version=__version__,
        python=facts.probe.executable,
        prefix=facts.probe.prefix,
        environment=facts.probe.env_kind,
        fingerprint=plan_fingerprint(facts_fingerprint, options, actions),
        facts_fingerprint=facts_fingerprint,
        options=options,
        matrix_version=matrix.data_version,
        installer=installer,
        target=target,
        actions=tuple(actions),
        unresolved=tuple(unresolved),
        notes=tuple(notes),
    )


def _addressed(finding: Finding, actions: Sequence[Action]) -> bool:
    if finding.code in (Code.ORT_DAMAGED, Code.LIB_DAMAGED):  # one finding per distribution: its own uninstall or none
        name = finding.data.get("distribution")
        if not any(a.kind == PIP_UNINSTALL and a.details.get("distribution") == name for a in actions):
            return False
    return any(finding.code in a.fixes for a in actions)


@dataclass(frozen=True)
class _Repairs:
    """What the damaged-install findings ask of the plan."""

    remove: Mapping[str, tuple[str, ...]]  # distribution → the codes its uninstall fixes (ORT007, LIB007)
    requirements: Mapping[str, str]  # canonical NVIDIA distribution → name==installed version, to reinstall it
    reinstall_ort: bool  # a damaged ORT build is uninstalled: the target build must be installed in its place

    def installed_by(self, installs_target: bool, codes: set[Code]) -> set[Code]:
        """The codes a pip-install fixes: LIB007 by the pinned reinstalls, ORT007/ORT008 by the target build."""
        out = {Code.LIB_DAMAGED} if self.requirements else set()
        if installs_target and any(Code.ORT_DAMAGED in codes for codes in self.remove.values()):
            out.add(Code.ORT_DAMAGED)
        if installs_target and Code.ORT_ORPHANED in codes:  # the target build is installed over the leftover folder
            out.add(Code.ORT_ORPHANED)
        return out


def _repairs(facts: Facts, by_code: Mapping[str, Sequence[Finding]], target: Target | None,
             asked: Sequence[str]) -> _Repairs:
    """A damaged distribution with a RECORD is uninstalled (what is left of it is moved aside) and installed again:
    an NVIDIA wheel at exactly its installed version, an ORT build as the target build (there is none to install
    when no build runs here: then it is left as it is, and reported). One without a RECORD cannot be uninstalled
    exactly, and reinstalling over it would be a no-op for pip (its METADATA says it is installed): left unresolved.

    Uninstalling an ORT build removes every file its RECORD lists, those another build in the same folder lists too
    (onnxruntime/__init__.py...): that build would be left damaged (ORT007), so it is reinstalled as well."""
    remove: dict[str, tuple[str, ...]] = {}
    requirements: dict[str, str] = {}
    reinstall_ort = False
    for f in by_code.get(Code.ORT_DAMAGED, []):
        if target is not None and f.data.get("remove"):
            reinstall_ort = True
            for name in f.data["remove"]:
                remove[name] = (*remove.get(name, ()), Code.ORT_DAMAGED)
    for f in by_code.get(Code.LIB_DAMAGED, []):
        if f.data.get("remove") and f.data.get("requirement"):
            for name in f.data["remove"]:
                remove[name] = (*remove.get(name, ()), Code.LIB_DAMAGED)
            requirements[canonicalize_name(str(f.data["distribution"]))] = str(f.data["requirement"])
    if target is not None:
        for name in _sharing_files(facts, {*remove, *asked}):
            remove.setdefault(name, ())
            reinstall_ort = True
    return _Repairs(remove, requirements, reinstall_ort)


def _sharing_files(facts: Facts, removed: set[str]) -> list[str]:
    """The ORT distributions that stay but share files with one that is uninstalled, in the same folder."""
    gone = [d for d in facts.ort_distributions if d.name in removed]
    out = []
    for dist in facts.ort_distributions:
        if dist.name in removed:
            continue
        own = {path for path, _, _ in dist.files if not path.endswith(".pyc")}
        if any(other.location == dist.location and own.intersection(p for p, _, _ in other.files) for other in gone):
            out.append(dist.name)
    return out


def _installed_target(installed: OrtInstall) -> Target | None:
    if not (installed.package and installed.version and installed.cuda_major):
        return None
    index = installed.builds[0].index if installed.builds else "installed"
    return Target(package=installed.package, version=installed.version, cuda_major=installed.cuda_major,
                  cudnn_major=installed.cudnn_major, index=index, reasons=())


def _needs_swap(codes: set[Code], installed: OrtInstall | None, target: Target | None, options: PlanOptions,
                *, reinstall_ort: bool = False, arch_error: bool = False) -> bool:
    if target is None:
        return False
    if reinstall_ort or codes & {Code.NO_ORT, Code.CPU_ONLY, Code.CPU_AND_GPU, Code.PROVIDER_MISSING,
                                 Code.DRIVER_TOO_OLD, Code.ORT_ORPHANED}:
        return True
    if installed is None:
        return bool(codes & {Code.VARIANT_CONFLICT})
    if arch_error and (installed.version != target.version or installed.cuda_major != target.cuda_major):
        return True  # the GPU is older than anything the installed build runs on: another build is the fix
    if options.ort_version and installed.version:
        try:
            if Version(options.ort_version) != Version(installed.version):
                return True
        except InvalidVersion:
            return True  # the installed version cannot be read (a damaged install): install the one asked for
    return bool(options.cuda_major and installed.cuda_major != options.cuda_major)


def _current_version(facts: Facts, installed: OrtInstall | None) -> str | None:
    """The ORT version installed now, as far as a damaged install still tells it: the GPU build's
    build_and_package_info.py, then the METADATA (or .dist-info name) of onnxruntime-gpu, then of onnxruntime, then
    any `onnxruntime` folder's build info. Only a valid version counts; None when nothing says one."""
    candidates = [installed.version if installed else None]
    for name in (dx.GPU_PACKAGE, dx.CPU_PACKAGE):
        candidates += [d.installed_version for d in facts.ort_distributions if d.normalized == name]
    candidates += [o.version for o in facts.ort]
    return dx.first_version(candidates)


def choose_target(facts: Facts, matrix: Matrix, options: PlanOptions, installed: OrtInstall | None) -> Target | None:
    """The GPU build to end up with: the one asked for, else the installed version's, else the newest that this
    Python, platform, driver and GPU can run (preferring torch's CUDA/cuDNN majors, to share its libraries)."""
    probe = facts.probe
    platform_tag = f"linux_{probe.machine}"
    reasons: list[str] = []
    current = _current_version(facts, installed)

    def runs_here(build: OrtBuild) -> bool:
        if build.index == "withdrawn" or not build.installs_for(probe.python_tag, probe.python_version, platform_tag):
            return False
        if options.cuda_major and build.cuda_major != options.cuda_major:
            return False
        if facts.driver.version and matrix.driver_supports_major(facts.driver.version, build.cuda_major) is False:
            return False
        cuda = matrix.cuda_major(build.cuda_major)
        for gpu in facts.driver.gpus:
            if gpu.compute_capability and cuda:
                cc = Version(gpu.compute_capability)
                if cc < Version(cuda.cc_min):
                    return False
                if build.compute_capabilities and cc < min(Version(a) for a in build.compute_capabilities):
                    return False
        return True

    candidates = [(Version(v), b) for b in matrix.builds if b.package == dx.GPU_PACKAGE for v in b.versions]
    usable = [(v, b) for v, b in candidates if runs_here(b)]
    if options.ort_version:
        wanted = Version(options.ort_version)
        exact = [(v, b) for v, b in usable if v == wanted]
        if not exact:
            known = any(v == wanted for v, _ in candidates)
            raise OrtfixError(
                f"no {dx.GPU_PACKAGE} {options.ort_version} build " +
                ("runs on this machine (Python, platform, driver or GPU rule it out)" if known
                 else "is known to ortfix's compatibility matrix"),
                hint="`ortfix matrix show` lists the known builds")
        usable = exact
    elif current:
        cur = Version(current)
        same = [(v, b) for v, b in usable if v == cur]
        same_minor = [(v, b) for v, b in usable if (v.major, v.minor) == (cur.major, cur.minor)]
        if same:
            usable = same
        elif same_minor:
            reasons.append(f"{dx.GPU_PACKAGE} {current} is not published for this setup; the nearest release of "
                           f"{cur.major}.{cur.minor} is used")
            usable = same_minor
        elif usable:
            reasons.append(f"no {dx.GPU_PACKAGE} {cur.major}.{cur.minor} build runs here "
                           "(driver, GPU or Python); the newest one that does is used")
    if not usable:
        return None
    torch = facts.probe.torch
    torch_cuda = int(torch.cuda.split(".")[0]) if torch and torch.cuda else None
    torch_cudnn = dx.torch_cudnn_major(facts)

    driver_known = bool(facts.driver.version)

    def rank(item: tuple[Version, OrtBuild]) -> tuple[int, int, int, Version]:
        v, b = item
        shares_torch = int(torch_cuda == b.cuda_major and (torch_cudnn in (None, b.cudnn_major)))
        # No driver to go by: prefer a build that also runs on the long-term driver branch still widely deployed
        # (cuda.yaml's widely_deployed_driver: R535, so a CUDA 12 build over a CUDA 13 one, which needs R580).
        widely = matrix.widely_deployed_driver
        broad = int(not driver_known and widely is not None
                    and matrix.driver_supports_major(widely, b.cuda_major) is True)
        return (int(b.index == "default"), shares_torch, broad, v)

    version, build = max(usable, key=rank)
    if torch_cuda is not None and torch_cuda == build.cuda_major:
        reasons.append(f"CUDA {build.cuda_major} matches torch {torch.version if torch else ''}, so its "
                       "libraries can be shared")
    cuda_row = matrix.cuda_major(build.cuda_major)
    if not driver_known and cuda_row is not None:
        reasons.append(f"{build.package} {version} is built for CUDA {build.cuda_major}: the machine it runs on needs "
                       f"an NVIDIA driver >= {cuda_row.driver_min.get('linux')} (no driver is known here; for "
                       "another machine, plan with --driver VERSION)")
    return Target(package=build.package, version=str(version), cuda_major=build.cuda_major,
                  cudnn_major=build.cudnn_major, index=build.index, reasons=tuple(reasons))


def _needed_sonames(facts: Facts, matrix: Matrix, target: Target | None, installed: OrtInstall | None,
                    swap: bool) -> list[str]:
    if not swap and installed is not None:
        # Keep the installed build: exactly what the loader simulation says is missing or shadowed.
        names: list[str] = []
        for provider in installed.providers:
            if provider.provider != "cuda":
                continue
            for r in provider.resolutions:
                if r.name not in names and parse_lib_name(r.name) and (r.path is None or r.name in facts.findable):
                    names.append(r.name)
        return [n for n in names if _is_missing_or_shadowed(facts, installed, n)]
    if target is None:
        return []
    build = next(b for b in matrix.builds if b.package == target.package and target.version in b.versions
                 and b.cuda_major == target.cuda_major)
    return list(dict.fromkeys((*build.cuda_needed, *build.cuda_lazy)))


def _is_missing_or_shadowed(facts: Facts, installed: OrtInstall, name: str) -> bool:
    for provider in installed.providers:
        for r in provider.resolutions:
            if r.name == name and r.path is None:
                return True
            if r.name == name and r.path is not None and installed.cuda_major is not None:
                major = facts.cuda_major_at(r.path)
                if major is not None and major != installed.cuda_major:
                    return True  # a copy of another CUDA major (LIB008)
    own = [c for c in facts.libraries if c.soname == name and c.inside_env]
    found = facts.findable.get(name)
    return bool(own and found and os.path.realpath(found) not in {os.path.realpath(c.path) for c in own})


def _occupying(facts: Facts, matrix: Matrix, wheel: WheelSpec) -> list[Distribution]:
    """Installed NVIDIA distributions, other than `wheel`'s, whose files live in the folder `wheel` installs into."""
    rows = {(w.distribution, w.dir) for _major, w in matrix.nvidia_wheels}
    site = os.path.realpath(facts.probe.purelib)
    return [d for d in facts.probe.distributions
            if d.normalized != wheel.distribution and os.path.realpath(d.location) == site
            and (d.normalized, wheel.dir) in rows]


def _copies_by_soname(copies: Sequence[LibCopy]) -> dict[str, list[LibCopy]]:
    out: dict[str, list[LibCopy]] = {}
    for c in copies:
        if c.soname:
            out.setdefault(c.soname, []).append(c)
    return out


def _installer(facts: Facts) -> str | None:
    if facts.probe.has_pip:
        return "pip"
    if facts.uv:
        return "uv"
    return None


def _hook_kind(facts: Facts, options: PlanOptions) -> str:
    if options.hook != "auto":
        return options.hook
    return "conda" if facts.probe.env_kind == "conda" else "preload"


def _order(hook_libs: Mapping[str, str]) -> list[str]:
    def key(soname: str) -> tuple[int, str]:
        parsed = parse_lib_name(soname)
        family = parsed[0] if parsed else ""
        base = family.split("_")[0] if family.startswith("cudnn") else family
        rank = _LOAD_ORDER.index(base) if base in _LOAD_ORDER else len(_LOAD_ORDER)
        # libcudnn.so.N before its sub-libraries; sub-libraries in name order.
        return (rank * 2 + (1 if family != base else 0), soname)

    return [hook_libs[s] for s in sorted(hook_libs, key=key)]


def _hook_actions(facts: Facts, kind: str, hook_libs: Mapping[str, str], codes: set[Code]) -> list[Action]:
    fixes = tuple(sorted(c for c in codes if c in (Code.LIB_NOT_ON_PATH, Code.LIB_SHADOWED, Code.LIB_MISSING,
                                                   Code.LIB_WRONG_MAJOR, Code.SONAME_LINK_MISSING,
                                                   Code.LIB_OTHER_CUDA)))
    if kind == "conda":
        dirs = list(dict.fromkeys(os.path.dirname(p) for p in _order(hook_libs)))
        activate, deactivate = hooks.conda_hook_paths(facts.probe.prefix)
        return [
            _write(str(activate), hooks.render_conda_activate(dirs, facts.probe.prefix),
                   f"conda activate.d hook: put {len(dirs)} folder(s) first on LD_LIBRARY_PATH", fixes,
                   facts.hook_files_present),
            _write(str(deactivate), hooks.render_conda_deactivate(facts.probe.prefix),
                   "conda deactivate.d hook: restore LD_LIBRARY_PATH exactly", fixes, facts.hook_files_present),
        ]
    site = facts.probe.purelib
    module, pth = hooks.preload_paths(site)
    libs = _order(hook_libs)
    return [
        _write(str(module), hooks.render_preload_module(libs, site),
               f"preload hook: load {len(libs)} librar{'y' if len(libs) == 1 else 'ies'} by absolute path when "
               "onnxruntime is imported", fixes, facts.hook_files_present),
        _write(str(pth), hooks.render_preload_pth(), "activate the preload hook at interpreter start-up", fixes,
               facts.hook_files_present),
    ]


def _write(path: str, content: str, summary: str, fixes: tuple[str, ...], present: tuple[str, ...]) -> Action:
    existed = path in present
    digest = hashlib.sha256(content.encode()).hexdigest()
    return Action(
        WRITE_FILE, f"{'replace' if existed else 'write'} {path}: {summary}",
        (f"{'~' if existed else '+'} {path} ({len(content.encode())} bytes)",),
        "the previous file is restored" if existed else "the file is deleted",
        fixes,
        {"path": path, "content": content, "sha256": digest, "mode": 0o644, "replaces_existing": existed})
