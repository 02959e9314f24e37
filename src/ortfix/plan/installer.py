"""Which installer a plan's install runs with (`--installer auto|pip|uv`), and the uv options it shows.

auto: uv when a uv executable is found (PATH, or beside ortfix's own interpreter) and the user's pip configuration
translates to uv options with the same meaning (system/uvargs.py), else the target's pip; uv where the target has
no pip. pip: the target's own pip. uv: uv, or the one line why not (make_plan raises it when there is something to
install). The choice is a pure function of the facts: what uv and the pip configuration were at check time.
"""

from __future__ import annotations

from dataclasses import dataclass

from ortfix.check.facts import Facts
from ortfix.i18n import N_, Msg
from ortfix.plan.kinds import Installer
from ortfix.system.pipconfig import PipConfig
from ortfix.system.uvargs import UvOptions, translate


@dataclass(frozen=True)
class InstallerChoice:
    installer: Installer | None  # None: the environment has no installer ortfix may use
    options: tuple[str, ...] = ()  # uv's options as shown (credentials redacted)
    note: Msg | None = None  # why auto did not pick uv although uv is there
    refused: str | Msg | None = None  # why --installer uv cannot be honoured


def _uv(facts: Facts) -> UvOptions | str | Msg:
    if not facts.uv:
        return Msg(N_("no uv executable was found on PATH or beside ortfix's own interpreter"))
    if facts.pip_config is None:
        return Msg(N_("the pip configuration could not be read"))
    return translate(facts.pip_config)


def redirect_notes(config: PipConfig | None) -> list[str | Msg]:
    """What the plan says of pip settings that would send the install elsewhere: `target`/`prefix`/`root` make apply
    refuse; `user` is ignored (`--no-user`)."""
    if config is None:
        return []
    notes: list[str | Msg] = []
    redirect = config.redirect()
    if redirect is not None:
        notes.append(Msg(N_("{setting}: apply refuses to run pip with it; remove that setting first"),
                         setting=redirect))
    user = config.user_install()
    if user is not None:
        notes.append(Msg(N_("your pip configuration sets user = true ({where}): ignored, pip installs into the "
                            "environment (--no-user)"), where=user))
    return notes


def choose_installer(facts: Facts, wanted: str) -> InstallerChoice:
    has_pip = facts.probe.has_pip
    uv = _uv(facts) if wanted != "pip" else None
    if isinstance(uv, UvOptions):
        return InstallerChoice("uv", uv.shown)
    if wanted == "uv":
        return InstallerChoice("pip" if has_pip else None, refused=uv)
    if has_pip:
        note = Msg(N_("installing with pip, not uv: {reason}"), reason=uv) if facts.uv and uv is not None else None
        return InstallerChoice("pip", note=note)
    return InstallerChoice(None, note=Msg(N_("uv cannot be used: {reason}"), reason=uv) if facts.uv and uv is not None
                           else None)
