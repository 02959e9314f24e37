"""The tests' cache folder (compiled stubs, tool venvs, wine prefixes, downloaded wheelhouses) and the lock that lets
concurrent test runs fill it once: `$ORTFIX_TEST_CACHE`, else `ortfix-test-cache-<uid>` in the system temp folder."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def cache_root() -> Path:
    # Read at every call so a test can point ORTFIX_TEST_CACHE elsewhere with monkeypatch.
    configured = os.environ.get("ORTFIX_TEST_CACHE")
    if configured:
        return Path(configured)
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path(tempfile.gettempdir()) / f"ortfix-test-cache-{uid}"


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive flock on `path` (created, with its folder) for the block."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
