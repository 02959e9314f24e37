"""Read /etc/ld.so.cache the way glibc's loader does (binary format 'glibc-ld.so.cache1.1', optionally behind the old
'ld.so-1.7.0' header), so a lookup answers what `dlopen("libfoo.so.1")` would find there."""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator

from ortfix.i18n import N_
from ortfix.record import frozen
from ortfix.system.pathform import form

_OLD_MAGIC = b"ld.so-1.7.0"
_NEW_MAGIC = b"glibc-ld.so.cache1.1"
_FLAG_TYPE_MASK = 0x00FF
_FLAG_REQUIRED_MASK = 0xFF00
_FLAG_ELF_LIBC6 = 0x0003
_HWCAP_EXTENSION = 1 << 62

# The arch bits glibc stores in the cache flags, by (ELF class, e_machine).
_ARCH_FLAGS: dict[tuple[int, str], int] = {
    (64, "EM_X86_64"): 0x0300,
    (64, "EM_AARCH64"): 0x0A00,
    (64, "EM_PPC64"): 0x0500,
    (64, "EM_S390"): 0x0400,
    (32, "EM_386"): 0x0000,
    (32, "EM_ARM"): 0x0900,
}


@frozen
class CacheEntry:
    name: str
    path: str
    flags: int
    hwcap: int


class LdCache:
    """The entries of one ld.so.cache, in file order (glibc takes the first compatible entry for a name). One read
    from the file keeps its bytes and decodes an entry's path only when its name is looked up (a check asks for a
    few dozen names of ~570: making every entry cost a fresh check ~2 ms); `entries` makes them all."""

    __slots__ = ("_by_name", "_data", "_entries", "_table", "source")

    def __init__(self, source: str, entries: list[CacheEntry] | None = None) -> None:
        self.source = source
        self._data = b""
        self._table = (0, b"")  # where the strings' offsets count from, and the entry table
        self._entries = entries
        # name -> (flags, its path: decoded, or where it starts in _data, hwcap) of each entry, in file order
        self._by_name: dict[str, list[tuple[int, str | int, int]]] = {}
        for entry in entries or ():
            self._by_name.setdefault(entry.name, []).append((entry.flags, entry.path, entry.hwcap))

    @classmethod
    def _read(cls, source: str, data: bytes, table: tuple[int, bytes],
              by_name: dict[str, list[tuple[int, str | int, int]]]) -> LdCache:
        """From parse_ld_cache's table: name -> (flags, where its path starts in `data`, hwcap), in file order."""
        cache = cls(source)
        cache._data = data
        cache._table = table
        cache._by_name = by_name
        cache._entries = None
        return cache

    @property
    def entries(self) -> list[CacheEntry]:
        if self._entries is None:
            offset, table = self._table
            self._entries = [CacheEntry(_cstr(self._data, offset + key), _cstr(self._data, offset + value), flags,
                                        hwcap) for flags, key, value, _osversion, hwcap in _rows(table)]
        return self._entries

    def _path(self, path: str | int) -> str:
        return path if isinstance(path, str) else _cstr(self._data, path)

    def lookup(self, name: str, elf_class: int = 64, machine: str = "EM_X86_64") -> str | None:
        wanted = _ARCH_FLAGS.get((elf_class, machine))
        fallback: str | None = None
        for flags, path, hwcap in self._by_name.get(name, ()):
            if (flags & _FLAG_TYPE_MASK) != _FLAG_ELF_LIBC6:
                continue
            if wanted is not None and (flags & _FLAG_REQUIRED_MASK) != wanted:
                continue
            if hwcap & _HWCAP_EXTENSION:
                # A glibc-hwcaps subdirectory copy; the loader prefers it only when the CPU supports that level.
                fallback = fallback or self._path(path)
                continue
            return self._path(path)
        return fallback

    def names(self) -> list[str]:
        return list(self._by_name)


def parse_ld_cache(data: bytes, source: str = "/etc/ld.so.cache") -> LdCache:
    """Parse the bytes of an ld.so.cache; raises ValueError when the format is not one glibc writes."""
    offset = 0
    if data.startswith(_OLD_MAGIC):
        (nlibs,) = struct.unpack_from("<I", data, 12)
        offset = 16 + nlibs * 12
        offset = (offset + 7) & ~7  # the new header is aligned to 8 bytes behind the old table
        if not data.startswith(_NEW_MAGIC, offset):
            raise ValueError(N_("old-format ld.so.cache without a new-format section is not supported"))
    if not data.startswith(_NEW_MAGIC, offset):
        raise ValueError("not an ld.so.cache file")
    nlibs, _len_strings = struct.unpack_from("<II", data, offset + 20)
    entries_at = offset + 48
    table = data[entries_at:entries_at + nlibs * 24]
    if len(table) < nlibs * 24:
        raise struct.error("ld.so.cache: the entry table runs past the end of the file")  # i18n: english (caught below)
    # One pass over the table (a few hundred entries on a desktop); a path is decoded when its name is looked up.
    by_name: dict[str, list[tuple[int, str | int, int]]] = {}
    last = 0
    for flags, key, value, _osversion, hwcap in _rows(table):
        by_name.setdefault(_cstr(data, offset + key), []).append((flags, offset + value, hwcap))
        last = max(last, offset + value)
    if by_name and data.find(b"\0", last) < 0:  # a path that does not end (as _cstr would find it)
        raise ValueError("ld.so.cache: a path runs past the end of the file")  # i18n: english (caught below)
    return LdCache._read(source, data, (offset, table), by_name)


def _rows(table: bytes) -> Iterator[tuple[int, int, int, int, int]]:
    """Each entry's (flags, key, value, osversion, hwcap): the strings' offsets, from the new header's start."""
    return struct.iter_unpack("<iIIIQ", table)


def _cstr(data: bytes, start: int) -> str:
    end = data.index(b"\0", start)
    return data[start:end].decode("utf-8", "surrogateescape")


def load_ld_cache(path: str | os.PathLike[str] = "/etc/ld.so.cache") -> LdCache:
    """The system's loader cache; an absent or unreadable cache is an empty one (as it is for the loader)."""
    path = form(path)
    try:
        with open(path, "rb") as file:
            data = file.read()
    except OSError:
        return LdCache(source=path)
    try:
        return parse_ld_cache(data, path)
    except (ValueError, struct.error):
        return _from_ldconfig(path)


def _from_ldconfig(path: str) -> LdCache:
    """Fallback for a cache format we cannot parse: ask ldconfig itself (slower, but exact)."""
    from ortfix import subproc  # here, not at the top: a `check` that runs no child does not import `subprocess`

    try:
        proc = subproc.run(["ldconfig", "-p", "-C", path], target_python=None, timeout=20)
    except Exception:
        return LdCache(source=path)
    entries = []
    for line in proc.stdout.splitlines()[1:]:
        name, sep, target = line.strip().partition(" => ")
        if not sep:
            continue
        name, _, attrs = name.partition(" (")
        flags = _FLAG_ELF_LIBC6 | (0x0300 if "x86-64" in attrs else 0x0A00 if "AArch64" in attrs else 0)
        entries.append(CacheEntry(name=name.strip(), path=target.strip(), flags=flags, hwcap=0))
    return LdCache(source=path, entries=entries)
