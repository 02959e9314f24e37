"""File-system helpers for the handlers, all relative to the environment's root (`EnvRoot`): stat
fingerprints, folder metadata and re-creation, parent folders, removal of emptied folders, cached bytecode."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
from collections.abc import Iterable, Sequence
from typing import Union

from ortfix.errors import OrtfixError
from ortfix.i18n import N_, Msg
from ortfix.system.confine import EnvRoot
from ortfix.system.envpaths import Kept
from ortfix.system.host import HOST
from ortfix.transaction.actions.base import TargetEnv
from ortfix.transaction.undo_notes import Cause, UndoNote

PYC_CACHE = "__pycache__"

FileRow = list[Union[str, int, None]]  # [sha256 (None: unknown), inode, size, mtime_ns] of a file an install wrote


_PYC_TAIL = re.compile(r"\.[A-Za-z0-9_-]+(?:\.opt-\d+)?\.pyc")  # `<stem>` + this: `__pycache__/<stem>.<tag>.pyc`


def cached_bytecode(fs: EnvRoot, rels: Iterable[str]) -> list[str]:
    """The `__pycache__/<stem>.<tag>[.opt-N].pyc` files an interpreter wrote for the .py files among `rels`
    (rel paths); each `__pycache__` folder is listed once."""
    stems: dict[str, set[str]] = {}
    for rel in rels:
        if rel.endswith(".py"):
            folder, _, name = rel.rpartition("/")
            stems.setdefault(f"{folder}/{PYC_CACHE}" if folder else PYC_CACHE, set()).add(name[:-3])
    out = []
    for cache, names in stems.items():
        try:
            listing = fs.listdir(cache)
        except (OSError, OrtfixError):
            continue
        for entry in sorted(listing):
            stem = entry.split(".", 1)[0]  # a module's name holds no dot
            if stem in names and _PYC_TAIL.fullmatch(entry, len(stem)):
                out.append(f"{cache}/{entry}")
    return out


def written_again(env: TargetEnv, kept: Sequence[Kept], digests: dict[str, str]) -> list[UndoNote]:
    """A note for each earlier file whose place another file took after the transaction (a restore with
    `replace=False` kept its stash copy): the same bytes as before the apply, or other ones."""
    now = env.fs.sha256_many(k.dst for k in kept)
    notes = []
    for k in kept:
        if now[k.dst] is not None and now[k.dst] == digests.get(k.dst):
            notes.append(UndoNote(Cause.BACK_ALREADY, env.abs(k.dst), Msg(
                N_("{path} was written again after the apply with the bytes it had before; the stashed copy stays in "
                   "{copy}"), path=env.abs(k.dst), copy=env.abs(k.src))))
        elif f"/{PYC_CACHE}/" in f"/{k.dst}" and k.dst.endswith(".pyc"):
            notes.append(UndoNote(Cause.BYTECODE, env.abs(k.dst), Msg(
                N_("{path} was compiled again after the apply; left in place, the earlier copy stays in {copy}"),
                path=env.abs(k.dst), copy=env.abs(k.src))))
        else:
            notes.append(UndoNote(Cause.REPLACED_LATER, env.abs(k.dst), Msg(
                N_("{path} was changed after the apply; its earlier content stays in {copy}"), path=env.abs(k.dst),
                copy=env.abs(k.src))))
    return notes


def fingerprint(st: os.stat_result) -> list[int]:
    """What says a file is still the one recorded: inode, size and modification time. A rename keeps all three; a
    later installer's copy is a new file with a new modification time even where the inode number and the bytes
    agree (pip unlinks, then writes); a chmod or chown changes none of them."""
    return [st.st_ino, st.st_size, st.st_mtime_ns]


def dir_meta(fs: EnvRoot, rel: str) -> list[int]:
    st = fs.lstat(rel)
    if st is None:
        raise FileNotFoundError(errno.ENOENT, "gone", rel)
    return [stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid]


def make_dir(fs: EnvRoot, rel: str, meta: Sequence[int]) -> None:
    fs.mkdir(rel, int(meta[0]) & 0o1777)
    # Running as root, the folder gets its recorded owner back, but only when that is the environment's owner: the
    # record comes from the journal, and must not hand a folder to anyone else.
    if HOST.runs_as_root() and len(meta) == 3 and meta[1] == fs.uid:
        with contextlib.suppress(OSError):
            fs.chown(rel, int(meta[1]), int(meta[2]))


def remove_empty_dirs(fs: EnvRoot, dirs: Iterable[str]) -> list[str]:
    """rmdir each folder that is empty, deepest first; the ones removed."""
    return [d for d in sorted(set(dirs), key=lambda p: (-p.count("/"), p)) if fs.rmdir(d)]


def parent_dirs(rel: str, stop: str = "") -> list[str]:
    """The folders between `stop` (exclusive) and `rel` (exclusive), shallowest first."""
    out = []
    d = os.path.dirname(rel)
    while d and d != stop and (not stop or d.startswith(stop + "/")):
        out.append(d)
        d = os.path.dirname(d)
    return list(reversed(out))


def is_writable(path: str) -> bool:
    p = path
    while not os.path.exists(p):
        parent = os.path.dirname(p)
        if parent == p:
            return False
        p = parent
    return os.access(p, os.W_OK)


def walk_rel(fs: EnvRoot, rel: str) -> list[str]:
    """Every file and link below a folder (rel paths), never following a link."""
    out: list[str] = []
    try:
        names = fs.listdir(rel)
    except (OSError, OrtfixError):
        return out
    for name in sorted(names):
        child = f"{rel}/{name}"
        if fs.is_dir(child):
            out += walk_rel(fs, child)
        else:
            out.append(child)
    return out


def missing_dirs(fs: EnvRoot, rel: str) -> list[str]:
    return [d for d in parent_dirs(rel) if not fs.exists(d)]


def parent_dirs_of(rels: Iterable[str]) -> set[str]:
    return {d for rel in rels for d in parent_dirs(rel)}

