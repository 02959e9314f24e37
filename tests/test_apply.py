"""`ortfix apply`, `rollback` and `history` end to end: real venvs (with their own pip), real wheels from a
wheelhouse configured the way a user with an offline wheelhouse configures pip (PIP_CONFIG_FILE with no-index and
find-links), the real `ortfix` command in a subprocess, and proof by hashing every file, mode and link target that a
rollback leaves the environment exactly as it was.

Only `<prefix>/.ortfix` (ortfix's own lock and transaction records) is left out of the comparison: the history of a
rolled-back transaction is kept on purpose.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from checktools import site_packages
from clitools import REPO
from support.fixtures import NVIDIA_CU12, fake_nvidia_wheel, make_venv, pip_install
from txtools import (
    CU12_SONAMES,
    GatedWheelhouse,
    assert_same_tree,
    fresh_process,
    load_code,
    one_line_error,
    ortfix,
    ortfix_env,
    ortfix_json,
    pip_config,
    pip_venv,
    tree_state,
)

BLOCKING = {"LIB001", "LIB002", "LIB003", "LIB005", "LIB007", "ORT001", "ORT002", "ORT003", "ORT006", "ORT007",
            "ORT008"}


# The fixtures (venv_template, cpu_venv, env, wheelhouse) are in tests/conftest.py, the helpers in tests/txtools.py.


# ---------------------------------------------------------------------------------------------------------------------
# (1) CPU onnxruntime → apply → everything loads → rollback → byte-identical
# ---------------------------------------------------------------------------------------------------------------------


def test_cpu_swap_applies_verifies_and_rolls_back_byte_for_byte(cpu_venv: Path, env: dict[str, str]) -> None:
    python = cpu_venv / "bin" / "python"
    before = tree_state(cpu_venv)
    proc = ortfix("apply", "--python", str(python), "--yes", env=env)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    assert "installing with pip:" in proc.stdout and f"{python} -m pip install" in proc.stdout
    assert "Successfully installed" in proc.stdout  # pip's own output, streamed
    assert "Applied transaction" in proc.stdout
    sp = site_packages(cpu_venv)
    assert not (sp / "onnxruntime-1.22.0.dist-info").exists()
    assert (sp / "onnxruntime_gpu-1.22.0.dist-info").is_dir()
    provider = sp / "onnxruntime" / "capi" / "libonnxruntime_providers_cuda.so"
    run = fresh_process(python, load_code(provider))
    assert "all loaded" in run.stdout, run.stderr
    assert (sp / "__pycache__").is_dir()  # the user's process cached bytecode for the hook: rollback must cope

    history = ortfix_json("history", "--python", str(cpu_venv), env=env)
    [tx] = history["transactions"]
    assert tx["status"] == "applied"
    assert "- onnxruntime 1.22.0" in tx["changes"] and "+ onnxruntime-gpu 1.22.0" in tx["changes"]

    doc = ortfix_json("rollback", "--python", str(python), "--yes", env=env)
    assert doc["transaction"]["status"] == "rolled-back" and not doc["warnings"]
    assert_same_tree(before, tree_state(cpu_venv))
    run = fresh_process(python, "import onnxruntime.capi.build_and_package_info as b; print(b.package_name)")
    assert run.stdout.strip() == "onnxruntime"
    # nothing left to undo
    one_line_error(ortfix("rollback", "--python", str(python), "--yes", env=env), "already rolled back")


# ---------------------------------------------------------------------------------------------------------------------
# (2) GPU build with its extras, libraries not found → preload hook
# ---------------------------------------------------------------------------------------------------------------------


def test_gpu_venv_gets_preload_hook(tmp_path: Path, wheelhouse: Path, venv_template: Path,
                                    env: dict[str, str]) -> None:
    python = pip_venv(venv_template, tmp_path / "gpu")
    pip_install(python, "onnxruntime-gpu[cuda,cudnn]==1.22.0", find_links=wheelhouse)
    venv = python.parent.parent
    before = tree_state(venv)
    sp = site_packages(venv)
    provider = sp / "onnxruntime" / "capi" / "libonnxruntime_providers_cuda.so"
    assert "all loaded" not in fresh_process(python, load_code(provider)).stdout

    doc = ortfix_json("apply", "--python", str(python), "--yes", env=env)
    kinds = [s["kind"] for s in doc["transaction"]["steps"]]
    assert kinds == ["write-file", "write-file"]
    assert doc["verification"]["ok"] and set(CU12_SONAMES) <= set(doc["verification"]["loader"]["libraries"])
    assert (sp / "_ortfix_preload.pth").is_file()
    run = fresh_process(python, load_code(provider))
    assert "all loaded" in run.stdout, run.stderr
    check = ortfix_json("check", "--python", str(python), env=env, expect=1)
    assert not {f["code"] for f in check["findings"]} & BLOCKING
    # `ortfix verify` agrees. The hook loads the environment's whole cuDNN, its sub-libraries too (libcudnn.so.9
    # dlopens them by SONAME, and the loader reuses a library loaded under that SONAME): after `import onnxruntime`
    # a bare dlopen gets them, where without the hook it would not find them.
    verify = ortfix("verify", "--python", str(python), "--json", env=env)
    loader = json.loads(verify.stdout)["levels"][0]
    assert loader["status"] == "pass", loader
    assert not loader["data"]["check"]["via_requester"]
    bare = fresh_process(python, "import ctypes, onnxruntime\nctypes.CDLL('libcudnn_graph.so.9')\nprint('found')\n")
    assert "found" in bare.stdout, bare.stderr

    ortfix_json("rollback", "--python", str(python), "--yes", env=env)
    assert_same_tree(before, tree_state(venv))


# ---------------------------------------------------------------------------------------------------------------------
# (3) conda layout: activate.d / deactivate.d hooks, checked by sourcing them in a real sh
# ---------------------------------------------------------------------------------------------------------------------


def test_conda_prefix_gets_activate_hooks(tmp_path: Path, wheelhouse: Path, venv_template: Path,
                                          env: dict[str, str]) -> None:
    python = pip_venv(venv_template, tmp_path / "conda env")
    prefix = python.parent.parent
    (prefix / "conda-meta").mkdir()
    pip_install(python, "onnxruntime-gpu[cuda,cudnn]==1.22.0", find_links=wheelhouse)
    before = tree_state(prefix)

    doc = ortfix_json("apply", "--python", str(python), "--yes", env=env)
    assert doc["status"] == "applied"
    assert doc["verification"]["loader"]["argv"][:3] == ["sh", "-c", '. "$1"; exec "$2" -c "$3"']
    activate = prefix / "etc/conda/activate.d/ortfix-cuda-libs.sh"
    deactivate = prefix / "etc/conda/deactivate.d/ortfix-cuda-libs.sh"
    assert activate.is_file() and deactivate.is_file()

    shell_env = {"PATH": "/usr/bin:/bin", "CONDA_PREFIX": str(prefix)}
    show = 'printf "%s|" "${LD_LIBRARY_PATH-UNSET}"'
    script = f'. "$1"; {show}; . "$2"; {show}'
    out = subprocess.run(["sh", "-c", script, "sh", str(activate), str(deactivate)], capture_output=True, text=True,
                         env=shell_env, check=True).stdout.split("|")
    assert str(site_packages(prefix) / "nvidia/cudnn/lib") in out[0].split(":")
    assert out[1] == "UNSET"
    out = subprocess.run(["sh", "-c", script, "sh", str(activate), str(deactivate)], capture_output=True, text=True,
                         env={**shell_env, "LD_LIBRARY_PATH": "/opt/x y"}, check=True).stdout.split("|")
    assert out[0].endswith(":/opt/x y") and out[1] == "/opt/x y"
    run = subprocess.run(["sh", "-c", '. "$1"; exec "$2" -c "$3"', "sh", str(activate), str(python), load_code(None)],
                         capture_output=True, text=True, env=shell_env, check=False)
    assert "all loaded" in run.stdout, run.stderr

    ortfix_json("rollback", "--python", str(python), "--yes", env=env)
    assert_same_tree(before, tree_state(prefix))
    assert not (prefix / "etc").exists()


def test_data_files_an_install_puts_outside_site_packages_are_rolled_back(tmp_path: Path, wheelhouse: Path,
                                                                          venv_template: Path) -> None:
    """A wheel's `.data/data/` tree goes to the prefix itself (sympy, a dependency of onnxruntime-gpu, installs
    share/man/man1/isympy.1): what the install wrote there is the transaction's, and rollback removes it."""
    import zipfile

    house = tmp_path / "house"
    shutil.copytree(wheelhouse, house)
    [nvrtc] = house.glob("nvidia_cuda_nvrtc_cu12-*.whl")
    dist = nvrtc.name.split("-")[0] + "-" + nvrtc.name.split("-")[1]
    with zipfile.ZipFile(nvrtc, "a") as zf:  # pip writes its own RECORD: the wheel's need not list the new file
        zf.writestr(f"{dist}.data/data/share/man/man1/nvrtc-test.1", ".TH NVRTC-TEST 1\n")
        zf.writestr(f"{dist}.data/data/etc/nvrtc-test/conf.toml", "x = 1\n")
    python = pip_venv(venv_template, tmp_path / "cpu")
    pip_install(python, "onnxruntime==1.22.0", find_links=house)
    venv = python.parent.parent
    env = ortfix_env(pip_config(tmp_path, house), tmp_path)
    before = tree_state(venv)

    ortfix_json("apply", "--python", str(python), "--yes", env=env)
    assert (venv / "share/man/man1/nvrtc-test.1").is_file() and (venv / "etc/nvrtc-test/conf.toml").is_file()
    doc = ortfix_json("rollback", "--python", str(python), "--yes", env=env)
    assert not doc["warnings"], doc["warnings"]
    assert_same_tree(before, tree_state(venv))


# ---------------------------------------------------------------------------------------------------------------------
# (4) fault injection: die after / during every step; `ortfix rollback --yes` restores the tree every time
# ---------------------------------------------------------------------------------------------------------------------


def _replace_scenario(tmp_path: Path, wheelhouse: Path, venv_template: Path) -> tuple[Path, dict[str, str]]:
    """onnxruntime-gpu without extras and a cuDNN 8 wheel: pip will replace nvidia-cudnn-cu12 8.9 with 9.x, so the
    transaction has a step that moves the old one aside first."""
    old = tmp_path / "old-cudnn"
    fake_nvidia_wheel(old, "nvidia-cudnn-cu12", "8.9.7.29", {"libcudnn.so.8": "libcudnn.so.8"}, "nvidia/cudnn/lib")
    python = pip_venv(venv_template, tmp_path / "replace venv")
    pip_install(python, "onnxruntime-gpu==1.22.0", find_links=wheelhouse)
    pip_install(python, "nvidia-cudnn-cu12==8.9.7.29", find_links=old, no_deps=True)
    return python.parent.parent, ortfix_env(pip_config(tmp_path, wheelhouse, old), tmp_path)


@pytest.mark.parametrize("scenario", ["cpu-swap", "replace"])
def test_crash_after_and_during_every_step_then_rollback(scenario: str, tmp_path: Path, wheelhouse: Path,
                                                         venv_template: Path, env: dict[str, str]) -> None:
    from ortfix.transaction.journal import TxStatus
    from ortfix.transaction.store import interrupted_transactions

    if scenario == "cpu-swap":
        python = pip_venv(venv_template, tmp_path / "venv")
        pip_install(python, "onnxruntime==1.22.0", find_links=wheelhouse)
        prefix = python.parent.parent
    else:
        prefix, env = _replace_scenario(tmp_path, wheelhouse, venv_template)
        python = prefix / "bin" / "python"
    before = tree_state(prefix)
    dry = ortfix_json("apply", "--python", str(python), "--dry-run", env=env, expect=1)
    steps = dry["steps"]
    if scenario == "replace":
        assert [s["origin"] for s in steps].count("replaced-by-pip") == 1
        assert any(s["kind"] == "pip-uninstall" and "nvidia-cudnn-cu12 8.9.7.29" in s["summary"] for s in steps)
    seen = 0
    for mode in ("AFTER", "DURING"):
        for n in range(1, len(steps) + 1):
            proc = ortfix("apply", "--python", str(python), "--yes",
                          env={**env, f"ORTFIX_TEST_CRASH_{mode}_STEP": str(n)})
            assert proc.returncode == 99, (mode, n, proc.stdout[-2000:], proc.stderr[-2000:])
            [interrupted] = interrupted_transactions(prefix)
            assert interrupted.status is TxStatus.RUNNING
            assert interrupted.steps_started == n
            rb = ortfix("rollback", "--python", str(python), "--yes", env=env)
            assert rb.returncode == 0, (mode, n, rb.stdout, rb.stderr)
            assert_same_tree(before, tree_state(prefix))
            assert interrupted_transactions(prefix) == []
            seen += 1
    assert seen == 2 * len(steps)
    # after all that, a clean apply still works
    ortfix_json("apply", "--python", str(python), "--yes", env=env)
    ortfix_json("rollback", "--python", str(python), "--yes", env=env)
    assert_same_tree(before, tree_state(prefix))


# ---------------------------------------------------------------------------------------------------------------------
# (5)-(7) refusals before the first change
# ---------------------------------------------------------------------------------------------------------------------


def test_concurrent_apply_and_rollback_refused(cpu_venv: Path, env: dict[str, str]) -> None:
    from ortfix.transaction import lock

    (cpu_venv / ".ortfix").mkdir()
    before = tree_state(cpu_venv)
    held = lock.acquire(cpu_venv)
    try:
        proc = ortfix("apply", "--python", str(cpu_venv), "--yes", env=env, timeout=60)
        one_line_error(proc, "another ortfix apply or rollback is running", f"pid {os.getpid()}")
        proc = ortfix("rollback", "--python", str(cpu_venv), "--yes", env=env, timeout=60)
        assert proc.returncode == 2  # no transaction yet: refused either way
    finally:
        lock.release(held)
    assert_same_tree(before, tree_state(cpu_venv))
    assert os.listdir(cpu_venv / ".ortfix") == ["lock"]


def test_read_only_state_folder_fails_preflight(cpu_venv: Path, env: dict[str, str]) -> None:
    # Running as root, chmod cannot make a folder unwritable (and os.access says yes): instead `.ortfix` is a regular
    # file, so the transaction folder cannot be created, which preflight must notice before any change.
    (cpu_venv / ".ortfix").write_text("in the way\n")
    before = tree_state(cpu_venv)
    proc = ortfix("apply", "--python", str(cpu_venv), "--yes", env=env)
    one_line_error(proc, "cannot write in the environment", "nothing was changed")
    assert_same_tree(before, tree_state(cpu_venv))
    assert (cpu_venv / ".ortfix").read_text() == "in the way\n"


def _read_only_argv(folder: Path) -> list[str] | None:
    """A command prefix that runs the rest with `folder` mounted read-only (a private mount namespace: nothing else
    on the machine sees it), or None where that is not possible. Root ignores chmod -w, so this is how a read-only
    prefix is made real for root; others get chmod."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return None
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        return None
    return ["unshare", "-m", "sh", "-c", 'mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" "$1" && shift '
            '&& exec "$@"', "sh", str(folder)]


@pytest.mark.parametrize("what", ["site-packages", "prefix"])
def test_read_only_prefix_fails_before_any_change(what: str, cpu_venv: Path, env: dict[str, str]) -> None:
    folder = site_packages(cpu_venv) if what == "site-packages" else cpu_venv
    before = tree_state(cpu_venv)
    wrap = _read_only_argv(folder)
    if wrap is None and os.geteuid() == 0:
        pytest.skip("root without mount namespaces: no way to make a folder read-only for it")
    argv = [sys.executable, "-m", "ortfix", "apply", "--python", str(cpu_venv), "--yes"]
    if wrap is None:
        folder.chmod(0o555)
    try:
        proc = subprocess.run([*(wrap or []), *argv], capture_output=True, text=True, env=env, cwd=REPO,
                              stdin=subprocess.DEVNULL, timeout=300, check=False)
    finally:
        if wrap is None:
            folder.chmod(0o755)
    if what == "prefix":
        one_line_error(proc, "cannot write in the environment", "nothing was changed")
    else:
        one_line_error(proc, "preflight failed", str(folder), "nothing was changed")
    assert_same_tree(before, tree_state(cpu_venv))
    assert not (cpu_venv / ".ortfix" / "transactions").exists()


def test_unreachable_index_fails_preflight(cpu_venv: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty-wheelhouse"
    empty.mkdir()
    env = ortfix_env(pip_config(tmp_path, empty, name="offline.conf"), tmp_path)
    before = tree_state(cpu_venv)
    proc = ortfix("apply", "--python", str(cpu_venv), "--yes", env=env)
    one_line_error(proc, "pip cannot get", "onnxruntime-gpu==1.22.0", "nothing was changed")
    assert_same_tree(before, tree_state(cpu_venv))
    assert not (cpu_venv / ".ortfix").exists()


def test_no_terminal_and_no_yes_refused(cpu_venv: Path, env: dict[str, str]) -> None:
    before = tree_state(cpu_venv)
    one_line_error(ortfix("apply", "--python", str(cpu_venv), env=env), "pass --yes")
    one_line_error(ortfix("rollback", "--python", str(cpu_venv), env=env), "pass --yes")
    assert_same_tree(before, tree_state(cpu_venv))


# ---------------------------------------------------------------------------------------------------------------------
# (8) a journal edited by hand
# ---------------------------------------------------------------------------------------------------------------------


def test_hand_edited_journal_makes_rollback_refuse(cpu_venv: Path, env: dict[str, str]) -> None:
    from ortfix.transaction.journal import canonical, sha256_bytes

    doc = ortfix_json("apply", "--python", str(cpu_venv), "--yes", env=env)
    tx_id = doc["transaction"]["id"]
    journal = cpu_venv / ".ortfix" / "transactions" / tx_id / "journal.json"
    original = journal.read_bytes()

    edited = json.loads(original)
    edited["body"]["steps"][0]["details"]["location"] = "/somewhere/else"
    journal.write_text(json.dumps(edited))
    one_line_error(ortfix("rollback", "--python", str(cpu_venv), "--yes", env=env), "edited by hand")

    for change, fragment in (("unknown", "unknown field 'extra'"), ("missing", "lacks field 'message'")):
        doc2 = json.loads(original)
        if change == "unknown":
            doc2["body"]["extra"] = 1
        else:
            del doc2["body"]["message"]
        doc2["sha256"] = sha256_bytes(canonical(doc2["body"]))  # a careful forger: the checksum matches
        journal.write_text(json.dumps(doc2))
        one_line_error(ortfix("rollback", "--python", str(cpu_venv), "--yes", env=env), fragment)
    listing = ortfix_json("history", "--python", str(cpu_venv), env=env)
    assert listing["transactions"][0]["status"] == "unreadable"  # history reads it tolerantly

    journal.write_bytes(original)
    ortfix_json("rollback", "--python", str(cpu_venv), "--yes", env=env)


# ---------------------------------------------------------------------------------------------------------------------
# (9) a saved plan: applied exactly, refused once stale
# ---------------------------------------------------------------------------------------------------------------------


def test_saved_plan_applies_and_stale_plan_is_refused(cpu_venv: Path, tmp_path: Path, wheelhouse: Path,
                                                      env: dict[str, str]) -> None:
    python = cpu_venv / "bin" / "python"
    plan_file = tmp_path / "plan.json"
    proc = ortfix("plan", "--python", str(python), "-o", str(plan_file), env=env)
    assert proc.returncode == 1 and plan_file.is_file(), proc.stderr
    # The environment comes from --python, never from the file: without it, the plan's prefix is not the target.
    one_line_error(ortfix("apply", str(plan_file), "--yes", env=env), "was made for",
                   f"--python {shlex.quote(str(cpu_venv))}")  # quoted: the hint is pasted into a shell
    doc = ortfix_json("apply", str(plan_file), "--python", str(python), "--yes", env=env)
    assert doc["plan_source"] == str(plan_file) and doc["status"] == "applied"
    assert doc["transaction"]["plan_fingerprint"] == json.loads(plan_file.read_text())["fingerprint"]
    ortfix_json("rollback", "--python", str(python), "--yes", env=env)

    pip_install(python, "nvidia-curand-cu12", find_links=wheelhouse)  # the environment changes
    before = tree_state(cpu_venv)
    one_line_error(ortfix("apply", str(plan_file), "--python", str(python), "--yes", env=env), "changed since",
                   "make a new plan")
    assert_same_tree(before, tree_state(cpu_venv))


# ---------------------------------------------------------------------------------------------------------------------
# (10) --dry-run
# ---------------------------------------------------------------------------------------------------------------------


def test_dry_run_changes_nothing_and_prints_commands_and_paths(cpu_venv: Path, env: dict[str, str]) -> None:
    python = cpu_venv / "bin" / "python"
    before = tree_state(cpu_venv)
    proc = ortfix("apply", "--python", str(python), "--dry-run", env=env)
    assert proc.returncode == 1, proc.stderr
    sp = site_packages(cpu_venv)
    assert f"{python} -m pip install onnxruntime-gpu==1.22.0" in proc.stdout
    assert "--dry-run --report" in proc.stdout
    assert str(sp / "_ortfix_preload.py") in proc.stdout and str(sp / "_ortfix_preload.pth") in proc.stdout
    assert str(sp / "onnxruntime" / "capi" / "build_and_package_info.py") in proc.stdout  # moved aside
    assert "nothing was changed" in proc.stdout
    assert_same_tree(before, tree_state(cpu_venv))
    assert not (cpu_venv / ".ortfix").exists()


# ---------------------------------------------------------------------------------------------------------------------
# (11) history, show, prune
# ---------------------------------------------------------------------------------------------------------------------


def test_history_show_and_prune(cpu_venv: Path, env: dict[str, str]) -> None:
    python = cpu_venv / "bin" / "python"
    assert "No ortfix transactions" in ortfix("history", "--python", str(python), env=env).stdout
    first = ortfix_json("apply", "--python", str(python), "--yes", env=env)["transaction"]["id"]
    ortfix_json("rollback", "--python", str(python), "--yes", env=env)
    second = ortfix_json("apply", "--python", str(python), "--yes", env=env)["transaction"]["id"]
    assert first < second  # ids sort by time

    listing = ortfix_json("history", "--python", str(python), env=env)
    assert [(t["id"], t["status"]) for t in listing["transactions"]] == [(first, "rolled-back"), (second, "applied")]
    text = ortfix("history", "--python", str(python), env=env).stdout
    assert first in text and "rolled-back" in text and "+ onnxruntime-gpu 1.22.0" in text

    shown = ortfix("history", "show", first, "--python", str(python), env=env)
    assert shown.returncode == 0 and "[reversed]" in shown.stdout and "rollback: ortfix rollback" in shown.stdout
    doc = ortfix_json("history", "show", second, "--python", str(python), env=env)
    assert doc["journal"]["status"] == "applied" and doc["plan"]["schema"] == "ortfix.plan/2"
    one_line_error(ortfix("history", "show", "nope", "--python", str(python), env=env), "not a transaction id")

    second_stash = cpu_venv / ".ortfix" / "transactions" / second / "steps"
    pruned = ortfix_json("history", "prune", "--keep", "1", "--python", str(python), env=env)
    assert pruned["pruned"] == [first] and pruned["kept"] == [second] and pruned["freed_bytes"] > 0
    assert not (cpu_venv / ".ortfix" / "transactions" / first / "steps").exists() and second_stash.is_dir()
    listing = ortfix_json("history", "--python", str(python), env=env)
    assert [t["pruned"] for t in listing["transactions"]] == [True, False]
    ortfix_json("rollback", second, "--python", str(python), "--yes", env=env)  # the kept one still rolls back
    pruned = ortfix_json("history", "prune", "--keep", "0", "--python", str(python), env=env)
    assert pruned["pruned"] == [second]


# ---------------------------------------------------------------------------------------------------------------------
# verification failure: automatic rollback, or kept with --keep-on-failure
# ---------------------------------------------------------------------------------------------------------------------


def test_failed_verification_rolls_back_or_is_kept(cpu_venv: Path, env: dict[str, str]) -> None:
    python = cpu_venv / "bin" / "python"
    before = tree_state(cpu_venv)
    # --hook none: the libraries get installed but nothing makes them findable, so the fresh process cannot load them
    doc = ortfix_json("apply", "--python", str(python), "--yes", "--hook", "none", env=env, expect=1)
    assert doc["status"] == "rolled-back"
    assert any("libcudnn.so.9" in p for p in doc["verification"]["problems"])
    assert "LIB002" in doc["verification"]["blocking_findings"]
    assert_same_tree(before, tree_state(cpu_venv))

    doc = ortfix_json("apply", "--python", str(python), "--yes", "--hook", "none", "--keep-on-failure", env=env,
                      expect=1)
    assert doc["status"] == "kept"
    assert (site_packages(cpu_venv) / "onnxruntime_gpu-1.22.0.dist-info").is_dir()
    ortfix_json("rollback", "--python", str(python), "--yes", env=env)
    assert_same_tree(before, tree_state(cpu_venv))


@pytest.mark.slow
def test_environment_without_pip_is_refused(tmp_path: Path, env: dict[str, str]) -> None:
    python = make_venv(tmp_path / "bare")  # no pip in it (and no uv on this PATH)
    venv = python.parent.parent
    before = tree_state(venv)
    proc = ortfix("apply", "--python", str(python), "--yes", env={**env, "PATH": "/usr/bin:/bin"})
    one_line_error(proc, "no pip", "nothing was changed")
    assert_same_tree(before, tree_state(venv))
    assert not (venv / ".ortfix").exists()


def test_ctrl_c_during_the_install_rolls_back(cpu_venv: Path, tmp_path: Path, wheelhouse: Path) -> None:
    import signal

    python = cpu_venv / "bin" / "python"
    house = GatedWheelhouse(wheelhouse, "nvidia_cudnn_cu12", cpu_venv / ".ortfix" / "transactions")
    try:
        env = house.pip_env(tmp_path)
        before = tree_state(cpu_venv)
        proc = subprocess.Popen([sys.executable, "-m", "ortfix", "apply", "--python", str(python), "--yes"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                stdin=subprocess.DEVNULL, cwd=REPO, start_new_session=True,
                                # a shell's background job ignores SIGINT, and so would ortfix: not a terminal user
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        reached = house.reached.wait(120)
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the whole foreground group
        house.release.set()
        out, err = proc.communicate(timeout=120)
    finally:
        house.close()
    assert reached, (out[-2000:], err[-2000:])
    assert proc.returncode == 130, (out[-2000:], err[-2000:])
    assert "interrupted; every change was rolled back" in err
    assert_same_tree(before, tree_state(cpu_venv))
    [tx] = ortfix_json("history", "--python", str(python), env=env)["transactions"]
    assert tx["status"] == "rolled-back"


def test_apply_refused_while_a_transaction_is_interrupted(cpu_venv: Path, env: dict[str, str]) -> None:
    python = cpu_venv / "bin" / "python"
    before = tree_state(cpu_venv)
    proc = ortfix("apply", "--python", str(python), "--yes", env={**env, "ORTFIX_TEST_CRASH_AFTER_STEP": "1"})
    assert proc.returncode == 99
    check = ortfix("apply", "--python", str(python), "--yes", env=env)
    one_line_error(check, "was interrupted", "ortfix rollback")
    text = ortfix("history", "--python", str(python), env=env).stdout
    assert "running" in text
    doc = ortfix_json("check", "--python", str(python), env=env, expect=1)
    [tx001] = [f for f in doc["findings"] if f["code"] == "TX001"]
    assert "ortfix rollback" in tx001["fix"] and tx001["data"]["transaction"] in text
    ortfix_json("rollback", "--python", str(python), "--yes", env=env)
    assert_same_tree(before, tree_state(cpu_venv))
    doc = ortfix_json("check", "--python", str(python), env=env, expect=1)
    assert "TX001" not in {f["code"] for f in doc["findings"]}


def test_forged_step_record_is_refused(cpu_venv: Path, env: dict[str, str]) -> None:
    from ortfix.transaction.journal import canonical, sha256_bytes

    tx_id = ortfix_json("apply", "--python", str(cpu_venv), "--yes", env=env)["transaction"]["id"]
    journal = cpu_venv / ".ortfix" / "transactions" / tx_id / "journal.json"
    original = journal.read_bytes()
    doc = json.loads(original)
    del doc["body"]["steps"][2]["record"]["created_dirs"]  # write-file without the folders it created
    doc["sha256"] = sha256_bytes(canonical(doc["body"]))
    journal.write_text(json.dumps(doc))
    one_line_error(ortfix("rollback", "--python", str(cpu_venv), "--yes", env=env),
                   "step 3 lacks record field 'created_dirs'")
    sidecar = next((journal.parent / "steps" / "1").glob("files.json"))
    journal.write_bytes(original)
    saved = sidecar.read_bytes()
    sidecar.write_bytes(saved.replace(b"onnxruntime/", b"onnxruntimX/", 1))
    one_line_error(ortfix("rollback", "--python", str(cpu_venv), "--yes", env=env), "does not match the checksum")
    assert json.loads(journal.read_text())["body"]["status"] == "applied"  # refused before undoing anything
    sidecar.write_bytes(saved)
    ortfix_json("rollback", "--python", str(cpu_venv), "--yes", env=env)


def test_too_little_disk_space_fails_preflight(cpu_venv: Path, env: dict[str, str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """In process, with shutil.disk_usage reporting a nearly full disk: the wheels' sizes come from pip's report."""
    from ortfix.commands.apply import post_apply_check
    from ortfix.commands.plan import run_plan
    from ortfix.errors import OrtfixError
    from ortfix.plan.model import PlanOptions
    from ortfix.transaction import apply as transaction

    for key in [k for k in os.environ if k.startswith("PIP_")]:
        monkeypatch.delenv(key)
    for key in ("PIP_CONFIG_FILE", "XDG_CONFIG_HOME", "XDG_CONFIG_DIRS"):
        monkeypatch.setenv(key, env[key])
    result = run_plan(str(cpu_venv), PlanOptions())
    before = tree_state(cpu_venv)
    real = shutil.disk_usage

    def nearly_full(path: str | os.PathLike[str]) -> Any:
        usage = real(path)
        return type(usage)(usage.total, usage.total - 1024, 1024)

    monkeypatch.setattr(transaction.shutil, "disk_usage", nearly_full)
    with pytest.raises(OrtfixError, match="not enough free space"):
        transaction.apply_plan(result.plan, result.check.facts, verification=post_apply_check)
    assert_same_tree(before, tree_state(cpu_venv))
    assert not (cpu_venv / ".ortfix").exists()


def test_remote_index_sizes_are_estimated_from_the_matrix(cpu_venv: Path, tmp_path: Path, wheelhouse: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Over HTTP pip's report gives no sizes: preflight takes them from the matrix's measured wheels (about 3 GiB for
    onnxruntime-gpu and the NVIDIA set), so 1 GiB free is refused before anything changes, although these test
    wheels are tiny."""
    from ortfix.commands.apply import post_apply_check
    from ortfix.commands.plan import run_plan
    from ortfix.errors import OrtfixError
    from ortfix.plan.model import PlanOptions
    from ortfix.transaction import apply as transaction

    house = GatedWheelhouse(wheelhouse, "never-gated", tmp_path / "no-journals")
    try:
        env = house.pip_env(tmp_path)
        for key in [k for k in os.environ if k.startswith("PIP_")]:
            monkeypatch.delenv(key)
        for key in ("PIP_CONFIG_FILE", "XDG_CONFIG_HOME", "XDG_CONFIG_DIRS"):
            monkeypatch.setenv(key, env[key])
        result = run_plan(str(cpu_venv), PlanOptions())
        with tempfile.TemporaryDirectory() as work:
            pf = transaction.preflight(transaction.target_env(result.check.facts), result.plan, Path(work),
                                       dry_run=True)
        assert pf.disk is not None and not pf.problems, pf.problems
        assert "onnxruntime-gpu 1.22.0" in pf.disk.estimated and "nvidia-cudnn-cu12 9.1.0.70" in pf.disk.estimated
        assert pf.disk.needed_bytes > 3 << 30 and pf.disk.download_bytes > 1 << 30

        before = tree_state(cpu_venv)
        real = shutil.disk_usage

        def one_gib_free(path: str | os.PathLike[str]) -> Any:
            usage = real(path)
            return type(usage)(usage.total, usage.total - (1 << 30), 1 << 30)

        monkeypatch.setattr(transaction.shutil, "disk_usage", one_gib_free)
        with pytest.raises(OrtfixError, match=r"not enough free space .*estimated from the sizes of measured wheels"):
            transaction.apply_plan(result.plan, result.check.facts, verification=post_apply_check)
    finally:
        house.close()
    assert_same_tree(before, tree_state(cpu_venv))
    assert not (cpu_venv / ".ortfix").exists()


@pytest.fixture()
def link_venv(tmp_path: Path, wheelhouse: Path, venv_template: Path) -> tuple[Path, dict[str, str]]:
    """cuDNN shipped as libcudnn.so.9.1.0 only: the plan creates the missing SONAME link (LIB005)."""
    house = tmp_path / "versioned-only"
    cudnn = next(spec for spec in NVIDIA_CU12 if spec.distribution == "nvidia-cudnn-cu12")
    libs = {("libcudnn.so.9.1.0" if name == "libcudnn.so.9" else name): soname for name, soname in cudnn.libs.items()}
    fake_nvidia_wheel(house, cudnn.distribution, cudnn.version, libs, cudnn.lib_dir, needed=cudnn.needed,
                      runpath=cudnn.runpath)
    python = pip_venv(venv_template, tmp_path / "link venv")
    pip_install(python, "onnxruntime-gpu[cuda]==1.22.0", "nvidia-cublas-cu12", find_links=wheelhouse)
    pip_install(python, "nvidia-cudnn-cu12==9.1.0.70", find_links=house, no_deps=True)
    return python.parent.parent, ortfix_env(pip_config(tmp_path, wheelhouse, house), tmp_path)


def test_symlink_step_crashes_and_ownership(link_venv: tuple[Path, dict[str, str]]) -> None:
    venv, env = link_venv
    python = venv / "bin" / "python"
    link = site_packages(venv) / "nvidia" / "cudnn" / "lib" / "libcudnn.so.9"
    before = tree_state(venv)
    steps = ortfix_json("apply", "--python", str(python), "--dry-run", env=env, expect=1)["steps"]
    assert [s["kind"] for s in steps] == ["symlink", "write-file", "write-file"]
    for mode in ("AFTER", "DURING"):
        for n in range(1, len(steps) + 1):
            crash = {**env, f"ORTFIX_TEST_CRASH_{mode}_STEP": str(n)}
            proc = ortfix("apply", "--python", str(python), "--yes", env=crash)
            assert proc.returncode == 99, proc.stderr
            ortfix_json("rollback", "--python", str(python), "--yes", env=env)
            assert_same_tree(before, tree_state(venv))

    ortfix_json("apply", "--python", str(python), "--yes", env=env)
    assert link.is_symlink() and os.readlink(link) == "libcudnn.so.9.1.0"
    assert "all loaded" in fresh_process(python, load_code(None)).stdout
    link.unlink()
    link.write_bytes(b"not ortfix's link any more\n")  # someone replaced it: rollback must leave it alone
    # someone else's now: left alone and said; what the transaction did (the link) is gone, so exit 0
    doc = ortfix_json("rollback", "--python", str(python), "--yes", env=env)
    assert any("no longer the link ortfix created" in w for w in doc["warnings"])
    assert doc["as_before"] is False and doc["everything_undone"] is True
    assert link.read_bytes() == b"not ortfix's link any more\n"


def test_every_transaction_command_has_help_and_is_in_the_readme(env: dict[str, str]) -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for command in (["apply"], ["rollback"], ["history"], ["history", "show"], ["history", "prune"]):
        proc = ortfix(*command, "--help", env=env)
        assert proc.returncode == 0 and "Usage:" in proc.stdout, proc.stderr
        assert f"ortfix {' '.join(command)}" in readme, command
