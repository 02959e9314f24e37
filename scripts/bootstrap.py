#!/usr/bin/env python3
"""Install ortfix into an environment of its own, put `ortfix` on PATH, then check the Python you name.

Standard library only; runs on Python 3.8 or newer (ortfix itself needs 3.9: an older interpreter is told so), on
Linux, macOS (ortfix installs and `check` runs; GPU fixes are for Linux and Windows) and Windows. `install.sh` and
`install.ps1` only find a Python and run this file with every argument they were given.

Where ortfix goes: with pipx on PATH, `pipx install ortfix` (the find-links/no-index options passed with
`--pip-args`); else a venv of its own at `<data>/venv`, with `<data>` = `$XDG_DATA_HOME/ortfix` (or
`~/.local/share/ortfix`) on Linux, `~/Library/Application Support/ortfix` on macOS and `%LOCALAPPDATA%\\ortfix` on
Windows, and `ortfix` on PATH through a symbolic link `~/.local/bin/ortfix` (Windows: a shim
`%LOCALAPPDATA%\\ortfix\\bin\\ortfix.cmd`; the folder is not added to the registry's user Path, one line says how).
`<data>/install.json` records what was installed and how: `--uninstall` removes exactly that. The venv is reused or
removed only if this script made it: a marker file inside it holds a random token that install.json holds too, and
ortfix is installed there; any other `<data>/venv` (a venv of the user's) is left alone, exit 7. Never needs root.

After the install, `ortfix check` on the target, its plan, and the apply command (or the apply itself with `--yes`).
Every command shown is quoted so that pasting it runs only it (sh's single quotes; PowerShell's on Windows) and names
ortfix by its full path unless `ortfix` on PATH is this install (one line warns when another comes first). A plan for
a system Python ends with what changes one: `ortfix apply --system` (never implied by `--yes`), or better a venv.

pip is run with the user's own configuration (its files and PIP_* variables); this script names no index.
`--find-links DIR` and `--no-index` are passed on for an offline machine with a wheelhouse. A wheelhouse made by
`ortfix wheelhouse` (it holds `ortfix-wheelhouse.json`) is installed from only as its manifest says: ortfix and its
dependencies pinned with the manifest's sha256 (pip's hash-checking mode, in a venv: pipx cannot pass hashes), so a
wheel someone else put into the folder is never installed. A second run with the same source and options changes
nothing; `--upgrade` (or another source) reinstalls.

One file over 400 lines on purpose: install.sh and install.ps1 run it as it is, standard library only, on a machine
where nothing of ortfix is installed yet.

Exit codes: 0 done (ortfix's findings after the install are shown, they are not a failure); 2 bad arguments or an
install record this script cannot read; 3 Python missing or older than 3.9; 4 no venv/ensurepip module; 5 pip (or
pipx) could not install ortfix (network, index, source); 6 a folder it must write is read-only or full; 7 an `ortfix`
that this script did not make is where the link goes, or `<data>/venv` is not the venv it made (its marker file
inside and `install.json` must agree, and ortfix must be installed there: a venv of yours is never installed into nor
removed); 8 ortfix installed, but `ortfix check`/`plan`/`apply` after it did not succeed, or `--yes` met a system
Python (changed only by `ortfix apply --system`: the command is shown); 130 interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import re
import secrets
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

PROG = "ortfix-install"
MANIFEST = "ortfix-wheelhouse.json"  # ortfix's system/wheelmanifest.py: the same name, schema and fields
MANIFEST_SCHEMA = "ortfix.wheelhouse-manifest/2"
STATE_SCHEMA = "ortfix.install/1"
MIN_PYTHON = (3, 9)
WINDOWS = sys.platform == "win32"
MACOS = sys.platform == "darwin"

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_PYTHON = 3
EXIT_NO_VENV = 4
EXIT_PIP = 5
EXIT_NOT_WRITABLE = 6
EXIT_FOREIGN = 7
EXIT_AFTER = 8
EXIT_INTERRUPTED = 130

# What pip prints when the index cannot be reached at all (urllib3's and the OS's words).
UNREACHABLE_MARKS = ("NewConnectionError", "Connection refused", "Max retries exceeded", "Network is unreachable",
                     "Temporary failure in name resolution", "Name or service not known", "ConnectTimeoutError",
                     "ProxyError", "getaddrinfo failed")


class Failure(Exception):
    """A failure the user can act on: one line on stderr and an exit code."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


@dataclass(frozen=True)
class Options:
    uninstall: bool
    source: str
    find_links: list[str]
    no_index: bool
    python: Optional[str]
    check: bool
    yes: bool
    upgrade: bool
    use_pipx: bool
    data_dir: Optional[str]
    bin_dir: Optional[str]

    def pip_args(self) -> list[str]:
        args: list[str] = []
        if self.no_index:
            args.append("--no-index")
        for folder in self.find_links:
            args += ["--find-links", folder]
        return args


@dataclass(frozen=True)
class Layout:
    """The files a venv install owns."""

    data: Path
    bin: Path

    @property
    def venv(self) -> Path:
        return self.data / "venv"

    @property
    def state_file(self) -> Path:
        return self.data / "install.json"

    @property
    def venv_python(self) -> Path:
        return self.venv / ("Scripts/python.exe" if WINDOWS else "bin/python")

    @property
    def venv_ortfix(self) -> Path:
        return self.venv / ("Scripts/ortfix.exe" if WINDOWS else "bin/ortfix")

    @property
    def marker(self) -> Path:
        """The file inside the venv that says this installer made it (a token also recorded in install.json)."""
        return self.venv / "ortfix-installer-marker"

    @property
    def link(self) -> Path:
        return self.bin / ("ortfix.cmd" if WINDOWS else "ortfix")

    def shim(self) -> str:
        """The Windows `ortfix.cmd`: the venv's ortfix with every argument."""
        return f'@"{self.venv_ortfix}" %*\r\n'


def printable(text: str) -> str:
    """Text for the terminal: every character that is not printable (control characters, ESC, the line and paragraph
    separators) written as its escape, so that a folder's name cannot move the cursor or start a line."""
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)


def say(message: str) -> None:
    print(printable(f"{PROG}: {message}"), flush=True)


# PowerShell takes the typographic single quotes as quotes too: each is doubled inside a single-quoted string.
PS_QUOTES = "'\u2018\u2019\u201a\u201b"


def quote(arg: str) -> str:
    """One argument of a printed command, inert when pasted: sh's single quotes (shlex.quote); on Windows
    PowerShell's (install.ps1's shell), where nothing inside single quotes is expanded but the quotes themselves."""
    if not WINDOWS:
        return shlex.quote(arg)
    if re.fullmatch(r"[A-Za-z0-9_./\\:=+-]+", arg):
        return arg
    return "'" + "".join(ch * 2 if ch in PS_QUOTES else ch for ch in arg) + "'"


def command_line(argv: Sequence[str]) -> str:
    """A command to show or to paste (PowerShell runs a quoted program name only through its call operator `&`)."""
    words = [quote(a) for a in argv]
    line = " ".join(words)
    return f"& {line}" if WINDOWS and words and words[0] != argv[0] else line


# ---------------------------------------------------------------------------------------------------------------------
# where things go
# ---------------------------------------------------------------------------------------------------------------------


def default_data_dir() -> Path:
    home = Path.home()
    if WINDOWS:
        return Path(os.environ.get("LOCALAPPDATA") or home / "AppData" / "Local") / "ortfix"
    if MACOS:
        return home / "Library" / "Application Support" / "ortfix"
    xdg = os.environ.get("XDG_DATA_HOME", "")
    return (Path(xdg) if os.path.isabs(xdg) else home / ".local" / "share") / "ortfix"


def layout_for(opts: Options) -> Layout:
    data = Path(opts.data_dir).absolute() if opts.data_dir else default_data_dir()
    if opts.bin_dir:
        bin_dir = Path(opts.bin_dir).absolute()
    else:
        bin_dir = data / "bin" if WINDOWS else Path.home() / ".local" / "bin"
    return Layout(data=data, bin=bin_dir)


def default_source(find_links: Sequence[str], no_index: bool, here: Optional[Path] = None) -> str:
    """What to install when --source is not given: from a wheelhouse (or with --no-index), `ortfix` from there; else
    the ortfix checkout this script sits in, if it is one (an `ortfix` of the index would be somebody else's project
    name, not this code); else `ortfix` from the user's pip configuration."""
    if find_links or no_index:
        return "ortfix"
    root = (here or Path(__file__).resolve().parent).parent
    try:
        pyproject = (root / "pyproject.toml").read_text(encoding="utf-8")
    except OSError:
        return "ortfix"
    is_ortfix = re.search(r'^name\s*=\s*"ortfix"\s*$', pyproject, re.M) and (root / "src" / "ortfix").is_dir()
    return str(root) if is_ortfix else "ortfix"


def source_spec(source: str) -> str:
    """A wheel or a checkout given as a path is passed to pip as an absolute path; anything else is a requirement.
    One starting with '-' is refused: pip would read it as an option (`--source=--editable=...`)."""
    if source.startswith("-"):
        raise Failure(f"--source {source}: not a requirement, a wheel or a folder (it starts with '-'; a file of that "
                      "name: ./" + source + ")", EXIT_USAGE)
    if os.path.sep in source or (os.altsep and os.altsep in source) or source.endswith(".whl") or source == ".":
        if not os.path.exists(source):
            raise Failure(f"--source {source}: no such file or folder", EXIT_USAGE)
        return str(Path(source).absolute())
    return source


def missing_folders(folder: Path) -> list[str]:
    """The folder and those of its parents that do not exist yet, deepest first (what an uninstall may remove)."""
    missing: list[str] = []
    while not folder.exists() and folder.parent != folder:
        missing.append(str(folder))
        folder = folder.parent
    return missing


def ensure_writable(folder: Path) -> None:
    """Make the folder and prove a file can be written there (a read-only mount or a full disk shows here)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=str(folder), prefix="ortfix-install-probe-")
        try:
            os.write(fd, b"x" * 4096)
            os.fsync(fd)
        finally:
            os.close(fd)
            os.unlink(probe)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise Failure(f"cannot write to {folder}: {reason}: make it writable (or free space), or choose another "
                      f"folder with --data-dir/--bin-dir", EXIT_NOT_WRITABLE) from None


def on_path(folder: Path) -> bool:
    wanted = os.path.normcase(os.path.abspath(str(folder)))
    return any(os.path.normcase(os.path.abspath(p)) == wanted for p in os.environ.get("PATH", "").split(os.pathsep)
               if p)


# ---------------------------------------------------------------------------------------------------------------------
# the install record
# ---------------------------------------------------------------------------------------------------------------------


def read_state(layout: Layout) -> Optional[dict[str, object]]:
    """The record of an earlier install, checked strictly (it is read back from disk); None when there is none."""
    path = layout.state_file
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise Failure(f"{path} cannot be read ({exc}): remove it and what it names by hand", EXIT_USAGE) from None
    types = {"schema": str, "method": str, "source": str, "find_links": list, "no_index": bool, "version": str,
             "link": str, "made_folders": list}
    ok = isinstance(doc, dict) and all(isinstance(doc.get(k), t) for k, t in types.items())
    if not ok or doc["schema"] != STATE_SCHEMA or doc["method"] not in ("venv", "pipx") or \
            not all(isinstance(f, str) for f in doc["find_links"] + doc["made_folders"]):
        raise Failure(f"{path} is not an install record this script wrote: remove it and what it names by hand",
                      EXIT_USAGE)
    return dict(doc)


def write_state(layout: Layout, opts: Options, method: str, version: str, link: Path, made: list[str],
                marker: Optional[str] = None) -> None:
    doc: dict[str, object] = {"schema": STATE_SCHEMA, "method": method, "source": opts.source,
                              "find_links": opts.find_links, "no_index": opts.no_index, "version": version,
                              "link": str(link), "made_folders": made}
    if method == "venv":
        doc["venv"] = str(layout.venv)
        doc["venv_marker"] = marker
    tmp = layout.state_file.with_name("install.json.tmp")
    try:
        tmp.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        os.replace(str(tmp), str(layout.state_file))
    except OSError as exc:
        raise Failure(f"cannot write {layout.state_file}: {exc.strerror or exc}", EXIT_NOT_WRITABLE) from None


def made_folders(state: Optional[dict[str, object]], made: list[str]) -> list[str]:
    """The folders this installer made, over every run (kept until the uninstall)."""
    earlier = state["made_folders"] if state is not None else []
    assert isinstance(earlier, list)  # read_state checked it: a list of str
    return [*made, *(str(f) for f in earlier if f not in made)]


def remove_empty(folders: list[str]) -> None:
    """Remove each folder that is empty, deepest first; any other is left alone."""
    for folder in sorted(folders, key=len, reverse=True):
        with contextlib.suppress(OSError):
            os.rmdir(folder)


def same_request(state: Optional[dict[str, object]], opts: Options, method: str) -> bool:
    return state is not None and state["method"] == method and state["source"] == opts.source and \
        state["find_links"] == opts.find_links and state["no_index"] == opts.no_index


# ---------------------------------------------------------------------------------------------------------------------
# a wheelhouse made by `ortfix wheelhouse`
# ---------------------------------------------------------------------------------------------------------------------


def manifest_entries(folder: str) -> Optional[list[dict[str, object]]]:
    """The files the manifest in `folder` lists (None: the folder holds none), checked strictly: it is untrusted."""
    path = os.path.join(folder, MANIFEST)
    if not os.path.lexists(path):
        return None
    bad = f"{path} is not a wheelhouse manifest of ortfix: make the wheelhouse again into an empty folder " \
          f"(ortfix wheelhouse -d DIR)"
    try:
        if os.path.islink(path) or not os.path.isfile(path) or os.path.getsize(path) > 16 << 20:
            raise Failure(bad, EXIT_USAGE)
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError, RecursionError):
        raise Failure(bad, EXIT_USAGE) from None
    files = doc.get("files") if isinstance(doc, dict) and doc.get("schema") == MANIFEST_SCHEMA else None
    if not isinstance(files, list):
        raise Failure(bad, EXIT_USAGE)
    for entry in files:
        ok = isinstance(entry, dict) and isinstance(entry.get("for_ortfix"), bool) and all(
            isinstance(entry.get(k), str) and re.match(pattern, str(entry[k])) for k, pattern in (
                ("distribution", r"^[A-Za-z0-9_.]+\Z"), ("version", r"^[A-Za-z0-9_.+!]+\Z"),
                ("sha256", r"^[0-9a-f]{64}\Z")))
        if not ok:
            raise Failure(bad, EXIT_USAGE)
    return files


def hashed_requirements(find_links: Sequence[str]) -> Optional[str]:
    """For find-links folders made by `ortfix wheelhouse`: a requirements file's text pinning ortfix and its
    dependencies to the manifests' files by sha256; None when no folder holds a manifest."""
    pins: dict[str, list[str]] = {}
    found = False
    for folder in find_links:
        entries = manifest_entries(folder)
        found = found or entries is not None
        for entry in entries or []:
            if entry["for_ortfix"]:
                pins.setdefault(f"{entry['distribution']}=={entry['version']}", []).append(str(entry["sha256"]))
    if not found:
        return None
    if not any(pin.lower().startswith("ortfix==") for pin in pins):
        raise Failure(f"the wheelhouse {' '.join(find_links)} has no ortfix (its {MANIFEST} says why, "
                      f"`ortfix_missing`): install ortfix from a wheel you bring with --source FILE, without the "
                      f"wheelhouse", EXIT_USAGE)
    return "".join(f"{pin} " + " ".join(f"--hash=sha256:{h}" for h in hashes) + "\n"
                   for pin, hashes in sorted(pins.items()))


# ---------------------------------------------------------------------------------------------------------------------
# running things
# ---------------------------------------------------------------------------------------------------------------------


def capture(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, errors="replace", check=False)
    except OSError as exc:
        return subprocess.CompletedProcess(list(argv), 127, f"{argv[0]}: {exc.strerror or exc}\n")


def last_line(output: str) -> str:
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    errors = [ln[len("ERROR:"):].strip() for ln in lines if ln.startswith("ERROR:")]
    return errors[-1] if errors else (lines[-1] if lines else "no output")


def pip_failure(what: str, proc: subprocess.CompletedProcess[str]) -> Failure:
    """pip's failure summarised in one line, with what to do."""
    output = proc.stdout or ""
    reason = last_line(output)
    if any(mark in output for mark in UNREACHABLE_MARKS):
        reason += "; the package index could not be reached"
    return Failure(f"{what} failed: {reason}: check the network and your pip configuration (`pip config list`), or "
                   f"install offline with --no-index --find-links DIR", EXIT_PIP)


def ortfix_version(exe: Path) -> Optional[str]:
    """`ortfix --version` of an install, or None when it does not start."""
    if not exe.is_file():
        return None
    proc = capture([str(exe), "--version"])
    words = (proc.stdout or "").split()
    if proc.returncode != 0 or "version" not in words or words.index("version") + 1 >= len(words):
        return None
    return words[words.index("version") + 1]


# ---------------------------------------------------------------------------------------------------------------------
# the venv install
# ---------------------------------------------------------------------------------------------------------------------


def link_state(layout: Layout) -> Optional[bool]:
    """None: nothing at the link's place; True: the link (or shim) this script makes; False: something else."""
    link = layout.link
    if not os.path.lexists(str(link)):
        return None
    if WINDOWS:
        try:
            return link.is_file() and link.read_bytes() == layout.shim().encode()
        except OSError:
            return False
    return link.is_symlink() and os.readlink(str(link)) == str(layout.venv_ortfix)


NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)  # Windows has none (and no symbolic links a user makes by accident)


def write_marker(layout: Layout) -> str:
    """Mark the venv just made as this installer's: a random token in a new file inside it (recorded in install.json
    too), so that a venv of the user's at the same place is never taken for ours."""
    token = secrets.token_hex(16)
    try:
        fd = os.open(str(layout.marker), os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW, 0o644)
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(token + "\n")
    except OSError as exc:
        raise Failure(f"cannot write {layout.marker}: {exc.strerror or exc}", EXIT_NOT_WRITABLE) from None
    return token


def read_marker(layout: Layout) -> Optional[str]:
    """The token of the marker file, if it is one (a regular file holding one): read as data, never followed."""
    try:
        fd = os.open(str(layout.marker), os.O_RDONLY | NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None
        text = f.read(100).decode("ascii", "replace").strip()
    return text if re.fullmatch(r"[0-9a-f]{32}", text) else None


def has_ortfix(layout: Layout) -> bool:
    """ortfix is installed in the venv: its command and its distribution's metadata are there."""
    site = "Lib/site-packages" if WINDOWS else "lib/python3*/site-packages"
    return layout.venv_ortfix.is_file() and any(layout.venv.glob(f"{site}/ortfix-*.dist-info"))


def venv_state(layout: Layout, state: Optional[dict[str, object]]) -> Optional[bool]:
    """None: nothing at <data>/venv; True: the venv this installer made (install.json names it, the marker inside it
    holds the token the record holds, and ortfix is installed there); False: anything else, e.g. a venv of the
    user's, which is never installed into nor removed."""
    if not os.path.lexists(str(layout.venv)):
        return None
    if state is None or state["method"] != "venv" or state.get("venv") != str(layout.venv) or \
            layout.venv.is_symlink() or not layout.venv.is_dir():
        return False
    token = state.get("venv_marker")
    return isinstance(token, str) and read_marker(layout) == token and has_ortfix(layout)


def foreign_venv(layout: Layout, remedy: str) -> Failure:
    return Failure(f"{layout.venv} is not the venv this installer made (no marker of it inside that matches "
                   f"{layout.state_file}, or no ortfix in it): nothing was changed; {remedy}", EXIT_FOREIGN)


def venv_remedy() -> str:
    if WINDOWS:
        return "install Python from python.org (it has them) or pipx"
    if MACOS:
        return "install Python from python.org or Homebrew, or pipx"
    return "install them (Debian/Ubuntu: `apt install python3-venv`) or pipx"


def require_venv_module() -> None:
    try:
        import ensurepip  # noqa: F401
        import venv  # noqa: F401
    except ImportError as exc:
        raise Failure(f"this Python ({sys.executable}) cannot create virtual environments with pip ({exc}; the "
                      f"venv and ensurepip modules are needed): {venv_remedy()}, then run this again",
                      EXIT_NO_VENV) from None


def bundled_pip() -> Optional[Path]:
    """The pip wheel ensurepip carries (None where a distribution keeps it elsewhere, as Debian does): pip run from
    it installs into a venv made without pip, which saves ensurepip's install of pip (seconds; most of a minute under
    wine). ortfix's own environment needs no pip: ortfix runs the target's."""
    try:
        import ensurepip
    except ImportError:
        return None
    wheels = sorted(Path(ensurepip.__file__).parent.glob("_bundled/pip-*.whl"))
    return wheels[-1] if wheels else None


def pip_command(layout: Layout) -> list[str]:
    """How to run pip for the venv: its own pip if it has one, else pip from ensurepip's wheel."""
    if (layout.venv_python.parent / ("pip.exe" if WINDOWS else "pip")).exists():
        return [str(layout.venv_python), "-m", "pip"]
    wheel = bundled_pip()
    if wheel is None:
        raise Failure(f"{layout.venv} has no pip and this Python carries none: remove {layout.venv} and run this "
                      f"again", EXIT_NO_VENV)
    return [str(layout.venv_python), str(wheel / "pip")]


def create_venv(layout: Layout) -> None:
    say(f"creating a virtual environment at {layout.venv}")
    without_pip = ["--without-pip"] if bundled_pip() is not None else []
    proc = capture([sys.executable, "-m", "venv", *without_pip, str(layout.venv)])
    if proc.returncode != 0:
        shutil.rmtree(str(layout.venv), ignore_errors=True)
        output = proc.stdout or ""
        if "ensurepip" in output:
            raise Failure(f"`{sys.executable} -m venv` cannot install pip (ensurepip is not available): "
                          f"{venv_remedy()}, then run this again", EXIT_NO_VENV)
        raise Failure(f"`{sys.executable} -m venv {layout.venv}` failed: {last_line(output)}", EXIT_NO_VENV)


def make_link(layout: Layout) -> None:
    if link_state(layout):
        return
    try:
        if WINDOWS:
            layout.link.write_bytes(layout.shim().encode())
        else:
            os.symlink(str(layout.venv_ortfix), str(layout.link))
    except OSError as exc:
        raise Failure(f"cannot create {layout.link}: {exc.strerror or exc}", EXIT_NOT_WRITABLE) from None


def pip_install_ortfix(opts: Options, layout: Layout, fresh: bool, hashed: Optional[str]) -> str:
    """pip installs ortfix into the venv (reinstalls, in one that has it); the version that starts. `hashed`: the
    requirements file's text that pins everything to a wheelhouse's manifest (pip's hash-checking mode)."""
    argv = [*pip_command(layout), "install", "--disable-pip-version-check", *opts.pip_args()]
    if not fresh:
        argv += ["--upgrade", "--force-reinstall"]
    with tempfile.TemporaryDirectory(prefix="ortfix-install-") as private:
        if hashed is None:
            argv.append(opts.source)
        else:
            pinned = os.path.join(private, "ortfix-requirements.txt")
            with open(pinned, "w", encoding="utf-8") as f:
                f.write(hashed)
            argv += ["--require-hashes", "-r", pinned]
        say(f"installing {opts.source} with pip: {command_line(argv)}")
        proc = capture(argv)
    if proc.returncode != 0:
        raise pip_failure(f"pip install {opts.source}", proc)
    version = ortfix_version(layout.venv_ortfix)
    if version is None:
        raise Failure(f"{layout.venv_ortfix} was installed but does not start: {last_line(proc.stdout or '')}",
                      EXIT_PIP)
    return version


def install_venv(opts: Options, layout: Layout, state: Optional[dict[str, object]],
                 hashed: Optional[str] = None) -> Path:
    """Install (or find already installed) ortfix in its own venv; the path of its `ortfix`. Only into a venv this
    installer made (see venv_state): any other folder at <data>/venv is left alone (exit 7)."""
    ours = venv_state(layout, state)
    if ours is False:
        raise foreign_venv(layout, "move it away, or choose another folder with --data-dir DIR")
    if not opts.upgrade and same_request(state, opts, "venv") and link_state(layout):
        version = ortfix_version(layout.venv_ortfix)
        if version is not None:
            say(f"already installed: ortfix {version} at {layout.link} (nothing changed; --upgrade reinstalls)")
            return layout.venv_ortfix
    if link_state(layout) is False:
        raise Failure(f"{layout.link} exists and was not made by this installer: move it away, or put the link "
                      f"elsewhere with --bin-dir DIR", EXIT_FOREIGN)
    fresh = ours is None
    if fresh:
        require_venv_module()
    made = [*missing_folders(layout.bin), *missing_folders(layout.data)]
    ensure_writable(layout.data)
    ensure_writable(layout.bin)
    if fresh:
        create_venv(layout)
    had_link = link_state(layout) is not None
    try:
        marker = write_marker(layout) if fresh else str((state or {}).get("venv_marker"))
        version = pip_install_ortfix(opts, layout, fresh, hashed)
        make_link(layout)
        write_state(layout, opts, "venv", version, layout.link, made_folders(state, made), marker)
    except BaseException:
        if fresh:  # leave nothing behind (a failure or an interruption before the record names the venv)
            shutil.rmtree(str(layout.venv), ignore_errors=True)
            if not had_link and link_state(layout):
                with contextlib.suppress(OSError):
                    layout.link.unlink()
            remove_empty(made)
        raise
    say(f"installed ortfix {version} at {layout.link} (its environment: {layout.venv})")
    if not on_path(layout.bin):
        if WINDOWS:
            say(f"add {layout.bin} to your user Path (Settings > System > About > Advanced system settings > "
                f"Environment Variables), then open a new terminal; until then run {layout.link}")
        else:
            export = f'export PATH={quote(str(layout.bin))}:"$PATH"'  # the folder single-quoted: inert when pasted
            say(f"{layout.bin} is not on PATH: add it (e.g. `{export}` in ~/.profile), or run {layout.link}")
    return layout.venv_ortfix


# ---------------------------------------------------------------------------------------------------------------------
# the pipx install
# ---------------------------------------------------------------------------------------------------------------------


def pipx_bin_dir(pipx: str) -> Path:
    proc = capture([pipx, "environment", "--value", "PIPX_BIN_DIR"])
    value = (proc.stdout or "").strip().splitlines()
    if proc.returncode == 0 and value and os.path.isabs(value[-1]):
        return Path(value[-1])
    return Path(os.environ.get("PIPX_BIN_DIR") or Path.home() / ".local" / "bin")


def install_pipx(opts: Options, layout: Layout, state: Optional[dict[str, object]], pipx: str) -> Path:
    exe = pipx_bin_dir(pipx) / ("ortfix.exe" if WINDOWS else "ortfix")
    if not opts.upgrade and same_request(state, opts, "pipx"):
        version = ortfix_version(exe)
        if version is not None:
            say(f"already installed: ortfix {version} at {exe} (with pipx; nothing changed; --upgrade reinstalls)")
            return exe
    made = missing_folders(layout.data)
    ensure_writable(layout.data)
    argv = [pipx, "install"]
    if state is not None or opts.upgrade:
        argv.append("--force")
    if opts.pip_args():
        join = subprocess.list2cmdline if WINDOWS else (lambda a: " ".join(shlex.quote(x) for x in a))
        argv.append("--pip-args=" + join(opts.pip_args()))
    argv.append(opts.source)
    say(f"installing {opts.source} with pipx: {command_line(argv)}")
    proc = capture(argv)
    if proc.returncode != 0:
        raise pip_failure(f"pipx install {opts.source}", proc)
    if "already seems to be installed" in (proc.stdout or ""):
        raise Failure("pipx already has an ortfix this installer did not install: `pipx uninstall ortfix` first, or "
                      "pass --upgrade to replace it", EXIT_FOREIGN)
    version = ortfix_version(exe)
    if version is None:
        raise Failure(f"pipx installed ortfix but {exe} does not start: {last_line(proc.stdout or '')}", EXIT_PIP)
    write_state(layout, opts, "pipx", version, exe, made_folders(state, made))
    say(f"installed ortfix {version} at {exe} (with pipx)")
    return exe


# ---------------------------------------------------------------------------------------------------------------------
# uninstall
# ---------------------------------------------------------------------------------------------------------------------


def uninstall(opts: Options, layout: Layout) -> int:
    state = read_state(layout)
    if state is None:
        say(f"nothing to uninstall: no {layout.state_file} (ortfix was not installed here by this installer)")
        return EXIT_OK
    removed: list[str] = []
    try:
        if state["method"] == "pipx":
            pipx = shutil.which("pipx")
            if pipx is None:
                raise Failure("ortfix was installed with pipx, which is no longer on PATH: put it back on PATH and "
                              "run this again (or `pipx uninstall ortfix`)", EXIT_USAGE)
            proc = capture([pipx, "uninstall", "ortfix"])
            if proc.returncode != 0 and "is not installed" not in (proc.stdout or ""):
                raise Failure(f"pipx uninstall ortfix failed: {last_line(proc.stdout or '')}", EXIT_PIP)
            removed.append("ortfix (pipx)")
        else:
            if state.get("venv") != str(layout.venv) or state["link"] != str(layout.link):
                raise Failure(f"{layout.state_file} names other paths than this installer's ({layout.venv}, "
                              f"{layout.link}): pass the same --data-dir/--bin-dir as when installing",
                              EXIT_USAGE)
            venv = venv_state(layout, state)
            if venv is False:  # checked before anything is removed: a venv not verifiably ours stays whole
                raise foreign_venv(layout, "move it away (it is not removed), then run --uninstall again")
            ours = link_state(layout)
            if ours:
                layout.link.unlink()
                removed.append(str(layout.link))
            elif ours is False:
                say(f"left {layout.link} alone: it is not the link this installer made")
            if venv:
                shutil.rmtree(str(layout.venv))
                removed.append(str(layout.venv))
        layout.state_file.unlink()
        removed.append(str(layout.state_file))
        # the folders the install made, if nothing else lives there now (ortfix's cache on Windows stays)
        mine = (str(layout.data), str(layout.bin))
        remove_empty([f for f in made_folders(state, []) if any(m == f or m.startswith(f + os.sep) for m in mine)])
    except OSError as exc:
        raise Failure(f"cannot remove {exc.filename or layout.data}: {exc.strerror or exc}",
                      EXIT_NOT_WRITABLE) from None
    say("uninstalled ortfix: removed " + ", ".join(removed))
    return EXIT_OK


# ---------------------------------------------------------------------------------------------------------------------
# after the install: check, plan, apply
# ---------------------------------------------------------------------------------------------------------------------


def run_ortfix(exe: Path, *args: str) -> int:
    sys.stdout.flush()
    return subprocess.run([str(exe), *args], check=False).returncode


def ask(question: str) -> bool:
    if not sys.stdin.isatty():
        return False
    try:
        return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")
    except EOFError:
        return False


def same_file(path: str, other: Path) -> bool:
    try:
        return os.path.samefile(path, str(other))
    except OSError:
        return False


def command_name(exe: Path, ours: Sequence[Path]) -> str:
    """How the commands shown name ortfix: `ortfix` when that finds this install on the user's PATH; else its full
    path, with one line when another `ortfix` comes first on PATH (a command naming `ortfix` would run that one)."""
    found = shutil.which("ortfix")
    if found is not None and any(same_file(found, path) for path in ours):
        return "ortfix"
    if found is not None:
        say(f"warning: another ortfix comes first on PATH: {found}; the commands shown here name this one by its "
            f"full path, {exe}")
    return str(exe)


@dataclass(frozen=True)
class Target:
    """The interpreter ortfix checked, as its `--json` document names it."""

    python: str
    environment: str  # venv, conda or system


def checked_target(exe: Path, target: Sequence[str]) -> Optional[Target]:
    """The `interpreter` of `ortfix check --json` (its document is read as data: a path and a known kind, else
    None, as for an ortfix too old to say)."""
    try:
        proc = subprocess.run([str(exe), "check", "--json", *target], stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, errors="replace",
                              check=False)
        doc = json.loads(proc.stdout)
    except (OSError, ValueError, RecursionError):
        return None
    interpreter = doc.get("interpreter") if isinstance(doc, dict) else None
    if not isinstance(interpreter, dict):
        return None
    python, environment = interpreter.get("python"), interpreter.get("environment")
    if isinstance(python, str) and os.path.isabs(python) and environment in ("venv", "conda", "system"):
        return Target(python, str(environment))
    return None


def after_install(exe: Path, prog: str, opts: Options) -> int:
    """`ortfix check`, then the plan when something is wrong, then the apply (asked, or with --yes) or the exact
    command that applies it. `prog` is how the commands shown name ortfix (see command_name)."""
    target = ["--python", opts.python] if opts.python else []
    shown = command_line([prog, "check", *target])
    if not opts.check:
        say(f"next: {shown}")
        return EXIT_OK
    say(f"running {shown}")
    code = run_ortfix(exe, "check", *target)
    if code >= 2:
        raise Failure(f"ortfix is installed, but `{shown}` could not run (exit {code}, see above)", EXIT_AFTER)
    if MACOS:
        say("on macOS ortfix checks only: GPU fixes (plan, apply) are for Linux and Windows")
        return EXIT_OK
    if code == 0:
        return EXIT_OK
    code = run_ortfix(exe, "plan", *target)
    if code == 0:
        return EXIT_OK
    if code >= 2:
        raise Failure(f"ortfix is installed, but `{command_line([prog, 'plan', *target])}` could not run (exit "
                      f"{code}, see above)", EXIT_AFTER)
    return offer_apply(exe, prog, opts, checked_target(exe, target))


def offer_apply(exe: Path, prog: str, opts: Options, checked: Optional[Target]) -> int:
    """Apply the plan shown (--yes, or yes at the prompt), or show the command that applies it: one that runs, for
    the interpreter the plan was made for (named with --python, since PATH may differ when it is pasted)."""
    python = opts.python or (checked.python if checked else None)
    target = ["--python", python] if python else []
    if checked is not None and checked.environment == "system":
        return system_target(prog, checked.python, target, opts)
    apply = [prog, "apply", *target, "--yes"]
    if opts.yes or ask("Apply this plan now (one transaction, undone by `ortfix rollback`)?"):
        code = run_ortfix(exe, *apply[1:])
        if code != 0:
            raise Failure(f"`{command_line(apply)}` did not succeed (exit {code}, see above)", EXIT_AFTER)
        return EXIT_OK
    say("to apply this plan: " + command_line(apply))
    return EXIT_OK


def system_target(prog: str, python: str, target: Sequence[str], opts: Options) -> int:
    """The plan is for a system Python, which `ortfix apply` changes only with --system (every program that uses it
    sees the change): --yes does not imply that and the prompt does not offer it; the command that does is shown."""
    anyway = command_line([prog, "apply", *target, "--system", "--yes"])
    venv = (f"better, make a venv for your application (`{command_line([python, '-m', 'venv', 'DIR'])}`, install "
            f"it there) and run `{command_line([prog, 'check', '--python', 'DIR'])}`")
    if opts.yes:
        raise Failure(f"ortfix is installed, but {python} is a system Python, which --yes does not change (ortfix "
                      f"changes one only with --system): to apply this plan to it anyway: {anyway}; {venv}",
                      EXIT_AFTER)
    say(f"{python} is a system Python: ortfix changes it only with --system, since every program that uses it sees "
        f"the change; {venv}")
    say(f"to apply this plan to the system Python anyway: {anyway}")
    return EXIT_OK


# ---------------------------------------------------------------------------------------------------------------------
# the command line
# ---------------------------------------------------------------------------------------------------------------------


def parse(argv: Sequence[str]) -> Options:
    parser = argparse.ArgumentParser(
        prog="install.sh / install.ps1 / bootstrap.py",
        description="Install ortfix into an environment of its own (pipx when present, else a venv under your data "
                    "folder), put `ortfix` on PATH, then run `ortfix check` and show the plan that would fix it.",
        epilog="Exit codes: 0 done; 2 bad arguments; 3 no Python 3.9+; 4 no venv module; 5 pip could not install "
               "ortfix; 6 a folder is read-only or full; 7 an `ortfix` link or a <data>/venv not made by this "
               "installer is in the way; 8 check/plan/apply after the install did not succeed (or --yes met a "
               "system Python).")
    parser.add_argument("--uninstall", action="store_true", help="remove what this installer installed, and only that")
    parser.add_argument("--source", metavar="SPEC",
                        help="what to install as ortfix: a requirement, a wheel file or a checkout folder (default: "
                             "`ortfix` from --find-links/--no-index when given, else the ortfix checkout this "
                             "script is in, else `ortfix` from your pip configuration)")
    parser.add_argument("--find-links", action="append", default=[], metavar="DIR",
                        help="a wheelhouse folder to install from (repeatable; passed to pip)")
    parser.add_argument("--no-index", action="store_true", help="do not use any package index (passed to pip)")
    parser.add_argument("--upgrade", action="store_true", help="reinstall even if the same ortfix is installed")
    parser.add_argument("--python", metavar="TARGET",
                        help="the interpreter or environment `ortfix check` looks at afterwards (default: ortfix's "
                             "own rule: the activated environment, else python3 on PATH)")
    parser.add_argument("--no-check", dest="check", action="store_false", help="install only; run no check")
    parser.add_argument("--yes", action="store_true",
                        help="after showing the plan, apply it (`ortfix apply --yes`); without it the plan is shown "
                             "and applied only if you say so at the prompt")
    parser.add_argument("--no-pipx", dest="use_pipx", action="store_false",
                        help="use a venv of its own even when pipx is on PATH")
    parser.add_argument("--data-dir", metavar="DIR", help="where the venv and install record go (default: your "
                                                          "user data folder + /ortfix)")
    parser.add_argument("--bin-dir", metavar="DIR", help="where the `ortfix` link goes (default: ~/.local/bin; "
                                                         "Windows: <data>\\bin)")
    ns = parser.parse_args(list(argv))
    find_links = [str(Path(f).absolute()) for f in ns.find_links]
    source = ns.source if ns.source is not None else default_source(find_links, ns.no_index)
    return Options(uninstall=ns.uninstall, source=source, find_links=find_links,
                   no_index=ns.no_index, python=ns.python, check=ns.check, yes=ns.yes, upgrade=ns.upgrade,
                   use_pipx=ns.use_pipx, data_dir=ns.data_dir, bin_dir=ns.bin_dir)


def run(argv: Sequence[str]) -> int:
    if sys.version_info < MIN_PYTHON:
        raise Failure(f"{sys.executable} is Python {sys.version.split()[0]}; ortfix needs Python 3.9 or newer: run "
                      f"this with a newer one", EXIT_PYTHON)
    opts = parse(argv)
    if not opts.uninstall:  # a wheel or checkout is recorded (and compared on the next run) by its absolute path
        opts = dataclasses.replace(opts, source=source_spec(opts.source))
    layout = layout_for(opts)
    if opts.uninstall:
        return uninstall(opts, layout)
    state = read_state(layout)
    for folder in opts.find_links:
        if not os.path.isdir(folder):
            raise Failure(f"--find-links {folder}: no such folder", EXIT_USAGE)
    hashed = hashed_requirements(opts.find_links)
    if hashed is not None and opts.source != "ortfix":
        raise Failure(f"--source {opts.source} with a wheelhouse made by ortfix: from there only what its manifest "
                      f"lists is installed, checked by hash; leave out --source", EXIT_USAGE)
    pipx = shutil.which("pipx") if opts.use_pipx and hashed is None else None
    if state is not None and state["method"] == "venv" and pipx is not None:
        pipx = None  # stay where the earlier install is
    if hashed is not None and state is not None and state["method"] == "pipx":
        raise Failure("ortfix was installed here with pipx, which cannot check a wheelhouse's hashes: run this with "
                      "--uninstall first (the wheelhouse install goes into a venv of its own)", EXIT_USAGE)
    exe = install_pipx(opts, layout, state, pipx) if pipx else install_venv(opts, layout, state, hashed)
    ours = [exe] if pipx else [exe, layout.link]  # on Windows PATH finds the link, a shim, not the venv's ortfix.exe
    return after_install(exe, command_name(exe, ours), opts)


def main() -> int:
    try:
        return run(sys.argv[1:])
    except Failure as failure:
        sys.stdout.flush()
        print(printable(f"{PROG}: error: {failure.message}"), file=sys.stderr)
        return failure.code
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
