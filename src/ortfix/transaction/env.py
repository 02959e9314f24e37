"""The environment a transaction changes, opened for it: from the check's facts (refusing a system Python
unless `--system`, PEP 668's externally-managed mark) or from a journal (for rollback)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ortfix.errors import OrtfixError
from ortfix.i18n import N_, Msg, tr
from ortfix.target.locate import externally_managed
from ortfix.transaction.actions.base import TargetEnv, open_env, scripts_folder
from ortfix.transaction.journal import Transaction

if TYPE_CHECKING:
    from ortfix.check.facts import Facts


def target_env(facts: Facts, *, system: bool = False) -> TargetEnv:
    """The environment opened for changes (its root descriptor held; see system/confine.py). A system Python is changed
    only when the user says so (`--system`): its hooks and packages affect every program that uses it."""
    p = facts.probe
    if p.env_kind == "system" and not system:
        raise OrtfixError(Msg(N_("{python} is a system Python (prefix {prefix}): changing it affects every program "
                                 "that uses it, and ortfix changes only venvs and conda environments by default"),
                              python=p.executable, prefix=p.prefix),
                          hint=Msg(N_("make a venv ({command}) and use that, or pass --system to change it anyway"),
                                   command=venv_command(p.windows is not None)))
    return open_env(p.executable, p.prefix, p.purelib, p.platlib, scripts_folder(p.prefix), p.env_kind,
                    uv=facts.uv, break_system_packages=system and externally_managed(p.prefix, p.python_version))


def venv_command(windows: bool) -> str:
    """How a user makes a venv: on Windows with the launcher (`python3` there may be the Store's stub)."""
    return "py -m venv DIR" if windows else "python3 -m venv DIR"


def system_warning(env: TargetEnv) -> str:
    return tr("--system: changing the system environment {prefix}: the packages and hooks written to {purelib} are "
              "seen by every program that runs {python}", prefix=env.prefix, purelib=env.purelib, python=env.python)


def env_from_journal(tx: Transaction) -> TargetEnv:
    """The environment a journal was written for; its paths are checked to lie inside the prefix the journal was
    found in (TransactionStore.load checked that both prefixes the journal names are that one)."""
    t = tx.target
    return open_env(t["python"], t["prefix"], t["purelib"], t["platlib"], t["scripts"], t["env_kind"])

