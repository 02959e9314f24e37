"""The kinds of change a plan can hold: `plan` produces them, `actions` carries them out (one handler each).

Kept apart so that neither imports the other: planning stays free of the transaction machinery, and rollback
(which needs the handlers) stays free of the planning one."""

PIP_UNINSTALL = "pip-uninstall"
PIP_INSTALL = "pip-install"
WRITE_FILE = "write-file"
SYMLINK = "symlink"
