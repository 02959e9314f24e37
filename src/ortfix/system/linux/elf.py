"""Read what the dynamic loader reads from an ELF file: class, machine, SONAME, NEEDED, RPATH, RUNPATH, flags; and the
version a cuDNN library records in its read-only data."""

from __future__ import annotations

import mmap
import os
import re
from functools import cache, lru_cache

from ortfix.record import frozen

_ELF_MAGIC = b"\x7fELF"
DF_1_NODEFLIB = 0x800


@frozen
class ElfInfo:
    path: str
    elf_class: int  # 32 or 64
    machine: str  # e_machine as pyelftools names it, e.g. EM_X86_64
    soname: str | None
    needed: tuple[str, ...]
    rpath: tuple[str, ...]  # DT_RPATH entries, unexpanded
    runpath: tuple[str, ...]  # DT_RUNPATH entries, unexpanded
    nodeflib: bool  # DF_1_NODEFLIB: skip the default directories

    @property
    def effective_rpath(self) -> tuple[str, ...]:
        # glibc ignores DT_RPATH when DT_RUNPATH is present (get-dynamic-info.h).
        return () if self.runpath else self.rpath


class NotElf(Exception):
    """The file is not a readable ELF shared object."""


def _split_path_list(value: str) -> tuple[str, ...]:
    return tuple(p for p in value.split(":"))


def read_elf(path: str | os.PathLike[str]) -> ElfInfo:
    """Parse the dynamic segment of an ELF file. Raises NotElf for anything the loader would reject as not ELF."""
    st = os.stat(path)  # raises OSError for missing files, which callers treat as "not there"
    return _read_elf_cached(os.fspath(path), st.st_ino, st.st_size, st.st_mtime_ns)


@lru_cache(maxsize=4096)
def _read_elf_cached(path: str, _ino: int, _size: int, _mtime: int) -> ElfInfo:
    # Imported here: pyelftools costs ~35 ms to import, and warm runs answer from ElfReader's disk cache instead.
    from elftools.common.exceptions import ELFError
    from elftools.elf.dynamic import DynamicSegment
    from elftools.elf.elffile import ELFFile

    try:
        with open(path, "rb") as stream:
            if stream.read(4) != _ELF_MAGIC:
                raise NotElf(f"{path}: not an ELF file")
            stream.seek(0)
            elf = ELFFile(stream)
            soname: str | None = None
            needed: list[str] = []
            rpath: tuple[str, ...] = ()
            runpath: tuple[str, ...] = ()
            nodeflib = False
            for segment in elf.iter_segments():
                if not isinstance(segment, DynamicSegment):
                    continue
                for tag in segment.iter_tags():
                    kind = tag.entry.d_tag
                    if kind == "DT_NEEDED":
                        needed.append(tag.needed)  # type: ignore[attr-defined]
                    elif kind == "DT_SONAME":
                        soname = tag.soname  # type: ignore[attr-defined]
                    elif kind == "DT_RPATH":
                        rpath = _split_path_list(tag.rpath)  # type: ignore[attr-defined]
                    elif kind == "DT_RUNPATH":
                        runpath = _split_path_list(tag.runpath)  # type: ignore[attr-defined]
                    elif kind == "DT_FLAGS_1":
                        nodeflib = bool(tag.entry.d_val & DF_1_NODEFLIB)
                break
            return ElfInfo(
                path=path,
                elf_class=elf.elfclass,
                machine=str(elf["e_machine"]),
                soname=soname,
                needed=tuple(needed),
                rpath=rpath,
                runpath=runpath,
                nodeflib=nodeflib,
            )
    except (ELFError, ValueError, KeyError, AssertionError) as exc:  # pyelftools raises a mix on corrupt files
        raise NotElf(f"{path}: {exc}") from exc


def elf_header(path: str | os.PathLike[str]) -> tuple[int, str] | None:
    """(class, machine) from the ELF header alone, or None if the file is not ELF; cheap, for loader candidates."""
    try:
        with open(path, "rb") as f:
            head = f.read(20)
    except OSError:
        return None
    if len(head) < 20 or head[:4] != _ELF_MAGIC:
        return None
    elf_class = {1: 32, 2: 64}.get(head[4])
    if elf_class is None:
        return None
    byteorder: str = "little" if head[5] == 1 else "big"
    machine_code = int.from_bytes(head[18:20], byteorder)  # type: ignore[arg-type]
    return elf_class, _MACHINES.get(machine_code, f"EM_{machine_code}")


_MACHINES = {3: "EM_386", 62: "EM_X86_64", 183: "EM_AARCH64", 40: "EM_ARM", 21: "EM_PPC64", 22: "EM_S390"}


@cache
def _cudnn_mark() -> re.Pattern[bytes]:
    return re.compile(rb"cudnn_version_(\d{1,3})_(\d{1,3})_(\d{1,3})_(\d{1,6})_")


def cudnn_version_mark(path: str | os.PathLike[str]) -> str | None:
    """The cuDNN version a cuDNN library file records in its read-only data ("cudnn_version_9_1_0_70_..." in
    libcudnn_graph.so.9: 9.1.0.70), read from the file without loading it; None when it has none (libcudnn.so.9 itself
    is a small shim without one) or it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return _cudnn_mark_cached(os.fspath(path), st.st_ino, st.st_size, st.st_mtime_ns)


@lru_cache(maxsize=64)
def _cudnn_mark_cached(path: str, _ino: int, _size: int, _mtime: int) -> str | None:
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    try:
        with open(path, "rb") as stream:
            if stream.read(4) != _ELF_MAGIC:
                return None
            stream.seek(0)
            rodata = ELFFile(stream).get_section_by_name(".rodata")
            if rodata is None:
                return None
            # only the section: 21 MB of cuDNN 9.28's 115 MB libcudnn_graph.so.9
            with mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ) as view:
                start = rodata["sh_offset"]
                m = _cudnn_mark().search(view, start, start + rodata["sh_size"])
                return ".".join(str(int(p)) for p in m.groups()) if m else None
    except (ELFError, ValueError, KeyError, AssertionError, OSError):
        return None
