"""Simulate the dynamic loader: which file each needed library resolves to in a fresh process, or that none does.

Linux follows glibc's `_dl_map_object` order exactly: already-loaded objects (by SONAME or the name they were loaded
under), DT_RPATH of the requesting object and of its loaders up to the executable (only while none of them has
DT_RUNPATH), LD_LIBRARY_PATH, DT_RUNPATH of the requesting object, /etc/ld.so.cache, then the default directories
(unless DF_1_NODEFLIB). Candidates of the wrong ELF class or machine are skipped, as glibc skips them. Dependencies
are mapped breadth first. `$ORIGIN`, `$LIB` and `$PLATFORM` are expanded textually.

It produces system/loader.py's platform-neutral report (`Resolution`, `LoadReport`), which the rest of ortfix
consumes; system/windows/loader.py produces the same report for the DLL search order.
"""

from __future__ import annotations

import os
import re
from collections import deque
from collections.abc import Iterable, Sequence

from ortfix.record import frozen, mutable
from ortfix.system.linux import elf as elfmod
from ortfix.system.linux.elfcache import ElfReader
from ortfix.system.linux.ldcache import LdCache
from ortfix.system.loader import (
    VIA_CACHE,
    VIA_DEFAULT,
    VIA_LD_LIBRARY_PATH,
    VIA_LOADED,
    VIA_PATH,
    VIA_RPATH,
    VIA_RUNPATH,
    LoadReport,
    Resolution,
    folder_listing,
)
from ortfix.system.resolved import once, realpath


@frozen
class LoaderConfig:
    """What decides the search for one process: its environment and the machine's loader configuration."""

    ld_library_path: str | None
    cache: LdCache
    default_dirs: tuple[str, ...]
    elf_class: int = 64
    machine: str = "EM_X86_64"
    cwd: str = "/"
    hwcaps_subdirs: tuple[str, ...] = ()


class _FatalCandidate(Exception):
    """A file with the wanted name that is not ELF at all: glibc stops with an error instead of searching on."""


@mutable
class _Obj:
    path: str
    origin: str
    info: elfmod.ElfInfo
    loader: _Obj | None
    names: set[str]


def _identity(path: str) -> tuple[int, int] | None:
    """The file at `path` (its device and inode), None where it cannot be reached."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


class LinuxLoader:
    def __init__(self, config: LoaderConfig, reader: ElfReader | None = None) -> None:
        self.config = config
        self.reader = reader or ElfReader()
        self._objects: list[_Obj] = []
        self._main: _Obj | None = None
        self._env_dirs = _split_env_path(config.ld_library_path, config.cwd)

    # -- process set-up -------------------------------------------------------------------------------------
    def start_process(self, executable: str, *, resolve_origin: bool = True) -> LoadReport:
        """Map an executable and its dependencies, as execve would (or `ld.so --list FILE` when resolve_origin is
        False: ld.so takes the origin from the path given, the kernel from /proc/self/exe)."""
        origin_path = realpath(executable) if resolve_origin else executable
        main = self._map(executable, origin_path, loader=None)
        self._main = main
        report = LoadReport(root=executable)
        self._load_deps([main], report, lazy=False)
        return report

    def preload(self, path: str) -> None:
        """An object already in the process by absolute path (a preload hook, LD_PRELOAD, the interpreter)."""
        if self._find_loaded_file(path) is None:
            self._map(path, path, loader=None)

    def dlopen(self, name: str, caller: str | None = None, *, lazy: bool = False) -> LoadReport:
        """dlopen(name) from the object at `caller` (None: the executable), then its dependencies."""
        report = LoadReport(root=name)
        loader = self._object_for(caller) if caller else self._main
        if "/" in name:
            obj = self._find_loaded_file(name)
            if obj is None:
                info = self._verify(name)
                if isinstance(info, str):
                    report.resolutions.append(Resolution(name, caller or "", None, None, lazy, rejected=(info,)))
                    return report
                obj = self._map(name, name, loader=loader)
            report.resolutions.append(Resolution(name, caller or "", obj.path, VIA_PATH, lazy))
            self._load_deps([obj], report, lazy=lazy)
            return report
        requester = loader.path if loader else ""
        res, obj = self._search(name, loader, lazy=lazy, requester=requester)
        report.resolutions.append(res)
        if obj is not None:
            self._load_deps([obj], report, lazy=lazy)
        return report

    def locate(self, name: str) -> Resolution:
        """Where a bare dlopen(name) from the executable would find `name` (its dependencies are not followed)."""
        res, _ = self._search(name, self._main, lazy=False, requester="")
        return res

    def loaded_paths(self) -> list[str]:
        return [o.path for o in self._objects]

    # -- internals ---------------------------------------------------------------------------------------
    def _object_for(self, path: str) -> _Obj | None:
        for obj in self._objects:
            if obj.path == path:
                return obj
        return None

    def _find_loaded_file(self, path: str) -> _Obj | None:
        wanted = once("identity", path, _identity)
        if wanted is None:
            return None
        for obj in self._objects:
            if once("identity", obj.path, _identity) == wanted:
                return obj
        return None

    def _map(self, path: str, origin_path: str, loader: _Obj | None) -> _Obj:
        info = self.reader.read(path)
        names = {path}
        if info.soname:
            names.add(info.soname)
        obj = _Obj(path=path, origin=os.path.dirname(origin_path) or "/", info=info, loader=loader, names=names)
        self._objects.append(obj)
        return obj

    def _load_deps(self, roots: Sequence[_Obj], report: LoadReport, *, lazy: bool) -> None:
        queue: deque[_Obj] = deque(roots)
        while queue:
            obj = queue.popleft()
            for name in obj.info.needed:
                res, new = self._search(name, obj, lazy=lazy, requester=obj.path)
                report.resolutions.append(res)
                if new is not None and res.via != VIA_LOADED:
                    queue.append(new)

    def _already_loaded(self, name: str) -> _Obj | None:
        for obj in self._objects:
            if name in obj.names:
                return obj
        return None

    def _search(self, name: str, loader: _Obj | None, *, lazy: bool, requester: str) -> tuple[Resolution, _Obj | None]:
        try:
            return self._search_unguarded(name, loader, lazy=lazy, requester=requester)
        except _FatalCandidate as exc:
            return Resolution(name, requester, None, None, lazy, rejected=(str(exc),)), None

    def _search_unguarded(self, name: str, loader: _Obj | None, *, lazy: bool,
                          requester: str) -> tuple[Resolution, _Obj | None]:
        found = self._already_loaded(name)
        if found is not None:
            return Resolution(name, requester, found.path, VIA_LOADED, lazy), found
        if "/" in name:  # a NEEDED entry with a slash is opened as a path
            info = self._verify(name)
            if isinstance(info, str):
                return Resolution(name, requester, None, None, lazy, rejected=(info,)), None
            return self._mapped(name, name, loader, VIA_PATH, lazy, requester, (), ())
        searched: list[str] = []
        rejected: list[str] = []
        cfg = self.config
        if loader is None or not loader.info.runpath:
            chain: list[_Obj] = []
            node = loader
            while node is not None:
                chain.append(node)
                node = node.loader
            if self._main is not None and self._main not in chain:
                chain.append(self._main)
            for owner in chain:
                dirs = self._expand(owner.info.effective_rpath, owner)
                hit = self._open_path(name, dirs, searched, rejected)
                if hit:
                    return self._mapped(hit, hit, loader, VIA_RPATH, lazy, requester, searched, rejected)
        hit = self._open_path(name, self._env_dirs, searched, rejected)
        if hit:
            return self._mapped(hit, hit, loader, VIA_LD_LIBRARY_PATH, lazy, requester, searched, rejected)
        if loader is not None and loader.info.runpath:
            hit = self._open_path(name, self._expand(loader.info.runpath, loader), searched, rejected)
            if hit:
                return self._mapped(hit, hit, loader, VIA_RUNPATH, lazy, requester, searched, rejected)
        cached = cfg.cache.lookup(name, cfg.elf_class, cfg.machine)
        if cached is not None:
            verdict = self._verify(cached)
            if not isinstance(verdict, str):
                return self._mapped(cached, cached, loader, VIA_CACHE, lazy, requester, searched, rejected)
            rejected.append(verdict)
        searched.append(cfg.cache.source)
        owner_flags = loader if loader is not None else self._main
        if owner_flags is None or not owner_flags.info.nodeflib:
            hit = self._open_path(name, cfg.default_dirs, searched, rejected)
            if hit:
                return self._mapped(hit, hit, loader, VIA_DEFAULT, lazy, requester, searched, rejected)
        return Resolution(name, requester, None, None, lazy, tuple(searched), tuple(rejected)), None

    def _mapped(
        self,
        path: str,
        origin_path: str,
        loader: _Obj | None,
        via: str,
        lazy: bool,
        requester: str,
        searched: Sequence[str],
        rejected: Sequence[str],
    ) -> tuple[Resolution, _Obj]:
        same = self._find_loaded_file(path)  # the same file under another name is not mapped twice
        if same is not None:
            same.names.add(os.path.basename(path))
            return Resolution(os.path.basename(path), requester, same.path, VIA_LOADED, lazy), same
        obj = self._map(path, origin_path, loader)
        return Resolution(obj.info.soname or os.path.basename(path), requester, path, via, lazy,
                          tuple(searched), tuple(rejected)), obj

    def _open_path(self, name: str, dirs: Iterable[str], searched: list[str], rejected: list[str]) -> str | None:
        for d in dirs:
            for sub in (*(f"{d.rstrip('/')}/glibc-hwcaps/{h}" for h in self.config.hwcaps_subdirs), d):
                listing = folder_listing(sub)
                if listing is None:  # searchable but not listable: the loader can still open by name
                    if not os.path.exists(os.path.join(sub, name)):
                        continue
                elif name not in listing:
                    continue
                candidate = os.path.join(sub, name)
                verdict = self._verify(candidate)
                if isinstance(verdict, str):
                    if elfmod.elf_header(candidate) is None:
                        # "file too short" / "invalid ELF header" is fatal in glibc; only a wrong class or
                        # machine makes it search on.
                        raise _FatalCandidate(verdict)
                    rejected.append(verdict)
                    continue
                return candidate
            searched.append(d)
        return None

    def _verify(self, path: str) -> elfmod.ElfInfo | str:
        """The ELF info if the loader would accept this file, else why not (glibc's open_verify)."""
        header = elfmod.elf_header(path)
        if header is None:
            return f"{path}: not an ELF file or unreadable"  # i18n: english (a fact: saved with the check)
        if header != (self.config.elf_class, self.config.machine):
            return f"{path}: ELF{header[0]} {header[1]}, needs ELF{self.config.elf_class} {self.config.machine}"
        try:
            return self.reader.read(path)
        except (elfmod.NotElf, OSError) as exc:
            return f"{path}: {exc}"

    def _expand(self, entries: Sequence[str], owner: _Obj) -> list[str]:
        out = []
        for entry in entries:
            value = _expand_tokens(entry, owner.origin)
            if value is None:
                continue
            out.append(value if value else self.config.cwd)
        return out


_TOKEN = re.compile(r"\$(ORIGIN|LIB|PLATFORM)\b|\$\{(ORIGIN|LIB|PLATFORM)\}")


def _expand_tokens(entry: str, origin: str) -> str | None:
    def sub(m: re.Match[str]) -> str:
        token = m.group(1) or m.group(2)
        if token == "ORIGIN":
            return origin
        import platform  # here: $PLATFORM and $LIB are rare, and platform costs every check 1.5 ms

        if token == "PLATFORM":
            return platform.machine()
        return "lib64" if os.path.isdir("/lib64") and platform.machine() in ("x86_64", "aarch64") else "lib"

    return _TOKEN.sub(sub, entry)


def _split_env_path(value: str | None, cwd: str) -> tuple[str, ...]:
    if not value:
        return ()
    # glibc splits LD_LIBRARY_PATH on ':' and ';'; an empty entry means the current directory.
    return tuple(p if p else cwd for p in re.split(r"[:;]", value))


def unreadable_dirs(value: str | None, cwd: str = "/") -> list[str]:
    """Entries of a search path that exist but cannot be listed (the loader silently skips them)."""
    out = []
    for d in _split_env_path(value, cwd):
        if os.path.isdir(d) and not os.access(d, os.R_OK | os.X_OK):
            out.append(d)
    return out
