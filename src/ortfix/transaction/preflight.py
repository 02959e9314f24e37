"""Preflight: everything that can be known before the first change (write access, disk space, the installer's own
dry-run resolution, every handler's verify); the plan's actions expanded into journal steps. Nothing is changed
when it fails."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

from packaging.utils import canonicalize_name

from ortfix.errors import OrtfixError
from ortfix.i18n import N_, Msg
from ortfix.plan.kinds import ActionKind, PipInstallDetails
from ortfix.transaction import lock as envlock
from ortfix.transaction.actions import handler_for
from ortfix.transaction.actions.base import ORIGIN_PLAN, ORIGIN_REPLACED, TargetEnv, step_title, verified
from ortfix.transaction.actions.resolve import InstallerResolution, no_installer, resolve
from ortfix.transaction.consistency import installer_check
from ortfix.transaction.journal import Step, StepState

if TYPE_CHECKING:
    from ortfix.plan.model import Plan


_MARGIN = 32 << 20  # free space kept in hand on top of what the install needs


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
    resolution: InstallerResolution | None
    disk: DiskCheck | None
    problems: tuple[Msg, ...]  # English for --json (str), translated on the screen (.text())
    commands: tuple[tuple[str, ...], ...]  # what preflight itself ran (the installer's dry-run)
    descriptions: tuple[tuple[str | Msg, ...], ...] = ()  # per step: the exact commands and file changes
    # What the installer's own check (`pip check`) reports before the first change; None: not run (a dry run, no
    # package step, or no installer to run it)
    consistency: tuple[str, ...] | None = None

    def describe(self) -> list[tuple[Step, list[str | Msg]]]:
        return [(s, list(d)) for s, d in zip(self.steps, self.descriptions)]


def _planned(index: int, kind: str, summary: str, origin: str, details: Mapping[str, object],
             record: Mapping[str, object] | None = None) -> Step:
    return Step(index=index, kind=kind, summary=summary, origin=origin, details=dict(details),
                state=StepState.PLANNED, record=dict(record or {}), started=None, finished=None, error=None)


def _expand(env: TargetEnv, plan: Plan, workdir: Path
            ) -> tuple[list[Step], InstallerResolution | None, list[tuple[str, ...]]]:
    """Plan actions → steps; the install is preceded by the uninstall of every distribution pip would replace."""
    steps: list[Step] = []
    resolution: InstallerResolution | None = None
    commands: list[tuple[str, ...]] = []
    uninstalled = {canonicalize_name(str(a.details["distribution"])) for a in plan.actions
                   if a.kind == ActionKind.PIP_UNINSTALL}
    for action in plan.actions:
        handler_for(action.kind)  # an unknown kind stops here, before anything runs
        if action.kind != ActionKind.PIP_INSTALL:
            steps.append(_planned(len(steps) + 1, action.kind, str(action.summary), ORIGIN_PLAN, action.details))
            continue
        if action.details.get("installer") not in ("pip", "uv"):
            raise no_installer(env)
        details = cast(PipInstallDetails, action.details)  # a plan's own, or one plan_file checked field by field
        resolution = resolve(env, details, workdir, replaced_elsewhere=uninstalled)
        commands.append(resolution.argv)
        for r in resolution.install:
            old = r.replaces
            if old is None:
                continue
            steps.append(_planned(
                len(steps) + 1, ActionKind.PIP_UNINSTALL,
                f"move aside {old.name} {old.version} (pip would replace it with {r.version})",  # i18n: english
                ORIGIN_REPLACED,  # (a step's summary: journal data, like the plan's)
                {"distribution": old.name, "version": old.version, "location": old.location,
                 "dist_info": old.dist_info}))
        steps.append(_planned(len(steps) + 1, action.kind, str(action.summary), ORIGIN_PLAN, action.details,
                              {"resolution": resolution.to_json()}))
    return steps, resolution, commands


def _disk(env: TargetEnv, resolution: InstallerResolution | None) -> DiskCheck | None:
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
        from ortfix.compat.load import load_matrix  # deferred: only an apply from a remote index reads the matrix

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


def _probe_write(folder: str) -> Msg | None:
    """Create and delete a temp file: os.access is not enough (root, read-only mounts, ACLs)."""
    try:
        fd, name = tempfile.mkstemp(prefix=".ortfix-probe-", dir=folder)
        os.close(fd)
        os.unlink(name)
    except OSError as exc:
        return Msg(N_("cannot write in {folder}: {error}"), folder=folder, error=str(exc.strerror or exc))
    return None


def preflight(env: TargetEnv, plan: Plan, workdir: Path, *, dry_run: bool) -> Preflight:
    """Everything that can be known before the first change: refuse now rather than roll back later."""
    problems: list[Msg] = []
    for folder in dict.fromkeys((*env.site_dirs, env.scripts)):
        if not os.path.isdir(folder):
            continue
        if not os.access(folder, os.W_OK):
            problems.append(Msg(N_("{folder} is not writable"), folder=folder))
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
        problems += [Msg(N_("step {n} ({summary}): {problem}"), n=step.index, summary=step_title(step), problem=p)
                     for p in verified(env, step.kind, step.details)]
    disk = _disk(env, resolution)
    if disk is not None and disk.free_bytes < disk.needed_bytes:
        problems.append(Msg(N_("not enough free space in {where}: {free} free, {needed} needed{estimated}"),
                            where=disk.where, free=_mib(disk.free_bytes), needed=_mib(disk.needed_bytes),
                            estimated=Msg(N_(" (estimated from the sizes of measured wheels)")) if disk.estimated
                            else ""))
    tmp = tempfile.gettempdir()
    if disk is not None and disk.download_bytes and shutil.disk_usage(tmp).free < disk.download_bytes:
        problems.append(Msg(N_("not enough free space in {where} for the downloads ({size})"), where=tmp,
                            size=_mib(disk.download_bytes)))
    descriptions: list[tuple[str | Msg, ...]] = []
    for step in steps:
        try:
            descriptions.append(tuple(handler_for(step.kind).describe(env, step.details)))
        except OrtfixError as exc:
            descriptions.append((exc.one_line(),))
    packages = any(s.kind in (ActionKind.PIP_INSTALL, ActionKind.PIP_UNINSTALL) for s in steps)
    consistency = installer_check(env, plan.installer) if packages and not dry_run else None
    return Preflight(env, tuple(steps), resolution, disk, tuple(problems), tuple(commands), tuple(descriptions),
                     consistency)


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.0f} MiB"

