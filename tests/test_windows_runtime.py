"""ortfix itself on a Windows Python (wine, tests/wintools.py): the command starts with its win_amd64 dependencies
(pure Python: no jsonschema), the matrix validates and shows, and the transaction machinery (lock, confined file
operations, journal and stash) works there for real, on a temporary folder.

Under wine a symbolic link made on the Linux side is what a planted link looks like to Windows code: a folder whose
open handle's final path (GetFinalPathNameByHandleW) is elsewhere. wine 8 cannot make junctions on its drives
(FSCTL_SET_REPARSE_POINT: "Request not supported"); the test tries `_winapi.CreateJunction` and, when wine refuses,
says so in its result instead of pretending. Nor does wine 8 refuse to rename a folder that another handle holds open
without FILE_SHARE_DELETE (measured): that WindowsEnvRoot's pinned folders cannot be swapped during an operation is
Windows' documented behaviour, not shown here.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from pathlib import Path

import pytest

from clitools import REPO
from ortfix import __version__
from wintools import ORTFIX_WIN_DEPS, to_windows, win_python

pytestmark = pytest.mark.slow  # every test here builds a venv, runs pip or starts wine

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = pytest.importorskip("tomli")

# Runs inside the Windows Python: argv[1] is the folder (Windows path) holding env\ and outside\.
_DRIVE = r'''
import json, os, subprocess, sys, threading, time
from dataclasses import replace
from ortfix.errors import OrtfixError
from ortfix.transaction import lock
from ortfix.system.confine import EnvRoot
from ortfix.transaction.journal import Transaction, TxStatus, encode, new_id, now_iso, sha256_bytes
from ortfix.transaction.store import TransactionStore, interrupted_transactions

base = sys.argv[1]
env = os.path.join(base, "env")
out = {"pid": os.getpid(), "platform": sys.platform, "EnvRoot": EnvRoot.__name__}

# -- every module of ortfix imports here (no POSIX-only name at import time); the target's scripts run elsewhere
import importlib, pkgutil, ortfix
out["modules"], out["import_failures"] = 0, []
for info in pkgutil.walk_packages(ortfix.__path__, "ortfix."):
    if info.name.startswith("ortfix.target._") or info.name.endswith("__main__"):
        continue
    out["modules"] += 1
    try:
        importlib.import_module(info.name)
    except Exception as exc:
        out["import_failures"].append(f"{info.name}: {exc!r}")


def refused(what, call):
    try:
        call()
    except OrtfixError as exc:
        out[what] = ["refused", exc.one_line()]
    except OSError as exc:
        out[what] = ["oserror", str(exc)]
    else:
        out[what] = ["done", ""]


# -- the lock: held here, a second ortfix process is refused with the holder's pid, free again after release
os.makedirs(os.path.join(env, ".ortfix"))
held = lock.acquire(env)
second = subprocess.run([sys.executable, "-c", (
    "import sys\nfrom ortfix.errors import OrtfixError\nfrom ortfix.transaction import lock\n"
    "try:\n    lock.acquire(sys.argv[1])\nexcept OrtfixError as exc:\n    print(exc.one_line())\n    sys.exit(3)\n"
    "print('acquired')\n"), env], capture_output=True, text=True, stdin=subprocess.DEVNULL)
out["second"] = [second.returncode, second.stdout.strip()]
out["held_seen"] = lock.is_held(env)
lock.release(held)
out["free_after"] = not lock.is_held(env)
again = lock.acquire(env)
lock.release(again, remove=True)
out["lock_removed"] = not os.path.exists(os.path.join(env, ".ortfix", "lock"))

# -- confined file operations
with EnvRoot(env) as root:
    root.write_new("a/b/new.txt", b"one\n", 0o644, make_parents=True)
    out["written"] = open(os.path.join(env, "a", "b", "new.txt"), "rb").read().decode()
    reader = open(os.path.join(env, "a", "b", "new.txt"), "rb")  # open elsewhere: replacing it must wait
    threading.Timer(0.4, reader.close).start()
    start = time.monotonic()
    root.atomic_write("a/b/new.txt", b"two\n")
    out["replace_waited"] = round(time.monotonic() - start, 2)
    out["replaced"] = open(os.path.join(env, "a", "b", "new.txt"), "rb").read().decode()
    root.rename("a/b/new.txt", "a/c/moved.txt", make_parents=True)
    out["moved"] = [root.exists("a/b/new.txt"), root.sha256("a/c/moved.txt")]
    out["rel_case"] = root.rel(env.upper() + "\\A\\C\\MOVED.TXT")
    out["is_file_case"] = root.is_file("A/C/Moved.txt")
    root.unlink("a/c/moved.txt")
    out["unlinked"] = root.exists("a/c/moved.txt")
    deep = "/".join(["d" * 60] * 5) + "/file.bin"
    root.write_new(deep, b"\0\1\2\n", 0o644, make_parents=True)
    out["long"] = [len(root.abs(deep)), root.read_bytes(deep, limit=1 << 20)[0].hex()]
    root.remove_tree("d" * 60)
    out["long_removed"] = not root.exists("d" * 60)
    refused("dotdot", lambda: root.write_new("../escaped.txt", b"x", 0o644))
    refused("dotdot_abs", lambda: root.rel(os.path.join(env, "..", "outside", "x.txt")))
    refused("other_drive", lambda: root.rel("D:\\elsewhere\\x.txt"))
    refused("drive_relative", lambda: root.write_new("C:x.txt", b"x", 0o644))
    refused("stream", lambda: root.write_new("a/f.txt:hidden", b"x", 0o644))
    refused("device", lambda: root.write_new("a/nul.txt", b"x", 0o644))
    refused("link_write", lambda: root.write_new("lnk/planted.txt", b"x", 0o644))
    refused("link_read", lambda: root.read_bytes("lnk/inside.txt", limit=1 << 20))
    refused("link_makedirs", lambda: root.makedirs("lnk/sub"))
    root.makedirs("a/keep")
    refused("link_rename", lambda: root.rename("a/keep", "lnk/keep"))
    try:
        import _winapi
        _winapi.CreateJunction(os.path.join(base, "outside"), os.path.join(env, "junction"))
        refused("junction", lambda: root.write_new("junction/planted.txt", b"x", 0o644))
    except OSError as exc:
        out["junction"] = ["unsupported", str(exc)]
        os.rmdir(os.path.join(env, "junction")) if os.path.isdir(os.path.join(env, "junction")) else None
out["planted_outside"] = sorted(os.listdir(os.path.join(base, "outside")))

# -- journal and stash, written and read back; a corrupt journal refused in one line
tx_id = new_id()
plan = b'{"plan": 1}\n'
target = {"python": sys.executable, "prefix": env, "purelib": env, "platlib": env, "scripts": env, "env_kind": "venv"}
tx = Transaction(id=tx_id, created=now_iso(), updated=now_iso(), ortfix_version="test", prefix=env, target=target,
                 installer=None, plan_fingerprint="f", plan_sha256=sha256_bytes(plan), status=TxStatus.RUNNING,
                 steps=(), verification=None, rollback=None, message=None, pruned=False)
with TransactionStore(env) as store:
    store.begin(tx_id)
    store.create(tx, plan)
    store.env.write_new("site/pkg/data.txt", b"kept bytes\r\n", 0o644, make_parents=True)
    store.env.makedirs(store.stash_rel(tx_id, 1))
    store.env.rename("site/pkg/data.txt", store.stash_rel(tx_id, 1) + "/data.txt")
    sidecar = store.write_sidecar(tx_id, 1, "record", {"files": ["site/pkg/data.txt"]})
    out["sidecar"] = store.read_sidecar(tx_id, 1, "record", sidecar)
    out["stash"] = store.env.read_bytes(store.stash_rel(tx_id, 1) + "/data.txt", limit=100)[0].decode()
    saved = store.save(replace(tx, status=TxStatus.APPLIED, message="done"))
    loaded = store.load(tx_id)
    out["journal"] = [loaded.status.value, loaded.message, loaded.plan_sha256 == tx.plan_sha256]
    out["interrupted_before"] = [t.id for t in interrupted_transactions(env)]
    journal = os.path.join(env, ".ortfix", "transactions", tx_id, "journal.json")
    data = open(journal, "rb").read()
    open(journal, "wb").write(data.replace(b'"done"', b'"DONE"'))
    refused("corrupt_journal", lambda: store.load(tx_id))
    out["interrupted_corrupt"] = [[t.id, t.error] for t in interrupted_transactions(env)]
    out["freed"] = store.remove_stashes(tx_id) >= 0 and not store.env.exists(store.tx_rel(tx_id) + "/steps")

# -- children: run with a limit; one that outlives it is ended with what it started, in one line
from ortfix import subproc
from ortfix.cachedir import cache_dir, write_json
out["child"] = subproc.run([sys.executable, "-c", "print('child ok')"], target_python=None, timeout=60).stdout.strip()
start = time.monotonic()
grandchild = ("import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
              "time.sleep(60)")
refused("child_limit", lambda: subproc.run([sys.executable, "-c", grandchild], target_python=None, timeout=3))
out["child_limit_s"] = round(time.monotonic() - start, 1)
out["cache"] = str(cache_dir())
out["cache_written"] = write_json(cache_dir() / "windows-runtime-test.json", {"ok": 1})
print(json.dumps(out))
'''


def test_ortfix_command_runs_on_windows() -> None:
    w = win_python()
    version = w.ortfix("--version")
    assert version.returncode == 0, version.stderr[-2000:]
    assert __version__ in version.stdout
    helped = w.ortfix("--help")
    assert helped.returncode == 0, helped.stderr[-2000:]
    for command in ("check", "plan", "apply", "rollback", "matrix"):
        assert f"ortfix {command} " in helped.stdout
    validated = w.ortfix("matrix", "validate")
    assert validated.returncode == 0, validated.stderr[-2000:]
    assert "ort.yaml" in validated.stdout and "cuda.yaml" in validated.stdout
    shown = w.ortfix("matrix", "show", "--json")
    assert shown.returncode == 0, shown.stderr[-2000:]
    doc = json.loads(shown.stdout)
    assert doc["command"] == "matrix show" and doc["exit_code"] == 0
    assert any("1.22.0" in b["versions"] and b["cuda_major"] == 12 for b in doc["builds"])
    # what ran is what pyproject.toml declares: every runtime dependency is among the win_amd64 ones installed
    declared = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    installed = {re.split(r"[<>=;\[ ]", req)[0].lower() for req in ORTFIX_WIN_DEPS}
    assert {re.split(r"[<>=;\[ ]", req)[0].lower() for req in declared} <= installed


def test_a_broken_matrix_is_one_line_on_windows(tmp_path: Path) -> None:
    w = win_python()
    bad = tmp_path / "ort.yaml"
    text = (Path(__file__).resolve().parents[1] / "compat" / "ort.yaml").read_text(encoding="utf-8")
    bad.write_text(text.replace("cuda_major: 12", "cuda_major: twelve", 1), encoding="utf-8")
    line = text[: text.index("cuda_major: 12")].count("\n") + 1
    proc = w.ortfix("matrix", "validate", to_windows(bad))
    assert proc.returncode != 0
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("ortfix:") or "ort.yaml" in ln]
    assert any(f"ort.yaml:{line}:" in ln and "twelve" in ln for ln in lines), proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr


def test_transaction_machinery_on_windows(tmp_path: Path) -> None:
    w = win_python()
    (tmp_path / "env").mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "inside.txt").write_text("not ortfix's\n")
    os.symlink("../outside", tmp_path / "env" / "lnk")  # what a planted link is to Windows code under wine
    script = tmp_path / "drive.py"
    script.write_text(_DRIVE, encoding="utf-8")
    proc = w.run(to_windows(script), to_windows(tmp_path), env={"ORTFIX_CACHE_DIR": "", "ORTFIX_NO_CACHE": ""})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["platform"] == "win32" and out["EnvRoot"] == "WindowsEnvRoot"
    assert out["modules"] > 100 and out["import_failures"] == []

    # the lock excludes a concurrent ortfix, naming the holder; released, it is free (and removable)
    code, message = out["second"]
    assert code == 3 and message.startswith("another ortfix apply or rollback is running on"), out["second"]
    assert f"(pid {out['pid']})" in message
    assert out["held_seen"] and out["free_after"] and out["lock_removed"]

    # files created, replaced while open elsewhere (after waiting), moved, found case-insensitively, removed
    assert out["written"] == "one\n" and out["replaced"] == "two\n"  # binary: no "\r\n"
    assert 0.3 <= out["replace_waited"] < 2.5, out["replace_waited"]
    assert out["moved"] == [False, hashlib.sha256(b"two\n").hexdigest()]
    assert out["rel_case"] == "A/C/MOVED.TXT" and out["is_file_case"] and out["unlinked"] is False
    assert out["long"][0] > 300 and out["long"][1] == "0001020a" and out["long_removed"]

    # refusals: one line each, nothing written outside
    for what, needle in [("dotdot", "is not a path inside the environment"),
                         ("dotdot_abs", "is outside the environment"), ("other_drive", "is outside the environment"),
                         ("drive_relative", "a drive, a stream"), ("stream", "a drive, a stream"),
                         ("device", "a device"),
                         ("link_write", "symbolic link"), ("link_read", "symbolic link"),
                         ("link_makedirs", "symbolic link")]:
        verdict, line = out[what]
        assert verdict == "refused" and needle in line and "\n" not in line, (what, out[what])
    assert out["link_rename"][0] == "refused", out["link_rename"]
    assert out["junction"][0] in ("refused", "unsupported"), out["junction"]
    if out["junction"][0] == "refused":
        assert "junction" in out["junction"][1]
    assert out["planted_outside"] == ["inside.txt"]
    assert sorted(p.name for p in outside.iterdir()) == ["inside.txt"]

    # journal and stash round trip; a corrupt journal is refused in one line, and check lists it as such
    assert out["sidecar"] == {"files": ["site/pkg/data.txt"]}
    assert out["stash"] == "kept bytes\r\n"
    assert out["journal"] == ["applied", "done", True] and out["interrupted_before"] == []
    verdict, line = out["corrupt_journal"]
    assert verdict == "refused" and "does not match its checksum" in line, out["corrupt_journal"]
    [[tx_id, error]] = out["interrupted_corrupt"]
    assert "does not match its checksum" in error and tx_id in error
    assert out["freed"]

    # a child runs; one that outlives its limit is stopped (with what it started) and reported in one line
    assert out["child"] == "child ok"
    verdict, line = out["child_limit"]
    assert verdict == "refused" and "did not finish within 3 s" in line, out["child_limit"]
    assert out["child_limit_s"] < 30, out["child_limit_s"]
    # the cache lives in the user's local application data (platformdirs), and can be written
    assert out["cache"].lower().endswith("\\appdata\\local\\ortfix\\cache"), out["cache"]
    assert out["cache_written"] is True


def test_windows_envroot_without_wine(tmp_path: Path) -> None:
    """WindowsEnvRoot's walk and operations, run on this system (O_NOFOLLOW descriptors stand in for the pinned
    handles): the same refusals where wine is not installed."""
    from ortfix.system.envpaths import ConfinementError
    from ortfix.system.windows.confine import WindowsEnvRoot

    env, outside = tmp_path / "env", tmp_path / "outside"
    env.mkdir()
    outside.mkdir()
    (env / "lnk").symlink_to(outside)
    with WindowsEnvRoot(env) as root:
        root.write_new("a/b/f.txt", b"one", 0o644, make_parents=True)
        root.atomic_write("a/b/f.txt", b"two")
        assert (env / "a" / "b" / "f.txt").read_bytes() == b"two"
        assert root.sha256("a/b/f.txt") == hashlib.sha256(b"two").hexdigest()
        root.rename("a/b/f.txt", "a/c/g.txt", make_parents=True)
        assert root.read_bytes("a/c/g.txt", limit=10)[0] == b"two" and not root.exists("a/b/f.txt")
        assert root.rel(str(env / "a" / "c" / "g.txt")) == "a/c/g.txt"
        for bad in (lambda: root.write_new("lnk/x", b"x", 0o644), lambda: root.makedirs("lnk/sub"),
                    lambda: root.read_bytes("lnk", limit=10), lambda: root.write_new("../x", b"x", 0o644),
                    lambda: root.rel(str(outside / "x"))):
            try:
                bad()
            except ConfinementError:
                continue
            raise AssertionError("not refused")
        root.remove_tree("a")
        assert not (env / "a").exists() and (env / "lnk").is_symlink()
    assert list(outside.iterdir()) == []


_STILL_RUNNING = r'''
import json, subprocess, sys, time
from ortfix.subproc import installer_alive


out = {}
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], stdin=subprocess.DEVNULL)
time.sleep(0.5)
out["running, this python"] = installer_alive(child.pid, sys.executable)
out["running, case differs"] = installer_alive(child.pid, sys.executable.upper())
out["running, another python"] = installer_alive(child.pid, sys.executable + "x")
child.kill()
child.wait()
out["ended"] = installer_alive(child.pid, sys.executable)
out["no such process"] = installer_alive(999999, sys.executable)
print(json.dumps(out))
'''


def test_an_installer_left_running_is_seen_on_windows() -> None:
    """An interrupted apply's pip that still runs must stop a rollback: Windows has no /proc, so the running process
    and its image are asked of the kernel (system/windows/host.py's running_image)."""
    w = win_python()
    proc = w.run("-c", _STILL_RUNNING)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {"running, this python": True, "running, case differs": True, "running, another python": False,
                   "ended": False, "no such process": False}, out
