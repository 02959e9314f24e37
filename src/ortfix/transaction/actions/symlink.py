"""The symlink handler: a missing SONAME link next to its file; never over an existing file; undone only while it
is still the link ortfix made."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from typing import TypedDict

from ortfix.fields import BadField, want_str
from ortfix.i18n import N_, Msg
from ortfix.plan.kinds import ActionKind, SymlinkDetails
from ortfix.plan.titles import symlink_title
from ortfix.transaction.actions.base import Handler, StepContext, TargetEnv, test_crash
from ortfix.transaction.journal import Step
from ortfix.transaction.undo_notes import Cause, UndoNote


class SymlinkRecord(TypedDict):
    path: str  # the link, as the details name it
    target: str


_LIB_NAME = re.compile(r"lib[A-Za-z0-9_+.-]*\.so(?:\.[0-9]+)*")


class Symlink(Handler[SymlinkDetails, SymlinkRecord]):
    kind = ActionKind.SYMLINK
    details_keys = frozenset({"path", "target"})
    record_keys = started_keys = frozenset({"path", "target"})

    def check_details(self, env: TargetEnv, details: Mapping[str, object]) -> None:
        self._parts(env, details)

    def _parts(self, env: TargetEnv, details: Mapping[str, object]) -> tuple[str, str]:
        path = want_str(details, "path")
        target = want_str(details, "target", limit=255)
        rel = env.rel(path)
        if not any(rel.startswith(s + "/") for s in env.site_rels()):
            raise BadField(Msg(N_("{path} is not inside the environment's site-packages"), path=path))
        if not _LIB_NAME.fullmatch(os.path.basename(rel)) or not _LIB_NAME.fullmatch(target):
            raise BadField(Msg(N_("{path} -> {target} is not a library's SONAME link"), path=path, target=target))
        # A SONAME link names its own library (libcudnn.so.9 -> libcudnn.so.9.1.0), never another one.
        if os.path.basename(rel).split(".so", 1)[0] != target.split(".so", 1)[0]:
            raise BadField(Msg(N_("{path} -> {target} is not a library's SONAME link: it names another library"),
                               path=path, target=target))
        return rel, target

    def check_record(self, env: TargetEnv, step: Step) -> None:
        if (step.record.get("path"), step.record.get("target")) != (step.details["path"], step.details["target"]):
            raise BadField(Msg(N_("the record does not match the step's details")))

    def title(self, step: Step) -> Msg:
        return symlink_title(want_str(step.details, "path"), want_str(step.details, "target", limit=255))

    def verify(self, env: TargetEnv, details: SymlinkDetails) -> list[str | Msg]:
        rel, target = self._parts(env, details)
        path = env.abs(rel)
        if env.fs.exists(rel):
            return [Msg(N_("{path} exists: ortfix never overwrites a file with a link"), path=path)]
        if not env.fs.is_file(f"{os.path.dirname(rel)}/{target}"):
            return [Msg(N_("the link target {target} is not a file next to {path}"), target=target, path=path)]
        if not os.access(os.path.dirname(path), os.W_OK):
            return [Msg(N_("cannot create {path}: its folder is not writable"), path=path)]
        return []

    def describe(self, env: TargetEnv, details: SymlinkDetails) -> list[str | Msg]:
        rel, target = self._parts(env, details)
        return [Msg(N_("create the symbolic link {path} -> {target}"), path=env.abs(rel), target=target)]

    def execute(self, env: TargetEnv, step: Step, ctx: StepContext) -> SymlinkRecord:
        rel, target = self._parts(env, step.details)
        record: SymlinkRecord = {"path": self.typed_details(step.details)["path"], "target": target}
        ctx.commit(record)
        env.fs.symlink(target, rel)  # fails rather than replace anything that appeared meanwhile
        if ctx.crash_midway:
            test_crash()
        env.fs.fsync_dir(os.path.dirname(rel))
        return record

    def reverse(self, env: TargetEnv, step: Step, ctx: StepContext) -> list[UndoNote]:
        if "path" not in step.record:
            return []
        rel, target = self._parts(env, step.details)
        st = env.fs.lstat(rel)
        if st is not None and stat.S_ISLNK(st.st_mode) and env.fs.readlink(rel) == target:
            env.fs.unlink(rel)
            return []
        if st is not None:
            return [UndoNote(Cause.CHANGED_LATER, env.abs(rel),
                             Msg(N_("{path} is no longer the link ortfix created; left as it is"), path=env.abs(rel)))]
        return []

    def changes(self, step: Step) -> list[str]:
        details = self.typed_details(step.details)
        return [f"+ {details['path']} -> {details['target']}"]

