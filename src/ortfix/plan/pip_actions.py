"""The plan's packages stage: the pip-uninstall actions (what the swap, the genai swap and the repairs remove, and the
NVIDIA wheels of another CUDA major in a folder a wheel to install writes) and the one pip-install action (the target
build, the NVIDIA wheels to install, the pinned reinstalls, genai and TensorRT), with the notes about the installer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from packaging.utils import canonicalize_name

from ortfix.check.codes import INSTALL_FIXES, UNINSTALL_FIXES
from ortfix.check.codes import FindingCode as Code
from ortfix.check.facts import Facts
from ortfix.check.findings import Finding, removal
from ortfix.check.requires import Need
from ortfix.compat.matrix import Matrix
from ortfix.compat.model import WheelSpec
from ortfix.errors import OrtfixError
from ortfix.i18n import N_, Msg
from ortfix.plan.genai import GenaiChange, genai_breaks
from ortfix.plan.installer import InstallerChoice, redirect_notes
from ortfix.plan.kinds import ActionKind
from ortfix.plan.model import Action
from ortfix.plan.needed_libraries import occupying
from ortfix.plan.neighbours import Replacement, replacements
from ortfix.plan.swap import Swap, codes_of
from ortfix.plan.tensorrt import TENSORRT_CODES, TensorrtChange
from ortfix.plan.titles import pip_install_title, pip_uninstall_title
from ortfix.target.locate import externally_managed


@dataclass(frozen=True)
class PipChanges:
    actions: tuple[Action, ...]  # the uninstalls, then the install
    notes: tuple[str | Msg, ...]
    requirements: tuple[str, ...]  # what the install asks for
    broken: tuple[Replacement, ...]  # the replacements that break another installed distribution
    genai: GenaiChange  # the genai swap planned: the one asked for, or none where it breaks a neighbour (its note)


def pip_changes(facts: Facts, matrix: Matrix, by_code: Mapping[str, Sequence[Finding]], swap: Swap,
                genai: GenaiChange, trt: TensorrtChange, to_install: Mapping[str, WheelSpec],
                choice: InstallerChoice, required: Sequence[Need]) -> PipChanges:
    """The packages to uninstall and install for `swap`, the NVIDIA wheels `to_install`, genai and TensorRT."""
    remove = list(swap.remove)
    remove += [n for n in genai.remove if n not in remove]
    # NVIDIA wheels of another CUDA major in the folder a wheel to install writes (nvidia-cudnn-cu13 and -cu12 both
    # own nvidia/cudnn/lib; tensorrt-cu13-libs, -cu12-libs and tensorrt-libs all own tensorrt_libs): uninstalled first,
    # or pip would overwrite their files and leave both half-installed.
    replaced: dict[str, WheelSpec] = {}
    for wheel in (*to_install.values(), *((trt.wheel,) if trt.wheel else ())):
        for occupant in occupying(facts, matrix, wheel):
            if occupant.name not in remove:
                remove.append(occupant.name)
                replaced[occupant.name] = wheel
    requirements, notes = _requirements(facts, matrix, swap, genai, trt, to_install)
    changed = replacements(facts, remove, requirements, required)
    kept = genai_breaks(genai, changed)
    if kept is not None:  # the genai swap breaks a neighbour: planned without it
        return pip_changes(facts, matrix, by_code, swap, GenaiChange(notes=(*genai.notes, kept)), trt, to_install,
                           choice, required)
    actions, outside = uninstall_actions(facts, by_code, swap, genai, remove, replaced, changed)
    notes += outside
    if requirements:
        install, install_notes = install_action(facts, by_code, swap, genai, trt, choice, requirements,
                                                [r for r in changed if r.new is not None and r.dist.name not in remove])
        actions.append(install)
        notes += install_notes
    return PipChanges(tuple(actions), tuple(notes), tuple(requirements), tuple(r for r in changed if r.broken), genai)


def _requirements(facts: Facts, matrix: Matrix, swap: Swap, genai: GenaiChange, trt: TensorrtChange,
                  to_install: Mapping[str, WheelSpec]) -> tuple[list[str], list[str | Msg]]:
    """What the install asks for, in order, and the notes on the NVIDIA wheels' pins."""
    requirements: list[str] = []
    notes: list[str | Msg] = []
    target = swap.target
    if swap.swap and target is not None:
        requirements.append(f"{target.package}=={target.version}")
    for wheel in to_install.values():
        if canonicalize_name(wheel.distribution) not in swap.repairs.requirements:  # reinstalled at its own version
            wanted = matrix.wheel_requirement(wheel, facts.driver.version, facts.platform.matrix_os,
                                            facts.probe.machine)
            requirements.append(wanted.requirement)
            if wanted.note:
                notes.append(wanted.note)
    requirements += [r for r in swap.repairs.requirements.values() if r not in requirements]
    requirements += [genai.requirement] if genai.requirement else []
    requirements += [trt.requirement] if trt.requirement else []
    return requirements, notes


def uninstall_actions(facts: Facts, by_code: Mapping[str, Sequence[Finding]], swap: Swap, genai: GenaiChange,
                      remove: Sequence[str], replaced: Mapping[str, WheelSpec],
                      changed: Sequence[Replacement]) -> tuple[list[Action], list[str | Msg]]:
    """One pip-uninstall per distribution in `remove` inside the environment; a note for each outside it."""
    codes = codes_of(by_code)
    by_name = {r.dist.normalized: r for r in changed}
    actions: list[Action] = []
    notes: list[str | Msg] = []
    for name in remove:
        dist = next((d for d in facts.probe.distributions if d.name == name), None)
        if dist is None:
            continue
        if not facts.platform.inside(dist.location, facts.probe.prefix):
            # Never a change outside the environment: what is installed into it comes first on its sys.path.
            notes.append(Msg(N_("{name} {version} in {location} is outside this environment and stays; what this "
                                "plan installs into the environment is imported before it"),
                             name=dist.name, version=dist.version, location=dist.location))
            continue
        why = (Msg(N_(" ({distribution} installs into the same folder, {dir})"),
                   distribution=replaced[name].distribution, dir=replaced[name].dir) if name in replaced else "")
        taken = by_name.get(dist.normalized)
        actions.append(Action(
            ActionKind.PIP_UNINSTALL, pip_uninstall_title(dist.name, dist.version, why),
            (Msg(N_("- {name} {version} ({files} files under {location}){taken}"), name=dist.name,
                 version=dist.version, files=len(dist.files) or Msg(N_("all")), location=dist.location,
                 taken=Msg(": {line}", line=taken.line()) if taken and (taken.needs or taken.new) else ""),),
            Msg(N_("its files are moved aside into the transaction's stash and moved back on rollback, byte for "
                   "byte")),
            tuple(sorted({*(c for c in codes if c in UNINSTALL_FIXES), *swap.repairs.remove.get(name, ()),
                          *(genai.fixes if name in genai.remove else ())})),
            {"distribution": dist.name, "version": dist.version, "location": dist.location,
             "dist_info": dist.dist_info}))
    return actions, notes


def install_action(facts: Facts, by_code: Mapping[str, Sequence[Finding]], swap: Swap, genai: GenaiChange,
                   trt: TensorrtChange, choice: InstallerChoice, requirements: Sequence[str],
                   moved: Sequence[Replacement]) -> tuple[Action, list[str | Msg]]:
    """The one pip-install of `requirements` (`moved`: the other distributions it moves), and its notes."""
    codes = codes_of(by_code)
    target = swap.target
    notes = installer_notes(facts, choice)
    fixes = tuple(sorted({*(c for c in codes if c in UNINSTALL_FIXES or c in INSTALL_FIXES),
                          *swap.repairs.installed_by(swap.swap and target is not None, codes),
                          *((Code.GPU_ARCH,) if swap.swap and swap.arch_error else ()),
                          *((Code.TORCH_MISMATCH,) if swap.share and Code.TORCH_MISMATCH in codes else ()),
                          *((Code.ZLIBWAPI_MISSING,) if swap.swap and Code.ZLIBWAPI_MISSING in codes and target
                            and (target.cudnn_major or 0) >= 9 else ()),
                          *genai.fixes, *(c for c in TENSORRT_CODES if c in codes and trt.requirement)}))
    action = Action(
        ActionKind.PIP_INSTALL, pip_install_title(requirements),
        (*(f"+ {r}" for r in requirements), *(Msg("~ {line}", line=r.line()) for r in moved)),
        Msg(N_("the installed distributions are uninstalled by moving their files aside, then discarded")),
        fixes,
        {"requirements": list(requirements), "installer": choice.installer,
         "reinstall": any(removal(f).get("reinstall") for f in by_code.get(Code.CPU_AND_GPU, []))})
    if target is not None and target.index == "alternate":
        notes.append(Msg(N_("{package} {version} for CUDA {cuda} is not on the default package index but on a "
                            "separate feed: configure it in your pip configuration first"),
                         package=target.package, version=target.version, cuda=target.cuda_major))
    return action, notes


def installer_notes(facts: Facts, choice: InstallerChoice) -> list[str | Msg]:
    """What to know about the installer before an install: uv refused (an error), not picked, pip's redirects, no
    installer at all, an externally managed system Python."""
    if choice.refused is not None:
        raise OrtfixError(Msg(N_("--installer uv: {reason}"), reason=choice.refused),
                          hint=Msg(N_("use --installer pip (or auto); nothing was changed")))
    notes: list[str | Msg] = []
    if choice.note:
        notes.append(choice.note)
    if choice.installer == "pip":
        notes += redirect_notes(facts.pip_config)
    if choice.installer is None and facts.uv:
        notes.append(Msg(N_("the target environment has no pip, and uv is not used (said above): install pip into "
                            "it first, or change the pip setting uv cannot follow")))
    elif choice.installer is None:
        notes.append(Msg(N_("the target environment has no pip (and no uv was found): install pip into it first")))
    if facts.probe.env_kind == "system" and externally_managed(facts.probe.prefix, facts.probe.python_version):
        notes.append(Msg(N_("this system Python is externally managed (PEP 668): pip refuses to install into it, so "
                            "`ortfix apply --system` passes --break-system-packages, and what it installs can break "
                            "the distribution's own packages; a venv is better (python3 -m venv "
                            "--system-site-packages DIR, then plan for DIR/bin/python)")))
    return notes
