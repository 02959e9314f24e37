"""A persistent cache of parsed ELF headers, keyed by path, inode, size and mtime, so that repeated `ortfix check`
runs do not re-read (or even import the parser for) libraries that have not changed."""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict
from pathlib import Path

from ortfix.cachedir import cache_dir, write_json
from ortfix.system.elf import ElfInfo, read_elf

_CACHE_VERSION = 1
_MAX_ENTRIES = 20000


def default_cache_file() -> Path | None:
    base = cache_dir()
    return base / "elf-cache.json" if base else None


class ElfReader:
    """read_elf with a disk cache; `save()` writes new entries back (best effort: a cache is never an error)."""

    def __init__(self, cache_file: Path | None = None, *, use_disk: bool = True) -> None:
        self._file = (cache_file or default_cache_file()) if use_disk else None
        self._entries: dict[str, dict[str, object]] = {}
        self._dirty = False
        if self._file is not None:
            with contextlib.suppress(OSError, ValueError):
                doc = json.loads(self._file.read_text(encoding="utf-8"))
                if doc.get("version") == _CACHE_VERSION and isinstance(doc.get("entries"), dict):
                    self._entries = doc["entries"]

    def read(self, path: str) -> ElfInfo:
        st = os.stat(path)
        key = f"{path}|{st.st_ino}|{st.st_size}|{st.st_mtime_ns}"
        hit = self._entries.get(key)
        if hit is not None:
            try:
                return _from_json(hit)
            except (KeyError, TypeError, ValueError):
                pass
        info = read_elf(path)
        self._entries[key] = asdict(info)
        self._dirty = True
        return info

    def save(self) -> None:
        if self._file is None or not self._dirty:
            return
        entries = self._entries
        if len(entries) > _MAX_ENTRIES:
            entries = dict(list(entries.items())[-_MAX_ENTRIES:])
        if write_json(self._file, {"version": _CACHE_VERSION, "entries": entries}):
            self._dirty = False


def _from_json(doc: dict[str, object]) -> ElfInfo:
    def strs(key: str) -> tuple[str, ...]:
        value = doc[key]
        if not isinstance(value, list):
            raise TypeError(key)
        return tuple(str(v) for v in value)

    soname = doc["soname"]
    return ElfInfo(
        path=str(doc["path"]),
        elf_class=int(str(doc["elf_class"])),
        machine=str(doc["machine"]),
        soname=None if soname is None else str(soname),
        needed=strs("needed"),
        rpath=strs("rpath"),
        runpath=strs("runpath"),
        nodeflib=bool(doc["nodeflib"]),
    )
