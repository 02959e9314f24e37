"""Findings → plan: the exact, ordered changes that would fix the environment, each with how it is undone.

`make_plan` is a pure function of facts, findings, the matrix and the options: it reads no file and changes nothing.
The least invasive fix wins: make libraries that are already installed findable before downloading anything, reuse
compatible copies (torch's, the conda prefix's) before installing duplicates, and never touch system folders.
The parts: model.py (what a plan is), choose_build.py (the ORT build), and the stages `_draft` runs in order, each a
pure function returning actions and notes: swap.py (the swap and what it uninstalls, with repairs.py for damaged
installs), genai.py (the onnxruntime-genai swap), needed_libraries.py (the libraries to provide), tensorrt.py,
pip_actions.py (the packages to uninstall and install), then here the links, the hooks (hook_actions.py: making
the libraries findable), the project (project_actions.py) and the closing notes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone

from ortfix import __version__
from ortfix.check.codes import PLAN_FIXES, Severity
from ortfix.check.codes import FindingCode as Code
from ortfix.check.diagnose import gpu_install
from ortfix.check.facts import Facts, OrtInstall
from ortfix.check.findings import Finding, damage, soname_link
from ortfix.check.requires import Consumer, Need, installed_needs, nvidia_consumers
from ortfix.check.winstore import STORE_REASON, STORE_REMEDY, is_store_python
from ortfix.compat.matrix import Matrix
from ortfix.errors import ExitCode, OrtfixError
from ortfix.i18n import N_, Msg
from ortfix.plan.choose_build import cudnn9_first, cudnn9_out_of_reach, ranked_builds
from ortfix.plan.genai import genai_change
from ortfix.plan.hook_actions import (
    hook_actions,
    hook_kind,
    load_order,
    machine_path_shadows,
    user_path_note,
)
from ortfix.plan.installer import choose_installer
from ortfix.plan.kinds import ActionKind
from ortfix.plan.model import Action, ChosenBuild, Plan, PlanOptions, plan_fingerprint
from ortfix.plan.needed_libraries import provide_libraries, stack_majors
from ortfix.plan.neighbours import Replacement, refusal
from ortfix.plan.pip_actions import pip_changes
from ortfix.plan.project_actions import project_changes
from ortfix.plan.schema import PLAN_SCHEMA
from ortfix.plan.swap import Swap, choose_swap
from ortfix.plan.tensorrt import TENSORRT_CODES, TensorrtChange, tensorrt_change
from ortfix.plan.titles import symlink_title


def make_plan(facts: Facts, findings: Sequence[Finding], matrix: Matrix, options: PlanOptions,
              *, now: datetime | None = None) -> Plan:
    """The plan for the best build that breaks no installed distribution (plan/neighbours.py); with --ort-version or
    --cuda, the build asked for or a one-line refusal naming the distribution it would break."""
    installed = gpu_install(facts)
    required = installed_needs(facts)
    consumers = nvidia_consumers(facts, matrix, required)
    ranked = cudnn9_first({f.code for f in findings}, ranked_builds(facts, matrix, options, installed, consumers),
                          options)
    first: tuple[Plan, Sequence[Replacement]] | None = None
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
    options_text = (Msg(N_("pass --ort-version/--cuda for a build of its CUDA/cuDNN majors ({majors})"),
                        majors=consumer.majors()) if consumer
                    else Msg(N_("pass --ort-version/--cuda for another build")))
    raise OrtfixError(refusal(first[1], options, Msg(N_("nothing was changed; {options}, or change {dependant} first"),
                                                     options=options_text, dependant=first[1][0].broken[0].dependant)),
                      hint=Msg(N_("`ortfix matrix show` lists the builds")), exit_code=ExitCode.PROBLEMS)


def _draft(facts: Facts, findings: Sequence[Finding], matrix: Matrix, options: PlanOptions,
           installed: OrtInstall | None, target: ChosenBuild | None, required: Sequence[Need],
           consumers: Sequence[Consumer], *, alternative: bool, now: datetime | None
           ) -> tuple[Plan, Sequence[Replacement]]:
    """The plan for `target` (an `alternative` to the first choice is always installed in place of the installed
    build), and the replacements in it that break another installed distribution. The stages, in order: swap
    (plan/swap.py), genai, libraries (plan/needed_libraries.py), TensorRT, packages (plan/pip_actions.py), links,
    hooks, the project, notes."""
    codes = {f.code for f in findings}
    by_code: dict[str, list[Finding]] = {}
    for f in findings:
        by_code.setdefault(f.code, []).append(f)
    choice = choose_installer(facts, options.installer)
    swap = choose_swap(facts, by_code, options, installed, target, consumers, alternative=alternative)
    target = swap.target
    genai = genai_change(facts, matrix, by_code, target, installed)  # plan/genai.py
    provided = provide_libraries(facts, matrix, by_code, target, installed, swap.swap)
    trt = tensorrt_change(facts, matrix, installed, target) if options.with_tensorrt else TensorrtChange()
    hook_libs = {**provided.hook_libs,
                 **{s: p for s, p in trt.libraries.items() if s not in provided.hook_libs}}  # plan/tensorrt.py
    pip = pip_changes(facts, matrix, by_code, swap, genai, trt, provided.to_install, choice, required)
    links, linked = link_actions(by_code)
    for name, path in linked.items():
        hook_libs.setdefault(name, path)
    hooks, hook_notes = hook_stage(facts, options, findings, hook_libs, trt)
    # the project around the environment: changed first, so a tool that cannot resolve stops the apply early
    project_actions, project_notes = project_changes(facts, target, list(pip.requirements), options.project)
    actions = [*project_actions, *pip.actions, *links, *hooks]
    notes = [*pip.genai.notes, *trt.notes, *pip.notes, *hook_notes, *project_notes,
             *closing_notes(matrix, options, codes, swap, provided.missing, stack_majors(target, installed)[0])]
    assert all(c in PLAN_FIXES for a in actions for c in a.fixes), "check/codes.py's PLAN_FIXES lists what a plan fixes"
    unresolved = [f for f in findings if f.severity is not Severity.INFO and not _addressed(f, actions)]
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
        installer=choice.installer,
        target=target,
        actions=tuple(actions),
        unresolved=tuple(unresolved),
        notes=tuple(notes),
        installer_options=choice.options if pip.requirements else (),
    ), pip.broken


def link_actions(by_code: Mapping[str, Sequence[Finding]]) -> tuple[list[Action], dict[str, str]]:
    """The links stage: a symlink for each SONAME link missing next to its versioned file inside the environment,
    and the links to make findable (name → path)."""
    actions: list[Action] = []
    linked: dict[str, str] = {}
    for f in by_code.get(Code.SONAME_LINK_MISSING, []):
        missing_link = soname_link(f)
        if not missing_link["inside_env"]:
            continue
        link = os.path.join(missing_link["directory"], missing_link["link"])
        actions.append(Action(
            ActionKind.SYMLINK, symlink_title(link, missing_link["target"]),
            (f"+ {link} -> {missing_link['target']}",),
            Msg(N_("the link is removed")), (Code.SONAME_LINK_MISSING,),
            {"path": link, "target": missing_link["target"]}))
        linked.setdefault(missing_link["link"], link)
    return actions, linked


def hook_stage(facts: Facts, options: PlanOptions, findings: Sequence[Finding], hook_libs: Mapping[str, str],
               trt: TensorrtChange) -> tuple[list[Action], list[str | Msg]]:
    """The hooks stage: the actions that make `hook_libs` (soname → path) findable, or the note that says how."""
    codes = {f.code for f in findings}
    kind = hook_kind(facts, options)
    beaten = machine_path_shadows(facts, findings) if kind == "user-path" else {}
    if hook_libs and kind != "none":
        trt_codes = {c for c in codes if c not in TENSORRT_CODES or trt.libraries}
        actions = hook_actions(facts, kind, hook_libs, trt_codes - {Code.LIB_SHADOWED} if beaten else trt_codes)
        return actions, [user_path_note(beaten)] if beaten else []
    if hook_libs and is_store_python(facts):
        return [], [Msg(N_("libraries need to be made findable but {reason}: {remedy}"), reason=Msg(STORE_REASON),
                        remedy=Msg(STORE_REMEDY))]  # Msg: translated where check/winstore.py marks them
    if hook_libs:
        return [], [Msg(N_("libraries need to be made findable but --hook none was given: {advice}"),
                        advice=facts.platform.no_hook_advice(load_order(hook_libs)))]
    return [], []


def closing_notes(matrix: Matrix, options: PlanOptions, codes: set[Code], swap: Swap, missing: Sequence[str],
                  cuda_major: int | None) -> list[str | Msg]:
    """The notes stage: the libraries no wheel provides, why the target build, and cuDNN 9 out of reach."""
    notes: list[str | Msg] = [Msg(N_("no NVIDIA pip wheel is known for {soname} (CUDA {cuda}): install it from the "
                                     "CUDA toolkit or your distribution"), soname=soname, cuda=str(cuda_major))
                                 for soname in missing]
    if swap.swap and swap.target is not None:
        notes += list(swap.target.reasons)
    notes += [n for n in (cudnn9_out_of_reach(codes, swap.target, options, matrix),) if n]
    return notes


def _addressed(finding: Finding, actions: Sequence[Action]) -> bool:
    if finding.code in (Code.ORT_DAMAGED, Code.LIB_DAMAGED):  # one finding per distribution: its own uninstall or none
        name = damage(finding)["distribution"]
        if not any(a.kind == ActionKind.PIP_UNINSTALL and a.details.get("distribution") == name for a in actions):
            return False
    return any(finding.code in a.fixes for a in actions)
