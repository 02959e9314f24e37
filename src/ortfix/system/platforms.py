"""Which Platform serves the machine ortfix runs on: `platform_for(sys.platform)`, from one registry (`PLATFORMS`):
the one place a platform is added. Linux and Windows are registered here; another OS is one folder
(`system/<os>/`, its `Platform` and host) plus one line below (`register` does the same at run time)."""

from __future__ import annotations

import sys
from collections.abc import Callable

from ortfix.system.platform import unsupported

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ortfix.system.platform_protocols import Platform

_NAMES = {"cygwin": "Cygwin", "darwin": "Darwin"}


def _linux() -> Platform:
    from ortfix.system.linux.platform import LinuxPlatform

    return LinuxPlatform()


def _windows() -> Platform:
    from ortfix.system.windows.platform import WindowsPlatform  # deferred: Linux checks never import pefile's reader

    return WindowsPlatform()


# `sys.platform` (a prefix of it: 'linux' is also 'linux2') -> the factory of the Platform that serves it.
PLATFORMS: dict[str, Callable[[], Platform]] = {"linux": _linux, "win32": _windows}


def register(sys_platform: str, factory: Callable[[], Platform]) -> None:
    """Serve the targets whose `sys.platform` starts with `sys_platform` with the Platform `factory` makes."""
    PLATFORMS[sys_platform] = factory


def platform_for(sys_platform: str) -> Platform:
    """The Platform for a `sys.platform` value; an OrtfixError for one ortfix does not support yet."""
    for prefix, factory in PLATFORMS.items():
        if sys_platform.startswith(prefix):
            return factory()
    raise unsupported(_NAMES.get(sys_platform, sys_platform))


def host_platform() -> Platform:
    """The Platform of the machine ortfix runs on (a target is checked on its own machine)."""
    return platform_for(sys.platform)
