"""The snapshot an install is judged by: every path under the roots it may write (site-packages, bin, the
prefix's own files) with its type and stat fingerprint, and the difference between two snapshots."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable, Mapping
from typing import Union

from ortfix.transaction.ownfiles import DATA_FOLDERS

SnapshotRow = list[Union[str, int]]  # ["d", "l" or "f", inode, size, mtime_ns]: a JSON row


def _rel(path: str, prefix: str) -> str:
    """`path` below `prefix`, "/"-joined on every platform (as confine's rel paths and RECORD rows are)."""
    return os.path.relpath(path, prefix).replace(os.sep, "/")


def _walk_tree(roots: Iterable[str], prefix: str) -> dict[str, SnapshotRow]:
    """rel path → [type, inode, size, mtime_ns] for everything under `roots` (the snapshot an install is judged by)."""
    out: dict[str, SnapshotRow] = {}
    stack = [r for r in dict.fromkeys(roots) if os.path.isdir(r)]
    seen: set[str] = set()
    while stack:
        folder = stack.pop()
        if folder in seen:
            continue
        seen.add(folder)
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for e in entries:
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            kind = "d" if stat.S_ISDIR(st.st_mode) else "l" if stat.S_ISLNK(st.st_mode) else "f"
            out[_rel(e.path, prefix)] = [kind, st.st_ino, st.st_size, st.st_mtime_ns]
            if kind == "d":
                stack.append(e.path)
    return out


def take_snapshot(roots: Iterable[str], prefix: str) -> dict[str, SnapshotRow]:
    """What an install is judged by: everything under `roots` (site-packages, bin, the data folders), the data folders
    themselves (an install may create them), and the files directly in the prefix, where an installer may leave its
    own (uv writes `<prefix>/.lock`)."""
    roots = list(roots)
    out = _walk_tree(roots, prefix)
    for name in DATA_FOLDERS:
        folder = os.path.join(prefix, name)
        if folder in roots:
            with contextlib.suppress(OSError):
                st = os.lstat(folder)
                if stat.S_ISDIR(st.st_mode):
                    out[name] = ["d", st.st_ino, st.st_size, st.st_mtime_ns]
    with contextlib.suppress(OSError):
        for e in os.scandir(prefix):
            st = e.stat(follow_symlinks=False)
            if not stat.S_ISDIR(st.st_mode):
                kind = "l" if stat.S_ISLNK(st.st_mode) else "f"
                out[_rel(e.path, prefix)] = [kind, st.st_ino, st.st_size, st.st_mtime_ns]
    return out


def diff_snapshots(before: Mapping[str, SnapshotRow], after: Mapping[str, SnapshotRow]) -> dict[str, list[str]]:
    created = sorted(set(after) - set(before))
    removed = sorted(r for r in before if r not in after and before[r][0] != "d")
    changed = sorted(r for r in before if r in after and before[r][0] == "f" and after[r] != before[r])
    return {"created": created, "removed": removed, "changed": changed}

