"""The user-path handler (Windows): add the environment's NVIDIA DLL folders at the front of the user PATH
(`HKCU\\Environment` value `Path`, its type kept; see system/windows/userpath.py), and undo by removing exactly the
entries this step added.

The undo record (journaled before the registry is touched) holds whether the value existed, its type, and the entries
this step adds: those that were not there already (an entry the user had before is never ours to remove). Reverse is
judged from the registry as it is at undo time: each added entry that is still there is removed, everything else the
value holds now (entries the user added or reordered since) stays; a value ortfix created and that is empty again is
deleted. Plans are per platform: anywhere but Windows the handler refuses with one line.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypedDict

from ortfix.errors import OrtfixError
from ortfix.fields import BadField, want_bool, want_str, want_str_list
from ortfix.i18n import N_, Msg
from ortfix.plan.kinds import ActionKind, UserPathDetails
from ortfix.plan.titles import user_path_title
from ortfix.system.pathrules import within
from ortfix.system.windows import hooks as winhooks
from ortfix.system.windows import userpath
from ortfix.transaction.actions.base import Handler, StepContext, TargetEnv, problem, test_crash
from ortfix.transaction.journal import Step, StepState
from ortfix.transaction.undo_notes import Cause, UndoNote

MAX_ENTRIES = 64
_WHERE = f"{userpath.REGISTRY_KEY}\\{userpath.VALUE_NAME}"


class UserPathRecord(TypedDict):
    existed: bool  # the value existed before this step
    value_type: str  # a userpath.ValueType: the type it had (or was created with)
    added: list[str]  # the entries this step adds (those not in the value already), in order


def _inside(folder: str, prefix: str) -> bool:
    """A folder under the environment's prefix, the prefix itself not counted. Unlike the other "inside the
    environment" checks (Platform.inside), no link is resolved: the entry is text for the user PATH in the registry,
    not a file ortfix opens, and it is judged as the plan spells it, by Windows' rules whatever the host."""
    return within(folder, prefix, windows=True, strict=True)


class UserPath(Handler[UserPathDetails, UserPathRecord]):
    kind = ActionKind.USER_PATH
    details_keys = frozenset({"entries"})
    record_keys = started_keys = frozenset({"existed", "value_type", "added"})

    def check_details(self, env: TargetEnv, details: Mapping[str, object]) -> None:
        entries = want_str_list(details, "entries", items=MAX_ENTRIES, limit=1024)
        if not entries:
            raise BadField(Msg(N_("a user-path step adds at least one folder")))
        for entry in entries:
            try:
                winhooks.check_path_folder(entry)
            except OrtfixError as exc:
                raise BadField(exc.message_msg) from exc
            if "%" in entry:
                raise BadField(Msg(N_("{entry} contains '%', which Windows would expand in the user PATH"),
                                   entry=repr(entry)))
            if not _inside(entry, env.prefix):
                raise BadField(Msg(N_("{entry} is not a folder of the environment {prefix}"), entry=entry,
                                   prefix=env.prefix))
        if len({userpath.entry_key(e) for e in entries}) != len(entries):
            raise BadField(Msg(N_("a user-path step names a folder twice")))

    def check_record(self, env: TargetEnv, step: Step) -> None:
        want_bool(step.record, "existed")
        if want_str(step.record, "value_type", limit=16) not in tuple(userpath.ValueType):
            raise BadField(Msg(N_("value_type {value} is not REG_SZ or REG_EXPAND_SZ"),
                               value=repr(step.record["value_type"])))
        entries = self.typed_details(step.details)["entries"]
        for entry in want_str_list(step.record, "added", items=MAX_ENTRIES, limit=1024):
            if entry not in entries:
                raise BadField(Msg(N_("added entry {entry} is not one the step planned"), entry=repr(entry)))

    def title(self, step: Step) -> Msg:
        return user_path_title(len(want_str_list(step.details, "entries", items=MAX_ENTRIES, limit=1024)))

    def verify(self, env: TargetEnv, details: UserPathDetails) -> list[str | Msg]:
        try:  # off Windows, reading the user PATH is the one-line error of a plan made for another platform
            current = userpath.read_user_path()
            new, _ = userpath.added_value(current.value, details["entries"])
            if new is not None:
                userpath.check_length(new, userpath.expanded(new))
        except OrtfixError as exc:
            return [problem(exc)]
        return []

    def describe(self, env: TargetEnv, details: UserPathDetails) -> list[str | Msg]:
        entries = details["entries"]
        return [Msg(N_("add {n} folder(s) at the front of the user PATH ({where}, its registry type kept; those "
                       "already there are left as they are), then broadcast WM_SETTINGCHANGE; programs started "
                       "afterwards see it"), n=len(entries), where=_WHERE), *(f"  + {e}" for e in entries)]

    def execute(self, env: TargetEnv, step: Step, ctx: StepContext) -> UserPathRecord:
        entries = self.typed_details(step.details)["entries"]
        current = userpath.read_user_path()
        new, added = userpath.added_value(current.value, entries)
        if new is not None:
            userpath.check_length(new, userpath.expanded(new))
        record: UserPathRecord = {"existed": current.value is not None, "value_type": str(current.type),
                                  "added": added}
        ctx.commit(record)
        if ctx.crash_midway:
            test_crash()
        if added:
            userpath.write_user_path(new, current.type)
            userpath.broadcast_environment_change()
        return record

    def reverse(self, env: TargetEnv, step: Step, ctx: StepContext) -> list[UndoNote]:
        record = self.typed_record(step)
        if "added" not in record or not record["added"]:
            return []
        current = userpath.read_user_path()
        new, removed = userpath.removed_value(current.value, record["added"])
        # A step cut off before its write added nothing: no warning for entries it never put there.
        warnings = [UndoNote(Cause.ALREADY_UNDONE, e, Msg(N_("{entry} is no longer in the user PATH; nothing to "
                                                            "remove"), entry=e))
                    for e in record["added"]
                    if e not in removed and step.state is StepState.DONE]
        if not removed:
            return warnings
        if new == "" and not record["existed"]:
            new = None  # ortfix created the value: gone again, as before
        userpath.write_user_path(new, current.type)
        userpath.broadcast_environment_change()
        return warnings

    def changes(self, step: Step) -> list[str]:
        added = step.record.get("added")
        entries = added if isinstance(added, list) else self.typed_details(step.details)["entries"]
        return [f"~ {_WHERE}: + {e}" for e in entries]
