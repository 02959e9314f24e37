"""Where ortfix keeps caches (parsed ELF headers, the validated matrix, ld.so's search path, `check` results) and how
they are written. Never required: a cache that cannot be read or written is skipped.

Where: `ORTFIX_CACHE_DIR`, else `$XDG_CACHE_HOME/ortfix` (or `~/.cache/ortfix`) on Linux, else platformdirs' user
cache folder: `%LOCALAPPDATA%\\ortfix\\Cache` on Windows (checked under wine), `~/Library/Caches/ortfix` on macOS.
A cache file replaced while another process reads it (Windows refuses that) is simply not written that time."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from ortfix.system.host import HOST


def cache_dir() -> Path | None:
    if os.environ.get("ORTFIX_NO_CACHE"):
        return None
    override = os.environ.get("ORTFIX_CACHE_DIR")
    if override:
        return Path(override)
    return HOST.cache_base()


def digest(data: bytes) -> str:
    """The hex BLAKE2b digest (32 bytes) cache files are named and keyed by. From CPython's own _blake2 module:
    hashlib imports its OpenSSL binding first, which cost every `check` 2-3 ms."""
    try:
        from _blake2 import blake2b
    except ImportError:  # an interpreter built without it
        from hashlib import blake2b
    return blake2b(data, digest_size=32).hexdigest()


def write_json(path: Path, doc: object) -> bool:
    """Write a cache file atomically (temp file in the same folder, then os.replace), so a reader never sees half of
    one; False, and nothing left behind, when it cannot be written."""
    import json

    return write_text(path, json.dumps(doc))  # json.dump streams through the pure-Python encoder: several times slower


def write_text(path: Path, text: str) -> bool:
    """write_json's way of writing, for text."""
    import tempfile

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}-")
    except OSError:
        return False
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return False
    return True
