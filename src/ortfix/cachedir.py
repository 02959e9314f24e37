"""Where ortfix keeps caches (parsed ELF headers, the validated matrix, ld.so's search path, `check` results) and how
they are written. Never required: a cache that cannot be read or written is skipped.

Where: `ORTFIX_CACHE_DIR`, else `$XDG_CACHE_HOME/ortfix` (or `~/.cache/ortfix`) on Linux, else platformdirs' user
cache folder: `%LOCALAPPDATA%\\ortfix\\Cache` on Windows (checked under wine), `~/Library/Caches/ortfix` on macOS.
A cache file replaced while another process reads it (Windows refuses that) is simply not written that time."""

from __future__ import annotations

import os

from ortfix.system.host import HOST

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from pathlib import Path


def cache_dir() -> Path | None:
    """cache_folder's folder as a Path (for code off `check`'s path: a replayed check imports no pathlib)."""
    folder = cache_folder()
    if folder is None:
        return None
    from pathlib import Path

    return Path(folder)


def cache_folder() -> str | None:
    """ortfix's cache folder (None: off, ORTFIX_NO_CACHE), as str(cache_dir()) writes it."""
    from ortfix.system.cachebase import plain_cache_dir
    from ortfix.system.pathform import form

    if os.environ.get("ORTFIX_NO_CACHE"):
        return None
    return form(plain_cache_dir() or HOST.cache_base())  # platformdirs' rule where the XDG rule is not the system's


def digest(data: bytes) -> str:
    """The hex BLAKE2b digest (32 bytes) cache files are named and keyed by. From CPython's own _blake2 module:
    hashlib imports its OpenSSL binding first, which cost every `check` 2-3 ms."""
    try:
        from _blake2 import blake2b
    except ImportError:  # an interpreter built without it
        from hashlib import blake2b
    return blake2b(data, digest_size=32).hexdigest()


def write_json(path: str | os.PathLike[str], doc: object) -> bool:
    """Write a cache file atomically (temp file in the same folder, then os.replace), so a reader never sees half of
    one; False, and nothing left behind, when it cannot be written."""
    import json

    return write_text(path, json.dumps(doc))  # json.dump streams through the pure-Python encoder: several times slower


def write_text(path: str | os.PathLike[str], text: str) -> bool:
    """write_json's way of writing, for text."""
    import tempfile

    from ortfix.system.pathform import form, parent

    path = form(path)
    folder, stem = parent(path), os.path.splitext(os.path.basename(path))[0]
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{stem}-")
    except OSError:
        return False
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError:
        try:  # noqa: SIM105 (no contextlib on the path of a replayed check)
            os.unlink(tmp)
        except OSError:
            pass
        return False
    return True
