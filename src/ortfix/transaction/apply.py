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
from ortfix.transaction import lock as envlock
from ortfix.transaction.actions.base import TargetEnv
from ortfix.transaction.consistency import check_argv, installer_check, new_problems, swapped_builds
from ortfix.transaction.env import system_warning, target_env
from ortfix.transaction.journal import OPEN_STATUSES, Transaction, TxStatus, new_id, now_iso, sha256_bytes
from ortfix.transaction.preflight import Preflight, preflight
from ortfix.transaction.rollback import free_discards
from ortfix.transaction.runner import Runner, Terminated, Ui, interrupting_signals
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
    def problems(self) -> tuple[str, ...]: ...

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
            raise OrtfixError(f"cannot write in the environment: {envlock.state_dir(env.prefix)} is not a folder "
                              "(a file or a symbolic link is in the way)", hint="nothing was changed")
    except OSError as exc:
        raise OrtfixError(f"cannot write in the environment: cannot create {envlock.state_dir(env.prefix)}: "
                          f"{exc.strerror or exc}", hint="nothing was changed") from exc
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
                raise OrtfixError(f"transaction {other.id} cannot be read: {other.error}",
                                  hint=f"inspect it: `ortfix history show {other.id}`; nothing was changed")
            if other.tx is not None and other.tx.status in OPEN_STATUSES:
                raise OrtfixError(f"transaction {other.id} was interrupted ({other.tx.status.value}) and must be "
                                  "undone first", hint="run `ortfix rollback`; nothing was changed")
        try:
            workdir = store.begin(tx_id)
        except OSError as exc:
            raise OrtfixError(f"cannot write in {store.root}: {exc.strerror or exc}", hint="nothing was changed"
                              ) from exc
        ui.echo("preflight: checking write access, disk space and what the installer will do")
        pf = preflight(env, plan, workdir, dry_run=False)
        if pf.problems:
            raise OrtfixError(f"preflight failed: {pf.problems[0]}"
                              + (f" (and {len(pf.problems) - 1} more)" if len(pf.problems) > 1 else ""),
                              hint="nothing was changed")
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
        raise OrtfixError(f"cannot write the journal in {store.root}: {exc.strerror or exc}",
                          hint="free some disk space; nothing was changed") from exc
    return tx


def _run(plan: Plan, env: TargetEnv, store: TransactionStore, tx: Transaction, pf: Preflight,
         verify: PostApplyVerification[ResultT], keep_on_failure: bool, ui: Ui) -> ApplyOutcome[ResultT]:
    runner = Runner(store, tx, env, ui)
    ui.echo(f"transaction {tx.id} ({store.folder(tx.id)})")
    try:
        # Until the transaction is recorded applied, Ctrl-C, SIGTERM and SIGHUP undo it: during the steps and
        # during the verification in a fresh process alike (its child is ended with it).
        with interrupting_signals():
            runner.run_steps()
            ui.echo("verifying in a fresh process of the target interpreter")
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
        (*verification.problems, *(f"a requirement the apply broke: {b}" for b in broken)))
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
    ui.echo(f"checking installed requirements ({shlex.join(check_argv(env, plan.installer) or [])})")
    return tuple(new_problems(pf.consistency, after, swapped_builds(plan)))


def _undone(runner: Runner, store: TransactionStore, exc: BaseException) -> OrtfixError:
    """Undo every change after `exc` stopped the apply (a step failed, the verification could not run, Ctrl-C or a
    signal); the one-line error that says so (exit 130 when interrupted)."""
    interrupted = isinstance(exc, KeyboardInterrupt)
    what = f"terminated ({exc})" if isinstance(exc, Terminated) else "interrupted"
    message = runner.tx.message or (what if interrupted else
                                    exc.one_line() if isinstance(exc, OrtfixError) else f"{type(exc).__name__}: {exc}")
    try:
        warnings = [str(n.text) for n in said(runner.reverse_all(f"apply failed: {message}"))]
    except BaseException as rexc:
        why = rexc.one_line() if isinstance(rexc, OrtfixError) else f"{type(rexc).__name__}: {rexc}"
        return OrtfixError(f"{message}; the automatic rollback failed too: {why}",
                           hint="run `ortfix rollback` to finish it", exit_code=ExitCode.PROBLEMS)
    tail = "; every change was rolled back" + (f" ({len(warnings)} warnings)" if warnings else "")
    free_discards(store, runner.tx, background=False)
    if interrupted:
        return OrtfixError(what + tail, exit_code=ExitCode.INTERRUPTED)
    return OrtfixError(message + tail, hint=f"transaction {runner.tx.id}; `ortfix history show {runner.tx.id}`",
                       exit_code=ExitCode.PROBLEMS)
