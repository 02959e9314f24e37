"""Installed distributions: the `.dist-info` folders in site-packages, their METADATA headers and RECORD rows
(what uninstalling a distribution removes)."""

from __future__ import annotations

import base64
import contextlib
import csv
import io
import os
from collections.abc import Iterable
from dataclasses import dataclass

from packaging.utils import canonicalize_name

from ortfix.errors import OrtfixError
from ortfix.transaction.actions.base import TargetEnv
from ortfix.transaction.actions.files import cached_bytecode, walk_rel
from ortfix.transaction.ownfiles import is_own_file

_RECORD_LIMIT = 64 << 20


@dataclass(frozen=True)
class InstalledDist:
    name: str
    version: str
    location: str
    dist_info: str

    @property
    def normalized(self) -> str:
        return canonicalize_name(self.name)


def metadata_headers(path: str) -> dict[str, str]:
    out: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.strip():
                    break
                key, sep, value = line.partition(":")
                if sep and key.lower() in ("name", "version") and key.lower() not in out:
                    out[key.lower()] = value.strip()
    except OSError:
        pass
    return out


def installed_distributions(dirs: Iterable[str]) -> dict[str, InstalledDist]:
    """normalized name → the .dist-info distribution installed in `dirs` (the first one found wins, as for pip)."""
    out: dict[str, InstalledDist] = {}
    for location in dict.fromkeys(dirs):
        try:
            names = sorted(os.listdir(location))
        except OSError:
            continue
        for entry in names:
            if not entry.endswith(".dist-info"):
                continue
            dist_info = os.path.join(location, entry)
            headers = metadata_headers(os.path.join(dist_info, "METADATA"))
            name = headers.get("name") or entry[: -len(".dist-info")].rsplit("-", 1)[0]
            dist = InstalledDist(name, headers.get("version", ""), location, dist_info)
            out.setdefault(dist.normalized, dist)
    return out


@dataclass(frozen=True)
class RecordRow:
    rel: str  # below the prefix
    sha256: str | None  # hex, from RECORD's urlsafe-base64 `sha256=` (None when RECORD gives no hash)


def read_record(env: TargetEnv, location_rel: str, dist_info_rel: str) -> list[RecordRow]:
    """The rows of a distribution's RECORD as paths below the prefix. A row leading outside the environment raises
    ConfinementError: ortfix never moves a file it cannot confine."""
    rel = f"{dist_info_rel}/RECORD"
    try:
        data, _st = env.fs.read_bytes(rel, limit=_RECORD_LIMIT)
    except OSError as exc:
        raise OrtfixError(f"cannot read {env.abs(rel)}: {exc.strerror or exc}",
                          hint="a distribution without a RECORD cannot be uninstalled exactly") from exc
    rows = []
    for row in csv.reader(io.StringIO(data.decode("utf-8", "replace"), newline="")):
        if not row or not row[0]:
            continue
        path = os.path.normpath(os.path.join(env.abs(location_rel), row[0]))
        digest = None
        if len(row) > 1 and row[1].startswith("sha256="):
            with contextlib.suppress(ValueError):
                raw = row[1][len("sha256="):]
                digest = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)).hex()
        rows.append(RecordRow(env.rel(path), digest))
    return rows


def own_rows(env: TargetEnv, rows: Iterable[RecordRow]) -> tuple[list[RecordRow], list[RecordRow]]:
    """(the rows in the distribution's own install locations, the others): only the first may be stashed or removed
    (ownfiles.py: never the interpreter, `pyvenv.cfg` or the prefix's top-level files)."""
    sites, scripts = env.site_rels(), env.rel(env.scripts)
    own: list[RecordRow] = []
    other: list[RecordRow] = []
    for row in rows:
        (own if is_own_file(row.rel, sites, scripts) else other).append(row)
    return own, other


@dataclass(frozen=True)
class DistFiles:
    paths: list[str]  # what uninstalling the distribution moves aside (rel paths of those that exist)
    not_own: list[str]  # RECORD rows outside its install locations (rel paths of those that exist): left in place


def record_paths(env: TargetEnv, location_rel: str, dist_info_rel: str) -> DistFiles:
    """What uninstalling a distribution removes: its RECORD rows in its own install locations, every file in its
    .dist-info, and the bytecode the interpreter cached for its modules; and what its RECORD names elsewhere."""
    own, other = own_rows(env, read_record(env, location_rel, dist_info_rel))
    paths: dict[str, None] = {r.rel: None for r in own}
    paths.update(dict.fromkeys(walk_rel(env.fs, dist_info_rel)))
    paths.update(dict.fromkeys(cached_bytecode(env.fs, list(paths))))
    present = env.fs.stat_many([*paths, *(r.rel for r in other)])
    return DistFiles([p for p in paths if present[p] is not None],
                     list(dict.fromkeys(r.rel for r in other if present[r.rel] is not None)))

