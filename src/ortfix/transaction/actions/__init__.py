"""What each kind of plan action does to the environment, and how it is undone exactly: one handler per
`ActionKind` (pip_uninstall, pip_install, write_file, symlink, user_path, project), each with the contract in base.py.

Importing this package registers the six handlers, so `handler_for(kind)` works wherever it is used."""

from ortfix.transaction.actions.base import handler_for, register
from ortfix.transaction.actions.pip_install import PipInstall
from ortfix.transaction.actions.pip_uninstall import PipUninstall
from ortfix.transaction.actions.project import ProjectUpdate
from ortfix.transaction.actions.symlink import Symlink
from ortfix.transaction.actions.user_path import UserPath
from ortfix.transaction.actions.write_file import WriteFile

register(PipUninstall())
register(PipInstall())
register(WriteFile())
register(Symlink())
register(UserPath())
register(ProjectUpdate())

__all__ = ["handler_for"]
