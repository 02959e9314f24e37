"""Which Platform serves the machine ortfix runs on: `platform_for(sys.platform)`, the one place a platform is
added (Linux, Windows)."""

from __future__ import annotations

import sys

from ortfix.system.linux.platform import LinuxPlatform
from ortfix.system.platform import Platform, unsupported

_NAMES = {"cygwin": "Cygwin", "darwin": "Darwin"}


def platform_for(sys_platform: str) -> Platform:
    """The Platform for a `sys.platform` value; an OrtfixError for one ortfix does not support yet."""
    if sys_platform.startswith("linux"):
        return LinuxPlatform()
    if sys_platform == "win32":
        from ortfix.system.windows.platform import (
            WindowsPlatform,  # deferred: Linux checks never import pefile's reader
        )

        return WindowsPlatform()
    raise unsupported(_NAMES.get(sys_platform, sys_platform))


def host_platform() -> Platform:
    """The Platform of the machine ortfix runs on (a target is checked on its own machine)."""
    return platform_for(sys.platform)
