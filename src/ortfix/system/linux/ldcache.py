"""Read /etc/ld.so.cache the way glibc's loader does (binary format 'glibc-ld.so.cache1.1', optionally behind the old
'ld.so-1.7.0' header), so a lookup answers what `dlopen("libfoo.so.1")` would find there."""

from __future__ import annotations

import struct
from pathlib import Path

from ortfix.i18n import N_
from ortfix.record import field, frozen, mutable

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


@mutable
class LdCache:
    """The entries of one ld.so.cache, in file order (glibc takes the first compatible entry for a name)."""

    source: str
    entries: list[CacheEntry] = field(default_factory=list)
    _by_name: dict[str, list[CacheEntry]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        for entry in self.entries:
            self._by_name.setdefault(entry.name, []).append(entry)

    def lookup(self, name: str, elf_class: int = 64, machine: str = "EM_X86_64") -> str | None:
        wanted = _ARCH_FLAGS.get((elf_class, machine))
        fallback: str | None = None
        for entry in self._by_name.get(name, ()):
            if (entry.flags & _FLAG_TYPE_MASK) != _FLAG_ELF_LIBC6:
                continue
            if wanted is not None and (entry.flags & _FLAG_REQUIRED_MASK) != wanted:
                continue
            if entry.hwcap & _HWCAP_EXTENSION:
                # A glibc-hwcaps subdirectory copy; the loader prefers it only when the CPU supports that level.
                fallback = fallback or entry.path
                continue
            return entry.path
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
    # One pass over the table (a few hundred entries on a desktop; 3 ms of a fresh check, entry by entry).
    entries = [CacheEntry(_cstr(data, offset + key), _cstr(data, offset + value), flags, hwcap)
               for flags, key, value, _osversion, hwcap in struct.iter_unpack("<iIIIQ", table)]
    return LdCache(source=source, entries=entries)


def _cstr(data: bytes, start: int) -> str:
    end = data.index(b"\0", start)
    return data[start:end].decode("utf-8", "surrogateescape")


def load_ld_cache(path: Path = Path("/etc/ld.so.cache")) -> LdCache:
    """The system's loader cache; an absent or unreadable cache is an empty one (as it is for the loader)."""
    try:
        data = path.read_bytes()
    except OSError:
        return LdCache(source=str(path))
    try:
        return parse_ld_cache(data, str(path))
    except (ValueError, struct.error):
        return _from_ldconfig(path)


def _from_ldconfig(path: Path) -> LdCache:
    """Fallback for a cache format we cannot parse: ask ldconfig itself (slower, but exact)."""
    from ortfix import subproc  # here, not at the top: a `check` that runs no child does not import `subprocess`

    try:
        proc = subproc.run(["ldconfig", "-p", "-C", str(path)], target_python=None, timeout=20)
    except Exception:
        return LdCache(source=str(path))
    entries = []
    for line in proc.stdout.splitlines()[1:]:
        name, sep, target = line.strip().partition(" => ")
        if not sep:
            continue
        name, _, attrs = name.partition(" (")
        flags = _FLAG_ELF_LIBC6 | (0x0300 if "x86-64" in attrs else 0x0A00 if "AArch64" in attrs else 0)
        entries.append(CacheEntry(name=name.strip(), path=target.strip(), flags=flags, hwcap=0))
    return LdCache(source=str(path), entries=entries)
