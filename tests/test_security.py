"""What ortfix reads back is untrusted: saved plans, journals, stashes, RECORDs. Each test edits or forges one as an
attacker would, runs the real `ortfix` command, and proves nothing outside the environment changed (the folder
around it is hashed before and after) and that nothing the file named was run.

The cross-user tests run as root with a real second user (created with useradd), as the issue describes: a user forges
a transaction in their own venv; root later runs `ortfix check` and `ortfix rollback --yes`.
"""

from __future__ import annotations

import copy
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from checktools import site_packages
from support.fixtures import pip_install
from txtools import assert_same_tree, one_line_error, ortfix, ortfix_json, pip_config, pip_venv, tree_state

TEST_USER = "ortfix-test-user"


def resign(journal: Path, mutate: Callable[[dict[str, Any]], None]) -> bytes:
    """Edit a journal's body and give it a valid checksum again (the checksum is not a secret); the original bytes."""
    from ortfix.transaction.journal import canonical, sha256_bytes

    original = journal.read_bytes()
    doc = json.loads(original)
    mutate(doc["body"])
    doc["sha256"] = sha256_bytes(canonical(doc["body"]))
    journal.write_text(json.dumps(doc))
    return original


def step_of(body: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(s for s in body["steps"] if s["kind"] == kind)


# ---------------------------------------------------------------------------------------------------------------------
# S2/S3: a saved plan carries intent, not commands
# ---------------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def planned(tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path,
            venv_template: Path) -> Iterator[tuple[Path, dict[str, Any], dict[str, str], Path]]:
    """(venv with the CPU onnxruntime, its saved plan, ortfix's environment, a folder outside with a victim)."""
    base = tmp_path_factory.mktemp("planned")
    python = pip_venv(venv_template, base / "venv")
    pip_install(python, "onnxruntime==1.22.0", find_links=wheelhouse)
    conf = pip_config(base, wheelhouse)
    isolated = base / "no-pip-config"
    isolated.mkdir()
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith(("PIP_", "ORTFIX_TEST_")) and k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    environ.update(PIP_CONFIG_FILE=str(conf), XDG_CONFIG_HOME=str(isolated), XDG_CONFIG_DIRS=str(isolated))
    plan_file = base / "plan.json"
    proc = ortfix("plan", "--python", str(python), "-o", str(plan_file), env=environ)
    assert proc.returncode == 1, proc.stderr
    outside = base / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_text("not ortfix's\n")
    yield python.parent.parent, json.loads(plan_file.read_text()), environ, outside


def _action(doc: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(a for a in doc["actions"] if a["kind"] == kind)


def _set_requirements(*reqs: str) -> Callable[[dict[str, Any], Path, Path], None]:
    def edit(doc: dict[str, Any], venv: Path, outside: Path) -> None:
        _action(doc, "pip-install")["details"]["requirements"] = [
            r.replace("OUTSIDE", str(outside)) for r in reqs]
    return edit


def _argv(doc: dict[str, Any], venv: Path, outside: Path) -> None:
    _action(doc, "pip-install")["details"]["argv"] = ["/bin/sh", "-c", f"touch {outside}/PWNED", "install"]


def _hook_outside(doc: dict[str, Any], venv: Path, outside: Path) -> None:
    _action(doc, "write-file")["details"]["path"] = str(outside / "victim.txt")


def _mode(mode: int) -> Callable[[dict[str, Any], Path, Path], None]:
    def edit(doc: dict[str, Any], venv: Path, outside: Path) -> None:
        _action(doc, "write-file")["details"]["mode"] = mode
    return edit


def _content(doc: dict[str, Any], venv: Path, outside: Path) -> None:
    import hashlib

    details = _action(doc, "write-file")["details"]
    details["content"] = f"import os\nos.system('touch {outside}/PWNED')\n"
    details["sha256"] = hashlib.sha256(details["content"].encode()).hexdigest()


def _symlink_out(doc: dict[str, Any], venv: Path, outside: Path) -> None:
    esc = site_packages(venv) / "esc"
    doc["actions"].insert(0, {"kind": "symlink", "summary": "link", "changes": [], "undo": "", "fixes": [],
                              "details": {"path": str(esc), "target": str(outside)}})


def _uninstall_outside(doc: dict[str, Any], venv: Path, outside: Path) -> None:
    details = _action(doc, "pip-uninstall")["details"]
    details["location"] = str(outside)
    details["dist_info"] = str(outside / "victim.dist-info")


def _missing_key(doc: dict[str, Any], venv: Path, outside: Path) -> None:
    del _action(doc, "pip-install")["details"]["requirements"]


def _extra_action_field(doc: dict[str, Any], venv: Path, outside: Path) -> None:
    _action(doc, "pip-install")["run"] = "anything"


def _driver(doc: dict[str, Any], venv: Path, outside: Path) -> None:
    doc["options"]["driver_version"] = "\uff15\uff15\uff10.\uff15\uff14"  # full-width "550.54": refused


def _envelope(command: str, exit_code: object) -> Callable[[dict[str, Any], Path, Path], None]:
    def edit(doc: dict[str, Any], venv: Path, outside: Path) -> None:
        doc.update(command=command, exit_code=exit_code)
    return edit


EDITS: dict[str, tuple[Callable[[dict[str, Any], Path, Path], None], str]] = {
    "envelope-other-command": (_envelope("apply", 0), "not those of `ortfix plan --json`"),
    "envelope-bool-exit-code": (_envelope("plan", True), "not those of `ortfix plan --json`"),
    "driver-option": (_driver, "not an NVIDIA driver version"),
    "argv": (_argv, "unknown detail 'argv'"),
    "editable": (_set_requirements("-e", "OUTSIDE"), "not a plain requirement"),
    "index-abbreviated": (_set_requirements("onnxruntime-gpu==1.22.0", "--ind=http://127.0.0.1:9/simple"),
                          "not a plain requirement"),
    "extra-index": (_set_requirements("--extra-index-url", "http://127.0.0.1:9/simple", "onnxruntime-gpu==1.22.0"),
                    "not a plain requirement"),
    "find-links": (_set_requirements("--find-links=OUTSIDE", "onnxruntime-gpu==1.22.0"), "not a plain requirement"),
    "requirement-file": (_set_requirements("-r", "OUTSIDE/victim.txt"), "not a plain requirement"),
    "url": (_set_requirements("onnxruntime-gpu @ http://127.0.0.1:9/x.whl"), "not a plain requirement"),
    "path": (_set_requirements("OUTSIDE/x.whl"), "not a plain requirement"),
    "target": (_set_requirements("onnxruntime-gpu==1.22.0", "--target", "OUTSIDE"), "not a plain requirement"),
    "marker": (_set_requirements("onnxruntime-gpu==1.22.0; python_version > '3'"), "not a plain requirement"),
    "extras": (_set_requirements("onnxruntime-gpu[cuda]==1.22.0"), "not a plain requirement"),
    "hook-outside": (_hook_outside, "outside the environment"),
    "mode-setuid": (_mode(0o4755), "is not one ortfix writes"),
    "mode-negative": (_mode(-1), "'mode' is not a whole number"),
    "hook-content": (_content, "does not hold what ortfix plans"),
    "symlink-out": (_symlink_out, "not a library's SONAME link"),
    "uninstall-outside": (_uninstall_outside, "outside the environment"),
    "missing-key": (_missing_key, "lacks detail 'requirements'"),
    "unknown-field": (_extra_action_field, "unknown field 'run'"),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_edited_plan_is_refused_and_runs_nothing(edit: str, planned: tuple[Path, dict[str, Any], dict[str, str], Path],
                                                 tmp_path: Path) -> None:
    venv, original, environ, outside = planned
    mutate, fragment = EDITS[edit]
    doc = copy.deepcopy(original)
    mutate(doc, venv, outside)
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(doc))
    before, around = tree_state(venv), tree_state(outside)
    for extra in (["--dry-run"], ["--yes"]):
        proc = ortfix("apply", str(plan_file), "--python", str(venv), *extra, env=environ)
        one_line_error(proc, fragment)
        assert not (outside / "PWNED").exists()
        assert_same_tree(before, tree_state(venv))
        assert_same_tree(around, tree_state(outside))
        assert not (venv / ".ortfix" / "transactions").exists() or not any((venv / ".ortfix/transactions").iterdir())


def test_unedited_saved_plan_still_applies(planned: tuple[Path, dict[str, Any], dict[str, str], Path],
                                           tmp_path: Path) -> None:
    """The refusals above are not a broken plan: the same plan, unedited, applies and rolls back."""
    venv, original, environ, _outside = planned
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(original))
    before = tree_state(venv)
    doc = ortfix_json("apply", str(plan_file), "--python", str(venv), "--yes", env=environ)
    assert doc["status"] == "applied"
    ortfix_json("rollback", "--python", str(venv), "--yes", env=environ)
    assert_same_tree(before, tree_state(venv))


def test_plan_json_output_is_a_plan_file(planned: tuple[Path, dict[str, Any], dict[str, str], Path],
                                         tmp_path: Path) -> None:
    """What `plan --json` prints (the plan inside the command envelope) is accepted by `apply` as a saved plan."""
    venv, _original, environ, _outside = planned
    proc = ortfix("plan", "--python", str(venv), "--json", env=environ)
    doc = json.loads(proc.stdout)
    assert (doc["command"], doc["exit_code"], proc.returncode) == ("plan", 1, 1)
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(proc.stdout)
    before = tree_state(venv)
    dry = ortfix("apply", str(plan_file), "--python", str(venv), "--dry-run", env=environ)
    assert dry.returncode == 1, dry.stderr  # changes pending, nothing changed
    assert "run (the environment's own pip" in dry.stdout, dry.stdout
    assert_same_tree(before, tree_state(venv))


def test_deeply_nested_plan_and_journal_are_one_line(planned: tuple[Path, dict[str, Any], dict[str, str], Path],
                                                     tmp_path: Path) -> None:
    venv, _original, environ, _outside = planned
    plan_file = tmp_path / "plan.json"
    plan_file.write_text("[" * 100_000 + "]" * 100_000)
    one_line_error(ortfix("apply", str(plan_file), "--python", str(venv), "--yes", env=environ),
                   "not a valid ortfix plan", "nested too deeply")
    plan_file.write_text('{"schema": "ortfix.plan/2", "actions": ' + "[" * 100_000 + "]" * 100_000 + "}")
    one_line_error(ortfix("apply", str(plan_file), "--python", str(venv), "--yes", env=environ),
                   "not a valid ortfix plan")


# ---------------------------------------------------------------------------------------------------------------------
# S1: forged journals (root rolls back what a user forged), and journals of dubious ownership
# ---------------------------------------------------------------------------------------------------------------------


def _ensure_user() -> pwd.struct_passwd:
    if os.geteuid() != 0:
        pytest.skip("needs root to create a second user and to run ortfix as root")
    try:
        return pwd.getpwnam(TEST_USER)
    except KeyError:
        # check=False: a test running beside this one (pytest-xdist) may have made the user a moment ago
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", TEST_USER],
                       check=False, capture_output=True)
        return pwd.getpwnam(TEST_USER)


def as_user(user: pwd.struct_passwd, code: str, *args: str) -> None:
    """Run Python code as the second user (setpriv: real uid/gid, no supplementary groups)."""
    proc = subprocess.run(["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups",
                           sys.executable, "-c", code, *args], capture_output=True, text=True, check=False,
                          env={"PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr


_FORGE = """import hashlib, json, sys
path, what = sys.argv[1], sys.argv[2]
doc = json.load(open(path))
body = doc["body"]
step = next(s for s in body["steps"] if s["kind"] == "write-file")
if what == "write-outside":
    step["details"]["path"] = sys.argv[3]
    step["record"]["existed"] = True
elif what == "prefix":
    body["prefix"] = "/"
    body["target"]["prefix"] = "/"
elif what == "target-prefix":
    body["target"]["prefix"] = "/"
canon = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
doc["sha256"] = hashlib.sha256(canon).hexdigest()
json.dump(doc, open(path, "w"))
"""


@pytest.fixture()
def user_venv(wheelhouse: Path, venv_template: Path) -> Iterator[tuple[Path, Path, dict[str, str], str]]:
    """A venv owned by the second user, with an applied transaction made by root; a root-owned folder beside it."""
    _ensure_user()
    base = Path(tempfile.mkdtemp(prefix="ortfix-xuser-"))
    os.chmod(base, 0o755)
    try:
        python = pip_venv(venv_template, base / "venv")
        pip_install(python, "onnxruntime==1.22.0", find_links=wheelhouse)
        conf = pip_config(base, wheelhouse)
        environ = {k: v for k, v in os.environ.items()
                   if not k.startswith(("PIP_", "ORTFIX_TEST_")) and k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
        environ.update(PIP_CONFIG_FILE=str(conf), XDG_CONFIG_HOME=str(base / "cfg"), XDG_CONFIG_DIRS=str(base / "c"))
        tx_id = ortfix_json("apply", "--python", str(python), "--yes", env=environ)["transaction"]["id"]
        outside = base / "root-only"
        outside.mkdir(mode=0o700)
        (outside / "secret").write_text("root's secret\n")
        os.chmod(outside / "secret", 0o600)
        (outside / "victim").write_text("root's file\n")
        yield python.parent.parent, outside, environ, tx_id
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_forged_journal_by_the_venv_owner_cannot_touch_roots_files(user_venv: tuple[Path, Path, dict[str, str], str]
                                                                     ) -> None:
    venv, outside, environ, tx_id = user_venv
    user = _ensure_user()
    subprocess.run(["chown", "-R", f"{user.pw_uid}:{user.pw_gid}", str(venv)], check=True)
    journal = venv / ".ortfix" / "transactions" / tx_id / "journal.json"
    original = journal.read_bytes()
    around = tree_state(outside)
    python = str(venv / "bin" / "python")

    # (a) a write-file step rewritten to name root's file: rollback would overwrite it with the user's stash
    as_user(user, _FORGE, str(journal), "write-outside", str(outside / "victim"))
    # root does not run the user's environment (test_owner.py) unless told to trust it
    one_line_error(ortfix("check", "--python", python, "--fresh", env=environ), "refusing to run", "ORTFIX_SAFE_ENVS")
    trusting = {**environ, "ORTFIX_SAFE_ENVS": str(venv)}
    assert ortfix("check", "--python", python, "--fresh", env=trusting).returncode in (0, 1)
    one_line_error(ortfix("rollback", "--python", python, "--yes", env=environ), "outside the environment")
    assert_same_tree(around, tree_state(outside))

    # (b) a journal claiming the whole machine as its environment
    journal.write_bytes(original)
    as_user(user, _FORGE, str(journal), "prefix")
    one_line_error(ortfix("rollback", "--python", python, "--yes", env=environ), "was written for /")
    assert_same_tree(around, tree_state(outside))

    # (b2) only the environment rollback opens (`target`) claims the whole machine; the journal's own prefix is right
    journal.write_bytes(original)
    as_user(user, _FORGE, str(journal), "target-prefix")
    one_line_error(ortfix("rollback", "--python", python, "--yes", env=environ), "was written for /")
    assert_same_tree(around, tree_state(outside))

    # (c) the uninstall's stash swapped for a link into root's folder: every walk below the prefix refuses links
    journal.write_bytes(original)
    stash = journal.parent / "steps" / "1" / "stash"
    as_user(user, "import os, sys, shutil; shutil.move(sys.argv[1], sys.argv[1] + '.x'); os.symlink(sys.argv[2], "
                  "sys.argv[1])", str(stash), str(outside))
    one_line_error(ortfix("rollback", "--python", python, "--yes", env=environ), "symbolic link")
    assert_same_tree(around, tree_state(outside))
    os.unlink(stash)
    shutil.move(str(stash) + ".x", stash)

    # (d) the lock file swapped for a link to root's file: root must not open (and truncate) it
    lock = venv / ".ortfix" / "lock"
    as_user(user, "import os, sys; os.unlink(sys.argv[1]); os.symlink(sys.argv[2], sys.argv[1])", str(lock),
            str(outside / "victim"))
    one_line_error(ortfix("rollback", "--python", python, "--yes", env=environ), "lock file")
    assert_same_tree(around, tree_state(outside))
    os.unlink(lock)

    # untouched, the same journal rolls back: the refusals came from the forgeries
    doc = ortfix_json("rollback", "--python", python, "--yes", env=environ)
    assert doc["transaction"]["status"] == "rolled-back"
    assert_same_tree(around, tree_state(outside))


def test_journal_and_plan_of_another_user_are_refused(user_venv: tuple[Path, Path, dict[str, str], str],
                                                      tmp_path: Path) -> None:
    """A root-owned environment whose journal (or a saved plan) belongs to someone else: not trusted."""
    venv, _outside, environ, tx_id = user_venv
    user = _ensure_user()
    python = str(venv / "bin" / "python")
    journal = venv / ".ortfix" / "transactions" / tx_id / "journal.json"
    os.chown(journal, user.pw_uid, user.pw_gid)
    before = tree_state(venv)
    one_line_error(ortfix("rollback", "--python", python, "--yes", env=environ), f"owned by {TEST_USER}",
                   "dubious ownership")
    check = ortfix_json("check", "--python", python, "--fresh", env=environ, expect=1)
    [tx001] = [f for f in check["findings"] if f["code"] == "TX001"]
    assert "cannot be read" in tx001["summary"] and f"history show {tx_id}" in tx001["fix"]
    # nothing left to change here: apply reports the unreadable transaction instead of touching anything
    proc = ortfix("apply", "--python", python, "--yes", env=environ)
    assert proc.returncode == 1 and "TX001" in proc.stdout and "cannot be read" in proc.stdout, proc.stdout
    assert_same_tree(before, tree_state(venv))
    os.chown(journal, 0, 0)
    ortfix_json("rollback", "--python", python, "--yes", env=environ)

    plan_file = tmp_path / "plan.json"
    assert ortfix("plan", "--python", python, "-o", str(plan_file), env=environ).returncode == 1
    os.chown(plan_file, user.pw_uid, user.pw_gid)
    before = tree_state(venv)
    one_line_error(ortfix("apply", str(plan_file), "--python", python, "--yes", env=environ),
                   f"owned by {TEST_USER}", "dubious ownership")
    assert_same_tree(before, tree_state(venv))


# ---------------------------------------------------------------------------------------------------------------------
# links swapped in between plan and apply; RECORDs that lead outside; the system Python
# ---------------------------------------------------------------------------------------------------------------------


def test_site_packages_swapped_for_a_link_after_planning(cpu_venv: Path, tmp_path: Path,
                                                         env: dict[str, str]) -> None:
    python = cpu_venv / "bin" / "python"
    plan_file = tmp_path / "plan.json"
    assert ortfix("plan", "--python", str(python), "-o", str(plan_file), env=env).returncode == 1
    site = site_packages(cpu_venv)
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.move(site, outside / "site-packages")
    os.symlink(outside / "site-packages", site)
    around, before = tree_state(outside), tree_state(cpu_venv)
    proc = ortfix("apply", str(plan_file), "--python", str(python), "--yes", env=env)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert_same_tree(around, tree_state(outside))
    assert_same_tree(before, tree_state(cpu_venv))


def test_record_leading_outside_is_not_followed(cpu_venv: Path, tmp_path: Path,
                                                env: dict[str, str]) -> None:
    """A RECORD row naming a file outside the environment: the uninstall would move that file into the stash (and a
    later `history prune` delete it). Preflight refuses the whole apply instead."""
    python = cpu_venv / "bin" / "python"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_text("not ortfix's\n")
    record = next(site_packages(cpu_venv).glob("onnxruntime-*.dist-info")) / "RECORD"
    with record.open("a") as f:
        f.write(os.path.relpath(outside / "victim.txt", record.parent.parent) + ",,\n")
    around, before = tree_state(outside), tree_state(cpu_venv)
    proc = ortfix("apply", "--python", str(python), "--yes", env=env)
    one_line_error(proc, "preflight failed", "outside the environment")
    assert_same_tree(around, tree_state(outside))
    assert_same_tree(before, tree_state(cpu_venv))


def _interpreter_link(venv: Path) -> str:
    """What `bin/python` of a venv names inside bin/ (python3 for `python -m venv`): stashing it breaks bin/python."""
    python = venv / "bin" / "python"
    target = os.readlink(python) if python.is_symlink() else ""
    return f"bin/{target}" if target and "/" not in target else "bin/python"


def _base_site_packages(venv: Path) -> dict[str, float]:
    """The base interpreter's site-packages (name → mtime): a venv without its pyvenv.cfg is that interpreter."""
    base = os.path.realpath(venv / "bin" / "python")
    purelib = subprocess.run([base, "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    return {e.name: e.stat(follow_symlinks=False).st_mtime for e in os.scandir(purelib)}


@pytest.mark.parametrize("row", ["pyvenv.cfg", "interpreter"])
def test_record_naming_the_environments_own_files_leaves_them_in_place(row: str, cpu_venv: Path,
                                                                        tmp_path: Path,
                                                                        env: dict[str, str]) -> None:
    """A RECORD row `../../../pyvenv.cfg` (or naming the interpreter in bin/): inside the prefix, so confinement
    alone accepts it. Stashed by the uninstall, the next step's `<env>/bin/python -m pip` would be the base
    interpreter's pip, installing there (or no interpreter at all). Only a distribution's own install locations are
    stashed: checked while apply is held before its install step (and stopped there, rolled back, if it failed)."""
    python = cpu_venv / "bin" / "python"
    sp = site_packages(cpu_venv)
    named = cpu_venv / ("pyvenv.cfg" if row == "pyvenv.cfg" else _interpreter_link(cpu_venv))
    record = next(sp.glob("onnxruntime-*.dist-info")) / "RECORD"
    with record.open("a") as f:
        f.write(os.path.relpath(named, sp) + ",,\n")
    before, base_before = tree_state(cpu_venv), _base_site_packages(cpu_venv)
    pause = tmp_path / "paused"
    environ = {**env, "ORTFIX_TEST_PAUSE_BEFORE_STEP": "2", "ORTFIX_TEST_PAUSE_FILE": str(pause)}
    proc = subprocess.Popen([sys.executable, "-m", "ortfix", "apply", "--python", str(python), "--yes"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environ,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not pause.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert pause.exists(), proc.communicate(timeout=60)
        still = os.path.lexists(named)
        try:
            prefix = subprocess.run([str(python), "-I", "-c", "import sys; print(sys.prefix)"], capture_output=True,
                                    text=True, check=False).stdout.strip()
        except OSError as exc:  # no interpreter left
            prefix = str(exc)
        if not still:
            os.kill(proc.pid, signal.SIGTERM)  # the install must not run: its pip would be the base's
        pause.unlink()
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert still and prefix == str(cpu_venv), (row, prefix)
    assert proc.returncode == 0, (out[-3000:], err[-3000:])
    assert f"leaves {named} in place" in out and "not in the distribution's install locations" in out
    assert _base_site_packages(cpu_venv) == base_before
    after = tree_state(cpu_venv)
    assert after[os.path.relpath(named, cpu_venv)] == before[os.path.relpath(named, cpu_venv)]
    assert ortfix_json("rollback", "--python", str(python), "--yes", env=env)["transaction"]["status"] == \
        "rolled-back"
    assert_same_tree(before, tree_state(cpu_venv))


def test_system_python_is_refused_without_system() -> None:
    python = "/usr/bin/python3"
    if not os.path.exists(python):
        pytest.skip("no /usr/bin/python3")
    environ = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    proc = ortfix("apply", "--python", python, "--dry-run", env=environ)
    if "No changes needed" in proc.stdout:
        pytest.skip("the system Python needs no change here")
    one_line_error(proc, "is a system Python", "--system")


def test_forged_record_fields_are_refused_and_history_still_lists(cpu_venv: Path, env: dict[str, str]) -> None:
    """Record fields read back for `history` and for the undo: a malformed `installed` entry, and a write-file step
    claiming to have created a folder that is not one of its file's folders (rollback would rmdir it)."""
    python = str(cpu_venv / "bin" / "python")
    tx_id = ortfix_json("apply", "--python", python, "--yes", env=env)["transaction"]["id"]
    journal = cpu_venv / ".ortfix" / "transactions" / tx_id / "journal.json"

    original = resign(journal, lambda body: step_of(body, "pip-install")["record"]["installed"].append({"x": 1}))
    listing = ortfix("history", "--python", python, env=env)
    assert listing.returncode == 0 and "Traceback" not in listing.stderr, listing.stderr
    one_line_error(ortfix("rollback", "--python", python, "--yes", env=env), "installed field 'name'")

    journal.write_bytes(original)
    resign(journal, lambda body: step_of(body, "write-file")["record"].update(created_dirs=["include"]))
    before = tree_state(cpu_venv)
    one_line_error(ortfix("rollback", "--python", python, "--yes", env=env), "is not a folder of")
    assert_same_tree(before, tree_state(cpu_venv))
    journal.write_bytes(original)
    assert ortfix_json("rollback", "--python", python, "--yes", env=env)["transaction"]["status"] == "rolled-back"


def test_plan_options_are_judged_as_on_the_command_line(planned: tuple[Path, dict[str, Any], dict[str, str], Path],
                                                        tmp_path: Path) -> None:
    """`--driver 1.2` is a driver version the command line accepts: the plan file it saves is accepted as well."""
    venv, _original, environ, _outside = planned
    plan_file = tmp_path / "plan.json"
    proc = ortfix("plan", "--python", str(venv), "--driver", "1.2", "-o", str(plan_file), env=environ)
    assert proc.returncode in (0, 1), proc.stderr
    proc = ortfix("apply", str(plan_file), "--python", str(venv), "--dry-run", env=environ)
    assert "not a valid ortfix plan" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode in (0, 1), proc.stderr
