"""The project around the environment (PRJ001): what makes the fix hold there. With `--project` a project-update
action (the project's own uv, poetry or pdm removes onnxruntime and adds the GPU build in the same section; the line
edit for requirements files), run first in the transaction; without it, a note with the exact commands or edit. A
lock file is never edited by ortfix: the tool rewrites it."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from packaging.utils import canonicalize_name

from ortfix.check.codes import FindingCode as Code
from ortfix.check.facts import Facts
from ortfix.errors import OrtfixError
from ortfix.i18n import N_, Msg
from ortfix.plan.kinds import ActionKind, ProjectUpdateDetails, RequirementEdit
from ortfix.plan.model import Action, ChosenBuild
from ortfix.plan.titles import project_title
from ortfix.safetext import visible
from ortfix.system.project import (
    PYPROJECT,
    TOOLS,
    Project,
    cpu_mentions,
    lock_file,
    replaced_line,
    requirement_name,
    sync_command,
    tool_commands,
    tool_refusal,
)


def project_changes(facts: Facts, target: ChosenBuild | None, requirements: Sequence[str], project_option: bool
                    ) -> tuple[list[Action], list[str | Msg]]:
    """(the project-update action, notes) for the plan; nothing when the project names no CPU onnxruntime."""
    project = facts.project
    if project is None or target is None or not cpu_mentions(project):
        return [], []
    add = [f"{target.package}=={target.version}", *_nvidia(facts, target, requirements, project.manager)]
    if project.manager in TOOLS:
        found = _tool_change(project, add)
    elif project.manager == "requirements":
        found = _requirement_edits(project, add[0])
    else:
        found = Msg(N_("the project's {file} names onnxruntime, and no uv, poetry or pdm manages it: edit it by "
                       "hand"), file=PYPROJECT)
    if isinstance(found, (str, Msg)):
        if project_option:
            raise OrtfixError(Msg(N_("--project: {reason}"), reason=found),
                              hint=Msg(N_("leave --project out to fix the environment alone; nothing was changed")))
        return [], [found]
    details, shown = found
    if not project_option:
        return [], [Msg(N_("a fix made only in the environment is undone by `{command}`; to make it hold in the "
                           "project: {change} (or apply with --project)"), command=sync_command(project),
                        change=shown)]
    return [Action(ActionKind.PROJECT_UPDATE, project_title(project.manager, project.folder),
                   tuple(f"~ {visible(project.folder)}/{visible(name)}" for name in details["files"]),
                   Msg(N_("the project's files are saved first and put back byte for byte")),
                   (Code.PROJECT_UNDOES,), dict(details))], []


def _nvidia(facts: Facts, target: ChosenBuild, requirements: Sequence[str], manager: str) -> list[str]:
    """The NVIDIA wheels the environment will have for the build: those the plan installs, else those installed for
    its CUDA major; for a tool's universal lock, only on the platform the wheels exist for."""
    wanted = [r for r in requirements if (requirement_name(r) or "").startswith("nvidia-")]
    if not any(requirement_name(r) == canonicalize_name(target.package) for r in requirements):
        suffix = f"-cu{target.cuda_major}"
        wanted = [f"{d.name}=={d.version}" for d in facts.probe.distributions
                  if d.normalized.startswith("nvidia-") and d.normalized.endswith(suffix)]
    if manager not in TOOLS:
        return wanted
    return [f'{r}; sys_platform == "{facts.platform.sys_platform}"' for r in wanted]


def _files(project: Project, names: Sequence[str]) -> dict[str, str]:
    """name → sha256 as check read it ("" when absent) of the project files the change may rewrite."""
    return {name: project.sha256(name) for name in names}


def _tool_change(project: Project, add: list[str]) -> tuple[ProjectUpdateDetails, str] | str | Msg:
    """(the details of a uv, poetry or pdm project's change; the commands as shown), or why there is none."""
    declared = [m for m in cpu_mentions(project) if m.file == PYPROJECT]
    if not declared:
        locked = cpu_mentions(project)[0]
        return Msg(N_("onnxruntime reaches the project through another dependency ({file}:{line}): replace that "
                      "dependency, or declare the GPU build and exclude the CPU one in its configuration"),
                   file=visible(locked.file), line=locked.line)
    sections = sorted({m.section for m in declared})
    if len(sections) > 1:
        return Msg(N_("onnxruntime is declared in several places of {file} ({sections}): change them by hand"),
                   file=PYPROJECT, sections=", ".join(sections))
    section = sections[0]
    refused = tool_refusal(project.manager, section)
    if refused is not None:
        return refused
    commands = tool_commands(project.manager, section, ["onnxruntime"], add)
    shown = " && ".join([f"cd {shlex.quote(visible(project.folder))}",
                         *(" ".join(shlex.quote(visible(a)) for a in argv) for argv in commands)])
    details: ProjectUpdateDetails = {
        "project": project.folder, "manager": project.manager, "section": section, "remove": ["onnxruntime"],
        "add": add, "files": _files(project, [PYPROJECT, lock_file(project.manager)]), "edits": []}
    return details, shown


def _requirement_edits(project: Project, requirement: str) -> tuple[ProjectUpdateDetails, str] | Msg:
    edits: list[RequirementEdit] = []
    for m in cpu_mentions(project):
        if m.section != "requirements" or not m.file.startswith("requirements"):
            continue  # a constraints file pins the CPU package only: harmless once nothing requires it
        new = replaced_line(m.text, requirement)
        if new is None:
            return Msg(N_("{file}:{line} continues on the next line (hashes?): replace its onnxruntime requirement "
                          "by {requirement} by hand"), file=visible(m.file), line=m.line, requirement=requirement)
        edits.append({"file": m.file, "line": m.line, "old": m.text, "new": new})
    if not edits:
        return Msg(N_("only constraints files name onnxruntime: nothing to change"))
    details: ProjectUpdateDetails = {
        "project": project.folder, "manager": "requirements", "section": "dependencies", "remove": [], "add": [],
        "files": _files(project, sorted({e["file"] for e in edits})), "edits": edits}
    shown = "; ".join(f"in {visible(project.folder)}/{visible(e['file'])} line {e['line']}: "
                      f"{visible(e['old'].strip())!r} → {visible(e['new'].strip())!r}" for e in edits)
    return details, shown
