"""The rollback command: undo the newest (or a named) transaction; the result knows its exit code."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ortfix.errors import ExitCode
from ortfix.target.choose import TargetDescription
from ortfix.transaction.journal import Transaction
from ortfix.transaction.rollback import RollbackOutcome, rollback
from ortfix.transaction.runner import Ui


@dataclass(frozen=True)
class RollbackResult:
    target: TargetDescription
    outcome: RollbackOutcome

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.PROBLEMS if self.outcome.warnings else ExitCode.OK


def run_rollback(target: TargetDescription, tx_id: str | None, *, ui: Ui | None = None,
                 confirm: Callable[[Transaction], bool] | None = None) -> RollbackResult:
    return RollbackResult(target, rollback(target.prefix, tx_id, ui=ui, confirm=confirm))

