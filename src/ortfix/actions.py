"""What each kind of plan action does to the environment, and how it is undone exactly.

Every kind has a handler with the same contract (after conda's PathAction):

- `verify(env, details)`: every reason it cannot run here, without changing anything (all steps are verified before
  the first one executes);
- `describe(env, details)`: the exact commands and file changes, for `apply --dry-run`;
- `execute(env, step, ctx)`: first `ctx.commit(record)` (the journal then holds everything needed to undo the step),
  then the change;
- `reverse(env, step, ctx)`: undo, judged from what is on disk now, so it is idempotent and also undoes a step that
  was cut off half-way (Ctrl-C, kill -9, power loss). Returns warnings for what could not be restored exactly.

`HANDLERS` maps a kind to its handler; a new kind (a Windows user-level PATH entry, say) is one more class and one
more `register()` call. Nothing here imports click or prints: output goes through the context's callbacks.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import json
import os
import re
import shutil
import stat
import threading
import time
import zipfile
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import unquote, urlparse

from packaging.utils import canonicalize_name

from ortfix import subproc
from ortfix.errors import OrtfixError
from ortfix.journal import Step, StepState, TransactionStore, fsync_dir, write_fsynced
from ortfix.kinds import PIP_INSTALL, PIP_UNINSTALL, SYMLINK, WRITE_FILE

ORIGIN_PLAN = "plan"
ORIGIN_REPLACED = "replaced-by-pip"


@dataclass(frozen=True)
class TargetEnv:
    """The paths of the target environment that actions touch (from the probe; stored in the journal)."""

    python: str
    prefix: str
    purelib: str
    platlib: str
    scripts: str
    env_kind: str

    @property
    def site_dirs(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((self.purelib, self.platlib)))

    def inside(self, path: str) -> bool:
        prefix = os.path.realpath(self.prefix)
        real = os.path.realpath(os.path.dirname(path))
        return real == prefix or real.startswith(prefix.rstrip("/") + "/")

    def rel(self, path: str) -> str:
        return os.path.relpath(path, self.prefix)

    def abs(self, rel: str) -> str:
        return os.path.normpath(os.path.join(self.prefix, rel))


@dataclass(frozen=True)
class StepContext:
    """What a running step may use: the journal (write-ahead record and sidecars), its stash, output callbacks."""

    store: TransactionStore
    tx_id: str
    index: int
    commit: Callable[[Mapping[str, Any]], None]  # journal the step's undo record now (before the change)
    echo: Callable[[str], None]
    output: Callable[[str, bool], None]  # a line of a child's output (pip), and whether it came from stderr
    crash_midway: bool = False  # test-only fault injection: die half-way through this step

    @property
    def stash(self) -> Path:
        return self.store.stash(self.tx_id, self.index)

    def write_sidecar(self, name: str, doc: Any) -> str:
        return self.store.write_sidecar(self.tx_id, self.index, name, doc)

    def read_sidecar(self, name: str, sha256: str) -> Any:
        return self.store.read_sidecar(self.tx_id, self.index, name, sha256)


def test_crash() -> None:
    """Fault injection (ORTFIX_TEST_CRASH_*): die like kill -9 would, without cleaning up anything."""
    os._exit(99)


class Handler(ABC):
    kind: ClassVar[str]
    details_keys: ClassVar[frozenset[str]]  # what `details` must hold
    record_keys: ClassVar[frozenset[str]]  # every key a record may hold
    started_keys: ClassVar[frozenset[str]]  # what the first commit writes: a started step without them is corrupt

    def check_step(self, step: Step) -> str | None:
        """Why a journaled step cannot be trusted for undo (a missing or unknown field), or None."""
        missing = sorted(self.details_keys - set(step.details))
        if missing:
            return f"lacks detail {missing[0]!r}"
        unknown = sorted(set(step.record) - self.record_keys)
        if unknown:
            return f"has an unknown record field {unknown[0]!r}"
        if step.state is not StepState.PLANNED:
            missing = sorted(self.started_keys - set(step.record))
            if missing:
                return f"lacks record field {missing[0]!r}"
        return None

    @abstractmethod
    def verify(self, env: TargetEnv, details: Mapping[str, Any]) -> list[str]: ...

    @abstractmethod
    def describe(self, env: TargetEnv, details: Mapping[str, Any]) -> list[str]: ...

    @abstractmethod
    def execute(self, env: TargetEnv, step: Step, ctx: StepContext) -> Mapping[str, Any]:
        """Do it; returns the final record (the journal gets it with the step marked done)."""

    @abstractmethod
    def reverse(self, env: TargetEnv, step: Step, ctx: StepContext) -> list[str]: ...

    def changes(self, step: Step) -> list[str]:
        """What the step changed, one '+ x' / '- x' / '~ x' line each, for `history`."""
        return [step.summary]


HANDLERS: dict[str, Handler] = {}


def register(handler: Handler) -> Handler:
    HANDLERS[handler.kind] = handler
    return handler


def handler_for(kind: str) -> Handler:
    try:
        return HANDLERS[kind]
    except KeyError as exc:
        raise OrtfixError(f"unknown action kind {kind!r}", hint=f"this ortfix knows {', '.join(sorted(HANDLERS))}"
                          ) from exc


# ---------------------------------------------------------------------------------------------------------------------
# file-system helpers
# ---------------------------------------------------------------------------------------------------------------------

_PYC_CACHE = "__pycache__"


def _pyc_pattern(stem: str) -> re.Pattern[str]:
    return re.compile(re.escape(stem) + r"\.[A-Za-z0-9_-]+(?:\.opt-\d+)?\.pyc$")


def cached_bytecode(py_file: str) -> list[str]:
    """The `__pycache__/<stem>.<tag>[.opt-N].pyc` files an interpreter wrote for a .py file."""
    folder = os.path.join(os.path.dirname(py_file), _PYC_CACHE)
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    pattern = _pyc_pattern(os.path.basename(py_file)[:-3])
    return [os.path.join(folder, n) for n in sorted(names) if pattern.match(n)]


def _sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _dir_meta(path: str) -> list[int]:
    st = os.lstat(path)
    return [stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid]


def _make_dir(path: str, meta: Sequence[int]) -> None:
    os.mkdir(path, meta[0])
    os.chmod(path, meta[0])  # mkdir's mode passes through the umask
    if os.geteuid() == 0 and len(meta) == 3:
        with contextlib.suppress(OSError):
            os.chown(path, meta[1], meta[2])


def _remove_empty_dirs(dirs: Iterable[str]) -> list[str]:
    """rmdir each folder that is empty, deepest first; the ones removed."""
    removed = []
    for d in sorted(set(dirs), key=lambda p: (-p.count("/"), p)):
        try:
            os.rmdir(d)
            removed.append(d)
        except OSError:
            pass
    return removed


def _move(src: str, dst: str) -> None:
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    os.rename(src, dst)


def _same_device(a: str, b: str) -> bool:
    def dev(p: str) -> int | None:
        while p and not os.path.exists(p):
            parent = os.path.dirname(p)
            if parent == p:
                return None
            p = parent
        try:
            return os.stat(p).st_dev
        except OSError:
            return None

    da, db = dev(a), dev(b)
    return da is not None and da == db


def _writable(path: str) -> bool:
    p = path
    while not os.path.exists(p):
        parent = os.path.dirname(p)
        if parent == p:
            return False
        p = parent
    return os.access(p, os.W_OK)


# ---------------------------------------------------------------------------------------------------------------------
# installed distributions
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class InstalledDist:
    name: str
    version: str
    location: str
    dist_info: str

    @property
    def normalized(self) -> str:
        return canonicalize_name(self.name)


def _metadata_headers(path: str) -> dict[str, str]:
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
            headers = _metadata_headers(os.path.join(dist_info, "METADATA"))
            name = headers.get("name") or entry[: -len(".dist-info")].rsplit("-", 1)[0]
            dist = InstalledDist(name, headers.get("version", ""), location, dist_info)
            out.setdefault(dist.normalized, dist)
    return out


def record_paths(location: str, dist_info: str) -> list[str]:
    """Absolute paths of what uninstalling a distribution removes: its RECORD rows (relative to its location), every
    file in its .dist-info, and the bytecode the interpreter cached for its modules; only those that exist."""
    record = os.path.join(dist_info, "RECORD")
    try:
        with open(record, encoding="utf-8", newline="") as f:
            rows = list(csv.reader(f))
    except OSError as exc:
        raise OrtfixError(f"cannot read {record}: {exc.strerror or exc}",
                          hint="a distribution without a RECORD cannot be uninstalled exactly") from exc
    paths: dict[str, None] = {}
    for row in rows:
        if row and row[0]:
            paths[os.path.normpath(os.path.join(location, row[0]))] = None
    for dirpath, _dirs, files in os.walk(dist_info):
        for name in files:
            paths[os.path.join(dirpath, name)] = None
    for p in list(paths):
        if p.endswith(".py"):
            for pyc in cached_bytecode(p):
                paths[pyc] = None
    return [p for p in paths if os.path.lexists(p)]


# ---------------------------------------------------------------------------------------------------------------------
# pip-uninstall: move the distribution's files aside (same filesystem, os.rename), like pip's own stash
# ---------------------------------------------------------------------------------------------------------------------


class PipUninstall(Handler):
    kind = PIP_UNINSTALL
    details_keys = frozenset({"distribution", "version", "location", "dist_info"})
    record_keys = started_keys = frozenset({"sidecars", "files", "bytes"})

    def _dist(self, details: Mapping[str, Any]) -> tuple[str, str]:
        return str(details["location"]), str(details["dist_info"])

    def verify(self, env: TargetEnv, details: Mapping[str, Any]) -> list[str]:
        location, dist_info = self._dist(details)
        name = f"{details['distribution']} {details['version']}"
        if not os.path.isdir(dist_info):
            return [f"{name} is no longer installed ({dist_info} is gone)"]
        if not dist_info.endswith(".dist-info"):
            return [f"{name} was installed without a RECORD ({os.path.basename(dist_info)}): uninstall it with pip"]
        try:
            paths = record_paths(location, dist_info)
        except OrtfixError as exc:
            return [exc.one_line()]
        outside = [p for p in paths if not env.inside(p)]
        if outside:
            return [f"{name} has files outside the environment ({outside[0]}): uninstall it with pip yourself"]
        problems = []
        for folder in sorted({os.path.dirname(p) for p in paths}):
            if not os.access(folder, os.W_OK):
                problems.append(f"cannot move files out of {folder}: not writable")
                break
        if not _same_device(location, str(Path(env.prefix) / ".ortfix")):
            problems.append(f"{location} is on another filesystem than {env.prefix}/.ortfix: files cannot be moved "
                            "aside by rename")
        return problems

    def describe(self, env: TargetEnv, details: Mapping[str, Any]) -> list[str]:
        location, dist_info = self._dist(details)
        try:
            paths = record_paths(location, dist_info)
        except OrtfixError as exc:
            return [exc.one_line()]
        lines = [f"move aside {len(paths)} files of {details['distribution']} {details['version']} "
                 f"(its RECORD, its .dist-info and cached bytecode) into the transaction's stash (os.rename)"]
        lines += [f"  - {p}" for p in paths]
        return lines

    def execute(self, env: TargetEnv, step: Step, ctx: StepContext) -> Mapping[str, Any]:
        location, dist_info = self._dist(step.details)
        paths = record_paths(location, dist_info)
        loc = os.path.normpath(location)
        candidates: set[str] = set()
        for p in paths:
            d = os.path.dirname(p)
            while d.startswith(loc + "/"):
                candidates.add(d)
                d = os.path.dirname(d)
        dirs = {env.rel(d): _dir_meta(d) for d in sorted(candidates) if os.path.isdir(d)}
        files = [env.rel(p) for p in paths]
        size = sum(os.lstat(p).st_size for p in paths)
        sha = ctx.write_sidecar("files", {"files": files, "dirs": dirs})
        record = {"sidecars": {"files": sha}, "files": len(files), "bytes": size}
        ctx.commit(record)
        stash = str(ctx.stash)
        for i, rel in enumerate(files):
            if ctx.crash_midway and i == len(files) // 2:
                test_crash()
            _move(env.abs(rel), os.path.join(stash, rel))
        _remove_empty_dirs(env.abs(d) for d in dirs)
        fsync_dir(Path(location))
        return record

    def reverse(self, env: TargetEnv, step: Step, ctx: StepContext) -> list[str]:
        sha = step.record.get("sidecars", {}).get("files")
        if not sha:
            return []  # the journal has no record: nothing was moved
        data = ctx.read_sidecar("files", sha)
        warnings = []
        for rel in sorted(data["dirs"], key=lambda r: (r.count("/"), r)):
            path = env.abs(rel)
            if not os.path.isdir(path):
                _make_dir(path, data["dirs"][rel])
        stash = str(ctx.stash)
        for rel in data["files"]:
            src, dst = os.path.join(stash, rel), env.abs(rel)
            if not os.path.lexists(src):
                continue  # never moved, or already moved back
            if os.path.lexists(dst):
                warnings.append(f"{dst} exists again; the stashed copy stays in {src}")
                continue
            _move(src, dst)
        _remove_empty_dirs(_parents_within(stash, (os.path.join(stash, r) for r in data["files"])))
        return warnings

    def changes(self, step: Step) -> list[str]:
        return [f"- {step.details['distribution']} {step.details['version']}"]


def _parents_within(root: str, paths: Iterable[str]) -> set[str]:
    out: set[str] = set()
    for p in paths:
        d = os.path.dirname(p)
        while d.startswith(root) and d not in out:
            out.add(d)
            if d == root:
                break
            d = os.path.dirname(d)
    return out


def discard_dir(store: TransactionStore, tx_id: str, index: int) -> Path:
    """Where a rollback moves what an install created; deleted right after, or by `history prune`."""
    return store.step_dir(tx_id, index) / "discard"


# ---------------------------------------------------------------------------------------------------------------------
# pip-install: resolve first (dry-run report), move aside what pip would replace, install, record what is new
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Resolved:
    name: str
    version: str
    url: str | None
    download_bytes: int | None  # the archive's size, when it is a local file
    unpacked_bytes: int | None  # sum of the archive's file sizes, when it is a local wheel
    replaces: InstalledDist | None  # the installed distribution (another version) pip would replace


@dataclass(frozen=True)
class Resolution:
    installer: str
    argv: tuple[str, ...]  # the dry-run command that was run
    install: tuple[Resolved, ...]
    notes: tuple[str, ...] = field(default=())

    @property
    def replaced(self) -> list[InstalledDist]:
        return [r.replaces for r in self.install if r.replaces is not None]


def _install_pos(argv: Sequence[str]) -> int:
    for i, arg in enumerate(argv):
        if arg == "install":
            return i
    raise OrtfixError(f"not an install command: {' '.join(argv)}")


def _local_file(url: str | None) -> str | None:
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


def _pip_error(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith(("ERROR:", "error:", "\u00d7", "\u2570\u2500>"))]
    pick = errors[0] if errors else (lines[-1] if lines else "no output")
    return re.sub(r"^(ERROR|error):\s*", "", pick)


def resolve(env: TargetEnv, details: Mapping[str, Any], workdir: Path, *,
            replaced_elsewhere: Iterable[str] = ()) -> Resolution:
    """What the install will do, asked of the installer itself: `pip install --dry-run --report FILE --quiet ...`
    (pip >= 22.2) with the user's pip configuration. Failing here (index unreachable, nothing matches) is a
    preflight failure: nothing has been changed yet."""
    if details.get("installer") not in ("pip", "uv"):
        raise OrtfixError("the target environment has no pip (and no uv was found)",
                          hint=f"install pip into it first: {env.python} -m ensurepip; nothing was changed")
    installer = str(details["installer"])
    argv = [str(a) for a in details["argv"]]
    pos = _install_pos(argv)
    installed = installed_distributions(env.site_dirs)
    skip = {canonicalize_name(n) for n in replaced_elsewhere}
    if installer == "uv":
        dry = [*argv[: pos + 1], "--dry-run", *argv[pos + 1:]]
        top_before = set(_snapshot((), env.prefix))
        proc = subproc.run(dry, timeout=900)
        # Preflight changes nothing: uv's dry run still takes the environment's lock file (<prefix>/.lock, empty).
        for rel in set(_snapshot((), env.prefix)) - top_before:
            path = env.abs(rel)
            if os.path.isfile(path) and not os.path.islink(path) and os.path.getsize(path) == 0:
                with contextlib.suppress(OSError):
                    os.unlink(path)
        if proc.returncode != 0:
            raise OrtfixError(f"uv cannot resolve {' '.join(details['requirements'])}: {_pip_error(proc.stderr)}",
                              hint="is the index reachable? check your uv/pip configuration")
        items = []
        for line in (proc.stderr + proc.stdout).splitlines():
            m = re.match(r"^\s*\+\s+([A-Za-z0-9._-]+)==(\S+)", line)
            if m:
                name, version = m.group(1), m.group(2)
                old = installed.get(canonicalize_name(name))
                replaces = old if old and canonicalize_name(name) not in skip and _in_env(env, old) else None
                items.append(Resolved(name, version, None, None, None, replaces))
        return Resolution("uv", tuple(dry), tuple(items), ("uv reports no download sizes",))
    report = workdir / "pip-report.json"
    # --disable-pip-version-check: the dry-run's own output is not shown, so its self-check would only cost time.
    dry = [*argv[: pos + 1], "--dry-run", "--report", str(report), "--quiet", "--disable-pip-version-check",
           *argv[pos + 1:]]
    proc = subproc.run(dry, timeout=900)
    if proc.returncode != 0:
        message = _pip_error(proc.stderr or proc.stdout)
        if "no such option: --report" in proc.stderr or "no such option: --dry-run" in proc.stderr:
            raise OrtfixError("the target's pip is older than 22.2 (no --dry-run --report)",
                              hint=f"upgrade it first: {env.python} -m pip install -U pip")
        raise OrtfixError(f"pip cannot get {' '.join(details['requirements'])} from the configured index or "
                          f"wheelhouse: {message}",
                          hint="is the index reachable? check `pip config list` and your network; nothing was changed")
    try:
        doc = json.loads(report.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise OrtfixError(f"pip's --report was unreadable: {exc}") from exc
    items = []
    for entry in doc.get("install", []):
        meta = entry.get("metadata", {})
        name, version = str(meta.get("name", "")), str(meta.get("version", ""))
        url = (entry.get("download_info") or {}).get("url")
        download, unpacked = _wheel_sizes(_local_file(url))
        old = installed.get(canonicalize_name(name))
        replaces = old if old and canonicalize_name(name) not in skip and _in_env(env, old) else None
        items.append(Resolved(name, version, url, download, unpacked, replaces))
    return Resolution("pip", tuple(dry), tuple(items))


def _in_env(env: TargetEnv, dist: InstalledDist) -> bool:
    # pip replaces only what is inside the environment it installs into (it leaves a system copy alone).
    return any(os.path.realpath(dist.location) == os.path.realpath(d) for d in env.site_dirs)


def _walk(roots: Iterable[str], prefix: str) -> dict[str, list[Any]]:
    """rel path → [type, inode, size, mtime_ns] for everything under `roots` (the snapshot an install is judged by)."""
    out: dict[str, list[Any]] = {}
    stack = [r for r in dict.fromkeys(roots) if os.path.isdir(r)]
    seen: set[str] = set()
    while stack:
        folder = stack.pop()
        if folder in seen:
            continue
        seen.add(folder)
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for e in entries:
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            kind = "d" if stat.S_ISDIR(st.st_mode) else "l" if stat.S_ISLNK(st.st_mode) else "f"
            out[os.path.relpath(e.path, prefix)] = [kind, st.st_ino, st.st_size, st.st_mtime_ns]
            if kind == "d":
                stack.append(e.path)
    return out


def _snapshot(roots: Iterable[str], prefix: str) -> dict[str, list[Any]]:
    """What an install is judged by: everything under `roots` (site-packages, bin), and the files directly in the
    prefix, where an installer may leave its own (uv writes `<prefix>/.lock`)."""
    out = _walk(roots, prefix)
    with contextlib.suppress(OSError):
        for e in os.scandir(prefix):
            st = e.stat(follow_symlinks=False)
            if not stat.S_ISDIR(st.st_mode):
                kind = "l" if stat.S_ISLNK(st.st_mode) else "f"
                out[os.path.relpath(e.path, prefix)] = [kind, st.st_ino, st.st_size, st.st_mtime_ns]
    return out


def _top_level_guess(name: str) -> str:
    # nvidia-cublas-cu12 → nvidia, onnxruntime-gpu → onnxruntime: the folder a wheel of that name most likely writes.
    return re.split(r"[-_.]", canonicalize_name(name))[0]


def _wheel_targets(env: TargetEnv, wheel: str) -> list[str]:
    """Where pip would put each file of a local wheel (purelib/platlib root, .data/scripts → bin, .data/<scheme>)."""
    out = []
    try:
        with zipfile.ZipFile(wheel) as zf:
            names = zf.namelist()
            wheel_meta = next((n for n in names if n.endswith(".dist-info/WHEEL") and n.count("/") == 1), None)
            purelib = b"Root-Is-Purelib: true" in zf.read(wheel_meta) if wheel_meta else True
    except (OSError, zipfile.BadZipFile, KeyError):
        return []
    root = env.purelib if purelib else env.platlib
    for n in names:
        if n.endswith("/"):
            continue
        parts = n.split("/")
        if parts[0].endswith(".data") and len(parts) > 2:
            base = {"scripts": env.scripts, "purelib": env.purelib, "platlib": env.platlib}.get(parts[1])
            if base is None:
                continue
            out.append(os.path.join(base, *parts[2:]))
        else:
            out.append(os.path.join(root, *parts))
    return out


def _install_argv(details: Mapping[str, Any]) -> list[str]:
    return [str(a) for a in details["argv"]]


def _pump(stream: Any, is_err: bool, output: Callable[[str, bool], None]) -> None:
    for line in iter(stream.readline, ""):
        output(line.rstrip("\n"), is_err)


def _pid_alive(pid: int, python: str) -> bool:
    """Whether `pid` is still a process of the target's installer (a pip an interrupted apply left running)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    args = [c.decode(errors="replace") for c in cmdline if c]
    return any(a == python for a in args) and ("pip" in args or "install" in args)


class PipInstall(Handler):
    kind = PIP_INSTALL
    details_keys = frozenset({"requirements", "installer", "argv"})
    record_keys = frozenset({"resolution", "roots", "sidecars", "protected", "argv", "pid", "installed", "created",
                             "overwritten"})
    started_keys = frozenset({"roots", "sidecars", "protected", "argv"})

    def verify(self, env: TargetEnv, details: Mapping[str, Any]) -> list[str]:
        argv = _install_argv(details)
        if any(a.startswith(("--index-url", "-i", "--extra-index-url")) for a in argv):
            return ["the install command names an index itself; ortfix leaves that to your pip configuration"]
        if details.get("installer") not in ("pip", "uv"):
            return ["the target environment has no pip (and no uv was found): install pip into it first"]
        problems = [f"{d} is not writable" for d in (*env.site_dirs, env.scripts)
                    if os.path.isdir(d) and not os.access(d, os.W_OK)]
        return problems

    def describe(self, env: TargetEnv, details: Mapping[str, Any]) -> list[str]:
        who = "uv" if details.get("installer") == "uv" else "the environment's own pip"
        return [f"run ({who}, with your pip configuration): {' '.join(_install_argv(details))}"]

    def execute(self, env: TargetEnv, step: Step, ctx: StepContext) -> Mapping[str, Any]:
        roots = [r for r in dict.fromkeys((*env.site_dirs, env.scripts)) if os.path.isdir(r)]
        before = _snapshot(roots, env.prefix)
        protect = self._protect_candidates(env, step, before)
        protect_dir = ctx.store.step_dir(ctx.tx_id, ctx.index) / "protect"
        protected = []
        for rel in protect:
            dst = protect_dir / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(env.abs(rel), dst)
            except OSError:
                shutil.copy2(env.abs(rel), dst, follow_symlinks=False)
            protected.append(rel)
        record: dict[str, Any] = {
            **step.record,
            "roots": [env.rel(r) for r in roots],
            "sidecars": {"snapshot": ctx.write_sidecar("snapshot", before)},
            "protected": protected,
            "argv": _install_argv(step.details),
        }
        ctx.commit(record)
        argv = _install_argv(step.details)
        ctx.echo(f"installing with {'uv' if step.details.get('installer') == 'uv' else 'pip'}: {' '.join(argv)}")
        proc = subproc.start(argv)
        record["pid"] = proc.pid
        ctx.commit(record)
        threads = [threading.Thread(target=_pump, args=(proc.stdout, False, ctx.output), daemon=True),
                   threading.Thread(target=_pump, args=(proc.stderr, True, ctx.output), daemon=True)]
        for t in threads:
            t.start()
        try:
            if ctx.crash_midway:
                self._crash_when_writing(proc, roots, env, before)
            rc = proc.wait()
        except BaseException:
            proc.terminate()
            with contextlib.suppress(Exception):
                proc.wait(timeout=30)
            raise
        for t in threads:
            t.join(timeout=5)
        if rc != 0:
            raise OrtfixError(f"{'uv' if step.details.get('installer') == 'uv' else 'pip'} install failed "
                              f"(exit {rc})", hint="its own output above says why")
        after = _snapshot(roots, env.prefix)
        diff = _diff(before, after)
        installed = []
        for rel in diff["created"]:
            if rel.endswith(".dist-info") and os.path.dirname(env.abs(rel)) in env.site_dirs:
                headers = _metadata_headers(os.path.join(env.abs(rel), "METADATA"))
                installed.append({"name": headers.get("name", ""), "version": headers.get("version", ""),
                                  "dist_info": env.abs(rel)})
        keep = set(diff["changed"]) | set(diff["removed"])
        for rel in protected:
            if rel not in keep:
                with contextlib.suppress(OSError):
                    os.unlink(protect_dir / rel)
        record.update({
            "sidecars": {**record["sidecars"], "created": ctx.write_sidecar("created", diff)},
            "protected": [r for r in protected if r in keep],
            "installed": installed,
            "created": len(diff["created"]),
            "overwritten": [r for r in diff["changed"] if r not in protected],
        })
        record.pop("pid", None)
        return record

    def _protect_candidates(self, env: TargetEnv, step: Step, before: Mapping[str, list[Any]]) -> list[str]:
        """Files that exist now and that the install may overwrite: exactly those of local wheels, else every file
        under the top-level folder a distribution's name suggests (nvidia/ for the NVIDIA wheels). They are
        hard-linked aside first, so rollback can put the old bytes back."""
        wanted: set[str] = set()
        guesses: set[str] = set()
        for item in step.record.get("resolution", []):
            local = _local_file(item.get("url"))
            if local and local.endswith(".whl"):
                wanted |= {env.rel(p) for p in _wheel_targets(env, local)}
            guesses.add(_top_level_guess(str(item.get("name", ""))))
        for name in step.details.get("requirements", []):
            guesses.add(_top_level_guess(re.split(r"[<>=!~;\[ ]", str(name), maxsplit=1)[0]))
        tops = {env.rel(os.path.join(d, g)) for d in env.site_dirs for g in guesses if g}
        out = []
        for rel, meta in before.items():
            if meta[0] != "f":
                continue
            if rel in wanted or any(rel.startswith(t + "/") for t in tops):
                out.append(rel)
        return sorted(out)

    @staticmethod
    def _crash_when_writing(proc: Any, roots: Sequence[str], env: TargetEnv, before: Mapping[str, Any]) -> None:
        # Fault injection: as soon as pip has started writing into the environment, kill it and die (kill -9).
        tops = {r: set(os.listdir(r)) for r in roots}
        while proc.poll() is None:
            for root, names in tops.items():
                with contextlib.suppress(OSError):
                    if set(os.listdir(root)) - names:
                        proc.kill()
                        proc.wait()
                        test_crash()
            time.sleep(0.005)
        test_crash()

    def reverse(self, env: TargetEnv, step: Step, ctx: StepContext) -> list[str]:
        sidecars = step.record.get("sidecars", {})
        if not sidecars.get("snapshot"):
            return []  # never started: pip did not run
        pid = step.record.get("pid")
        if isinstance(pid, int) and _pid_alive(pid, env.python):
            raise OrtfixError(f"the installer the interrupted apply started (pid {pid}) is still running",
                              hint=f"wait for it to end (or kill {pid}), then run `ortfix rollback` again")
        if sidecars.get("created"):
            diff = ctx.read_sidecar("created", sidecars["created"])
        else:  # cut off while pip ran: judge by the snapshot taken before it started
            before = ctx.read_sidecar("snapshot", sidecars["snapshot"])
            roots = [env.abs(r) for r in step.record.get("roots", [])]
            diff = _diff(before, _snapshot(roots, env.prefix))
        warnings = []
        # Move what the install created aside (one rename per topmost new path: instant even for gigabytes);
        # the disk is freed afterwards (discard_dirs, `history prune`).
        created = set(diff["created"])
        discard = discard_dir(ctx.store, ctx.tx_id, ctx.index)
        for rel in sorted(r for r in created if os.path.dirname(r) not in created):
            path = env.abs(rel)
            if not os.path.lexists(path):
                continue
            if path.endswith(".py"):  # bytecode a later run cached for a new top-level module
                for pyc in cached_bytecode(path):
                    with contextlib.suppress(OSError):
                        os.unlink(pyc)
            _move(path, str(discard / rel))
        protect_dir = ctx.store.step_dir(ctx.tx_id, ctx.index) / "protect"
        for rel in step.record.get("protected", []):
            src = protect_dir / rel
            if os.path.lexists(src):
                os.replace(src, env.abs(rel))
        overwritten = step.record.get("overwritten")
        if overwritten is None:  # cut off before the install was recorded: judge from the live diff
            overwritten = [r for r in diff.get("changed", []) if r not in step.record.get("protected", [])]
        for rel in overwritten:
            warnings.append(f"{env.abs(rel)} was overwritten by the install and its earlier content was not saved")
        for rel in diff.get("removed", []):
            if not os.path.lexists(env.abs(rel)) and rel not in step.record.get("protected", []):
                warnings.append(f"{env.abs(rel)} was removed by the install and could not be restored")
        return warnings

    def changes(self, step: Step) -> list[str]:
        installed = step.record.get("installed")
        if installed:
            return [f"+ {d['name']} {d['version']}" for d in installed]
        return [f"+ {r}" for r in step.details.get("requirements", [])]


def _diff(before: Mapping[str, list[Any]], after: Mapping[str, list[Any]]) -> dict[str, list[str]]:
    created = sorted(set(after) - set(before))
    removed = sorted(r for r in before if r not in after and before[r][0] != "d")
    changed = sorted(r for r in before if r in after and before[r][0] == "f" and after[r] != before[r])
    return {"created": created, "removed": removed, "changed": changed}


# ---------------------------------------------------------------------------------------------------------------------
# write-file: stash what is there, write a temp file, fsync, os.replace
# ---------------------------------------------------------------------------------------------------------------------


def _missing_dirs(path: str) -> list[str]:
    out = []
    d = os.path.dirname(path)
    while d and not os.path.exists(d):
        out.append(d)
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent
    return list(reversed(out))


class WriteFile(Handler):
    kind = WRITE_FILE
    details_keys = frozenset({"path", "content", "sha256", "mode", "replaces_existing"})
    record_keys = started_keys = frozenset({"existed", "tmp", "created_dirs", "pycache_existed"})

    def verify(self, env: TargetEnv, details: Mapping[str, Any]) -> list[str]:
        path = str(details["path"])
        content = str(details["content"]).encode("utf-8")
        if hashlib.sha256(content).hexdigest() != details.get("sha256"):
            return [f"the content planned for {path} does not match its sha256 (the plan file was edited)"]
        if not env.inside(path):
            return [f"{path} is outside the environment: ortfix writes only inside it"]
        exists = os.path.lexists(path)
        if exists and os.path.isdir(path):
            return [f"{path} is a folder"]
        if exists != bool(details.get("replaces_existing")):
            return [f"{path} {'appeared' if exists else 'disappeared'} since the plan was made"]
        if not _writable(path if exists else os.path.dirname(path)):
            return [f"cannot write {path}: not writable"]
        return []

    def describe(self, env: TargetEnv, details: Mapping[str, Any]) -> list[str]:
        path = str(details["path"])
        size = len(str(details["content"]).encode("utf-8"))
        verb = "replace" if os.path.lexists(path) else "create"
        lines = [f"{verb} {path} ({size} bytes, mode {int(details.get('mode', 0o644)):04o}, sha256 "
                 f"{str(details['sha256'])[:16]}…) via a temp file + os.replace"
                 + ("; the current file is kept in the stash" if verb == "replace" else "")]
        lines += [f"  + folder {d}" for d in _missing_dirs(path)]
        return lines

    def execute(self, env: TargetEnv, step: Step, ctx: StepContext) -> Mapping[str, Any]:
        path = str(step.details["path"])
        mode = int(step.details.get("mode", 0o644))
        existed = os.path.lexists(path)
        tmp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.ortfix-{ctx.tx_id}.tmp")
        record: dict[str, Any] = {"existed": existed, "tmp": tmp, "created_dirs": _missing_dirs(path),
                  "pycache_existed": os.path.isdir(os.path.join(os.path.dirname(path), _PYC_CACHE))}
        ctx.commit(record)
        for d in record["created_dirs"]:
            _make_dir(d, [0o755])
        if existed:
            saved = ctx.stash / "file"
            saved.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(saved)
            try:
                os.link(path, saved, follow_symlinks=False)
            except OSError:
                shutil.copy2(path, saved, follow_symlinks=False)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        write_fsynced(tmp, str(step.details["content"]).encode("utf-8"), mode, exclusive=True)
        if ctx.crash_midway:
            test_crash()
        os.replace(tmp, path)
        fsync_dir(Path(path).parent)
        return record

    def reverse(self, env: TargetEnv, step: Step, ctx: StepContext) -> list[str]:
        record = step.record
        if "existed" not in record:
            return []
        path = str(step.details["path"])
        warnings = []
        with contextlib.suppress(FileNotFoundError):
            os.unlink(str(record["tmp"]))
        saved = ctx.stash / "file"
        if record["existed"]:
            if os.path.lexists(saved):
                os.replace(saved, path)
            elif not os.path.lexists(path):
                warnings.append(f"{path} cannot be restored: its saved copy is gone")
        elif os.path.lexists(path):
            if os.path.isfile(path) and not os.path.islink(path) and _sha256_file(path) == step.details["sha256"]:
                os.unlink(path)
            else:
                aside = ctx.stash / "changed-after-apply"
                aside.parent.mkdir(parents=True, exist_ok=True)
                os.replace(path, aside)
                warnings.append(f"{path} was changed after ortfix wrote it; removed, and kept as {aside}")
        if path.endswith(".py"):
            for pyc in cached_bytecode(path):
                with contextlib.suppress(OSError):
                    os.unlink(pyc)
            if not record.get("pycache_existed"):
                _remove_empty_dirs([os.path.join(os.path.dirname(path), _PYC_CACHE)])
        _remove_empty_dirs(record.get("created_dirs", []))
        fsync_dir(Path(path).parent)
        return warnings

    def changes(self, step: Step) -> list[str]:
        return [f"{'~' if step.details.get('replaces_existing') else '+'} {step.details['path']}"]


# ---------------------------------------------------------------------------------------------------------------------
# symlink: a missing SONAME link; never over an existing file; undone only while it is still ours
# ---------------------------------------------------------------------------------------------------------------------


class Symlink(Handler):
    kind = SYMLINK
    details_keys = frozenset({"path", "target"})
    record_keys = started_keys = frozenset({"path", "target"})

    def verify(self, env: TargetEnv, details: Mapping[str, Any]) -> list[str]:
        path, target = str(details["path"]), str(details["target"])
        if os.path.lexists(path):
            return [f"{path} exists: ortfix never overwrites a file with a link"]
        if not env.inside(path):
            return [f"{path} is outside the environment: ortfix links only inside it"]
        if not os.path.exists(os.path.join(os.path.dirname(path), target)):
            return [f"the link target {target} does not exist next to {path}"]
        if not os.access(os.path.dirname(path), os.W_OK):
            return [f"cannot create {path}: its folder is not writable"]
        return []

    def describe(self, env: TargetEnv, details: Mapping[str, Any]) -> list[str]:
        return [f"create the symbolic link {details['path']} -> {details['target']}"]

    def execute(self, env: TargetEnv, step: Step, ctx: StepContext) -> Mapping[str, Any]:
        record = {"path": str(step.details["path"]), "target": str(step.details["target"])}
        ctx.commit(record)
        os.symlink(record["target"], record["path"])  # fails rather than replace anything that appeared meanwhile
        if ctx.crash_midway:
            test_crash()
        fsync_dir(Path(record["path"]).parent)
        return record

    def reverse(self, env: TargetEnv, step: Step, ctx: StepContext) -> list[str]:
        if "path" not in step.record:
            return []
        path, target = str(step.record["path"]), str(step.record["target"])
        if os.path.islink(path) and os.readlink(path) == target:
            os.unlink(path)
            return []
        if os.path.lexists(path):
            return [f"{path} is no longer the link ortfix created; left as it is"]
        return []

    def changes(self, step: Step) -> list[str]:
        return [f"+ {step.details['path']} -> {step.details['target']}"]


for _handler in (PipUninstall(), PipInstall(), WriteFile(), Symlink()):
    register(_handler)
