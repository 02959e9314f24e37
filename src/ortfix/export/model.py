"""What every export renderer reads: the plan (made now, or a saved plan accepted as `apply` accepts it), the
target it was made for, the exact pins, and the reasons (finding code → summary) its actions fix; and the two ways
every renderer puts a value into its file. Summaries and reasons quote what packages wrote (a METADATA `Version:`
may hold a line end that pip's `splitlines()` or PowerShell's lone `\r` reads as one): a comment line escapes every
control (`comment`), and a value in a command or a path, which cannot be escaped without changing it, is refused
with one line when it holds one (`plain`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ortfix.errors import OrtfixError
from ortfix.export.pins import Pin
from ortfix.i18n import N_, Msg, text, tr
from ortfix.plan.model import Action, Plan
from ortfix.safetext import escaped, first_control, visible
from ortfix.strenum import StrEnum


def comment(text: str) -> str:
    """One comment line (`# text`) of any exported file: a line end or a terminal control in `text` is escaped, so
    the comment cannot end early and start a requirement, an instruction or a command."""
    return f"# {visible(text)}"


def plain(text: str) -> str:
    """`text`, for a command's argument, a requirement or a path in an exported file; an OrtfixError when it holds a
    control (safetext.first_control) or is not UTF-8: quoting keeps a shell from running it, but a Dockerfile or a
    requirements file ends the line there, and the file would show it raw."""
    ch = first_control(text, surrogates=True)
    if ch is None:
        return text
    raise OrtfixError(Msg(N_("{value} contains a control character ({char}): an exported file cannot name it safely "
                             "(a line break would start a command)"), value=visible(text), char=escaped(ch)),
                      hint=Msg(N_("remove or rename what holds it in the environment, or apply the plan with ortfix "
                                  "there")))


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
    reasons: Mapping[str, str | Msg]  # finding code → its one-line summary

    def actions(self, kind: str) -> list[Action]:
        return [a for a in self.plan.actions if a.kind == kind]

    @property
    def hashes_complete(self) -> bool:
        """pip's hash-checking mode is all-or-nothing: hashes are written only when every pin has one."""
        return bool(self.pins) and all(p.sha256 for p in self.pins)

    def reason_lines(self, action: Action) -> list[str]:
        """One line per reason the action is there: the findings it fixes (or its summary when it fixes none)."""
        if not action.fixes:
            return [text(action.summary)]
        return [f"{code}: {text(self.reasons.get(code, action.summary))}" for code in action.fixes]

    def header(self, what: str) -> list[str]:
        """The first comment lines of a file (`what`: a marked name, "Fix script"), in the language of the file's
        comments (i18n.rendered_in)."""
        plan = self.plan
        return [tr("{what}, exported by ortfix {version} from plan {fingerprint}", what=Msg(what),
                   version=plan.ortfix_version, fingerprint=plan.fingerprint),
                tr("for {prefix} (made with {python})", prefix=self.prefix, python=self.python),
                *([tr("for a machine with NVIDIA driver {version}", version=plan.options.driver_version)]
                  if plan.options.driver_version else []),
                *([tr("for a GPU of compute capability {cc}", cc=plan.options.compute_capability)]
                  if plan.options.compute_capability else [])]
