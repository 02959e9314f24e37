"""Which paths an install wrote, by the installer's own account (the RECORDs of the distributions it reports), and
which changes during it were someone else's."""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Mapping, Sequence
from typing import TypedDict

from packaging.utils import canonicalize_name

from ortfix.errors import OrtfixError
from ortfix.transaction.actions.base import TargetEnv
from ortfix.transaction.actions.dists import metadata_headers, own_rows, read_record
from ortfix.transaction.actions.files import FileRow, cached_bytecode, fingerprint, parent_dirs_of
from ortfix.transaction.actions.snapshot import SnapshotRow
from ortfix.transaction.journal import Step


class InstalledJson(TypedDict):
    """A distribution an install wrote, as the pip-install step's `installed` record field keeps it."""

    name: str
    version: str
    dist_info: str  # absolute


def attribute_install(env: TargetEnv, names: Sequence[str], diff: Mapping[str, list[str]],
                      after: Mapping[str, SnapshotRow]) -> tuple[dict[str, FileRow], list[str], list[InstalledJson]]:
    """What this install wrote, by the installer's own account: the RECORD rows of the distributions it reports
    it installed that lie in their own install locations (ownfiles.py), each with its hash (RECORD's, else computed
    now) and stat fingerprint; the folders it created for them; and the distributions."""
    created, changed = set(diff["created"]), set(diff["changed"])
    wanted = {canonicalize_name(n) for n in names}
    site_rels = set(env.site_rels())
    ours: dict[str, FileRow] = {}
    installed: list[InstalledJson] = []
    for rel in sorted(created):
        if not rel.endswith(".dist-info") or os.path.dirname(rel) not in site_rels:
            continue
        headers = metadata_headers(env.abs(rel + "/METADATA"))
        if canonicalize_name(headers.get("name", "")) not in wanted:
            continue
        installed.append({"name": headers.get("name", ""), "version": headers.get("version", ""),
                          "dist_info": env.abs(rel)})
        try:
            rows, _elsewhere = own_rows(env, read_record(env, os.path.dirname(rel), rel))
        except OrtfixError:
            continue
        # Only its own install locations: a row naming the interpreter or pyvenv.cfg is never removed on rollback.
        wrote = [row for row in rows if row.rel in created or row.rel in changed]
        stats = env.fs.stat_many(row.rel for row in wrote)
        unhashed = env.fs.sha256_many(row.rel for row in wrote if not row.sha256)
        for row in wrote:
            st = stats[row.rel]
            if st is None or stat.S_ISDIR(st.st_mode):
                continue
            ours[row.rel] = [row.sha256 or unhashed.get(row.rel), *fingerprint(st)]
    ours.update(_compiled(env, ours, created))
    parents = parent_dirs_of(ours)
    dirs = sorted(d for d in created if after.get(d, ["?"])[0] == "d" and d in parents)
    return ours, dirs, installed


def _compiled(env: TargetEnv, ours: Mapping[str, FileRow], created: set[str]) -> dict[str, FileRow]:
    """The bytecode the installer compiled for the modules it wrote, which its RECORD may not list (pip's does; uv's
    `--compile-bytecode`, `UV_COMPILE_BYTECODE=1`, writes `__pycache__/*.pyc` outside it): the install's own too."""
    compiled = [p for p in cached_bytecode(env.fs, ours) if p in created and p not in ours]
    stats, digests = env.fs.stat_many(compiled), env.fs.sha256_many(compiled)
    return {p: [digests[p], *fingerprint(st)] for p in compiled
            if (st := stats[p]) is not None and stat.S_ISREG(st.st_mode)}


def foreign_changes(diff: Mapping[str, list[str]], ours: Mapping[str, object], dirs: Sequence[str],
                    installer: str) -> list[str]:
    """Changes during the install that it did not make: another installer (or anyone) at work in the environment."""
    parents = set(dirs) | parent_dirs_of(ours)
    out = [r for r in diff["created"] if r not in ours and r not in parents
           and not (installer == "uv" and r == ".lock")]
    out += [r for r in diff["changed"] if r not in ours]
    out += list(diff["removed"])
    return sorted(out)


def claimed_by_others(env: TargetEnv, step: Step, diff: Mapping[str, list[str]]) -> set[str]:
    """Created paths that belong to a distribution this install did not ask for (another installer's, complete with
    its RECORD): a rollback of a cut-off install leaves them alone."""
    resolution, requirements = step.record.get("resolution", []), step.details.get("requirements", [])
    expected = {canonicalize_name(str(i.get("name", ""))) for i in resolution if isinstance(i, dict)
                } if isinstance(resolution, list) else set()
    expected |= {canonicalize_name(re.split(r"[<>=!~,; ]", str(r), maxsplit=1)[0])
                 for r in (requirements if isinstance(requirements, list) else [])}
    site_rels = set(env.site_rels())
    out: set[str] = set()
    for rel in diff["created"]:
        if not rel.endswith(".dist-info") or os.path.dirname(rel) not in site_rels:
            continue
        name = canonicalize_name(metadata_headers(env.abs(rel + "/METADATA")).get("name", ""))
        if not name or name in expected:
            continue
        with contextlib.suppress(OrtfixError):
            out |= {r.rel for r in read_record(env, os.path.dirname(rel), rel)}
        out.add(rel)
    return out

