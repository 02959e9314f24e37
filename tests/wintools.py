"""A real Windows loader for the tests: wine, the Windows CPython of `../shared/wintest/`, and packages installed for
`win_amd64` from the Linux side.

`win_python()` gives a `WinPython` (or skips the test with one line saying what is missing). It is built once per
machine and cached (the wine prefix takes about 8 s to create): the prefix, the unpacked CPython and a site folder
with ortfix's dependencies for win_amd64. ortfix itself is taken from this checkout's `src/` through PYTHONPATH, so
the code under test is always the current one.

Paths: wine maps the Linux root to drive Z:, so `to_windows(Path("/tmp/x"))` is `Z:\\tmp\\x`. The Windows process's
PATH is wine's registry PATH, not the Linux one: `WINEPATH` (';'-separated Windows paths) is put in front of it.
`ctypes.CDLL(path)` uses Python's strict DLL search (no PATH); `ctypes.WinDLL(path, winmode=8)` loads as ORT loads its
provider (LOAD_WITH_ALTERED_SEARCH_PATH: the DLL's folder, System32, Windows, the current folder, PATH).

Speed: `WinPython.env()` keeps one wineserver per prefix running through the session (`serve_prefix`: a cold start is
about 3 s a `wine` call), and `pip_install_windows_cached` installs what a test does not test once per machine.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path, PureWindowsPath

import pytest

from clitools import REPO
from support.slowguard import refuse_slow
from support.testcache import cache_root, locked

WINTEST = REPO.parent / "shared" / "wintest" / "cpython-3.11.11-windows-amd64.tar.gz"
PY_VERSION = "3.11"
# ortfix's own dependencies for win_amd64; pip evaluates environment markers against the Linux interpreter that runs
# it, so click's `colorama; platform_system == "Windows"` must be named here. numpy 2.x does not start under wine 8.
ORTFIX_WIN_DEPS = ("click>=8.1", "colorama", "packaging>=23", "PyYAML>=6", "pyelftools>=0.30",
                   "platformdirs>=3",
                   "pefile>=2023.2.7")
CACHE_VERSION = "2"
# How long a test session's wineserver outlives the last Windows process (see serve_prefix); it is ended at exit.
SERVER_LINGER_S = 300
_SERVED: set[str] = set()


def to_windows(path: Path | str) -> str:
    """The Windows path wine gives a Linux path (drive Z: is the Linux root)."""
    return "Z:" + str(Path(path).absolute()).replace("/", "\\")


def from_windows(path: str) -> Path:
    """The Linux path of a wine path on drive Z:."""
    win = PureWindowsPath(path)
    if win.drive.upper() != "Z:":
        raise ValueError(f"{path} is not on drive Z:")
    return Path("/", *win.parts[1:])




@dataclass(frozen=True)
class WinPython:
    """A Windows CPython under wine, with ortfix's dependencies importable."""

    prefix: Path  # WINEPREFIX
    home: Path  # the folder holding python.exe
    deps: Path  # site folder with ortfix's win_amd64 dependencies

    @property
    def exe(self) -> Path:
        return self.home / "python.exe"

    def env(self, extra: Mapping[str, str] | None = None, *, pythonpath: Sequence[Path] = ()) -> dict[str, str]:
        """The environment for a wine process: this prefix, wine's own chatter off (but for errors about modules,
        which name missing DLLs), ortfix's src/ and dependencies on PYTHONPATH."""
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "CONDA_PREFIX", "LD_LIBRARY_PATH")}
        paths = [*pythonpath, REPO / "src", self.deps]
        env.update({"WINEPREFIX": str(self.prefix), "WINEDEBUG": "-all,err+module",
                    "WINEDLLOVERRIDES": "mscoree,mshtml=",
                    "PYTHONPATH": ";".join(to_windows(p) for p in paths), "PYTHONUTF8": "1",
                    "PYTHONDONTWRITEBYTECODE": "1"})
        env.update(extra or {})
        serve_prefix(env)
        return env

    def run(self, *args: str, env: Mapping[str, str] | None = None, pythonpath: Sequence[Path] = (),
            exe: Path | None = None, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """`wine python.exe ARGS` (or another exe), stdin closed (wine's Python cannot start without a valid one)."""
        return subprocess.run(["wine", str(exe or self.exe), *args], capture_output=True, text=True,
                              env=self.env(env, pythonpath=pythonpath), stdin=subprocess.DEVNULL,
                              cwd=str(cwd or REPO), timeout=timeout, check=False)

    def ortfix(self, *args: str, env: Mapping[str, str] | None = None,
               timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """The real `ortfix` command, run by the Windows Python."""
        return self.run("-m", "ortfix", *args, env=env, timeout=timeout)

    def private_prefix(self, where: Path) -> Path:
        """A wine prefix of the caller's own, for a test that changes the registry: the registry files are copied,
        drive C is the cached prefix's (shared by every test on this machine, so its registry must not change)."""
        prefix = where / "wineprefix"
        (prefix / "dosdevices").mkdir(parents=True)
        for name in ("system.reg", "user.reg", "userdef.reg", ".update-timestamp"):
            shutil.copy2(self.prefix / name, prefix / name)
        (prefix / "drive_c").symlink_to(self.prefix / "drive_c")
        (prefix / "dosdevices" / "c:").symlink_to("../drive_c")
        (prefix / "dosdevices" / "z:").symlink_to("/")
        return prefix

    def new_home(self, where: Path) -> Path:
        """A fresh copy of the Windows CPython (an install of its own that a test may change), returned as the
        folder holding its python.exe; Lib/site-packages is created empty."""
        home = where / "python"
        shutil.copytree(self.home, home, symlinks=True)
        (home / "Lib" / "site-packages").mkdir(parents=True, exist_ok=True)
        return home


def pip_install_windows(target: Path, *requirements: str, find_links: Path | None = None,
                        no_deps: bool = False) -> None:
    """Install requirements for win_amd64 / CPython 3.11 into `target` (a site-packages folder), from Linux."""
    argv = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--target", str(target),
            "--platform", "win_amd64", "--only-binary=:all:", "--python-version", PY_VERSION, "--upgrade"]
    if find_links is not None:
        argv += ["--find-links", str(find_links)]
    if no_deps:
        argv.append("--no-deps")
    proc = subprocess.run([*argv, *requirements], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]


def serve_prefix(env: Mapping[str, str]) -> None:
    """Keep one wineserver running for the prefix of `env` through the test session, its services started.

    Without it every `wine` call pays a cold start (the server loads the registry and starts services.exe,
    explorer.exe, winedevice.exe, plugplay, rpcss: about 3 s of wall time a call, several times per test), because
    a server wine starts by itself ends with its last process. `wineserver -pN` (exit 0: started; 2: one runs) keeps it
    for N s after its last process, and the services are started here at once by a call whose output goes nowhere: a
    service started by a test's own call would inherit that call's pipes and keep them open as long as the server
    lives, so the test would wait for its output to end. The server is ended at exit (`wineserver -k`)."""
    prefix = env.get("WINEPREFIX")
    if not prefix or not Path(prefix).is_dir():
        return
    quiet = {"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    try:
        started = subprocess.run(["wineserver", f"-p{SERVER_LINGER_S}"], env=dict(env), timeout=60, check=False,
                                 **quiet)
    except FileNotFoundError:
        return  # no wineserver on PATH: every call starts its own, as before
    if started.returncode != 0:
        return  # already running (or wine is missing: the call that follows says so)
    if prefix not in _SERVED:
        _SERVED.add(prefix)
        atexit.register(_end_server, dict(env))
    subprocess.run(["wine", "cmd", "/c", "exit"], env=dict(env), timeout=300, check=False, **quiet)


def _end_server(env: Mapping[str, str]) -> None:
    subprocess.run(["wineserver", "-k"], env=dict(env), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=60, check=False)


def pip_install_windows_cached(target: Path, *requirements: str, find_links: Path | None = None,
                               no_deps: bool = False) -> None:
    """`pip_install_windows` for a test whose subject is not the install itself: the install runs once per machine
    into the test cache (keyed by its arguments; `find_links` must be a folder whose wheels never change, such as
    the cached wheelhouse), and `target` gets a copy of it (a real copy: tests change the installed files)."""
    key = hashlib.sha256(repr((CACHE_VERSION, PY_VERSION, requirements, str(find_links), no_deps)).encode())
    cached = cache_root() / f"win-site-{key.hexdigest()[:16]}"
    with locked(cache_root() / "win-site.lock"):
        if not (cached / ".done").is_file():
            shutil.rmtree(cached, ignore_errors=True)
            pip_install_windows(cached, *requirements, find_links=find_links, no_deps=no_deps)
            (cached / ".done").write_text("\n".join(requirements) + "\n")
    target.mkdir(parents=True, exist_ok=True)
    shutil.copytree(cached, target, symlinks=True, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".done"))


@cache
def _wine_missing() -> str | None:
    if shutil.which("wine") is None:
        return "wine is not installed (apt-get install wine64 wine)"
    if not WINTEST.is_file():
        return f"the Windows CPython is not at {WINTEST}"
    return None


def wine_slot() -> str:
    """Which wine prefix this test process uses: one per pytest-xdist worker (or per `ORTFIX_TEST_WINE_SLOT`, for test
    runs of several checkouts at once). One prefix means one wineserver: a test that ends it (`wineserver -k`), or a
    registry change, in one process must not reach a Windows process another worker is running (an `ortfix apply`
    under wine was left waiting for 8 minutes when two workers shared a prefix)."""
    slot = os.environ.get("ORTFIX_TEST_WINE_SLOT") or os.environ.get("PYTEST_XDIST_WORKER") or "main"
    return "".join(c for c in slot if c.isalnum() or c in "-_")[:32] or "main"


def _new_prefix(prefix: Path, key: str) -> None:
    """A wine prefix made by `wineboot -i`, or, when another slot already has a finished one of the same key, a copy
    of it (registry files copied, the 630 MB of system32 hard-linked: wine only reads its system DLLs; as
    `WinPython.private_prefix` does, a copied registry gives the same Windows)."""
    booted = next(iter(sorted(p.parent / "prefix" for p in cache_root().glob(f"wine-{key}-*/done"))), None)
    if booted is not None:
        try:  # a file its running wineserver removes meanwhile (a Temp file) makes copytree fail: wineboot then
            shutil.copytree(booted, prefix, symlinks=True, copy_function=_link_or_copy,
                            ignore=shutil.ignore_patterns("*.reg"))  # none below the prefix's root
            for name in ("system.reg", "user.reg", "userdef.reg"):
                shutil.copy2(booted / name, prefix / name)
            return
        except (OSError, shutil.Error):
            shutil.rmtree(prefix, ignore_errors=True)
    env = {**os.environ, "WINEPREFIX": str(prefix), "WINEDEBUG": "-all", "WINEDLLOVERRIDES": "mscoree,mshtml="}
    boot = subprocess.run(["wineboot", "-i"], env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          timeout=300, check=False)
    assert boot.returncode == 0, boot.stderr[-2000:]


def _link_or_copy(src: str, dst: str) -> None:
    """Hard-link wine's system DLLs (read only, 630 MB), copy the rest (wine rewrites win.ini and such in place)."""
    try:
        if "system32" not in Path(src).parts:
            raise OSError("a copy of its own")
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


@cache
def _build() -> WinPython:
    key = hashlib.sha256(f"{CACHE_VERSION}|{ORTFIX_WIN_DEPS}|{WINTEST.stat().st_size}".encode()).hexdigest()[:16]
    root = cache_root() / f"wine-{key}-{wine_slot()}"
    done = root / "done"
    with locked(cache_root() / f"wine-{wine_slot()}.lock"):
        if not done.is_file():
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir(parents=True)
            with tarfile.open(WINTEST) as tar:
                tar.extractall(root / "cpython", filter="data")
            _new_prefix(root / "prefix", key)
            pip_install_windows_cached(root / "deps", *ORTFIX_WIN_DEPS)  # one pip run for every slot
            done.write_text("ok\n")
    home = root / "cpython" / "cpython-3.11.11-windows-amd64"
    return WinPython(prefix=root / "prefix", home=home, deps=root / "deps")


def win_python() -> WinPython:
    """The cached Windows CPython under wine; skips the calling test with one line when wine or it is missing."""
    refuse_slow("wine")
    missing = _wine_missing()
    if missing:
        pytest.skip(missing)
    return _build()
