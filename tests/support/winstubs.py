"""Real Windows DLLs for the tests, built with mingw-w64: a given file name, given exports and given imports.

`build_stub_dll(path, exports=..., needed=...)` writes a PE32+ (x86-64) DLL that wine's loader (and Windows') loads
for real: each name in `exports` is an exported function (any spelling, C++-decorated names included: they are
aliases of one stub function in a .def file), and each name in `needed` is a DLL it imports (one function from each,
through an import library made with dlltool, so the loader must find that DLL or refuse to load this one). Stubs
are cached by argument hash like the ELF stubs (support/fixtures.py), so a session builds each once.

`exports_imported_by(pe_bytes)` reads which functions a real PE file imports from which DLL (pefile), so a stub can
stand in for a real NVIDIA DLL that a real ORT provider imports: same name, the same exports.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path

from support.fixtures import _install_file
from support.testcache import cache_root

_SCHEMA = 1
MINGW_GCC = "x86_64-w64-mingw32-gcc"
MINGW_DLLTOOL = "x86_64-w64-mingw32-dlltool"
MINGW_WINDRES = "x86_64-w64-mingw32-windres"
_SOURCE = """\
/* ortfix test stub DLL: every export is an alias of this one function. */
int ortfix_stub(void) { return 0; }
const char ortfix_stub_marker[] = "%s";
"""


def mingw_missing() -> str | None:
    """Why stub DLLs cannot be built here (one line), or None."""
    if any(shutil.which(tool) is None for tool in (MINGW_GCC, MINGW_DLLTOOL, MINGW_WINDRES)):
        return "mingw-w64 is not installed (apt-get install gcc-mingw-w64-x86-64)"
    return None


@cache
def _gcc_version() -> str:
    return subprocess.run([MINGW_GCC, "-dumpfullversion", "-dumpversion"], capture_output=True, text=True,
                          check=True).stdout.strip()


def _def_name(name: str) -> str:
    if not name or any(c in name for c in " \t\r\n;=\"'") or name.startswith("@"):
        raise ValueError(f"{name!r} cannot be written into a .def file")
    return name


def _version_resource(tmp: Path, version: tuple[int, int, int, int]) -> str:
    """A compiled VERSIONINFO resource (FileVersion in VS_FIXEDFILEINFO and as a string, as NVIDIA's DLLs carry it)."""
    dotted, commas = ".".join(map(str, version)), ",".join(map(str, version))
    (tmp / "version.rc").write_text(
        f"1 VERSIONINFO\nFILEVERSION {commas}\nPRODUCTVERSION {commas}\nBEGIN\n"
        f'  BLOCK "StringFileInfo"\n  BEGIN\n    BLOCK "040904b0"\n    BEGIN\n'
        f'      VALUE "FileVersion", "{dotted}"\n    END\n  END\n'
        '  BLOCK "VarFileInfo"\n  BEGIN\n    VALUE "Translation", 0x409, 1200\n  END\nEND\n')
    subprocess.run([MINGW_WINDRES, str(tmp / "version.rc"), "-O", "coff", "-o", str(tmp / "version.o")],
                   check=True, capture_output=True)
    return str(tmp / "version.o")


def _build(exports: tuple[str, ...], needed: tuple[str, ...], marker: str,
           file_version: tuple[int, int, int, int] | None = None) -> Path:
    fields: dict[str, object] = {"schema": _SCHEMA, "gcc": _gcc_version(), "exports": exports, "needed": needed,
                                 "marker": marker}
    if file_version is not None:  # only then: the stubs built before keep their cache keys
        fields["file_version"] = file_version
    key = json.dumps(fields, sort_keys=True)
    cache = cache_root() / "winstubs"
    cached = cache / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.dll"
    if cached.is_file():
        return cached
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "stub.c").write_text(_SOURCE % marker.replace("\\", "_").replace('"', "_"))
        lines = ["EXPORTS", *(f"    {_def_name(e)}=ortfix_stub" for e in exports)]
        (tmp / "stub.def").write_text("\n".join(lines) + "\n")
        inputs: list[str] = []
        for i, dll in enumerate(needed):
            # An import library for `dll` with one function, and a reference to it, so the import stays.
            symbol = f"ortfix_import_{i}"
            (tmp / f"imp{i}.def").write_text(f"LIBRARY \"{_def_name(dll)}\"\nEXPORTS\n    {symbol}\n")
            subprocess.run([MINGW_DLLTOOL, "-d", str(tmp / f"imp{i}.def"), "-l", str(tmp / f"libimp{i}.a")],
                           check=True, capture_output=True)
            (tmp / f"use{i}.c").write_text(f"extern int {symbol}(void);\nint (*ortfix_use_{i})(void) = {symbol};\n")
            inputs += [str(tmp / f"use{i}.c"), str(tmp / f"libimp{i}.a")]
        if file_version is not None:
            inputs.append(_version_resource(tmp, file_version))
        out = tmp / "stub.dll"
        argv = [MINGW_GCC, "-shared", "-O0", "-o", str(out), str(tmp / "stub.c"), str(tmp / "stub.def"), *inputs,
                "-Wl,--enable-auto-image-base"]
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"mingw-w64 failed: {' '.join(argv)}\n{proc.stderr.strip()}")
        os.replace(out, cached)
    return cached


def build_stub_dll(path: Path, *, exports: Sequence[str] = (), needed: Sequence[str] = (),
                   marker: str | None = None, file_version: tuple[int, int, int, int] | None = None) -> Path:
    """Write a real x86-64 DLL at `path` (its file name is the DLL's name) and return `path`. `needed` are the DLLs it
    imports (besides the C runtime mingw links: KERNEL32 and msvcrt), in order; `exports` its exported functions.
    `marker` (default: the file name) is embedded so two stubs can differ on disk; `file_version` (8, 9, 5, 29) gives
    it a version resource with that FileVersion, as NVIDIA's DLLs have."""
    if isinstance(exports, str) or isinstance(needed, str):
        raise TypeError("exports and needed take sequences of names, not a string")
    cached = _build(tuple(exports), tuple(needed), marker if marker is not None else path.name, file_version)
    _install_file(cached, path, 0o755)
    return path


def exports_imported_by(pe_bytes: bytes) -> Mapping[str, tuple[str, ...]]:
    """DLL name (as spelt in the file) → the function names the PE file imports from it (ordinals left out)."""
    import pefile  # type: ignore[import-untyped]

    pe = pefile.PE(data=pe_bytes, fast_load=True)
    pe.parse_data_directories(directories=[pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_IMPORT"],
                                           pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_DELAY_IMPORT"]])
    out: dict[str, tuple[str, ...]] = {}
    for entry in [*getattr(pe, "DIRECTORY_ENTRY_IMPORT", []), *getattr(pe, "DIRECTORY_ENTRY_DELAY_IMPORT", [])]:
        names = tuple(i.name.decode("ascii") for i in entry.imports if i.name)
        out[entry.dll.decode("ascii")] = names
    return out
