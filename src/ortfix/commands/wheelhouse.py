"""`ortfix wheelhouse -d DIR`: everything the plan (made now, or a saved plan accepted as `apply` accepts it) needs
on an offline machine, and ortfix itself, downloaded into DIR with a manifest; the result says the one command that
uses it."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from ortfix.commands.apply import prepare_apply
from ortfix.commands.export import require_pip
from ortfix.errors import ExitCode
from ortfix.export.pipprogress import DownloadProgress
from ortfix.export.wheelhouse import Wheelhouse, WheelhouseTarget, build_wheelhouse, new_wheelhouse_folder
from ortfix.plan.kinds import ActionKind
from ortfix.plan.model import PlanOptions
from ortfix.system.wheelmanifest import OWN_REQUIREMENTS


@dataclass(frozen=True)
class WheelhouseResult:
    wheelhouse: Wheelhouse
    prefix: str
    source: str  # "planned now" or the plan file

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.OK

    @property
    def apply_command(self) -> str:
        folder = shlex.quote(str(Path(self.wheelhouse.folder).resolve()))
        return f"PIP_NO_INDEX=1 PIP_FIND_LINKS={folder} ortfix apply --python {shlex.quote(self.prefix)}"

    @property
    def install_ortfix_command(self) -> str:
        folder = Path(self.wheelhouse.folder).resolve()
        return (f"pip install --no-index --find-links {shlex.quote(str(folder))} --require-hashes -r "
                f"{shlex.quote(str(folder / OWN_REQUIREMENTS))}")


def run_wheelhouse(python: str | None, plan_file: Path | None, options: PlanOptions, folder: Path,
                   target: WheelhouseTarget, progress: DownloadProgress | None = None) -> WheelhouseResult:
    new_wheelhouse_folder(folder)  # before anything else: planning takes a while
    prepared = prepare_apply(python, plan_file, options)
    require_pip(prepared)  # the downloads are the target's pip's (its platform, its Python)
    plan = prepared.plan
    installs = [a for a in plan.actions if a.kind == ActionKind.PIP_INSTALL]
    requirements = [str(r) for a in installs for r in a.detail_items("requirements")]
    reasons = {str(f.code): f.summary for f in prepared.check.findings}
    why = [f"{c}: {reasons.get(c, a.summary)}" for a in installs for c in a.fixes] or [str(a.summary) for a in installs]
    house = build_wheelhouse(plan.python, requirements, list(dict.fromkeys(why)), folder, target, progress)
    return WheelhouseResult(house, plan.prefix, prepared.source)
