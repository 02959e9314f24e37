"""Root never runs another user's code (target/owner.py): a user's environment, inspected or fixed by root (an
administrator helping, Ansible with `become`), must not hand its owner root through a `.pth` file, pip or
`import onnxruntime`.

The reproduction runs as root with a real second user (useradd, as tests/test_security.py does): the user's venv has
a `.pth` file whose import line appends `os.getuid()` to a file. Whatever root runs, that file never says 0.
"""

from __future__ import annotations

import ast
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from checktools import site_packages
from support.fixtures import make_venv, pip_install
from test_data_safety import _start_apply
from test_security import TEST_USER, _ensure_user
from txtools import assert_same_tree, one_line_error, ortfix, pip_config, pip_venv, tree_state

SRC = Path(__file__).resolve().parents[1] / "src" / "ortfix"
PTH = "import os; open({drop!r}, 'a').write('%d\\n' % os.getuid())\n"


class Foreign:
    """The second user's venv (with onnxruntime), the file its `.pth` writes to, ortfix's environment."""

    def __init__(self, base: Path, python: Path, drop: Path, environ: dict[str, str],
                 user: pwd.struct_passwd) -> None:
        self.base = base
        self.python = python
        self.venv = python.parent.parent
        self.drop = drop
        self.environ = environ
        self.user = user

    def uids(self) -> list[str]:
        """The uids the `.pth` line ran as, one per process that ran it."""
        return self.drop.read_text().split() if self.drop.exists() else []


def _environ(base: Path, wheelhouse: Path) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith(("PIP_", "ORTFIX_")) and k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    conf = pip_config(base, wheelhouse)
    environ.update(PIP_CONFIG_FILE=str(conf), XDG_CONFIG_HOME=str(base / "cfg"), XDG_CONFIG_DIRS=str(base / "c"),
                   ORTFIX_NO_CACHE="1")
    return environ


@pytest.fixture()
def foreign(wheelhouse: Path, venv_template: Path) -> Iterator[Foreign]:
    user = _ensure_user()
    base = Path(tempfile.mkdtemp(prefix="ortfix-owner-"))
    os.chmod(base, 0o755)
    try:
        python = pip_venv(venv_template, base / "venv")
        pip_install(python, "onnxruntime==1.22.0", find_links=wheelhouse)
        drop = base / "drop" / "uids"
        drop.parent.mkdir()
        os.chmod(drop.parent, 0o1777)  # both root and the user can write the proof
        (site_packages(python.parent.parent) / "zz-proof.pth").write_text(PTH.format(drop=str(drop)))
        subprocess.run(["chown", "-R", f"{user.pw_uid}:{user.pw_gid}", str(python.parent.parent)], check=True)
        yield Foreign(base, python, drop, _environ(base, wheelhouse), user)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_pth_proof_runs_when_the_interpreter_starts(foreign: Foreign) -> None:
    """The proof works: a plain start of the user's interpreter runs the `.pth` line (as whoever starts it; twice,
    as site.py processes a venv's site-packages twice)."""
    subprocess.run([str(foreign.python), "-c", "pass"], check=True)
    assert set(foreign.uids()) == {"0"}


@pytest.mark.parametrize("args", [
    ("check",), ("check", "--json"), ("plan",), ("apply", "--yes"), ("apply", "--dry-run"), ("verify",),
    ("export", "requirements"), ("wheelhouse", "-d", "{base}/wheels"),
], ids=lambda a: " ".join(a))
def test_root_refuses_to_run_another_users_environment(foreign: Foreign, args: tuple[str, ...]) -> None:
    before = tree_state(foreign.venv)
    argv = [a.format(base=foreign.base) for a in args]
    line = one_line_error(ortfix(*argv, "--python", str(foreign.python), env=foreign.environ),
                          f"refusing to run {foreign.python} as root", f"owned by uid {foreign.user.pw_uid}",
                          f"({TEST_USER})", f"ORTFIX_SAFE_ENVS={foreign.venv}")
    assert "0" not in foreign.uids(), line
    assert foreign.uids() == []
    assert_same_tree(before, tree_state(foreign.venv))


def test_commands_that_run_no_code_of_the_environment_still_work(foreign: Foreign) -> None:
    """history and rollback only read (and restore) files: nothing of the environment runs, nothing is refused."""
    for args in (("history",), ("rollback", "--yes")):
        proc = ortfix(*args, "--python", str(foreign.python), env=foreign.environ)
        assert "refusing" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert foreign.uids() == []


def test_safe_envs_lets_root_run_it_and_the_probe_runs_no_pth_code(foreign: Foreign) -> None:
    """Named in ORTFIX_SAFE_ENVS (here its parent folder), the environment is root's to run: `check` works, and the
    probe (python -S, .pth files read as text) still runs none of its code; `apply` runs the environment's pip, so
    the `.pth` line runs there, as root, as asked."""
    environ = {**foreign.environ, "ORTFIX_SAFE_ENVS": os.pathsep.join(["/nonexistent", str(foreign.base)])}
    proc = ortfix("check", "--python", str(foreign.python), env=environ)
    assert proc.returncode in (0, 1), proc.stderr
    assert "onnxruntime 1.22.0" in proc.stdout, proc.stdout
    assert foreign.uids() == []
    proc = ortfix("apply", "--yes", "--python", str(foreign.python), env=environ)
    assert "refusing" not in proc.stderr, proc.stderr
    assert "0" in foreign.uids()


def test_pip_is_refused_at_launch_when_the_environment_changes_hands_during_apply(
        foreign: Foreign, tmp_path: Path) -> None:
    """The check is made when each child starts, not once: the venv is root's when apply checks it and plans, and
    becomes the user's before pip runs (apply paused before its install step). pip is refused; nothing ran as root."""
    subprocess.run(["chown", "-R", "0:0", str(foreign.venv)], check=True)
    pause = tmp_path / "paused"
    environ = {**foreign.environ, "ORTFIX_TEST_PAUSE_BEFORE_STEP": "2", "ORTFIX_TEST_PAUSE_FILE": str(pause)}
    proc = _start_apply(foreign.python, environ)
    deadline = time.monotonic() + 120
    while not pause.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    reached = pause.exists()
    foreign.drop.unlink(missing_ok=True)  # pip's dry run ran it, as root, while the environment was root's
    os.chown(foreign.venv, foreign.user.pw_uid, foreign.user.pw_gid)  # the folder alone: its files stay root's
    pause.unlink(missing_ok=True)
    out, err = proc.communicate(timeout=300)
    assert reached, err[-2000:]
    assert proc.returncode != 0, out[-2000:]
    assert "refusing to run" in out + err and "Traceback" not in err, err[-3000:]
    assert foreign.uids() == []


# ---------------------------------------------------------------------------------------------------------------------
# require_trusted on real files: links, pyvenv.cfg's home, folders others can write
# ---------------------------------------------------------------------------------------------------------------------


@pytest.fixture()
def root_venv() -> Iterator[Path]:
    """A venv that is root's through and through, in a folder of root's."""
    if os.geteuid() != 0:
        pytest.skip("the ownership check applies to root only")
    base = Path(tempfile.mkdtemp(prefix="ortfix-rootenv-"))
    os.chmod(base, 0o755)
    try:
        yield make_venv(base / "venv").parent.parent
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _refusal(python: Path, environ: dict[str, str] | None = None) -> str | None:
    """require_trusted's one line for `python` (in a fresh process, with `environ`), None when it accepts it."""
    code = ("import sys\nfrom ortfix.errors import OrtfixError\nfrom ortfix.target.owner import require_trusted\n"
            "try:\n    require_trusted(sys.argv[1])\nexcept OrtfixError as e:\n    print(e.one_line())\n")
    env = {k: v for k, v in os.environ.items() if k != "ORTFIX_SAFE_ENVS"}
    proc = subprocess.run([sys.executable, "-c", code, str(python)], capture_output=True, text=True, check=True,
                          env={**env, **(environ or {})})
    return proc.stdout.strip() or None


@pytest.mark.slow
def test_a_root_venv_is_accepted(root_venv: Path) -> None:
    assert _refusal(root_venv / "bin" / "python") is None


@pytest.mark.slow
def test_a_link_to_another_users_interpreter_is_refused(root_venv: Path) -> None:
    user = _ensure_user()
    theirs = root_venv.parent / "theirs"
    theirs.mkdir()
    real = os.path.realpath(root_venv / "bin" / "python")
    shutil.copy2(real, theirs / "python3")
    os.chown(theirs / "python3", user.pw_uid, user.pw_gid)
    link = root_venv / "bin" / os.readlink(root_venv / "bin" / "python")
    link.unlink()
    link.symlink_to(theirs / "python3")
    line = _refusal(root_venv / "bin" / "python")
    assert line is not None and f"{theirs / 'python3'} is owned by uid {user.pw_uid}" in line, line


@pytest.mark.slow
def test_a_link_owned_by_another_user_is_refused(root_venv: Path) -> None:
    user = _ensure_user()
    python = root_venv / "bin" / "python"
    os.lchown(python, user.pw_uid, user.pw_gid)
    line = _refusal(python)
    assert line is not None and f"{python} is owned by uid {user.pw_uid}" in line, line


@pytest.mark.slow
def test_a_home_of_another_user_is_refused(root_venv: Path) -> None:
    """pyvenv.cfg's `home` decides where the interpreter takes its standard library from."""
    user = _ensure_user()
    home = root_venv.parent / "their-python" / "bin"
    home.mkdir(parents=True)
    os.chown(home.parent, user.pw_uid, user.pw_gid)
    cfg = root_venv / "pyvenv.cfg"
    cfg.write_text("".join(f"home = {home}\n" if ln.startswith("home") else ln
                           for ln in cfg.read_text().splitlines(keepends=True)))
    line = _refusal(root_venv / "bin" / "python")
    assert line is not None and f"{home.parent} is owned by uid {user.pw_uid}" in line, line


@pytest.mark.slow
@pytest.mark.parametrize(("mode", "gid", "says"), [
    (0o777, 0, "is writable by everyone"),
    (0o775, 1, "is writable by group 1"),
    (0o775, 0, None),  # root's group
    (0o1777, 0, None),  # sticky, as /tmp
])
def test_site_packages_that_others_can_write(root_venv: Path, mode: int, gid: int, says: str | None) -> None:
    site = site_packages(root_venv)
    os.chown(site, 0, gid)
    os.chmod(site, mode)
    line = _refusal(root_venv / "bin" / "python")
    if says is None:
        assert line is None
    else:
        assert line is not None and f"{site} {says}" in line, line


@pytest.mark.slow
def test_safe_envs_names_folders(root_venv: Path) -> None:
    user = _ensure_user()
    os.chown(root_venv, user.pw_uid, user.pw_gid)
    python = root_venv / "bin" / "python"
    assert _refusal(python) is not None
    assert _refusal(python, {"ORTFIX_SAFE_ENVS": str(root_venv)}) is None
    assert _refusal(python, {"ORTFIX_SAFE_ENVS": f"/elsewhere{os.pathsep}{root_venv.parent}"}) is None
    assert _refusal(python, {"ORTFIX_SAFE_ENVS": f"{root_venv}-other"}) is not None  # a prefix of the name is not
    assert _refusal(python, {"ORTFIX_SAFE_ENVS": ""}) is not None


@pytest.mark.slow
def test_a_control_character_in_a_link_target_is_escaped(root_venv: Path) -> None:
    user = _ensure_user()
    theirs = root_venv.parent / "x\x1b]0;TITLE\x07y"
    theirs.mkdir()
    os.chown(theirs, user.pw_uid, user.pw_gid)
    link = root_venv / "bin" / os.readlink(root_venv / "bin" / "python")
    link.unlink()
    link.symlink_to(theirs / "python3")
    line = _refusal(root_venv / "bin" / "python")
    assert line is not None and "\\x1b]0;TITLE\\x07y" in line and "\x1b" not in line, line


# ---------------------------------------------------------------------------------------------------------------------
# every launch says whose code it runs
# ---------------------------------------------------------------------------------------------------------------------

# Children started with target_python=None run only ortfix's own interpreter or a system tool: what argv[0] is.
OWN_OR_SYSTEM = {"sys.executable", "'nvidia-smi'", "'ldconfig'", "interpreter", "smi"}


def _launches() -> Iterator[tuple[str, ast.Call]]:
    for path in SRC.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and ast.unparse(node.func) in ("subproc.run", "subproc.start", "stream"):
                yield f"{path.relative_to(SRC)}:{node.lineno}", node


def test_children_without_a_target_run_only_ortfixs_own_or_the_systems_code() -> None:
    launches = list(_launches())
    assert len(launches) > 10
    for where, call in launches:
        target = next(k.value for k in call.keywords if k.arg == "target_python")
        if isinstance(target, ast.Constant) and target.value is None:
            argv = call.args[0]
            assert isinstance(argv, ast.List), (where, ast.unparse(argv))
            assert ast.unparse(argv.elts[0]) in OWN_OR_SYSTEM, (where, ast.unparse(argv.elts[0]))


@pytest.mark.slow
def test_the_check_is_made_at_the_moment_of_launch(root_venv: Path) -> None:
    """subproc itself refuses, before anything starts: no caller can start the environment without the check."""
    user = _ensure_user()
    drop = root_venv.parent / "started"
    code = ("import sys\nfrom ortfix import subproc\nfrom ortfix.errors import OrtfixError\n"
            "try:\n    subproc.run([sys.argv[1], '-c', 'import sys; open(sys.argv[1], \"w\")', sys.argv[2]],"
            " target_python=sys.argv[1])\nexcept OrtfixError as e:\n    print(e.one_line())\n")
    python = root_venv / "bin" / "python"
    os.chown(root_venv, user.pw_uid, user.pw_gid)
    proc = subprocess.run([sys.executable, "-c", code, str(python), str(drop)], capture_output=True, text=True,
                          check=True)
    assert "refusing to run" in proc.stdout and not drop.exists(), proc.stdout
    os.chown(root_venv, 0, 0)  # the same launch, once the folder is root's again, starts
    proc = subprocess.run([sys.executable, "-c", code, str(python), str(drop)], capture_output=True, text=True,
                          check=True)
    assert proc.stdout == "" and drop.exists(), proc.stdout


def test_resolving_shares_lstat_calls_and_answers_as_realpath(tmp_path: Path) -> None:
    """The owner check resolves each path it looks at (the interpreter's links, the site folders, the ones above)
    once per check (owner._real): what it answers is os.path.realpath's, for links relative and absolute, with ".."
    in their text, to the root, dangling, in a loop, through a file and in a row."""
    import itertools

    from ortfix.target.owner import _real

    (tmp_path / "a" / "b" / "c").mkdir(parents=True)
    (tmp_path / "d" / "e").mkdir(parents=True)
    (tmp_path / "a" / "b" / "file").write_text("")
    links = {"l1": "a/b", "l2": str(tmp_path / "d"), "a/l3": "../d/e", "loop1": "loop2", "loop2": "loop1",
             "self": "self", "dang": "nowhere/x", "a/b/c/up": "../../..", "d/e/l4": "../../l1/c", "chain": "l1",
             "rel": "a/../d", "dd": "l1/../d", "a/b/lf": "file", "toroot": "/", "slashy": "./a//b/",
             "selfx": f"{tmp_path}/self/x"}
    for name, text in links.items():
        (tmp_path / name).symlink_to(text)
    names = ["a", "b", "c", "e", "l1", "l2", "l3", "l4", "loop1", "self", "dang", "up", "chain", "rel", "lf",
             "toroot", "slashy", "selfx", "dd", "file", "nope", "tmp", "..", "."]
    plain: set[str] = set()
    checked = 0
    for n in range(4):
        for parts in itertools.product(names, repeat=n):
            path = os.path.join(str(tmp_path), *parts)
            assert _real(path, plain) == os.path.realpath(path), path
            checked += 1
    assert checked > 12_000 and plain
    for path in ("/", "//", str(tmp_path) + "//a", "relative/l1", ""):
        assert _real(path, set()) == os.path.realpath(path), path


def test_a_folder_seen_once_is_not_looked_at_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """owner._real looks at each folder once per check: a second path below folders already seen to be no link
    costs one lstat (its own last part), a path seen before none."""
    from ortfix.target import owner

    (tmp_path / "a" / "b" / "c").mkdir(parents=True)
    looked: list[str] = []
    lstat = os.lstat
    monkeypatch.setattr(owner.os, "lstat", lambda path: looked.append(path) or lstat(path))
    plain: set[str] = set()
    first = str(tmp_path / "a" / "b")
    assert owner._real(first, plain) == first and first in looked
    looked.clear()
    assert owner._real(str(tmp_path / "a" / "b" / "c"), plain) == str(tmp_path / "a" / "b" / "c")
    assert looked == [str(tmp_path / "a" / "b" / "c")]
    looked.clear()
    assert owner._real(first, plain) == first and looked == []
