"""Applying a plan as one transaction, and undoing it.

apply:    lock → preflight (writable, disk space, the installer's own dry-run resolution; nothing changed if it
          fails) → journal → for each step: journal it started with its undo record, execute, journal it done →
          verify out of process + re-check → applied; on any failure (or Ctrl-C) every started step is reversed,
          newest first.
rollback: lock → the journal, strictly checked → reverse every started or done step, newest first → rolled back.
prune:    delete the stashes of old, finished transactions (their journals stay for `history`).

Test-only fault injection: ORTFIX_TEST_CRASH_AFTER_STEP=N ends the process (os._exit(99)) right after step N is
journaled done; ORTFIX_TEST_CRASH_DURING_STEP=N right after step N is journaled started and partly executed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.utils import canonicalize_name

from ortfix import __version__, subproc
from ortfix.check.codes import FindingCode
from ortfix.errors import ExitCode, OrtfixError
from ortfix.plan.kinds import PIP_INSTALL, PIP_UNINSTALL
from ortfix.system import hooks
from ortfix.transaction import lock as envlock
from ortfix.transaction.actions import (
    ORIGIN_PLAN,
    ORIGIN_REPLACED,
    Resolution,
    StepContext,
    TargetEnv,
    discard_rel,
    handler_for,
    open_env,
    resolve,
    test_crash,
    verified,
)
from ortfix.transaction.journal import (
    OPEN_STATUSES,
    Step,
    StepState,
    Transaction,
    TransactionStore,
    TxStatus,
    new_id,
    now_iso,
    sha256_bytes,
)

if TYPE_CHECKING:
    from ortfix.check.facts import Facts
    from ortfix.plan.model import Plan
    from ortfix.verify.loadcheck import LoadCheck

# Findings that must be gone after an apply: the GPU provider cannot load while any of them is there.
BLOCKING = frozenset({
    FindingCode.LIB_MISSING, FindingCode.LIB_NOT_ON_PATH, FindingCode.LIB_WRONG_MAJOR, FindingCode.SONAME_LINK_MISSING,
    FindingCode.LIB_DAMAGED, FindingCode.LIB_OTHER_CUDA, FindingCode.NO_ORT, FindingCode.CPU_ONLY,
    FindingCode.CPU_AND_GPU, FindingCode.PROVIDER_MISSING, FindingCode.ORT_DAMAGED, FindingCode.ORT_ORPHANED})
CRASH_AFTER = "ORTFIX_TEST_CRASH_AFTER_STEP"
CRASH_DURING = "ORTFIX_TEST_CRASH_DURING_STEP"
PAUSE_BEFORE = "ORTFIX_TEST_PAUSE_BEFORE_STEP"  # with ORTFIX_TEST_PAUSE_FILE: wait while that file exists
_MARGIN = 32 << 20  # free space kept in hand on top of what the install needs


@dataclass(frozen=True)
class Ui:
    echo: Callable[[str], None] = lambda line: None  # progress lines for people
    output: Callable[[str, bool], None] = lambda line, is_err: None  # the installer's own output, streamed


def target_env(facts: Facts, *, system: bool = False) -> TargetEnv:
    """The environment opened for changes (its root descriptor held; see confine.py). A system Python is changed only
    when the user says so (`--system`): its hooks and packages affect every program that uses it."""
    p = facts.probe
    if p.env_kind == "system" and not system:
        raise OrtfixError(f"{p.executable} is a system Python (prefix {p.prefix}): changing it affects every program "
                          "that uses it, and ortfix changes only venvs and conda environments by default",
                          hint="make a venv (python3 -m venv) and use that, or pass --system to change it anyway")
    return open_env(p.executable, p.prefix, p.purelib, p.platlib, os.path.join(p.prefix, "bin"), p.env_kind,
                    uv=facts.uv, break_system_packages=system and externally_managed(p.prefix, p.python_version))


def externally_managed(prefix: str, python_version: str) -> bool:
    """PEP 668: the interpreter's stdlib folder holds EXTERNALLY-MANAGED (pip then refuses without
    --break-system-packages)."""
    short = ".".join(python_version.split(".")[:2])
    return any(os.path.isfile(os.path.join(prefix, lib, f"python{short}", "EXTERNALLY-MANAGED"))
               for lib in ("lib", "lib64"))


def system_warning(env: TargetEnv) -> str:
    return (f"--system: changing the system environment {env.prefix}: the packages and hooks written to "
            f"{env.purelib} are seen by every program that runs {env.python}")


def env_from_journal(tx: Transaction) -> TargetEnv:
    """The environment a journal was written for; its paths are checked to lie inside the prefix the journal was
    found in (TransactionStore.load checked the prefix itself)."""
    t = tx.target
    return open_env(t["python"], t["prefix"], t["purelib"], t["platlib"], t["scripts"], t["env_kind"])


# ---------------------------------------------------------------------------------------------------------------------
# preflight
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DiskCheck:
    where: str
    free_bytes: int
    needed_bytes: int  # what the downloads unpack to, plus the downloads, plus a margin
    download_bytes: int  # what pip downloads (into its temporary folder) before unpacking
    unknown_sizes: tuple[str, ...]  # distributions whose size neither pip's report nor the matrix gives
    estimated: tuple[str, ...] = ()  # sizes taken from the matrix's measured wheels (the index did not say)


@dataclass(frozen=True)
class Preflight:
    env: TargetEnv
    steps: tuple[Step, ...]
    resolution: Resolution | None
    disk: DiskCheck | None
    problems: tuple[str, ...]
    commands: tuple[tuple[str, ...], ...]  # what preflight itself ran (the installer's dry-run)
    descriptions: tuple[tuple[str, ...], ...] = ()  # per step: the exact commands and file changes

    def describe(self) -> list[tuple[Step, list[str]]]:
        return [(s, list(d)) for s, d in zip(self.steps, self.descriptions)]


def _planned(index: int, kind: str, summary: str, origin: str, details: Mapping[str, Any],
             record: Mapping[str, Any] | None = None) -> Step:
    return Step(index=index, kind=kind, summary=summary, origin=origin, details=dict(details),
                state=StepState.PLANNED, record=dict(record or {}), started=None, finished=None, error=None)


def _resolution_json(res: Resolution) -> list[dict[str, Any]]:
    return [{"name": r.name, "version": r.version, "url": r.url, "download_bytes": r.download_bytes,
             "unpacked_bytes": r.unpacked_bytes,
             "replaces": f"{r.replaces.name} {r.replaces.version}" if r.replaces else None} for r in res.install]


def _expand(env: TargetEnv, plan: Plan, workdir: Path) -> tuple[list[Step], Resolution | None, list[tuple[str, ...]]]:
    """Plan actions → steps; the install is preceded by the uninstall of every distribution pip would replace."""
    steps: list[Step] = []
    resolution: Resolution | None = None
    commands: list[tuple[str, ...]] = []
    uninstalled = {canonicalize_name(str(a.details["distribution"])) for a in plan.actions if a.kind == PIP_UNINSTALL}
    for action in plan.actions:
        handler_for(action.kind)  # an unknown kind stops here, before anything runs
        if action.kind != PIP_INSTALL:
            steps.append(_planned(len(steps) + 1, action.kind, action.summary, ORIGIN_PLAN, action.details))
            continue
        if action.details.get("installer") not in ("pip", "uv"):
            raise OrtfixError("the target environment has no pip (and no uv was found)",
                              hint=f"install pip into it first: {env.python} -m ensurepip; nothing was changed")
        resolution = resolve(env, action.details, workdir, replaced_elsewhere=uninstalled)
        commands.append(resolution.argv)
        for r in resolution.install:
            old = r.replaces
            if old is None:
                continue
            steps.append(_planned(
                len(steps) + 1, PIP_UNINSTALL, f"move aside {old.name} {old.version} (pip would replace it with "
                f"{r.version})", ORIGIN_REPLACED,
                {"distribution": old.name, "version": old.version, "location": old.location,
                 "dist_info": old.dist_info}))
        steps.append(_planned(len(steps) + 1, action.kind, action.summary, ORIGIN_PLAN, action.details,
                              {"resolution": _resolution_json(resolution)}))
    return steps, resolution, commands


def _disk(env: TargetEnv, resolution: Resolution | None) -> DiskCheck | None:
    if resolution is None:
        return None
    unpacked = download = 0
    estimated: list[str] = []
    unknown: list[str] = []
    for r in resolution.install:
        if r.unpacked_bytes is not None:
            unpacked += r.unpacked_bytes
            download += r.download_bytes or 0
            continue
        # A remote index: pip's report has no sizes; the matrix knows what real wheels of most of them weigh.
        from ortfix.compat.load import load_matrix

        size = load_matrix().size_estimate(r.name)
        if size is None:
            unknown.append(f"{r.name} {r.version}")
            continue
        download += int(size[0] * (1 << 20))
        unpacked += int(size[1] * (1 << 20))
        estimated.append(f"{r.name} {r.version}")
    where = env.purelib if os.path.isdir(env.purelib) else env.prefix
    free = shutil.disk_usage(where).free
    # Moving files aside is a rename (no space); pip unpacks the download next to the environment's files.
    return DiskCheck(where, free, unpacked + download + _MARGIN, download, tuple(unknown), tuple(estimated))


def _probe_write(folder: str) -> str | None:
    """Create and delete a temp file: os.access is not enough (root, read-only mounts, ACLs)."""
    try:
        fd, name = tempfile.mkstemp(prefix=".ortfix-probe-", dir=folder)
        os.close(fd)
        os.unlink(name)
    except OSError as exc:
        return f"cannot write in {folder}: {exc.strerror or exc}"
    return None


def preflight(env: TargetEnv, plan: Plan, workdir: Path, *, dry_run: bool) -> Preflight:
    """Everything that can be known before the first change: refuse now rather than roll back later."""
    problems: list[str] = []
    for folder in dict.fromkeys((*env.site_dirs, env.scripts)):
        if not os.path.isdir(folder):
            continue
        if not os.access(folder, os.W_OK):
            problems.append(f"{folder} is not writable")
        elif not dry_run:
            why = _probe_write(folder)
            if why:
                problems.append(why)
    if not dry_run and os.path.isdir(envlock.state_dir(env.prefix)):
        why = _probe_write(str(envlock.state_dir(env.prefix)))
        if why:
            problems.append(why)
    steps, resolution, commands = _expand(env, plan, workdir)
    for step in steps:
        problems += [f"step {step.index} ({step.summary}): {p}" for p in verified(env, step.kind, step.details)]
    disk = _disk(env, resolution)
    if disk is not None and disk.free_bytes < disk.needed_bytes:
        problems.append(f"not enough free space in {disk.where}: {_mib(disk.free_bytes)} free, "
                        f"{_mib(disk.needed_bytes)} needed" + (" (estimated from the sizes of measured wheels)"
                                                              if disk.estimated else ""))
    tmp = tempfile.gettempdir()
    if disk is not None and disk.download_bytes and shutil.disk_usage(tmp).free < disk.download_bytes:
        problems.append(f"not enough free space in {tmp} for the downloads ({_mib(disk.download_bytes)})")
    descriptions = []
    for step in steps:
        try:
            descriptions.append(tuple(handler_for(step.kind).describe(env, step.details)))
        except OrtfixError as exc:
            descriptions.append((exc.one_line(),))
    return Preflight(env, tuple(steps), resolution, disk, tuple(problems), tuple(commands), tuple(descriptions))


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.0f} MiB"


# ---------------------------------------------------------------------------------------------------------------------
# apply
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verification:
    ok: bool
    loader: LoadCheck | None
    blocking: tuple[str, ...]  # blocking finding codes the re-check still reports
    problems: tuple[str, ...]
    # Applied for a machine with another driver (--driver) on one without any: why the GPU part (the provider
    # starts, a model matches the CPU) was not verified here. None: not such an apply.
    gpu_not_verified: str | None = None
    notes: tuple[str, ...] = ()  # what the load check left out and why (a library that needs the driver's libcuda)

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "loader": self.loader.to_json() if self.loader else None,
                "blocking_findings": list(self.blocking), "problems": list(self.problems),
                "gpu_not_verified": self.gpu_not_verified, "notes": list(self.notes)}


@dataclass(frozen=True)
class ApplyOutcome:
    preflight: Preflight
    tx: Transaction | None  # None for a dry run
    verification: Verification | None
    warnings: tuple[str, ...] = field(default=())

    @property
    def status(self) -> str:
        return self.tx.status.value if self.tx else "dry-run"


def _crash_point(var: str) -> int | None:
    value = os.environ.get(var)
    return int(value) if value and value.isdigit() else None


def _test_pause() -> None:
    """Fault injection: create ORTFIX_TEST_PAUSE_FILE and wait (at most 120 s) until the test deletes it."""
    import time

    flag = os.environ.get("ORTFIX_TEST_PAUSE_FILE")
    if not flag:
        return
    Path(flag).touch()
    deadline = time.monotonic() + 120
    while os.path.exists(flag) and time.monotonic() < deadline:
        time.sleep(0.01)


def _replace_step(tx: Transaction, index: int, **changes: Any) -> Transaction:
    steps = tuple(replace(s, **changes) if s.index == index else s for s in tx.steps)
    return replace(tx, steps=steps)


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Terminated(KeyboardInterrupt):
    """SIGTERM (`kill`, `docker stop`) or SIGHUP (the terminal closed): handled exactly like Ctrl-C."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_terminated(signum: int, _frame: object) -> None:
    raise Terminated(signum)


@contextlib.contextmanager
def _signals(signums: tuple[int, ...], handler: Any) -> Iterator[None]:
    """`handler` for these signals while the block runs, the previous handlers after it (main thread only)."""
    previous: dict[int, Any] = {}
    try:
        for signum in signums:
            previous[signum] = signal.signal(signum, handler)
    except ValueError:  # not the main thread
        pass
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def _stop_signals_interrupt() -> contextlib.AbstractContextManager[None]:
    """While steps run, SIGTERM and SIGHUP interrupt like Ctrl-C does, so the automatic rollback runs."""
    return _signals((signal.SIGTERM, signal.SIGHUP), _raise_terminated)


def _no_interrupts() -> contextlib.AbstractContextManager[None]:
    """Ctrl-C, SIGTERM or SIGHUP during a rollback would leave it half done: hold them until it has finished."""
    return _signals(_STOP_SIGNALS, signal.SIG_IGN)


class _Runner:
    """Holds the journal of one transaction while steps run; every change of state is saved before going on."""

    def __init__(self, store: TransactionStore, tx: Transaction, env: TargetEnv, ui: Ui) -> None:
        self.store = store
        self.tx = tx
        self.env = env
        self.ui = ui

    def save(self, tx: Transaction) -> None:
        self.tx = self.store.save(tx)

    def context(self, step: Step, *, crash_midway: bool = False) -> StepContext:
        def commit(record: Mapping[str, Any]) -> None:
            current = next(s for s in self.tx.steps if s.index == step.index)
            state = StepState.STARTED if current.state is StepState.PLANNED else current.state
            self.save(_replace_step(self.tx, step.index, state=state, record=dict(record),
                                    started=current.started or now_iso()))

        return StepContext(self.store, self.tx.id, step.index, commit, self.ui.echo, self.ui.output, crash_midway)

    def run_steps(self) -> None:
        with _stop_signals_interrupt():
            self._run_steps()

    def _run_steps(self) -> None:
        after, during = _crash_point(CRASH_AFTER), _crash_point(CRASH_DURING)
        pause = _crash_point(PAUSE_BEFORE)
        for step in self.tx.steps:
            if pause == step.index:
                _test_pause()
            self.ui.echo(f"[{step.index}/{len(self.tx.steps)}] {step.summary}")
            handler = handler_for(step.kind)
            try:
                record = handler.execute(self.env, step, self.context(step, crash_midway=during == step.index))
            except BaseException as exc:
                why = exc.one_line() if isinstance(exc, OrtfixError) else (
                    f"terminated ({exc})" if isinstance(exc, Terminated) else
                    "interrupted" if isinstance(exc, KeyboardInterrupt) else f"{type(exc).__name__}: {exc}")
                self.save(replace(_replace_step(self.tx, step.index, error=why),
                                  message=f"step {step.index} ({step.summary}) failed: {why}"))
                raise
            self.save(_replace_step(self.tx, step.index, state=StepState.DONE, record=dict(record),
                                    finished=now_iso()))
            if after == step.index:
                test_crash()

    def reverse_all(self, reason: str) -> list[str]:
        """Undo every started or done step, newest first; the journal says how far it got at every moment."""
        warnings: list[str] = []
        with _no_interrupts():
            # The disk space held since the transaction began is what lets the undo proceed on a full disk.
            self.store.release_reserve(self.tx.id)
            self.save(replace(self.tx, status=TxStatus.ROLLING_BACK,
                              rollback={"started": now_iso(), "finished": None, "reason": reason, "warnings": []}))
            for step in reversed(self.tx.steps):
                if step.state not in (StepState.STARTED, StepState.DONE):
                    continue
                self.ui.echo(f"undo [{step.index}/{len(self.tx.steps)}] {step.summary}")
                try:
                    got = handler_for(step.kind).reverse(self.env, step, self.context(step))
                except OSError as exc:
                    raise OrtfixError(f"undoing step {step.index} ({step.summary}) failed: "
                                      f"{exc.filename or ''}: {exc.strerror or exc}",
                                      hint="fix that (free disk space?), then run `ortfix rollback` again; the "
                                           "journal says how far it got") from exc
                warnings += got
                self.save(_replace_step(self.tx, step.index, state=StepState.REVERSED))
            rollback = {**(self.tx.rollback or {}), "finished": now_iso(), "warnings": warnings}
            self.save(replace(self.tx, status=TxStatus.ROLLED_BACK, rollback=rollback))
        return warnings


def _codes_blocking(findings: Sequence[Any]) -> tuple[str, ...]:
    return tuple(sorted({f.code for f in findings if f.code in BLOCKING}))


def verify_applied(env: TargetEnv, *, python: str, assumed_driver: str | None = None) -> Verification:
    """`ortfix verify`'s level 1 (a fresh process of the target, started as the user starts it, loads every library
    the provider needs, as its requesters would), and ortfix's own check agrees.

    Everything here can be verified without a GPU. With `assumed_driver` (the plan was made with --driver for
    another machine) on a machine without a usable driver, that is all that can be: the result says so."""
    from ortfix.commands.check import run_check
    from ortfix.verify.levels import Status, level_loader, no_gpu_reason

    result = run_check(python)  # this machine as it is: its own driver, or none
    level = level_loader(result.facts, python, conda_hook=hooks.active_conda_hook(env.prefix, env.env_kind))
    blocking = _codes_blocking(result.findings)
    problems: list[str] = []
    if level.status is not Status.PASS:
        problems += list(level.load_check.failures if level.load_check and level.load_check.failures
                         else (level.verdict,))
    problems += [f"ortfix check still reports {c}" for c in blocking]
    no_gpu = no_gpu_reason(result.facts.driver) if assumed_driver else None
    not_verified = (f"GPU part not verified: {no_gpu} on this machine (the plan assumes driver {assumed_driver}); "
                    "`ortfix verify` on the GPU machine checks that the CUDA provider starts and a model matches the "
                    "CPU" if no_gpu else None)
    need_driver = level.data.get("need_driver", {}) if level.status is Status.PASS else {}
    notes = tuple(n for n in level.evidence if n.split(":", 1)[0] in need_driver)
    return Verification(not problems, level.load_check, blocking, tuple(problems), not_verified, notes)


def apply_plan(plan: Plan, facts: Facts, *, dry_run: bool = False, keep_on_failure: bool = False,
               plan_bytes: bytes | None = None, ui: Ui | None = None, system: bool = False) -> ApplyOutcome:
    ui = ui or Ui()
    env = target_env(facts, system=system)
    try:
        if system:
            ui.echo(system_warning(env))
        if dry_run:
            with tempfile.TemporaryDirectory(prefix="ortfix-dry-run-") as tmp:
                pf = preflight(env, plan, Path(tmp), dry_run=True)
            return ApplyOutcome(pf, None, None)
        return _apply(plan, env, keep_on_failure, plan_bytes, ui)
    finally:
        env.fs.close()


def _apply(plan: Plan, env: TargetEnv, keep_on_failure: bool, plan_bytes: bytes | None, ui: Ui) -> ApplyOutcome:
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
        _create(store, plan, env, tx_id, pf, plan_bytes)
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
        return _run(plan, env, store, tx_id, pf, keep_on_failure, ui)
    finally:
        envlock.release(held)


def _create(store: TransactionStore, plan: Plan, env: TargetEnv, tx_id: str, pf: Preflight,
            plan_bytes: bytes | None) -> None:
    import json

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


def _run(plan: Plan, env: TargetEnv, store: TransactionStore, tx_id: str, pf: Preflight, keep_on_failure: bool,
         ui: Ui) -> ApplyOutcome:
    runner = _Runner(store, store.load(tx_id), env, ui)
    ui.echo(f"transaction {tx_id} ({store.folder(tx_id)})")
    try:
        runner.run_steps()
    except BaseException as exc:
        interrupted = isinstance(exc, KeyboardInterrupt)
        message = runner.tx.message or str(exc)
        try:
            warnings = runner.reverse_all(f"apply failed: {message}")
        except BaseException as rexc:
            why = rexc.one_line() if isinstance(rexc, OrtfixError) else f"{type(rexc).__name__}: {rexc}"
            raise OrtfixError(f"{message}; the automatic rollback failed too: {why}",
                              hint="run `ortfix rollback` to finish it", exit_code=ExitCode.PROBLEMS) from exc
        tail = "; every change was rolled back" + (f" ({len(warnings)} warnings)" if warnings else "")
        free_discards(store, runner.tx, background=False)
        if interrupted:
            what = f"terminated ({exc})" if isinstance(exc, Terminated) else "interrupted"
            raise OrtfixError(what + tail, exit_code=ExitCode.INTERRUPTED) from exc
        raise OrtfixError(message + tail, hint=f"transaction {tx_id}; `ortfix history show {tx_id}`",
                          exit_code=ExitCode.PROBLEMS) from exc
    ui.echo("verifying in a fresh process of the target interpreter")
    verification = verify_applied(env, python=env.python, assumed_driver=plan.options.driver_version)
    runner.save(replace(runner.tx, verification=verification.to_json()))
    if verification.ok:
        runner.save(replace(runner.tx, status=TxStatus.APPLIED))
        return ApplyOutcome(pf, runner.tx, verification)
    reason = "verification failed: " + "; ".join(verification.problems)
    if keep_on_failure:
        runner.save(replace(runner.tx, status=TxStatus.KEPT, message=reason))
        return ApplyOutcome(pf, runner.tx, verification)
    runner.save(replace(runner.tx, message=reason))
    warnings = runner.reverse_all(reason)
    free_discards(store, runner.tx, background=False)
    return ApplyOutcome(pf, runner.tx, verification, tuple(warnings))


_FREE_CODE = """import sys
from ortfix.transaction.confine import EnvRoot
with EnvRoot(sys.argv[1]) as root:
    for rel in sys.argv[2:]:
        root.remove_tree(rel)
"""


def free_discards(store: TransactionStore, tx: Transaction, *, background: bool) -> list[Path]:
    """Delete what a rollback moved aside from the environment (the installed distributions), never following a
    link. In the background after a user's rollback: the environment is already restored, freeing gigabytes need not
    hold the prompt; `history prune` frees whatever a background deletion did not get to."""
    rels = [r for r in (discard_rel(store, tx.id, s.index) for s in tx.steps) if store.env.is_dir(r)]
    folders = [store.prefix / r for r in rels]
    if rels and background:
        try:
            subproc.start([sys.executable, "-c", _FREE_CODE, store.env.real, *rels])
            return folders
        except OrtfixError:
            pass
    for rel in rels:
        with contextlib.suppress(OSError, OrtfixError):
            store.env.remove_tree(rel)
    return folders


# ---------------------------------------------------------------------------------------------------------------------
# rollback, prune
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RollbackOutcome:
    tx: Transaction
    undone: tuple[Step, ...]
    warnings: tuple[str, ...]
    freeing: tuple[str, ...] = ()  # folders of discarded files being deleted in the background


def select_for_rollback(store: TransactionStore, tx_id: str | None) -> Transaction:
    """The transaction `rollback` undoes: the newest one not rolled back yet, or the one named (only when every
    newer one is rolled back: transactions are undone in the reverse order they were made)."""
    ids = store.ids()
    if not ids:
        raise OrtfixError(f"no ortfix transaction in {store.prefix}", hint="nothing to roll back")
    if tx_id is not None and tx_id not in ids:
        raise OrtfixError(f"no transaction {tx_id} in {store.prefix}", hint="`ortfix history` lists them")
    for candidate in reversed(ids):
        tx = store.load(candidate)  # strict: a journal that cannot be trusted stops here
        if tx_id is not None and candidate != tx_id:
            if tx.status is not TxStatus.ROLLED_BACK:
                raise OrtfixError(f"transaction {candidate} was made after {tx_id} and is not rolled back",
                                  hint=f"roll it back first: `ortfix rollback {candidate}`")
            continue
        if tx.status is TxStatus.ROLLED_BACK:
            if tx_id is not None:
                raise OrtfixError(f"transaction {tx_id} is already rolled back")
            continue
        if tx.pruned:
            raise OrtfixError(f"transaction {candidate} cannot be rolled back: its stash was pruned")
        return tx
    raise OrtfixError(f"every transaction in {store.prefix} is already rolled back", hint="nothing to roll back")


def steps_to_undo(tx: Transaction) -> tuple[Step, ...]:
    return tuple(s for s in reversed(tx.steps) if s.state in (StepState.STARTED, StepState.DONE))


def rollback(prefix: str, tx_id: str | None, *, ui: Ui | None = None,
             confirm: Callable[[Transaction], bool] | None = None) -> RollbackOutcome:
    ui = ui or Ui()
    with TransactionStore(prefix) as store:
        if not store.ids():
            raise OrtfixError(f"no ortfix transaction in {prefix}", hint="nothing to roll back")
        with envlock.held(prefix):
            tx = select_for_rollback(store, tx_id)
            env = env_from_journal(tx)
            try:
                runner = _Runner(store, tx, env, ui)
                _check_undoable(store, tx, env, runner)
                if confirm is not None and not confirm(tx):
                    raise OrtfixError("rollback cancelled; nothing was changed", exit_code=ExitCode.PROBLEMS)
                undone = steps_to_undo(tx)
                reason = "ortfix rollback" + (
                    " (resuming an interrupted rollback)" if tx.status is TxStatus.ROLLING_BACK
                    else " (after an interrupted apply)" if tx.status is TxStatus.RUNNING else "")
                warnings = runner.reverse_all(reason)
            finally:
                env.fs.close()
        freed = free_discards(store, runner.tx, background=True)  # after the lock is released
    return RollbackOutcome(runner.tx, undone, tuple(warnings), tuple(str(f) for f in freed))


def _check_undoable(store: TransactionStore, tx: Transaction, env: TargetEnv, runner: _Runner) -> None:
    """Everything a rollback relies on, checked before it changes anything: every step well-formed and inside the
    environment, every sidecar matching its checksum, every stashed file present and unchanged."""
    hint = "ortfix will not guess how to undo it; restore the journal or undo by hand"
    for step in tx.steps:
        why = handler_for(step.kind).check_step(env, step)
        if why:
            raise OrtfixError(f"journal of transaction {tx.id}: step {step.index} {why}", hint=hint)
        if step.state in (StepState.STARTED, StepState.DONE):
            for name, sha in dict(step.record.get("sidecars", {})).items():
                store.read_sidecar(tx.id, step.index, str(name), str(sha))
    problems: list[str] = []
    for step in steps_to_undo(tx):
        problems += handler_for(step.kind).check_undo(env, step, runner.context(step))
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise OrtfixError(f"transaction {tx.id} cannot be undone exactly: {'; '.join(problems[:3])}{more}",
                          hint="nothing was changed; restore those files into the stash, or undo by hand "
                               f"(`ortfix history show {tx.id}` lists what the transaction changed)")


@dataclass(frozen=True)
class PruneOutcome:
    pruned: tuple[str, ...]
    kept: tuple[str, ...]
    skipped: tuple[str, ...]  # open (interrupted) or unreadable transactions: never pruned
    freed_bytes: int


def prune(prefix: str, keep: int) -> PruneOutcome:
    if keep < 0:
        raise OrtfixError("--keep must be 0 or more")
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
