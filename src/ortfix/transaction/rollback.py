"""rollback: lock → the journal, strictly checked (every step well-formed, every stashed file present) → reverse
every started or done step, newest first → rolled back; then the files an install created, moved aside, are
deleted (`free_discards`, also used after a failed apply)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ortfix import subproc
from ortfix.errors import ExitCode, OrtfixError
from ortfix.fields import want_dict
from ortfix.i18n import N_, Joined, Msg
from ortfix.transaction import lock as envlock
from ortfix.transaction.actions import handler_for
from ortfix.transaction.actions.base import TargetEnv
from ortfix.transaction.actions.pip_install import discard_rel
from ortfix.transaction.env import env_from_journal
from ortfix.transaction.journal import Step, StepState, Transaction, TxStatus
from ortfix.transaction.runner import Runner, Ui
from ortfix.transaction.store import TransactionStore
from ortfix.transaction.undo_notes import UndoNote

_FREE_CODE = """import sys
from ortfix.system.confine import EnvRoot
with EnvRoot(sys.argv[1]) as root:
    for rel in sys.argv[2:]:
        root.remove_tree(rel)
"""  # i18n: english (a program)


def free_discards(store: TransactionStore, tx: Transaction, *, background: bool) -> list[Path]:
    """Delete what a rollback moved aside from the environment (the installed distributions), never following a
    link. In the background after a user's rollback: the environment is already restored, freeing gigabytes need not
    hold the prompt; `history prune` frees whatever a background deletion did not get to."""
    rels = [r for r in (discard_rel(store, tx.id, s.index) for s in tx.steps) if store.env.is_dir(r)]
    folders = [store.prefix / r for r in rels]
    if rels and background:
        try:
            subproc.start([sys.executable, "-c", _FREE_CODE, store.env.real, *rels], target_python=None)
            return folders
        except OrtfixError:
            pass
    for rel in rels:
        with contextlib.suppress(OSError, OrtfixError):
            store.env.remove_tree(rel)
    return folders


@dataclass(frozen=True)
class RollbackOutcome:
    tx: Transaction
    undone: tuple[Step, ...]
    notes: tuple[UndoNote, ...]  # each path not put back exactly, with its cause (undo_notes.py)
    freeing: tuple[str, ...] = ()  # folders of discarded files being deleted in the background


def select_for_rollback(store: TransactionStore, tx_id: str | None) -> Transaction:
    """The transaction `rollback` undoes: the newest one not rolled back yet, or the one named (only when every
    newer one is rolled back: transactions are undone in the reverse order they were made)."""
    ids = store.ids()
    if not ids:
        raise OrtfixError(Msg(_NONE, prefix=str(store.prefix)), hint=Msg(_NOTHING))
    if tx_id is not None and tx_id not in ids:
        raise OrtfixError(Msg(N_("no transaction {id} in {prefix}"), id=tx_id, prefix=str(store.prefix)),
                          hint=Msg(N_("`ortfix history` lists them")))
    for candidate in reversed(ids):
        tx = store.load(candidate)  # strict: a journal that cannot be trusted stops here
        if tx_id is not None and candidate != tx_id:
            if tx.status is not TxStatus.ROLLED_BACK:
                raise OrtfixError(Msg(N_("transaction {newer} was made after {id} and is not rolled back"),
                                      newer=candidate, id=tx_id),
                                  hint=Msg(N_("roll it back first: `ortfix rollback {newer}`"), newer=candidate))
            continue
        if tx.status is TxStatus.ROLLED_BACK:
            if tx_id is not None:
                raise OrtfixError(Msg(N_("transaction {id} is already rolled back"), id=tx_id))
            continue
        if tx.pruned:
            raise OrtfixError(Msg(N_("transaction {id} cannot be rolled back: its stash was pruned"), id=candidate))
        return tx
    raise OrtfixError(Msg(N_("every transaction in {prefix} is already rolled back"), prefix=str(store.prefix)),
                      hint=Msg(_NOTHING))


_NONE = N_("no ortfix transaction in {prefix}")
_NOTHING = N_("nothing to roll back")


def steps_to_undo(tx: Transaction) -> tuple[Step, ...]:
    return tuple(s for s in reversed(tx.steps) if s.state in (StepState.STARTED, StepState.DONE))


def rollback(prefix: str, tx_id: str | None, *, ui: Ui | None = None,
             confirm: Callable[[Transaction], bool] | None = None) -> RollbackOutcome:
    ui = ui or Ui()
    with TransactionStore(prefix) as store:
        if not store.ids():
            raise OrtfixError(Msg(_NONE, prefix=prefix), hint=Msg(_NOTHING))
        with envlock.held(prefix):
            tx = select_for_rollback(store, tx_id)
            env = env_from_journal(tx)
            try:
                runner = Runner(store, tx, env, ui)
                _check_undoable(store, tx, env, runner)
                if confirm is not None and not confirm(tx):
                    raise OrtfixError(Msg(N_("rollback cancelled; nothing was changed")), exit_code=ExitCode.PROBLEMS)
                undone = steps_to_undo(tx)
                reason = "ortfix rollback" + (
                    " (resuming an interrupted rollback)" if tx.status is TxStatus.ROLLING_BACK
                    else " (after an interrupted apply)" if tx.status is TxStatus.RUNNING else "")
                notes = runner.reverse_all(reason)
            finally:
                env.fs.close()
        freed = free_discards(store, runner.tx, background=True)  # after the lock is released
    return RollbackOutcome(runner.tx, undone, tuple(notes), tuple(str(f) for f in freed))


def _check_undoable(store: TransactionStore, tx: Transaction, env: TargetEnv, runner: Runner) -> None:
    """Everything a rollback relies on, checked before it changes anything: every step well-formed and inside the
    environment, every sidecar matching its checksum, every stashed file present and unchanged."""
    hint = Msg(N_("ortfix will not guess how to undo it; restore the journal or undo by hand"))
    for step in tx.steps:
        why = handler_for(step.kind).check_step(env, step)
        if why:
            raise OrtfixError(Msg(N_("journal of transaction {id}: step {n} {why}"), id=tx.id, n=step.index, why=why),
                              hint=hint)
        if step.state in (StepState.STARTED, StepState.DONE):
            for name, sha in want_dict(step.record, "sidecars").items() if "sidecars" in step.record else ():
                store.read_sidecar(tx.id, step.index, str(name), str(sha))
    problems: list[str | Msg] = []
    for step in steps_to_undo(tx):
        problems += handler_for(step.kind).check_undo(env, step, runner.context(step))
    if problems:
        more: str | Msg = Msg(N_(" (and {n} more)"), n=len(problems) - 3) if len(problems) > 3 else ""
        raise OrtfixError(Msg(N_("transaction {id} cannot be undone exactly: {problems}{more}"), id=tx.id,
                              problems=Joined(N_("; "), problems[:3]), more=more),
                          hint=Msg(N_("nothing was changed; restore those files into the stash, or undo by hand "
                                      "(`ortfix history show {id}` lists what the transaction changed)"), id=tx.id))

