"""prune: delete the stashes of old, finished transactions (their journals stay for `history`)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ortfix.errors import OrtfixError
from ortfix.i18n import N_, Msg
from ortfix.transaction import lock as envlock
from ortfix.transaction.journal import OPEN_STATUSES
from ortfix.transaction.store import TransactionStore


@dataclass(frozen=True)
class PruneOutcome:
    pruned: tuple[str, ...]
    kept: tuple[str, ...]
    skipped: tuple[str, ...]  # open (interrupted) or unreadable transactions: never pruned
    freed_bytes: int


def prune(prefix: str, keep: int) -> PruneOutcome:
    if keep < 0:
        raise OrtfixError(Msg(N_("--keep must be 0 or more")))
    with TransactionStore(prefix) as store:
        return _prune(store, prefix, keep)


def _prune(store: TransactionStore, prefix: str, keep: int) -> PruneOutcome:
    if not store.ids():
        return PruneOutcome((), (), (), 0)
    with envlock.held(prefix):
        ids = store.ids()
        kept = tuple(ids[len(ids) - keep:]) if keep else ()
        pruned: list[str] = []
        skipped: list[str] = []
        freed = 0
        for tx_id in ids:
            if tx_id in kept:
                continue
            try:
                tx = store.load(tx_id)
            except OrtfixError:
                skipped.append(tx_id)
                continue
            if tx.status in OPEN_STATUSES:
                skipped.append(tx_id)
                continue
            if tx.pruned:
                continue
            freed += store.remove_stashes(tx_id)
            store.save(replace(tx, pruned=True))
            pruned.append(tx_id)
        return PruneOutcome(tuple(pruned), kept, tuple(skipped), freed)
