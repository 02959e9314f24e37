"""The environment's project (PRJ001): its files name the CPU onnxruntime, so a fix made only in the environment is
undone by the project tool's next sync (or `pip install -r`)."""

from __future__ import annotations

from ortfix.check.codes import FindingCode, Severity
from ortfix.check.facts import Facts
from ortfix.check.findings import Finding
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
    tool = "the project's tool" if project.manager in ("requirements", "pyproject") else project.manager
    return [Finding(
        FindingCode.PROJECT_UNDOES, Severity.WARNING,
        f"the {project.manager} project at {visible(project.folder)} names onnxruntime (the CPU build): a fix made "
        f"only in the environment is undone by the next `{sync}`, which puts the CPU build back and removes "
        "onnxruntime-gpu and the NVIDIA wheels",
        tuple(f"{visible(m.file)}:{m.line}: {visible(m.text.strip())}" for m in named),
        f"ortfix apply --project changes the project too (through {tool}; `ortfix plan` shows the exact commands)",
        {})]
