"""The pip-uninstall handler: move a distribution's files aside into the step's stash (same filesystem, rename),
like pip's own stash; undone by moving them back."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, TypedDict

from ortfix.errors import OrtfixError
from ortfix.fields import BadField, distribution_name, want_dict, want_int, want_list, want_sha, want_str
from ortfix.i18n import N_, Msg
from ortfix.plan.kinds import ActionKind, PipUninstallDetails
from ortfix.plan.titles import pip_uninstall_title
from ortfix.system.confine import ConfinementError, check_rel
from ortfix.transaction.actions.base import ORIGIN_REPLACED, Handler, StepContext, TargetEnv, problem, test_crash
from ortfix.transaction.actions.dists import record_paths
from ortfix.transaction.actions.files import (
    dir_meta,
    fingerprint,
    make_dir,
    parent_dirs,
    remove_empty_dirs,
    written_again,
)
from ortfix.transaction.journal import Step
from ortfix.transaction.undo_notes import Cause, UndoNote


class StashSidecars(TypedDict):
    files: str  # sha256 of the `files` sidecar


class StashSidecar(TypedDict):
    """The `files` sidecar: what was moved into the stash, and the folders it came from."""

    files: list[list[str | int]]  # [rel path, sha256, inode, size, mtime_ns] of each file moved
    dirs: dict[str, list[int]]  # rel path → [mode, uid, gid] of each folder the files were in


class PipUninstallRecord(TypedDict):
    sidecars: StashSidecars
    files: int  # how many files were moved aside
    bytes: int  # their total size


def _left_in_place(env: TargetEnv, distribution: str, rel: str) -> Msg:
    return Msg(N_("  leaves {path} in place: {distribution}'s RECORD lists it, but it is not in the distribution's "
                  "install locations (never the interpreter's or the environment's own files)"),
               path=env.abs(rel), distribution=distribution)


class PipUninstall(Handler[PipUninstallDetails, PipUninstallRecord]):
    kind = ActionKind.PIP_UNINSTALL
    details_keys = frozenset({"distribution", "version", "location", "dist_info"})
    record_keys = started_keys = frozenset({"sidecars", "files", "bytes"})

    def check_details(self, env: TargetEnv, details: Mapping[str, object]) -> None:
        distribution_name(want_str(details, "distribution", limit=200))
        want_str(details, "version", limit=200)
        self._dist(env, details)

    def _dist(self, env: TargetEnv, details: Mapping[str, object]) -> tuple[str, str]:
        """(location, .dist-info) as rel paths: the .dist-info directly in one of the environment's site folders."""
        location = env.rel(want_str(details, "location"))
        dist_info = env.rel(want_str(details, "dist_info"))
        if location not in env.site_rels():
            raise BadField(Msg(N_("{path} is not a site-packages folder of this environment"),
                               path=str(details["location"])))
        if os.path.dirname(dist_info) != location or not dist_info.endswith((".dist-info", ".egg-info")):
            raise BadField(Msg(N_("{path} is not a distribution's metadata folder in {location}"),
                               path=str(details["dist_info"]), location=str(details["location"])))
        return location, dist_info

    def check_record(self, env: TargetEnv, step: Step) -> None:
        sidecars = want_dict(step.record, "sidecars")
        if set(sidecars) != {"files"}:
            raise BadField(Msg(N_("field 'sidecars' must name exactly the 'files' sidecar")))
        want_sha(sidecars, "files")
        want_int(step.record, "files")
        want_int(step.record, "bytes")

    def title(self, step: Step) -> Msg:
        distribution = distribution_name(want_str(step.details, "distribution", limit=200))
        return pip_uninstall_title(distribution, want_str(step.details, "version", limit=200),
                                   replaced=step.origin == ORIGIN_REPLACED)

    def verify(self, env: TargetEnv, details: PipUninstallDetails) -> list[str | Msg]:
        location, dist_info = self._dist(env, details)
        name = f"{details['distribution']} {details['version']}"
        if not env.fs.is_dir(dist_info):
            return [Msg(N_("{name} is no longer installed ({path} is gone)"), name=name, path=env.abs(dist_info))]
        if not dist_info.endswith(".dist-info"):
            return [Msg(N_("{name} was installed without a RECORD ({folder}): uninstall it with pip"), name=name,
                        folder=os.path.basename(dist_info))]
        try:
            paths = record_paths(env, location, dist_info).paths
        except ConfinementError as exc:
            return [Msg(N_("{name} lists files outside the environment or behind a link: {reason}; uninstall it with "
                           "pip yourself"), name=name, reason=exc.message_msg)]
        except OrtfixError as exc:
            return [problem(exc)]
        problems: list[str | Msg] = []
        for folder in sorted({os.path.dirname(p) for p in paths}):
            if not os.access(env.abs(folder), os.W_OK):
                problems.append(Msg(N_("cannot move files out of {folder}: not writable"), folder=env.abs(folder)))
                break
        state = env.abs(".ortfix") if os.path.isdir(env.abs(".ortfix")) else env.prefix
        if os.stat(env.abs(location)).st_dev != os.stat(state).st_dev:
            problems.append(Msg(N_("{location} is on another filesystem than {prefix}/.ortfix: files cannot be moved "
                                   "aside by rename"), location=env.abs(location), prefix=env.prefix))
        return problems

    def describe(self, env: TargetEnv, details: PipUninstallDetails) -> list[str | Msg]:
        location, dist_info = self._dist(env, details)
        try:
            files = record_paths(env, location, dist_info)
        except OrtfixError as exc:
            return [problem(exc)]
        lines: list[str | Msg] = [
            Msg(N_("move aside {n} files of {distribution} {version} (its RECORD, its .dist-info and cached bytecode) "
                   "into the transaction's stash (rename)"), n=len(files.paths),
                distribution=details["distribution"], version=details["version"])]
        lines += [f"  - {env.abs(p)}" for p in files.paths]
        return lines + [_left_in_place(env, details["distribution"], rel) for rel in files.not_own]

    def execute(self, env: TargetEnv, step: Step, ctx: StepContext) -> PipUninstallRecord:
        fs = env.fs
        location, dist_info = self._dist(env, step.details)
        found = record_paths(env, location, dist_info)
        for rel in found.not_own:
            ctx.echo(_left_in_place(env, self.typed_details(step.details)["distribution"], rel).text())
        paths = found.paths
        candidates: set[str] = set()
        for p in paths:
            candidates.update(parent_dirs(p, location))
        dirs = {d: dir_meta(fs, d) for d in sorted(candidates) if fs.is_dir(d)}
        files: list[list[str | int]] = []
        size = 0
        stats, digests = fs.stat_many(paths), fs.sha256_many(paths)
        for rel in paths:
            st, digest = stats[rel], digests[rel]
            if st is None or digest is None:
                continue
            files.append([rel, digest, *fingerprint(st)])  # a rename keeps inode, size and mtime
            size += st.st_size
        sidecar: StashSidecar = {"files": files, "dirs": dirs}
        record: PipUninstallRecord = {"sidecars": {"files": ctx.write_sidecar("files", sidecar)}, "files": len(files),
                                      "bytes": size}
        ctx.commit(record)
        moved = 0

        def midway(_src: str, _st: os.stat_result) -> None:
            nonlocal moved
            moved += 1
            if ctx.crash_midway and moved > len(files) // 2:
                test_crash()

        kept = fs.move_many(((str(f[0]), f"{ctx.stash_rel}/{f[0]}") for f in files), replace=False, veto=midway)
        if kept:
            raise OrtfixError(Msg(N_("cannot stash {path}: {copy} exists"), path=env.abs(kept[0].src),
                                  copy=env.abs(kept[0].dst)))
        remove_empty_dirs(fs, dirs)
        fs.fsync_dir(location)
        return record

    def _files(self, env: TargetEnv, step: Step, ctx: StepContext
               ) -> tuple[list[tuple[str, str, list[int]]], dict[str, Any]]:
        sha = self.typed_record(step)["sidecars"]["files"]
        data = ctx.read_sidecar("files", sha)
        if not isinstance(data, dict) or set(data) != {"files", "dirs"}:
            raise OrtfixError(Msg(N_("the files sidecar of step {index} is malformed"), index=step.index))
        files: list[tuple[str, str, list[int]]] = []
        try:
            for item in want_list(data, "files"):
                if (not isinstance(item, list) or len(item) != 5 or not all(isinstance(x, str) for x in item[:2])
                        or not all(isinstance(x, int) for x in item[2:])):
                    raise BadField(Msg(N_("a files entry is not [path, sha256, inode, size, mtime]")))
                files.append((check_rel(item[0]), item[1], item[2:]))
            dirs = want_dict(data, "dirs")
            for rel, meta in dirs.items():
                check_rel(rel)
                if not (isinstance(meta, list) and len(meta) == 3 and all(isinstance(x, int) for x in meta)):
                    raise BadField(Msg(N_("a dirs entry is not [mode, uid, gid]")))
        except BadField as exc:
            raise OrtfixError(Msg(N_("the files sidecar of step {index} is malformed: {reason}"), index=step.index,
                                  reason=problem(exc))) from exc
        for rel, _digest, _fp in files:
            if rel == ".ortfix" or rel.startswith(".ortfix/"):
                raise OrtfixError(Msg(N_("the files sidecar of step {index} names ortfix's own folder"),
                                      index=step.index))
        return files, dirs

    def check_undo(self, env: TargetEnv, step: Step, ctx: StepContext) -> list[str | Msg]:
        if not step.record.get("sidecars"):
            return []
        files, _dirs = self._files(env, step, ctx)
        problems: list[str | Msg] = []
        stashed = env.fs.stat_many(f"{ctx.stash_rel}/{rel}" for rel, _d, _f in files)
        in_place = env.fs.stat_many(rel for rel, _d, _f in files)
        for rel, digest, fp in files:
            copy = f"{ctx.stash_rel}/{rel}"
            st = stashed[copy]
            if st is not None:
                if fingerprint(st) != fp and env.fs.sha256(copy) != digest:
                    problems.append(Msg(N_("{path} was changed since it was stashed"), path=env.abs(copy)))
                continue
            here = in_place[rel]  # never moved, or already moved back: the very same file (a rename keeps it)
            if here is None or fingerprint(here) != fp:
                problems.append(Msg(N_("{path} is missing from the stash"), path=env.abs(copy)))
        return problems

    def reverse(self, env: TargetEnv, step: Step, ctx: StepContext) -> list[UndoNote]:
        if not step.record.get("sidecars"):
            return []  # the journal has no record: nothing was moved
        fs = env.fs
        files, dirs = self._files(env, step, ctx)
        for rel in sorted(dirs, key=lambda r: (r.count("/"), r)):
            if not fs.is_dir(rel):
                make_dir(fs, rel, dirs[rel])
        # never moved, or already moved back: no source, skipped; in the way: kept in the stash, said
        kept = fs.move_many(((f"{ctx.stash_rel}/{rel}", rel) for rel, _d, _f in files), replace=False)
        warnings = [UndoNote(Cause.PUT_BACK, env.abs(rel), "") for rel in dirs if fs.is_dir(rel)]
        warnings += written_again(env, kept, {rel: digest for rel, digest, _f in files})
        remove_empty_dirs(fs, {d for rel, _d, _f in files for d in parent_dirs(f"{ctx.stash_rel}/{rel}", ctx.step_rel)})
        return warnings

    def changes(self, step: Step) -> list[str]:
        planned = self.typed_details(step.details)
        return [f"- {planned['distribution']} {planned['version']}"]
