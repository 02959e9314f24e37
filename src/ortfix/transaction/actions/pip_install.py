"""The pip-install handler: save aside what the install may overwrite, run the installer, record exactly what it
wrote (attribution.py); undone by moving that aside and putting the saved files back. Also where a rollback
puts what an install created (`discard_rel`)."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict

from ortfix import subproc
from ortfix.errors import OrtfixError
from ortfix.fields import (
    BadField,
    requirement,
    want_bool,
    want_dict,
    want_int,
    want_list,
    want_sha,
    want_str,
    want_str_list,
)
from ortfix.i18n import N_, Msg, tr
from ortfix.plan.kinds import ActionKind, PipInstallDetails
from ortfix.plan.titles import pip_install_title
from ortfix.system.confine import check_rel
from ortfix.system.wheelmanifest import check_wheelhouse_files
from ortfix.transaction.actions.attribution import InstalledJson, attribute_install, claimed_by_others, foreign_changes
from ortfix.transaction.actions.base import Handler, StepContext, TargetEnv, problem
from ortfix.transaction.actions.files import (
    PYC_CACHE,
    FileRow,
    cached_bytecode,
    fingerprint,
    remove_empty_dirs,
    written_again,
)
from ortfix.transaction.actions.installer_run import run_installer
from ortfix.transaction.actions.overwrite import overwrite_candidates
from ortfix.transaction.actions.resolve import (
    INSTALLERS,
    ResolvedJson,
    install_argv,
    install_description,
    install_environ,
    report_archives,
    report_installs,
    shown,
    uv_installed,
)
from ortfix.transaction.actions.snapshot import diff_snapshots, take_snapshot
from ortfix.transaction.journal import Step
from ortfix.transaction.ownfiles import DATA_FOLDERS
from ortfix.transaction.store import TransactionStore
from ortfix.transaction.undo_notes import Cause, UndoNote


def discard_rel(store: TransactionStore, tx_id: str, index: int) -> str:
    """Where a rollback moves what an install created; deleted right after, or by `history prune`."""
    return store.step_rel(tx_id, index) + "/discard"


def _fingerprint_list(item: object, n: int) -> list[object]:
    if not isinstance(item, list) or len(item) != n:
        raise BadField("a file entry has the wrong shape")
    return item


class PipInstallSidecars(TypedDict, total=False):
    snapshot: str  # sha256 of the snapshot taken before the installer ran
    created: str  # sha256 of what it wrote (`CreatedSidecar`), once it has finished


class CreatedSidecar(TypedDict):
    files: dict[str, FileRow]  # rel path → [sha256, inode, size, mtime_ns]
    dirs: list[str]  # the folders it created for them


class PipInstallRecord(TypedDict, total=False):
    """Written in stages: `resolution` by preflight; roots, sidecars, protected and argv before the installer starts;
    pid while it runs; the rest once it has finished. Every field is therefore optional to a reader."""

    resolution: list[ResolvedJson]
    roots: list[str]  # rel paths of the folders snapshotted
    sidecars: PipInstallSidecars
    protected: list[list[Any]]  # [rel path, sha256, inode, size, mtime_ns] of each file saved aside (a JSON row)
    argv: list[str]
    pid: int
    installed: list[InstalledJson]
    created: int  # how many files it wrote
    overwritten: list[str]  # rel paths it overwrote that were not saved aside
    foreign: list[str]  # rel paths changed meanwhile by someone else (the first 20)


class PipInstall(Handler[PipInstallDetails, PipInstallRecord]):
    kind = ActionKind.PIP_INSTALL
    details_keys = frozenset({"requirements", "installer", "reinstall"})
    record_keys = frozenset({"resolution", "roots", "sidecars", "protected", "argv", "pid", "installed", "created",
                             "overwritten", "foreign"})
    started_keys = frozenset({"roots", "sidecars", "protected", "argv"})

    def check_details(self, env: TargetEnv, details: Mapping[str, object]) -> None:
        reqs = want_list(details, "requirements", limit=100)
        if not reqs:
            raise BadField(Msg(N_("field 'requirements' is empty")))
        for r in reqs:
            requirement(r)
        if details.get("installer") not in (*INSTALLERS, None):  # None: the environment has no installer
            raise BadField(Msg(N_("field 'installer' must be one of {installers} or null"),
                               installers=", ".join(INSTALLERS)))
        want_bool(details, "reinstall")

    def check_record(self, env: TargetEnv, step: Step) -> None:
        for rel in want_list(step.record, "roots", limit=16):
            check_rel(rel if isinstance(rel, str) else "")
        sidecars = want_dict(step.record, "sidecars")
        if not set(sidecars) <= {"snapshot", "created"}:
            raise BadField(Msg(N_("field 'sidecars' names an unknown sidecar")))
        for key in sidecars:
            want_sha(sidecars, key)
        for item in want_list(step.record, "protected"):
            item = _fingerprint_list(item, 5)
            check_rel(item[0] if isinstance(item[0], str) else "")
        want_str_list(step.record, "argv", items=1000)
        if "pid" in step.record:
            want_int(step.record, "pid")
        if "created" in step.record:
            want_int(step.record, "created")
        for key in ("overwritten", "foreign"):
            if key in step.record:
                for rel in want_str_list(step.record, key, items=1_000_000):
                    check_rel(rel)
        for key in ("installed", "resolution"):
            for item in want_list(step.record, key) if key in step.record else []:
                if not isinstance(item, dict):
                    raise BadField(Msg(N_("field {key} is not a list of objects"), key=repr(key)))
        for item in want_list(step.record, "installed") if "installed" in step.record else []:
            for field_name in ("name", "version", "dist_info"):
                want_str(item, field_name, where="installed")

    def title(self, step: Step) -> Msg:
        return pip_install_title([requirement(r) for r in want_str_list(step.details, "requirements", items=100)])

    def verify(self, env: TargetEnv, details: PipInstallDetails) -> list[str | Msg]:
        problems: list[str | Msg] = [Msg(N_("{folder} is not writable"), folder=d) for d in (*env.site_dirs,
                                     env.scripts) if os.path.isdir(d) and not os.access(d, os.W_OK)]
        try:
            install_argv(env, details)
        except OrtfixError as exc:
            problems.append(problem(exc))
        return problems

    def describe(self, env: TargetEnv, details: PipInstallDetails) -> list[str | Msg]:
        try:
            return [install_description(env, details)]
        except OrtfixError as exc:
            return [problem(exc)]

    def execute(self, env: TargetEnv, step: Step, ctx: StepContext) -> PipInstallRecord:
        fs = env.fs
        planned = self.typed_details(step.details)
        installer = str(planned["installer"])
        # Every root, existing or not: an earlier step may have removed the scripts folder with the last script in it
        # (uninstalling the CPU package on Windows empties Scripts\), and what the install puts there is its own.
        # A wheel's `.data/data/` tree goes to the prefix itself: the folders it uses (sympy's man page in share/,
        # headers in include/, configuration in etc/) are roots too, or a rollback would leave what it wrote there.
        data = (os.path.join(env.prefix, d) for d in DATA_FOLDERS)
        roots = list(dict.fromkeys((*env.site_dirs, env.scripts, *data)))
        before = take_snapshot(roots, env.prefix)
        protect_rel = ctx.step_rel + "/protect"
        protected: list[list[Any]] = []
        candidates = overwrite_candidates(env, self.typed_record(step).get("resolution", []),
                                          planned.get("requirements", []), before)
        for rel, digest in fs.sha256_many(candidates).items():
            if digest is None:
                continue
            try:
                fs.link(rel, f"{protect_rel}/{rel}", make_parents=True)
            except OSError:
                fs.copy(rel, f"{protect_rel}/{rel}", make_parents=True)
            protected.append([rel, digest])
        copies = fs.stat_many(f"{protect_rel}/{p[0]}" for p in protected)
        protected = [[rel, digest, *fingerprint(st)] for rel, digest in protected
                     if (st := copies[f"{protect_rel}/{rel}"]) is not None]
        report_dir = tempfile.mkdtemp(prefix="ortfix-pip-report-")  # private (0700), outside the environment
        try:
            report = Path(report_dir) / "report.json"
            argv = install_argv(env, planned, report=str(report) if installer == "pip" else None)
            record: PipInstallRecord = {
                **self.typed_record(step),
                "roots": [env.rel(r) for r in roots],
                "sidecars": {"snapshot": ctx.write_sidecar("snapshot", before)},
                "protected": protected,
                "argv": shown(argv),  # credentials in an index URL are not journaled
            }
            ctx.commit(record)
            lines: list[str] = []
            rc = self._run(argv, env.python, install_environ(env, planned), record, step, ctx, roots, lines)
            if rc != 0:
                raise OrtfixError(Msg(N_("{installer} install failed (exit {rc})"), installer=installer, rc=rc),
                                  hint=Msg(N_("its own output above says why")))
            if installer == "pip":  # what pip took from an ortfix wheelhouse, by the hash pip took it with
                check_wheelhouse_files(report_archives(report))
            names = ([n for n, _v, _u in report_installs(report)] if installer == "pip"
                     else [n for n, _v in uv_installed("\n".join(lines))])
        finally:
            shutil.rmtree(report_dir, ignore_errors=True)
        after = take_snapshot(roots, env.prefix)
        diff = diff_snapshots(before, after)
        ours, dirs, installed = attribute_install(env, names, diff, after)
        lock = env.fs.lstat(".lock") if installer == "uv" and ".lock" in diff["created"] else None
        if lock is not None:  # uv's own lock file, made by this install: the transaction's too
            ours[".lock"] = [env.fs.sha256(".lock"), *fingerprint(lock)]
        foreign = foreign_changes(diff, ours, dirs, installer)
        protected_rels = {p[0] for p in protected}
        keep = set(diff["changed"]) | set(diff["removed"])
        for rel in protected_rels - keep:
            with contextlib.suppress(OSError, OrtfixError):
                fs.unlink(f"{protect_rel}/{rel}")
        created: CreatedSidecar = {"files": ours, "dirs": dirs}
        record.update({
            "sidecars": {**record["sidecars"], "created": ctx.write_sidecar("created", created)},
            "protected": [p for p in protected if p[0] in keep],
            "installed": installed,
            "created": len(ours),
            "overwritten": [r for r in diff["changed"] if r in ours and r not in protected_rels],
            "foreign": foreign[:20],
        })
        record.pop("pid", None)
        if foreign:
            ctx.commit(record)
            raise OrtfixError(
                Msg(N_("the environment changed while {installer} was installing: {n} path(s) this install did not "
                       "write, e.g. {path} (another installer running at the same time?)"), installer=installer,
                    n=len(foreign), path=env.abs(foreign[0])),
                hint=Msg(N_("everything this transaction did is undone; what the other installer did stays")))
        return record

    def _run(self, argv: Sequence[str], python: str, environ: Mapping[str, str] | None, record: PipInstallRecord,
             step: Step, ctx: StepContext, roots: Sequence[str], lines: list[str]) -> int:
        installer = str(self.typed_details(step.details)["installer"])
        ctx.echo(tr("installing with {installer}: {command}", installer=installer, command=" ".join(shown(argv))))

        def started(pid: int) -> None:
            record["pid"] = pid
            ctx.commit(record)

        return run_installer(argv, python, environ, ctx, roots, lines, started)

    def _created(self, step: Step, ctx: StepContext) -> tuple[dict[str, FileRow], list[str]]:
        record = self.typed_record(step)
        data = ctx.read_sidecar("created", record["sidecars"]["created"])
        try:
            if not isinstance(data, dict) or set(data) != {"files", "dirs"}:
                raise BadField("not {files, dirs}")  # i18n: english (names the fields)
            files = want_dict(data, "files")
            for rel, item in files.items():
                check_rel(rel)
                _fingerprint_list(item, 4)
            dirs = [check_rel(d) for d in want_list(data, "dirs") if isinstance(d, str)]
        except BadField as exc:
            raise OrtfixError(Msg(N_("the created sidecar of step {index} is malformed: {reason}"), index=step.index,
                                  reason=problem(exc))) from exc
        return files, dirs

    def check_undo(self, env: TargetEnv, step: Step, ctx: StepContext) -> list[str | Msg]:
        record = self.typed_record(step)
        if not record.get("sidecars", {}).get("snapshot"):
            return []
        if record["sidecars"].get("created"):
            self._created(step, ctx)
        problems: list[str | Msg] = []
        protect_rel = ctx.step_rel + "/protect"
        protected = record.get("protected", [])
        copies = env.fs.stat_many(f"{protect_rel}/{p[0]}" for p in protected)
        in_place = env.fs.stat_many(p[0] for p in protected)
        for rel, digest, *fp in protected:
            copy = f"{protect_rel}/{rel}"
            st = copies[copy]
            if st is not None:
                if fingerprint(st) != fp and env.fs.sha256(copy) != digest:
                    problems.append(Msg(N_("{path} was changed since it was saved"), path=env.abs(copy)))
            else:  # saved aside by hard link: put back, it is the very same file (or it was never replaced)
                here = in_place[rel]
                if here is None or (fingerprint(here) != fp and env.fs.sha256(rel) != digest):
                    problems.append(Msg(N_("{copy} (the earlier {path}) is missing from the stash"),
                                        copy=env.abs(copy), path=env.abs(rel)))
        return problems

    def reverse(self, env: TargetEnv, step: Step, ctx: StepContext) -> list[UndoNote]:
        record = self.typed_record(step)
        sidecars = record.get("sidecars", {})
        if not sidecars.get("snapshot"):
            return []  # never started: pip did not run
        pid = record.get("pid")
        if isinstance(pid, int) and subproc.installer_alive(pid, env.python):
            raise OrtfixError(Msg(N_("the installer the interrupted apply started (pid {pid}) is still running"),
                                  pid=pid),
                              hint=Msg(N_("wait for it to end (or kill {pid}), then run `ortfix rollback` again"),
                                       pid=pid))
        fs = env.fs
        discard = discard_rel(ctx.store, ctx.tx_id, ctx.index)
        warnings: list[UndoNote] = []
        diff: dict[str, list[str]] | None = None
        if sidecars.get("created"):
            files, dirs = self._created(step, ctx)

            def changed(rel: str, st: os.stat_result) -> str | None:
                # Only the very file the install wrote, untouched since: anything else (edited, or written again by
                # a later installer, even with the same bytes) is someone else's now.
                if rel in files and (stat.S_ISDIR(st.st_mode) or fingerprint(st) != files[rel][1:]):
                    return "changed"  # the note is said below
                return None

            later = [p for p in cached_bytecode(fs, files) if p not in files]  # a later run cached it
            moves = ((rel, f"{discard}/{rel}") for rel in [*sorted(files), *later])
            warnings += [UndoNote(Cause.CHANGED_LATER, env.abs(k.src),
                                  Msg(N_("{path} was changed after the install; left in place"), path=env.abs(k.src)))
                         for k in fs.move_many(moves, veto=changed) if k.why]
            for d in sorted(dirs, key=lambda p: (-p.count("/"), p)):
                fs.rmdir(f"{d}/{PYC_CACHE}")  # emptied above (bytecode a later run cached for the install's files)
                if fs.is_dir(d) and not fs.rmdir(d):
                    others = sorted(fs.listdir(d))
                    warnings.append(UndoNote(Cause.FOLDER_IN_USE, env.abs(d), Msg(
                        N_("{folder} holds files this transaction did not install ({files}); kept"), folder=env.abs(d),
                        files=f"{', '.join(others[:3])}{', …' if len(others) > 3 else ''}")))
        else:  # cut off while pip ran: judge by the snapshot taken before it started
            before = ctx.read_sidecar("snapshot", sidecars["snapshot"])
            if not isinstance(before, dict):
                raise OrtfixError(Msg(N_("the snapshot sidecar of step {index} is malformed"), index=step.index))
            roots = [env.abs(check_rel(r)) for r in record.get("roots", [])]
            diff = diff_snapshots(before, take_snapshot(roots, env.prefix))
            claimed = claimed_by_others(env, step, diff)
            created = [r for r in diff["created"] if r not in claimed]
            folders = [r for r, st in fs.stat_many(created).items() if st is not None and stat.S_ISDIR(st.st_mode)]
            fs.move_many((rel, f"{discard}/{rel}") for rel in sorted(set(created) - set(folders)))
            remove_empty_dirs(fs, folders)
            for rel in sorted(claimed)[:1]:
                warnings.append(UndoNote(Cause.OTHER_INSTALL, env.abs(rel), Msg(
                    N_("{path} belongs to a distribution another installer wrote meanwhile; kept"), path=env.abs(rel))))
        protect_rel = ctx.step_rel + "/protect"
        restore = ((f"{protect_rel}/{p[0]}", p[0]) for p in record.get("protected", []))
        kept = fs.move_many(restore, replace=False)  # a copy gone was put back already
        warnings += written_again(env, kept, {p[0]: p[1] for p in record.get("protected", [])})
        overwritten = record.get("overwritten")
        if overwritten is None and diff is not None:
            saved = {p[0] for p in record.get("protected", [])}
            overwritten = [r for r in diff.get("changed", []) if r not in saved]
        for rel in overwritten or []:
            warnings.append(UndoNote(Cause.NOT_RESTORED, env.abs(rel), Msg(
                N_("{path} was overwritten by the install and its earlier content was not saved"), path=env.abs(rel))))
        if diff is not None:
            saved = {p[0] for p in record.get("protected", [])}
            for rel in diff.get("removed", []):
                if not fs.exists(rel) and rel not in saved:
                    warnings.append(UndoNote(Cause.NOT_RESTORED, env.abs(rel), Msg(
                        N_("{path} was removed by the install and could not be restored"), path=env.abs(rel))))
        return warnings

    def changes(self, step: Step) -> list[str]:
        record = self.typed_record(step)
        planned = self.typed_details(step.details)
        installed = record.get("installed")
        if installed:
            return [f"+ {d.get('name')} {d.get('version')}" for d in installed if isinstance(d, dict)]
        return [f"+ {r}" for r in planned.get("requirements", [])]

