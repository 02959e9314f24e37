"""Exact pins for a plan's pip-install requirements, asked of the target's own pip: `pip install --only-binary=:all:
--dry-run --report FILE` (wheels only: a source distribution's build code never runs) with the user's pip
configuration, so `nvidia-cublas-cu12~=12.0` becomes `nvidia-cublas-cu12==12.4.5.8`
with the archive's sha256 where pip reports one.

`fresh=True` adds `--ignore-installed`: every distribution a fresh image needs (a requirements file, a Dockerfile);
without it, what pip would install into the target as it is now (the scripts, which run in the target)."""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ortfix import subproc
from ortfix.errors import OrtfixError
from ortfix.fields import requirement
from ortfix.i18n import N_, Msg
from ortfix.system.wheelmanifest import check_wheelhouse_files
from ortfix.transaction.actions.resolve import ONLY_BINARY, no_wheel_hint, pip_error_line, report_archives

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.+!_-]*$")


@dataclass(frozen=True)
class Pin:
    name: str
    version: str
    sha256: str | None  # of the archive pip chose, when its report gives one
    requested: bool  # named by the plan (else a dependency)

    @property
    def spec(self) -> str:
        return f"{self.name}=={self.version}"


def dry_run_argv(python: str, requirements: Sequence[str], report: Path, *, fresh: bool) -> list[str]:
    argv = [python, "-m", "pip", "install", *(requirement(r) for r in requirements), ONLY_BINARY, "--dry-run",
            "--report", str(report), "--quiet", "--disable-pip-version-check"]
    return [*argv, "--ignore-installed"] if fresh else argv


def parse_report(text: str) -> list[Pin]:
    """The pins of a pip `--report` document; OrtfixError when it is not one (it is pip's output: checked anyway,
    since names and versions end up in scripts)."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise OrtfixError(Msg(N_("pip's --report is not JSON: {error}"), error=str(exc))) from exc
    entries = doc.get("install") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        raise OrtfixError(Msg(N_("pip's --report has no install list")))
    pins = []
    for entry in entries:
        meta = entry.get("metadata") if isinstance(entry, dict) else None
        name = meta.get("name") if isinstance(meta, dict) else None
        version = meta.get("version") if isinstance(meta, dict) else None
        if not (isinstance(name, str) and _NAME.fullmatch(name)
                and isinstance(version, str) and _VERSION.fullmatch(version)):
            raise OrtfixError(Msg(N_("pip's --report names a distribution ortfix cannot pin")))
        info = entry.get("download_info")
        archive = info.get("archive_info") if isinstance(info, dict) else None
        hashes = archive.get("hashes") if isinstance(archive, dict) else None
        sha = hashes.get("sha256") if isinstance(hashes, dict) else None
        pins.append(Pin(name, version, sha if isinstance(sha, str) and _SHA256.fullmatch(sha) else None,
                        entry.get("requested") is True))
    return pins


def resolve_pins(python: str, requirements: Sequence[str], *, fresh: bool) -> list[Pin]:
    """The exact distributions pip would install for `requirements` (the plan's, in the plan's order first)."""
    if not requirements:
        return []
    with tempfile.TemporaryDirectory(prefix="ortfix-pins-") as tmp:
        report = Path(tmp) / "report.json"
        proc = subproc.run(dry_run_argv(python, requirements, report, fresh=fresh), target_python=python,
                          timeout=900)
        if proc.returncode != 0:
            why = pip_error_line(proc.stderr or proc.stdout)
            raise OrtfixError(Msg(N_("pip cannot resolve {requirements}: {why}"), requirements=" ".join(requirements),
                                  why=why),
                              hint=no_wheel_hint(why, Msg(N_("is the index reachable? check `pip config list`; "
                                                             "nothing was changed"))))
        check_wheelhouse_files(report_archives(report))  # the pins are what an install will take: never a planted file
        try:
            text = report.read_text(encoding="utf-8")
        except OSError as exc:
            raise OrtfixError(Msg(N_("pip wrote no --report: {error}"), error=str(exc.strerror or exc)),
                              hint=Msg(N_("the target's pip must be 22.2 or newer"))) from exc
    return parse_report(text)
