"""One function per transaction command (apply, rollback, history): each returns a result object; the click layer
only asks, renders and exits (see txreport.py for the renderings)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ortfix import subproc
from ortfix.errors import ExitCode, OrtfixError
from ortfix.journal import HistoryEntry, Transaction, TransactionStore, TxStatus
from ortfix.target import resolve_target
from ortfix.transaction import (
    ApplyOutcome,
    PruneOutcome,
    RollbackOutcome,
    Ui,
    apply_plan,
    prune,
    rollback,
)

if TYPE_CHECKING:  # planning and checking are imported only by `apply`: rollback and history stay light
    from ortfix.commands import CheckResult
    from ortfix.plan import Plan, PlanOptions


@dataclass(frozen=True)
class PreparedApply:
    check: CheckResult
    plan: Plan
    plan_bytes: bytes | None  # the saved plan file, byte for byte (None: planned just now)
    source: str  # "planned now" or the plan file's path


@dataclass(frozen=True)
class ApplyResult:
    prepared: PreparedApply
    outcome: ApplyOutcome | None  # None: the plan has nothing to do
    dry_run: bool

    @property
    def exit_code(self) -> ExitCode:
        plan = self.prepared.plan
        if self.outcome is None:
            return ExitCode.PROBLEMS if plan.unresolved else ExitCode.OK
        if self.dry_run:
            return ExitCode.PROBLEMS if self.outcome.preflight.steps or self.outcome.preflight.problems else ExitCode.OK
        tx = self.outcome.tx
        return ExitCode.OK if tx is not None and tx.status is TxStatus.APPLIED else ExitCode.PROBLEMS


@dataclass(frozen=True)
class RollbackResult:
    prefix: str
    outcome: RollbackOutcome

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.PROBLEMS if self.outcome.warnings else ExitCode.OK


@dataclass(frozen=True)
class HistoryResult:
    prefix: str
    entries: tuple[HistoryEntry, ...]


@dataclass(frozen=True)
class ShowResult:
    prefix: str
    entry: HistoryEntry
    plan: Mapping[str, Any] | None


@dataclass(frozen=True)
class PruneResult:
    prefix: str
    outcome: PruneOutcome


def environment_prefix(python: str | None) -> str:
    """The target's prefix without running a full probe: a venv or conda layout around bin/python says it; else the
    interpreter is asked (rollback must work quickly, offline, and with a half-broken environment)."""
    exe = resolve_target(python)
    env_dir = exe.parent.parent
    if exe.parent.name == "bin" and ((env_dir / "pyvenv.cfg").is_file() or (env_dir / "conda-meta").is_dir()):
        return str(env_dir)
    proc = subproc.run([str(exe), "-c", "import sys; print(sys.prefix)"], timeout=30)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise OrtfixError(f"cannot ask {exe} for its prefix: {proc.stderr.strip() or 'no output'}",
                          hint="give the environment folder with --python")
    return proc.stdout.strip().splitlines()[-1]


def prepare_apply(python: str | None, plan_file: Path | None, options: PlanOptions) -> PreparedApply:
    """The plan to apply: made now, or a saved plan accepted only while it is exactly what ortfix plans for the
    environment now (same facts, same options, same actions; see planfile.py). The environment is always the one
    named by --python (or the active one), never one named in the file."""
    from ortfix.commands import run_plan
    from ortfix.planfile import check_against, read_plan_file

    if plan_file is None:
        result = run_plan(python, options)
        return PreparedApply(result.check, result.plan, None, "planned now")
    saved = read_plan_file(plan_file)
    result = run_plan(python, saved.options)
    probe = result.check.facts.probe
    check_against(saved, result.plan, probe.purelib, probe.platlib)
    return PreparedApply(result.check, result.plan, saved.data, str(plan_file))


def run_apply(prepared: PreparedApply, *, dry_run: bool = False, keep_on_failure: bool = False,
              ui: Ui | None = None, system: bool = False) -> ApplyResult:
    if prepared.plan.empty:
        return ApplyResult(prepared, None, dry_run)
    outcome = apply_plan(prepared.plan, prepared.check.facts, dry_run=dry_run, keep_on_failure=keep_on_failure,
                         plan_bytes=prepared.plan_bytes, ui=ui, system=system)
    return ApplyResult(prepared, outcome, dry_run)


def run_rollback(python: str | None, tx_id: str | None, *, ui: Ui | None = None,
                 confirm: Callable[[Transaction], bool] | None = None) -> RollbackResult:
    prefix = environment_prefix(python)
    return RollbackResult(prefix, rollback(prefix, tx_id, ui=ui, confirm=confirm))


def run_history(python: str | None) -> HistoryResult:
    prefix = environment_prefix(python)
    with TransactionStore(prefix) as store:
        return HistoryResult(prefix, tuple(store.entries()))


def run_history_show(python: str | None, tx_id: str) -> ShowResult:
    prefix = environment_prefix(python)
    with TransactionStore(prefix) as store:
        if tx_id not in store.ids():  # a malformed id is refused by store.folder first
            store.folder(tx_id)
            raise OrtfixError(f"no transaction {tx_id} in {prefix}", hint="`ortfix history` lists them")
        entry = store.entry(tx_id)
        return ShowResult(prefix, entry, store.plan_doc(tx_id) if entry.tx is not None else None)


def run_prune(python: str | None, keep: int) -> PruneResult:
    prefix = environment_prefix(python)
    return PruneResult(prefix, prune(prefix, keep))
