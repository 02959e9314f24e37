"""Applying a plan as one transaction (`apply_plan`); the post-apply verification is passed in by the caller.

apply:    lock → preflight (writable, disk space, the installer's own dry-run resolution; nothing changed if it
          fails) → journal → for each step: journal it started with its undo record, execute, journal it done →
          verify out of process + re-check → applied; on any failure (or Ctrl-C) every started step is reversed,
          newest first.

The pieces: env.py (the environment opened for changes), preflight.py, runner.py (the step runner and the test-only
fault injection), rollback.py, prune.py; actions/ (one handler per kind of step); journal.py, lock.py; file access
through system/confine.py.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import shutil  # noqa: F401 (tests/test_apply.py patches shutil.disk_usage through this module)
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Generic, Optional, Protocol, TypeVar

from ortfix import __version__
from ortfix.errors import ExitCode, OrtfixError
from ortfix.i18n import N_, Msg, tr
from ortfix.transaction import lock as envlock
from ortfix.transaction.actions.base import TargetEnv
from ortfix.transaction.consistency import check_argv, installer_check, new_problems, swapped_builds
from ortfix.transaction.env import system_warning, target_env
from ortfix.transaction.journal import OPEN_STATUSES, Transaction, TxStatus, new_id, now_iso, sha256_bytes
from ortfix.transaction.preflight import Preflight, preflight
from ortfix.transaction.rollback import free_discards
from ortfix.transaction.runner import Runner, Ui, interrupting_signals, why_failed
from ortfix.transaction.store import TransactionStore
from ortfix.transaction.undo_notes import said

if TYPE_CHECKING:
    from ortfix.check.facts import Facts
    from ortfix.plan.model import Plan


class PostApplyResult(Protocol):
    """What apply needs of a post-apply verification's result: whether it passed, why not, and its journal form."""

    @property
    def ok(self) -> bool: ...

    @property
    def problems(self) -> tuple[str | Msg, ...]: ...

    def to_json(self) -> dict[str, object]: ...


ResultT = TypeVar("ResultT", bound=PostApplyResult)
# The check run after the last step, before the transaction counts as applied, given the environment and the driver
# the plan was made for with --driver (or None). Passed in by the apply command: the transaction layer does not
# import the verification layer.
PostApplyVerification = Callable[[TargetEnv, Optional[str]], ResultT]


@dataclass(frozen=True)
class ApplyOutcome(Generic[ResultT]):
    preflight: Preflight
    tx: Transaction | None  # None for a dry run
    verification: ResultT | None
    warnings: tuple[str, ...] = field(default=())
    # requirements of installed distributions the installer's check reports broken now and not before the apply
    broken: tuple[str, ...] = field(default=())

    @property
    def status(self) -> str:
        return self.tx.status.value if self.tx else "dry-run"


def apply_plan(plan: Plan, facts: Facts, *, verification: PostApplyVerification[ResultT], dry_run: bool = False,
               keep_on_failure: bool = False, plan_bytes: bytes | None = None, ui: Ui | None = None,
               system: bool = False) -> ApplyOutcome[ResultT]:
    """Apply `plan` to the environment `facts` describe; `verification` decides, after the last step, whether the
    transaction stands (a dry run does not call it)."""
    ui = ui or Ui()
    # SIGTERM and SIGHUP as Ctrl-C from here on: the installer's dry run and every other child end with ortfix, and
    # once the transaction has begun, it is undone (_run).
    with interrupting_signals():
        env = target_env(facts, system=system)
        try:
            if system:
                ui.echo(system_warning(env))
            if dry_run:
                with tempfile.TemporaryDirectory(prefix="ortfix-dry-run-") as tmp:
                    pf = preflight(env, plan, Path(tmp), dry_run=True)
                return ApplyOutcome(pf, None, None)
            return _apply(plan, env, verification, keep_on_failure, plan_bytes, ui)
        finally:
            env.fs.close()


def _apply(plan: Plan, env: TargetEnv, verification: PostApplyVerification[ResultT], keep_on_failure: bool,
           plan_bytes: bytes | None, ui: Ui) -> ApplyOutcome[ResultT]:
    fs = env.fs
    made_state = not fs.exists(envlock.STATE_DIR)
    try:
        if made_state:
            fs.mkdir(envlock.STATE_DIR, 0o755)
        elif not fs.is_dir(envlock.STATE_DIR):
            raise OrtfixError(Msg(N_("cannot write in the environment: {path} is not a folder (a file or a symbolic "
                                     "link is in the way)"), path=str(envlock.state_dir(env.prefix))),
                              hint=Msg(_UNCHANGED))
    except OSError as exc:
        raise OrtfixError(Msg(N_("cannot write in the environment: cannot create {path}: {error}"),
                              path=str(envlock.state_dir(env.prefix)), error=str(exc.strerror or exc)),
                          hint=Msg(_UNCHANGED)) from exc
    try:
        held = envlock.acquire(env.prefix)
    except OrtfixError:
        if made_state:
            fs.rmdir(envlock.STATE_DIR)
        raise
    store = TransactionStore(env.prefix, fs)
    made_root = not fs.exists(store.rel_root)
    tx_id = new_id()
    try:
        store.remove_abandoned()
        for other in store.entries():
            if other.error is not None:
                raise OrtfixError(Msg(N_("transaction {id} cannot be read: {error}"), id=other.id, error=other.error),
                                  hint=Msg(N_("inspect it: `ortfix history show {id}`; nothing was changed"),
                                           id=other.id))
            if other.tx is not None and other.tx.status in OPEN_STATUSES:
                raise OrtfixError(Msg(N_("transaction {id} was interrupted ({status}) and must be undone first"),
                                      id=other.id, status=other.tx.status.value),
                                  hint=Msg(N_("run `ortfix rollback`; nothing was changed")))
        try:
            workdir = store.begin(tx_id)
        except OSError as exc:
            raise OrtfixError(Msg(N_("cannot write in {path}: {error}"), path=str(store.root),
                                  error=str(exc.strerror or exc)), hint=Msg(_UNCHANGED)) from exc
        ui.echo(tr("preflight: checking write access, disk space and what the installer will do"))
        pf = preflight(env, plan, workdir, dry_run=False)
        if pf.problems:
            more: str | Msg = (Msg(N_(" (and {n} more)"), n=len(pf.problems) - 1) if len(pf.problems) > 1 else "")
            raise OrtfixError(Msg(N_("preflight failed: {problem}{more}"), problem=pf.problems[0], more=more),
                              hint=Msg(_UNCHANGED))
        tx = _create(store, plan, env, tx_id, pf, plan_bytes)
    except BaseException:
        with contextlib.suppress(OSError, OrtfixError):
            store.abandon(tx_id)
        if made_root:
            fs.rmdir(store.rel_root)
        envlock.release(held, remove=made_state)
        if made_state:
            fs.rmdir(envlock.STATE_DIR)
        raise
    try:
        return _run(plan, env, store, tx, pf, verification, keep_on_failure, ui)
    finally:
        envlock.release(held)


_UNCHANGED = N_("nothing was changed")


def _create(store: TransactionStore, plan: Plan, env: TargetEnv, tx_id: str, pf: Preflight,
            plan_bytes: bytes | None) -> Transaction:
    """Write the journal (status running) and the plan; the transaction as written (the runner starts from it, not
    from a read-back of the file)."""
    data = plan_bytes if plan_bytes is not None else (json.dumps(plan.to_json(), indent=2, default=str) + "\n"
                                                     ).encode()
    now = now_iso()
    tx = Transaction(id=tx_id, created=now, updated=now, ortfix_version=__version__, prefix=env.prefix,
                     target=env.journaled(), installer=plan.installer,
                     plan_fingerprint=plan.fingerprint, plan_sha256=sha256_bytes(data), status=TxStatus.RUNNING,
                     steps=pf.steps, verification=None, rollback=None, message=None, pruned=False)
    try:
        store.create(tx, data)
    except OSError as exc:
        raise OrtfixError(Msg(N_("cannot write the journal in {path}: {error}"), path=str(store.root),
                              error=str(exc.strerror or exc)),
                          hint=Msg(N_("free some disk space; nothing was changed"))) from exc
    return tx


def _run(plan: Plan, env: TargetEnv, store: TransactionStore, tx: Transaction, pf: Preflight,
         verify: PostApplyVerification[ResultT], keep_on_failure: bool, ui: Ui) -> ApplyOutcome[ResultT]:
    runner = Runner(store, tx, env, ui)
    ui.echo(tr("transaction {id} ({folder})", id=tx.id, folder=str(store.folder(tx.id))))
    try:
        # Until the transaction is recorded applied, Ctrl-C, SIGTERM and SIGHUP undo it: during the steps and
        # during the verification in a fresh process alike (its child is ended with it).
        with interrupting_signals():
            runner.run_steps()
            ui.echo(tr("verifying in a fresh process of the target interpreter"))
            verification = verify(env, plan.options.driver_version)
            broken = _broken_requirements(env, plan, pf, ui)
            runner.save(replace(runner.tx, verification={**verification.to_json(),
                                                         "broken_requirements": list(broken)}))
            if verification.ok and not broken:
                runner.save(replace(runner.tx, status=TxStatus.APPLIED))
                return ApplyOutcome(pf, runner.tx, verification)
    except BaseException as exc:
        raise _undone(runner, store, exc) from exc
    reason = "verification failed: " + "; ".join(
        (*(str(p) for p in verification.problems), *(f"a requirement the apply broke: {b}" for b in broken)))
    if keep_on_failure:
        runner.save(replace(runner.tx, status=TxStatus.KEPT, message=reason))
        return ApplyOutcome(pf, runner.tx, verification, broken=broken)
    runner.save(replace(runner.tx, message=reason))
    warnings = [str(n.text) for n in said(runner.reverse_all(reason))]
    free_discards(store, runner.tx, background=False)
    return ApplyOutcome(pf, runner.tx, verification, tuple(warnings), broken)


def _broken_requirements(env: TargetEnv, plan: Plan, pf: Preflight, ui: Ui) -> tuple[str, ...]:
    """What the installer's own consistency check (`pip check`, `uv pip check`) finds broken now and did not find in
    preflight; () when it could not run either time."""
    if pf.consistency is None:
        return ()
    after = installer_check(env, plan.installer)
    if after is None:
        return ()
    ui.echo(tr("checking installed requirements ({command})",
               command=shlex.join(check_argv(env, plan.installer) or [])))
    return tuple(new_problems(pf.consistency, after, swapped_builds(plan)))


def _undone(runner: Runner, store: TransactionStore, exc: BaseException) -> OrtfixError:
    """Undo every change after `exc` stopped the apply (a step failed, the verification could not run, Ctrl-C or a
    signal); the one-line error that says so (exit 130 when interrupted)."""
    interrupted = isinstance(exc, KeyboardInterrupt)
    what = why_failed(exc)  # "interrupted", "terminated (signal)" when interrupted
    # The journal keeps the English; the terminal gets the same sentence in the user's language.
    message: str | Msg = runner.failure or runner.tx.message or what
    try:
        warnings = [str(n.text) for n in said(runner.reverse_all(f"apply failed: {message}"))]
    except BaseException as rexc:
        return OrtfixError(Msg(N_("{message}; the automatic rollback failed too: {why}"), message=message,
                               why=why_failed(rexc)),
                           hint=Msg(N_("run `ortfix rollback` to finish it")), exit_code=ExitCode.PROBLEMS)
    count = Msg(N_(" ({n} warnings)"), n=len(warnings)) if warnings else ""
    free_discards(store, runner.tx, background=False)
    if interrupted:
        return OrtfixError(Msg(_ROLLED_BACK, message=what, warnings=count), exit_code=ExitCode.INTERRUPTED)
    return OrtfixError(Msg(_ROLLED_BACK, message=message, warnings=count),
                       hint=Msg(N_("transaction {id}; `ortfix history show {id}`"), id=runner.tx.id),
                       exit_code=ExitCode.PROBLEMS)


_ROLLED_BACK = N_("{message}; every change was rolled back{warnings}")
