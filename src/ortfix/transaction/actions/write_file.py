"""The write-file handler: only the hooks ortfix renders; stash what is there, write a temp file, fsync, rename;
undone by putting the stashed file back (or removing the one written)."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Mapping
from typing import TypedDict

from ortfix.fields import BadField, want_bool, want_int, want_sha, want_str, want_str_list
from ortfix.i18n import N_, Msg
from ortfix.plan.kinds import ActionKind, WriteFileDetails
from ortfix.plan.titles import write_file_title
from ortfix.system.confine import check_rel
from ortfix.system.envpaths import TEMP_NAME_START
from ortfix.transaction.actions.base import Handler, StepContext, TargetEnv, test_crash
from ortfix.transaction.actions.files import (
    PYC_CACHE,
    cached_bytecode,
    is_writable,
    missing_dirs,
    parent_dirs,
    remove_empty_dirs,
)
from ortfix.transaction.journal import Step, sha256_bytes
from ortfix.transaction.undo_notes import Cause, UndoNote

FILE_MODES = (0o644,)  # the only modes a write-file step may give (hooks are data and modules, never executables)


class WriteFileRecord(TypedDict):
    existed: bool  # a file was there before (kept in the stash as `file`)
    saved_sha256: str  # its sha256 ("" when none existed)
    created_dirs: list[str]  # the folders this step created for it (rel paths)
    pycache_existed: bool  # its folder held a __pycache__ before


class WriteFile(Handler[WriteFileDetails, WriteFileRecord]):
    kind = ActionKind.WRITE_FILE
    details_keys = frozenset({"path", "content", "sha256", "mode", "replaces_existing"})
    record_keys = started_keys = frozenset({"existed", "saved_sha256", "created_dirs", "pycache_existed"})

    def check_details(self, env: TargetEnv, details: Mapping[str, object]) -> None:
        self._rel(env, details)
        content = want_str(details, "content", limit=1 << 20)
        if want_sha(details, "sha256") != sha256_bytes(content.encode("utf-8")):
            raise BadField(Msg(N_("the content planned for {path} does not match its sha256 (edited)"),
                               path=str(details["path"])))
        if want_int(details, "mode", high=0o7777) not in FILE_MODES:
            allowed = ", ".join(f"{m:o}" for m in FILE_MODES)
            raise BadField(Msg(N_("mode {mode} is not one ortfix writes ({allowed})"), mode=f"{details['mode']:o}",
                               allowed=allowed))
        want_bool(details, "replaces_existing")

    def _rel(self, env: TargetEnv, details: Mapping[str, object]) -> str:
        path = want_str(details, "path")
        rel = env.rel(path)
        if rel not in env.hook_rels():
            raise BadField(Msg(N_("{path} is not a file ortfix writes (only its own hooks: {hooks})"), path=path,
                               hooks=", ".join(env.abs(r) for r in sorted(env.hook_rels()))))
        return rel

    def check_record(self, env: TargetEnv, step: Step) -> None:
        want_bool(step.record, "existed")
        if step.record["existed"]:
            want_sha(step.record, "saved_sha256")
        parents = set(parent_dirs(self._rel(env, step.details)))
        for d in want_str_list(step.record, "created_dirs", items=16):
            if check_rel(d) not in parents:
                raise BadField(Msg(N_("created folder {folder} is not a folder of {path}"), folder=repr(d),
                                   path=str(step.details["path"])))
        want_bool(step.record, "pycache_existed")

    def title(self, step: Step) -> Msg:
        return write_file_title(want_str(step.details, "path"), want_bool(step.details, "replaces_existing"))

    def verify(self, env: TargetEnv, details: WriteFileDetails) -> list[str | Msg]:
        rel = self._rel(env, details)
        path = env.abs(rel)
        st = env.fs.lstat(rel)
        if st is not None and not stat.S_ISREG(st.st_mode):
            return [Msg(N_("{path} is not a regular file"), path=path)]
        if (st is not None) != bool(details["replaces_existing"]):
            return [Msg(N_("{path} appeared since the plan was made") if st is not None
                        else N_("{path} disappeared since the plan was made"), path=path)]
        if not is_writable(path if st is not None else os.path.dirname(path)):
            return [Msg(N_("cannot write {path}: not writable"), path=path)]
        return []

    def describe(self, env: TargetEnv, details: WriteFileDetails) -> list[str | Msg]:
        rel = self._rel(env, details)
        content = str(details["content"])
        replace = env.fs.exists(rel)
        what: dict[str, str | int] = dict(path=env.abs(rel), size=len(content.encode("utf-8")),
                                          mode=f"{int(details['mode']):04o}", sha256=str(details["sha256"])[:16])
        lines: list[str | Msg] = [
            Msg(N_("replace {path} ({size} bytes, mode {mode}, sha256 {sha256}…) via a temp file + rename; the current "
                   "file is kept in the stash"), **what) if replace else
            Msg(N_("create {path} ({size} bytes, mode {mode}, sha256 {sha256}…) via a temp file + rename"), **what)]
        lines += [Msg(N_("  + folder {folder}"), folder=env.abs(d)) for d in missing_dirs(env.fs, rel)]
        lines += [f"  | {line}" for line in content.splitlines()]
        return lines

    def execute(self, env: TargetEnv, step: Step, ctx: StepContext) -> WriteFileRecord:
        fs = env.fs
        rel = self._rel(env, step.details)
        planned = self.typed_details(step.details)
        mode = int(planned["mode"])
        saved_sha = fs.sha256(rel)
        existed = saved_sha is not None
        record: WriteFileRecord = {"existed": existed, "saved_sha256": saved_sha or "",
                                   "created_dirs": missing_dirs(fs, rel),
                                   "pycache_existed": fs.is_dir(f"{os.path.dirname(rel)}/{PYC_CACHE}")}
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
        fs.write_new(tmp, str(planned["content"]).encode("utf-8"), mode)
        if ctx.crash_midway:
            test_crash()
        fs.rename(tmp, rel)
        fs.fsync_dir(os.path.dirname(rel))
        return record

    @staticmethod
    def _tmp(rel: str, tx_id: str) -> str:
        return f"{os.path.dirname(rel)}/{TEMP_NAME_START}{os.path.basename(rel)}.ortfix-{tx_id}.tmp"

    def check_undo(self, env: TargetEnv, step: Step, ctx: StepContext) -> list[str | Msg]:
        record = self.typed_record(step)
        if not record.get("existed"):
            return []
        saved = f"{ctx.stash_rel}/file"
        want = record["saved_sha256"]
        if env.fs.sha256(saved) == want or env.fs.sha256(self._rel(env, step.details)) == want:
            return []
        return [Msg(N_("{copy} (the earlier {path}) is missing from the stash or was changed"), copy=env.abs(saved),
                    path=str(step.details["path"]))]

    def reverse(self, env: TargetEnv, step: Step, ctx: StepContext) -> list[UndoNote]:
        record = self.typed_record(step)
        if "existed" not in record:
            return []
        fs = env.fs
        rel = self._rel(env, step.details)
        path = env.abs(rel)
        warnings: list[UndoNote] = []
        with contextlib.suppress(FileNotFoundError):
            fs.unlink(self._tmp(rel, ctx.tx_id))
        saved = f"{ctx.stash_rel}/file"
        if record["existed"]:
            if fs.exists(saved):
                fs.rename(saved, rel)
            elif not fs.exists(rel):
                warnings.append(UndoNote(Cause.NOT_RESTORED, path,
                                         Msg(N_("{path} cannot be restored: its saved copy is gone"), path=path)))
        elif fs.exists(rel):
            if fs.is_file(rel) and fs.sha256(rel) == self.typed_details(step.details)["sha256"]:
                fs.unlink(rel)
            else:
                aside = f"{ctx.stash_rel}/changed-after-apply"
                fs.rename(rel, aside, make_parents=True)
                warnings.append(UndoNote(Cause.MOVED_ASIDE, path, Msg(N_("{path} was changed after ortfix wrote it; "
                                                                          "removed, and kept as {copy}"),
                                                                       path=path, copy=env.abs(aside))))
        if rel.endswith(".py"):
            for pyc in cached_bytecode(fs, [rel]):
                with contextlib.suppress(OSError):
                    fs.unlink(pyc)
            if not record.get("pycache_existed"):
                remove_empty_dirs(fs, [f"{os.path.dirname(rel)}/{PYC_CACHE}"])
        remove_empty_dirs(fs, record.get("created_dirs", []))
        fs.fsync_dir(os.path.dirname(rel))
        return warnings

    def changes(self, step: Step) -> list[str]:
        planned = self.typed_details(step.details)
        return [f"{'~' if planned.get('replaces_existing') else '+'} {planned['path']}"]
