"""A persistent cache of parsed ELF headers, keyed by path, inode, size and mtime, so that repeated `ortfix check`
runs do not re-read (or even import the parser for) libraries that have not changed."""

from __future__ import annotations

from ortfix.system.filecache import ParsedFileCache
from ortfix.system.linux.elf import ElfInfo, read_elf


class ElfReader(ParsedFileCache[ElfInfo]):
    """read_elf with a disk cache (system/filecache.py); `save()` writes new entries back."""

    file_name = "elf-cache.json"
    version = 1

    def parse(self, path: str) -> ElfInfo:
        return read_elf(path)

    def decode(self, doc: dict[str, object]) -> ElfInfo:
        return _from_json(doc)


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
