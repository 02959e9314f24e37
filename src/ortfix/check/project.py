"""The environment's project (PRJ001): its files name the CPU onnxruntime, so a fix made only in the environment is
undone by the project tool's next sync (or `pip install -r`)."""

from __future__ import annotations

from ortfix.check.codes import FindingCode, Severity
from ortfix.check.facts import Facts
from ortfix.check.findings import Finding
from ortfix.i18n import N_, Msg
from ortfix.safetext import visible
from ortfix.system.project import cpu_mentions, sync_command


def project_findings(facts: Facts) -> list[Finding]:
    project = facts.project
    if project is None:
        return []
    named = cpu_mentions(project)
    if not named:
        return []
    sync = sync_command(project)
    tool = Msg(N_("the project's tool")) if project.manager in ("requirements", "pyproject") else project.manager
    return [Finding(
        FindingCode.PROJECT_UNDOES, Severity.WARNING,
        Msg(N_("the {manager} project at {folder} names onnxruntime (the CPU build): a fix made only in the "
               "environment is undone by the next `{sync}`, which puts the CPU build back and removes onnxruntime-gpu "
               "and the NVIDIA wheels"), manager=project.manager, folder=visible(project.folder), sync=sync),
        tuple(f"{visible(m.file)}:{m.line}: {visible(m.text.strip())}" for m in named),
        Msg(N_("ortfix apply --project changes the project too (through {tool}; `ortfix plan` shows the exact "
               "commands)"), tool=tool),
        {})]
