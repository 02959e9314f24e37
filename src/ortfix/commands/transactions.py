"""One function per transaction command (apply, rollback, history): each returns a result object; the click layer
only asks, renders and exits (see txreport.py for the renderings)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ortfix import subproc
from ortfix.errors import ExitCode, OrtfixError
from ortfix.target.choose import TargetDescription, choose_target, is_own_prefix
from ortfix.transaction.apply import (
    ApplyOutcome,
    PruneOutcome,
    RollbackOutcome,
    Ui,
    apply_plan,
    prune,
    rollback,
)
from ortfix.transaction.journal import HistoryEntry, Transaction, TransactionStore, TxStatus

if TYPE_CHECKING:  # planning and checking are imported only by `apply`: rollback and history stay light
    from ortfix.commands.check import CheckResult
    from ortfix.plan.model import Plan, PlanOptions


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
    target: TargetDescription
    outcome: RollbackOutcome

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.PROBLEMS if self.outcome.warnings else ExitCode.OK


@dataclass(frozen=True)
class HistoryResult:
    target: TargetDescription
    entries: tuple[HistoryEntry, ...]


@dataclass(frozen=True)
class ShowResult:
    target: TargetDescription
    entry: HistoryEntry
    plan: Mapping[str, Any] | None


@dataclass(frozen=True)
class PruneResult:
    target: TargetDescription
    outcome: PruneOutcome


_ASK = "import sys; print(sys.prefix); print(sys.version.split()[0]); print(int(sys.prefix != sys.base_prefix))"


def locate_environment(python: str | None) -> TargetDescription:
    """The target and its prefix without running a full probe: a venv or conda layout around bin/python says it
    (the Python version from pyvenv.cfg or conda-meta, when they say it); else the interpreter is asked (rollback
    must work quickly, offline, and with a half-broken environment)."""
    chosen = choose_target(python)
    exe = chosen.python
    env_dir = exe.parent.parent
    if exe.parent.name == "bin" and (env_dir / "pyvenv.cfg").is_file():
        return TargetDescription(str(exe), _venv_version(env_dir / "pyvenv.cfg"), "venv", str(env_dir),
                                 chosen.chosen_by, is_own_prefix(str(env_dir)))
    if exe.parent.name == "bin" and (env_dir / "conda-meta").is_dir():
        return TargetDescription(str(exe), _conda_version(env_dir / "conda-meta"), "conda", str(env_dir),
                                 chosen.chosen_by, is_own_prefix(str(env_dir)))
    proc = subproc.run([str(exe), "-c", _ASK], timeout=30)
    answer = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or len(answer) < 3:
        raise OrtfixError(f"cannot ask {exe} for its prefix: {proc.stderr.strip() or 'no output'}",
                          hint="give the environment folder with --python")
    prefix, version, venv = answer[-3:]
    kind = "venv" if venv == "1" else "conda" if os.path.isdir(os.path.join(prefix, "conda-meta")) else "system"
    return TargetDescription(str(exe), version, kind, prefix, chosen.chosen_by, is_own_prefix(prefix))


def _venv_version(cfg: Path) -> str | None:
    """`version = 3.11.7` (venv) or `version_info = 3.11.7` (uv, virtualenv) in pyvenv.cfg."""
    try:
        text = cfg.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, eq, value = line.partition("=")
        if eq and key.strip() in ("version", "version_info"):
            return value.strip()[:32] or None
    return None


def _conda_version(meta: Path) -> str | None:
    """The version in conda-meta's `python-3.11.7-<build>.json` file name."""
    try:
        names = [name for name in os.listdir(meta) if name.startswith("python-3") and name.endswith(".json")]
    except OSError:
        return None
    return names[0].split("-")[1] if len(names) == 1 else None


def prepare_apply(python: str | None, plan_file: Path | None, options: PlanOptions) -> PreparedApply:
    """The plan to apply: made now, or a saved plan accepted only while it is exactly what ortfix plans for the
    environment now (same facts, same options, same actions; see planfile.py). The environment is always the one
    named by --python (or the active one), never one named in the file.

    With a saved plan, `options` may repeat the machine the plan was made for (--driver, --compute-capability):
    the same values are accepted, others refused; every other option is the file's."""
    from ortfix.commands.plan import run_plan
    from ortfix.transaction.plan_file import check_against, read_plan_file

    if plan_file is None:
        result = run_plan(python, options)
        return PreparedApply(result.check, result.plan, None, "planned now")
    saved = read_plan_file(plan_file)
    _same_machine(str(plan_file), saved.options, options)
    result = run_plan(python, saved.options)
    probe = result.check.facts.probe
    check_against(saved, result.plan, probe.purelib, probe.platlib)
    return PreparedApply(result.check, result.plan, saved.data, str(plan_file))


def _same_machine(where: str, saved: PlanOptions, given: PlanOptions) -> None:
    """--driver / --compute-capability given with a saved plan must say what the plan was made for."""
    for flag, mine, theirs, what, own in (
            ("--driver", given.driver_version, saved.driver_version, "NVIDIA driver", "driver"),
            ("--compute-capability", given.compute_capability, saved.compute_capability, "compute capability",
             "GPU")):
        if mine is not None and mine != theirs:
            made_for = (f"was planned for {what} {theirs}" if theirs is not None
                        else f"was planned without {flag} (for this machine's own {own})")
            raise OrtfixError(f"{where} {made_for}, not for {flag} {mine}",
                              hint=f"leave {flag} out to apply the plan as it was made, or make a new one: "
                                   f"`ortfix plan {flag} {mine} -o plan.json`")


def run_apply(prepared: PreparedApply, *, dry_run: bool = False, keep_on_failure: bool = False,
              ui: Ui | None = None, system: bool = False) -> ApplyResult:
    if prepared.plan.empty:
        return ApplyResult(prepared, None, dry_run)
    outcome = apply_plan(prepared.plan, prepared.check.facts, dry_run=dry_run, keep_on_failure=keep_on_failure,
                         plan_bytes=prepared.plan_bytes, ui=ui, system=system)
    return ApplyResult(prepared, outcome, dry_run)


def run_rollback(target: TargetDescription, tx_id: str | None, *, ui: Ui | None = None,
                 confirm: Callable[[Transaction], bool] | None = None) -> RollbackResult:
    return RollbackResult(target, rollback(target.prefix, tx_id, ui=ui, confirm=confirm))


def run_history(target: TargetDescription) -> HistoryResult:
    with TransactionStore(target.prefix) as store:
        return HistoryResult(target, tuple(store.entries()))


def run_history_show(target: TargetDescription, tx_id: str) -> ShowResult:
    prefix = target.prefix
    with TransactionStore(prefix) as store:
        if tx_id not in store.ids():  # a malformed id is refused by store.folder first
            store.folder(tx_id)
            raise OrtfixError(f"no transaction {tx_id} in {prefix}", hint="`ortfix history` lists them")
        entry = store.entry(tx_id)
        return ShowResult(target, entry, store.plan_doc(tx_id) if entry.tx is not None else None)


def run_prune(target: TargetDescription, keep: int) -> PruneResult:
    return PruneResult(target, prune(target.prefix, keep))
