"""Each kind of action's one-line title, built from the values its details hold: what `plan` shows as the action's
summary, and what apply, rollback and history show again for a step read back from a plan or journal (the files keep
the English summary; a handler rebuilds the title from the step's validated details: transaction/actions/base.py).

A title is an `i18n.Msg`: `str()` is the English written into plans and journals, `.text()` the language chosen. A
plan may say more than the details hold (why a distribution is uninstalled, what a hook file does): `extra` adds it
to the plan's own title."""

from __future__ import annotations

from collections.abc import Sequence

from ortfix.i18n import N_, Msg
from ortfix.safetext import visible


def pip_uninstall_title(distribution: str, version: str, extra: str | Msg = "", *, replaced: bool = False) -> Msg:
    """`replaced`: a step apply adds for what the installer would replace (transaction/preflight.py)."""
    if replaced:
        return Msg(N_("move aside {name} {version} (pip would replace it)"), name=distribution, version=version)
    return Msg(N_("uninstall {name} {version}{why}"), name=distribution, version=version, why=extra)


def pip_install_title(requirements: Sequence[str]) -> Msg:
    return Msg(N_("install {requirements}"), requirements=", ".join(requirements))


def write_file_title(path: str, replaces: bool, what: str | Msg | None = None) -> Msg:
    if what is None:
        return Msg(N_("replace {path}") if replaces else N_("write {path}"), path=path)
    return Msg(N_("replace {path}: {what}") if replaces else N_("write {path}: {what}"), path=path, what=what)


def symlink_title(path: str, target: str) -> Msg:
    return Msg(N_("create {link} -> {target}"), link=path, target=target)


def user_path_title(entries: int) -> Msg:
    return Msg(N_("add {n} folder(s) at the front of the user PATH (HKCU\\Environment, for programs started "
                  "afterwards)"), n=entries)


def project_title(manager: str, folder: str) -> Msg:
    return Msg(N_("update the {manager} project at {folder}"), manager=manager, folder=visible(folder))
