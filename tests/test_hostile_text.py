"""Text that installed packages wrote is data (issue 28, items 1 and 2): a METADATA `Version:` holding line ends
that pip's `splitlines()` or PowerShell's lone `\\r` reads as one, a RECORD row or a .dist-info folder name holding
terminal escapes or a newline. None of it may add a requirement to an exported requirements file, run a command of
an exported script, or reach a terminal raw (check, plan, apply's confirmation screen on a real pty).

Real pip, real venvs (the CPU venv of test_export), the METADATA, RECORD and folder of the installed onnxruntime
edited in place as a hostile package would have written them; every output is read as bytes (a text-mode pipe would
turn a lone `\\r` into a newline and hide it)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import select
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from checktools import site_packages
from clitools import REPO
from factsdata import load_facts
from ortfix.check.diagnose import diagnose
from ortfix.compat.load import load_matrix
from ortfix.errors import OrtfixError
from ortfix.export.dockerfile import render_dockerfile
from ortfix.export.model import ExportInput, plain
from ortfix.export.pins import Pin
from ortfix.export.powershell import render_ps1
from ortfix.export.requirements import render_requirements
from ortfix.export.shell import render_sh
from ortfix.plan.make import make_plan
from ortfix.plan.model import PlanOptions
from ortfix.safetext import visible, visible_lines
from ortfix.transaction.journal import Transaction, TxStatus, decode, encode, new_id, now_iso
from support.fixtures import build_wheel
from txtools import assert_same_tree, copy_venv, tree_state

# The line ends the issue names: pip's splitlines() splits at each; \r also ends a PowerShell comment.
SEPARATORS = ["\u2028", "\r", "\x85", "\x0b", "\x0c"]
# What no output may hold raw: C0 controls but the newline, DEL, C1 controls, the Unicode line/paragraph separators.
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029]")
TITLE = "\x1b]0;TITLE\x07\x1b[2J"  # sets the terminal's title, then clears the screen



@pytest.fixture(scope="module")
def base(export_base: dict[str, Path]) -> dict[str, Path]:
    """tests/conftest.py's export_base: an empty venv and a CPU venv, copied by each test."""
    return export_base


@pytest.fixture(scope="module")
def env(export_env: dict[str, str]) -> dict[str, str]:
    return export_env


def _bytes_run(*args: str, env: Mapping[str, str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "ortfix", *args], capture_output=True, env=dict(env),
                          stdin=subprocess.DEVNULL, cwd=REPO, timeout=300, check=False)


def _text(data: bytes) -> str:
    return data.decode("utf-8")


def _raw_controls(text: str, *, crlf: bool = False) -> list[str]:
    """The raw controls in `text` (newlines are lines; with `crlf`, a \\r only as part of \\r\\n)."""
    return RAW.findall(text.replace("\r\n", "\n") if crlf else text)


def _metadata_version(venv: Path, version: str) -> None:
    """The installed onnxruntime's METADATA says `Version: <version>` (a header line: it ends at \\n only)."""
    meta = site_packages(venv) / "onnxruntime-1.22.0.dist-info" / "METADATA"
    data = meta.read_bytes()
    new = re.sub(rb"^Version: [^\n]*\n", b"Version: " + version.encode("utf-8") + b"\n", data, count=1, flags=re.M)
    assert new != data
    meta.write_bytes(new)


def _record_row(venv: Path, path: str) -> None:
    """A RECORD row for a file that is not there (onnxruntime is then damaged: check shows the row)."""
    record = site_packages(venv) / "onnxruntime-1.22.0.dist-info" / "RECORD"
    with open(record, "a", encoding="utf-8", newline="") as f:
        f.write(f"{path},sha256=x,10\n")


@pytest.fixture(scope="module")
def evil(base: dict[str, Path]) -> tuple[Path, list[str]]:
    """A find-links folder with evil-package-N 6.6.6 (one per separator), and the sha256 of each wheel: the hashes
    an attacker puts after each injected requirement, so pip's hash-checking mode takes it."""
    folder = base["root"] / "evil"
    folder.mkdir(exist_ok=True)
    shas = []
    for i in range(len(SEPARATORS)):
        wheel = build_wheel(folder, f"evil-package-{i}", "6.6.6", {f"evil{i}/__init__.py": b"PWNED = True\n"})
        shas.append(hashlib.sha256(wheel.read_bytes()).hexdigest())
    return folder, shas


@pytest.fixture(scope="module")
def hostile(base: dict[str, Path], evil: tuple[Path, list[str]]) -> Path:
    """The CPU venv whose onnxruntime says it is version `1.22.0<sep>evil-package-N==6.6.6 --hash=…` for every
    separator, then a lone \\r before a PowerShell command and a terminal title escape; and whose RECORD lists a
    missing file named with a terminal escape."""
    venv = copy_venv(base["cpu"], base["root"] / "hostile")
    injected = "".join(f"{sep}evil-package-{i}==6.6.6 --hash=sha256:{sha}"
                       for i, (sep, sha) in enumerate(zip(SEPARATORS, evil[1])))
    _metadata_version(venv, f"1.22.0{injected}\u2028#\rWrite-Host PWNED{TITLE}\u2028#")
    _record_row(venv, "onnxruntime/\x1b]0;RECORD\x07.py")
    return venv


def test_a_hostile_version_adds_no_requirement(hostile: Path, base: dict[str, Path], env: dict[str, str],
                                               evil: tuple[Path, list[str]], wheelhouse: Path, tmp_path: Path) -> None:
    """pip reads the exported requirements file (hashes on every line) with its evil packages on find-links: it
    installs what the plan asks for, and no evil-package."""
    before = tree_state(hostile)
    out = tmp_path / "requirements.txt"
    proc = _bytes_run("export", "requirements", "--python", str(hostile), "-o", str(out), env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert_same_tree(before, tree_state(hostile))
    fresh = copy_venv(base["empty"], tmp_path / "fresh")
    report = tmp_path / "report.json"
    pip_env = {**env, "PIP_FIND_LINKS": f"{wheelhouse} {evil[0]}"}  # the evil wheels next to the plan's
    pip = subprocess.run([str(fresh / "bin" / "python"), "-m", "pip", "install", "--dry-run", "--ignore-installed",
                          "--report", str(report), "-r", str(out), "--disable-pip-version-check", "--quiet"],
                         capture_output=True, text=True, env=pip_env, check=False)
    assert pip.returncode == 0, pip.stderr[-3000:]
    names = {entry["metadata"]["name"] for entry in json.loads(report.read_text())["install"]}
    assert "onnxruntime-gpu" in names and not any(n.startswith("evil") for n in names), names
    text = _text(out.read_bytes())
    assert not _raw_controls(text), _raw_controls(text)
    assert text.splitlines() == text.split("\n")[:-1]  # pip's idea of the lines is the file's
    assert all(ln.startswith("#") for ln in text.splitlines() if "evil-package" in ln)


@pytest.mark.parametrize("fmt", ["ps1", "sh", "dockerfile"])
def test_a_hostile_version_stays_inside_comments(hostile: Path, env: dict[str, str], tmp_path: Path,
                                                 fmt: str) -> None:
    """PowerShell ends a comment at a lone \\r: the version's `Write-Host PWNED` would run. Every exported script
    holds it only inside comment lines, escaped, and no raw control at all."""
    out = tmp_path / f"fix.{fmt}"
    proc = _bytes_run("export", fmt, "--python", str(hostile), "-o", str(out), env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    files = [out, *([tmp_path / f"fix.undo.{fmt}"] if fmt != "dockerfile" else [])]
    for path in files:
        text = _text(path.read_bytes())
        crlf = fmt == "ps1"
        assert not _raw_controls(text, crlf=crlf), (path.name, _raw_controls(text, crlf=crlf))
        lines = text.split("\r\n" if crlf else "\n")
        for line in lines:
            if "PWNED" in line or "evil-package" in line:
                assert line.startswith("#"), line
    do_text = _text(out.read_bytes())
    assert r"\x0dWrite-Host PWNED\x1b]0;TITLE\x07" in do_text  # shown escaped, as \xNN


def _assert_shown_escaped(out: str) -> None:
    assert not _raw_controls(out), _raw_controls(out)
    assert r"1.22.0\u2028evil-package-0==6.6.6" in out  # the version, visibly escaped
    assert r"\x0dWrite-Host PWNED\x1b]0;TITLE\x07\x1b[2J" in out


@pytest.mark.parametrize("command", ["check", "plan"])
def test_check_and_plan_show_hostile_text_escaped(hostile: Path, env: dict[str, str], command: str) -> None:
    proc = _bytes_run(command, "--python", str(hostile), *(["--fresh"] if command == "check" else []), env=env)
    assert proc.returncode == 1, proc.stderr[-2000:]
    out = _text(proc.stdout)
    _assert_shown_escaped(out)
    if command == "check":  # a RECORD row is a path, not a label: escaped on its way to the terminal
        assert r"onnxruntime/\x1b]0;RECORD\x07.py" in out
    assert not _raw_controls(_text(proc.stderr))
    doc = _bytes_run(command, "--python", str(hostile), "--json", env=env)
    assert doc.stdout.isascii() and json.loads(doc.stdout)["exit_code"] == 1
    if command == "check":  # the version is no PEP 440 version: ortfix holds it escaped, not only prints it so
        [ort] = [d for d in json.loads(doc.stdout)["facts"]["distributions"] if d["name"] == "onnxruntime"]
        assert ort["version"].startswith("1.22.0\\u2028evil-package-0==6.6.6 --hash=sha256:"), ort


def _on_a_pty(args: list[str], environ: Mapping[str, str], prompt: bytes, answer: bytes) -> tuple[int, bytes]:
    """Run ortfix with a real terminal as its stdin, stdout and stderr; answer `prompt`; everything it printed."""
    master, slave = os.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "ortfix", *args], stdin=slave, stdout=slave, stderr=slave,
                            env=dict(environ), cwd=REPO, start_new_session=True)
    os.close(slave)
    out, answered, deadline = b"", False, time.monotonic() + 300
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every holder of the terminal closed it
                break
            if not chunk:
                break
            out += chunk
            if not answered and prompt in out:
                os.write(master, answer)
                answered = True
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=60)
        os.close(master)
    assert answered, out[-2000:]
    return proc.returncode, out


def test_apply_confirmation_screen_shows_hostile_text_escaped(hostile: Path, env: dict[str, str]) -> None:
    """The plan an operator reads before answering, on a real terminal: a package cannot retitle or clear it."""
    before = tree_state(hostile)
    code, out = _on_a_pty(["apply", "--python", str(hostile)], env, b"Apply these changes", b"n\n")
    assert code == 1, out[-2000:]
    text = _text(out).replace("\r\n", "\n")  # the terminal's own line ends (onlcr)
    _assert_shown_escaped(text)
    assert "cancelled; nothing was changed" in text
    assert_same_tree(before, tree_state(hostile))


@pytest.fixture()
def forged_folder(base: dict[str, Path], tmp_path: Path) -> Path:
    """A CPU venv whose onnxruntime .dist-info folder's name holds a newline, a fake finding line and a screen
    clear; its RECORD lists a missing file, so check names the folder."""
    venv = copy_venv(base["cpu"], tmp_path / "forged")
    _record_row(venv, "onnxruntime/missing.py")
    sp = site_packages(venv)
    forged = "onnxruntime-1.22.0\n\u2717 DRV000 error: forged\x1b[2J.dist-info"
    (sp / "onnxruntime-1.22.0.dist-info").rename(sp / forged)
    return venv


def test_a_folder_name_cannot_forge_a_line_of_check(forged_folder: Path, env: dict[str, str]) -> None:
    proc = _bytes_run("check", "--fresh", "--python", str(forged_folder), env=env)
    assert proc.returncode == 1, proc.stderr[-2000:]
    out = _text(proc.stdout)
    assert not _raw_controls(out), _raw_controls(out)
    assert not any(line.startswith("\u2717 DRV000") for line in out.split("\n")), out
    assert "onnxruntime-1.22.0\\x0a\u2717 DRV000 error: forged\\x1b[2J.dist-info" in out


@pytest.mark.parametrize("fmt", ["sh", "ps1"])
def test_a_control_in_an_exported_path_is_refused(forged_folder: Path, env: dict[str, str], tmp_path: Path,
                                                  fmt: str) -> None:
    """The scripts name the .dist-info folder they stash: a path cannot be escaped without changing it, so the
    export is refused with one line, and nothing is written."""
    out = tmp_path / f"fix.{fmt}"
    proc = _bytes_run("export", fmt, "--python", str(forged_folder), "-o", str(out), env=env)
    assert proc.returncode == 2, (proc.stdout[-2000:], proc.stderr[-2000:])
    err = _text(proc.stderr)
    lines = err.strip().split("\n")
    assert len(lines) == 1 and lines[0].startswith("ortfix: error:") and "control character" in lines[0], err
    assert not _raw_controls(err) and "\\x0a" in lines[0]
    assert not out.exists() and not list(tmp_path.glob("fix.undo.*"))


# --- the two functions every writer goes through, on their own ------------------------------------------------------

@pytest.mark.parametrize(("char", "shown"), [
    ("\n", "\\x0a"), ("\r", "\\x0d"), ("\x0b", "\\x0b"), ("\x0c", "\\x0c"), ("\x1b", "\\x1b"), ("\x07", "\\x07"),
    ("\x7f", "\\x7f"), ("\x85", "\\x85"), ("\x9b", "\\x9b"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029"),
    ("\u202e", "\\u202e"), ("\udcff", "\\udcff"),
])
def test_visible_escapes_each_control(char: str, shown: str) -> None:
    assert visible(f"a{char}b") == f"a{shown}b"
    assert visible_lines(f"x\na{char}b\r\ny") == f"x\na{shown if char != chr(10) else chr(10)}b\r\ny"
    with pytest.raises(OrtfixError, match="control character"):
        plain(f"a{char}b")


def test_visible_keeps_printable_text() -> None:
    text = "ünïcödé ✗ 日本語 C:\\x1b\\path 'q' \"d\" $HOME \t"[:-2]
    assert visible(text) == text and visible_lines(text + "\n" + text) == text + "\n" + text and plain(text) == text


def test_every_export_comment_escapes_what_it_quotes() -> None:
    """A real plan (recorded CPU venv facts) whose summaries and reasons quote hostile text, rendered by each writer:
    the text stays in its comment lines, escaped, whatever path it came by."""
    matrix = load_matrix()
    facts = load_facts("cpu")
    findings = diagnose(facts, matrix)
    plan = make_plan(facts, findings, matrix, PlanOptions())
    hostile = f"said\rWrite-Host PWNED\u2028evil-package==6.6.6\x85\x0b\x0c{TITLE}"
    plan = dataclasses.replace(plan, actions=tuple(dataclasses.replace(a, summary=f"{a.summary} {hostile}")
                                                   for a in plan.actions))
    assert plan.actions
    inp = ExportInput(plan=plan, python=plan.python, prefix=plan.prefix,
                      pins=(Pin("onnxruntime-gpu", "1.22.0", "0" * 64, True),),
                      reasons={str(f.code): f"{f.summary} {hostile}" for f in findings})
    sh, sh_undo = render_sh(inp)
    ps1, ps1_undo = render_ps1(inp)
    for text, crlf, undo in ((render_requirements(inp), False, False), (render_dockerfile(inp), False, False),
                             (sh, False, False), (sh_undo, False, True), (ps1, True, False), (ps1_undo, True, True)):
        assert not _raw_controls(text, crlf=crlf), _raw_controls(text, crlf=crlf)
        quoted = [ln for ln in text.split("\r\n" if crlf else "\n") if "PWNED" in ln]
        assert bool(quoted) is not undo, text  # an undo script quotes no summary
        assert all(ln.startswith("#") and "\\x0dWrite-Host PWNED\\u2028evil" in ln for ln in quoted), quoted


def test_a_journal_holds_what_it_records_as_ascii() -> None:
    """JSON allows C1 controls (CSI U+009B) and U+2028 raw: the journal, a file ortfix writes, escapes them, and reads
    back the same."""
    message = "pip said \x9b2J\u2028evil\x85 ünï"
    target = {k: f"/env \u2028x/{k}" for k in ("python", "prefix", "purelib", "platlib", "scripts", "env_kind")}
    tx = Transaction(id=new_id(), created=now_iso(), updated=now_iso(), ortfix_version="0", prefix="/env \u2028x",
                     target=target, installer=None, plan_fingerprint="0" * 16, plan_sha256="0" * 64,
                     status=TxStatus.ROLLED_BACK, steps=(), verification=None, rollback=None, message=message,
                     pruned=False)
    data = encode(tx)
    assert data.isascii(), data
    assert decode(data, "journal") == tx
