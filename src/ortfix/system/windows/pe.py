"""Reading Windows PE files (DLLs, .pyd, .exe) with pefile: the DLLs a file imports (load-time and delay-load), its
machine, and the FileVersion of its version resource (how the MSVC runtime's version is told). `PeReader` caches the
results on disk as `elfcache.ElfReader` does (system/filecache.py), so repeated checks do not parse again.

pefile is pure Python, so this works on any machine (the tests read the real `win_amd64` wheels on Linux)."""

from __future__ import annotations

import struct

from ortfix.record import frozen
from ortfix.system.filecache import ParsedFileCache

MACHINES = {0x8664: "AMD64", 0x14C: "I386", 0xAA64: "ARM64"}


class PeError(ValueError):
    """Not a PE file, or one pefile cannot read."""


@frozen
class PeInfo:
    """What ortfix needs of one PE file. DLL names keep the case the file spells them in (Windows compares them
    case-insensitively: compare with `.lower()`)."""

    path: str
    machine: str  # "AMD64", "I386", "ARM64" or "0x…"
    needed: tuple[str, ...]  # load-time imports, in table order
    delay_needed: tuple[str, ...]  # delay-load imports (loaded on first call, not with the file)
    file_version: tuple[int, ...] | None  # VS_FIXEDFILEINFO's FileVersion, e.g. (14, 40, 33810, 0)


def read_pe(path: str, data: bytes | None = None) -> PeInfo:
    """Parse the PE file at `path` (or its bytes, `data`, e.g. read from a wheel); PeError if it is not one."""
    import pefile  # type: ignore[import-untyped]  # deferred: pefile's import costs ~40 ms, and only Windows targets need it

    wanted = [pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_IMPORT"],
              pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_DELAY_IMPORT"],
              pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_RESOURCE"]]
    try:
        pe = pefile.PE(name=None if data is not None else path, data=data, fast_load=True)
        try:
            pe.parse_data_directories(directories=wanted)
            machine_id = int(pe.FILE_HEADER.Machine)
            needed = _dll_names(getattr(pe, "DIRECTORY_ENTRY_IMPORT", []))
            delay = _dll_names(getattr(pe, "DIRECTORY_ENTRY_DELAY_IMPORT", []))
            version = _file_version(pe)
        finally:
            pe.close()
    except (pefile.PEFormatError, OSError, AttributeError, IndexError, struct.error) as exc:
        raise PeError(f"{path}: not a readable PE file ({exc})") from exc
    return PeInfo(path=path, machine=MACHINES.get(machine_id, hex(machine_id)), needed=needed, delay_needed=delay,
                  file_version=version)


def _dll_names(entries: object) -> tuple[str, ...]:
    names: list[str] = []
    for entry in entries if isinstance(entries, list) else []:
        raw = getattr(entry, "dll", None)
        if isinstance(raw, bytes):
            names.append(raw.decode("ascii", "replace"))
    return tuple(dict.fromkeys(names))


def _file_version(pe: object) -> tuple[int, ...] | None:
    fixed = getattr(pe, "VS_FIXEDFILEINFO", None)
    if not fixed:
        return None
    info = fixed[0]
    ms, ls = int(info.FileVersionMS), int(info.FileVersionLS)
    return (ms >> 16, ms & 0xFFFF, ls >> 16, ls & 0xFFFF)


class PeReader(ParsedFileCache[PeInfo]):
    """read_pe with a disk cache (system/filecache.py); `read` raises OSError if the file cannot be read, PeError if
    it is no PE file."""

    file_name = "pe-cache.json"
    version = 1

    def parse(self, path: str) -> PeInfo:
        return read_pe(path)

    def decode(self, doc: dict[str, object]) -> PeInfo:
        return _from_json(doc)


def _from_json(doc: dict[str, object]) -> PeInfo:
    def strs(key: str) -> tuple[str, ...]:
        value = doc[key]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise TypeError(key)
        return tuple(value)

    version = doc["file_version"]
    if version is not None and (not isinstance(version, list) or not all(isinstance(v, int) for v in version)):
        raise TypeError("file_version")
    return PeInfo(path=str(doc["path"]), machine=str(doc["machine"]), needed=strs("needed"),
                  delay_needed=strs("delay_needed"), file_version=None if version is None else tuple(version))
