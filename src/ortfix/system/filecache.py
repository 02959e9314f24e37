"""What the library readers share: a persistent cache of what was parsed from files (ELF headers, PE imports), keyed
by path, inode, size and mtime, so repeated checks do not re-read (or even import the parser for) files that have not
changed. `elfcache.ElfReader` and `pe.PeReader` say how to parse, encode and decode; a cache is never an error."""

from __future__ import annotations

import contextlib
import json
import os
from abc import ABC, abstractmethod
from dataclasses import asdict
from pathlib import Path
from typing import Any, Generic, TypeVar

from ortfix.cachedir import cache_dir, write_json

InfoT = TypeVar("InfoT")
_MAX_ENTRIES = 20000


class ParsedFileCache(ABC, Generic[InfoT]):
    """`read(path)` parses once per file version and remembers; `save()` writes new entries back (best effort)."""

    file_name: str  # the cache file's name in ortfix's cache folder
    version: int  # bumped when the stored form changes: an older file is ignored

    def __init__(self, cache_file: Path | None = None, *, use_disk: bool = True) -> None:
        base = cache_dir()
        default = base / self.file_name if base else None
        self._file = (cache_file or default) if use_disk else None
        self._entries: dict[str, dict[str, object]] = {}
        self._dirty = False
        if self._file is not None:
            with contextlib.suppress(OSError, ValueError):
                doc = json.loads(self._file.read_text(encoding="utf-8"))
                if doc.get("version") == self.version and isinstance(doc.get("entries"), dict):
                    self._entries = doc["entries"]

    @abstractmethod
    def parse(self, path: str) -> InfoT:
        """Read the file (the parser's own exception when it is not one)."""

    @abstractmethod
    def decode(self, doc: dict[str, object]) -> InfoT:
        """An entry back from the cache file (KeyError, TypeError or ValueError when it is malformed)."""

    def key(self, path: str, st: os.stat_result) -> str:
        return f"{os.path.normcase(path)}|{st.st_ino}|{st.st_size}|{st.st_mtime_ns}"

    def read(self, path: str) -> InfoT:
        key = self.key(path, os.stat(path))
        hit = self._entries.get(key)
        if hit is not None:
            with contextlib.suppress(KeyError, TypeError, ValueError):
                return self.decode(hit)
        info = self.parse(path)
        encoded: dict[str, Any] = asdict(info)  # type: ignore[call-overload]  # InfoT is a dataclass
        self._entries[key] = encoded
        self._dirty = True
        return info

    def save(self) -> None:
        if self._file is None or not self._dirty:
            return
        entries = self._entries
        if len(entries) > _MAX_ENTRIES:
            entries = dict(list(entries.items())[-_MAX_ENTRIES:])
        if write_json(self._file, {"version": self.version, "entries": entries}):
            self._dirty = False
