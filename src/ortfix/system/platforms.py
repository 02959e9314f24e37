"""Which Platform serves the machine ortfix runs on: `platform_for(sys.platform)`, the one place a new platform
(Windows next) is added."""

from __future__ import annotations

from ortfix.system.linux import LinuxPlatform
from ortfix.system.platform import Platform, unsupported

_NAMES = {"win32": "Windows", "cygwin": "Windows", "darwin": "Darwin"}


def platform_for(sys_platform: str) -> Platform:
    """The Platform for a `sys.platform` value; an OrtfixError for one ortfix does not support yet."""
    if sys_platform.startswith("linux"):
        return LinuxPlatform()
    raise unsupported(_NAMES.get(sys_platform, sys_platform))
