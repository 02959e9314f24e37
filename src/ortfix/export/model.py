"""What every export renderer reads: the plan (made now, or a saved plan accepted as `apply` accepts it), the
target it was made for, the exact pins, and the reasons (finding code → summary) its actions fix."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ortfix.export.pins import Pin
from ortfix.plan.model import Action, Plan
from ortfix.strenum import StrEnum


class ExportFormat(StrEnum):
    REQUIREMENTS = "requirements"
    DOCKERFILE = "dockerfile"
    SH = "sh"
    PS1 = "ps1"


@dataclass(frozen=True)
class ExportInput:
    plan: Plan
    python: str  # the target's interpreter (absolute), as ortfix found it
    prefix: str  # its environment (sys.prefix)
    pins: tuple[Pin, ...]  # what the plan's pip-install installs, exactly
    reasons: Mapping[str, str]  # finding code → its one-line summary

    def actions(self, kind: str) -> list[Action]:
        return [a for a in self.plan.actions if a.kind == kind]

    @property
    def hashes_complete(self) -> bool:
        """pip's hash-checking mode is all-or-nothing: hashes are written only when every pin has one."""
        return bool(self.pins) and all(p.sha256 for p in self.pins)

    def reason_lines(self, action: Action) -> list[str]:
        """One line per reason the action is there: the findings it fixes (or its summary when it fixes none)."""
        if not action.fixes:
            return [action.summary]
        return [f"{code}: {self.reasons.get(code, action.summary)}" for code in action.fixes]

    def header(self, what: str) -> list[str]:
        plan = self.plan
        return [f"{what}, exported by ortfix {plan.ortfix_version} from plan {plan.fingerprint}",
                f"for {self.prefix} (made with {self.python})",
                *([f"for a machine with NVIDIA driver {plan.options.driver_version}"]
                  if plan.options.driver_version else []),
                *([f"for a GPU of compute capability {plan.options.compute_capability}"]
                  if plan.options.compute_capability else [])]
