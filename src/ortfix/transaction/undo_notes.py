"""What a rollback could not put back exactly, one typed note per path, grouped by cause for people.

A rollback undoes only what the transaction did. Files another installer (or the user) wrote later are theirs: they
stay, and so does the stash copy of what they replaced. Each such path is one `UndoNote`; the rollback prints one
summary line per cause (the full list under `--verbose` and in `--json`) and one verdict: whether every path the
transaction touched is now as it was before the apply.

`failed` marks what the transaction did that is not undone: content from before the apply that is not back in its
place (not saved, its copy gone, or another file in its place with other bytes). Only those make the exit status 1;
files written later by others, left in place, do not (they are counted, and the verdict says the environment
differs)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ortfix.i18n import N_, Msg
from ortfix.strenum import StrEnum


class Cause(StrEnum):
    CHANGED_LATER = "changed-later"  # a file or link the transaction wrote, changed or written again since: left
    FOLDER_IN_USE = "folder-in-use"  # a folder the transaction created holds files it did not install: kept
    OTHER_INSTALL = "other-install"  # a distribution another installer wrote during an interrupted apply: kept
    BACK_ALREADY = "back-already"  # a file from before the apply, written again later with the same bytes
    REPLACED_LATER = "replaced-later"  # a file from before the apply whose place another file took: copy stays stashed
    BYTECODE = "bytecode"  # cached bytecode from before the apply, compiled again later (other bytes, same source)
    MOVED_ASIDE = "moved-aside"  # a file ortfix wrote, edited since: removed, the edited copy kept in the stash
    ALREADY_UNDONE = "already-undone"  # the change was undone by someone else already
    NOT_RESTORED = "not-restored"  # removed or overwritten by the transaction, and its earlier content is gone
    PUT_BACK = "put-back"  # a folder from before the apply, there again: not said, it settles the verdict on it


# One line per cause: {n} is the count. Said in the order of this table.
_SUMMARY: dict[Cause, str] = {
    Cause.CHANGED_LATER: N_("{n} file(s) the transaction wrote were written again later (another installer, or an "
                            "edit); left in place"),
    Cause.FOLDER_IN_USE: N_("{n} folder(s) the transaction created hold files it did not install; kept"),
    Cause.OTHER_INSTALL: N_("{n} file(s) of a distribution another installer wrote during the interrupted apply; "
                            "kept"),
    Cause.BACK_ALREADY: N_("{n} file(s) from before the apply had been written back already, with the same bytes"),
    Cause.REPLACED_LATER: N_("{n} file(s) from before the apply now hold other bytes written later; left in place, "
                             "the earlier copies stay in the stash"),
    Cause.BYTECODE: N_("{n} cached bytecode file(s) from before the apply were compiled again later from the same "
                       "sources; left in place"),
    Cause.MOVED_ASIDE: N_("{n} file(s) ortfix wrote were edited since; removed, the edited copies kept in the stash"),
    Cause.ALREADY_UNDONE: N_("{n} change(s) had been undone by someone else already"),
    Cause.NOT_RESTORED: N_("{n} file(s) the transaction removed or overwrote could not be restored"),
}

_KEEPS_STATE = {Cause.BACK_ALREADY, Cause.BYTECODE, Cause.MOVED_ASIDE, Cause.ALREADY_UNDONE, Cause.PUT_BACK}
FAILING = frozenset({Cause.REPLACED_LATER, Cause.NOT_RESTORED})  # the transaction's own change is not undone


@dataclass(frozen=True)
class UndoNote:
    cause: Cause
    path: str  # the path (or PATH entry) concerned, as the user sees it
    text: str | Msg  # the full sentence: English for --json and the journal (str()), translated for --verbose

    @property
    def as_before(self) -> bool:
        """This path is now as it was before the apply (judged by this note alone)."""
        return self.cause in _KEEPS_STATE

    @property
    def failed(self) -> bool:
        """Something the transaction did here is not undone."""
        return self.cause in FAILING

    @property
    def said(self) -> bool:
        """Shown to people and in --json (a folder put back is not: it only settles the verdict)."""
        return self.cause is not Cause.PUT_BACK

    def to_json(self) -> dict[str, str | bool]:
        return {"cause": self.cause.value, "path": self.path, "text": str(self.text), "as_before": self.as_before,
                "undone": not self.failed}


def summary_msgs(notes: Sequence[UndoNote]) -> list[tuple[Cause, Msg]]:
    """One line per cause present, with its count (English in `--json`, translated on the screen)."""
    counts = {cause: sum(n.cause is cause for n in notes) for cause in _SUMMARY}
    return [(cause, Msg(_SUMMARY[cause], n=n)) for cause, n in counts.items() if n]


def summary(notes: Sequence[UndoNote]) -> list[tuple[Cause, str]]:
    """summary_msgs in English."""
    return [(cause, str(line)) for cause, line in summary_msgs(notes)]


def as_before(notes: Sequence[UndoNote]) -> bool:
    """Whether every path the notes name is as it was before the apply. Steps are undone newest first, so the last
    note on a path is the oldest step's word on it: that one decides."""
    last: dict[str, UndoNote] = {}
    for note in notes:
        last[note.path] = note
    return all(n.as_before for n in last.values())


def said(notes: Sequence[UndoNote]) -> list[UndoNote]:
    return [n for n in notes if n.said]


def any_failed(notes: Sequence[UndoNote]) -> bool:
    return any(n.failed for n in notes)


def verdict(notes: Sequence[UndoNote]) -> str:
    if not said(notes):
        return N_("The environment is as it was before the apply.")
    if as_before(notes):
        return N_("The files the transaction touched are as they were before the apply.")
    if any_failed(notes):
        return N_("The files the transaction touched are not as they were before the apply: some of what it did "
                  "could not be undone.")
    return N_("Everything the transaction did is undone; the files it touched are not all as before the apply, "
              "because of what was written later.")
