"""What the library readers share: a persistent cache of what was parsed from files (ELF headers, PE imports), keyed
by path, inode, size and mtime, so repeated checks do not re-read (or even import the parser for) files that have not
changed. `elfcache.ElfReader` and `pe.PeReader` say how to parse, encode and decode; a cache is never an error.

One cache file per folder of parsed files (`<cache>/elf-cache/<hash of the folder>.json`): a check reads the few
folders its libraries are in, not every file ever parsed on the machine (one file of 20,000 entries was 6 MB, and
reading it was the largest single cost of a fresh `check`)."""

from __future__ import annotations

import json
import os
from abc import ABC, abstractmethod

from ortfix.cachedir import cache_folder, digest, write_json
from ortfix.record import asdict

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Generic, TypeVar

    InfoT = TypeVar("InfoT")
else:  # a check does not import `typing` (speed/__init__.py): `ParsedFileCache[ElfInfo]` as a base only subscripts
    class Generic:
        def __class_getitem__(cls, _params: object) -> type:
            return cls

    InfoT = None

_MAX_ENTRIES = 2000  # per folder


class ParsedFileCache(ABC, Generic[InfoT]):
    """`read(path)` parses once per file version and remembers; `save()` writes new entries back (best effort)."""

    file_name: str  # the cache's name in ortfix's cache folder (its folder of shards drops the ".json")
    version: int  # bumped when the stored form changes: an older file is ignored

    def __init__(self, cache_file: str | os.PathLike[str] | None = None, *, use_disk: bool = True) -> None:
        base = cache_folder()
        default = os.path.join(base, self.file_name.removesuffix(".json")) if base else None
        chosen = os.fspath(cache_file) if cache_file else default  # a Path is true: the folder it names, as before
        self._folder = chosen if use_disk else None
        self._shards: dict[str, dict[str, dict[str, object]]] = {}  # folder parsed → its entries
        self._dirty: set[str] = set()

    def _shard_file(self, folder: str) -> str | None:
        if self._folder is None:
            return None
        return os.path.join(self._folder, digest(os.fsencode(folder))[:24] + ".json")

    def _shard(self, folder: str) -> dict[str, dict[str, object]]:
        entries = self._shards.get(folder)
        if entries is None:
            entries = {}
            shard_file = self._shard_file(folder)
            if shard_file is not None:
                try:
                    with open(shard_file, encoding="utf-8") as f:
                        doc = json.loads(f.read())
                    if (isinstance(doc, dict) and doc.get("version") == self.version and doc.get("folder") == folder
                            and isinstance(doc.get("entries"), dict)):
                        entries = doc["entries"]
                except (OSError, ValueError):
                    pass
            self._shards[folder] = entries
        return entries

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
        folder = os.path.dirname(os.path.normcase(path))
        entries = self._shard(folder)
        hit = entries.get(key)
        if hit is not None:
            try:
                return self.decode(hit)
            except (KeyError, TypeError, ValueError):
                pass
        info = self.parse(path)
        encoded: dict[str, Any] = asdict(info)  # InfoT is a record (ortfix/record.py)
        entries[key] = encoded
        self._dirty.add(folder)
        return info

    def save(self) -> None:
        for folder in sorted(self._dirty):
            shard_file = self._shard_file(folder)
            if shard_file is None:
                break
            entries = self._shards[folder]
            if len(entries) > _MAX_ENTRIES:
                entries = dict(list(entries.items())[-_MAX_ENTRIES:])
            if write_json(shard_file, {"version": self.version, "folder": folder, "entries": entries}):
                self._dirty.discard(folder)
