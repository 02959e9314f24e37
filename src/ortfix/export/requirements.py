"""The plan as a requirements file: one exact pin per line (every distribution a fresh environment needs), each
preceded by the reasons it is there, with `--hash=sha256:` on every line when pip reported a hash for every archive
(pip's hash-checking mode is all-or-nothing), else none and one comment saying why."""

from __future__ import annotations

from ortfix.export.model import ExportInput, comment
from ortfix.i18n import N_, Joined, tr
from ortfix.plan.kinds import ActionKind


def render_requirements(inp: ExportInput) -> str:
    lines = [comment(line) for line in inp.header(N_("Requirements"))]
    removes = inp.actions(ActionKind.PIP_UNINSTALL)
    if removes:
        names = " ".join(str(a.details["distribution"]) for a in removes)
        lines.append(comment(tr("Uninstall first (a requirements file cannot): pip uninstall -y {names}", names=names)))
    installs = inp.actions(ActionKind.PIP_INSTALL)
    if not inp.pins:
        lines.append(comment(tr("Nothing to install: the plan installs no package.")))
        return "\n".join(lines) + "\n"
    hashes = inp.hashes_complete
    if not hashes:
        missing = [p.name for p in inp.pins if not p.sha256]
        lines.append(comment(tr("No hashes: pip reported none for {names}, and pip's hash-checking mode needs one on "
                                "every line.", names=Joined(N_(", "), missing))))
    reasons = [r for a in installs for r in inp.reason_lines(a)]
    lines += [comment(r) for r in dict.fromkeys(reasons)]
    requested, deps = [p for p in inp.pins if p.requested], [p for p in inp.pins if not p.requested]
    lines += [pin.spec + (f" --hash=sha256:{pin.sha256}" if hashes else "") for pin in requested]
    if deps:
        lines.append(comment(tr("Their dependencies:")))
        lines += [pin.spec + (f" --hash=sha256:{pin.sha256}" if hashes else "") for pin in deps]
    hooks = [a for a in inp.plan.actions if a.kind not in (ActionKind.PIP_INSTALL, ActionKind.PIP_UNINSTALL)]
    if hooks:
        lines.append(comment(tr("Not in a requirements file: {count} more change(s) of the plan (making the "
                                "libraries findable); see `ortfix export dockerfile` or `ortfix export sh`.",
                                count=len(hooks))))
    return "\n".join(lines) + "\n"
