"""The machine's own loader, ld.so: which file it is, and the folders (and glibc-hwcaps subfolders) it searches by
default, as the installed ld.so itself reports them; the loader simulation (loader.py) is configured with these."""

from __future__ import annotations

import json
import os
from functools import lru_cache

from ortfix.cachedir import cache_folder, write_json
from ortfix.system.pathform import form

_FALLBACK_DIRS = {
    "x86_64": ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"),
    "aarch64": ("/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"),
}
_INTERPRETERS = {
    "x86_64": ("/lib64/ld-linux-x86-64.so.2", "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"),
    "aarch64": ("/lib/ld-linux-aarch64.so.1", "/lib/aarch64-linux-gnu/ld-linux-aarch64.so.1"),
}


def _machine() -> str:
    """platform.machine(), without importing platform (1.5 ms on every Linux check) where os.uname answers."""
    if hasattr(os, "uname"):
        return os.uname().machine
    import platform

    return platform.machine()


def find_interpreter(arch: str | None = None) -> str | None:
    """The path of the machine's ld.so for `arch` (this machine's by default), None when it has none."""
    for candidate in _INTERPRETERS.get(arch or _machine(), ()):
        if os.path.exists(candidate):
            return candidate
    return None


def system_search_dirs(interpreter: str | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(default directories, glibc-hwcaps subdirectories) as the installed ld.so reports them (`ld.so --help`,
    glibc >= 2.33); the distribution's usual list when it cannot tell."""
    arch = _machine()
    fallback = (_FALLBACK_DIRS.get(arch, ("/lib64", "/usr/lib64", "/lib", "/usr/lib")), ())
    if interpreter is None:
        return fallback
    # ld.so's answer only changes with ld.so itself: cache it by the file's identity.
    try:
        st = os.stat(interpreter)
    except OSError:
        return _system_search_dirs(interpreter, None, fallback)
    return _system_search_dirs(interpreter, f"{st.st_ino}-{st.st_size}-{st.st_mtime_ns}", fallback)


@lru_cache(maxsize=4)
def _system_search_dirs(interpreter: str, identity: str | None,
                        fallback: tuple[tuple[str, ...], tuple[str, ...]]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    base = cache_folder() if identity else None
    cache_file = form(os.path.join(base, f"ldso-{identity}.json")) if base else None
    if cache_file is not None:
        cached = _cached_answer(cache_file)
        if cached is not None:
            return cached
    result = _ask_ld_so(interpreter) or fallback
    if cache_file is not None:
        write_json(cache_file, result)
    return result


def _cached_answer(cache_file: str) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """The search folders and hwcaps subfolders the cache file holds: two lists of strings, as written below (a file
    of any other shape, damaged or planted, is no answer)."""
    try:
        with open(cache_file, encoding="utf-8") as file:
            doc = json.loads(file.read())
    except (OSError, ValueError):
        return None
    if (not isinstance(doc, list) or len(doc) != 2
            or not all(isinstance(part, list) and all(isinstance(s, str) for s in part) for part in doc)):
        return None
    return tuple(doc[0]), tuple(doc[1])


def _ask_ld_so(interpreter: str) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    from ortfix import subproc  # here, not at the top: a `check` that runs no child does not import `subprocess`

    try:
        proc = subproc.run([interpreter, "--help"], target_python=None, timeout=10, env={"LC_ALL": "C"})
    except Exception:
        return None
    dirs = []
    hwcaps = []
    in_hwcaps = False
    for line in proc.stdout.splitlines():
        stripped = line.strip()
        if stripped.endswith("(system search path)"):
            dirs.append(stripped.rsplit(" (", 1)[0])
        elif line.startswith("Subdirectories of glibc-hwcaps"):
            in_hwcaps = True
        elif in_hwcaps:
            if not stripped:
                in_hwcaps = False
            elif "searched" in stripped and "not" not in stripped.split("(", 1)[-1].split(",")[0]:
                hwcaps.append(stripped.split(" ", 1)[0])
    if not dirs:
        return None
    return (tuple(dirs), tuple(hwcaps))
