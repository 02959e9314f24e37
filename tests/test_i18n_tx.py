# ruff: noqa: RUF001  (Chinese text and its full-width punctuation are what this file tests)
"""Issue 25, phase 3: apply, history and rollback speak Chinese under LANG=zh_CN.UTF-8, and what they write does not.

A small hermetic venv (onnxruntime 1.22.0 from the test wheelhouse, tests/conftest.py `cpu_venv`) goes through
apply → history → rollback in English, and a copy of it in Chinese: the Chinese run prints the Chinese labels and none
of their English originals, and the files written (the transaction's journal, plan and installer report, the hooks)
are byte for byte the English run's apart from the venv's path, the transaction id, the times and the checksums over
them. `history --json` stays English and byte-identical. The confirmation questions are asked in Chinese on a real
terminal and answered with `y` and `yes`.
"""

from __future__ import annotations

import re
from pathlib import Path

from checktools import site_packages
from ortfix.i18n import display_width
from txtools import copy_venv, ortfix

# The journal's checksums of itself, of the plan and of the stash's manifests, and the plan's fingerprint (they cover
# the id, the times, the inodes, the venv's path).
_SELF_HASH = re.compile(rb'^ *"(?:sha256|plan_sha256|files|snapshot|created|\w*fingerprint)": '
                        rb'"[0-9a-f]{16,64}"', re.MULTILINE)
_TEMP = re.compile(rb"ortfix-pip-report-[A-Za-z0-9_]+")  # the installer's report, in a new temporary folder
_TIME = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?")


def _written(venv: Path, tx_id: str) -> dict[str, bytes]:
    """The files the apply wrote, by path relative to the venv: its transaction's records (journal, plan; not the
    stash, the user's own files with their inodes and times) and the hooks in site-packages; the id, the times and
    the checksums over them blanked."""
    sp = site_packages(venv)
    folder = venv / ".ortfix" / "transactions" / tx_id
    files = [p for p in folder.iterdir() if p.is_file()] + sorted(sp.glob("_ortfix*.p*"))
    assert any(p.name.startswith("_ortfix") for p in files), files  # a hook was written
    return {str(p.relative_to(venv)).replace(tx_id, "ID"): _blank(p.read_bytes(), venv, tx_id) for p in files}


def _blank(data: bytes, venv: Path, tx_id: str) -> bytes:
    data = data.replace(str(venv).encode(), b"VENV").replace(tx_id.encode(), b"ID")
    return _TEMP.sub(b"TEMP", _SELF_HASH.sub(b"SHA256", _TIME.sub(b"TIME", data)))


def _in(env: dict[str, str], lang: str) -> dict[str, str]:
    return {**env, "LANG": lang, "LANGUAGE": "", "ORTFIX_LANG": "", "LC_ALL": "", "LC_MESSAGES": ""}


def _run(venv: Path, env: dict[str, str]) -> tuple[dict[str, str], dict[str, bytes]]:
    """apply, history, history show and rollback: their output and the files the apply wrote."""
    python = str(venv / "bin" / "python")
    out: dict[str, str] = {}
    apply = ortfix("apply", "--python", python, "--yes", env=env)
    assert apply.returncode == 0, (apply.stdout[-3000:], apply.stderr[-3000:])
    out["apply"] = apply.stdout
    tx_id = re.findall(r"\d{8}T\d{9}Z-[0-9a-f]+", apply.stdout)[-1]
    written = _written(venv, tx_id)
    out["history"] = ortfix("history", "--python", python, env=env).stdout
    out["show"] = ortfix("history", "show", tx_id, "--python", python, env=env).stdout
    rollback = ortfix("rollback", "--python", python, "--yes", env=env)
    assert rollback.returncode == 0, (rollback.stdout[-3000:], rollback.stderr[-3000:])
    out["rollback"] = rollback.stdout
    return out, written


def _change_at(row: str) -> int:
    found = re.search(r"  [-+~] ", row)
    assert found is not None, row
    return found.start() + 2


# English labels of each screen and their Chinese translations (the catalog's glossary).
_LABELS = {
    "apply": [("Applied transaction ", "已应用事务 "),
              ("Undo: ortfix rollback --python ", "撤销：ortfix rollback --python "),
              ("ortfix check: no blocking findings left", "ortfix check：不再有阻断性问题")],
    "history": [("Transactions in ", "中的事务"), ("CREATED (UTC)", "创建时间（UTC）"), ("STATUS", "状态"),
                ("CHANGES", "变更"), ("Details: ortfix history show ID. Undo", "详情：ortfix history show ID。撤销")],
    "show": [("environment  ", "环境  "), ("fingerprint ", "指纹 ")],
    "rollback": [("Rolled back transaction ", "已回滚事务 "), ("The environment is as it was before the apply.",
                                                            "环境已恢复到应用之前的状态。")],
}


def test_apply_history_rollback_speak_chinese_and_write_the_same_files(cpu_venv: Path, cpu_template: Path,
                                                                        tmp_path: Path, env: dict[str, str]) -> None:
    """Each language in a copy of its own of the same venv (a rollback's background deletion never meets the next
    apply); the venvs' paths blanked."""
    english, english_files = _run(cpu_venv, _in(env, "C"))
    zh_venv = copy_venv(cpu_template, tmp_path / "zh venv")
    chinese, chinese_files = _run(zh_venv, _in(env, "zh_CN.UTF-8"))
    for screen, labels in _LABELS.items():
        for en, zh in labels:
            assert en in english[screen], (screen, en, english[screen])
            assert zh in chinese[screen] and en not in chinese[screen], (screen, zh, chinese[screen])
    assert re.search(r"[\u4e00-\u9fff]", "".join(english.values())) is None
    assert "+ onnxruntime-gpu 1.22.0" in chinese["history"]  # package names and versions as they are
    assert sorted(chinese_files) == sorted(english_files)  # journal, stash and hooks: never in the screen's language
    for name, data in english_files.items():
        assert chinese_files[name] == data, name
    header, *rows = [line for line in chinese["history"].splitlines() if "onnxruntime" in line or "变更" in line]
    changes_at = {display_width(row[:_change_at(row)]) for row in rows}
    assert len(rows) == 1 and changes_at == {display_width(header[:header.index("变更")])}, chinese["history"]
    python = str(zh_venv / "bin" / "python")
    listings = {lang: ortfix("history", "--python", python, "--json", env=_in(env, lang)).stdout
                for lang in ("C", "zh_CN.UTF-8")}
    assert listings["C"] == listings["zh_CN.UTF-8"] and '"status": "rolled-back"' in listings["C"]


def test_the_confirmation_questions_are_chinese_and_y_yes_still_answer_them(cpu_venv: Path,
                                                                             env: dict[str, str]) -> None:
    """apply and rollback without --yes on a real terminal under LANG=zh_CN.UTF-8: the question is Chinese, click's
    `[y/N]` and its answers stay; `y` applies, `yes` rolls back."""
    from test_hostile_text import _on_a_pty

    python = str(cpu_venv / "bin" / "python")
    zh = _in(env, "zh_CN.UTF-8")
    code, out = _on_a_pty(["apply", "--python", python], zh, "吗？ [y/N]".encode(), b"y\n")
    text = out.decode("utf-8", "replace")
    assert code == 0 and f"要把这些改动应用到 {cpu_venv} 吗？ [y/N]" in text and "已应用事务 " in text, text[-2000:]
    assert "Apply these changes" not in text
    code, out = _on_a_pty(["rollback", "--python", python], zh, "要回滚吗？ [y/N]".encode(), b"yes\n")
    text = out.decode("utf-8", "replace")
    assert code == 0 and "回滚 " in text and "已回滚事务 " in text and "Roll back?" not in text, text[-2000:]
