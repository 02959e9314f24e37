"""The manifest of an offline wheelhouse (`ortfix-wheelhouse.json`, written by `ortfix wheelhouse`) and the check
that whatever installs from such a folder makes: every wheel the installer takes from a folder holding a manifest
must be listed there with the same sha256. A wheel someone else put into the folder (a higher version of a planned
package, a file swapped for another) is refused, not installed.

The manifest is read back as untrusted input: a regular file (a link at its name is refused), of bounded size, with
exactly the fields and types written here. `scripts/bootstrap.py` (standard library only, so it cannot import this)
reads the same fields for ortfix's own install."""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterable
from functools import cache
from typing import TypedDict
from urllib.parse import unquote, urlparse

from ortfix.errors import OrtfixError
from ortfix.fields import BadField, exact_fields, want_bool, want_list, want_sha, want_str
from ortfix.i18n import N_, Msg

MANIFEST = "ortfix-wheelhouse.json"
MANIFEST_SCHEMA = "ortfix.wheelhouse-manifest/2"
OWN_REQUIREMENTS = "ortfix-requirements.txt"  # ortfix and its dependencies, pinned with their hashes (pip -r)
_MAX_BYTES = 16 << 20


@cache
def wheel_file() -> re.Pattern[str]:
    return re.compile(r"^([A-Za-z0-9_.]+)-([A-Za-z0-9_.+!]+)(-[A-Za-z0-9_.]+){2,3}\.whl$")


_TOP = ("schema", "ortfix_version", "platform", "python_version", "ortfix", "ortfix_missing", "files")
_FILE = ("file", "distribution", "version", "why", "sha256", "for_ortfix")


class ManifestFile(TypedDict):
    file: str
    distribution: str
    version: str
    why: str
    sha256: str
    for_ortfix: bool  # ortfix itself or one of its own dependencies (what `ortfix-requirements.txt` pins)


def sha256_file(path: str) -> str:
    import hashlib  # here: a check imports this module, hashes nothing, and hashlib costs 2-3 ms

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def link_folder(link: str) -> str | None:
    """The local folder a find-links entry names (a path or a file: URL); None for a remote URL."""
    if link.startswith("file:"):
        return unquote(urlparse(link).path)
    return None if "://" in link else link


def is_wheelhouse(folder: str) -> bool:
    """Whether `folder` holds something at the manifest's name (a link there counts: reading it is refused)."""
    return os.path.lexists(os.path.join(folder, MANIFEST))


def _read(path: str) -> bytes:
    if os.path.islink(path):
        raise OSError(Msg(N_("it is a link")))
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(
        os, "O_BINARY", 0) | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise OSError(Msg(N_("it is not a regular file")))
        data = f.read(_MAX_BYTES + 1)
    if len(data) > _MAX_BYTES:
        raise OSError(Msg(N_("it is larger than {size} MiB"), size=_MAX_BYTES >> 20))
    return data


def read_manifest(folder: str) -> list[ManifestFile] | None:
    """The files the manifest in `folder` lists; None when the folder holds none; OrtfixError when what is there is
    not a manifest this ortfix wrote."""
    path = os.path.join(folder, MANIFEST)
    if not os.path.lexists(path):
        return None
    try:
        doc = exact_fields(json.loads(_read(path)), _TOP, "the manifest")
        if doc["schema"] != MANIFEST_SCHEMA:
            raise BadField(Msg(N_("its schema is not {schema}"), schema=MANIFEST_SCHEMA))
        files: list[ManifestFile] = []
        for i, item in enumerate(want_list(doc, "files", limit=100_000)):
            where = f"file {i + 1}"
            entry = exact_fields(item, _FILE, where)
            name = want_str(entry, "file", limit=255, where=where)
            if not wheel_file().match(name):
                raise BadField(Msg(N_("{where} {name} is not a wheel's file name"), where=where, name=repr(name)))
            files.append({"file": name, "distribution": want_str(entry, "distribution", limit=255, where=where),
                          "version": want_str(entry, "version", limit=255, where=where),
                          "why": want_str(entry, "why", where=where), "sha256": want_sha(entry, "sha256", where=where),
                          "for_ortfix": want_bool(entry, "for_ortfix", where=where)})
    except (OSError, ValueError, RecursionError) as exc:
        said = exc.args[0] if exc.args and isinstance(exc.args[0], Msg) else None  # this module's own words
        why = said or (exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc))
        raise OrtfixError(Msg(N_("{file} is not a wheelhouse manifest ortfix can trust: {why}"), file=path, why=why),
                          hint=Msg(N_("make the wheelhouse again into an empty folder (ortfix wheelhouse -d DIR); "
                                      "nothing was installed from it"))) from exc
    return files


def check_wheelhouse_files(archives: Iterable[tuple[str, str | None]]) -> None:
    """Each (local archive path, its sha256 as the installer reports it, or None: hashed now) that lies in a folder
    holding a manifest must be listed there with that sha256; OrtfixError naming the first that is not."""
    listed: dict[str, dict[str, str] | None] = {}
    for path, reported in archives:
        folder = os.path.dirname(path)
        if folder not in listed:
            files = read_manifest(folder)
            listed[folder] = None if files is None else {f["file"]: f["sha256"] for f in files}
        hashes = listed[folder]
        if hashes is None:
            continue
        name = os.path.basename(path)
        if name not in hashes:
            raise OrtfixError(Msg(N_("{file} is not listed in the manifest of the wheelhouse {folder} ({manifest}): "
                                     "a file ortfix did not download was put there"), file=path, folder=folder,
                                  manifest=MANIFEST),
                              hint=Msg(N_("remove it, or make the wheelhouse again into an empty folder (ortfix "
                                          "wheelhouse -d DIR)")))
        try:
            digest = reported or sha256_file(path)
        except OSError as exc:
            raise OrtfixError(Msg(N_("cannot read {file}: {error}"), file=path,
                                  error=str(exc.strerror or exc))) from exc
        if digest != hashes[name]:
            raise OrtfixError(Msg(N_("{file} is not the file the wheelhouse's manifest lists (its sha256 is {sha}…, "
                                     "the manifest's {listed}…): it was changed after ortfix downloaded it"),
                                  file=path, sha=digest[:16], listed=hashes[name][:16]),
                              hint=Msg(N_("make the wheelhouse again into an empty folder (ortfix wheelhouse -d DIR)")))
