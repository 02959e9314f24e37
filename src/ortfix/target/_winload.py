"""Runs INSIDE a Windows target interpreter: `ortfix verify`'s level 1 there. It imports onnxruntime (so an installed
ortfix hook puts the NVIDIA folders on PATH, as it would for the user), then loads the CUDA provider exactly as
onnxruntime loads it, `LoadLibraryExW(path, NULL, LOAD_WITH_ALTERED_SEARCH_PATH)` (its imports searched in its own
folder, System32, the Windows folder, the current folder, then PATH), and every library loaded later by bare name
(cuDNN's sub-libraries; cuDNN and cuFFT for onnxruntime 1.28+) with a plain `LoadLibraryExW(name, NULL, 0)`, as
cuDNN and onnxruntime do.

Windows' error 126 ("module not found") does not say which DLL is missing. When a load fails, this script reads the
import table of the DLL itself (a few lines of `struct`, no pefile in the target) and walks it as onnxruntime's
`dll_load_error.cc` does: each import that is not already loaded is located in the order the load would search and
loaded; the first one that is nowhere, or that itself fails, is followed down to the DLL that is really missing.

It reports as it goes: one `ORTFIX-RUN:` JSON line before each load (`loading`) and one after (`loaded`), flushed
at once, because cuDNN 8 without its sub-libraries prints "Could not locate cudnn_ops_infer64_8.dll. Please make sure
it is in your library path!" and ends the whole process with exit code 9: the parent still knows what was loading.

Started as `python -c SOURCE ARGS_JSON`. Syntax that Python 3.6 accepts (types in comments); the standard library
only. The Windows-only parts of ctypes are reached with getattr, so the type checker on Linux reads this file too.
"""
import sys

# `python -c` puts the current directory first on sys.path: a user's json.py there must not hijack this script.
if sys.path and sys.path[0] in ("", "."):
    del sys.path[0]

import ctypes
import json
import os
import struct

if False:  # typing is only for the type checker
    from typing import Any, Optional  # noqa: F401

MARK = "ORTFIX-RUN:"
LOAD_WITH_ALTERED_SEARCH_PATH = 0x8
API_SETS = ("api-ms-win-", "ext-ms-")  # resolved by the loader itself, never a file


def emit(stage, **fields):
    # type: (str, **object) -> None
    fields["stage"] = stage
    sys.stdout.write(MARK + json.dumps(fields) + "\n")
    sys.stdout.flush()


def kernel32():
    # type: () -> Any
    k32 = getattr(ctypes, "WinDLL")("kernel32", use_last_error=True)  # noqa: B009 (Windows-only)
    k32.LoadLibraryExW.argtypes = [ctypes.c_wchar_p, ctypes.c_void_p, ctypes.c_uint32]
    k32.LoadLibraryExW.restype = ctypes.c_void_p
    k32.GetModuleHandleW.argtypes = [ctypes.c_wchar_p]
    k32.GetModuleHandleW.restype = ctypes.c_void_p
    k32.GetModuleFileNameW.argtypes = [ctypes.c_void_p, ctypes.c_wchar_p, ctypes.c_uint32]
    k32.GetModuleFileNameW.restype = ctypes.c_uint32
    k32.GetSystemDirectoryW.argtypes = [ctypes.c_wchar_p, ctypes.c_uint32]
    k32.GetWindowsDirectoryW.argtypes = [ctypes.c_wchar_p, ctypes.c_uint32]
    return k32


K32 = kernel32()


def last_error():
    # type: () -> int
    return int(getattr(ctypes, "get_last_error")())  # noqa: B009 (Windows-only)


def error_text(code):
    # type: (int) -> str
    try:
        words = str(getattr(ctypes, "FormatError")(code)).strip()  # noqa: B009
    except Exception:
        words = ""
    return f"error {code}" + (f" ({words})" if words else "")


def module_path(handle):
    # type: (Any) -> Optional[str]
    buf = ctypes.create_unicode_buffer(32768)
    n = K32.GetModuleFileNameW(handle, buf, 32768)
    return buf.value[:n] if n else None


def file_version(path):
    # type: (str) -> Optional[list[int]]
    """The FileVersion of a DLL's version resource (VS_FIXEDFILEINFO), as [14, 44, 35211, 0]; None without one."""
    try:
        ver = getattr(ctypes, "WinDLL")("version")  # noqa: B009 (Windows-only)
        ver.GetFileVersionInfoSizeW.argtypes = [ctypes.c_wchar_p, ctypes.c_void_p]
        ver.GetFileVersionInfoW.argtypes = [ctypes.c_wchar_p, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_void_p]
        ver.VerQueryValueW.argtypes = [ctypes.c_void_p, ctypes.c_wchar_p, ctypes.c_void_p, ctypes.c_void_p]
        size = ver.GetFileVersionInfoSizeW(path, None)
        if not size:
            return None
        data = ctypes.create_string_buffer(size)
        if not ver.GetFileVersionInfoW(path, 0, size, data):
            return None
        info = ctypes.c_void_p()
        length = ctypes.c_uint32()
        if not ver.VerQueryValueW(data, "\\", ctypes.byref(info), ctypes.byref(length)) or length.value < 16:
            return None
        fixed = ctypes.cast(info, ctypes.POINTER(ctypes.c_uint32 * 4)).contents
        if fixed[0] != 0xFEEF04BD:  # VS_FIXEDFILEINFO's signature
            return None
        return [fixed[2] >> 16, fixed[2] & 0xFFFF, fixed[3] >> 16, fixed[3] & 0xFFFF]
    except (OSError, AttributeError, ValueError):
        return None


def load(name, flags):
    # type: (str, int) -> Any
    """(handle, None) or (None, Win32 error code)."""
    handle = K32.LoadLibraryExW(name, None, flags)
    if handle:
        return handle, None
    return None, last_error()


def pe_imports(path):
    # type: (str) -> list[str]
    """The DLL names in a PE file's import table (not its delay imports: those load only when called)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
        if data[:2] != b"MZ":
            return []
        pe = struct.unpack_from("<I", data, 0x3C)[0]
        if data[pe:pe + 4] != b"PE\0\0":
            return []
        sections, = struct.unpack_from("<H", data, pe + 6)
        opt_size, = struct.unpack_from("<H", data, pe + 20)
        opt = pe + 24
        magic, = struct.unpack_from("<H", data, opt)
        dirs = opt + (112 if magic == 0x20B else 96)
        count, = struct.unpack_from("<I", data, dirs - 4)
        if count < 2:
            return []
        rva, size = struct.unpack_from("<II", data, dirs + 8)
        table = []
        for i in range(sections):
            vsize, vaddr, raw_size, raw_ptr = struct.unpack_from("<IIII", data, opt + opt_size + 40 * i + 8)
            table.append((vaddr, max(vsize, raw_size), raw_ptr))

        def offset(r):
            # type: (int) -> Optional[int]
            for vaddr, span, raw in table:
                if vaddr <= r < vaddr + span:
                    return int(r - vaddr + raw)
            return None

        names = []  # type: list[str]
        at = offset(rva) if rva and size else None
        while at is not None and at + 20 <= len(data) and len(names) < 4096:
            first, _, _, name_rva, thunks = struct.unpack_from("<IIIII", data, at)
            if not (first or name_rva or thunks):
                break
            start = offset(name_rva)
            if start is None:
                break
            names.append(data[start:data.index(b"\0", start)].decode("ascii", "replace"))
            at += 20
        return names
    except (OSError, struct.error, ValueError):
        return []


def search_dirs(first):
    # type: (Optional[str]) -> list[str]
    """The folders a load searches, in order: `first` (the folder of the DLL given by path to an altered-search-path
    load; None: the executable's folder, for a load by bare name), System32, the Windows folder, the current
    folder, then PATH."""
    buf = ctypes.create_unicode_buffer(32768)
    K32.GetSystemDirectoryW(buf, 32768)
    system = buf.value
    K32.GetWindowsDirectoryW(buf, 32768)
    windows = buf.value
    exe = module_path(None)
    start = first if first is not None else (os.path.dirname(exe) if exe else None)
    dirs = [d for d in (start, system, windows, os.getcwd()) if d]
    dirs += [d.strip().strip('"') for d in os.environ.get("PATH", "").split(";") if d.strip()]
    return dirs


def locate(name, dirs):
    # type: (str, list[str]) -> Optional[str]
    for folder in dirs:
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            return path
    return None


def first_missing(path, dirs, seen, depth, driver, absent):
    # type: (str, list[str], set[str], int, set[str], list[str]) -> list[str]
    """The import chain from the DLL at `path` down to the first DLL that cannot be found or loaded (the last entry
    names it, with why when it was found but failed); [] when every import loads. DLLs named in `driver` (the NVIDIA
    driver's own, lower case) that are absent are appended to `absent` and passed over, so that the rest of the
    imports are still checked on a machine without the driver."""
    for dep in pe_imports(path):
        key = dep.lower()
        if key.startswith(API_SETS) or key in seen or depth > 16:
            continue
        seen.add(key)
        if K32.GetModuleHandleW(dep):
            continue
        where = locate(dep, dirs)
        if where is None:
            handle, _ = load(dep, 0)  # a KnownDLL, or a DLL the system provides without a file where we looked
            if handle:
                continue
            if key in driver:
                absent.append(dep)
                continue
            return [dep]
        emit("loading", name=dep, how="import", path=where)
        handle, code = load(where, LOAD_WITH_ALTERED_SEARCH_PATH)
        if handle:
            continue
        before = len(absent)
        deeper = first_missing(where, dirs, seen, depth + 1, driver, absent)
        if deeper:
            return [dep, *deeper]
        if len(absent) > before:  # it fails only for want of the driver's DLLs
            continue
        return [f"{dep} (found at {where}, but it fails to load: {error_text(code or 0)})"]  # i18n: english
    return []


def check(name, by_path, driver):
    # type: (str, bool, set[str]) -> None
    emit("loading", name=name, how="path" if by_path else "name")
    handle, code = load(name, LOAD_WITH_ALTERED_SEARCH_PATH if by_path else 0)
    if handle:
        emit("loaded", name=name, error=None, path=module_path(handle))
        return
    missing = []  # type: list[str]
    absent = []  # type: list[str]
    if by_path:
        if os.path.isfile(name):
            missing = first_missing(name, search_dirs(os.path.dirname(name)), set(), 0, driver, absent)
    else:
        dirs = search_dirs(None)
        where = locate(name, dirs)
        missing = [name] if where is None else first_missing(where, dirs, set(), 0, driver, absent)
    emit("loaded", name=name, error=error_text(code or 0), code=code, missing=missing, driver_missing=absent)


def main():
    # type: () -> None
    args = json.loads(sys.argv[1])
    try:
        import onnxruntime  # type: ignore[import-not-found, unused-ignore]  # an ortfix hook acts here

        emit("import", error=None, file=getattr(onnxruntime, "__file__", None))
    except BaseException as exc:
        emit("import", error=f"{type(exc).__name__}: {exc}")
    driver = set(name.lower() for name in args.get("driver_dlls") or [])
    if args.get("provider"):
        check(args["provider"], True, driver)
    for name in args.get("by_name") or []:
        check(name, False, driver)
    runtime = K32.GetModuleHandleW("msvcp140.dll")  # the C++ runtime the provider got (its version matters)
    path = module_path(runtime) if runtime else None
    emit("runtime", msvcp140=path, version=file_version(path) if path else None)
    emit("done")


main()
