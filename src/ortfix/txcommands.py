"""One function per transaction command (apply, rollback, history): each returns a result object; the click layer
only asks, renders and exits (see txreport.py for the renderings)."""

from __future__ import annotations

import json
import os
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


def plan_from_json(doc: Any, where: str) -> Plan:
    """A plan saved by `ortfix plan -o FILE`, back as a Plan (exactly its actions; nothing is re-planned)."""
    from ortfix.diagnose import Finding, Severity
    from ortfix.plan import PLAN_SCHEMA, Action, Plan, Target

    if not isinstance(doc, dict) or doc.get("schema") != PLAN_SCHEMA:
        raise OrtfixError(f"{where} is not an ortfix plan (schema {PLAN_SCHEMA})",
                          hint="save one with `ortfix plan -o plan.json`")
    try:
        actions = tuple(Action(kind=str(a["kind"]), summary=str(a["summary"]), changes=tuple(a["changes"]),
                               undo=str(a["undo"]), fixes=tuple(a["fixes"]), details=dict(a["details"]))
                        for a in doc["actions"])
        t = doc["target"]
        target = None if t is None else Target(
            package=str(t["package"]), version=str(t["version"]), cuda_major=int(t["cuda_major"]),
            cudnn_major=None if t["cudnn_major"] is None else int(t["cudnn_major"]), index=str(t["index"]),
            reasons=tuple(t["reasons"]))
        unresolved = tuple(Finding(code=str(f["code"]), severity=Severity(f["severity"]), summary=str(f["summary"]),
                                   evidence=tuple(f["evidence"]), fix=str(f["fix"]), data=dict(f["data"]))
                           for f in doc["unresolved"])
        return Plan(schema=PLAN_SCHEMA, created=str(doc["created"]), ortfix_version=str(doc["ortfix_version"]),
                    python=str(doc["python"]), prefix=str(doc["prefix"]), environment=str(doc["environment"]),
                    fingerprint=str(doc["fingerprint"]), matrix_version=str(doc["matrix_version"]),
                    installer=None if doc["installer"] is None else str(doc["installer"]), target=target,
                    actions=actions, unresolved=unresolved, notes=tuple(doc["notes"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise OrtfixError(f"{where} is not a complete ortfix plan: {type(exc).__name__} {exc}",
                          hint="save a new one with `ortfix plan -o plan.json`") from exc


def prepare_apply(python: str | None, plan_file: Path | None, options: PlanOptions) -> PreparedApply:
    """The plan to apply: made now, or read from a file and accepted only while the environment is exactly as it
    was when the plan was made (same facts fingerprint)."""
    from ortfix.commands import run_check, run_plan

    if plan_file is None:
        result = run_plan(python, options)
        return PreparedApply(result.check, result.plan, None, "planned now")
    try:
        data = plan_file.read_bytes()
        doc = json.loads(data.decode("utf-8"))
    except OSError as exc:
        raise OrtfixError(f"cannot read {plan_file}: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise OrtfixError(f"{plan_file} is not JSON: {exc}",
                          hint="save a plan with `ortfix plan -o plan.json`") from exc
    plan = plan_from_json(doc, str(plan_file))
    check = run_check(python or plan.python)
    if os.path.realpath(check.facts.probe.prefix) != os.path.realpath(plan.prefix):
        raise OrtfixError(f"{plan_file} was made for {plan.prefix}, not {check.facts.probe.prefix}",
                          hint="apply it with --python pointing at that environment, or make a new plan")
    now = check.facts.fingerprint()
    if now != plan.fingerprint:
        raise OrtfixError(f"the environment changed since {plan_file} was made (fingerprint {plan.fingerprint}, "
                          f"now {now})", hint="make a new plan: `ortfix plan -o plan.json`")
    return PreparedApply(check, plan, data, str(plan_file))


def run_apply(prepared: PreparedApply, *, dry_run: bool = False, keep_on_failure: bool = False,
              ui: Ui | None = None) -> ApplyResult:
    if prepared.plan.empty:
        return ApplyResult(prepared, None, dry_run)
    outcome = apply_plan(prepared.plan, prepared.check.facts, dry_run=dry_run, keep_on_failure=keep_on_failure,
                         plan_bytes=prepared.plan_bytes, ui=ui)
    return ApplyResult(prepared, outcome, dry_run)


def run_rollback(python: str | None, tx_id: str | None, *, ui: Ui | None = None,
                 confirm: Callable[[Transaction], bool] | None = None) -> RollbackResult:
    prefix = environment_prefix(python)
    return RollbackResult(prefix, rollback(prefix, tx_id, ui=ui, confirm=confirm))


def run_history(python: str | None) -> HistoryResult:
    prefix = environment_prefix(python)
    return HistoryResult(prefix, tuple(TransactionStore(prefix).entries()))


def run_history_show(python: str | None, tx_id: str) -> ShowResult:
    prefix = environment_prefix(python)
    store = TransactionStore(prefix)
    folder = store.folder(tx_id)
    if not folder.is_dir():
        raise OrtfixError(f"no transaction {tx_id} in {prefix}", hint="`ortfix history` lists them")
    entry = next(e for e in store.entries() if e.id == tx_id)
    return ShowResult(prefix, entry, store.plan_doc(tx_id))


def run_prune(python: str | None, keep: int) -> PruneResult:
    prefix = environment_prefix(python)
    return PruneResult(prefix, prune(prefix, keep))
