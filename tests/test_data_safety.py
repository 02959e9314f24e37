"""Only what the transaction itself did is undone, and only while it is still what was recorded (issue: data safety).

Real venvs, real pip, real wheels from the session wheelhouse; the real `ortfix` command. Each test makes the ordinary
accident happen for real — a stashed file deleted, a later `pip install` writing into the folders an apply created,
the journal lost, another pip running during the apply, SIGTERM during pip, the disk filling up during the install —
and checks that nothing that is not ortfix's is lost and that the outcome is said in one line.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from checktools import site_packages
from clitools import REPO
from support.fixtures import build_wheel, fake_nvidia_wheel, pip_install
from txtools import (
    GatedWheelhouse,
    assert_same_tree,
    fresh_process,
    one_line_error,
    ortfix,
    ortfix_json,
    pip_venv,
    tree_state,
)


def around(venv: Path) -> dict[str, tuple[Any, ...]]:
    """Everything in the folder that holds the environment, except the environment itself (not even walked: a
    rollback's background deletion may be at work in it): must never change."""
    out: dict[str, tuple[Any, ...]] = {}
    for entry in venv.parent.iterdir():
        if entry.name == venv.name:
            continue
        if entry.is_dir() and not entry.is_symlink():
            out.update({f"{entry.name}/{k}": v for k, v in tree_state(entry).items()})
        out[entry.name] = ("l", os.readlink(entry)) if entry.is_symlink() else (
            ("d",) if entry.is_dir() else ("f", entry.read_bytes()))
    return out


def _apply(venv: Path, environ: dict[str, str]) -> str:
    doc = ortfix_json("apply", "--python", str(venv / "bin" / "python"), "--yes", env=environ)
    assert doc["status"] == "applied"
    return str(doc["transaction"]["id"])


# ---------------------------------------------------------------------------------------------------------------------
# D1: the stash is verified, whole, before a rollback changes anything
# ---------------------------------------------------------------------------------------------------------------------


def test_rollback_refuses_when_a_stashed_file_is_missing(cpu_venv: Path, env: dict[str, str]) -> None:
    tx_id = _apply(cpu_venv, env)
    stash = cpu_venv / ".ortfix" / "transactions" / tx_id / "steps" / "1" / "stash"
    victim = next(p for p in stash.rglob("*.py") if p.name == "__init__.py")
    saved = victim.read_bytes()
    victim.unlink()
    other = next(p for p in stash.rglob("*.so*") if p.is_file())
    other.write_bytes(other.read_bytes() + b"\0")
    before, outside = tree_state(cpu_venv), around(cpu_venv)
    line = one_line_error(ortfix("rollback", "--python", str(cpu_venv), "--yes", env=env), "cannot be undone exactly",
                          "missing from the stash", "nothing was changed")
    assert str(victim) in line and str(other) in line  # the list says which
    assert_same_tree(before, tree_state(cpu_venv))
    assert_same_tree(outside, around(cpu_venv))
    assert ortfix_json("history", "--python", str(cpu_venv), env=env)["transactions"][0]["status"] == "applied"
    victim.write_bytes(saved)
    other.write_bytes(other.read_bytes()[:-1])
    assert ortfix_json("rollback", "--python", str(cpu_venv), "--yes", env=env)["transaction"]["status"] == \
        "rolled-back"


# ---------------------------------------------------------------------------------------------------------------------
# D2: rollback removes only the files the install created, and only while unchanged since
# ---------------------------------------------------------------------------------------------------------------------


def test_rollback_keeps_what_a_later_pip_install_added_or_changed(cpu_venv: Path, tmp_path: Path,
                                                                  env: dict[str, str]) -> None:
    python = cpu_venv / "bin" / "python"
    sp = site_packages(cpu_venv)
    _apply(cpu_venv, env)
    assert (sp / "nvidia").is_dir()
    # later, the user installs another NVIDIA wheel into the same nvidia/ folder, and edits one of the files ORT put
    later = tmp_path / "later"
    later.mkdir()
    fake_nvidia_wheel(later, "nvidia-cuda-runtime-cu11", "11.8.89", {"libcudart.so.11.0": "libcudart.so.11.0"},
                      "nvidia/cuda_runtime/lib")
    pip_install(python, "nvidia-cuda-runtime-cu11", find_links=later)
    cu11 = next(sp.glob("nvidia_cuda_runtime_cu11-*.dist-info"))
    cu11_files = [line.split(",")[0] for line in (cu11 / "RECORD").read_text().splitlines() if line]
    edited = sp / "onnxruntime" / "capi" / "onnxruntime_validation.py"
    if not edited.exists():
        edited = next((sp / "onnxruntime").rglob("*.py"))
    edited.write_text(edited.read_text() + "# the user's own change\n")
    outside = around(cpu_venv)

    doc = ortfix_json("rollback", "--python", str(python), "--yes", env=env, expect=1)
    assert_same_tree(outside, around(cpu_venv))
    warnings = "\n".join(doc["warnings"])
    assert str(edited) in warnings and "changed after the install" in warnings
    assert "holds files this transaction did not install" in warnings
    for rel in cu11_files:  # every file of the later package is still there
        assert (sp / rel).exists(), rel
    assert "# the user's own change" in edited.read_text()
    ok = fresh_process(python, "import ctypes, sys; ctypes.CDLL(sys.argv[1]); print('loads')".replace(
        "sys.argv[1]", repr(str(sp / "nvidia/cuda_runtime/lib/libcudart.so.11.0"))))
    assert "loads" in ok.stdout, ok.stderr
    assert not list(sp.glob("onnxruntime_gpu-*.dist-info")) and not list(sp.glob("nvidia_cudnn_cu12-*.dist-info"))


# ---------------------------------------------------------------------------------------------------------------------
# D3: a transaction whose journal is missing is never deleted, and blocks the next apply
# ---------------------------------------------------------------------------------------------------------------------


def test_missing_journal_is_reported_and_its_stash_kept(cpu_venv: Path, env: dict[str, str]) -> None:
    python = str(cpu_venv / "bin" / "python")
    tx_id = _apply(cpu_venv, env)
    folder = cpu_venv / ".ortfix" / "transactions" / tx_id
    (folder / "journal.json").unlink()
    stash_files = sorted(p for p in (folder / "steps").rglob("*") if p.is_file())
    assert len(stash_files) > 10
    check = ortfix_json("check", "--python", python, "--fresh", env=env, expect=1)
    [tx001] = [f for f in check["findings"] if f["code"] == "TX001"]
    assert "cannot be read" in tx001["summary"] and f"ortfix history show {tx_id}" in tx001["fix"]
    one_line_error(ortfix("rollback", "--python", python, "--yes", env=env), "journal", "is missing")
    shown = ortfix("history", "show", tx_id, "--python", python, env=env)
    assert shown.returncode == 0 and "Traceback" not in shown.stderr and "missing" in shown.stdout, shown
    # uninstall the GPU build by hand so that apply has work to do: it must still refuse, and keep the folder
    subprocess.run([sys.executable, "-m", "pip", "--python", python, "uninstall", "-y", "onnxruntime-gpu"],
                   check=True, capture_output=True)
    outside = around(cpu_venv)
    proc = ortfix("apply", "--python", python, "--yes", env=env)
    one_line_error(proc, f"transaction {tx_id} cannot be read", "nothing was changed")
    assert_same_tree(outside, around(cpu_venv))
    assert sorted(p for p in (folder / "steps").rglob("*") if p.is_file()) == stash_files


# ---------------------------------------------------------------------------------------------------------------------
# D4, L2: another pip during the install; SIGTERM during the install (both made deterministic by a gated wheelhouse)
# ---------------------------------------------------------------------------------------------------------------------


def _start_apply(python: Path, environ: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "ortfix", "apply", "--python", str(python), "--yes"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environ,
                            stdin=subprocess.DEVNULL, cwd=REPO, start_new_session=True)


def _pips_of(venv: Path) -> list[str]:
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if str(venv) in cmd and "pip" in cmd and "install" in cmd:
                out.append(cmd)
    return out


def _apply_interrupted_by(venv: Path, wheelhouse: Path, tmp_path: Path, during: Callable[[subprocess.Popen[str]], None]
                          ) -> tuple[subprocess.Popen[str], str, str, dict[str, tuple[Any, ...]]]:
    """Start `ortfix apply`, run `during` while its pip is held in the middle of the install, let pip go on; the
    finished process, its output, and the tree as it was before."""
    house = GatedWheelhouse(wheelhouse, "nvidia_cudnn_cu12", venv / ".ortfix" / "transactions")
    try:
        environ = house.pip_env(tmp_path)
        before, outside = tree_state(venv), around(venv)
        proc = _start_apply(venv / "bin" / "python", environ)
        reached = house.reached.wait(120)
        if reached:
            during(proc)
        house.release.set()
        out, err = proc.communicate(timeout=300)
    finally:
        house.close()
    assert reached, err[-2000:]
    assert_same_tree(outside, around(venv))
    return proc, out, err, before


def test_another_pip_during_apply_is_detected_and_its_work_kept(cpu_venv: Path, tmp_path: Path,
                                                                 wheelhouse: Path) -> None:
    python = cpu_venv / "bin" / "python"
    other = tmp_path / "other"
    other.mkdir()
    build_wheel(other, "unrelated-pkg", "1.0", {"unrelated_pkg/__init__.py": b"VALUE = 42\n"})
    def users_own_pip(_apply: subprocess.Popen[str]) -> None:  # at the same time as ortfix's
        pip_install(python, "unrelated-pkg", find_links=other)

    proc, out, err, before = _apply_interrupted_by(cpu_venv, wheelhouse, tmp_path, users_own_pip)
    assert proc.returncode == 1, (out[-2000:], err[-2000:])
    assert "the environment changed while pip was installing" in err and "every change was rolled back" in err
    ok = fresh_process(python, "import unrelated_pkg; print(unrelated_pkg.VALUE)")
    assert ok.stdout.strip() == "42", ok.stderr
    after = tree_state(cpu_venv)
    theirs = {k for k in after if "unrelated_pkg" in k}
    assert theirs and {k: v for k, v in after.items() if k not in theirs} == before


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_sigterm_or_sighup_during_the_install_rolls_back(sig: signal.Signals, cpu_venv: Path,
                                                         tmp_path: Path, wheelhouse: Path) -> None:
    # what `kill` and `docker stop` send (or a closed terminal): to ortfix alone
    proc, out, err, before = _apply_interrupted_by(cpu_venv, wheelhouse, tmp_path, lambda p: os.kill(p.pid, sig))
    assert proc.returncode == 130, (out[-2000:], err[-2000:])
    assert f"terminated ({sig.name}); every change was rolled back" in err
    assert_same_tree(before, tree_state(cpu_venv))
    assert not _pips_of(cpu_venv)  # the installer's whole process group went with it


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_while_apply_verifies_rolls_back(sig: signal.Signals, cpu_venv: Path, env: dict[str, str],
                                                  tmp_path: Path) -> None:
    """The steps are done and apply verifies in a fresh process of the target: `kill` (SIGTERM) or SIGINT then must
    undo the transaction and exit 130 with one line, not leave it `running` (exit 143) or be ignored. A .pth file
    holds every process of the target still once the GPU build is there (that is: only those that verify)."""
    python = cpu_venv / "bin" / "python"
    sp = site_packages(cpu_venv)
    verifying = tmp_path / "verifying"
    gpu = sp / "onnxruntime_gpu-1.22.0.dist-info"
    (sp / "zz_slow_verification.pth").write_text(
        f"import os, time; os.path.isdir({str(gpu)!r}) and (open({str(verifying)!r}, 'w').close() or "
        "time.sleep(120))\n")
    before = tree_state(cpu_venv)
    proc = subprocess.Popen([sys.executable, "-m", "ortfix", "apply", "--python", str(python), "--yes"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            stdin=subprocess.DEVNULL, cwd=REPO, start_new_session=True,
                            # a shell's background job ignores SIGINT: this is a user's ortfix, which does not
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 180
        while not verifying.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        reached = verifying.exists()
        os.kill(proc.pid, sig)  # to ortfix alone, as `kill` does
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert reached, (out[-2000:], err[-2000:])
    assert proc.returncode == 130, (proc.returncode, out[-2000:], err[-2000:])
    what = "terminated (SIGTERM)" if sig == signal.SIGTERM else "interrupted"
    one_line_error(subprocess.CompletedProcess(proc.args, proc.returncode, out, err),
                   f"{what}; every change was rolled back", code=130)
    assert_same_tree(before, tree_state(cpu_venv))
    [tx] = ortfix_json("history", "--python", str(python), env=env)["transactions"]
    assert tx["status"] == "rolled-back"


# ---------------------------------------------------------------------------------------------------------------------
# pip settings that send the install elsewhere: refused (target, prefix, root) or overridden (user)
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("key", "where"), [("target", "file"), ("prefix", "file"), ("root", "file"),
                                            ("target", "variable")])
def test_pip_settings_that_redirect_the_install_are_refused(key: str, where: str, cpu_venv: Path,
                                                            env: dict[str, str],
                                                            tmp_path: Path) -> None:
    """pip would install every distribution there: the apply rolls the environment back, and the files pip wrote
    outside stay, unmentioned. Refused in one line naming the setting and where it is set, before anything runs."""
    python = cpu_venv / "bin" / "python"
    elsewhere = tmp_path / "elsewhere"
    conf = Path(env["PIP_CONFIG_FILE"])
    environ = dict(env)
    if where == "file":
        conf.write_text(conf.read_text() + f"{key} = {elsewhere}\n")
        source = f"[global] in {conf}"
    else:
        environ[f"PIP_{key.upper()}"] = str(elsewhere)
        source = f"the environment variable PIP_{key.upper()}"
    plan = ortfix_json("plan", "--python", str(python), env=environ, expect=1)
    assert any(f"sets {key} = {str(elsewhere)!r} ({source})" in n and "apply refuses" in n for n in plan["notes"])
    before, outside = tree_state(cpu_venv), around(cpu_venv)
    line = one_line_error(ortfix("apply", "--python", str(python), "--yes", env=environ),
                          f"your pip configuration sets {key} = {str(elsewhere)!r} ({source})",
                          "outside the environment", "nothing was changed")
    assert "Traceback" not in line
    assert not elsewhere.exists()
    assert_same_tree(before, tree_state(cpu_venv))
    assert_same_tree(outside, around(cpu_venv))


def test_pip_user_setting_is_overridden(cpu_venv: Path, env: dict[str, str]) -> None:
    """`user = true`: pip would install into the user's site-packages (and, in a venv, refuses to). The install goes
    into the environment all the same (--no-user), and the plan says so."""
    python = cpu_venv / "bin" / "python"
    conf = Path(env["PIP_CONFIG_FILE"])
    conf.write_text(conf.read_text() + "user = true\n")
    plan = ortfix_json("plan", "--python", str(python), env=env, expect=1)
    assert any("sets user = true" in n and "--no-user" in n for n in plan["notes"])
    before = tree_state(cpu_venv)
    doc = ortfix_json("apply", "--python", str(python), "--yes", env=env)
    assert doc["status"] == "applied"
    assert (site_packages(cpu_venv) / "onnxruntime_gpu-1.22.0.dist-info").is_dir()
    assert ortfix_json("rollback", "--python", str(python), "--yes", env=env)["transaction"]["status"] == \
        "rolled-back"
    assert_same_tree(before, tree_state(cpu_venv))


# ---------------------------------------------------------------------------------------------------------------------
# B2: the disk fills during a real install: the automatic rollback needs no new space, leaves no temp files
# ---------------------------------------------------------------------------------------------------------------------


@pytest.fixture()
def small_disk(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a small tmpfs")
    mnt = tmp_path / "small-disk"
    mnt.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96m", "tmpfs", str(mnt)], capture_output=True,
                          check=False)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _fill(folder: Path) -> Path:
    """Write zeros until the filesystem says ENOSPC, down to single bytes: the disk is then truly full."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for size in (1 << 20, 1 << 16, 4096, 512, 1):
            block = b"\0" * size
            try:
                while os.write(fd, block):
                    pass
            except OSError:
                pass
    finally:
        os.close(fd)
    return filler


def test_disk_full_during_the_install_rolls_back(small_disk: Path, tmp_path: Path, wheelhouse: Path,
                                                 venv_template: Path, env: dict[str, str]) -> None:
    """Preflight sees enough room; then the disk fills up (another process, a log) just before pip runs: pip fails,
    and the automatic rollback must succeed on the full disk (the space reserved when the transaction began)."""
    import time

    python = pip_venv(venv_template, small_disk / "venv")
    pip_install(python, "onnxruntime==1.22.0", find_links=wheelhouse)
    venv = python.parent.parent
    pause = tmp_path / "paused"
    environ = {**env, "ORTFIX_TEST_PAUSE_BEFORE_STEP": "2", "ORTFIX_TEST_PAUSE_FILE": str(pause)}
    before = tree_state(venv)
    proc = _start_apply(python, environ)
    deadline = time.monotonic() + 120
    while not pause.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    reached = pause.exists()
    filler = _fill(small_disk)
    pause.unlink(missing_ok=True)
    out, err = proc.communicate(timeout=300)
    assert reached, err[-2000:]
    assert proc.returncode == 1, (out[-2000:], err[-2000:])
    assert "No space left on device" in out + err and "Traceback" not in err, err[-3000:]
    assert "every change was rolled back" in err, err[-3000:]
    assert not [p for p in (venv / ".ortfix").rglob("*.tmp")]
    filler.unlink()
    assert_same_tree(before, tree_state(venv))
    [tx] = ortfix_json("history", "--python", str(python), env=env)["transactions"]
    assert tx["status"] == "rolled-back"


def test_rollback_on_a_full_disk_after_a_crash(small_disk: Path, tmp_path: Path, wheelhouse: Path,
                                               venv_template: Path, env: dict[str, str]) -> None:
    """An apply killed (kill -9) after its install; the disk then fills to the last byte. `ortfix rollback` needs no
    new space (it frees the transaction's reserve first) and leaves no temp file behind."""
    python = pip_venv(venv_template, small_disk / "venv")
    pip_install(python, "onnxruntime==1.22.0", find_links=wheelhouse)
    venv = python.parent.parent
    before = tree_state(venv)
    crashed = ortfix("apply", "--python", str(python), "--yes", env={**env, "ORTFIX_TEST_CRASH_AFTER_STEP": "2"})
    assert crashed.returncode == 99, crashed.stderr
    filler = _fill(small_disk)
    assert os.statvfs(small_disk).f_bavail == 0
    doc = ortfix_json("rollback", "--python", str(python), "--yes", env=env)
    assert doc["transaction"]["status"] == "rolled-back"
    assert not [p for p in (venv / ".ortfix").rglob("*.tmp")]
    filler.unlink()
    assert_same_tree(before, tree_state(venv))


# ---------------------------------------------------------------------------------------------------------------------
# D9: rollback after another installer touched the environment: one line per cause, the list on demand, a verdict;
#     exit 1 only when something the transaction did could not be undone (issue 20, item 4)
# ---------------------------------------------------------------------------------------------------------------------


def _result_lines(stdout: str) -> list[str]:
    """The rollback's result, from its "Rolled back transaction" line on (before it: the progress of each step)."""
    lines = stdout.strip().splitlines()
    return lines[next(i for i, ln in enumerate(lines) if ln.startswith("Rolled back transaction")):]


def _record_files(dist_info: Path) -> list[Path]:
    """Every file pip's RECORD of that distribution lists (what a reinstall writes again)."""
    rows = [line.split(",")[0] for line in (dist_info / "RECORD").read_text().splitlines() if line]
    return [(dist_info.parent / row).resolve() for row in rows]


def _force_reinstall_one_nvidia_wheel(python: Path, sp: Path, wheelhouse: Path) -> tuple[str, list[Path]]:
    """`pip install --force-reinstall` of the NVIDIA wheel the apply installed with the most files: pip writes every
    one of its files again. Returns its name and those files."""
    dist_info = max(sp.glob("nvidia_*.dist-info"), key=lambda d: len(_record_files(d)))
    name, version = dist_info.name[:-len(".dist-info")].rsplit("-", 1)
    pip_install(python, "--force-reinstall", f"{name}=={version}", find_links=wheelhouse, no_deps=True)
    return name, _record_files(next(sp.glob(f"{name}-*.dist-info")))


def _pip_uninstall(python: Path, *names: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "uninstall", "-y", *names],
                   check=True, capture_output=True)


def test_rollback_after_a_force_reinstall_says_one_line_per_cause(cpu_venv: Path, wheelhouse: Path,
                                                                  env: dict[str, str]) -> None:
    python = cpu_venv / "bin" / "python"
    sp = site_packages(cpu_venv)
    # 1. text: a few summary lines and the verdict, no line per file, exit 0 (the transaction's own part is undone)
    _apply(cpu_venv, env)
    name, rewritten = _force_reinstall_one_nvidia_wheel(python, sp, wheelhouse)
    assert len(rewritten) >= 3
    proc = ortfix("rollback", "--python", str(python), "--yes", env=env)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    lines = _result_lines(proc.stdout)
    assert len(lines) <= 6 and not any(str(f) in proc.stdout for f in rewritten), proc.stdout
    [changed] = [ln for ln in lines if "written again later" in ln]
    assert changed.startswith(f"note: {len(rewritten)} file(s) the transaction wrote"), changed
    assert sum("folder(s) the transaction created hold files it did not install" in ln for ln in lines) == 1
    assert "warning:" not in proc.stdout
    assert "not all as before the apply" in lines[-1] and "Everything the transaction did is undone" in lines[-1]
    assert all(f.exists() for f in rewritten)  # the later installer's files stay
    # 2. --verbose lists every one of them; 3. --json carries the list, the causes and the verdict
    _pip_uninstall(python, name)  # what the later installer added goes: the environment is as before the apply
    _apply(cpu_venv, env)
    name, rewritten = _force_reinstall_one_nvidia_wheel(python, sp, wheelhouse)
    verbose = ortfix("rollback", "--python", str(python), "--yes", "--verbose", env=env)
    assert verbose.returncode == 0, verbose.stderr
    listed = [ln for ln in verbose.stdout.splitlines() if ln.startswith("  changed-later: ")]
    assert sorted(ln.split(": ", 1)[1].split(" was changed")[0] for ln in listed) == sorted(map(str, rewritten))
    _pip_uninstall(python, name)
    _apply(cpu_venv, env)
    _name, rewritten = _force_reinstall_one_nvidia_wheel(python, sp, wheelhouse)
    doc = ortfix_json("rollback", "--python", str(python), "--yes", env=env)
    assert sorted(n["path"] for n in doc["notes"] if n["cause"] == "changed-later") == sorted(map(str, rewritten))
    assert doc["as_before"] is False and doc["everything_undone"] is True
    assert any(line.startswith(f"{len(rewritten)} file(s)") for line in doc["summary"])


def test_rollback_after_another_installer_restored_the_environment_exits_0(cpu_venv: Path,
                                                                           wheelhouse: Path,
                                                                           env: dict[str, str]) -> None:
    """What `uv sync` or `pip install -r requirements.txt` does after an apply: the GPU build goes, the CPU build
    comes back, byte for byte. The rollback then has nothing of its own left to undo: exit 0, and it says so."""
    python = cpu_venv / "bin" / "python"
    sp = site_packages(cpu_venv)
    before = tree_state(cpu_venv)
    _apply(cpu_venv, env)
    gpu = [d.name[:-len(".dist-info")].rsplit("-", 1)[0] for d in sp.glob("*.dist-info")
           if d.name.startswith(("nvidia_", "onnxruntime_gpu-"))]
    _pip_uninstall(python, *gpu)
    pip_install(python, "--force-reinstall", "onnxruntime==1.22.0", find_links=wheelhouse, no_deps=True)
    proc = ortfix("rollback", "--python", str(python), "--yes", env=env)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    lines = _result_lines(proc.stdout)
    assert len(lines) <= 8 and "warning:" not in proc.stdout, proc.stdout
    assert lines[-1] == "The files the transaction touched are as they were before the apply.", lines
    assert any("from before the apply had been written back already, with the same bytes" in ln for ln in lines)
    after = {k: v for k, v in tree_state(cpu_venv).items() if "__pycache__" not in k}
    assert_same_tree({k: v for k, v in before.items() if "__pycache__" not in k}, after)


def test_rollback_exits_1_when_an_earlier_file_cannot_be_put_back(cpu_venv: Path,
                                                                  env: dict[str, str]) -> None:
    """A file the apply replaced (onnxruntime's own, from before) written over again later with other bytes: its
    earlier content stays in the stash, the rollback says so with a warning line and exits 1."""
    python = cpu_venv / "bin" / "python"
    sp = site_packages(cpu_venv)
    _apply(cpu_venv, env)
    edited = sp / "onnxruntime" / "__init__.py"
    edited.write_text(edited.read_text() + "# written later\n")
    doc = ortfix_json("rollback", "--python", str(python), "--yes", env=env, expect=1)
    [note] = [n for n in doc["notes"] if n["path"] == str(edited) and n["cause"] == "replaced-later"]
    assert note["undone"] is False and doc["everything_undone"] is False and doc["as_before"] is False
    assert "# written later" in edited.read_text()
