"""The platform seam: everything about the target's operating system that the facts depend on, behind one Protocol —
how the OS loader resolves a library (simulated), how libraries are named and read (ELF or PE: `LibraryReader`),
the library search variable, where the loader looks by default, the driver and the library copies on the machine,
and which hooks can make libraries findable. `check/facts.py` reaches these only through a `Platform`; Linux is
`system/linux/platform.py`, Windows `system/windows/platform.py`, chosen by `system/platforms.py` (`platform_for`).
The Protocols themselves are in system/platform_protocols.py (check's path names them for mypy only); here are the
records they answer with."""

from __future__ import annotations

from ortfix.errors import OrtfixError
from ortfix.i18n import N_, Msg
from ortfix.record import frozen


@frozen
class MachineLoader:
    """How the machine's loader is set up, read once per check: where its index of installed libraries comes from
    (Linux: /etc/ld.so.cache) and the folders it searches when nothing else names one."""

    index_source: str
    default_dirs: tuple[str, ...]


@frozen
class InstalledHooks:
    """What ortfix's installed hooks do to a fresh process of the target."""

    search_prepend: tuple[str, ...]  # folders put first on the library search path on activation
    preloaded: tuple[str, ...]  # libraries loaded by absolute path at interpreter start-up
    files_present: tuple[str, ...]  # the files ortfix's hooks would occupy that exist already


@frozen
class HookFile:
    """One file of a hook that makes libraries findable, rendered: where it goes, its content, and what it does."""

    path: str
    content: str
    summary: str | Msg  # English in plan files and journals (str()), translated on the screen


def unsupported(system: str) -> OrtfixError:
    """The one-line error for a target whose operating system has no Platform yet."""
    return OrtfixError(Msg(N_("{system} is not supported yet: ortfix knows Linux (glibc) and Windows"), system=system),
                       hint=Msg(N_("run ortfix on Linux or Windows")))
