"""The installer scripts for real: `sh scripts/install.sh` (thin) running `scripts/bootstrap.py` (all the logic) with
a real interpreter, real venv and pip, real ortfix, offline.

A wheelhouse with ortfix (built from this checkout) and its dependencies is made once, with this machine's pip
configuration, and cached under the test cache folder keyed by a hash of the files that go into the wheel. Every
install afterwards is offline: `--no-index --find-links DIR`, PIP_CONFIG_FILE pointing to an empty file, a fresh HOME
and cache folder in tmp, a PATH that holds a `python3` (this test interpreter's real binary) and the system tools but
no pipx. The Windows path runs bootstrap.py with the Windows CPython under wine; install.ps1 (no PowerShell here) is
checked as text: it must stay a thin finder of Python.
"""

from __future__ import annotations

import hashlib
import os
import pty
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from clitools import REPO
from support.fixtures import base_python, pip_install
from support.testcache import cache_root, locked
from txtools import assert_same_tree, fresh_process, load_code, tree_state
from wintools import ORTFIX_WIN_DEPS, PY_VERSION, to_windows, win_python

INSTALL_SH = REPO / "scripts" / "install.sh"
INSTALL_PS1 = REPO / "scripts" / "install.ps1"
BOOTSTRAP = REPO / "scripts" / "bootstrap.py"
_VERSION = re.search(r'^version = "([^"]+)"', (REPO / "pyproject.toml").read_text(), re.M)
assert _VERSION is not None
VERSION = _VERSION.group(1)
CACHE_VERSION = "2"
LINUX_DEPS = ("click>=8.1", "packaging>=23", "PyYAML>=6", "pyelftools>=0.30", "platformdirs>=3", "pefile>=2023.2.7")




def _source_hash() -> str:
    """What goes into ortfix's wheel: src/, compat/, pyproject.toml and README.md (the wheel's description)."""
    digest = hashlib.sha256()
    files = [REPO / "pyproject.toml", REPO / "README.md", *sorted((REPO / "src").rglob("*")),
             *sorted((REPO / "compat").rglob("*"))]
    for path in files:
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _pip(*args: str) -> None:
    """pip with this machine's configuration (the only step that may need the index)."""
    proc = subprocess.run([sys.executable, "-m", "pip", *args, "--quiet", "--disable-pip-version-check"],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("ERROR")] or proc.stderr.splitlines() or ["?"]
        pytest.skip(f"cannot build the installer wheelhouse with this machine's pip configuration: {lines[-1]}")


@pytest.fixture(scope="module")
def wheelhouses() -> dict[str, Path]:
    """{"linux": DIR, "windows": DIR}: ortfix built from this checkout and its dependencies, for this Linux Python and
    for win_amd64 / CPython 3.11."""
    root = cache_root() / f"installer-wheelhouse-{CACHE_VERSION}-{_source_hash()}"
    with locked(cache_root() / "installer-wheelhouse.lock"):
        if not (root / "done").is_file():
            for old in cache_root().glob("installer-wheelhouse-*"):  # earlier source trees' (not in use this hour)
                if old.is_dir() and time.time() - old.stat().st_mtime > 3600:
                    shutil.rmtree(old, ignore_errors=True)
            _pip("wheel", "--no-deps", str(REPO), "-w", str(root / "linux"))
            # pip too: pipx upgrades its shared pip with the same --pip-args (an offline wheelhouse for pipx needs it)
            _pip("download", "-d", str(root / "linux"), *LINUX_DEPS, "pip")
            _pip("download", "-d", str(root / "windows"), "--platform", "win_amd64", "--only-binary=:all:",
                 "--python-version", PY_VERSION, *ORTFIX_WIN_DEPS)
            for wheel in (root / "linux").glob("ortfix-*.whl"):
                shutil.copy2(wheel, root / "windows")
            (root / "done").write_text("ok\n")
    return {"linux": root / "linux", "windows": root / "windows"}


class Box:
    """A fresh user: HOME, cache, an empty pip configuration and a PATH with python3 (and no pipx)."""

    def __init__(self, tmp: Path, pybin: Path | None = None) -> None:
        self.tmp = tmp
        self.home = tmp / "home"
        self.home.mkdir()
        if pybin is None:
            pybin = tmp / "pybin"
            pybin.mkdir()
            (pybin / "python3").symlink_to(os.path.realpath(sys.executable))
        (tmp / "pip.conf").write_text("")
        self.path = f"{pybin}:/usr/bin:/bin"
        if shutil.which("pipx", path=self.path):
            pytest.skip("pipx is installed system-wide here: the venv path cannot be tested with a clean PATH")
        self.env = {"HOME": str(self.home), "PATH": self.path, "PIP_CONFIG_FILE": str(tmp / "pip.conf"),
                    "XDG_CACHE_HOME": str(tmp / "cache"), "LANG": "C.UTF-8"}

    @property
    def data(self) -> Path:
        return self.home / ".local" / "share" / "ortfix"

    @property
    def bin(self) -> Path:
        return self.home / ".local" / "bin"

    def install_sh(self, *args: str, env: Mapping[str, str] | None = None,
                   timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["/bin/sh", str(INSTALL_SH), *args], capture_output=True, text=True,
                              env={**self.env, **(env or {})}, stdin=subprocess.DEVNULL, cwd=self.tmp,
                              timeout=timeout, check=False)


def one_line_failure(proc: subprocess.CompletedProcess[str], code: int, *fragments: str) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ortfix-install: error: "), proc.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def plain_venv(where: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, capture_output=True)
    return where / "bin" / "python"


# ---------------------------------------------------------------------------------------------------------------------
# install.sh on Linux: install, check, run again, uninstall
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_install_checks_is_idempotent_and_uninstalls_exactly(tmp_path: Path, wheelhouses: dict[str, Path]) -> None:
    box = Box(tmp_path)
    target = plain_venv(tmp_path / "app venv")
    box.bin.mkdir(parents=True)
    (box.bin / "other-tool").write_text("#!/bin/sh\necho mine\n")  # the user's: must survive everything
    home_before = tree_state(box.home)
    offline = ("--no-index", "--find-links", str(wheelhouses["linux"]))

    proc = box.install_sh(*offline, "--python", str(target))
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    link = box.bin / "ortfix"
    assert f"installed ortfix {VERSION} at {link}" in proc.stdout
    assert link.is_symlink() and Path(os.readlink(link)) == box.data / "venv" / "bin" / "ortfix"
    assert f"{box.bin} is not on PATH" in proc.stdout
    # `ortfix check` ran on the named target (a plain venv: no onnxruntime), then the plan and the apply command
    assert f"target {target} (Python" in proc.stdout and "ORT001" in proc.stdout
    assert "Nothing has been changed." in proc.stdout
    # ~/.local/bin is not on PATH: the command names this install's ortfix by its full path
    ours = box.data / "venv" / "bin" / "ortfix"
    assert f"to apply this plan: {ours} apply --python '{target}' --yes" in proc.stdout
    version = subprocess.run([str(link), "--version"], capture_output=True, text=True, check=False, env=box.env)
    assert version.returncode == 0 and version.stdout.split() == ["ortfix,", "version", VERSION], version

    data, binary = tree_state(box.data), tree_state(box.bin)
    # the second run on a terminal: the plan is shown and the installer asks; "n" applies nothing
    controller, terminal = pty.openpty()
    os.write(controller, b"n\n")
    try:
        again = subprocess.run(["/bin/sh", str(INSTALL_SH), *offline, "--python", str(target)], capture_output=True,
                               text=True, env=box.env, stdin=terminal, cwd=tmp_path, timeout=300, check=False)
    finally:
        os.close(terminal)
        os.close(controller)
    assert again.returncode == 0, (again.stdout[-3000:], again.stderr[-3000:])
    assert "Apply this plan now" in again.stdout and f"to apply this plan: {ours} apply" in again.stdout
    assert f"already installed: ortfix {VERSION} at {link}" in again.stdout
    assert "creating a virtual environment" not in again.stdout and "with pip:" not in again.stdout
    assert_same_tree(data, tree_state(box.data))
    assert_same_tree(binary, tree_state(box.bin))

    # another source (the wheel file itself) reinstalls into the same venv; the link stays
    [wheel] = wheelhouses["linux"].glob("ortfix-*.whl")
    other = box.install_sh(*offline, "--source", str(wheel), "--no-check")
    assert other.returncode == 0, (other.stdout[-3000:], other.stderr[-3000:])
    assert f"installing {wheel} with pip" in other.stdout and f"installed ortfix {VERSION} at {link}" in other.stdout
    assert "creating a virtual environment" not in other.stdout and os.readlink(link) == binary["ortfix"][1]

    gone = box.install_sh("--uninstall")
    assert gone.returncode == 0, (gone.stdout, gone.stderr)
    assert "uninstalled ortfix" in gone.stdout
    # everything it made is gone (~/.local/share too, which it created); the user's file is untouched
    assert_same_tree(home_before, tree_state(box.home))
    nothing = box.install_sh("--uninstall")
    assert nothing.returncode == 0 and "nothing to uninstall" in nothing.stdout


@pytest.mark.slow
def test_a_foreign_ortfix_in_the_link_place_is_left_alone(tmp_path: Path, wheelhouses: dict[str, Path]) -> None:
    box = Box(tmp_path)
    box.bin.mkdir(parents=True)
    (box.bin / "ortfix").write_text("#!/bin/sh\necho someone else's\n")
    before = tree_state(box.home)
    proc = box.install_sh("--no-index", "--find-links", str(wheelhouses["linux"]))
    one_line_failure(proc, 7, f"{box.bin / 'ortfix'} exists and was not made by this installer", "--bin-dir")
    assert_same_tree(before, tree_state(box.home))


@pytest.mark.slow
def test_yes_applies_the_plan_it_shows(tmp_path: Path, wheelhouses: dict[str, Path], wheelhouse: Path) -> None:
    # The CPU onnxruntime (a hermetic stub) in a venv with its own pip; the user's pip configuration is an offline
    # wheelhouse with the GPU build: `--yes` → check, plan, `ortfix apply --yes`, which swaps to the GPU build.
    target = tmp_path / "cpu venv"
    subprocess.run([sys.executable, "-m", "venv", str(target)], check=True, capture_output=True)
    python = target / "bin" / "python"
    pip_install(python, "onnxruntime==1.22.0", find_links=wheelhouse)
    box = Box(tmp_path)
    (tmp_path / "pip.conf").write_text(f"[global]\nno-index = true\nfind-links = {wheelhouse}\n")
    proc = box.install_sh("--find-links", str(wheelhouses["linux"]), "--python", str(python), "--yes")
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    assert "ORT" in proc.stdout and "Fingerprint" in proc.stdout  # the check's findings, then the plan
    assert "Applied transaction" in proc.stdout and "to apply this plan" not in proc.stdout
    provider = next(target.glob("lib/python3.*/site-packages/onnxruntime/capi/libonnxruntime_providers_cuda.so"))
    assert "all loaded" in fresh_process(python, load_code(provider)).stdout


# ---------------------------------------------------------------------------------------------------------------------
# what the installer takes for its own, and the commands it prints
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_venv_it_did_not_make_is_never_installed_into_nor_removed(tmp_path: Path,
                                                                    wheelhouses: dict[str, Path]) -> None:
    box = Box(tmp_path)
    offline = ("--no-index", "--find-links", str(wheelhouses["linux"]), "--no-check")
    # `--data-dir DIR` where DIR/venv is the user's own venv (a name with ESC and BEL: the one line escapes them)
    data = tmp_path / "user\x1b]0;title\x07data"
    plain_venv(data / "venv")
    (data / "venv" / "notes.txt").write_text("the user's\n")
    before = tree_state(data)
    for extra in ((), ("--upgrade",)):
        proc = box.install_sh("--data-dir", str(data), *offline, *extra)
        line = one_line_failure(proc, 7, "is not the venv this installer made", "--data-dir")
        assert "\x1b" not in proc.stdout + proc.stderr and "\x07" not in line, line
        assert "user\\x1b]0;title\\x07data" in line, line  # the folder named, its control characters escaped
        assert_same_tree(before, tree_state(data))
        assert not os.path.lexists(box.bin / "ortfix")

    # a venv the installer did make, replaced by the user's after the install: neither reinstalled nor removed
    mine = tmp_path / "mine"
    installed = box.install_sh("--data-dir", str(mine), *offline)
    assert installed.returncode == 0, (installed.stdout[-3000:], installed.stderr[-3000:])
    (mine / "venv").rename(tmp_path / "ours-aside")
    shutil.move(str(data / "venv"), mine / "venv")
    swapped, link = tree_state(mine), os.readlink(box.bin / "ortfix")
    one_line_failure(box.install_sh("--data-dir", str(mine), *offline, "--upgrade"), 7,
                     f"{mine / 'venv'} is not the venv this installer made")
    one_line_failure(box.install_sh("--data-dir", str(mine), "--uninstall"), 7,
                     f"{mine / 'venv'} is not the venv this installer made", "--uninstall again")
    assert_same_tree(swapped, tree_state(mine))
    assert os.readlink(box.bin / "ortfix") == link
    # its own venv back in place: the uninstall removes it (and only then)
    (mine / "venv").rename(tmp_path / "users-again")
    (tmp_path / "ours-aside").rename(mine / "venv")
    gone = box.install_sh("--data-dir", str(mine), "--uninstall")
    assert gone.returncode == 0 and f"removed {box.bin / 'ortfix'}, {mine / 'venv'}" in gone.stdout, gone
    assert not mine.exists() and (tmp_path / "users-again" / "notes.txt").read_text() == "the user's\n"


@pytest.mark.slow
def test_the_path_hint_is_inert_when_pasted(tmp_path: Path, wheelhouses: dict[str, Path]) -> None:
    box = Box(tmp_path)
    folder = tmp_path / "bin $(touch pwned) `touch pwned2` 'q' \"$HOME\""
    proc = box.install_sh("--no-index", "--find-links", str(wheelhouses["linux"]), "--no-check",
                          "--bin-dir", str(folder))
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    hint = re.search(r"is not on PATH: add it \(e\.g\. `(.*)` in ~/\.profile\)", proc.stdout)
    assert hint is not None, proc.stdout
    # pasted into sh as the line it is: nothing runs, and PATH starts with exactly that folder
    shell = subprocess.run(["/bin/sh", "-c", hint.group(1) + '\nprintf "%s" "$PATH"'], capture_output=True,
                           text=True, cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "HOME": str(box.home)},
                           check=False)
    assert shell.returncode == 0, shell
    assert shell.stdout == f"{folder}:/usr/bin:/bin", shell.stdout
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "pwned2").exists()
    version = subprocess.run([str(folder / "ortfix"), "--version"], capture_output=True, text=True, check=False)
    assert version.stdout.split() == ["ortfix,", "version", VERSION], version


@pytest.mark.slow
def test_another_ortfix_first_on_path_is_named_and_never_run(tmp_path: Path, wheelhouses: dict[str, Path]) -> None:
    box = Box(tmp_path)
    target = plain_venv(tmp_path / "app")
    other = tmp_path / "tools" / "ortfix"  # e.g. an older ortfix in /usr/local/bin, first on the user's PATH
    other.parent.mkdir()
    other.write_text(f"#!/bin/sh\ntouch {tmp_path / 'other-ran'}\necho 'ortfix, version 0.0.1'\n")
    other.chmod(0o755)
    offline = ("--no-index", "--find-links", str(wheelhouses["linux"]), "--python", str(target))
    env = {"PATH": f"{other.parent}:{box.bin}:{box.path}"}
    proc = box.install_sh(*offline, env=env)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    ours = box.data / "venv" / "bin" / "ortfix"
    warnings = [ln for ln in proc.stdout.splitlines() if "another ortfix comes first on PATH" in ln]
    assert len(warnings) == 1 and str(other) in warnings[0] and str(ours) in warnings[0], proc.stdout
    apply = re.search(r"^ortfix-install: to apply this plan: (.*)$", proc.stdout, re.M)
    assert apply is not None, proc.stdout
    argv = shlex.split(apply.group(1))
    assert argv == [str(ours), "apply", "--python", str(target), "--yes"], argv
    version = subprocess.run([argv[0], "--version"], capture_output=True, text=True, env={**box.env, **env},
                             check=False)
    assert version.stdout.split() == ["ortfix,", "version", VERSION], version
    assert not (tmp_path / "other-ran").exists()
    # with this install's link first on PATH, `ortfix` is this one: named so, no warning
    first = box.install_sh(*offline, env={"PATH": f"{box.bin}:{other.parent}:{box.path}"})
    assert first.returncode == 0, (first.stdout[-3000:], first.stderr[-3000:])
    assert "another ortfix" not in first.stdout
    assert f"to apply this plan: ortfix apply --python {target} --yes" in first.stdout, first.stdout
    assert not (tmp_path / "other-ran").exists()


@pytest.mark.slow
def test_a_system_python_gets_a_command_that_applies(tmp_path: Path, wheelhouses: dict[str, Path],
                                                     wheelhouse: Path) -> None:
    # python3 on PATH is a Python installation of its own, not a venv (what ortfix calls a system Python), with pip
    # and the CPU onnxruntime; the user's pip configuration is an offline wheelhouse with the GPU build
    python = base_python(tmp_path)
    if python is None:
        pytest.skip(f"the test interpreter's base ({sys.base_prefix}) is not a self-contained installation to copy")
    subprocess.run([str(python), "-m", "ensurepip"], check=True, capture_output=True)
    pip_install(python, "onnxruntime==1.22.0", find_links=wheelhouse)
    site = next((tmp_path / "base" / "lib").glob("python3.*/site-packages"))
    box = Box(tmp_path, pybin=python.parent)
    (tmp_path / "pip.conf").write_text(f"[global]\nno-index = true\nfind-links = {wheelhouse}\n")
    offline = ("--find-links", str(wheelhouses["linux"]))

    # --yes does not change a system Python: one line saying how to, exit 8, nothing changed there
    dists = sorted(p.name for p in site.glob("*.dist-info"))
    proc = box.install_sh(*offline, "--yes")
    one_line_failure(proc, 8, "is a system Python", "--system")
    assert "Applied transaction" not in proc.stdout
    assert sorted(p.name for p in site.glob("*.dist-info")) == dists

    # without --yes the plan ends with a command that applies it; run as printed, it does
    shown = box.install_sh(*offline)
    assert shown.returncode == 0, (shown.stdout[-3000:], shown.stderr[-3000:])
    apply = re.search(r"^ortfix-install: to apply this plan to the system Python anyway: (.*)$", shown.stdout, re.M)
    assert apply is not None, shown.stdout
    done = subprocess.run(["/bin/sh", "-c", apply.group(1)], capture_output=True, text=True, env=box.env,
                          stdin=subprocess.DEVNULL, cwd=tmp_path, timeout=300, check=False)
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    assert "Applied transaction" in done.stdout
    provider = next(site.glob("onnxruntime/capi/libonnxruntime_providers_cuda.so"))
    assert "all loaded" in fresh_process(python, load_code(provider)).stdout


# ---------------------------------------------------------------------------------------------------------------------
# failures: one line, a documented exit code, nothing left behind
# ---------------------------------------------------------------------------------------------------------------------


def test_no_python_on_path(tmp_path: Path) -> None:
    tools = tmp_path / "tools"  # what install.sh needs besides sh's builtins, and no Python
    tools.mkdir()
    (tools / "dirname").symlink_to(shutil.which("dirname") or "/usr/bin/dirname")
    proc = subprocess.run(["/bin/sh", str(INSTALL_SH)], capture_output=True, text=True, check=False,
                          env={"HOME": str(tmp_path), "PATH": str(tools)}, stdin=subprocess.DEVNULL)
    one_line_failure(proc, 3, "no Python found (python3, python on PATH)", "Python 3.9 or newer")
    assert list(tmp_path.iterdir()) == [tools]


def _old_python() -> Path | None:
    """A real Python 3.8 or 3.7 binary on this machine, if there is one (under pyenv or on PATH; not a pyenv shim)."""
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates = [*sorted(pyenv.glob("3.[78].*/bin/python3"), reverse=True),
                  *(Path(w) for w in map(shutil.which, ("python3.8", "python3.7")) if w)]
    for candidate in candidates:
        real = Path(os.path.realpath(candidate))
        proc = subprocess.run([str(real), "-c", "import sys; print(sys.version_info[:2])"], capture_output=True,
                              text=True, env={"PATH": "/usr/bin:/bin"}, check=False)
        if proc.stdout.strip() in ("(3, 8)", "(3, 7)"):
            return real
    return None


def test_a_python_too_old(tmp_path: Path) -> None:
    old = _old_python()
    if old is None:
        pytest.skip("no Python 3.7 or 3.8 on this machine to be too old")
    # install.sh finds only it: one line, exit 3
    pybin = tmp_path / "pybin"
    pybin.mkdir()
    (pybin / "python3").symlink_to(old)
    box = Box(tmp_path, pybin=pybin)
    box.env["PATH"] = f"{pybin}:{tmp_path / 'tools'}"
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "dirname").symlink_to(shutil.which("dirname") or "/usr/bin/dirname")
    one_line_failure(box.install_sh(), 3, "python3 is Python 3.", "ortfix needs Python 3.9 or newer")
    # bootstrap.py itself, run by it (it must at least start there to say so)
    proc = subprocess.run([str(old), str(BOOTSTRAP), "--no-check"], capture_output=True, text=True, check=False,
                          env=box.env, stdin=subprocess.DEVNULL)
    one_line_failure(proc, 3, f"{old} is Python 3.", "ortfix needs Python 3.9 or newer")
    assert list(box.home.iterdir()) == []


@pytest.mark.slow
def test_a_python_without_ensurepip(tmp_path: Path, wheelhouses: dict[str, Path]) -> None:
    # Debian's python3 without python3-venv has no ensurepip module. The same, hermetically: a venv whose start-up
    # (a .pth file, which site runs in every process of that interpreter) makes `import ensurepip` fail as a missing
    # module does. The interpreter, site and the import system stay real.
    python = plain_venv(tmp_path / "no ensurepip")
    site = next((tmp_path / "no ensurepip" / "lib").glob("python3.*/site-packages"))
    (site / "hide_ensurepip.pth").write_text("import sys; sys.modules['ensurepip'] = None\n")
    hidden = subprocess.run([str(python), "-c", "import ensurepip"], capture_output=True, text=True, check=False)
    assert "ModuleNotFoundError" in hidden.stderr
    box = Box(tmp_path, pybin=python.parent)  # its bin/python3 is the first on PATH
    before = tree_state(box.home)
    proc = box.install_sh("--no-index", "--find-links", str(wheelhouses["linux"]))
    one_line_failure(proc, 4, "cannot create virtual environments", "apt install python3-venv")
    assert_same_tree(before, tree_state(box.home))


@pytest.mark.slow
def test_an_unreachable_index(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    box = Box(tmp_path)
    (tmp_path / "pip.conf").write_text(f"[global]\nindex-url = http://127.0.0.1:{port}/simple\nretries = 1\n"
                                       "timeout = 5\n")
    before = tree_state(box.home)
    proc = box.install_sh("--no-check", "--source", "ortfix")
    one_line_failure(proc, 5, "pip install ortfix failed", "the package index could not be reached",
                     "--no-index --find-links DIR")
    assert_same_tree(before, tree_state(box.home))  # the venv it made is removed again


@pytest.mark.slow
def test_a_read_only_data_folder(tmp_path: Path, wheelhouses: dict[str, Path]) -> None:
    box = Box(tmp_path)
    share = box.home / ".local" / "share"
    share.mkdir(parents=True)
    argv = ["/bin/sh", str(INSTALL_SH), "--no-index", "--find-links", str(wheelhouses["linux"])]
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True, check=False) \
        if shutil.which("unshare") else None
    if probe is not None and probe.returncode == 0:
        # a read-only bind mount in a user+mount namespace of its own: read-only even for root
        argv = ["unshare", "-rm", "sh", "-c", 'mount --bind -o ro "$0" "$0" && exec "$@"', str(share), *argv]
    elif os.getuid() != 0:
        share.chmod(0o555)
    else:
        pytest.skip("root ignores file modes and `unshare -rm` (for a read-only bind mount) is not available")
    proc = subprocess.run(argv, capture_output=True, text=True, env=box.env, stdin=subprocess.DEVNULL, check=False)
    share.chmod(0o755)
    one_line_failure(proc, 6, f"cannot write to {box.data}", "--data-dir")
    assert not box.data.exists() and not box.bin.exists()


# ---------------------------------------------------------------------------------------------------------------------
# pipx, when it is on PATH
# ---------------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pipx() -> Path:
    """A real pipx in a tools venv cached under the test cache (installed with this machine's pip configuration)."""
    venv = cache_root() / "tools-pipx"
    with locked(cache_root() / "tools-pipx.lock"):
        if not (venv / "done").is_file():
            shutil.rmtree(venv, ignore_errors=True)
            # no pip of its own (pipx runs without it; its shared venv gets one): this pip installs into it
            subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True)
            proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
                                   "-q", "pipx"], capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                pytest.skip(f"pipx cannot be installed here: {(proc.stderr.strip().splitlines() or ['?'])[-1]}")
            (venv / "done").write_text("ok\n")
    return venv / "bin" / "pipx"


@pytest.mark.slow
def test_the_pipx_path(tmp_path: Path, wheelhouses: dict[str, Path], pipx: Path) -> None:
    box = Box(tmp_path)
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "pipx").symlink_to(pipx)
    pipx_bin = tmp_path / "pipx-bin"
    env = {"PATH": f"{tools}:{box.path}", "PIPX_HOME": str(tmp_path / "pipx-home"), "PIPX_BIN_DIR": str(pipx_bin),
           "PIPX_MAN_DIR": str(tmp_path / "pipx-man")}
    offline = ("--no-index", "--find-links", str(wheelhouses["linux"]), "--no-check")
    proc = box.install_sh(*offline, env=env)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    assert "with pipx:" in proc.stdout and f"installed ortfix {VERSION} at {pipx_bin / 'ortfix'}" in proc.stdout
    run = subprocess.run([str(pipx_bin / "ortfix"), "--version"], capture_output=True, text=True, check=False)
    assert run.stdout.split() == ["ortfix,", "version", VERSION], run
    again = box.install_sh(*offline, env=env)
    assert again.returncode == 0 and "already installed" in again.stdout, (again.stdout, again.stderr)
    gone = box.install_sh("--uninstall", env=env)
    assert gone.returncode == 0, (gone.stdout, gone.stderr)
    assert not os.path.lexists(pipx_bin / "ortfix") and not box.data.exists()


# ---------------------------------------------------------------------------------------------------------------------
# Windows: bootstrap.py with the Windows CPython under wine; install.ps1 as text
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_bootstrap_on_windows_under_wine(tmp_path: Path, wheelhouses: dict[str, Path]) -> None:
    win = win_python()
    # The redistributed CPython has no ensurepip (it ships without pip); the stdlib's own ensurepip of the same
    # minor version (pure Python and its bundled pip wheel) is added to a copy of it, as python.org's installer has.
    home = win.new_home(tmp_path)
    ensurepip = Path(sys.base_prefix) / "lib" / f"python{PY_VERSION}" / "ensurepip"
    if sys.version_info[:2] != (3, 11) or not ensurepip.is_dir():
        pytest.skip(f"no CPython {PY_VERSION} ensurepip here to give the Windows CPython")
    shutil.copytree(ensurepip, home / "Lib" / "ensurepip", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "pip.conf").write_text("")
    data = tmp_path / "LocalAppData" / "ortfix"
    # wine sets LOCALAPPDATA from its own profile (a variable from Linux does not reach the process): --data-dir
    args = ("--no-pipx", "--data-dir", to_windows(data), "--no-index", "--find-links",
            to_windows(wheelhouses["windows"]))
    env = {k: v for k, v in win.env({"PIP_CONFIG_FILE": to_windows(tmp_path / "pip.conf"),
                                     "ORTFIX_CACHE_DIR": to_windows(tmp_path / "cache")}).items()
           if k != "PYTHONPATH"}  # the installed ortfix runs, not this checkout's

    def bootstrap(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["wine", str(home / "python.exe"), str(BOOTSTRAP), *args, *extra], capture_output=True,
                              text=True, env=env, stdin=subprocess.DEVNULL,
                              cwd=tmp_path, timeout=300, check=False)

    proc = bootstrap("--python", to_windows(home / "python.exe"))
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    shim = data / "bin" / "ortfix.cmd"
    assert f"installed ortfix {VERSION} at {to_windows(shim)}" in proc.stdout
    assert f"add {to_windows(data / 'bin')} to your user Path" in proc.stdout
    assert "target Z:" in proc.stdout and "ORT001" in proc.stdout  # check ran on the Windows target
    run = subprocess.run(["wine", "cmd", "/c", to_windows(shim), "--version"], capture_output=True, text=True,
                         env=env, stdin=subprocess.DEVNULL, timeout=120, check=False)
    assert run.stdout.split() == ["ortfix,", "version", VERSION], (run.stdout, run.stderr)

    before = tree_state(data)
    again = bootstrap("--no-check")
    assert again.returncode == 0 and f"already installed: ortfix {VERSION}" in again.stdout, again
    assert_same_tree(before, tree_state(data))
    gone = bootstrap("--uninstall")
    assert gone.returncode == 0, (gone.stdout, gone.stderr)
    assert not data.exists()


def test_install_ps1_stays_a_thin_python_finder() -> None:
    """No PowerShell here: install.ps1 is read. It finds `py -3`, then `python` (or ORTFIX_INSTALL_PYTHON), checks
    the version, runs bootstrap.py beside it with every argument, and returns its exit code; one line otherwise."""
    text = INSTALL_PS1.read_text()
    code = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    assert len(code) <= 32, "install.ps1 must stay thin: the logic belongs in bootstrap.py"
    assert text.index("@('py', '-3')") < text.index("@('python')")
    assert "Join-Path $PSScriptRoot 'bootstrap.py'" in text
    assert "sys.version_info < (3, 9)" in text
    assert "& $exe @pre $bootstrap @args" in text and "exit $LASTEXITCODE" in text
    assert "exit 3" in text and text.count("ortfix-install: error:") == 3
    sh = [ln for ln in INSTALL_SH.read_text().splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    assert len(sh) <= 25, "install.sh must stay thin: the logic belongs in bootstrap.py"


def test_bootstrap_help_names_every_option() -> None:
    proc = subprocess.run([sys.executable, str(BOOTSTRAP), "--help"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    for option in ("--uninstall", "--source", "--find-links", "--no-index", "--upgrade", "--python", "--no-check",
                   "--yes", "--no-pipx", "--data-dir", "--bin-dir"):
        assert option in proc.stdout, option


def test_a_source_starting_with_a_dash_is_never_an_option_to_pip(tmp_path: Path) -> None:
    """`--source=--pre` (or any value pip would read as an option) is refused before anything is made."""
    for source in ("--pre", "-e."):
        proc = subprocess.run([sys.executable, str(BOOTSTRAP), f"--source={source}", "--no-pipx", "--data-dir",
                               str(tmp_path / "data"), "--bin-dir", str(tmp_path / "bin"), "--no-check"],
                              capture_output=True, text=True, check=False, timeout=120)
        assert proc.returncode == 2, (proc.stdout, proc.stderr)
        assert "starts with '-'" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_without_source_a_checkout_installs_itself_and_a_wheelhouse_installs_ortfix(tmp_path: Path) -> None:
    """From a checkout (or the sdist) the default is that code, never a same-named project of the index; with a
    wheelhouse the wheel named ortfix in it; a copy of the script outside any checkout asks the pip configuration."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("ortfix_bootstrap", BOOTSTRAP)
    assert spec is not None and spec.loader is not None
    bootstrap = importlib.util.module_from_spec(spec)
    sys.modules["ortfix_bootstrap"] = bootstrap  # dataclasses resolve the module by name
    try:
        spec.loader.exec_module(bootstrap)
        assert bootstrap.default_source([], False) == str(REPO)
        assert bootstrap.default_source([str(tmp_path)], False) == "ortfix"
        assert bootstrap.default_source([], True) == "ortfix"
        lone = tmp_path / "copy" / "scripts"
        lone.mkdir(parents=True)
        assert bootstrap.default_source([], False, here=lone) == "ortfix"
        (lone.parent / "pyproject.toml").write_text('[project]\nname = "other"\n')
        (lone.parent / "src" / "ortfix").mkdir(parents=True)
        assert bootstrap.default_source([], False, here=lone) == "ortfix"
        (lone.parent / "pyproject.toml").write_text('[project]\nname = "ortfix"\n')
        assert bootstrap.default_source([], False, here=lone) == str(lone.parent)
        assert bootstrap.parse([]).source == str(REPO)
    finally:
        del sys.modules["ortfix_bootstrap"]
