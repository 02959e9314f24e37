"""ortfix's cache folder, worked out with `os` alone where that can be done: the XDG rule that platformdirs applies on
Linux (system/linux/host.py's `cache_base`), and the folder speed/early.py takes the probe's cached copy from before
anything else is imported (cachedir.cache_dir's answer, where it needs no platformdirs)."""

from __future__ import annotations

import os
import sys


def xdg_cache_base() -> str:
    """`$XDG_CACHE_HOME/ortfix`, else `~/.cache/ortfix`."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "ortfix")


def plain_cache_dir() -> str | None:
    """cachedir.cache_dir's folder, where it is one of these: ORTFIX_CACHE_DIR, or the XDG rule on Linux; None where
    the cache is off or another system's rule applies (platformdirs')."""
    if os.environ.get("ORTFIX_NO_CACHE"):
        return None
    override = os.environ.get("ORTFIX_CACHE_DIR")
    if override:
        return override
    return xdg_cache_base() if sys.platform.startswith("linux") else None
