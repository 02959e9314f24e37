"""Where ortfix keeps caches (parsed ELF headers, the validated matrix). Never required: a cache that cannot be read
or written is skipped."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def cache_dir() -> Path | None:
    if os.environ.get("ORTFIX_NO_CACHE"):
        return None
    override = os.environ.get("ORTFIX_CACHE_DIR")
    if override:
        return Path(override)
    if sys.platform.startswith("linux"):
        # The XDG rule platformdirs applies on Linux, without its import cost on the hot path of `check`.
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        return Path(base) / "ortfix"
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("ortfix", appauthor=False))
