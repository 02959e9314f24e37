"""File operations confined to the environment's folder on Windows: `WindowsEnvRoot`, the interface of
linux/confine.py's `PosixEnvRoot` built from what Windows has instead of directory descriptors and `*at()` calls.

How a path below the root is reached: every folder on the way, the root included, is opened with
`CreateFileW(FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OPEN_REPARSE_POINT)` (the entry itself, never what a symbolic
link or a junction points to), checked through that handle (`os.fstat`: a folder, and no
`FILE_ATTRIBUTE_REPARSE_POINT`: symbolic links and junctions alike; and the path Windows gives the handle,
GetFinalPathNameByHandleW, must be the path walked: a redirection of any kind on the way is refused, and so is a
component spelt as an 8.3 short name), and kept open, without `FILE_SHARE_DELETE`, until the operation ends: while it
is held, Windows refuses to rename, delete or replace that folder, so the path string the operation then uses names
exactly the folders that were checked. Files read back are opened the same way and checked through their handle.
Paths compare case-insensitively (`os.path.normcase`); a path longer than 259 characters gets the `\\\\?\\`
prefix; replacing a file is `os.replace`, retried for about two seconds while another process has it open (sharing
violation, winerror 32, or access denied, 5, as a virus scanner or an indexer causes).

The residual race, stated honestly: the last component of a path is acted on by name (os.replace, os.unlink,
os.rename, os.mkdir), and those calls act on a link itself rather than follow it, with two exceptions: creating a
file (`O_EXCL`: refused when anything, a link included, has the name) and opening one to read (by handle, checked).
What is not covered is a process that can write inside the environment and swaps a file for a link between ortfix's
check and its write of that same name; on POSIX the same gap is closed by O_NOFOLLOW. Ownership is not checked (no
uids on Windows: envpaths.require_trusted_owner) and `fsync_dir` does nothing (Windows cannot flush a folder; NTFS
journals its metadata).

Off Windows (the tests on Linux) the same code runs with O_NOFOLLOW descriptors in place of the pinned handles.

One module although over 400 lines: it is the whole EnvRoot interface (about thirty operations that apply, rollback
and the store use) for one system, plus the few handle-level helpers only it uses; split, either half would be a
module with a single user, as in linux/confine.py.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from functools import cache
from typing import TypeVar, cast

from ortfix.errors import OrtfixError
from ortfix.i18n import N_, Msg
from ortfix.system.envpaths import (
    TEMP_NAME_START,
    ConfinementError,
    Kept,
    by_folder,
    check_rel,
    read_regular,
    rel_parts,
    write_all,
)

_T = TypeVar("_T")

FILE_ATTRIBUTE_REPARSE_POINT = 0x400
_GENERIC_READ = 0x80000000
_GENERIC_WRITE = 0x40000000
_FILE_READ_ATTRIBUTES = 0x80
_FILE_SHARE_READ, _FILE_SHARE_WRITE = 0x1, 0x2
_OPEN_EXISTING, _OPEN_ALWAYS = 3, 4
_FILE_FLAG_BACKUP_SEMANTICS = 0x02000000
_FILE_FLAG_OPEN_REPARSE_POINT = 0x00200000
_MAX_PATH = 260
_SHARING_VIOLATION, _ACCESS_DENIED = 32, 5
_BINARY = getattr(os, "O_BINARY", 0)  # without it Windows opens in text mode and rewrites every "\n"
REPLACE_RETRY_SECONDS = 2.0


def long_path(path: str) -> str:
    """`path` as Windows accepts it beyond MAX_PATH: the `\\\\?\\` prefix (an absolute, normalised path)."""
    if sys.platform != "win32" or len(path) < _MAX_PATH - 1 or path.startswith("\\\\?\\"):
        return path
    if path.startswith("\\\\"):
        return "\\\\?\\UNC\\" + path[2:]
    return "\\\\?\\" + path


def is_link(st: os.stat_result) -> bool:
    """A symbolic link or any other reparse point (a junction, a mount point): never walked through."""
    attributes: int = getattr(st, "st_file_attributes", 0)
    return stat.S_ISLNK(st.st_mode) or bool(attributes & FILE_ATTRIBUTE_REPARSE_POINT)


def _strip_long(path: str) -> str:
    if path.startswith("\\\\?\\UNC\\"):
        return "\\\\" + path[8:]
    return path[4:] if path.startswith("\\\\?\\") else path


@cache
def _get_final_path_name() -> Callable[[int, object, int, int], int]:
    if sys.platform != "win32":
        raise OSError("GetFinalPathNameByHandleW is Windows'")
    import ctypes
    from ctypes import wintypes

    get = ctypes.WinDLL("kernel32", use_last_error=True).GetFinalPathNameByHandleW
    get.argtypes = [wintypes.HANDLE, wintypes.LPWSTR, wintypes.DWORD, wintypes.DWORD]
    get.restype = wintypes.DWORD
    return cast(Callable[[int, object, int, int], int], get)


def final_path(fd: int) -> str | None:
    """The path Windows gives the open file `fd` (GetFinalPathNameByHandleW: every link and junction on the way
    resolved), without its `\\\\?\\` prefix; None off Windows or when Windows cannot say."""
    if sys.platform != "win32":
        return None
    import ctypes
    import msvcrt

    get = _get_final_path_name()
    size = 1024
    while True:
        buf = ctypes.create_unicode_buffer(size)
        n = get(msvcrt.get_osfhandle(fd), buf, size, 0)
        if n == 0:
            return None
        if n < size:
            return _strip_long(buf.value)
        size = n + 1


def _same_path(fd: int, path: str) -> bool:
    """Whether the open entry `fd` is at `path` itself (compared case-insensitively), not reached through a link,
    a junction or a mount point somewhere on the way (what wine shows a POSIX symbolic link as)."""
    final = final_path(fd)
    return final is None or os.path.normcase(final) == os.path.normcase(_strip_long(path))


def _open_entry(path: str, access: int, disposition: int, *, folder: bool) -> int:
    """A descriptor of the entry at `path` itself (never what a reparse point names); others may read and write it but
    not delete or rename it while it is open."""
    if sys.platform == "win32":
        import _winapi
        import msvcrt

        flags = _FILE_FLAG_OPEN_REPARSE_POINT | (_FILE_FLAG_BACKUP_SEMANTICS if folder else 0)
        handle = _winapi.CreateFile(long_path(path), access, _FILE_SHARE_READ | _FILE_SHARE_WRITE, 0, disposition,
                                    flags, 0)
        try:
            return msvcrt.open_osfhandle(handle, os.O_RDONLY if access & _GENERIC_WRITE == 0 else 0)
        except BaseException:
            _winapi.CloseHandle(handle)
            raise
    if folder:
        return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    write = os.O_RDWR | (os.O_CREAT if disposition == _OPEN_ALWAYS else 0) if access & _GENERIC_WRITE else os.O_RDONLY
    return os.open(path, write | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o644)


def _open_checked_file(path: str, *, write: bool = False) -> int:
    """A regular file opened by handle; ConfinementError when it is a link or a reparse point."""
    access = _GENERIC_READ | (_GENERIC_WRITE if write else 0)
    try:
        fd = _open_entry(path, access, _OPEN_ALWAYS if write else _OPEN_EXISTING, folder=False)
    except OSError as exc:
        if sys.platform != "win32" and exc.errno == errno.ELOOP:  # the POSIX fallback met a link
            raise ConfinementError(Msg(N_("{path} is a symbolic link"), path=str(path))) from exc
        raise
    if is_link(os.fstat(fd)) or not _same_path(fd, path):
        os.close(fd)
        raise ConfinementError(Msg(N_("{path} is a symbolic link or a junction, or is reached through one"),
                                   path=_strip_long(path)))
    return fd


def open_without_reparse(path: str) -> int:
    """A regular file opened read-only by its path, refused (ConfinementError) when it is a reparse point."""
    return _open_checked_file(os.path.abspath(path))


def open_for_reading(path: str | os.PathLike[str]) -> int:
    """confine's `open_for_reading` on Windows: `open_without_reparse`. The caller closes the descriptor."""
    return open_without_reparse(os.fspath(path))


def replace_retrying(src: str, dst: str, *, seconds: float = REPLACE_RETRY_SECONDS) -> None:
    """os.replace, retried while another process has `dst` (or `src`) open: a sharing violation on Windows."""
    deadline = time.monotonic() + seconds
    delay = 0.02
    while True:
        try:
            os.replace(long_path(src), long_path(dst))
            return
        except PermissionError as exc:
            busy = getattr(exc, "winerror", None) in (_SHARING_VIOLATION, _ACCESS_DENIED)
            if not busy or time.monotonic() > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.25)


class WindowsEnvRoot:
    """The environment's prefix; relative paths below it are reached through pinned, checked folders, never through a
    symbolic link or a junction. The interface of confine.PosixEnvRoot."""

    def __init__(self, prefix: str | os.PathLike[str]) -> None:
        self.given = os.fspath(prefix)
        self.real = os.path.realpath(self.given)
        self.fd = -1
        try:
            self._pin = _open_entry(self.real, _FILE_READ_ATTRIBUTES, _OPEN_EXISTING, folder=True)
        except OSError as exc:
            raise OrtfixError(Msg(N_("cannot open the environment {prefix}: {error}"), prefix=self.given,
                                  error=str(exc.strerror or exc))) from exc
        st = os.fstat(self._pin)
        if not stat.S_ISDIR(st.st_mode) or not _same_path(self._pin, self.real):
            os.close(self._pin)
            raise OrtfixError(Msg(N_("cannot open the environment {prefix}: not a folder, or it changed while "
                                     "opened"), prefix=self.given))
        self.dev, self.ino, self.uid = st.st_dev, st.st_ino, st.st_uid

    def close(self) -> None:
        if self._pin >= 0:
            os.close(self._pin)
            self._pin = -1

    def __enter__(self) -> WindowsEnvRoot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- paths ---------------------------------------------------------------------------------------------------

    def rel(self, path: str | os.PathLike[str]) -> str:
        """The path below the root that `path` (absolute) names, compared case-insensitively. Links and junctions
        among its parent folders are resolved once here and must stay inside the root; another drive, `..` that
        leaves the root, or a UNC path elsewhere: ConfinementError."""
        text = os.fspath(path)
        if "\0" in text or not os.path.isabs(text):
            raise ConfinementError(Msg(N_("{path} is not an absolute path"), path=repr(text)))
        norm = os.path.normpath(text)
        for base in (self.given, self.real):
            base = os.path.normpath(base).rstrip("\\/")
            if os.path.normcase(norm).startswith(os.path.normcase(base) + os.sep):
                rest = norm[len(base) + 1:]
                if self._plain(rest):
                    return check_rel(rest)
        parent = os.path.realpath(os.path.dirname(norm))
        real = self.real.rstrip("\\/")
        if os.path.normcase(parent) == os.path.normcase(real):
            return check_rel(os.path.basename(norm))
        if not os.path.normcase(parent).startswith(os.path.normcase(real) + os.sep):
            raise ConfinementError(Msg(N_("{path} is outside the environment {prefix}"), path=text, prefix=self.given))
        return check_rel(parent[len(real) + 1:] + "/" + os.path.basename(norm))

    def _plain(self, rest: str) -> bool:
        try:
            with self._folder(rel_parts(rest)[:-1], create=False):
                return True
        except (ConfinementError, FileNotFoundError, NotADirectoryError):
            return False

    def abs(self, rel: str) -> str:
        return os.path.join(self.given, *rel_parts(rel)) if rel not in ("", ".") else self.given

    # -- the walk ------------------------------------------------------------------------------------------------

    @contextmanager
    def _folder(self, parts: list[str], *, create: bool, mode: int = 0o755) -> Iterator[str]:
        """The path of the folder `parts` below the root, every folder on the way pinned and checked while the
        caller uses it; `create` makes missing ones."""
        if self._pin < 0:
            raise OrtfixError(Msg(N_("the environment {prefix} is closed"), prefix=self.given))
        path = self.real
        with ExitStack() as pins:
            for i, part in enumerate(parts):
                path = os.path.join(path, part)
                try:
                    fd = _open_entry(path, _FILE_READ_ATTRIBUTES, _OPEN_EXISTING, folder=True)
                except FileNotFoundError:
                    if not create:
                        raise
                    with suppress(FileExistsError):
                        os.mkdir(long_path(path), mode)
                    fd = _open_entry(path, _FILE_READ_ATTRIBUTES, _OPEN_EXISTING, folder=True)
                except OSError as exc:
                    if exc.errno in (errno.ENOTDIR, errno.ELOOP):  # the POSIX fallback met a file or a link
                        raise ConfinementError(Msg(N_("{path} is a symbolic link or not a folder"),
                                                   path=self.abs("/".join(parts[: i + 1])))) from exc
                    raise
                pins.callback(os.close, fd)
                st = os.fstat(fd)
                if is_link(st) or not stat.S_ISDIR(st.st_mode) or not _same_path(fd, path):
                    raise ConfinementError(Msg(N_("{path} is a symbolic link, a junction or not a folder"),
                                               path=self.abs("/".join(parts[: i + 1]))))
            yield path

    @contextmanager
    def _entry(self, rel: str, *, create: bool = False) -> Iterator[str]:
        """The full path of `rel`, its folders pinned and checked (the last component is the caller's to act on)."""
        parts = rel_parts(rel)
        with self._folder(parts[:-1], create=create) as folder:
            yield long_path(os.path.join(folder, parts[-1]))

    # -- many entries at once --------------------------------------------------------------------------------------

    def _each(self, rels: Iterable[str], at: Callable[[str], _T], missing: _T) -> dict[str, _T]:
        out: dict[str, _T] = {}
        for folder, names in by_folder(rels).items():
            try:
                with self._folder(list(folder), create=False) as path:
                    for rel, name in names:
                        out[rel] = at(long_path(os.path.join(path, name)))
            except (FileNotFoundError, NotADirectoryError):
                out.update({rel: missing for rel, _ in names if rel not in out})
        return out

    def stat_many(self, rels: Iterable[str]) -> dict[str, os.stat_result | None]:
        return self._each(rels, _lstat, None)

    def sha256_many(self, rels: Iterable[str]) -> dict[str, str | None]:
        return self._each(rels, _sha256, None)

    def move_many(self, moves: Iterable[tuple[str, str]], *, replace: bool = True,
                  veto: Callable[[str, os.stat_result], str | None] | None = None) -> list[Kept]:
        """As PosixEnvRoot.move_many: each (src, dst) entry itself moved, destination folders created; vetoed
        entries and (with `replace=False`) those whose destination exists stay, and are returned."""
        groups: dict[tuple[tuple[str, ...], tuple[str, ...]], list[tuple[str, str, str, str]]] = {}
        for src, dst in moves:
            sp, dp = rel_parts(src), rel_parts(dst)
            groups.setdefault((tuple(sp[:-1]), tuple(dp[:-1])), []).append((src, sp[-1], dp[-1], dst))
        kept: list[Kept] = []
        for (sfolder, dfolder), items in groups.items():  # each folder walked (and pinned) once per group
            with ExitStack() as stack:
                try:
                    sdir = stack.enter_context(self._folder(list(sfolder), create=False))
                except (FileNotFoundError, NotADirectoryError):
                    continue
                ddir: str | None = None
                for src, sname, dname, dst in items:
                    spath = long_path(os.path.join(sdir, sname))
                    st = _lstat(spath)
                    if st is None:
                        continue
                    why = veto(src, st) if veto is not None else None
                    if why is not None:
                        kept.append(Kept(src, dst, why))
                        continue
                    if ddir is None:
                        ddir = stack.enter_context(self._folder(list(dfolder), create=True))
                    dpath = long_path(os.path.join(ddir, dname))
                    if not replace and _lstat(dpath) is not None:
                        kept.append(Kept(src, dst, None))
                        continue
                    replace_retrying(spath, dpath)
        return kept

    # -- queries -------------------------------------------------------------------------------------------------

    def lstat(self, rel: str) -> os.stat_result | None:
        try:
            with self._entry(rel) as path:
                return _lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            return None

    def exists(self, rel: str) -> bool:
        return self.lstat(rel) is not None

    def is_dir(self, rel: str) -> bool:
        st = self.lstat(rel)
        return st is not None and stat.S_ISDIR(st.st_mode) and not is_link(st)

    def is_file(self, rel: str) -> bool:
        st = self.lstat(rel)
        return st is not None and stat.S_ISREG(st.st_mode) and not is_link(st)

    def readlink(self, rel: str) -> str:
        with self._entry(rel) as path:
            return os.readlink(path)

    def listdir(self, rel: str) -> list[str]:
        parts = rel_parts(rel) if rel not in ("", ".") else []
        with self._folder(parts, create=False) as path:
            return os.listdir(long_path(path))

    def read_bytes(self, rel: str, *, limit: int) -> tuple[bytes, os.stat_result]:
        with self._entry(rel) as path:
            fd = _open_checked_file(path)
        return read_regular(fd, self.abs(rel), limit)

    def sha256(self, rel: str) -> str | None:
        try:
            with self._entry(rel) as path:
                return _sha256(path)
        except (FileNotFoundError, NotADirectoryError):
            return None

    def open_file(self, rel: str) -> int:
        """`rel` opened for reading and writing (created when missing), by handle, never through a reparse point."""
        with self._entry(rel) as path:
            return _open_checked_file(path, write=True)

    # -- changes -------------------------------------------------------------------------------------------------

    def makedirs(self, rel: str, mode: int = 0o755) -> None:
        with self._folder(rel_parts(rel), create=True, mode=mode):
            pass

    def mkdir(self, rel: str, mode: int) -> None:
        with self._entry(rel) as path:
            os.mkdir(path, mode)

    def chown(self, rel: str, uid: int, gid: int) -> None:
        """Nothing to do: Windows files have owner SIDs, not the uids a POSIX journal records."""

    def unlink(self, rel: str) -> None:
        with self._entry(rel) as path:
            os.unlink(path)  # a link or a junction is removed itself

    def rmdir(self, rel: str) -> bool:
        try:
            with self._entry(rel) as path:
                os.rmdir(path)
            return True
        except OSError:
            return False

    def rename(self, src: str, dst: str, *, make_parents: bool = False, replace: bool = True) -> None:
        with self._entry(src) as spath, self._entry(dst, create=make_parents) as dpath:
            if not replace:
                if _lstat(dpath) is not None:
                    raise FileExistsError(errno.EEXIST, "exists", self.abs(dst))
                os.rename(spath, dpath)  # on Windows it never replaces an existing entry either
                return
            replace_retrying(spath, dpath)

    def link(self, src: str, dst: str, *, make_parents: bool = False) -> None:
        with self._entry(src) as spath, self._entry(dst, create=make_parents) as dpath:
            st = os.lstat(spath)
            if is_link(st):
                raise ConfinementError(Msg(N_("{path} is a symbolic link or a junction"), path=self.abs(src)))
            os.link(spath, dpath)

    def copy(self, src: str, dst: str, *, make_parents: bool = False) -> None:
        with self._entry(src) as spath, self._entry(dst, create=make_parents) as dpath:
            st = os.lstat(spath)
            if stat.S_ISLNK(st.st_mode):
                os.symlink(os.readlink(spath), dpath)
                return
            rfd = _open_checked_file(spath)
            try:
                _create(dpath, lambda wfd: _copy_fd(rfd, wfd), stat.S_IMODE(st.st_mode))
            finally:
                os.close(rfd)

    def create_new(self, rel: str, fill: Callable[[int], None], mode: int, *, make_parents: bool = False) -> None:
        with self._entry(rel, create=make_parents) as path:
            _create(path, fill, mode)

    def write_new(self, rel: str, data: bytes, mode: int, *, make_parents: bool = False) -> None:
        self.create_new(rel, lambda fd: write_all(fd, data), mode, make_parents=make_parents)

    def atomic_write(self, rel: str, data: bytes, mode: int = 0o644) -> None:
        """A temp file in the same folder, flushed to disk, then os.replace (retried while the file is open
        elsewhere); the temp file is removed again when anything fails."""
        with self._entry(rel) as path:
            folder, name = os.path.split(path)
            tmp = os.path.join(folder, f"{TEMP_NAME_START}{name}.{os.getpid()}.tmp")
            with suppress(FileNotFoundError):
                os.unlink(tmp)
            _create(tmp, lambda fd: write_all(fd, data), mode)
            try:
                replace_retrying(tmp, path)
            except BaseException:
                with suppress(OSError):
                    os.unlink(tmp)
                raise

    def symlink(self, target: str, rel: str) -> None:
        with self._entry(rel) as path:
            os.symlink(target, path)

    def fsync_dir(self, rel: str) -> None:
        """Nothing on Windows (a folder cannot be flushed; NTFS journals its metadata); the folder is still checked."""
        with suppress(OSError), self._folder(rel_parts(rel) if rel not in ("", ".") else [], create=False):
            pass

    def remove_tree(self, rel: str) -> None:
        """A folder and everything in it; links and junctions are removed themselves, never entered."""
        try:
            with self._entry(rel) as path:
                _remove_tree(path)
        except (FileNotFoundError, NotADirectoryError):
            pass


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None


def _sha256(path: str) -> str | None:
    st = _lstat(path)
    if st is None:
        return None
    if stat.S_ISLNK(st.st_mode):
        return "link:" + os.readlink(path)
    if is_link(st) or not stat.S_ISREG(st.st_mode):
        return None
    try:
        fd = _open_checked_file(path)
    except (FileNotFoundError, ConfinementError):
        return None
    try:
        h = hashlib.sha256()
        while chunk := os.read(fd, 1 << 20):
            h.update(chunk)
        return h.hexdigest()
    finally:
        os.close(fd)


def _copy_fd(rfd: int, wfd: int) -> None:
    while chunk := os.read(rfd, 1 << 20):
        write_all(wfd, chunk)


def _create(path: str, fill: Callable[[int], None], mode: int) -> None:
    """A new file (O_EXCL: refused when anything, a link included, has the name), filled, given `mode` (on Windows
    only its read-only bit means anything) and flushed; removed again when anything fails."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _BINARY | getattr(os, "O_NOINHERIT", 0)
                 | getattr(os, "O_NOFOLLOW", 0), mode)
    try:
        fill(fd)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with suppress(OSError):
            os.unlink(path)
        raise
    os.close(fd)
    with suppress(OSError):
        os.chmod(path, mode)


def _remove_tree(path: str) -> None:
    st = _lstat(path)
    if st is None:
        return
    if is_link(st) or not stat.S_ISDIR(st.st_mode):
        os.unlink(path)
        return
    for name in os.listdir(path):
        _remove_tree(long_path(os.path.join(path, name)))
    os.rmdir(path)
