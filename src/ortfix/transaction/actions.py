"""What each kind of plan action does to the environment, and how it is undone exactly.

Every kind has a handler with the same contract (after conda's PathAction):

- `verify(env, details)`: every reason it cannot run here, without changing anything (all steps are verified before
  the first one executes). `details` may come from a saved plan or a journal: untrusted, checked field by field.
- `describe(env, details)`: the exact commands and file changes, for `apply --dry-run`;
- `execute(env, step, ctx)`: first `ctx.commit(record)` (the journal then holds everything needed to undo the step),
  then the change;
- `check_undo(env, step, ctx)`: before a rollback changes anything, every reason the step cannot be undone exactly
  (a stashed file missing or changed);
- `reverse(env, step, ctx)`: undo, judged from what is on disk now, so it is idempotent and also undoes a step that
  was cut off half-way (Ctrl-C, kill -9, power loss). Returns warnings for what could not be restored exactly.

Every file operation goes through the environment's `EnvRoot` (confine.py): paths are relative to the prefix and are
walked without following any link, at the moment of use. Commands are built here from typed values; nothing from a
plan or journal is ever executed as an argument list.

`HANDLERS` maps a kind to its handler; a new kind is one more class and one more `register()` call. Nothing here
imports click or prints: output goes through the context's callbacks.
"""

from __future__ import annotations

import base64
import contextlib
import csv
import errno
import io
import json
import os
import re
import shutil
import stat
import tempfile
import threading
import time
import zipfile
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import unquote, urlparse

from packaging.utils import canonicalize_name

from ortfix import subproc
from ortfix.errors import OrtfixError
from ortfix.fields import (
    BadField,
    distribution_name,
    requirement,
    want_bool,
    want_dict,
    want_int,
    want_list,
    want_sha,
    want_str,
    want_str_list,
)
from ortfix.plan.kinds import PIP_INSTALL, PIP_UNINSTALL, SYMLINK, WRITE_FILE
from ortfix.system import hooks
from ortfix.transaction.confine import ConfinementError, EnvRoot, check_rel
from ortfix.transaction.journal import Step, StepState, TransactionStore

ORIGIN_PLAN = "plan"
ORIGIN_REPLACED = "replaced-by-pip"
INSTALLERS = ("pip", "uv")
FILE_MODES = (0o644,)  # the only modes a write-file step may give (hooks are data and modules, never executables)
_RECORD_LIMIT = 64 << 20


@dataclass(frozen=True)
class TargetEnv:
    """The environment actions touch. Paths are canonical (links resolved once, when the environment is opened);
    the first six fields are journaled (rollback needs no probe), the rest belong to this run only."""

    python: str
    prefix: str
    purelib: str
    platlib: str
    scripts: str
    env_kind: str
    uv: str | None = None  # the uv found on PATH now (never one named in a file)
    break_system_packages: bool = False  # `apply --system` on an externally managed Python
    root: EnvRoot | None = field(default=None, compare=False, repr=False)

    @property
    def site_dirs(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((self.purelib, self.platlib)))

    @property
    def fs(self) -> EnvRoot:
        if self.root is None:
            raise RuntimeError("the environment was not opened")
        return self.root

    def journaled(self) -> dict[str, str]:
        return {"python": self.python, "prefix": self.prefix, "purelib": self.purelib, "platlib": self.platlib,
                "scripts": self.scripts, "env_kind": self.env_kind}

    def rel(self, path: str) -> str:
        """The path below the prefix that an absolute path names; ConfinementError when it lies outside."""
        return self.fs.rel(path)

    def abs(self, rel: str) -> str:
        return os.path.join(self.prefix, rel)

    def site_rels(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.rel(d) for d in self.site_dirs))

    def hook_rels(self) -> dict[str, str]:
        """rel path → what it is, for every file a write-file step may write: the hooks ortfix renders itself."""
        activate, deactivate = hooks.conda_hook_paths(self.prefix)
        module, pth = hooks.preload_paths(self.purelib)
        return {self.rel(str(activate)): "conda activate.d hook", self.rel(str(deactivate)): "conda deactivate.d hook",
                self.rel(str(module)): "preload hook module", self.rel(str(pth)): "preload hook .pth"}


def open_env(python: str, prefix: str, purelib: str, platlib: str, scripts: str, env_kind: str, *,
             uv: str | None = None, break_system_packages: bool = False) -> TargetEnv:
    """Open the environment's root and canonicalise its paths; every folder actions touch must lie inside it."""
    root = EnvRoot(prefix)
    try:
        real = root.real
        paths = []
        for what, path in (("purelib", purelib), ("platlib", platlib), ("scripts", scripts)):
            if "\0" in path or not os.path.isabs(path):
                raise OrtfixError(f"the environment's {what} {path!r} is not an absolute path")
            canon = os.path.realpath(path)
            if not canon.startswith(real.rstrip("/") + "/"):
                raise ConfinementError(f"the environment's {what} {path} is outside its prefix {prefix}")
            paths.append(canon)
        return TargetEnv(python=python, prefix=real, purelib=paths[0], platlib=paths[1], scripts=paths[2],
                         env_kind=env_kind, uv=uv, break_system_packages=break_system_packages, root=root)
    except BaseException:
        root.close()
        raise


@dataclass(frozen=True)
class StepContext:
    """What a running step may use: the journal (write-ahead record and sidecars), its stash, output callbacks."""

    store: TransactionStore
    tx_id: str
    index: int
    commit: Callable[[Mapping[str, Any]], None]  # journal the step's undo record now (before the change)
    echo: Callable[[str], None]
    output: Callable[[str, bool], None]  # a line of a child's output (pip), and whether it came from stderr
    crash_midway: bool = False  # test-only fault injection: die half-way through this step

    @property
    def step_rel(self) -> str:
        return self.store.step_rel(self.tx_id, self.index)

    @property
    def stash_rel(self) -> str:
        return self.store.stash_rel(self.tx_id, self.index)

    def write_sidecar(self, name: str, doc: Any) -> str:
        return self.store.write_sidecar(self.tx_id, self.index, name, doc)

    def read_sidecar(self, name: str, sha256: str) -> Any:
        return self.store.read_sidecar(self.tx_id, self.index, name, sha256)


def test_crash() -> None:
    """Fault injection (ORTFIX_TEST_CRASH_*): die like kill -9 would, without cleaning up anything."""
    os._exit(99)


# ---------------------------------------------------------------------------------------------------------------------
# typed reading of untrusted details and records
# ---------------------------------------------------------------------------------------------------------------------


class Handler(ABC):
    kind: ClassVar[str]
    details_keys: ClassVar[frozenset[str]]  # exactly what `details` holds
    record_keys: ClassVar[frozenset[str]]  # every key a record may hold
    started_keys: ClassVar[frozenset[str]]  # what the first commit writes: a started step without them is corrupt

    def check_step(self, env: TargetEnv, step: Step) -> str | None:
        """Why a journaled step cannot be trusted for undo (a missing, unknown or mistyped field, a path outside the
        environment), or None."""
        missing = sorted(self.details_keys - set(step.details))
        if missing:
            return f"lacks detail {missing[0]!r}"
        unknown = sorted(set(step.details) - self.details_keys)
        if unknown:
            return f"has an unknown detail {unknown[0]!r}"
        unknown = sorted(set(step.record) - self.record_keys)
        if unknown:
            return f"has an unknown record field {unknown[0]!r}"
        if step.state is not StepState.PLANNED:
            missing = sorted(self.started_keys - set(step.record))
            if missing:
                return f"lacks record field {missing[0]!r}"
        try:
            self.check_details(env, step.details)
            if step.state is not StepState.PLANNED:
                self.check_record(env, step)
        except (BadField, OrtfixError) as exc:
            return exc.one_line() if isinstance(exc, OrtfixError) else str(exc)
        return None

    @abstractmethod
    def check_details(self, env: TargetEnv, details: Mapping[str, Any]) -> None:
        """Raise BadField/ConfinementError unless every field is of the expected type and every path inside."""

    def check_record(self, env: TargetEnv, step: Step) -> None:  # noqa: B027 (most kinds check their record)
        """Raise BadField/ConfinementError unless the record's fields are well-formed."""

    @abstractmethod
    def verify(self, env: TargetEnv, details: Mapping[str, Any]) -> list[str]: ...

    @abstractmethod
    def describe(self, env: TargetEnv, details: Mapping[str, Any]) -> list[str]: ...

    @abstractmethod
    def execute(self, env: TargetEnv, step: Step, ctx: StepContext) -> Mapping[str, Any]:
        """Do it; returns the final record (the journal gets it with the step marked done)."""

    def check_undo(self, env: TargetEnv, step: Step, ctx: StepContext) -> list[str]:
        """Every reason the step cannot be undone exactly (its stash is incomplete); checked before any change."""
        return []

    @abstractmethod
    def reverse(self, env: TargetEnv, step: Step, ctx: StepContext) -> list[str]: ...

    def changes(self, step: Step) -> list[str]:
        """What the step changed, one '+ x' / '- x' / '~ x' line each, for `history`."""
        return [step.summary]


HANDLERS: dict[str, Handler] = {}


def register(handler: Handler) -> Handler:
    HANDLERS[handler.kind] = handler
    return handler


def handler_for(kind: str) -> Handler:
    try:
        return HANDLERS[kind]
    except KeyError as exc:
        raise OrtfixError(f"unknown action kind {kind!r}", hint=f"this ortfix knows {', '.join(sorted(HANDLERS))}"
                          ) from exc


def verified(env: TargetEnv, kind: str, details: Mapping[str, Any]) -> list[str]:
    """The handler's problems, with malformed details reported as one problem instead of an exception."""
    handler = handler_for(kind)
    try:
        handler.check_details(env, details)
    except (BadField, OrtfixError) as exc:
        return [exc.one_line() if isinstance(exc, OrtfixError) else str(exc)]
    return handler.verify(env, details)


# ---------------------------------------------------------------------------------------------------------------------
# file-system helpers (all relative to the environment's root)
# ---------------------------------------------------------------------------------------------------------------------

_PYC_CACHE = "__pycache__"


_PYC_TAIL = re.compile(r"\.[A-Za-z0-9_-]+(?:\.opt-\d+)?\.pyc")  # `<stem>` + this: `__pycache__/<stem>.<tag>.pyc`


def cached_bytecode(fs: EnvRoot, rels: Iterable[str]) -> list[str]:
    """The `__pycache__/<stem>.<tag>[.opt-N].pyc` files an interpreter wrote for the .py files among `rels`
    (rel paths); each `__pycache__` folder is listed once."""
    stems: dict[str, set[str]] = {}
    for rel in rels:
        if rel.endswith(".py"):
            folder, _, name = rel.rpartition("/")
            stems.setdefault(f"{folder}/{_PYC_CACHE}" if folder else _PYC_CACHE, set()).add(name[:-3])
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


def _fingerprint(st: os.stat_result) -> list[int]:
    """What says a file is still the one recorded: inode, size and modification time. A rename keeps all three; a
    later installer's copy is a new file with a new modification time even where the inode number and the bytes
    agree (pip unlinks, then writes); a chmod or chown changes none of them."""
    return [st.st_ino, st.st_size, st.st_mtime_ns]


def _dir_meta(fs: EnvRoot, rel: str) -> list[int]:
    st = fs.lstat(rel)
    if st is None:
        raise FileNotFoundError(errno.ENOENT, "gone", rel)
    return [stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid]


def _make_dir(fs: EnvRoot, rel: str, meta: Sequence[int]) -> None:
    fs.mkdir(rel, int(meta[0]) & 0o1777)
    # Running as root, the folder gets its recorded owner back, but only when that is the environment's owner: the
    # record comes from the journal, and must not hand a folder to anyone else.
    if os.geteuid() == 0 and len(meta) == 3 and meta[1] == fs.uid:
        with contextlib.suppress(OSError):
            fs.chown(rel, int(meta[1]), int(meta[2]))


def _remove_empty_dirs(fs: EnvRoot, dirs: Iterable[str]) -> list[str]:
    """rmdir each folder that is empty, deepest first; the ones removed."""
    return [d for d in sorted(set(dirs), key=lambda p: (-p.count("/"), p)) if fs.rmdir(d)]


def _parents(rel: str, stop: str = "") -> list[str]:
    """The folders between `stop` (exclusive) and `rel` (exclusive), shallowest first."""
    out = []
    d = os.path.dirname(rel)
    while d and d != stop and (not stop or d.startswith(stop + "/")):
        out.append(d)
        d = os.path.dirname(d)
    return list(reversed(out))


def _writable(path: str) -> bool:
    p = path
    while not os.path.exists(p):
        parent = os.path.dirname(p)
        if parent == p:
            return False
        p = parent
    return os.access(p, os.W_OK)


# ---------------------------------------------------------------------------------------------------------------------
# installed distributions
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class InstalledDist:
    name: str
    version: str
    location: str
    dist_info: str

    @property
    def normalized(self) -> str:
        return canonicalize_name(self.name)


def _metadata_headers(path: str) -> dict[str, str]:
    out: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.strip():
                    break
                key, sep, value = line.partition(":")
                if sep and key.lower() in ("name", "version") and key.lower() not in out:
                    out[key.lower()] = value.strip()
    except OSError:
        pass
    return out


def installed_distributions(dirs: Iterable[str]) -> dict[str, InstalledDist]:
    """normalized name → the .dist-info distribution installed in `dirs` (the first one found wins, as for pip)."""
    out: dict[str, InstalledDist] = {}
    for location in dict.fromkeys(dirs):
        try:
            names = sorted(os.listdir(location))
        except OSError:
            continue
        for entry in names:
            if not entry.endswith(".dist-info"):
                continue
            dist_info = os.path.join(location, entry)
            headers = _metadata_headers(os.path.join(dist_info, "METADATA"))
            name = headers.get("name") or entry[: -len(".dist-info")].rsplit("-", 1)[0]
            dist = InstalledDist(name, headers.get("version", ""), location, dist_info)
            out.setdefault(dist.normalized, dist)
    return out


@dataclass(frozen=True)
class RecordRow:
    rel: str  # below the prefix
    sha256: str | None  # hex, from RECORD's urlsafe-base64 `sha256=` (None when RECORD gives no hash)


def read_record(env: TargetEnv, location_rel: str, dist_info_rel: str) -> list[RecordRow]:
    """The rows of a distribution's RECORD as paths below the prefix. A row leading outside the environment raises
    ConfinementError: ortfix never moves a file it cannot confine."""
    rel = f"{dist_info_rel}/RECORD"
    try:
        data, _st = env.fs.read_bytes(rel, limit=_RECORD_LIMIT)
    except OSError as exc:
        raise OrtfixError(f"cannot read {env.abs(rel)}: {exc.strerror or exc}",
                          hint="a distribution without a RECORD cannot be uninstalled exactly") from exc
    rows = []
    for row in csv.reader(io.StringIO(data.decode("utf-8", "replace"), newline="")):
        if not row or not row[0]:
            continue
        path = os.path.normpath(os.path.join(env.abs(location_rel), row[0]))
        digest = None
        if len(row) > 1 and row[1].startswith("sha256="):
            with contextlib.suppress(ValueError):
                raw = row[1][len("sha256="):]
                digest = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)).hex()
        rows.append(RecordRow(env.rel(path), digest))
    return rows


def _walk_rel(fs: EnvRoot, rel: str) -> list[str]:
    """Every file and link below a folder (rel paths), never following a link."""
    out: list[str] = []
    try:
        names = fs.listdir(rel)
    except (OSError, OrtfixError):
        return out
    for name in sorted(names):
        child = f"{rel}/{name}"
        if fs.is_dir(child):
            out += _walk_rel(fs, child)
        else:
            out.append(child)
    return out


def record_paths(env: TargetEnv, location_rel: str, dist_info_rel: str) -> list[str]:
    """What uninstalling a distribution removes: its RECORD rows, every file in its .dist-info, and the bytecode the
    interpreter cached for its modules; rel paths of those that exist."""
    paths: dict[str, None] = {r.rel: None for r in read_record(env, location_rel, dist_info_rel)}
    paths.update(dict.fromkeys(_walk_rel(env.fs, dist_info_rel)))
    paths.update(dict.fromkeys(cached_bytecode(env.fs, list(paths))))
    present = env.fs.stat_many(paths)
    return [p for p in paths if present[p] is not None]


# ---------------------------------------------------------------------------------------------------------------------
# pip-uninstall: move the distribution's files aside (same filesystem, rename), like pip's own stash
# ---------------------------------------------------------------------------------------------------------------------


class PipUninstall(Handler):
    kind = PIP_UNINSTALL
    details_keys = frozenset({"distribution", "version", "location", "dist_info"})
    record_keys = started_keys = frozenset({"sidecars", "files", "bytes"})

    def check_details(self, env: TargetEnv, details: Mapping[str, Any]) -> None:
        distribution_name(want_str(details, "distribution", limit=200))
        want_str(details, "version", limit=200)
        self._dist(env, details)

    def _dist(self, env: TargetEnv, details: Mapping[str, Any]) -> tuple[str, str]:
        """(location, .dist-info) as rel paths: the .dist-info directly in one of the environment's site folders."""
        location = env.rel(want_str(details, "location"))
        dist_info = env.rel(want_str(details, "dist_info"))
        if location not in env.site_rels():
            raise BadField(f"{details['location']} is not a site-packages folder of this environment")
        if os.path.dirname(dist_info) != location or not dist_info.endswith((".dist-info", ".egg-info")):
            raise BadField(f"{details['dist_info']} is not a distribution's metadata folder in {details['location']}")
        return location, dist_info

    def check_record(self, env: TargetEnv, step: Step) -> None:
        sidecars = want_dict(step.record, "sidecars")
        if set(sidecars) != {"files"}:
            raise BadField("field 'sidecars' must name exactly the 'files' sidecar")
        want_sha(sidecars, "files")
        want_int(step.record, "files")
        want_int(step.record, "bytes")

    def verify(self, env: TargetEnv, details: Mapping[str, Any]) -> list[str]:
        location, dist_info = self._dist(env, details)
        name = f"{details['distribution']} {details['version']}"
        if not env.fs.is_dir(dist_info):
            return [f"{name} is no longer installed ({env.abs(dist_info)} is gone)"]
        if not dist_info.endswith(".dist-info"):
            return [f"{name} was installed without a RECORD ({os.path.basename(dist_info)}): uninstall it with pip"]
        try:
            paths = record_paths(env, location, dist_info)
        except ConfinementError as exc:
            return [f"{name} lists files outside the environment or behind a link: {exc.message}; uninstall it with "
                    "pip yourself"]
        except OrtfixError as exc:
            return [exc.one_line()]
        problems = []
        for folder in sorted({os.path.dirname(p) for p in paths}):
            if not os.access(env.abs(folder), os.W_OK):
                problems.append(f"cannot move files out of {env.abs(folder)}: not writable")
                break
        state = env.abs(".ortfix") if os.path.isdir(env.abs(".ortfix")) else env.prefix
        if os.stat(env.abs(location)).st_dev != os.stat(state).st_dev:
            problems.append(f"{env.abs(location)} is on another filesystem than {env.prefix}/.ortfix: files cannot "
                            "be moved aside by rename")
        return problems

    def describe(self, env: TargetEnv, details: Mapping[str, Any]) -> list[str]:
        location, dist_info = self._dist(env, details)
        try:
            paths = record_paths(env, location, dist_info)
        except OrtfixError as exc:
            return [exc.one_line()]
        lines = [f"move aside {len(paths)} files of {details['distribution']} {details['version']} "
                 f"(its RECORD, its .dist-info and cached bytecode) into the transaction's stash (rename)"]
        lines += [f"  - {env.abs(p)}" for p in paths]
        return lines

    def execute(self, env: TargetEnv, step: Step, ctx: StepContext) -> Mapping[str, Any]:
        fs = env.fs
        location, dist_info = self._dist(env, step.details)
        paths = record_paths(env, location, dist_info)
        candidates: set[str] = set()
        for p in paths:
            candidates.update(_parents(p, location))
        dirs = {d: _dir_meta(fs, d) for d in sorted(candidates) if fs.is_dir(d)}
        files: list[list[Any]] = []
        size = 0
        stats, digests = fs.stat_many(paths), fs.sha256_many(paths)
        for rel in paths:
            st, digest = stats[rel], digests[rel]
            if st is None or digest is None:
                continue
            files.append([rel, digest, *_fingerprint(st)])  # a rename keeps inode, size and mtime
            size += st.st_size
        sha = ctx.write_sidecar("files", {"files": files, "dirs": dirs})
        record = {"sidecars": {"files": sha}, "files": len(files), "bytes": size}
        ctx.commit(record)
        moved = 0

        def midway(_src: str, _st: os.stat_result) -> None:
            nonlocal moved
            moved += 1
            if ctx.crash_midway and moved > len(files) // 2:
                test_crash()

        kept = fs.move_many(((str(f[0]), f"{ctx.stash_rel}/{f[0]}") for f in files), replace=False, veto=midway)
        if kept:
            raise OrtfixError(f"cannot stash {env.abs(kept[0].src)}: {env.abs(kept[0].dst)} exists")
        _remove_empty_dirs(fs, dirs)
        fs.fsync_dir(location)
        return record

    def _files(self, env: TargetEnv, step: Step, ctx: StepContext
               ) -> tuple[list[tuple[str, str, list[int]]], dict[str, Any]]:
        sha = step.record["sidecars"]["files"]
        data = ctx.read_sidecar("files", sha)
        if not isinstance(data, dict) or set(data) != {"files", "dirs"}:
            raise OrtfixError(f"the files sidecar of step {step.index} is malformed")
        files: list[tuple[str, str, list[int]]] = []
        try:
            for item in want_list(data, "files"):
                if (not isinstance(item, list) or len(item) != 5 or not all(isinstance(x, str) for x in item[:2])
                        or not all(isinstance(x, int) for x in item[2:])):
                    raise BadField("a files entry is not [path, sha256, inode, size, mtime]")
                files.append((check_rel(item[0]), item[1], item[2:]))
            dirs = want_dict(data, "dirs")
            for rel, meta in dirs.items():
                check_rel(rel)
                if not (isinstance(meta, list) and len(meta) == 3 and all(isinstance(x, int) for x in meta)):
                    raise BadField("a dirs entry is not [mode, uid, gid]")
        except BadField as exc:
            raise OrtfixError(f"the files sidecar of step {step.index} is malformed: {exc}") from exc
        for rel, _digest, _fp in files:
            if rel == ".ortfix" or rel.startswith(".ortfix/"):
                raise OrtfixError(f"the files sidecar of step {step.index} names ortfix's own folder")
        return files, dirs

    def check_undo(self, env: TargetEnv, step: Step, ctx: StepContext) -> list[str]:
        if not step.record.get("sidecars"):
            return []
        files, _dirs = self._files(env, step, ctx)
        problems = []
        stashed = env.fs.stat_many(f"{ctx.stash_rel}/{rel}" for rel, _d, _f in files)
        in_place = env.fs.stat_many(rel for rel, _d, _f in files)
        for rel, digest, fp in files:
            copy = f"{ctx.stash_rel}/{rel}"
            st = stashed[copy]
            if st is not None:
                if _fingerprint(st) != fp and env.fs.sha256(copy) != digest:
                    problems.append(f"{env.abs(copy)} was changed since it was stashed")
                continue
            here = in_place[rel]  # never moved, or already moved back: the very same file (a rename keeps it)
            if here is None or _fingerprint(here) != fp:
                problems.append(f"{env.abs(copy)} is missing from the stash")
        return problems

    def reverse(self, env: TargetEnv, step: Step, ctx: StepContext) -> list[str]:
        if not step.record.get("sidecars"):
            return []  # the journal has no record: nothing was moved
        fs = env.fs
        files, dirs = self._files(env, step, ctx)
        warnings = []
        for rel in sorted(dirs, key=lambda r: (r.count("/"), r)):
            if not fs.is_dir(rel):
                _make_dir(fs, rel, dirs[rel])
        # never moved, or already moved back: no source, skipped; in the way: kept in the stash, said
        for kept in fs.move_many(((f"{ctx.stash_rel}/{rel}", rel) for rel, _d, _f in files), replace=False):
            warnings.append(f"{env.abs(kept.dst)} exists again; the stashed copy stays in {env.abs(kept.src)}")
        _remove_empty_dirs(fs, {d for rel, _d, _f in files for d in _parents(f"{ctx.stash_rel}/{rel}", ctx.step_rel)})
        return warnings

    def changes(self, step: Step) -> list[str]:
        return [f"- {step.details['distribution']} {step.details['version']}"]


def discard_rel(store: TransactionStore, tx_id: str, index: int) -> str:
    """Where a rollback moves what an install created; deleted right after, or by `history prune`."""
    return store.step_rel(tx_id, index) + "/discard"


# ---------------------------------------------------------------------------------------------------------------------
# pip-install: resolve first (dry-run report), move aside what pip would replace, install, record what is new
# ---------------------------------------------------------------------------------------------------------------------


def install_argv(env: TargetEnv, details: Mapping[str, Any], *, dry_run_report: str | None = None,
                 report: str | None = None) -> list[str]:
    """The install command, built here from typed values: the target's own pip (or the uv found on PATH now) with
    the user's pip configuration; requirements are plain names with version specifiers."""
    installer = details.get("installer")
    requirements = [requirement(r) for r in details.get("requirements", [])]
    if installer == "uv":
        if not env.uv:
            raise OrtfixError("the plan installs with uv, but no uv is on PATH now",
                              hint="install uv, or pip into the environment; nothing was changed")
        argv = [env.uv, "pip", "install", "--python", env.python]
        if env.break_system_packages:
            argv.append("--break-system-packages")
        if dry_run_report is not None:
            argv.append("--dry-run")
        return [*argv, *requirements]
    if installer != "pip":
        raise OrtfixError("the target environment has no pip (and no uv was found)",
                          hint=f"install pip into it first: {env.python} -m ensurepip; nothing was changed")
    # Options after the requirements (none of which can start with "-"): the command reads as the plan shows it.
    argv = [env.python, "-m", "pip", "install", *requirements]
    if dry_run_report is not None:
        argv += ["--dry-run", "--report", dry_run_report, "--quiet"]
    if report is not None:
        argv += ["--report", report]
    argv.append("--disable-pip-version-check")
    if env.break_system_packages:
        argv.append("--break-system-packages")
    return argv


@dataclass(frozen=True)
class Resolved:
    name: str
    version: str
    url: str | None
    download_bytes: int | None  # the archive's size, when it is a local file
    unpacked_bytes: int | None  # sum of the archive's file sizes, when it is a local wheel
    replaces: InstalledDist | None  # the installed distribution (another version) pip would replace


@dataclass(frozen=True)
class Resolution:
    installer: str
    argv: tuple[str, ...]  # the dry-run command that was run
    install: tuple[Resolved, ...]
    notes: tuple[str, ...] = field(default=())

    @property
    def replaced(self) -> list[InstalledDist]:
        return [r.replaces for r in self.install if r.replaces is not None]


def _local_file(url: str | None) -> str | None:
    if not url or not url.startswith("file:"):
        return None
    return unquote(urlparse(url).path)


def _wheel_sizes(path: str | None) -> tuple[int | None, int | None]:
    if path is None:
        return None, None
    try:
        size = os.path.getsize(path)
        if not path.endswith(".whl"):
            return size, None
        with zipfile.ZipFile(path) as zf:
            return size, sum(i.file_size for i in zf.infolist())
    except (OSError, zipfile.BadZipFile):
        return None, None


def _pip_error(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith(("ERROR:", "error:", "\u00d7", "\u2570\u2500>"))]
    pick = errors[0] if errors else (lines[-1] if lines else "no output")
    return re.sub(r"^(ERROR|error):\s*", "", pick)


def resolve(env: TargetEnv, details: Mapping[str, Any], workdir: Path, *,
            replaced_elsewhere: Iterable[str] = ()) -> Resolution:
    """What the install will do, asked of the installer itself: `pip install --dry-run --report FILE --quiet ...`
    (pip >= 22.2) with the user's pip configuration. Failing here (index unreachable, nothing matches) is a
    preflight failure: nothing has been changed yet."""
    installer = str(details.get("installer"))
    installed = installed_distributions(env.site_dirs)
    skip = {canonicalize_name(n) for n in replaced_elsewhere}
    wanted = " ".join(str(r) for r in details.get("requirements", []))
    if installer == "uv":
        dry = install_argv(env, details, dry_run_report="")
        top_before = set(_snapshot((), env.prefix))
        proc = subproc.run(dry, timeout=900)
        # Preflight changes nothing: uv's dry run still takes the environment's lock file (<prefix>/.lock, empty).
        for rel in set(_snapshot((), env.prefix)) - top_before:
            st = env.fs.lstat(rel)
            if st is not None and stat.S_ISREG(st.st_mode) and st.st_size == 0:
                with contextlib.suppress(OSError):
                    env.fs.unlink(rel)
        if proc.returncode != 0:
            raise OrtfixError(f"uv cannot resolve {wanted}: {_pip_error(proc.stderr)}",
                              hint="is the index reachable? check your uv/pip configuration")
        items = []
        for name, version in _uv_installed(proc.stderr + proc.stdout):
            old = installed.get(canonicalize_name(name))
            replaces = old if old and canonicalize_name(name) not in skip and _in_env(env, old) else None
            items.append(Resolved(name, version, None, None, None, replaces))
        return Resolution("uv", tuple(dry), tuple(items), ("uv reports no download sizes",))
    report = workdir / "pip-report.json"
    # --disable-pip-version-check: the dry-run's own output is not shown, so its self-check would only cost time.
    dry = install_argv(env, details, dry_run_report=str(report))
    proc = subproc.run(dry, timeout=900)
    if proc.returncode != 0:
        message = _pip_error(proc.stderr or proc.stdout)
        if "no such option: --report" in proc.stderr or "no such option: --dry-run" in proc.stderr:
            raise OrtfixError("the target's pip is older than 22.2 (no --dry-run --report)",
                              hint=f"upgrade it first: {env.python} -m pip install -U pip")
        if "externally-managed-environment" in proc.stderr:
            raise OrtfixError(f"{env.python} is an externally managed system Python: pip refuses to change it",
                              hint="use a venv (python3 -m venv), or pass --system to change it anyway")
        raise OrtfixError(f"pip cannot get {wanted} from the configured index or wheelhouse: {message}",
                          hint="is the index reachable? check `pip config list` and your network; nothing was changed")
    items = []
    for name, version, url in _report_installs(report):
        download, unpacked = _wheel_sizes(_local_file(url))
        old = installed.get(canonicalize_name(name))
        replaces = old if old and canonicalize_name(name) not in skip and _in_env(env, old) else None
        items.append(Resolved(name, version, url, download, unpacked, replaces))
    return Resolution("pip", tuple(dry), tuple(items))


def _uv_installed(text: str) -> list[tuple[str, str]]:
    out = []
    for line in text.splitlines():
        m = re.match(r"^\s*\+\s+([A-Za-z0-9._-]+)==(\S+)", line)
        if m:
            out.append((m.group(1), m.group(2)))
    return out


def _report_installs(report: Path) -> list[tuple[str, str, str | None]]:
    """(name, version, download URL) of every distribution in pip's --report."""
    try:
        doc = json.loads(report.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise OrtfixError(f"pip's --report was unreadable: {exc}") from exc
    out = []
    entries = doc.get("install", []) if isinstance(doc, dict) else []
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict):
            continue
        meta = entry.get("metadata") or {}
        info = entry.get("download_info") or {}
        url = info.get("url") if isinstance(info, dict) else None
        out.append((str(meta.get("name", "")), str(meta.get("version", "")), url if isinstance(url, str) else None))
    return out


def _in_env(env: TargetEnv, dist: InstalledDist) -> bool:
    # pip replaces only what is inside the environment it installs into (it leaves a system copy alone).
    return any(os.path.realpath(dist.location) == os.path.realpath(d) for d in env.site_dirs)


def _walk(roots: Iterable[str], prefix: str) -> dict[str, list[Any]]:
    """rel path → [type, inode, size, mtime_ns] for everything under `roots` (the snapshot an install is judged by)."""
    out: dict[str, list[Any]] = {}
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
            out[os.path.relpath(e.path, prefix)] = [kind, st.st_ino, st.st_size, st.st_mtime_ns]
            if kind == "d":
                stack.append(e.path)
    return out


def _snapshot(roots: Iterable[str], prefix: str) -> dict[str, list[Any]]:
    """What an install is judged by: everything under `roots` (site-packages, bin), and the files directly in the
    prefix, where an installer may leave its own (uv writes `<prefix>/.lock`)."""
    out = _walk(roots, prefix)
    with contextlib.suppress(OSError):
        for e in os.scandir(prefix):
            st = e.stat(follow_symlinks=False)
            if not stat.S_ISDIR(st.st_mode):
                kind = "l" if stat.S_ISLNK(st.st_mode) else "f"
                out[os.path.relpath(e.path, prefix)] = [kind, st.st_ino, st.st_size, st.st_mtime_ns]
    return out


def _top_level_guess(name: str) -> str:
    # nvidia-cublas-cu12 → nvidia, onnxruntime-gpu → onnxruntime: the folder a wheel of that name most likely writes.
    return re.split(r"[-_.]", canonicalize_name(name))[0]


def _wheel_targets(env: TargetEnv, wheel: str) -> list[str]:
    """Where pip would put each file of a local wheel (purelib/platlib root, .data/scripts → bin, .data/<scheme>)."""
    out = []
    try:
        with zipfile.ZipFile(wheel) as zf:
            names = zf.namelist()
            wheel_meta = next((n for n in names if n.endswith(".dist-info/WHEEL") and n.count("/") == 1), None)
            purelib = b"Root-Is-Purelib: true" in zf.read(wheel_meta) if wheel_meta else True
    except (OSError, zipfile.BadZipFile, KeyError):
        return []
    root = env.purelib if purelib else env.platlib
    for n in names:
        if n.endswith("/"):
            continue
        parts = n.split("/")
        if parts[0].endswith(".data") and len(parts) > 2:
            base = {"scripts": env.scripts, "purelib": env.purelib, "platlib": env.platlib}.get(parts[1])
            if base is None:
                continue
            out.append(os.path.join(base, *parts[2:]))
        else:
            out.append(os.path.join(root, *parts))
    return out


def _pump(stream: Any, is_err: bool, output: Callable[[str, bool], None]) -> None:
    for line in iter(stream.readline, ""):
        output(line.rstrip("\n"), is_err)


def _pid_alive(pid: int, python: str) -> bool:
    """Whether `pid` is still a process of the target's installer (a pip an interrupted apply left running)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    args = [c.decode(errors="replace") for c in cmdline if c]
    return any(a == python for a in args) and ("pip" in args or "install" in args)


def _fingerprint_list(item: Any, n: int) -> list[Any]:
    if not isinstance(item, list) or len(item) != n:
        raise BadField("a file entry has the wrong shape")
    return item


def _parents_of(rels: Iterable[str]) -> set[str]:
    return {d for rel in rels for d in _parents(rel)}


class PipInstall(Handler):
    kind = PIP_INSTALL
    details_keys = frozenset({"requirements", "installer", "reinstall"})
    record_keys = frozenset({"resolution", "roots", "sidecars", "protected", "argv", "pid", "installed", "created",
                             "overwritten", "foreign"})
    started_keys = frozenset({"roots", "sidecars", "protected", "argv"})

    def check_details(self, env: TargetEnv, details: Mapping[str, Any]) -> None:
        reqs = want_list(details, "requirements", limit=100)
        if not reqs:
            raise BadField("field 'requirements' is empty")
        for r in reqs:
            requirement(r)
        if details.get("installer") not in (*INSTALLERS, None):  # None: the environment has no installer
            raise BadField(f"field 'installer' must be one of {', '.join(INSTALLERS)} or null")
        want_bool(details, "reinstall")

    def check_record(self, env: TargetEnv, step: Step) -> None:
        for rel in want_list(step.record, "roots", limit=16):
            check_rel(rel if isinstance(rel, str) else "")
        sidecars = want_dict(step.record, "sidecars")
        if not set(sidecars) <= {"snapshot", "created"}:
            raise BadField("field 'sidecars' names an unknown sidecar")
        for key in sidecars:
            want_sha(sidecars, key)
        for item in want_list(step.record, "protected"):
            item = _fingerprint_list(item, 5)
            check_rel(item[0] if isinstance(item[0], str) else "")
        want_str_list(step.record, "argv", items=1000)
        if "pid" in step.record:
            want_int(step.record, "pid")
        if "created" in step.record:
            want_int(step.record, "created")
        for key in ("overwritten", "foreign"):
            if key in step.record:
                for rel in want_str_list(step.record, key, items=1_000_000):
                    check_rel(rel)
        for key in ("installed", "resolution"):
            for item in want_list(step.record, key) if key in step.record else []:
                if not isinstance(item, dict):
                    raise BadField(f"field {key!r} is not a list of objects")
        for item in step.record.get("installed", []):
            for field_name in ("name", "version", "dist_info"):
                want_str(item, field_name, where="installed")

    def verify(self, env: TargetEnv, details: Mapping[str, Any]) -> list[str]:
        problems = [f"{d} is not writable" for d in (*env.site_dirs, env.scripts)
                    if os.path.isdir(d) and not os.access(d, os.W_OK)]
        try:
            install_argv(env, details)
        except OrtfixError as exc:
            problems.append(exc.one_line())
        return problems

    def describe(self, env: TargetEnv, details: Mapping[str, Any]) -> list[str]:
        who = "uv" if details.get("installer") == "uv" else "the environment's own pip"
        try:
            argv = install_argv(env, details)
        except OrtfixError as exc:
            return [exc.one_line()]
        return [f"run ({who}, with your pip configuration): {' '.join(argv)}"]

    def execute(self, env: TargetEnv, step: Step, ctx: StepContext) -> Mapping[str, Any]:
        fs = env.fs
        installer = str(step.details["installer"])
        roots = [r for r in dict.fromkeys((*env.site_dirs, env.scripts)) if os.path.isdir(r)]
        before = _snapshot(roots, env.prefix)
        protect_rel = ctx.step_rel + "/protect"
        protected: list[list[Any]] = []
        candidates = self._protect_candidates(env, step, before)
        for rel, digest in fs.sha256_many(candidates).items():
            if digest is None:
                continue
            try:
                fs.link(rel, f"{protect_rel}/{rel}", make_parents=True)
            except OSError:
                fs.copy(rel, f"{protect_rel}/{rel}", make_parents=True)
            protected.append([rel, digest])
        copies = fs.stat_many(f"{protect_rel}/{p[0]}" for p in protected)
        protected = [[rel, digest, *_fingerprint(st)] for rel, digest in protected
                     if (st := copies[f"{protect_rel}/{rel}"]) is not None]
        report_dir = tempfile.mkdtemp(prefix="ortfix-pip-report-")  # private (0700), outside the environment
        try:
            report = Path(report_dir) / "report.json"
            argv = install_argv(env, step.details, report=str(report) if installer == "pip" else None)
            record: dict[str, Any] = {
                **step.record,
                "roots": [env.rel(r) for r in roots],
                "sidecars": {"snapshot": ctx.write_sidecar("snapshot", before)},
                "protected": protected,
                "argv": argv,
            }
            ctx.commit(record)
            lines: list[str] = []
            rc = self._run(argv, record, step, ctx, roots, lines)
            if rc != 0:
                raise OrtfixError(f"{installer} install failed (exit {rc})", hint="its own output above says why")
            names = ([n for n, _v, _u in _report_installs(report)] if installer == "pip"
                     else [n for n, _v in _uv_installed("\n".join(lines))])
        finally:
            shutil.rmtree(report_dir, ignore_errors=True)
        after = _snapshot(roots, env.prefix)
        diff = _diff(before, after)
        ours, dirs, installed = _attribute(env, names, diff, after)
        lock = env.fs.lstat(".lock") if installer == "uv" and ".lock" in diff["created"] else None
        if lock is not None:  # uv's own lock file, made by this install: the transaction's too
            ours[".lock"] = [env.fs.sha256(".lock"), *_fingerprint(lock)]
        foreign = _foreign(diff, ours, dirs, installer)
        protected_rels = {p[0] for p in protected}
        keep = set(diff["changed"]) | set(diff["removed"])
        for rel in protected_rels - keep:
            with contextlib.suppress(OSError, OrtfixError):
                fs.unlink(f"{protect_rel}/{rel}")
        record.update({
            "sidecars": {**record["sidecars"], "created": ctx.write_sidecar("created", {"files": ours,
                                                                                       "dirs": dirs})},
            "protected": [p for p in protected if p[0] in keep],
            "installed": installed,
            "created": len(ours),
            "overwritten": [r for r in diff["changed"] if r in ours and r not in protected_rels],
            "foreign": foreign[:20],
        })
        record.pop("pid", None)
        if foreign:
            ctx.commit(record)
            raise OrtfixError(
                f"the environment changed while {installer} was installing: {len(foreign)} path(s) this install did "
                f"not write, e.g. {env.abs(foreign[0])} (another installer running at the same time?)",
                hint="everything this transaction did is undone; what the other installer did stays")
        return record

    def _run(self, argv: Sequence[str], record: dict[str, Any], step: Step, ctx: StepContext,
             roots: Sequence[str], lines: list[str]) -> int:
        ctx.echo(f"installing with {step.details['installer']}: {' '.join(argv)}")

        def output(line: str, is_err: bool) -> None:
            lines.append(line)
            ctx.output(line, is_err)

        proc = subproc.start(argv)
        record["pid"] = proc.pid
        ctx.commit(record)
        threads = [threading.Thread(target=_pump, args=(proc.stdout, False, output), daemon=True),
                   threading.Thread(target=_pump, args=(proc.stderr, True, output), daemon=True)]
        for t in threads:
            t.start()
        try:
            if ctx.crash_midway:
                self._crash_when_writing(proc, roots)
            rc = proc.wait()
        except BaseException:
            subproc.terminate_group(proc, timeout=30, close_pipes=False)  # the output threads are still reading
            raise
        for t in threads:
            t.join(timeout=5)
        return rc

    def _protect_candidates(self, env: TargetEnv, step: Step, before: Mapping[str, list[Any]]) -> list[str]:
        """Files that exist now and that the install may overwrite: exactly those of local wheels, else every file
        under the top-level folder a distribution's name suggests (nvidia/ for the NVIDIA wheels). They are
        hard-linked aside first, so rollback can put the old bytes back."""
        wanted: set[str] = set()
        guesses: set[str] = set()
        for item in step.record.get("resolution", []):
            if not isinstance(item, dict):
                continue
            url = item.get("url")
            local = _local_file(url if isinstance(url, str) else None)
            if local and local.endswith(".whl"):
                for p in _wheel_targets(env, local):
                    with contextlib.suppress(OrtfixError):
                        wanted.add(env.rel(p))
            guesses.add(_top_level_guess(str(item.get("name", ""))))
        for name in step.details.get("requirements", []):
            guesses.add(_top_level_guess(re.split(r"[<>=!~;\[ ]", str(name), maxsplit=1)[0]))
        tops = {env.rel(os.path.join(d, g)) for d in env.site_dirs for g in guesses if g}
        out = []
        for rel, meta in before.items():
            if meta[0] != "f":
                continue
            if rel in wanted or any(rel.startswith(t + "/") for t in tops):
                out.append(rel)
        return sorted(out)

    @staticmethod
    def _crash_when_writing(proc: Any, roots: Sequence[str]) -> None:
        # Fault injection: as soon as pip has started writing into the environment, kill it and die (kill -9).
        tops = {r: set(os.listdir(r)) for r in roots}
        while proc.poll() is None:
            for root, names in tops.items():
                with contextlib.suppress(OSError):
                    if set(os.listdir(root)) - names:
                        proc.kill()
                        proc.wait()
                        test_crash()
            time.sleep(0.005)
        test_crash()

    def _created(self, step: Step, ctx: StepContext) -> tuple[dict[str, list[Any]], list[str]]:
        data = ctx.read_sidecar("created", step.record["sidecars"]["created"])
        try:
            if not isinstance(data, dict) or set(data) != {"files", "dirs"}:
                raise BadField("not {files, dirs}")
            files = want_dict(data, "files")
            for rel, item in files.items():
                check_rel(rel)
                _fingerprint_list(item, 4)
            dirs = [check_rel(d) for d in want_list(data, "dirs") if isinstance(d, str)]
        except BadField as exc:
            raise OrtfixError(f"the created sidecar of step {step.index} is malformed: {exc}") from exc
        return files, dirs

    def check_undo(self, env: TargetEnv, step: Step, ctx: StepContext) -> list[str]:
        if not step.record.get("sidecars", {}).get("snapshot"):
            return []
        if step.record["sidecars"].get("created"):
            self._created(step, ctx)
        problems = []
        protect_rel = ctx.step_rel + "/protect"
        protected = step.record.get("protected", [])
        copies = env.fs.stat_many(f"{protect_rel}/{p[0]}" for p in protected)
        in_place = env.fs.stat_many(p[0] for p in protected)
        for rel, digest, *fp in protected:
            copy = f"{protect_rel}/{rel}"
            st = copies[copy]
            if st is not None:
                if _fingerprint(st) != fp and env.fs.sha256(copy) != digest:
                    problems.append(f"{env.abs(copy)} was changed since it was saved")
            else:  # saved aside by hard link: put back, it is the very same file (or it was never replaced)
                here = in_place[rel]
                if here is None or (_fingerprint(here) != fp and env.fs.sha256(rel) != digest):
                    problems.append(f"{env.abs(copy)} (the earlier {env.abs(rel)}) is missing from the stash")
        return problems

    def reverse(self, env: TargetEnv, step: Step, ctx: StepContext) -> list[str]:
        sidecars = step.record.get("sidecars", {})
        if not sidecars.get("snapshot"):
            return []  # never started: pip did not run
        pid = step.record.get("pid")
        if isinstance(pid, int) and _pid_alive(pid, env.python):
            raise OrtfixError(f"the installer the interrupted apply started (pid {pid}) is still running",
                              hint=f"wait for it to end (or kill {pid}), then run `ortfix rollback` again")
        fs = env.fs
        discard = discard_rel(ctx.store, ctx.tx_id, ctx.index)
        warnings: list[str] = []
        diff: dict[str, list[str]] | None = None
        if sidecars.get("created"):
            files, dirs = self._created(step, ctx)

            def changed(rel: str, st: os.stat_result) -> str | None:
                # Only the very file the install wrote, untouched since: anything else (edited, or written again by
                # a later installer, even with the same bytes) is someone else's now.
                if rel in files and (stat.S_ISDIR(st.st_mode) or _fingerprint(st) != files[rel][1:]):
                    return f"{env.abs(rel)} was changed after the install; left in place"
                return None

            later = [p for p in cached_bytecode(fs, files) if p not in files]  # a later run cached it
            moves = ((rel, f"{discard}/{rel}") for rel in [*sorted(files), *later])
            warnings += [k.why for k in fs.move_many(moves, veto=changed) if k.why]
            for d in sorted(dirs, key=lambda p: (-p.count("/"), p)):
                fs.rmdir(f"{d}/{_PYC_CACHE}")  # emptied above (bytecode a later run cached for the install's files)
                if fs.is_dir(d) and not fs.rmdir(d):
                    others = sorted(fs.listdir(d))
                    warnings.append(f"{env.abs(d)} holds files this transaction did not install "
                                    f"({', '.join(others[:3])}{', …' if len(others) > 3 else ''}); kept")
        else:  # cut off while pip ran: judge by the snapshot taken before it started
            before = ctx.read_sidecar("snapshot", sidecars["snapshot"])
            if not isinstance(before, dict):
                raise OrtfixError(f"the snapshot sidecar of step {step.index} is malformed")
            roots = [env.abs(check_rel(r)) for r in step.record.get("roots", [])]
            diff = _diff(before, _snapshot(roots, env.prefix))
            claimed = _claimed_by_others(env, step, diff)
            created = [r for r in diff["created"] if r not in claimed]
            folders = [r for r, st in fs.stat_many(created).items() if st is not None and stat.S_ISDIR(st.st_mode)]
            fs.move_many((rel, f"{discard}/{rel}") for rel in sorted(set(created) - set(folders)))
            _remove_empty_dirs(fs, folders)
            for rel in sorted(claimed)[:1]:
                warnings.append(f"{env.abs(rel)} belongs to a distribution another installer wrote meanwhile; kept")
        protect_rel = ctx.step_rel + "/protect"
        restore = ((f"{protect_rel}/{p[0]}", p[0]) for p in step.record.get("protected", []))
        for kept in fs.move_many(restore, replace=False):  # a copy gone was put back already
            warnings.append(f"{env.abs(kept.dst)} was changed after the install; its earlier content stays in "
                            f"{env.abs(kept.src)}")
        overwritten = step.record.get("overwritten")
        if overwritten is None and diff is not None:
            saved = {p[0] for p in step.record.get("protected", [])}
            overwritten = [r for r in diff.get("changed", []) if r not in saved]
        for rel in overwritten or []:
            warnings.append(f"{env.abs(rel)} was overwritten by the install and its earlier content was not saved")
        if diff is not None:
            saved = {p[0] for p in step.record.get("protected", [])}
            for rel in diff.get("removed", []):
                if not fs.exists(rel) and rel not in saved:
                    warnings.append(f"{env.abs(rel)} was removed by the install and could not be restored")
        return warnings

    def changes(self, step: Step) -> list[str]:
        installed = step.record.get("installed")
        if installed:
            return [f"+ {d.get('name')} {d.get('version')}" for d in installed if isinstance(d, dict)]
        return [f"+ {r}" for r in step.details.get("requirements", [])]


def _attribute(env: TargetEnv, names: Sequence[str], diff: Mapping[str, list[str]], after: Mapping[str, list[Any]]
               ) -> tuple[dict[str, list[Any]], list[str], list[dict[str, str]]]:
    """What this install wrote, by the installer's own account: the RECORD rows of the distributions it reports
    it installed, each with its hash (RECORD's, else computed now) and stat fingerprint; the folders it created for
    them; and the distributions."""
    created, changed = set(diff["created"]), set(diff["changed"])
    wanted = {canonicalize_name(n) for n in names}
    site_rels = set(env.site_rels())
    ours: dict[str, list[Any]] = {}
    installed = []
    for rel in sorted(created):
        if not rel.endswith(".dist-info") or os.path.dirname(rel) not in site_rels:
            continue
        headers = _metadata_headers(env.abs(rel + "/METADATA"))
        if canonicalize_name(headers.get("name", "")) not in wanted:
            continue
        installed.append({"name": headers.get("name", ""), "version": headers.get("version", ""),
                          "dist_info": env.abs(rel)})
        try:
            rows = read_record(env, os.path.dirname(rel), rel)
        except OrtfixError:
            continue
        wrote = [row for row in rows if row.rel in created or row.rel in changed]
        stats = env.fs.stat_many(row.rel for row in wrote)
        unhashed = env.fs.sha256_many(row.rel for row in wrote if not row.sha256)
        for row in wrote:
            st = stats[row.rel]
            if st is None or stat.S_ISDIR(st.st_mode):
                continue
            ours[row.rel] = [row.sha256 or unhashed.get(row.rel), *_fingerprint(st)]
    parents = _parents_of(ours)
    dirs = sorted(d for d in created if after.get(d, ["?"])[0] == "d" and d in parents)
    return ours, dirs, installed


def _foreign(diff: Mapping[str, list[str]], ours: Mapping[str, Any], dirs: Sequence[str], installer: str) -> list[str]:
    """Changes during the install that it did not make: another installer (or anyone) at work in the environment."""
    parents = set(dirs) | _parents_of(ours)
    out = [r for r in diff["created"] if r not in ours and r not in parents
           and not (installer == "uv" and r == ".lock")]
    out += [r for r in diff["changed"] if r not in ours]
    out += list(diff["removed"])
    return sorted(out)


def _claimed_by_others(env: TargetEnv, step: Step, diff: Mapping[str, list[str]]) -> set[str]:
    """Created paths that belong to a distribution this install did not ask for (another installer's, complete with
    its RECORD): a rollback of a cut-off install leaves them alone."""
    expected = {canonicalize_name(str(i.get("name", ""))) for i in step.record.get("resolution", [])
                if isinstance(i, dict)}
    expected |= {canonicalize_name(re.split(r"[<>=!~,; ]", str(r), maxsplit=1)[0])
                 for r in step.details.get("requirements", [])}
    site_rels = set(env.site_rels())
    out: set[str] = set()
    for rel in diff["created"]:
        if not rel.endswith(".dist-info") or os.path.dirname(rel) not in site_rels:
            continue
        name = canonicalize_name(_metadata_headers(env.abs(rel + "/METADATA")).get("name", ""))
        if not name or name in expected:
            continue
        with contextlib.suppress(OrtfixError):
            out |= {r.rel for r in read_record(env, os.path.dirname(rel), rel)}
        out.add(rel)
    return out


def _diff(before: Mapping[str, list[Any]], after: Mapping[str, list[Any]]) -> dict[str, list[str]]:
    created = sorted(set(after) - set(before))
    removed = sorted(r for r in before if r not in after and before[r][0] != "d")
    changed = sorted(r for r in before if r in after and before[r][0] == "f" and after[r] != before[r])
    return {"created": created, "removed": removed, "changed": changed}


# ---------------------------------------------------------------------------------------------------------------------
# write-file: only the hooks ortfix renders; stash what is there, write a temp file, fsync, rename
# ---------------------------------------------------------------------------------------------------------------------


def _missing_dirs(fs: EnvRoot, rel: str) -> list[str]:
    return [d for d in _parents(rel) if not fs.exists(d)]


class WriteFile(Handler):
    kind = WRITE_FILE
    details_keys = frozenset({"path", "content", "sha256", "mode", "replaces_existing"})
    record_keys = started_keys = frozenset({"existed", "saved_sha256", "created_dirs", "pycache_existed"})

    def check_details(self, env: TargetEnv, details: Mapping[str, Any]) -> None:
        self._rel(env, details)
        content = want_str(details, "content", limit=1 << 20)
        if want_sha(details, "sha256") != _sha_text(content):
            raise BadField(f"the content planned for {details['path']} does not match its sha256 (edited)")
        if want_int(details, "mode", high=0o7777) not in FILE_MODES:
            allowed = ", ".join(f"{m:o}" for m in FILE_MODES)
            raise BadField(f"mode {details['mode']:o} is not one ortfix writes ({allowed})")
        want_bool(details, "replaces_existing")

    def _rel(self, env: TargetEnv, details: Mapping[str, Any]) -> str:
        path = want_str(details, "path")
        rel = env.rel(path)
        if rel not in env.hook_rels():
            raise BadField(f"{path} is not a file ortfix writes (only its own hooks: "
                           f"{', '.join(env.abs(r) for r in sorted(env.hook_rels()))})")
        return rel

    def check_record(self, env: TargetEnv, step: Step) -> None:
        want_bool(step.record, "existed")
        if step.record["existed"]:
            want_sha(step.record, "saved_sha256")
        parents = set(_parents(self._rel(env, step.details)))
        for d in want_str_list(step.record, "created_dirs", items=16):
            if check_rel(d) not in parents:
                raise BadField(f"created folder {d!r} is not a folder of {step.details['path']}")
        want_bool(step.record, "pycache_existed")

    def verify(self, env: TargetEnv, details: Mapping[str, Any]) -> list[str]:
        rel = self._rel(env, details)
        path = env.abs(rel)
        st = env.fs.lstat(rel)
        if st is not None and not stat.S_ISREG(st.st_mode):
            return [f"{path} is not a regular file"]
        if (st is not None) != bool(details.get("replaces_existing")):
            return [f"{path} {'appeared' if st is not None else 'disappeared'} since the plan was made"]
        if not _writable(path if st is not None else os.path.dirname(path)):
            return [f"cannot write {path}: not writable"]
        return []

    def describe(self, env: TargetEnv, details: Mapping[str, Any]) -> list[str]:
        rel = self._rel(env, details)
        content = str(details["content"])
        verb = "replace" if env.fs.exists(rel) else "create"
        lines = [f"{verb} {env.abs(rel)} ({len(content.encode('utf-8'))} bytes, mode {int(details['mode']):04o}, "
                 f"sha256 {str(details['sha256'])[:16]}…) via a temp file + rename"
                 + ("; the current file is kept in the stash" if verb == "replace" else "")]
        lines += [f"  + folder {env.abs(d)}" for d in _missing_dirs(env.fs, rel)]
        lines += [f"  | {line}" for line in content.splitlines()]
        return lines

    def execute(self, env: TargetEnv, step: Step, ctx: StepContext) -> Mapping[str, Any]:
        fs = env.fs
        rel = self._rel(env, step.details)
        mode = int(step.details["mode"])
        saved_sha = fs.sha256(rel)
        existed = saved_sha is not None
        record: dict[str, Any] = {"existed": existed, "saved_sha256": saved_sha or "",
                                  "created_dirs": _missing_dirs(fs, rel),
                                  "pycache_existed": fs.is_dir(f"{os.path.dirname(rel)}/{_PYC_CACHE}")}
        ctx.commit(record)
        for d in record["created_dirs"]:
            fs.mkdir(d, 0o755)
        if existed:
            saved = f"{ctx.stash_rel}/file"
            with contextlib.suppress(FileNotFoundError):
                fs.unlink(saved)
            try:
                fs.link(rel, saved, make_parents=True)
            except OSError:
                fs.copy(rel, saved, make_parents=True)
        tmp = self._tmp(rel, ctx.tx_id)
        with contextlib.suppress(FileNotFoundError):
            fs.unlink(tmp)
        fs.write_new(tmp, str(step.details["content"]).encode("utf-8"), mode)
        if ctx.crash_midway:
            test_crash()
        fs.rename(tmp, rel)
        fs.fsync_dir(os.path.dirname(rel))
        return record

    @staticmethod
    def _tmp(rel: str, tx_id: str) -> str:
        return f"{os.path.dirname(rel)}/.{os.path.basename(rel)}.ortfix-{tx_id}.tmp"

    def check_undo(self, env: TargetEnv, step: Step, ctx: StepContext) -> list[str]:
        if not step.record.get("existed"):
            return []
        saved = f"{ctx.stash_rel}/file"
        want = step.record["saved_sha256"]
        if env.fs.sha256(saved) == want or env.fs.sha256(self._rel(env, step.details)) == want:
            return []
        return [f"{env.abs(saved)} (the earlier {step.details['path']}) is missing from the stash or was changed"]

    def reverse(self, env: TargetEnv, step: Step, ctx: StepContext) -> list[str]:
        record = step.record
        if "existed" not in record:
            return []
        fs = env.fs
        rel = self._rel(env, step.details)
        path = env.abs(rel)
        warnings = []
        with contextlib.suppress(FileNotFoundError):
            fs.unlink(self._tmp(rel, ctx.tx_id))
        saved = f"{ctx.stash_rel}/file"
        if record["existed"]:
            if fs.exists(saved):
                fs.rename(saved, rel)
            elif not fs.exists(rel):
                warnings.append(f"{path} cannot be restored: its saved copy is gone")
        elif fs.exists(rel):
            if fs.is_file(rel) and fs.sha256(rel) == step.details["sha256"]:
                fs.unlink(rel)
            else:
                aside = f"{ctx.stash_rel}/changed-after-apply"
                fs.rename(rel, aside, make_parents=True)
                warnings.append(f"{path} was changed after ortfix wrote it; removed, and kept as {env.abs(aside)}")
        if rel.endswith(".py"):
            for pyc in cached_bytecode(fs, [rel]):
                with contextlib.suppress(OSError):
                    fs.unlink(pyc)
            if not record.get("pycache_existed"):
                _remove_empty_dirs(fs, [f"{os.path.dirname(rel)}/{_PYC_CACHE}"])
        _remove_empty_dirs(fs, record.get("created_dirs", []))
        fs.fsync_dir(os.path.dirname(rel))
        return warnings

    def changes(self, step: Step) -> list[str]:
        return [f"{'~' if step.details.get('replaces_existing') else '+'} {step.details['path']}"]


def _sha_text(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# ---------------------------------------------------------------------------------------------------------------------
# symlink: a missing SONAME link next to its file; never over an existing file; undone only while it is still ours
# ---------------------------------------------------------------------------------------------------------------------

_LIB_NAME = re.compile(r"lib[A-Za-z0-9_+.-]*\.so(?:\.[0-9]+)*")


class Symlink(Handler):
    kind = SYMLINK
    details_keys = frozenset({"path", "target"})
    record_keys = started_keys = frozenset({"path", "target"})

    def check_details(self, env: TargetEnv, details: Mapping[str, Any]) -> None:
        self._parts(env, details)

    def _parts(self, env: TargetEnv, details: Mapping[str, Any]) -> tuple[str, str]:
        path = want_str(details, "path")
        target = want_str(details, "target", limit=255)
        rel = env.rel(path)
        if not any(rel.startswith(s + "/") for s in env.site_rels()):
            raise BadField(f"{path} is not inside the environment's site-packages")
        if not _LIB_NAME.fullmatch(os.path.basename(rel)) or not _LIB_NAME.fullmatch(target):
            raise BadField(f"{path} -> {target} is not a library's SONAME link")
        return rel, target

    def check_record(self, env: TargetEnv, step: Step) -> None:
        if (step.record.get("path"), step.record.get("target")) != (step.details["path"], step.details["target"]):
            raise BadField("the record does not match the step's details")

    def verify(self, env: TargetEnv, details: Mapping[str, Any]) -> list[str]:
        rel, target = self._parts(env, details)
        path = env.abs(rel)
        if env.fs.exists(rel):
            return [f"{path} exists: ortfix never overwrites a file with a link"]
        if not env.fs.is_file(f"{os.path.dirname(rel)}/{target}"):
            return [f"the link target {target} is not a file next to {path}"]
        if not os.access(os.path.dirname(path), os.W_OK):
            return [f"cannot create {path}: its folder is not writable"]
        return []

    def describe(self, env: TargetEnv, details: Mapping[str, Any]) -> list[str]:
        rel, target = self._parts(env, details)
        return [f"create the symbolic link {env.abs(rel)} -> {target}"]

    def execute(self, env: TargetEnv, step: Step, ctx: StepContext) -> Mapping[str, Any]:
        rel, target = self._parts(env, step.details)
        record = {"path": str(step.details["path"]), "target": target}
        ctx.commit(record)
        env.fs.symlink(target, rel)  # fails rather than replace anything that appeared meanwhile
        if ctx.crash_midway:
            test_crash()
        env.fs.fsync_dir(os.path.dirname(rel))
        return record

    def reverse(self, env: TargetEnv, step: Step, ctx: StepContext) -> list[str]:
        if "path" not in step.record:
            return []
        rel, target = self._parts(env, step.details)
        st = env.fs.lstat(rel)
        if st is not None and stat.S_ISLNK(st.st_mode) and env.fs.readlink(rel) == target:
            env.fs.unlink(rel)
            return []
        if st is not None:
            return [f"{env.abs(rel)} is no longer the link ortfix created; left as it is"]
        return []

    def changes(self, step: Step) -> list[str]:
        return [f"+ {step.details['path']} -> {step.details['target']}"]


for _handler in (PipUninstall(), PipInstall(), WriteFile(), Symlink()):
    register(_handler)
