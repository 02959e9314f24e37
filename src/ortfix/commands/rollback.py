"""The rollback command: undo the newest (or a named) transaction; the result knows its exit code."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ortfix.errors import ExitCode
from ortfix.target.choose import TargetDescription
from ortfix.transaction.journal import Transaction
from ortfix.transaction.rollback import RollbackOutcome, rollback
from ortfix.transaction.runner import Ui
from ortfix.transaction.undo_notes import any_failed


@dataclass(frozen=True)
class RollbackResult:
    target: TargetDescription
    outcome: RollbackOutcome

    @property
    def exit_code(self) -> ExitCode:
        """1 only when something the transaction did is not undone; files written later by others and left in place
        are reported, not a failure (undo_notes.py)."""
        return ExitCode.PROBLEMS if any_failed(self.outcome.notes) else ExitCode.OK


def run_rollback(target: TargetDescription, tx_id: str | None, *, ui: Ui | None = None,
                 confirm: Callable[[Transaction], bool] | None = None) -> RollbackResult:
    return RollbackResult(target, rollback(target.prefix, tx_id, ui=ui, confirm=confirm))

