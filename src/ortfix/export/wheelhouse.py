"""The offline wheelhouse: everything a plan needs on a machine without an index, downloaded with the user's pip
configuration into one folder: the plan's packages with their dependencies, and ortfix itself with its own (a wheel
built from the installed source when that is a checkout or an editable install, never the index's `ortfix`, which may
be another project's; else from the index when it has this version). Wheels only (`--only-binary=:all:`), for the
target's platform and Python, or the ones given (`--platform`, `--python-version`, CPython). A manifest
(`ortfix-wheelhouse.json`) says what each file is, why it is there, and its sha256."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TypedDict
from urllib.parse import unquote, urlparse

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from ortfix import __version__, subproc
from ortfix.errors import OrtfixError
from ortfix.fields import requirement

MANIFEST = "ortfix-wheelhouse.json"
MANIFEST_SCHEMA = "ortfix.wheelhouse-manifest/1"
_PLATFORM = re.compile(r"^[A-Za-z0-9_.]{1,100}$")
_PY_VERSION = re.compile(r"^3\.[0-9]{1,2}$")
# What pip's warnings say when it cannot reach an index (it then reports "no matching distribution").
_UNREACHABLE = ("NewConnectionError", "Failed to establish a new connection", "Connection refused",
                "Name or service not known", "Temporary failure in name resolution", "ProxyError",
                "ConnectTimeoutError", "Network is unreachable")


class ManifestFile(TypedDict):
    file: str
    distribution: str
    version: str
    why: str
    sha256: str


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
        raise OrtfixError(f"--platform {platform!r} is not a wheel platform tag", hint="e.g. manylinux_2_28_x86_64, "
                          "win_amd64")
    if python_version is not None and not _PY_VERSION.match(python_version):
        raise OrtfixError(f"--python-version {python_version!r} is not X.Y", hint="e.g. 3.11")
    return WheelhouseTarget(platform, python_version)


@dataclass(frozen=True)
class Wheelhouse:
    folder: str
    files: tuple[ManifestFile, ...]
    ortfix_source: str  # "index", "built from <path>", or why it is missing
    ortfix_missing: str | None  # why ortfix itself is not in the folder (None: it is)


def _pip_failure(what: str, proc_text: str, target: WheelhouseTarget) -> OrtfixError:
    lines = [ln.strip() for ln in proc_text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("ERROR:")]
    why = re.sub(r"^ERROR:\s*", "", errors[0] if errors else (lines[-1] if lines else "no output"))
    where = (f" for {target.platform or 'the target platform'}, Python {target.python_version or 'of the target'}"
             if target.platform or target.python_version else "")
    unreachable = next((ln for ln in lines if any(m in ln for m in _UNREACHABLE)), None)
    if unreachable is not None:
        m = re.search(r"Failed to establish a new connection: ([^'\"]+)", unreachable)
        said = m.group(1) if m else next(marker for marker in _UNREACHABLE if marker in unreachable)
        return OrtfixError(f"the package index is unreachable while downloading {what}: {said}",
                           hint="check your network and `pip config list` (index-url, proxy)")
    if "No matching distribution" in why or "Could not find a version" in why:
        return OrtfixError(f"no wheel of {what}{where}: {why}",
                           hint="check the name and version, --platform and --python-version; is the index "
                                "reachable (`pip config list`)?")
    return OrtfixError(f"pip cannot download {what}{where}: {why}",
                       hint="is the index reachable? check `pip config list` and your network")


def _download(python: str, requirements: Sequence[str], folder: Path, target: WheelhouseTarget, what: str) -> None:
    argv = [python, "-m", "pip", "download", *requirements, "--dest", str(folder), *target.pip_options(),
            "--disable-pip-version-check", "--quiet"]
    proc = subproc.run(argv, target_python=python, timeout=1800)
    if proc.returncode != 0:
        raise _pip_failure(what, proc.stderr or proc.stdout, target)


def writable_folder(folder: Path) -> Path:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise OrtfixError(f"cannot write to {folder}: {exc.strerror or exc}",
                          hint="choose a folder you can write (-d DIR)") from exc
    return folder


def ortfix_source() -> Path | None:
    """The source folder of the running ortfix when it is a checkout or an editable install (else None)."""
    with contextlib.suppress(metadata.PackageNotFoundError, OSError, ValueError, TypeError):
        text = metadata.distribution("ortfix").read_text("direct_url.json")
        doc = json.loads(text) if text else None
        url = doc.get("url") if isinstance(doc, dict) else None
        if isinstance(url, str) and url.startswith("file:"):
            path = Path(unquote(urlparse(url).path))
            if (path / "pyproject.toml").is_file():
                return path
    here = Path(__file__).resolve().parents[3]  # src/ortfix/export/wheelhouse.py → the checkout
    pyproject = here / "pyproject.toml"
    with contextlib.suppress(OSError):
        if re.search(r'^name = "ortfix"$', pyproject.read_text(encoding="utf-8"), re.M):
            return here
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


def _add_ortfix(python: str, folder: Path, target: WheelhouseTarget) -> tuple[str, str | None]:
    """(how ortfix got into the folder, why it did not or None). Run from a checkout or an editable install, the
    wheel is built from that source, never taken from the index: the index's `ortfix` may be another project's, and
    the wheelhouse must carry the ortfix that made the plan."""
    source = ortfix_source()
    if source is None:
        proc = subproc.run([python, "-m", "pip", "download", f"ortfix=={__version__}", "--dest", str(folder),
                            *target.pip_options(), "--disable-pip-version-check", "--quiet"], target_python=python,
                           timeout=1800)
        if proc.returncode == 0:
            return "index", None
        return "", (f"ortfix {__version__} is not on the index and is not installed from its source, so it cannot be "
                    "built here")
    built = subproc.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(folder),
                         "--disable-pip-version-check", "--quiet", str(source)], target_python=None,
                         timeout=1800)
    if built.returncode != 0:
        lines = [ln.strip() for ln in (built.stderr or built.stdout).splitlines() if ln.strip()]
        errors = [ln for ln in lines if ln.startswith("ERROR:")] or lines  # pip's closing note says nothing
        return "", f"ortfix's wheel could not be built from {source}: {errors[-1] if errors else 'no output'}"
    _download(python, _own_requirements(), folder, target, "ortfix's dependencies")
    return f"built from {source}", None


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _wheel_name(filename: str) -> tuple[str, str] | None:
    if not filename.endswith(".whl"):
        return None
    parts = filename[:-4].split("-")
    return (parts[0], parts[1]) if len(parts) >= 5 else None


def build_wheelhouse(python: str, requirements: Sequence[str], reasons: Sequence[str], folder: Path,
                     target: WheelhouseTarget) -> Wheelhouse:
    """Download the plan's `requirements` (the reasons they are there) and ortfix into `folder`; write the
    manifest."""
    writable_folder(folder)
    reqs = [requirement(r) for r in requirements]
    if reqs:
        _download(python, reqs, folder, target, " ".join(reqs))
    source, missing = _add_ortfix(python, folder, target)
    planned = {canonicalize_name(Requirement(r).name) for r in reqs}
    own = {canonicalize_name("ortfix"), *(canonicalize_name(Requirement(r).name) for r in _own_requirements())}
    why_plan = "; ".join(reasons) or "the plan installs it"
    files: list[ManifestFile] = []
    for path in sorted(folder.iterdir()):
        parsed = _wheel_name(path.name)
        if parsed is None or not path.is_file():
            continue
        name = canonicalize_name(parsed[0])
        why = (f"the plan: {why_plan}" if name in planned
               else "ortfix itself" if name == "ortfix"
               else "a dependency of ortfix" if name in own else "a dependency of the plan's packages")
        files.append({"file": path.name, "distribution": parsed[0], "version": parsed[1], "why": why,
                      "sha256": _sha256(path)})
    manifest = {"schema": MANIFEST_SCHEMA, "ortfix_version": __version__, "platform": target.platform,
                "python_version": target.python_version, "ortfix": source or None, "ortfix_missing": missing,
                "files": files}
    try:  # a new file renamed into place: a link planted at the manifest's name is replaced, never written through
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=folder, prefix=f".{MANIFEST}.",
                                         delete=False) as f:
            f.write(json.dumps(manifest, indent=2) + "\n")
        os.chmod(f.name, 0o644)
        os.replace(f.name, folder / MANIFEST)
    except OSError as exc:
        raise OrtfixError(f"cannot write {folder / MANIFEST}: {exc.strerror or exc}") from exc
    return Wheelhouse(str(folder), tuple(files), source, missing)
