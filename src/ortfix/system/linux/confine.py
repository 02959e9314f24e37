"""File operations confined to one folder tree: the target environment's prefix.

Everything `apply` and `rollback` create, replace, move or delete goes through an `EnvRoot`. The root folder is opened
once (its descriptor is kept for the whole transaction, so swapping the prefix itself for a link changes nothing) and
every path below it is walked one component at a time with `O_NOFOLLOW | O_DIRECTORY` from that descriptor; the
final component is acted on with `*at()` calls that never follow it either. A symbolic link anywhere below the root,
planted before or swapped in during the operation, makes the operation fail with `ConfinementError`: there is no
string prefix test that a link could defeat.

Paths come in as absolute paths (from the probe, a plan or a journal) and are turned into relative ones by
`EnvRoot.rel`, which refuses `..`, NUL bytes and anything that does not lie below the root. Links that stay inside the
environment (a venv's `lib64 -> lib`) are resolved once there; the walk itself never follows one.

This is the POSIX implementation, `PosixEnvRoot`; on Windows it is system/windows/confine.py's `WindowsEnvRoot`
(pinned folder handles and reparse point checks), with the same interface; system/confine.py chooses the host's as
`EnvRoot`. What both share (ConfinementError, relative paths, reading a regular file back, the owner check) is
system/envpaths.py's.

One module although over 400 lines: `PosixEnvRoot` and the descriptor-level `*at` helpers it alone is built from are
one concept, confined file access; split, the helpers would be a module with a single user.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from typing import TypeVar

from ortfix.errors import OrtfixError
from ortfix.i18n import N_, Msg
from ortfix.system.envpaths import (
    ConfinementError,
    Kept,
    by_folder,
    check_rel,
    read_regular,
    write_all,
)
from ortfix.system.envpaths import rel_parts as _parts

_T = TypeVar("_T")
# POSIX's flags (getattr: importable anywhere, as the tests of system/windows/confine.py need)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


class PosixEnvRoot:
    """The environment's prefix, held open; relative paths below it are operated on without following links."""

    def __init__(self, prefix: str | os.PathLike[str]) -> None:
        self.given = os.fspath(prefix)
        self.real = os.path.realpath(self.given)
        try:
            self.fd = os.open(self.real, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise OrtfixError(Msg(N_("cannot open the environment {prefix}: {error}"), prefix=self.given,
                                  error=str(exc.strerror or exc))) from exc
        st = os.fstat(self.fd)
        self.dev, self.ino, self.uid = st.st_dev, st.st_ino, st.st_uid

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> PosixEnvRoot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- paths ---------------------------------------------------------------------------------------------------

    def rel(self, path: str | os.PathLike[str]) -> str:
        """The path below the root that `path` (absolute) names. Links among its parent folders are resolved once
        here and must stay inside the root; the last component is never resolved (it may be a link to act on)."""
        text = os.fspath(path)
        if "\0" in text or not os.path.isabs(text):
            raise ConfinementError(Msg(N_("{path} is not an absolute path"), path=repr(text)))
        norm = os.path.normpath(text)
        for base in (self.given, self.real):
            base = os.path.normpath(base)
            if norm.startswith(base.rstrip("/") + "/"):
                rest = norm[len(base.rstrip("/")) + 1:]
                if self._plain(rest):
                    return rest
        parent = os.path.realpath(os.path.dirname(norm))
        real_prefix = self.real.rstrip("/") + "/"
        if parent == self.real:
            return check_rel(os.path.basename(norm))
        if not parent.startswith(real_prefix):
            raise ConfinementError(Msg(N_("{path} is outside the environment {prefix}"), path=text, prefix=self.given))
        return check_rel(parent[len(real_prefix):] + "/" + os.path.basename(norm))

    def _plain(self, rest: str) -> bool:
        """Whether every folder on the way to `rest` is a real folder now (no link to resolve)."""
        try:
            fd = self._walk(_parts(rest)[:-1], create=False)
        except (ConfinementError, FileNotFoundError):
            return False
        os.close(fd)
        return True

    def abs(self, rel: str) -> str:
        return os.path.join(self.given, rel)

    # -- the walk ------------------------------------------------------------------------------------------------

    def _walk(self, parts: list[str], *, create: bool, mode: int = 0o755) -> int:
        """A descriptor of the folder `parts` below the root, never following a link; `create` makes missing ones."""
        fd = os.dup(self.fd)
        try:
            for i, part in enumerate(parts):
                try:
                    nfd = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    with suppress(FileExistsError):
                        os.mkdir(part, mode, dir_fd=fd)
                    nfd = os.open(part, _DIR_FLAGS, dir_fd=fd)
                    os.fchmod(nfd, mode)  # mkdir's mode passes through the umask
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                        where = "/".join(parts[: i + 1])
                        raise ConfinementError(Msg(N_("{path} is a symbolic link or not a folder"),
                                                   path=self.abs(where))) from exc
                    raise
                os.close(fd)
                fd = nfd
            return fd
        except BaseException:
            os.close(fd)
            raise

    @contextmanager
    def parent(self, rel: str, *, create: bool = False) -> Iterator[tuple[int, str]]:
        """(descriptor of the folder holding `rel`, its last component)."""
        parts = _parts(rel)
        fd = self._walk(parts[:-1], create=create)
        try:
            yield fd, parts[-1]
        finally:
            os.close(fd)

    @contextmanager
    def folder(self, rel: str) -> Iterator[int]:
        fd = self._walk(_parts(rel) if rel not in ("", ".") else [], create=False)
        try:
            yield fd
        finally:
            os.close(fd)

    # -- many entries at once: each folder is walked once, when its first entry is reached --------------------

    def _each(self, rels: Iterable[str], at: Callable[[int, str], _T], missing: _T) -> dict[str, _T]:
        """`at(folder descriptor, name)` for each entry, each folder walked once; `missing` where a folder is."""
        out: dict[str, _T] = {}
        for folder, names in by_folder(rels).items():
            try:
                fd = self._walk(list(folder), create=False)
            except (FileNotFoundError, NotADirectoryError):
                out.update({rel: missing for rel, _ in names})
                continue
            try:
                for rel, name in names:
                    out[rel] = at(fd, name)
            finally:
                os.close(fd)
        return out

    def stat_many(self, rels: Iterable[str]) -> dict[str, os.stat_result | None]:
        """lstat of each entry (None when it or a folder on the way is missing)."""
        return self._each(rels, _lstat_at, None)

    def sha256_many(self, rels: Iterable[str]) -> dict[str, str | None]:
        """`sha256` of each entry, each folder walked once."""
        return self._each(rels, _sha256_at, None)

    def move_many(self, moves: Iterable[tuple[str, str]], *, replace: bool = True,
                  veto: Callable[[str, os.stat_result], str | None] | None = None) -> list[Kept]:
        """Move each (src, dst) — an entry itself, never what a link points to — creating the destination's folders.
        Source and destination folders are each walked once per folder, when the first entry in them is moved.
        `veto(src, stat)` may keep an entry where it is by returning why; missing sources are skipped. What stayed:
        vetoed entries, and with `replace=False` those whose destination exists (`why` None)."""
        groups: dict[tuple[tuple[str, ...], tuple[str, ...]], list[tuple[str, str, str, str]]] = {}
        for src, dst in moves:
            sp, dp = _parts(src), _parts(dst)
            groups.setdefault((tuple(sp[:-1]), tuple(dp[:-1])), []).append((src, sp[-1], dp[-1], dst))
        kept: list[Kept] = []
        for (sfolder, dfolder), items in groups.items():
            try:
                sfd = self._walk(list(sfolder), create=False)
            except (FileNotFoundError, NotADirectoryError):
                continue
            try:
                dfd = -1
                for src, sname, dname, dst in items:
                    try:
                        st = os.stat(sname, dir_fd=sfd, follow_symlinks=False)
                    except FileNotFoundError:
                        continue
                    why = veto(src, st) if veto is not None else None
                    if why is not None:
                        kept.append(Kept(src, dst, why))
                        continue
                    if dfd < 0:
                        dfd = self._walk(list(dfolder), create=True)
                    if not replace:
                        try:
                            os.stat(dname, dir_fd=dfd, follow_symlinks=False)
                            kept.append(Kept(src, dst, None))
                            continue
                        except FileNotFoundError:
                            pass
                    os.rename(sname, dname, src_dir_fd=sfd, dst_dir_fd=dfd)
            finally:
                os.close(sfd)
                if dfd >= 0:
                    os.close(dfd)
        return kept

    # -- queries -------------------------------------------------------------------------------------------------

    def lstat(self, rel: str) -> os.stat_result | None:
        """The entry itself (never what a link points to), or None when it or a folder on the way is missing."""
        try:
            with self.parent(rel) as (fd, name):
                return os.stat(name, dir_fd=fd, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return None

    def exists(self, rel: str) -> bool:
        return self.lstat(rel) is not None

    def is_dir(self, rel: str) -> bool:
        st = self.lstat(rel)
        return st is not None and stat.S_ISDIR(st.st_mode)

    def is_file(self, rel: str) -> bool:
        st = self.lstat(rel)
        return st is not None and stat.S_ISREG(st.st_mode)

    def readlink(self, rel: str) -> str:
        with self.parent(rel) as (fd, name):
            return os.readlink(name, dir_fd=fd)

    def listdir(self, rel: str) -> list[str]:
        with self.folder(rel) as fd:
            return os.listdir(fd)

    def read_bytes(self, rel: str, *, limit: int) -> tuple[bytes, os.stat_result]:
        """A regular file's bytes (at most `limit`, else OrtfixError) and its stat; never through a link."""
        with self.parent(rel) as (dfd, name):
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dfd)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise ConfinementError(Msg(N_("{path} is a symbolic link"), path=self.abs(rel))) from exc
                raise
        return read_regular(fd, self.abs(rel), limit)

    def open_file(self, rel: str) -> int:
        """`rel` opened for reading and writing (created when missing), never through a link."""
        with self.parent(rel) as (dfd, name):
            return os.open(name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o644,
                           dir_fd=dfd)

    def sha256(self, rel: str) -> str | None:
        """sha256 of a regular file's content; "link:<target>" for a link; None when missing or another kind."""
        try:
            with self.parent(rel) as (dfd, name):
                return _sha256_at(dfd, name)
        except (FileNotFoundError, NotADirectoryError):
            return None

    # -- changes -------------------------------------------------------------------------------------------------

    def makedirs(self, rel: str, mode: int = 0o755) -> None:
        os.close(self._walk(_parts(rel), create=True, mode=mode))

    def mkdir(self, rel: str, mode: int) -> None:
        with self.parent(rel) as (fd, name):
            os.mkdir(name, mode, dir_fd=fd)
            dfd = os.open(name, _DIR_FLAGS, dir_fd=fd)
            try:
                os.fchmod(dfd, mode)
            finally:
                os.close(dfd)

    def chown(self, rel: str, uid: int, gid: int) -> None:
        with self.parent(rel) as (fd, name):
            os.chown(name, uid, gid, dir_fd=fd, follow_symlinks=False)

    def unlink(self, rel: str) -> None:
        with self.parent(rel) as (fd, name):
            os.unlink(name, dir_fd=fd)

    def rmdir(self, rel: str) -> bool:
        """Remove an empty folder; False when it is not empty or gone."""
        try:
            with self.parent(rel) as (fd, name):
                os.rmdir(name, dir_fd=fd)
            return True
        except OSError:
            return False

    def rename(self, src: str, dst: str, *, make_parents: bool = False, replace: bool = True) -> None:
        """Move `src` to `dst` (both below the root; a link is moved as a link). `replace=False` refuses to replace
        an existing `dst` (checked under the same descriptors, just before the rename)."""
        with self.parent(src) as (sfd, sname), self.parent(dst, create=make_parents) as (dfd, dname):
            if not replace:
                try:
                    os.stat(dname, dir_fd=dfd, follow_symlinks=False)
                    raise FileExistsError(errno.EEXIST, "exists", self.abs(dst))
                except FileNotFoundError:
                    pass
            os.rename(sname, dname, src_dir_fd=sfd, dst_dir_fd=dfd)

    def link(self, src: str, dst: str, *, make_parents: bool = False) -> None:
        """A hard link of `src` (the entry itself, never a link's target) at `dst`."""
        with self.parent(src) as (sfd, sname), self.parent(dst, create=make_parents) as (dfd, dname):
            os.link(sname, dname, src_dir_fd=sfd, dst_dir_fd=dfd, follow_symlinks=False)

    def copy(self, src: str, dst: str, *, make_parents: bool = False) -> None:
        """Copy a regular file or a link (as a link) to a new `dst`, keeping the mode; for when a hard link fails."""
        with self.parent(src) as (sfd, sname), self.parent(dst, create=make_parents) as (dfd, dname):
            st = os.stat(sname, dir_fd=sfd, follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                os.symlink(os.readlink(sname, dir_fd=sfd), dname, dir_fd=dfd)
                return
            rfd = os.open(sname, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=sfd)
            try:
                wfd = os.open(dname, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                              stat.S_IMODE(st.st_mode), dir_fd=dfd)
                try:
                    while True:
                        chunk = os.read(rfd, 1 << 20)
                        if not chunk:
                            break
                        view = memoryview(chunk)
                        while view:
                            view = view[os.write(wfd, view):]
                    os.fchmod(wfd, stat.S_IMODE(st.st_mode))
                finally:
                    os.close(wfd)
            finally:
                os.close(rfd)

    def create_new(self, rel: str, fill: Callable[[int], None], mode: int, *, make_parents: bool = False) -> None:
        """Create `rel` (it must not exist: O_EXCL, never through a link), let `fill` write it, give it exactly
        `mode` and fsync it; when anything fails the half-made file is removed again (a full disk leaves nothing)."""
        with self.parent(rel, create=make_parents) as (dfd, name):
            _create_at(dfd, name, fill, mode)

    def write_new(self, rel: str, data: bytes, mode: int, *, make_parents: bool = False) -> None:
        self.create_new(rel, lambda fd: write_all(fd, data), mode, make_parents=make_parents)

    def atomic_write(self, rel: str, data: bytes, mode: int = 0o644) -> None:
        """Write via a temp file in the same folder + fsync + rename + fsync of the folder; the temp file is removed
        again when anything fails (a full disk leaves nothing behind)."""
        with self.parent(rel) as (dfd, name):
            tmp = f".{name}.{os.getpid()}.tmp"
            with suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=dfd)
            _create_at(dfd, tmp, lambda fd: write_all(fd, data), mode)
            try:
                os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
            except BaseException:
                with suppress(OSError):
                    os.unlink(tmp, dir_fd=dfd)
                raise
            with suppress(OSError):
                os.fsync(dfd)

    def symlink(self, target: str, rel: str) -> None:
        with self.parent(rel) as (fd, name):
            os.symlink(target, name, dir_fd=fd)

    def fsync_dir(self, rel: str) -> None:
        try:
            with self.folder(rel) as fd:
                os.fsync(fd)
        except OSError:
            pass

    def remove_tree(self, rel: str) -> None:
        """Delete a folder and everything in it, never following a link (links are removed as links)."""
        try:
            with self.parent(rel) as (pfd, name):
                _remove_tree_at(pfd, name)
        except (FileNotFoundError, NotADirectoryError):
            pass


def _lstat_at(dfd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        return None


def _sha256_at(dfd: int, name: str) -> str | None:
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        if stat.S_ISLNK(st.st_mode):
            return "link:" + os.readlink(name, dir_fd=dfd)
        if not stat.S_ISREG(st.st_mode):
            return None
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dfd)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        h = hashlib.sha256()
        while chunk := os.read(fd, 1 << 20):
            h.update(chunk)
        return h.hexdigest()
    finally:
        os.close(fd)


def _create_at(dfd: int, name: str, fill: Callable[[int], None], mode: int) -> None:
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dfd)
    try:
        fill(fd)
        os.fchmod(fd, mode)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with suppress(OSError):
            os.unlink(name, dir_fd=dfd)
        raise
    os.close(fd)


def _remove_tree_at(parent_fd: int, name: str) -> None:
    try:
        st = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(name, dir_fd=parent_fd)
        return
    fd = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    try:
        for entry in os.listdir(fd):
            _remove_tree_at(fd, entry)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=parent_fd)




def open_for_reading(path: str | os.PathLike[str]) -> int:
    """A file opened read-only by its path, never through a final link: a journal `check` reads, the lock `check`
    probes. The caller closes the descriptor."""
    return os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
