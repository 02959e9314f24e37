"""Findings → plan: the exact, ordered changes that would fix the environment, each with how it is undone.

`make_plan` is a pure function of facts, findings, the matrix and the options: it reads no file and changes nothing.
The least invasive fix wins: make libraries that are already installed findable before downloading anything, reuse
compatible copies (torch's, the conda prefix's) before installing duplicates, and never touch system folders.
The parts: model.py (what a plan is), choose_build.py (the ORT build), repairs.py (damaged installs),
needed_libraries.py (the libraries to provide), hook_actions.py (making them findable), genai.py (the
onnxruntime-genai swap).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import datetime, timezone

from packaging.utils import canonicalize_name

from ortfix import __version__
from ortfix.check.codes import INSTALL_FIXES, PLAN_FIXES, UNINSTALL_FIXES, Severity
from ortfix.check.codes import FindingCode as Code
from ortfix.check.diagnose import gpu_install
from ortfix.check.facts import Facts, OrtInstall
from ortfix.check.findings import REMOVE_CODES, Finding, damage, removal, shadowing, soname_link
from ortfix.check.requires import Consumer, Need, installed_needs, nvidia_consumers
from ortfix.check.winstore import STORE_REASON, STORE_REMEDY, is_store_python
from ortfix.compat.matrix import Matrix
from ortfix.compat.model import WheelSpec
from ortfix.errors import ExitCode, OrtfixError
from ortfix.plan.choose_build import cudnn9_first, cudnn9_out_of_reach, installed_build, needs_swap, ranked_builds
from ortfix.plan.genai import genai_change
from ortfix.plan.hook_actions import (
    dll_folders,
    hook_actions,
    hook_kind,
    machine_path_shadows,
    user_path_note,
)
from ortfix.plan.installer import choose_installer, redirect_notes
from ortfix.plan.kinds import ActionKind
from ortfix.plan.model import Action, ChosenBuild, Plan, PlanOptions, plan_fingerprint
from ortfix.plan.needed_libraries import (
    copies_by_soname,
    needed_sonames,
    occupying,
    wheel_for_library,
    whole_cudnn,
    with_nvrtc,
)
from ortfix.plan.neighbours import Replacement, refusal, replacements
from ortfix.plan.project_actions import project_changes
from ortfix.plan.repairs import find_repairs
from ortfix.plan.schema import PLAN_SCHEMA
from ortfix.plan.tensorrt import TENSORRT_CODES, TensorrtChange, tensorrt_change
from ortfix.system.windows import dll_name_for_soname
from ortfix.target.locate import externally_managed


def make_plan(facts: Facts, findings: Sequence[Finding], matrix: Matrix, options: PlanOptions,
              *, now: datetime | None = None) -> Plan:
    """The plan for the best build that breaks no installed distribution (plan/neighbours.py); with --ort-version or
    --cuda, the build asked for or a one-line refusal naming the distribution it would break."""
    installed = gpu_install(facts)
    required = installed_needs(facts)
    consumers = nvidia_consumers(facts, matrix, required)
    ranked = cudnn9_first({f.code for f in findings}, ranked_builds(facts, matrix, options, installed, consumers),
                          options)
    first: tuple[Plan, list[Replacement]] | None = None
    for i, target in enumerate(ranked or [None]):
        plan, broken = _draft(facts, findings, matrix, options, installed, target, required, consumers,
                              alternative=i > 0, now=now)
        if not broken:
            return plan
        first = first or (plan, broken)
        if options.ort_version or options.cuda_major:
            break  # the build asked for, or nothing
    assert first is not None
    consumer = consumers[0] if consumers else None
    options_text = ("pass --ort-version/--cuda for a build of its CUDA/cuDNN majors "
                    f"({consumer.majors()})" if consumer else "pass --ort-version/--cuda for another build")
    raise OrtfixError(refusal(first[1], options, f"nothing was changed; {options_text}, or change "
                                                 f"{first[1][0].broken[0].dependant} first"),
                      hint="`ortfix matrix show` lists the builds", exit_code=ExitCode.PROBLEMS)


def _draft(facts: Facts, findings: Sequence[Finding], matrix: Matrix, options: PlanOptions,
           installed: OrtInstall | None, target: ChosenBuild | None, required: Sequence[Need],
           consumers: Sequence[Consumer], *, alternative: bool, now: datetime | None) -> tuple[Plan, list[Replacement]]:
    """The plan for `target` (an `alternative` to the first choice is always installed in place of the installed
    build), and the replacements in it that break another installed distribution."""
    codes = {f.code for f in findings}
    by_code: dict[str, list[Finding]] = {}
    for f in findings:
        by_code.setdefault(f.code, []).append(f)
    notes: list[str] = []
    actions: list[Action] = []
    choice = choose_installer(facts, options.installer)
    installer = choice.installer
    asked: list[str] = []  # what the package findings ask to uninstall
    for code in REMOVE_CODES:
        for f in by_code.get(code, []):
            asked += [r for r in removal(f)["remove"] if r not in asked]
    repairs = find_repairs(facts, by_code, target, asked)
    arch_error = any(f.severity is Severity.ERROR for f in by_code.get(Code.GPU_ARCH, []))
    share = bool(consumers) and target is not None and installed is not None and any(
        target.cuda_major == c.cuda_major and c.cudnn_major in (None, target.cudnn_major)
        and (installed.cuda_major, installed.cudnn_major) != (target.cuda_major, target.cudnn_major)
        for c in consumers[:1])
    swap = alternative or share or needs_swap(codes, installed, target, options, reinstall_ort=repairs.reinstall_ort,
                                              arch_error=arch_error)
    if not swap and installed is not None:
        # The plan keeps the installed build: that is the target, and every action serves it.
        target = installed_build(installed) or target

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
    genai = genai_change(facts, matrix, by_code, target, installed, required)  # plan/genai.py
    remove += [n for n in genai.remove if n not in remove]
    notes += genai.notes
    # 2. libraries: which sonames the (target) build needs, and for each: findable, reusable, or to install
    needs = needed_sonames(facts, matrix, target, installed, swap)
    site = facts.probe.purelib
    to_install: dict[str, WheelSpec] = {}
    hook_libs: dict[str, str] = {}  # soname → absolute path to make findable
    missing_no_wheel: list[str] = []
    copies = copies_by_soname(facts.libraries)
    cuda_major = target.cuda_major if target else (installed.cuda_major if installed else None)
    cudnn_major = target.cudnn_major if target else (installed.cudnn_major if installed else None)
    shadowed = {shadowing(f)["soname"]: f for f in by_code.get(Code.LIB_SHADOWED, [])}

    def fits(path: str) -> bool:
        """A copy built for the target's CUDA major (or one nothing tells the major of): a stack mixes no majors."""
        major = facts.cuda_major_at(path)
        return cuda_major is None or major is None or major == cuda_major

    driver_libraries = {facts.loader.key(n) for n in facts.loader.driver_libraries}
    windows = facts.platform.is_windows
    for soname in needs:
        if facts.loader.key(soname) in driver_libraries:
            continue
        found = facts.findable.get(soname)
        if found and not fits(found):
            found = None  # the loader finds a copy of another CUDA major: it cannot stand in
        own = [c for c in copies.get(soname, []) if c.inside_env and fits(c.path)]
        if found and soname not in shadowed and not (own and not _inside(facts, found)):
            continue  # the loader already finds a copy: the environment's own, or the only one there is
        if own:
            hook_libs[soname] = own[0].path
            continue
        if found:  # shadowed but no own copy
            continue
        wheel = wheel_for_library(matrix, soname, cuda_major, cudnn_major, windows=windows) if cuda_major else None
        if wheel is None:
            missing_no_wheel.append(soname)
            continue
        to_install[wheel.distribution] = wheel
        hook_libs[soname] = _installed_path(site, wheel, soname, windows=windows)

    if windows:  # the PATH hook puts folders first: cuDNN's holds all of it; NVRTC's is loaded by a built name
        hook_libs = with_nvrtc(hook_libs, facts.libraries, cuda_major)
    else:
        cudnn_row = matrix.cudnn_wheel(cudnn_major, cuda_major) if cudnn_major and cuda_major else None
        hook_libs = whole_cudnn(hook_libs, facts.libraries, cudnn_row.wheel if cudnn_row else None)

    trt = tensorrt_change(facts, matrix, installed, target) if options.with_tensorrt else TensorrtChange()
    hook_libs.update({s: p for s, p in trt.libraries.items() if s not in hook_libs})  # plan/tensorrt.py
    notes += trt.notes

    # NVIDIA wheels of another CUDA major in the folder a wheel to install writes (nvidia-cudnn-cu13 and -cu12 both
    # own nvidia/cudnn/lib): uninstalled first, or pip would overwrite their files and leave both half-installed.
    replaced: dict[str, WheelSpec] = {}
    for wheel in to_install.values():
        for occupant in occupying(facts, matrix, wheel):
            if occupant.name not in remove:
                remove.append(occupant.name)
                replaced[occupant.name] = wheel
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
    requirements += [genai.requirement] if genai.requirement else []
    requirements += [trt.requirement] if trt.requirement else []
    changed = replacements(facts, remove, requirements, required)
    by_name = {r.dist.normalized: r for r in changed}
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
        taken = by_name.get(dist.normalized)
        actions.append(Action(
            ActionKind.PIP_UNINSTALL, f"uninstall {dist.name} {dist.version}{why}",
            (f"- {dist.name} {dist.version} ({len(dist.files) or 'all'} files under {dist.location})"
             + (f": {taken.line()}" if taken and (taken.needs or taken.new) else ""),),
            "its files are moved aside into the transaction's stash and moved back on rollback, byte for byte",
            tuple(sorted({*(c for c in codes if c in UNINSTALL_FIXES), *repairs.remove.get(name, ()),
                          *(genai.fixes if name in genai.remove else ())})),
            {"distribution": dist.name, "version": dist.version, "location": dist.location,
             "dist_info": dist.dist_info}))

    if requirements:
        if choice.refused is not None:
            raise OrtfixError(f"--installer uv: {choice.refused}",
                              hint="use --installer pip (or auto); nothing was changed")
        if choice.note:
            notes.append(choice.note)
        if installer == "pip":
            notes += redirect_notes(facts.pip_config)
        if installer is None and facts.uv:
            notes.append("the target environment has no pip, and uv is not used (said above): install pip into it "
                         "first, or change the pip setting uv cannot follow")
        elif installer is None:
            notes.append("the target environment has no pip (and no uv was found): install pip into it first")
        if facts.probe.env_kind == "system" and externally_managed(facts.probe.prefix, facts.probe.python_version):
            notes.append("this system Python is externally managed (PEP 668): pip refuses to install into it, so "
                         "`ortfix apply --system` passes --break-system-packages, and what it installs can break the "
                         "distribution's own packages; a venv is better (python3 -m venv --system-site-packages DIR, "
                         "then plan for DIR/bin/python)")
        fixes = tuple(sorted({*(c for c in codes if c in UNINSTALL_FIXES or c in INSTALL_FIXES),
                              *repairs.installed_by(swap and target is not None, codes),
                              *((Code.GPU_ARCH,) if swap and arch_error else ()),
                              *((Code.TORCH_MISMATCH,) if share and Code.TORCH_MISMATCH in codes else ()),
                              *((Code.ZLIBWAPI_MISSING,) if swap and Code.ZLIBWAPI_MISSING in codes and target
                                and (target.cudnn_major or 0) >= 9 else ()),
                              *genai.fixes, *(c for c in TENSORRT_CODES if c in codes and trt.requirement)}))
        actions.append(Action(
            ActionKind.PIP_INSTALL, f"install {', '.join(requirements)}",
            (*(f"+ {r}" for r in requirements),
             *(f"~ {r.line()}" for r in changed if r.new is not None and r.dist.name not in remove)),
            "the installed distributions are uninstalled by moving their files aside, then discarded",
            fixes,
            {"requirements": requirements, "installer": installer,
             "reinstall": any(removal(f).get("reinstall") for f in by_code.get(Code.CPU_AND_GPU, []))}))
        if target is not None and target.index == "alternate":
            notes.append(f"{target.package} {target.version} for CUDA {target.cuda_major} is not on the default "
                         "package index but on a separate feed: configure it in your pip configuration first")

    # 3. symlinks missing next to versioned files inside the environment
    for f in by_code.get(Code.SONAME_LINK_MISSING, []):
        missing_link = soname_link(f)
        if not missing_link["inside_env"]:
            continue
        link = os.path.join(missing_link["directory"], missing_link["link"])
        actions.append(Action(
            ActionKind.SYMLINK, f"create {link} -> {missing_link['target']}",
            (f"+ {link} -> {missing_link['target']}",),
            "the link is removed", (Code.SONAME_LINK_MISSING,),
            {"path": link, "target": missing_link["target"]}))
        hook_libs.setdefault(missing_link["link"], link)

    # 4. make the libraries findable
    kind = hook_kind(facts, options)
    beaten = machine_path_shadows(facts, findings) if kind == "user-path" else {}
    if hook_libs and kind != "none":
        trt_codes = {c for c in codes if c not in TENSORRT_CODES or trt.libraries}
        actions += hook_actions(facts, kind, hook_libs, trt_codes - {Code.LIB_SHADOWED} if beaten else trt_codes)
        notes += [user_path_note(beaten)] if beaten else []
    elif hook_libs and is_store_python(facts):
        notes.append(f"libraries need to be made findable but {STORE_REASON}: {STORE_REMEDY}")
    elif hook_libs and facts.platform.is_windows:
        notes.append("libraries need to be made findable but --hook none was given: put these folders first on PATH: "
                     + ";".join(dll_folders(hook_libs)))
    elif hook_libs:
        notes.append("libraries need to be made findable but --hook none was given: set LD_LIBRARY_PATH to "
                     + ":".join(sorted({os.path.dirname(p) for p in hook_libs.values()})))

    # 5. the project around the environment: changed first, so a tool that cannot resolve stops the apply early
    project_actions, project_notes = project_changes(facts, target, requirements, options.project)
    actions[:0] = project_actions
    notes += project_notes

    unresolved = [f for f in findings if f.severity is not Severity.INFO and not _addressed(f, actions)]
    for soname in missing_no_wheel:
        notes.append(f"no NVIDIA pip wheel is known for {soname} (CUDA {cuda_major}): install it from the CUDA "
                     "toolkit or your distribution")
    if swap and target is not None:
        notes += list(target.reasons)
    notes += [n for n in (cudnn9_out_of_reach(codes, target, options, matrix),) if n]
    facts_fingerprint = facts.fingerprint()
    broken = [r for r in changed if r.broken]
    assert all(c in PLAN_FIXES for a in actions for c in a.fixes), "check/codes.py's PLAN_FIXES lists what a plan fixes"
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
        installer_options=choice.options if requirements else (),
    ), broken


def _installed_path(site: str, wheel: WheelSpec, soname: str, *, windows: bool) -> str:
    """Where `wheel` will install the library `soname` in the site-packages folder `site`: on Windows its DLL in the
    wheel's Windows folder (nvidia\\cublas\\bin), elsewhere the SONAME in its folder (nvidia/cublas/lib)."""
    if windows and wheel.windows_dir:
        return os.path.join(site, *wheel.windows_dir.split("/"), dll_name_for_soname(soname) or soname)
    return os.path.join(site, wheel.dir, soname)


def _inside(facts: Facts, path: str) -> bool:
    """Whether `path` lies in the target environment: an outside copy found first shadows the environment's own
    (what `check` reports as LIB004 once the build is installed)."""
    return (os.path.realpath(path) + os.sep).startswith(os.path.realpath(facts.probe.prefix) + os.sep)


def _addressed(finding: Finding, actions: Sequence[Action]) -> bool:
    if finding.code in (Code.ORT_DAMAGED, Code.LIB_DAMAGED):  # one finding per distribution: its own uninstall or none
        name = damage(finding)["distribution"]
        if not any(a.kind == ActionKind.PIP_UNINSTALL and a.details.get("distribution") == name for a in actions):
            return False
    return any(finding.code in a.fixes for a in actions)
