"""The environment's confined root on this host, `EnvRoot`: descriptors and `*at()` calls on POSIX
(system/linux/confine.py's `PosixEnvRoot`), pinned folder handles and reparse point checks on Windows
(system/windows/confine.py's `WindowsEnvRoot`), one interface; and `open_for_reading`, a file read by its path never
through a final link (or reparse point). What both share is system/envpaths.py's, re-exported here for the
transaction layer. Chosen once, at import, for the machine ortfix runs on (system/host.py chooses the rest of the
host seam)."""

from __future__ import annotations

import sys

from ortfix.system.envpaths import (
    ConfinementError,
    Kept,
    check_rel,
    read_regular,
    require_trusted_owner,
    write_all,
)

if sys.platform == "win32":
    from ortfix.system.windows.confine import WindowsEnvRoot as EnvRoot
    from ortfix.system.windows.confine import open_for_reading
else:
    from ortfix.system.linux.confine import PosixEnvRoot as EnvRoot
    from ortfix.system.linux.confine import open_for_reading

__all__ = ["ConfinementError", "EnvRoot", "Kept", "check_rel", "open_for_reading", "read_regular",
           "require_trusted_owner", "write_all"]
