"""What an install will do, asked of the installer itself before anything changes: the install command line,
the dry-run resolution (`pip install --dry-run --report`, or uv's dry run) and the wheels' sizes.

Wheels only, in the dry run and in the install (pip `--only-binary=:all:`, uv `--only-binary :all:`): resolving a
source distribution runs its build code (setup.py, its build backend), which a command that changes nothing must
never do, and the install must be what the dry run showed. A requirement that exists only as source is one line
asking the user to build its wheel."""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict
from urllib.parse import unquote, urlparse

from packaging.utils import canonicalize_name

from ortfix import subproc
from ortfix.compat.addons import tensorrt_libs_dists
from ortfix.errors import OrtfixError
from ortfix.fields import requirement
from ortfix.i18n import N_, Msg
from ortfix.plan.kinds import PipInstallDetails
from ortfix.system.pipconfig import read_pip_config
from ortfix.system.uvargs import UvOptions, redact, translate, uv_environ
from ortfix.system.wheelmanifest import check_wheelhouse_files
from ortfix.transaction.actions.base import TargetEnv
from ortfix.transaction.actions.dists import InstalledDist, installed_distributions
from ortfix.transaction.actions.snapshot import take_snapshot

INSTALLERS = ("pip", "uv")
ONLY_BINARY = "--only-binary=:all:"
_NO_MATCH = ("No matching distribution", "Could not find a version", "no version of",  # i18n: english (pip's words)
             "not found in the package registry", "No solution found")  # i18n: english (uv's words)


def uv_options(env: TargetEnv) -> UvOptions:
    """The user's pip configuration for this environment, read now, as uv options (system/uvargs.py)."""
    options = translate(read_pip_config(env.prefix, os.environ))
    if not isinstance(options, UvOptions):
        raise OrtfixError(Msg(N_("the plan installs with uv, but {reason}"), reason=options),
                          hint=Msg(N_("make a new plan (--installer auto then uses pip); nothing was changed")))
    return options


def no_installer(env: TargetEnv) -> OrtfixError:
    """Why nothing can install into an environment without pip: no uv at all, or the uv found and why its options
    cannot say what the pip configuration says."""
    hint = Msg(N_("install pip into it first: {python} -m ensurepip; nothing was changed"), python=env.python)
    if not env.uv:
        return OrtfixError(Msg(N_("the target environment has no pip (and no uv was found)")), hint=hint)
    try:
        why: UvOptions | str | Msg = translate(read_pip_config(env.prefix, os.environ))
    except OrtfixError as exc:
        why = Msg(N_("the pip configuration could not be read ({reason})"), reason=exc.message_msg)
    reason = why if isinstance(why, (str, Msg)) else Msg(N_("the plan was made when uv could not be used"))
    return OrtfixError(Msg(N_("the target environment has no pip, and uv ({uv}) is not used: {reason}"), uv=env.uv,
                           reason=reason), hint=hint)


def install_argv(env: TargetEnv, details: PipInstallDetails, *, dry_run_report: str | None = None,
                 report: str | None = None) -> list[str]:
    """The install command, built here from typed values: the target's own pip (or the uv found now, with the user's
    pip configuration translated into its options) with the user's pip configuration; requirements are plain names
    with version specifiers. The uv command may hold credentials from an index URL: print or record `shown(argv)`."""
    installer = details.get("installer")
    requirements = [requirement(r) for r in details.get("requirements", [])]
    if installer == "uv":
        if not env.uv:
            raise OrtfixError(Msg(N_("the plan installs with uv, but no uv is on PATH now")),
                              hint=Msg(N_("install uv, or pip into the environment; nothing was changed")))
        argv = [env.uv, "pip", "install", "--python", env.python, *uv_options(env).options, "--only-binary", ":all:"]
        if env.break_system_packages:
            argv.append("--break-system-packages")
        if dry_run_report is not None:
            argv.append("--dry-run")
        return [*argv, *requirements]
    if installer != "pip":
        raise no_installer(env)
    refuse_redirect(env)
    # Options after the requirements (none of which can start with "-"): the command reads as the plan shows it.
    argv = [env.python, "-m", "pip", "install", *requirements, ONLY_BINARY]
    if dry_run_report is not None:
        argv += ["--dry-run", "--report", dry_run_report, "--quiet"]
    if report is not None:
        argv += ["--report", report]
    # --no-user: a `user = true` in the pip configuration would send the install to the user's site-packages
    argv += ["--disable-pip-version-check", "--no-user"]
    if env.break_system_packages:
        argv.append("--break-system-packages")
    return argv


def install_description(env: TargetEnv, details: PipInstallDetails) -> Msg:
    """What `apply --dry-run` says the install runs (OrtfixError where it cannot run)."""
    command = " ".join(shown(install_argv(env, details)))
    if details.get("installer") == "uv":
        return Msg(N_("run (uv, with your pip configuration): {command}"), command=command)
    return Msg(N_("run (the environment's own pip, with your pip configuration): {command}"), command=command)


def refuse_redirect(env: TargetEnv) -> None:
    """OrtfixError when the pip configuration `pip install` would read now sends the install outside the environment
    (`target`, `prefix`, `root`): pip would write everything there, and no rollback would know."""
    why = read_pip_config(env.prefix, os.environ).redirect()
    if why is not None:
        raise OrtfixError(why, hint=Msg(N_("remove that setting: ortfix installs into the environment only; nothing "
                                           "was changed")))


def install_environ(env: TargetEnv, details: PipInstallDetails) -> dict[str, str] | None:
    """The installer's environment: for uv, without uv's own variables that change the meaning and with the
    translated ones (a CA bundle, a timeout); None (ortfix's usual child environment) for pip."""
    if details.get("installer") != "uv":
        return None
    return subproc.child_env(uv_environ(os.environ, uv_options(env)))


def shown(argv: Iterable[str]) -> list[str]:
    """A command as it may be printed and journaled: credentials in URLs redacted."""
    return [redact(a) for a in argv]


@dataclass(frozen=True)
class Resolved:
    name: str
    version: str
    url: str | None
    download_bytes: int | None  # the archive's size, when it is a local file
    unpacked_bytes: int | None  # sum of the archive's file sizes, when it is a local wheel
    replaces: InstalledDist | None  # the installed distribution (another version) pip would replace


class ResolvedJson(TypedDict):
    """A `Resolved` as the journal keeps it (the pip-install step's `resolution` record field)."""

    name: str
    version: str
    url: str | None
    download_bytes: int | None
    unpacked_bytes: int | None
    replaces: str | None  # "<name> <version>" of the distribution it replaces


@dataclass(frozen=True)
class InstallerResolution:
    installer: str
    argv: tuple[str, ...]  # the dry-run command that was run
    install: tuple[Resolved, ...]
    notes: tuple[str, ...] = field(default=())

    @property
    def replaced(self) -> list[InstalledDist]:
        return [r.replaces for r in self.install if r.replaces is not None]

    def to_json(self) -> list[ResolvedJson]:
        return [{"name": r.name, "version": r.version, "url": r.url, "download_bytes": r.download_bytes,
                 "unpacked_bytes": r.unpacked_bytes,
                 "replaces": f"{r.replaces.name} {r.replaces.version}" if r.replaces else None} for r in self.install]


def local_file(url: str | None) -> str | None:
    if not url or not url.startswith("file:"):
        return None
    return unquote(urlparse(url).path)


def _wheel_sizes(path: str | None) -> tuple[int | None, int | None]:
    if path is None:
        return None, None
    try:
        size = os.path.getsize(path)
        if not path.endswith(".whl"):
            return size, None
        with zipfile.ZipFile(path) as zf:
            return size, sum(i.file_size for i in zf.infolist())
    except (OSError, zipfile.BadZipFile):
        return None, None


def pip_error_line(text: str) -> str:
    """The line of pip's (or uv's) output that says what went wrong, without its `ERROR:` tag."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith(("ERROR:", "error:", "\u00d7", "\u2570\u2500>"))]
    pick = errors[0] if errors else (lines[-1] if lines else "no output")
    return re.sub(r"^(ERROR|error):\s*", "", pick)


def no_wheel_hint(message: str, fallback: str | Msg) -> str | Msg:
    """What to do when the installer found nothing: that it looked at wheels only, and how to supply a package that
    is only available as source (tensorrt-cuNN-libs: its wheels are on NVIDIA's own index); `fallback` for any other
    failure."""
    trt = tensorrt_wheel_hint(message)
    if trt is not None:
        return trt
    if any(m in message for m in _NO_MATCH):
        return Msg(N_("is the index reachable (`pip config list`)? ortfix takes wheels only, so that no package's "
                      "build code runs: a package available only as source needs its wheel built by you (pip wheel "
                      "NAME -w DIR, then DIR in your find-links); nothing was changed"))
    return fallback


def tensorrt_wheel_hint(message: str) -> Msg | None:
    """Where no wheel of tensorrt-cuNN-libs was found: the default index has only its placeholder source package,
    whose build fetches the wheel from NVIDIA's own index (and fails where that is unreachable)."""
    trt = tensorrt_libs_dists().search(message.lower())
    if trt is None or not any(m in message for m in _NO_MATCH):
        return None
    return Msg(N_("{distribution} is on the default index only as a placeholder source package that fetches its "
                  "wheel from NVIDIA's own package index when built: add NVIDIA's index (NVIDIA's TensorRT "
                  "installation guide names it) as an extra index in your pip configuration, or leave out --with "
                  "tensorrt; nothing was changed"), distribution=trt.group(0))


def resolve(env: TargetEnv, details: PipInstallDetails, workdir: Path, *,
            replaced_elsewhere: Iterable[str] = ()) -> InstallerResolution:
    """What the install will do, asked of the installer itself: `pip install --dry-run --report FILE --quiet ...`
    (pip >= 22.2) with the user's pip configuration. Failing here (index unreachable, nothing matches) is a
    preflight failure: nothing has been changed yet."""
    installer = str(details.get("installer"))
    installed = installed_distributions(env.site_dirs)
    skip = {canonicalize_name(n) for n in replaced_elsewhere}
    wanted = " ".join(str(r) for r in details.get("requirements", []))
    if installer == "uv":
        dry = install_argv(env, details, dry_run_report="")
        top_before = set(take_snapshot((), env.prefix))
        proc = subproc.run(dry, target_python=env.python, timeout=900, env=install_environ(env, details))
        # Preflight changes nothing: uv's dry run still takes the environment's lock file (<prefix>/.lock, empty).
        for rel in set(take_snapshot((), env.prefix)) - top_before:
            st = env.fs.lstat(rel)
            if st is not None and stat.S_ISREG(st.st_mode) and st.st_size == 0:
                with contextlib.suppress(OSError):
                    env.fs.unlink(rel)
        if proc.returncode != 0:
            message = redact(pip_error_line(proc.stderr))
            raise OrtfixError(Msg(N_("uv cannot resolve {requirements}: {message}"), requirements=wanted,
                                  message=message),
                              hint=no_wheel_hint(proc.stderr, Msg(N_("is the index reachable? check your uv/pip "
                                                                     "configuration"))))
        items = []
        for name, version in uv_installed(proc.stderr + proc.stdout):
            old = installed.get(canonicalize_name(name))
            replaces = old if old and canonicalize_name(name) not in skip and _in_env(env, old) else None
            items.append(Resolved(name, version, None, None, None, replaces))
        return InstallerResolution("uv", tuple(shown(dry)), tuple(items), ("uv reports no download sizes",))
    report = workdir / "pip-report.json"
    # --disable-pip-version-check: the dry-run's own output is not shown, so its self-check would only cost time.
    dry = install_argv(env, details, dry_run_report=str(report))
    proc = subproc.run(dry, target_python=env.python, timeout=900)
    if proc.returncode != 0:
        message = pip_error_line(proc.stderr or proc.stdout)
        if "no such option: --report" in proc.stderr or "no such option: --dry-run" in proc.stderr:
            raise OrtfixError(Msg(N_("the target's pip is older than 22.2 (no --dry-run --report)")),
                              hint=Msg(N_("upgrade it first: {command}"),
                                       command=f"{env.python} -m pip install -U pip"))
        if "externally-managed-environment" in proc.stderr:
            raise OrtfixError(Msg(N_("{python} is an externally managed system Python: pip refuses to change it"),
                                  python=env.python),
                              hint=Msg(N_("use a venv (python3 -m venv), or pass --system to change it anyway")))
        raise OrtfixError(Msg(N_("pip cannot get {requirements} from the configured index or wheelhouse: {message}"),
                              requirements=wanted, message=message),
                          hint=no_wheel_hint(message, Msg(N_("is the index reachable? check `pip config list` and "
                                                             "your network; nothing was changed"))))
    check_wheelhouse_files(report_archives(report))  # a wheel planted in an ortfix wheelhouse is refused here
    items = []
    for name, version, url in report_installs(report):
        download, unpacked = _wheel_sizes(local_file(url))
        old = installed.get(canonicalize_name(name))
        replaces = old if old and canonicalize_name(name) not in skip and _in_env(env, old) else None
        items.append(Resolved(name, version, url, download, unpacked, replaces))
    return InstallerResolution("pip", tuple(dry), tuple(items))


def uv_installed(text: str) -> list[tuple[str, str]]:
    out = []
    for line in text.splitlines():
        m = re.match(r"^\s*\+\s+([A-Za-z0-9._-]+)==(\S+)", line)
        if m:
            out.append((m.group(1), m.group(2)))
    return out


def _report_entries(report: Path) -> list[dict[str, object]]:
    try:
        doc = json.loads(report.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise OrtfixError(f"pip's --report was unreadable: {exc}") from exc
    entries = doc.get("install", []) if isinstance(doc, dict) else []
    return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []


def report_archives(report: Path) -> list[tuple[str, str | None]]:
    """(path, sha256 as pip reports it or None) of every local archive pip's --report says it installs from: pip
    hashes a local file as it takes it (`archive_info`)."""
    out = []
    for entry in _report_entries(report):
        info = entry.get("download_info")
        info = info if isinstance(info, dict) else {}
        url = info.get("url")
        path = local_file(url if isinstance(url, str) else None)
        if path is None:
            continue
        archive = info.get("archive_info")
        hashes = archive.get("hashes") if isinstance(archive, dict) else None
        sha = hashes.get("sha256") if isinstance(hashes, dict) else None
        out.append((path, sha if isinstance(sha, str) and re.fullmatch(r"[0-9a-f]{64}", sha) else None))
    return out


def report_installs(report: Path) -> list[tuple[str, str, str | None]]:
    """(name, version, download URL) of every distribution in pip's --report."""
    out = []
    for entry in _report_entries(report):
        meta = entry.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        info = entry.get("download_info") or {}
        url = info.get("url") if isinstance(info, dict) else None
        out.append((str(meta.get("name", "")), str(meta.get("version", "")), url if isinstance(url, str) else None))
    return out


def _in_env(env: TargetEnv, dist: InstalledDist) -> bool:
    # pip replaces only what is inside the environment it installs into (it leaves a system copy alone).
    return any(os.path.realpath(dist.location) == os.path.realpath(d) for d in env.site_dirs)

