"""The apply command: the plan to apply (made now, or a saved plan checked against what ortfix plans now), applied
as one transaction with the post-apply verification; the result knows its exit code. The click layer only asks,
renders and exits (cli/render_tx.py renders)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ortfix.errors import ExitCode, OrtfixError
from ortfix.i18n import N_, Msg
from ortfix.transaction.apply import ApplyOutcome, apply_plan
from ortfix.transaction.journal import TxStatus
from ortfix.transaction.runner import Ui
from ortfix.verify.applied import Verification, verify_applied

if TYPE_CHECKING:  # planning and checking are imported only by `apply`: rollback and history stay light
    from ortfix.commands.check import CheckResult
    from ortfix.plan.model import Plan, PlanOptions
    from ortfix.transaction.actions.base import TargetEnv


@dataclass(frozen=True)
class PreparedApply:
    check: CheckResult
    plan: Plan
    plan_bytes: bytes | None  # the saved plan file, byte for byte (None: planned just now)
    source: str  # "planned now" or the plan file's path


@dataclass(frozen=True)
class ApplyResult:
    prepared: PreparedApply
    outcome: ApplyOutcome[Verification] | None  # None: the plan has nothing to do
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


def prepare_apply(python: str | None, plan_file: Path | None, options: PlanOptions) -> PreparedApply:
    """The plan to apply: made now, or a saved plan accepted only while it is exactly what ortfix plans for the
    environment now (same facts, same options, same actions; see transaction/plan_file.py). The environment is always
    the one named by --python (or the active one), never one named in the file.

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
            ("--driver", given.driver_version, saved.driver_version, N_("NVIDIA driver"), N_("driver")),
            ("--compute-capability", given.compute_capability, saved.compute_capability, N_("compute capability"),
             N_("GPU"))):
        if mine is not None and mine != theirs:
            made_for = (Msg(N_("was planned for {what} {value}"), what=Msg(what), value=theirs) if theirs is not None
                        else Msg(N_("was planned without {option} (for this machine's own {own})"), option=flag,
                                 own=Msg(own)))
            raise OrtfixError(Msg(N_("{file} {made_for}, not for {option} {value}"), file=where, made_for=made_for,
                                  option=flag, value=mine),
                              hint=Msg(N_("leave {option} out to apply the plan as it was made, or make a new one: "
                                          "{command}"), option=flag,
                                       command=f"`ortfix plan {flag} {mine} -o plan.json`"))


def post_apply_check(env: TargetEnv, assumed_driver: str | None) -> Verification:
    """What decides, after the last step, whether the transaction stands: `ortfix check` of the environment as it is
    now (this machine, its own driver or none) and the fresh-process load check (verify.applied)."""
    from ortfix.commands.check import run_check  # deferred: rollback and history import this package too

    result = run_check(env.python)
    return verify_applied(env, result.facts, result.findings, assumed_driver=assumed_driver)


def run_apply(prepared: PreparedApply, *, dry_run: bool = False, keep_on_failure: bool = False,
              ui: Ui | None = None, system: bool = False) -> ApplyResult:
    if prepared.plan.empty:
        return ApplyResult(prepared, None, dry_run)
    outcome = apply_plan(prepared.plan, prepared.check.facts, verification=post_apply_check, dry_run=dry_run,
                         keep_on_failure=keep_on_failure, plan_bytes=prepared.plan_bytes, ui=ui, system=system)
    return ApplyResult(prepared, outcome, dry_run)

