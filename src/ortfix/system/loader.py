"""The loader's report, which the rest of ortfix consumes whatever the OS: for each needed library, the file the loader
finds in a fresh process (or that none is found) and how. system/linux/loader.py (glibc's search) and
system/windows/loader.py (the DLL search order) each produce it. Also the in-process cache of folder listings both
loaders read folders through (speed/replay.py empties it before it records a check)."""

from __future__ import annotations

import os
from functools import lru_cache

from ortfix.record import field, frozen, mutable
from ortfix.system.resolved import once

VIA_LOADED = "already loaded"
VIA_RPATH = "DT_RPATH"
VIA_LD_LIBRARY_PATH = "LD_LIBRARY_PATH"
VIA_RUNPATH = "DT_RUNPATH"
VIA_CACHE = "ld.so.cache"
VIA_DEFAULT = "default directories"
VIA_PATH = "path"


@frozen
class Resolution:
    """One needed library: who asked for it, where the loader finds it (None: not found) and how."""

    name: str
    requested_by: str
    path: str | None
    via: str | None
    lazy: bool = False  # loaded with dlopen at run time rather than DT_NEEDED
    searched: tuple[str, ...] = ()  # directories tried before the answer, in order (the evidence)
    rejected: tuple[str, ...] = ()  # files with the right name that the loader skipped, with the reason


@mutable
class LoadReport:
    root: str
    resolutions: list[Resolution] = field(default_factory=list)

    @property
    def missing(self) -> list[Resolution]:
        return [r for r in self.resolutions if r.path is None]

    def resolved(self, name: str) -> Resolution | None:
        for r in self.resolutions:
            if r.name == name:
                return r
        return None


_EMPTY: frozenset[str] = frozenset()


@lru_cache(maxsize=2048)
def _listdir_cached(path: str, _mtime: int) -> frozenset[str] | None:
    try:
        return frozenset(os.listdir(path))
    except PermissionError:
        return None
    except OSError:
        return _EMPTY


def _listdir(path: str) -> frozenset[str] | None:
    """The names in a directory (cached while it is unchanged); None when it exists but cannot be listed."""
    try:
        mtime = os.stat(path).st_mtime_ns
    except OSError:
        return _EMPTY
    return _listdir_cached(path, mtime)


def folder_listing(path: str) -> frozenset[str] | None:
    """The names in a folder, from the cache `forget_listings` empties (None: it exists but cannot be listed); looked
    at once while a check runs (system/resolved.py)."""
    return once("listing", path, _listdir)


def forget_listings() -> None:
    """Empty the in-process cache of folder listings: every folder is listed afresh (with os.listdir) from now on."""
    _listdir_cached.cache_clear()
