# ruff: noqa: RUF001  (Chinese text and its full-width punctuation are what this file tests)
"""Issue 25, phase 4 (the transaction, verify, target, tune, subproc and versions modules): no English sentence left
unmarked there; under zh_CN the apply's progress lines, the rollback and its refusals, verify's screen and the target
errors are Chinese, while `--json` documents and error envelopes stay English and byte-identical, and the journal
keeps its English.
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from clitools import REPO, run_ortfix
from test_i18n import english_sentences
from txtools import GatedWheelhouse, ortfix

SRC = REPO / "src" / "ortfix"
_CHINESE = re.compile(r"[\u4e00-\u9fff]")
_TX_ID = "20260101T000000000Z-abcd"


def _langs(lang: str) -> dict[str, str]:
    return {"LANG": lang, "LANGUAGE": "", "ORTFIX_LANG": "", "LC_ALL": "", "LC_MESSAGES": ""}


ZH, EN = _langs("zh_CN.UTF-8"), _langs("C")


# --- the target's errors --------------------------------------------------------------------------------------------

ERROR_PREFIXES = ("ortfix: error: ", "ortfix: 错误：")  # English, zh_CN


def _body(line: str) -> str:
    """An error line without its `ortfix: error:` prefix (in either language)."""
    return next(line[len(p):] for p in ERROR_PREFIXES if line.startswith(p))


def _error_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith(ERROR_PREFIXES)]
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def _assert_chinese_error(args: tuple[str, ...], *chinese: str, cwd: Path | None = None) -> str:
    """The error line under zh_CN holds `chinese` and no English sentence; `--json`'s error envelope is byte for byte
    the one printed under LANG=C (and has no Chinese)."""
    zh = _error_line(run_ortfix(*args, env=ZH, cwd=cwd))
    for fragment in chinese:
        assert fragment in zh, (fragment, zh)
    assert not english_sentences(_body(zh)), zh
    envelopes = [run_ortfix(*args, "--json", env=env, cwd=cwd).stdout for env in (ZH, EN)]
    assert envelopes[0] == envelopes[1] and '"schema": "ortfix.error/1"' in envelopes[0], envelopes
    assert not _CHINESE.search(envelopes[0]), envelopes[0]
    return zh


def test_a_missing_interpreter_is_a_chinese_error(tmp_path: Path) -> None:
    missing = tmp_path / "no such" / "python"
    zh = _assert_chinese_error(("check", "--python", str(missing)), "：文件不存在")
    assert f"--python {missing}" in zh  # the option and the path as they are
    english = _error_line(run_ortfix("check", "--python", str(missing), env=EN))
    assert english == f"ortfix: error: --python {missing}: no such file"


def test_a_bad_python_is_a_chinese_error(tmp_path: Path) -> None:
    """A folder with no interpreter in it, and a program that is not Python (the probe fails in it)."""
    (tmp_path / "empty").mkdir()
    _assert_chinese_error(("check", "--python", str(tmp_path / "empty")), "这个目录里没有 bin/python",
                          "请给出解释器的路径或环境目录")
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 'not a python' >&2\nexit 3\n")
    fake.chmod(0o755)
    _assert_chinese_error(("check", "--python", str(fake)), "不是可用的 Python 解释器",
                          "探测程序退出码 3：not a python")


def test_no_interpreter_anywhere_is_a_chinese_error(tmp_path: Path) -> None:
    """No --python, no activated environment, no project .venv, nothing on PATH."""
    env = {**ZH, "PATH": str(tmp_path)}
    proc = run_ortfix("check", env=env, cwd=tmp_path)
    line = _error_line(proc)
    assert "PATH 上没有 python3 或 python，也没有已激活的环境（VIRTUAL_ENV、CONDA_PREFIX）" in line, line
    assert "请传入 --python PATH" in line and not english_sentences(_body(line)), line


def _fake_venv(root: Path, *, transaction: bool) -> Path:
    """A venv's layout (rollback reads it from pyvenv.cfg without running the interpreter): `bin/python`, pyvenv.cfg
    and, with `transaction`, a transaction folder whose journal is missing."""
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "python").write_text("")
    (root / "bin" / "python").chmod(0o755)
    (root / "pyvenv.cfg").write_text(f"home = {Path(sys.executable).parent}\nversion = 3.11.7\n")
    (root / ".ortfix" / "transactions").mkdir(parents=True)
    if transaction:
        (root / ".ortfix" / "transactions" / _TX_ID).mkdir()
    return root


@pytest.fixture()
def locked(tmp_path: Path) -> Iterator[Path]:
    """A venv whose lock another apply holds (this test process, as ortfix holds it: flock on .ortfix/lock)."""
    venv = _fake_venv(tmp_path / "venv", transaction=True)
    fd = os.open(venv / ".ortfix" / "lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(fd, str(os.getpid()).encode())
        yield venv
    finally:
        os.close(fd)


def test_a_locked_environment_is_a_chinese_error(locked: Path) -> None:
    zh = _assert_chinese_error(("rollback", "--python", str(locked), "--yes"),
                               f"另一个 ortfix apply 或 rollback 正在 {locked} 上运行", "请等它结束后再试")
    assert f"(pid {os.getpid()})" in zh
    english = _error_line(run_ortfix("rollback", "--python", str(locked), "--yes", env=EN))
    assert english == (f"ortfix: error: another ortfix apply or rollback is running on {locked} (pid {os.getpid()}) "
                       "(wait for it to finish, then try again)")


def test_rollback_refusals_are_chinese(tmp_path: Path) -> None:
    """A transaction whose journal is missing (refused by rollback, listed by history: its reason in Chinese, in
    English in `--json`), and an environment without any transaction."""
    damaged = _fake_venv(tmp_path / "damaged", transaction=True)
    _assert_chinese_error(("rollback", "--python", str(damaged), "--yes"), "缺少事务日志 ",
                          f"`ortfix history show {_TX_ID}`；ortfix 不会去猜这个事务改动了什么")
    history = run_ortfix("history", "--python", str(damaged), env=ZH)
    assert history.returncode == 0 and f"  缺少事务日志 {damaged}" in history.stdout, history.stdout
    listings = [run_ortfix("history", "--python", str(damaged), "--json", env=env).stdout for env in (ZH, EN)]
    assert listings[0] == listings[1] and '"error": "journal ' in listings[0] and " is missing" in listings[0]
    empty = _fake_venv(tmp_path / "empty", transaction=False)
    _assert_chinese_error(("rollback", "--python", str(empty), "--yes"), f"{empty} 中没有 ortfix 事务",
                          "没有可回滚的内容")


# --- verify ---------------------------------------------------------------------------------------------------------

def test_verify_screen_has_no_english_sentence_and_its_json_no_chinese() -> None:
    """verify on ortfix's own interpreter (no onnxruntime there: level 1 fails, 2 and 3 do not run): every line of the
    screen is free of English sentences, the verdicts and the fix are Chinese, and `--json` is byte-identical."""
    if importlib.util.find_spec("onnxruntime") is not None:
        pytest.skip("ortfix's own environment has onnxruntime: the verdicts this test reads are not printed")
    python = sys.executable
    zh = run_ortfix("verify", "--python", python, env=ZH)
    assert zh.returncode in (1, 3) and not zh.stderr, zh.stderr
    for line in zh.stdout.splitlines():
        assert not english_sentences(line), (english_sentences(line), line)
    assert f"{python} 中没有安装 onnxruntime" in zh.stdout and "没有安装 onnxruntime（第 1 级）" in zh.stdout
    assert "`ortfix plan` 会给出要安装什么" in zh.stdout
    en = run_ortfix("verify", "--python", python, env=EN).stdout
    assert f"onnxruntime is not installed in {python}" in en and "onnxruntime is not installed (level 1)" in en
    documents = [run_ortfix("verify", "--python", python, "--json", env=env).stdout for env in (ZH, EN)]
    assert documents[0] == documents[1] and not _CHINESE.search(documents[0])
    levels = json.loads(documents[0])["levels"]
    assert levels[0]["verdict"] == f"onnxruntime is not installed in {python}"
    assert levels[0]["fix"] == "`ortfix plan` shows what to install"
    assert levels[1]["verdict"] == "onnxruntime is not installed (level 1)"


def test_a_missing_model_is_a_chinese_error(tmp_path: Path) -> None:
    _assert_chinese_error(("verify", "--python", sys.executable, "--model", str(tmp_path / "m.onnx")),
                          "：文件不存在", "请给出 .onnx 模型的路径")


# --- apply and rollback on a real venv (one slow scenario) ----------------------------------------------------------

def _progress(text: str) -> list[str]:
    return [ln[len("ortfix: "):] for ln in text.splitlines() if ln.startswith("ortfix: ") and
            not ln.startswith(ERROR_PREFIXES)]


def test_apply_progress_and_its_automatic_rollback_speak_chinese(cpu_venv: Path, tmp_path: Path, wheelhouse: Path,
                                                                   env: dict[str, str]) -> None:
    """Under LANG=zh_CN.UTF-8: an apply stopped by SIGTERM while pip installs (a gated download holds it there) says
    its progress and its automatic rollback in Chinese, `ortfix: error:` included; the journal keeps the English.
    Then a whole apply and a rollback: the verification and the undo lines in Chinese."""
    python = cpu_venv / "bin" / "python"
    house = GatedWheelhouse(wheelhouse, "nvidia_cudnn_cu12", cpu_venv / ".ortfix" / "transactions")
    try:
        (tmp_path / "gated").mkdir()
        environ = {**house.pip_env(tmp_path / "gated"), **ZH}
        proc = subprocess.Popen([sys.executable, "-m", "ortfix", "apply", "--python", str(python), "--yes"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environ,
                                stdin=subprocess.DEVNULL, cwd=REPO, start_new_session=True)
        reached = house.reached.wait(120)
        if reached:
            os.kill(proc.pid, signal.SIGTERM)
        house.release.set()
        out, err = proc.communicate(timeout=300)
    finally:
        house.close()
    assert reached and proc.returncode == 130, (out[-2000:], err[-2000:])
    lines = _progress(out)
    assert "预检：检查写权限、磁盘空间以及安装器将要做的事" in lines, out
    assert any(re.fullmatch(r"事务 \d{8}T\d{9}Z-[0-9a-f]{4}（.+）", ln) for ln in lines), out
    assert any(ln.startswith("撤销 [") for ln in lines), out
    for english in ("preflight: ", "transaction ", "undo [", "verifying "):
        assert not any(ln.startswith(english) for ln in lines), (english, out)
    assert "ortfix: 错误：被终止（SIGTERM）；所有改动都已回滚\n" in err, err[-2000:]
    [tx] = json.loads(ortfix("history", "--python", str(python), "--json", env={**env, **EN}).stdout)["transactions"]
    assert tx["status"] == "rolled-back"
    journal = json.loads((cpu_venv / ".ortfix" / "transactions" / tx["id"] / "journal.json").read_text())
    assert journal["body"]["message"].endswith("failed: terminated (SIGTERM)"), journal["body"]["message"]
    assert journal["body"]["rollback"]["reason"] == f"apply failed: {journal['body']['message']}"

    applied = ortfix("apply", "--python", str(python), "--yes", env={**env, **ZH})
    assert applied.returncode == 0, (applied.stdout[-3000:], applied.stderr[-3000:])
    assert "正在目标解释器的新进程中验证" in _progress(applied.stdout), applied.stdout
    rolled = ortfix("rollback", "--python", str(python), "--yes", env={**env, **ZH})
    assert rolled.returncode == 0, (rolled.stdout[-3000:], rolled.stderr[-3000:])
    undo = [ln for ln in _progress(rolled.stdout) if ln.startswith("撤销 [")]
    assert undo and not any(ln.startswith("undo [") for ln in _progress(rolled.stdout)), rolled.stdout
