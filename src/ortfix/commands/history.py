"""The history commands: list the transactions, show one, prune old stashes; each result knows its exit code
(always 0: a listing, even of a damaged journal, is a success)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ortfix.errors import ExitCode, OrtfixError
from ortfix.i18n import N_, Msg
from ortfix.target.choose import TargetDescription
from ortfix.transaction.prune import PruneOutcome, prune
from ortfix.transaction.store import HistoryEntry, TransactionStore


class _Listing:
    """A listing's exit code: 0, even for a damaged journal (it is listed as such)."""

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.OK


@dataclass(frozen=True)
class HistoryResult(_Listing):
    target: TargetDescription
    entries: tuple[HistoryEntry, ...]


@dataclass(frozen=True)
class ShowResult(_Listing):
    target: TargetDescription
    entry: HistoryEntry
    plan: Mapping[str, object] | None


@dataclass(frozen=True)
class PruneResult(_Listing):
    target: TargetDescription
    outcome: PruneOutcome


def run_history(target: TargetDescription) -> HistoryResult:
    with TransactionStore(target.prefix) as store:
        return HistoryResult(target, tuple(store.entries()))


def run_history_show(target: TargetDescription, tx_id: str) -> ShowResult:
    prefix = target.prefix
    with TransactionStore(prefix) as store:
        if tx_id not in store.ids():  # a malformed id is refused by store.folder first
            store.folder(tx_id)
            raise OrtfixError(Msg(N_("no transaction {id} in {prefix}"), id=tx_id, prefix=prefix),
                              hint=Msg(N_("`ortfix history` lists them")))
        entry = store.entry(tx_id)
        return ShowResult(target, entry, store.plan_doc(tx_id) if entry.tx is not None else None)


def run_prune(target: TargetDescription, keep: int) -> PruneResult:
    return PruneResult(target, prune(target.prefix, keep))

