"""The offline wheelhouse: everything a plan needs on a machine without an index, downloaded with the user's pip
configuration into one folder: the plan's packages with their dependencies, and ortfix itself with its own. Wheels
only (`--only-binary=:all:`), for the target's platform and Python, or the ones given (`--platform`,
`--python-version`, CPython).

The folder must be new or empty: a wheelhouse holds only what this run downloaded. Everything is downloaded into a
private folder inside it first, then moved in; the manifest (`ortfix-wheelhouse.json`, `system/wheelmanifest.py`)
lists each of those files, why it is there and its sha256, and `ortfix-requirements.txt` pins ortfix and its
dependencies with their hashes. Whatever installs from the folder checks the manifest (apply, the installer), so a
wheel someone else puts there later is refused.

ortfix itself: a wheel built from the running checkout (an editable install runs from its checkout too), refused
unless it has the running version; never from the source a plain install was once made from (`direct_url.json`),
which may hold anything today. Run from an installed copy, `ortfix==<version>` from the index if it has it (which
may be another project's name there); else one line says how to bring ortfix."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from ortfix import __version__, subproc
from ortfix.errors import OrtfixError
from ortfix.export.pipprogress import DownloadProgress, folder_tally, run_download, tally_line
from ortfix.fields import requirement
from ortfix.i18n import N_, Joined, Msg
from ortfix.outfile import write_output
from ortfix.system.wheelmanifest import (
    MANIFEST,
    MANIFEST_SCHEMA,
    OWN_REQUIREMENTS,
    ManifestFile,
    sha256_file,
    wheel_file,
)
from ortfix.transaction.actions.resolve import tensorrt_wheel_hint

_PLATFORM = re.compile(r"^[A-Za-z0-9_.]{1,100}$")
_PY_VERSION = re.compile(r"^3\.[0-9]{1,2}$")
# What pip's warnings say when it cannot reach an index (it then reports "no matching distribution").
_UNREACHABLE = ("NewConnectionError", "Failed to establish a new connection", "Connection refused",
                "Name or service not known", "Temporary failure in name resolution", "ProxyError",  # i18n: english
                "ConnectTimeoutError", "Network is unreachable")


@dataclass(frozen=True)
class WheelhouseTarget:
    """The platform the wheels are for: None for the target interpreter's own."""

    platform: str | None = None
    python_version: str | None = None

    def pip_options(self) -> list[str]:
        out = ["--only-binary=:all:"]
        if self.platform:
            out += ["--platform", self.platform]
        if self.python_version:
            out += ["--python-version", self.python_version]
        if self.platform or self.python_version:
            out += ["--implementation", "cp"]
        return out


def validate_target(platform: str | None, python_version: str | None) -> WheelhouseTarget:
    if platform is not None and not _PLATFORM.match(platform):
        raise OrtfixError(Msg(N_("--platform {value} is not a wheel platform tag"), value=repr(platform)),
                          hint=Msg(N_("e.g. {example}"), example="manylinux_2_28_x86_64, win_amd64"))
    if python_version is not None and not _PY_VERSION.match(python_version):
        raise OrtfixError(Msg(N_("--python-version {value} is not X.Y"), value=repr(python_version)),
                          hint=Msg(N_("e.g. {example}"), example="3.11"))
    return WheelhouseTarget(platform, python_version)


@dataclass(frozen=True)
class Wheelhouse:
    folder: str
    files: tuple[ManifestFile, ...]
    ortfix_source: str  # "index", "built from <path>", or why it is missing
    ortfix_missing: Msg | None  # why ortfix itself is not in the folder (None: it is)


def _pip_failure(what: str, proc_text: str, target: WheelhouseTarget) -> OrtfixError:
    lines = [ln.strip() for ln in proc_text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("ERROR:")]
    why = re.sub(r"^ERROR:\s*", "", errors[0] if errors else (lines[-1] if lines else "no output"))
    where: str | Msg = (Msg(N_(" for {platform}, Python {version}"),
                            platform=target.platform or Msg(N_("the target platform")),
                            version=target.python_version or Msg(N_("of the target")))
                        if target.platform or target.python_version else "")
    unreachable = next((ln for ln in lines if any(m in ln for m in _UNREACHABLE)), None)
    if unreachable is not None:
        m = re.search(r"Failed to establish a new connection: ([^'\"]+)", unreachable)
        said = m.group(1) if m else next(marker for marker in _UNREACHABLE if marker in unreachable)
        return OrtfixError(Msg(N_("the package index is unreachable while downloading {what}: {said}"), what=what,
                               said=said),
                           hint=Msg(N_("check your network and `pip config list` (index-url, proxy)")))
    if "No matching distribution" in why or "Could not find a version" in why:
        return OrtfixError(Msg(N_("no wheel of {what}{where}: {why}"), what=what, where=where, why=why),
                           hint=tensorrt_wheel_hint(why) or Msg(N_("check the name and version, --platform and "
                                                                   "--python-version; is the index reachable (`pip "
                                                                   "config list`)?")))
    return OrtfixError(Msg(N_("pip cannot download {what}{where}: {why}"), what=what, where=where, why=why),
                       hint=Msg(N_("is the index reachable? check `pip config list` and your network")))


def _download(python: str, requirements: Sequence[str], folder: Path, target: WheelhouseTarget, what: str,
              progress: DownloadProgress | None) -> None:
    argv = [python, "-m", "pip", "download", *requirements, "--dest", str(folder), *target.pip_options(),
            "--disable-pip-version-check"]
    proc = run_download(argv, python, progress)
    if proc.returncode != 0:
        raise _pip_failure(what, proc.stderr or proc.stdout, target)


def new_wheelhouse_folder(folder: Path) -> Path:
    """`folder`, made when missing; refused unless it is empty and writable."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with os.scandir(folder) as entries:
            found = next((e.name for e in entries), None)
        if found is not None:
            raise OrtfixError(Msg(N_("{folder} is not empty (it holds {found}): a wheelhouse starts in an empty "
                                     "folder, so that it holds only what ortfix downloaded"), folder=str(folder),
                                  found=repr(found)),
                              hint=Msg(N_("choose a new or empty folder (-d DIR); to make a wheelhouse again, remove "
                                          "the old one first")))
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise OrtfixError(Msg(N_("cannot write to {folder}: {error}"), folder=str(folder),
                              error=str(exc.strerror or exc)),
                          hint=Msg(N_("choose a folder you can write (-d DIR)"))) from exc
    return folder


def ortfix_source() -> Path | None:
    """The checkout the running ortfix is imported from (`<root>/src/ortfix`, with ortfix's pyproject.toml at root:
    a checkout, or the source of an editable install); None when it runs from an installed copy."""
    package = Path(__file__).resolve().parents[1]  # <root>/src/ortfix/export/wheelhouse.py → <root>/src/ortfix
    root = package.parents[1]
    if package.parent.name != "src":
        return None
    with contextlib.suppress(OSError):
        if re.search(r'^name = "ortfix"$', (root / "pyproject.toml").read_text(encoding="utf-8"), re.M):
            return root
    return None


def _own_requirements() -> list[str]:
    """ortfix's own runtime dependencies (extras left out), as its metadata names them."""
    out = []
    with contextlib.suppress(metadata.PackageNotFoundError):
        for text in metadata.requires("ortfix") or []:
            try:
                req = Requirement(text)
            except InvalidRequirement:
                continue
            if req.marker is None or "extra" not in str(req.marker):
                out.append(str(req))
    return out


def _pip_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("ERROR:")] or lines  # pip's closing note says nothing
    return errors[-1] if errors else "no output"


def _add_ortfix(python: str, folder: Path, target: WheelhouseTarget,
                progress: DownloadProgress | None) -> tuple[str, Msg | None]:
    """(how ortfix got into the folder, why it did not or None). Run from a checkout, the wheel is built from it and
    must have the running version; never taken from the index then (another project's `ortfix` may be there)."""
    source = ortfix_source()
    if source is None:
        proc = run_download([python, "-m", "pip", "download", f"ortfix=={__version__}", "--dest", str(folder),
                             *target.pip_options(), "--disable-pip-version-check"], python, progress)
        if proc.returncode == 0:
            return "index", None
        return "", Msg(N_("ortfix {version} runs from an installed copy, not from its checkout, and the index has no "
                          "ortfix {version}: run `ortfix wheelhouse` from an ortfix checkout or editable install (pip "
                          "install -e SRC) to carry it, or install ortfix on the offline machine from a wheel you "
                          "bring"), version=__version__)
    built = subproc.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(folder),
                         "--disable-pip-version-check", "--quiet", str(source)], target_python=None,
                         timeout=1800)
    if built.returncode != 0:
        return "", Msg(N_("ortfix's wheel could not be built from {source}: {why}"), source=str(source),
                       why=_pip_line(built.stderr or built.stdout))
    versions = {m.group(2) for p in folder.iterdir() if (m := wheel_file().match(p.name)) and m.group(1) == "ortfix"}
    if versions != {__version__}:
        for wheel in folder.iterdir():
            wheel.unlink()
        return "", Msg(N_("{source} now builds ortfix {versions}, not the running {version}: reinstall it "
                          "({command}) and run this again"), source=str(source),
                       versions=Joined(N_(", "), sorted(versions)) if versions else Msg(N_("(no wheel)")),
                       version=__version__,
                       command=f"pip install -e {source}")
    _download(python, _own_requirements(), folder, target, "ortfix's dependencies", progress)
    return f"built from {source}", None


def _entries(folder: Path, why: Callable[[str], str], for_ortfix: bool) -> dict[str, tuple[ManifestFile, Path]]:
    out: dict[str, tuple[ManifestFile, Path]] = {}
    for path in sorted(folder.iterdir()):
        m = wheel_file().match(path.name)
        if m is None or not path.is_file() or path.is_symlink():
            raise OrtfixError(Msg(N_("pip left {name} in the download folder, which is not a wheel ortfix can list"),
                                  name=repr(path.name)),
                              hint=Msg(N_("nothing was moved into the wheelhouse")))
        out[path.name] = ({"file": path.name, "distribution": m.group(1), "version": m.group(2),
                           "why": why(canonicalize_name(m.group(1))), "sha256": sha256_file(str(path)),
                           "for_ortfix": for_ortfix}, path)
    return out


def _merge(plan: dict[str, tuple[ManifestFile, Path]],
           own: dict[str, tuple[ManifestFile, Path]]) -> list[tuple[ManifestFile, Path]]:
    """One entry per file; a file both downloads brought is the plan's and ortfix's (it must be the same file)."""
    merged = dict(plan)
    for name, (entry, path) in own.items():
        if name in merged:
            if merged[name][0]["sha256"] != entry["sha256"]:
                raise OrtfixError(Msg(N_("two different files named {name} were downloaded (for the plan and for "
                                         "ortfix)"), name=name),
                                  hint=Msg(N_("check your find-links folders and indexes for a changed copy")))
            merged[name][0]["for_ortfix"] = True
        else:
            merged[name] = (entry, path)
    return [merged[name] for name in sorted(merged)]


def own_requirements_text(files: Sequence[ManifestFile]) -> str:
    """`ortfix-requirements.txt`: ortfix and its dependencies pinned with their hashes (pip's hash-checking mode)."""
    hashes: dict[str, list[str]] = {}
    for f in files:
        if f["for_ortfix"]:
            hashes.setdefault(f"{f['distribution']}=={f['version']}", []).append(f["sha256"])
    lines = ["# ortfix and its dependencies in this wheelhouse, with their sha256 "  # i18n: english (a file)
             "(from ortfix-wheelhouse.json):",
             f"#   pip install --no-index --find-links DIR --require-hashes -r DIR/{OWN_REQUIREMENTS}"]
    lines += [" ".join([pin, *(f"--hash=sha256:{h}" for h in shas)]) for pin, shas in sorted(hashes.items())]
    return "\n".join(lines) + "\n"


def build_wheelhouse(python: str, requirements: Sequence[str], reasons: Sequence[str], folder: Path,
                     target: WheelhouseTarget, progress: DownloadProgress | None = None) -> Wheelhouse:
    """Download the plan's `requirements` (the reasons they are there) and ortfix into the empty `folder`; write the
    manifest (and the pinned requirements of ortfix itself). `progress`: where the download's progress is shown."""
    new_wheelhouse_folder(folder)
    reqs = [requirement(r) for r in requirements]
    staging = Path(tempfile.mkdtemp(prefix=".ortfix-download-", dir=folder))  # private (0700) until moved in
    try:
        (staging / "plan").mkdir()
        (staging / "own").mkdir()
        if reqs:
            _download(python, reqs, staging / "plan", target, " ".join(reqs), progress)
        source, missing = _add_ortfix(python, staging / "own", target, progress)
        if progress is not None:
            tallies = [folder_tally(staging / "plan"), folder_tally(staging / "own")]
            progress.line(tally_line(sum(n for n, _ in tallies), sum(b for _, b in tallies)))
        planned = {canonicalize_name(Requirement(r).name) for r in reqs}
        why_plan = f"the plan: {'; '.join(reasons) or 'the plan installs it'}"  # i18n: english (the manifest's)
        plan = _entries(staging / "plan", lambda n: why_plan if n in planned else "a dependency of the plan's "
                        "packages", False)  # i18n: english
        own = _entries(staging / "own", lambda n: "ortfix itself" if n == "ortfix" else "a dependency of ortfix", True)
        moved = _merge(plan, own)
        for entry, path in moved:
            os.replace(path, folder / entry["file"])
        files = tuple(entry for entry, _ in moved)
        manifest = {"schema": MANIFEST_SCHEMA, "ortfix_version": __version__, "platform": target.platform,
                    "python_version": target.python_version, "ortfix": source or None,
                    "ortfix_missing": missing and str(missing),
                    "files": list(files)}
        if missing is None:
            write_output(folder / OWN_REQUIREMENTS, own_requirements_text(files))
        write_output(folder / MANIFEST, json.dumps(manifest, indent=2) + "\n")
    except OSError as exc:
        raise OrtfixError(Msg(N_("cannot move the downloads into {folder}: {error}"), folder=str(folder),
                              error=str(exc.strerror or exc))) from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return Wheelhouse(str(folder), files, source, missing)
