"""Record what a computation looked at on the file system, so that its result can be reused for as long as looking
again gives the same answers (the `check` result cache, speed/replay.py).

A missed observation would mean a stale diagnosis, so completeness comes first. Rather than trusting every module to
report what it reads, `recording()` wraps, for the duration of the computation, the os-level functions that Python
code reaches the file system through: os.stat, os.lstat, os.listdir, os.scandir, os.access, os.readlink, os.open,
builtins.open and io.open. pathlib, glob, shutil.which and os.path look these up at call time on Python >= 3.11 (the
pathlib of 3.9 and 3.10 binds them at import), so recording is offered there only, and only on POSIX (Windows'
os.path.exists is implemented in C). tests/test_replay.py cross-checks with audit hooks that nothing the check
opens or lists escapes the record.

An observation is `[op, path, answer]`, JSON-ready. Answers are chosen to change whenever what was seen changes:
- a file: type, permissions, inode, device, size, mtime and ctime (ctime cannot be set back by a user);
- a folder: type, permissions, inode, device; listing it adds its mtime (every entry added, removed or renamed
  changes it) — a folder's times are not part of a plain stat, or /tmp would invalidate everything;
- /proc and /sys: timestamps mean nothing there, so the content (or the names listed) is compared;
- the names of a folder that match a pattern (system/listing.py, wrapped too): those names, so that a busy folder
  holding an environment (/tmp) invalidates nothing unless a matching entry comes or goes. The saved observations
  are read back from a file, which is untrusted: only a pattern listing.WATCHED names is compiled again, and an
  observation of any other shape is a full check.
What was looked at under `ignored` (ortfix's own cache folder) is not recorded. Domain modules know nothing of
this: an in-process cache that answers without a wrapped call is emptied by the caller before recording
(replay.SavedCheck.record), and what a child process looked at is noted there too. The entries a scandir yields are
not stat'ed through os.stat, but an entry cannot change type without its folder's listing changing.
"""

from __future__ import annotations

import builtins
import io
import os
import re
import stat as statmod
from collections.abc import Sequence

from ortfix.system import listing
from ortfix.system.host import HOST

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on the path of a cached `check`
if TYPE_CHECKING:
    from typing import Any

    Observation = list[Any]  # [op, path, answer]

_VOLATILE_ROOTS = ("/proc/", "/sys/")
_VOLATILE_READ_LIMIT = 1 << 16
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

_real_stat = os.stat
_real_lstat = os.lstat
_real_listdir = os.listdir
_real_scandir = os.scandir
_real_access = os.access
_real_readlink = os.readlink
_real_os_open = os.open
_real_open = builtins.open


def supported() -> bool:
    return HOST.records_checks


def _volatile(path: str) -> bool:
    return path.startswith(_VOLATILE_ROOTS) or path in ("/proc", "/sys")


def _stat_answer(st: os.stat_result, path: str) -> list[Any]:
    if _volatile(path):
        return ["v", statmod.S_IFMT(st.st_mode)]
    if statmod.S_ISDIR(st.st_mode):
        return ["d", st.st_mode, st.st_ino, st.st_dev]
    return ["f", st.st_mode, st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _error(exc: OSError) -> list[Any]:
    return ["e", exc.errno]


def answer(op: str, path: str) -> list[Any]:
    """What looking at `path` the way `op` does answers now (the same function records and re-checks)."""
    try:
        if op == "stat":
            return _stat_answer(_real_stat(path), path)
        if op == "lstat":
            return _stat_answer(_real_lstat(path), path)
        if op == "list":
            if _volatile(path):
                return ["names", sorted(_real_listdir(path))]
            st = _real_stat(path)
            return ["l", st.st_ino, st.st_dev, st.st_mtime_ns, st.st_ctime_ns]
        if op.startswith("match:"):  # system/listing.py: only the names that match are an answer
            pattern = _watched(op.split(":", 1)[1])
            return ["names", sorted(filter(pattern.match, _real_listdir(path)))]
        if op == "read":
            if _volatile(path):
                with _real_open(path, "rb") as f:
                    return ["content", f.read(_VOLATILE_READ_LIMIT).decode("latin-1")]
            return _stat_answer(_real_stat(path), path)
        if op.startswith("access:"):
            return [_real_access(path, int(op.split(":", 1)[1]))]
        if op == "readlink":
            return ["link", _real_readlink(path)]
    except OSError as exc:
        return _error(exc)
    raise ValueError(f"unknown observation {op!r}")


def _watched(text: str) -> re.Pattern[str]:
    """The pattern `text`, if it is one listing.WATCHED names (a saved observation is untrusted: nothing else is
    compiled); ValueError otherwise."""
    if text not in listing.WATCHED:
        raise ValueError(f"a listing by a pattern that is not watched: {text!r}")  # i18n: english
    return re.compile(text)


class Recorder:
    def __init__(self, ignored: Sequence[str] = ()) -> None:
        self._ignored = tuple(os.path.join(os.path.abspath(p), "") for p in ignored)
        self._seen: dict[tuple[str, str], list[Any]] = {}
        self._kept: dict[str, bool] = {}  # path → recorded (not ignored)
        self.unrepeatable: str | None = None  # why the computation cannot be validated by looking again

    @property
    def observations(self) -> list[Observation]:
        return [[op, path, ans] for (op, path), ans in self._seen.items()]

    def _path(self, path: Any) -> str | None:
        if isinstance(path, int):
            return None  # a descriptor: what it refers to was recorded when it was opened
        text = os.fsdecode(os.fspath(path))
        if text not in self._kept:  # the same paths come back hundreds of times in one check
            absolute = os.path.abspath(text)
            ignored = (text == os.devnull  # a child's stdin (subprocess opens it read-write): nothing can change
                       or absolute.startswith(self._ignored) or os.path.join(absolute, "") in self._ignored)
            self._kept[text] = not ignored
        return text if self._kept[text] else None

    def note(self, op: str, path: Any, seen: os.stat_result | list[Any] | None = None) -> None:
        """Record looking at `path`; `seen` is what the wrapped call itself got, which spares looking twice."""
        text = self._path(path)
        if text is None:
            return
        if isinstance(seen, os.stat_result):
            seen = _stat_answer(seen, text)
        ans = answer(op, text) if seen is None else seen
        before = self._seen.setdefault((op, text), ans)
        if before != ans:
            self.unrepeatable = f"{text} changed while it was being looked at"  # i18n: english

    def note_write(self, path: Any) -> None:
        text = self._path(path)
        if text is not None:
            self.unrepeatable = f"wrote {text}"


_active: Recorder | None = None


def _stat(path: Any, *, dir_fd: int | None = None, follow_symlinks: bool = True) -> os.stat_result:
    if _active is None or dir_fd is not None:
        if _active is not None:
            _active.unrepeatable = "os.stat relative to a directory descriptor"
        return _real_stat(path, dir_fd=dir_fd, follow_symlinks=follow_symlinks)
    return _noted_stat(_real_stat, "stat" if follow_symlinks else "lstat", path, follow_symlinks=follow_symlinks)


def _lstat(path: Any, *, dir_fd: int | None = None) -> os.stat_result:
    if _active is None or dir_fd is not None:
        if _active is not None:
            _active.unrepeatable = "os.lstat relative to a directory descriptor"
        return _real_lstat(path, dir_fd=dir_fd)
    return _noted_stat(_real_lstat, "lstat", path)


def _noted_stat(real: Any, op: str, path: Any, **kwargs: Any) -> os.stat_result:
    recorder = _active
    assert recorder is not None
    try:
        st: os.stat_result = real(path, **kwargs)
    except OSError as exc:
        recorder.note(op, path, _error(exc))
        raise
    recorder.note(op, path, st)
    return st


def _listdir(path: Any = ".") -> Any:
    if _active is not None:
        _active.note("list", path)
    return _real_listdir(path)


def _scandir(path: Any = ".") -> Any:
    if _active is not None:
        _active.note("list", path)
    return _real_scandir(path)


def _names_matching(folder: str, pattern: re.Pattern[str]) -> list[str]:
    if _active is not None and pattern.pattern not in listing.WATCHED:
        why = "a listing by a pattern that is not watched (system/listing.py): "  # i18n: english
        _active.unrepeatable = why + repr(pattern.pattern)
    try:
        names = sorted(filter(pattern.match, _real_listdir(folder)))
    except OSError as exc:
        if _active is not None:
            _active.note(f"match:{pattern.pattern}", folder, _error(exc))
        raise
    if _active is not None:
        _active.note(f"match:{pattern.pattern}", folder, ["names", names])
    return names


def _access(path: Any, mode: int, *args: Any, **kwargs: Any) -> bool:
    if _active is not None:
        if args or kwargs:
            _active.unrepeatable = "os.access with extra arguments"
        else:
            _active.note(f"access:{mode}", path)
    return _real_access(path, mode, *args, **kwargs)


def _readlink(path: Any, *args: Any, **kwargs: Any) -> Any:
    if _active is not None:
        _active.note("readlink", path)
    return _real_readlink(path, *args, **kwargs)


def _os_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
    if _active is not None:
        if flags & _WRITE_FLAGS:
            _active.note_write(path)
        elif kwargs.get("dir_fd") is not None:
            _active.unrepeatable = "os.open relative to a directory descriptor"
        else:
            _active.note("read", path)
    return _real_os_open(path, flags, *args, **kwargs)


def _open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
    if _active is not None and not isinstance(file, int):
        if any(c in mode for c in "wax+"):
            _active.note_write(file)
        else:
            _active.note("read", file)
    return _real_open(file, mode, *args, **kwargs)


_PATCHES = (
    (os, "stat", _stat),
    (os, "lstat", _lstat),
    (os, "listdir", _listdir),
    (os, "scandir", _scandir),
    (os, "access", _access),
    (os, "readlink", _readlink),
    (os, "open", _os_open),
    (builtins, "open", _open),
    (io, "open", _open),
    (listing, "names_matching", _names_matching),
)


def recording(ignored: Sequence[str] = ()) -> _Recording:
    """Record every file system observation made inside the `with` block (one recording at a time, one thread)."""
    return _Recording(ignored)


class _Recording:
    """recording's context manager (a class: contextlib's import is not needed on a replay's path)."""

    __slots__ = ("ignored", "originals")

    def __init__(self, ignored: Sequence[str]) -> None:
        self.ignored = ignored
        self.originals: list[tuple[object, str, object]] = []

    def __enter__(self) -> Recorder:
        global _active
        if _active is not None:
            raise RuntimeError("fsrecord.recording() does not nest")
        recorder = Recorder(self.ignored)
        self.originals = [(module, name, getattr(module, name)) for module, name, _ in _PATCHES]
        for module, name, replacement in _PATCHES:
            setattr(module, name, replacement)
        _active = recorder
        return recorder

    def __exit__(self, *exc: object) -> None:
        global _active
        _active = None
        for module, name, original in self.originals:
            setattr(module, name, original)


def still_true(observations: Sequence[Observation]) -> bool:
    """Whether looking again answers exactly what was recorded."""
    try:
        return all(_well_formed(seen) and answer(seen[0], seen[1]) == seen[2] for seen in observations)
    except (ValueError, TypeError):
        return False


def _well_formed(seen: object) -> bool:
    """An observation as `Recorder.observations` makes them (a saved one is read back from a file: untrusted)."""
    return (isinstance(seen, list) and len(seen) == 3 and isinstance(seen[0], str) and isinstance(seen[1], str)
            and isinstance(seen[2], list))


def newest_change_ns(observations: Sequence[Observation]) -> int:
    """The latest mtime or ctime among what was observed (0 if none), for the racy-timestamp rule."""
    newest = 0
    for op, _path, ans in observations:
        if ans and ans[0] == "f":
            newest = max(newest, ans[5], ans[6])
        elif op == "list" and ans and ans[0] == "l":
            newest = max(newest, ans[3], ans[4])
    return newest
