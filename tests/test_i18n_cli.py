# ruff: noqa: RUF001  (Chinese text and its full-width punctuation are what this file tests)
"""Issue 25, phase 4 (the command line): `--help`, the errors and notes of commands/, system/, export/ and explain/,
`ortfix: error:` lines, exported files' comments under `--lang`, and `--lang` after the command's name.

tests/data/i18n/help_en/ holds every command's `--help` as the code before this change printed it (LANG=C,
COLUMNS=120): English help is still that, word for word, apart from the `--lang` option every command now lists."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from clitools import NEUTRAL, REPO, run_ortfix
from ortfix import i18n
from test_i18n import _clean_env, english_sentences, extract_messages

if TYPE_CHECKING:
    from ortfix.export.model import ExportInput

SRC = REPO / "src" / "ortfix"
HELP_EN = Path(__file__).parent / "data" / "i18n" / "help_en"
HAN = re.compile(r"[\u4e00-\u9fff]")
AREA = [*(SRC / "cli").glob("*.py"), *(SRC / "commands").glob("*.py"), *(SRC / "system").rglob("*.py"),
        *(SRC / "export").glob("*.py"), *(SRC / "explain").glob("*.py"), SRC / "errors.py"]

# --- (1) nothing for people left unmarked --------------------------------------------------------------------------

_ERRORS = ("OrtfixError", "ConfinementError")


def _plain_error_messages(path: Path) -> list[tuple[int, str]]:
    """(line, source) of every OrtfixError(...) whose message or hint is a plain string literal or f-string (not a
    Msg): its text would reach the terminal untranslated. A line marked `# i18n: english` is English by design."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    out = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) in _ERRORS):
            continue
        values = [*node.args[:1], *(k.value for k in node.keywords if k.arg == "hint")]
        plain = [v for v in values if isinstance(v, ast.JoinedStr)
                 or (isinstance(v, ast.Constant) and isinstance(v.value, str))]
        if plain and not any(extract_messages.ENGLISH_ON_PURPOSE in ln
                             for ln in lines[node.lineno - 1:node.end_lineno]):
            out.append((node.lineno, ast.get_source_segment(source, node) or ""))
    return out


def test_every_error_in_these_modules_carries_a_marked_message() -> None:
    """(Their sentences' marking at all is test_i18n.py's sweep of every module.)"""
    assert len(AREA) > 60
    found = [(p.relative_to(SRC).as_posix(), line, text) for p in AREA for line, text in _plain_error_messages(p)]
    assert not found, found


# --- (2) --help ----------------------------------------------------------------------------------------------------

def _commands() -> list[tuple[str, ...]]:
    from ortfix.cli.app import main

    found: list[tuple[str, ...]] = [()]
    for name, command in sorted(main.commands.items()):
        found.append((name,))
        for sub in sorted(getattr(command, "commands", {})):
            found.append((name, sub))
    return found


def _help(*args: str, env: dict[str, str]) -> str:
    proc = subprocess.run([sys.executable, "-m", "ortfix", *args, "--help"], capture_output=True, text=True,
                          encoding="utf-8", env={**_clean_env(), "COLUMNS": "120", **env}, cwd=NEUTRAL, timeout=60,
                          check=False)
    assert proc.returncode == 0 and not proc.stderr, (args, proc.stderr)
    return proc.stdout


def _words_without_lang_option(text: str) -> list[str]:
    """The words of a help text, its `--lang LANG` option's lines left out (columns may realign around it)."""
    kept: list[str] = []
    skipping = False
    for line in text.splitlines():
        if re.match(r"\s+--lang LANG\b", line):
            skipping = True
        elif skipping and re.match(r"\s+-", line):
            skipping = False
        if not skipping:
            kept.append(line)
    return " ".join(kept).split()


def test_every_commands_help_is_chinese_under_zh_cn() -> None:
    """No English sentence is left in any command's help (option names, metavars, examples and click's bracketed
    extras are not sentences); click's headings are translated too."""
    commands = _commands()
    assert len(commands) >= 16
    for args in commands:
        text = _help(*args, env={"ORTFIX_LANG": "zh_CN"})
        assert text.startswith("用法：ortfix"), text
        assert "选项：" in text and "显示此帮助并退出。" in text and HAN.search(text.split("选项：")[0][20:]), args
        for line in text.splitlines():
            assert not english_sentences(line), (args, line)
        assert "Show this message" not in text and "Usage:" not in text


def test_the_language_is_chosen_before_help_is_printed() -> None:
    """ORTFIX_LANG, `--lang` before the command, `--lang` after it and LANG all give the same Chinese help; LANG=C
    gives English."""
    by_env = _help("plan", env={"ORTFIX_LANG": "zh_CN"})
    assert "预览能修好 GPU 路径的确切改动" in by_env
    assert _help("--lang", "zh_CN", "plan", env={"LANG": "C"}) == by_env
    assert _help("plan", "--lang", "zh_CN", env={"LANG": "C"}) == by_env
    assert _help("plan", env={"LANG": "zh_CN.UTF-8"}) == by_env
    assert "Preview the exact changes" in _help("plan", env={"LANG": "C"})


def test_english_help_is_what_it_was() -> None:
    for args in _commands():
        name = "_".join(args) or "ortfix"
        before = (HELP_EN / f"{name}.txt").read_text(encoding="utf-8")
        now = _help(*args, env={"LANG": "C"})
        assert _words_without_lang_option(now) == _words_without_lang_option(before), name
        if args:  # every command takes --lang after its name
            assert re.search(r"^\s+--lang LANG\b", now, re.MULTILINE), name


def test_chinese_help_fits_the_terminal() -> None:
    """click wraps by characters; a Chinese character takes two columns: the help is wrapped by columns."""
    for args in (("plan",), ("apply",), ()):
        for line in _help(*args, env={"ORTFIX_LANG": "zh_CN"}).splitlines():
            if not line.lstrip().startswith(("ortfix ", "--hook [")):  # example lines and a long option name
                assert i18n.display_width(line) <= 80, (args, line)


# --- (3) --lang after the command ----------------------------------------------------------------------------------

def test_lang_after_the_command_is_read_once_and_keeps_checks_fast_path() -> None:
    from ortfix.cli.invocation import Invocation

    fast = Invocation(["check", "--lang", "zh_CN", "--json", "--python", "/x/python"])
    assert fast.lang == "zh_CN" and fast.command == "check" and fast.json
    assert fast.check is not None and fast.check["python"] == "/x/python" and fast.check["as_json"] is True
    assert Invocation(["check", "--lang=zh_CN"]).check is not None
    assert Invocation(["--lang", "en", "history", "show", "X", "--lang", "zh_CN"]).lang == "zh_CN"  # the last one
    assert Invocation(["history", "--lang", "zh_CN", "show", "X"]).command == "history show"
    assert Invocation(["explain", "--", "--lang", "zh_CN"]).lang is None  # after `--`: the message's words


def test_lang_after_the_command_speaks_chinese() -> None:
    english = {"LANG": "C", "LANGUAGE": "", "ORTFIX_LANG": ""}
    python = sys.executable
    check = run_ortfix("check", "--python", python, "--lang", "zh_CN", env=english)
    assert check.returncode in (0, 1) and check.stdout.startswith(f"目标 {python}（"), check.stderr
    assert "系统  " in check.stdout or "系统 " in check.stdout
    explain = run_ortfix("explain", "--no-check", "libcudnn.so.9: cannot open shared object file", "--lang",
                         "zh_CN", env=english)
    assert explain.returncode == 0 and "原因：" in explain.stdout, explain.stderr
    matrix = run_ortfix("matrix", "show", "--lang", "zh_CN", env=english)
    assert matrix.returncode == 0 and matrix.stdout.startswith("兼容性矩阵"), matrix.stdout[:200]
    error = run_ortfix("plan", "--python", python, "--cuda", "9", "--lang", "zh_CN", env=english)
    assert error.returncode == 2
    assert error.stderr == "ortfix: 错误：--cuda '9'：不是 CUDA 主版本（10 到 20 之间的数字，例如 12）\n", error.stderr


# --- errors, separators --------------------------------------------------------------------------------------------

def test_error_lines_keep_their_prefix_and_translate_the_rest() -> None:
    cases = {
        ("plan", "--hook", "nope"): ("ortfix: error: --hook 'nope': not one of auto, conda, preload, user-path, none "
                                     "(e.g. --hook auto)\n",
                                     "ortfix: 错误：--hook 'nope'：不是 auto、conda、preload、user-path、none 之一"
                                     "（例如 --hook auto）\n"),
        ("explain", "--file", "/nonexistent/log"): (
            "ortfix: error: cannot read /nonexistent/log: No such file or directory\n",
            "ortfix: 错误：无法读取 /nonexistent/log：No such file or directory\n"),
    }
    for args, (english, chinese) in cases.items():
        assert run_ortfix(*args, env={"LANG": "C", "LANGUAGE": "", "ORTFIX_LANG": ""}).stderr == english
        assert run_ortfix(*args, env={"LANG": "zh_CN.UTF-8", "LANGUAGE": "", "ORTFIX_LANG": ""}).stderr == chinese


def test_a_joined_list_uses_the_languages_separator() -> None:
    items = i18n.Joined(i18n.N_(", "), ["a", "b", "c"])
    clauses = i18n.Joined(i18n.N_("; "), ["x", "y"])
    try:
        assert i18n.set_language("zh_CN") == "zh_CN"
        assert (items.text(), clauses.text()) == ("a、b、c", "x；y")
        assert (str(items), str(clauses)) == ("a, b, c", "x; y")  # data (--json) stays English
        assert i18n.Joined("", ["a", "b"]).text() == "ab"  # an empty separator is not a catalog key
    finally:
        i18n.set_language("en")
    assert items.text() == "a, b, c"


# --- (4) exported files --------------------------------------------------------------------------------------------

def _export_input(prefix: str, python: str) -> ExportInput:
    from ortfix.export.model import ExportInput
    from ortfix.export.pins import Pin
    from ortfix.plan.model import Action, Plan, PlanOptions

    install = Action("pip-install", "install onnxruntime-gpu 1.22.0 and its CUDA libraries", ("+ onnxruntime-gpu",),
                     "uninstall", ("ORT002",), {"requirements": ["onnxruntime-gpu==1.22.0"], "installer": "pip",
                                                "reinstall": False})
    remove = Action("pip-uninstall", "remove onnxruntime 1.22.0 (CPU-only)", ("- onnxruntime",), "reinstall",
                    ("ORT002",), {"distribution": "onnxruntime", "dist_info": f"{prefix}/lib/x/onnxruntime.dist-info"})
    plan = Plan("ortfix.plan/2", "now", "0.1.0", python, prefix, "venv", "f" * 16, "g" * 16,
                PlanOptions(driver_version="550.54.14", compute_capability="8.6"), "1", "pip", None,
                (remove, install), (), ())
    pins = (Pin("onnxruntime-gpu", "1.22.0", "a" * 64, True), Pin("nvidia-cudnn-cu12", "9.1.0.70", None, False))
    return ExportInput(plan, python, prefix, pins, {"ORT002": "the CPU-only package is installed"})


@pytest.mark.parametrize("fmt", ["requirements", "dockerfile", "sh", "ps1"])
def test_exported_comments_follow_the_named_language_and_nothing_else_changes(fmt: str) -> None:
    from ortfix.commands.export import render
    from ortfix.export.model import ExportFormat

    windows = fmt == "ps1"
    inp = _export_input("C:\\envs\\infer" if windows else "/opt/infer",
                        "C:\\envs\\infer\\python.exe" if windows else "/opt/infer/bin/python")
    english = render(inp, ExportFormat(fmt), None)
    chinese = i18n.rendered_in("zh_CN", lambda: render(inp, ExportFormat(fmt), None))
    assert i18n.language() == "en"  # the terminal's language is back
    for en_text, zh_text in zip(english, chinese):
        if en_text is None:
            assert zh_text is None
            continue
        en_lines, zh_lines = en_text.splitlines(), zh_text.splitlines()
        assert len(en_lines) == len(zh_lines)
        comments = 0
        for en_line, zh_line in zip(en_lines, zh_lines):
            if en_line.startswith("# ") and not en_line.startswith("#!"):
                comments += 1
                assert zh_line.startswith("# ") and not english_sentences(zh_line), zh_line
            else:  # every command, instruction, pin and message of the script itself: byte for byte
                assert zh_line == en_line
        assert comments >= 3 and HAN.search(zh_text) and not HAN.search(en_text)
    assert "# 修复脚本，由 ortfix 0.1.0 从计划 ffffffffffffffff 导出" in chinese[0] or fmt in ("requirements",
                                                                                            "dockerfile")


def test_only_lang_or_ortfix_lang_name_the_language_of_a_file() -> None:
    assert i18n.named_language(None, {"LANG": "zh_CN.UTF-8", "LANGUAGE": "zh_CN"}) == "en"
    assert i18n.named_language(None, {"LC_ALL": "zh_CN.UTF-8"}) == "en"
    assert i18n.named_language(None, {"ORTFIX_LANG": "zh_CN", "LANG": "C"}) == "zh_CN"
    assert i18n.named_language("zh_CN.UTF-8", {}) == "zh_CN"
    assert i18n.named_language("en", {"ORTFIX_LANG": "zh_CN"}) == "en"


@pytest.mark.slow
def test_export_under_lang_writes_chinese_comments_and_the_locale_alone_does_not(
        export_base: dict[str, Path], export_env: dict[str, str], tmp_path: Path) -> None:
    """The real command on the test wheelhouse's CPU venv: `export sh --lang zh_CN` and `--lang zh_CN export sh`
    write the same script with Chinese comments; LANG=zh_CN.UTF-8 alone writes the English one byte for byte (its
    warnings on the terminal are Chinese)."""
    from txtools import copy_venv

    target = copy_venv(export_base["cpu"], tmp_path / "target")
    outputs: dict[str, tuple[str, str, str]] = {}
    for name, args, lang in (("en", [], "C"), ("locale", [], "zh_CN.UTF-8"), ("after", ["--lang", "zh_CN"], "C"),
                             ("before", [], "C")):
        out = tmp_path / name / "fix.sh"
        out.parent.mkdir()
        first = ["--lang", "zh_CN"] if name == "before" else []
        proc = subprocess.run([sys.executable, "-m", "ortfix", *first, "export", "sh", "--python", str(target), "-o",
                               str(out), *args], capture_output=True, text=True, encoding="utf-8", cwd=NEUTRAL,
                              env={**export_env, "LANG": lang, "LANGUAGE": "", "ORTFIX_LANG": ""}, timeout=600,
                              check=False)
        assert proc.returncode == 0, proc.stderr
        outputs[name] = (out.read_text(encoding="utf-8"), out.with_name("fix.undo.sh").read_text(encoding="utf-8"),
                         proc.stdout)
    assert outputs["locale"][:2] == outputs["en"][:2]  # the locale alone never changes a file
    assert outputs["after"][:2] == outputs["before"][:2] != outputs["en"][:2]
    assert HAN.search(outputs["locale"][2]) and not HAN.search(outputs["en"][2])  # the terminal speaks the locale
    for zh, en in zip(outputs["after"][:2], outputs["en"][:2]):
        assert [ln for ln in zh.splitlines() if not ln.startswith("# ")] == [
            ln for ln in en.splitlines() if not ln.startswith("# ")]
        assert "# 撤销脚本，由 ortfix" in zh or "# 修复脚本，由 ortfix" in zh


# --- (5) --json is the same in every language ----------------------------------------------------------------------

def test_json_and_error_envelopes_are_byte_identical_across_locales() -> None:
    python = sys.executable
    runs = [("matrix", "show", "--json"), ("history", "--python", python, "--json"),
            ("plan", "--python", python, "--cuda", "9", "--json"),
            ("export", "sh", "--python", python, "--prefix-in-image", "/x", "--json"),
            ("tune", "/nonexistent/model.onnx", "--python", python, "--json"),
            ("history", "show", "20250101T000000000Z-abcd", "--python", python, "--json")]
    for args in runs:
        outs = {}
        for lang in ("C", "zh_CN.UTF-8"):
            proc = run_ortfix(*args, env={"LANG": lang, "LANGUAGE": "", "ORTFIX_LANG": ""})
            outs[lang] = (proc.returncode, proc.stdout, proc.stderr)
        assert outs["C"][:2] == outs["zh_CN.UTF-8"][:2], args
        assert json.loads(outs["C"][1])["command"], args
        assert not HAN.search(outs["C"][1]) and not HAN.search(outs["C"][2]), args
        if outs["C"][0] == 2:  # an error: its line on stderr speaks the locale, the envelope stays English
            assert outs["zh_CN.UTF-8"][2].startswith("ortfix: 错误："), outs["zh_CN.UTF-8"][2]


def test_a_replayed_check_is_never_in_another_language(tmp_path: Path) -> None:
    """check replays an identical earlier check's output: `--lang` (before or after the command, the click-free path
    and click's) is part of what makes it identical, as the locale's variables are."""
    python = sys.executable
    env = {"ORTFIX_CACHE_DIR": str(tmp_path / "cache"), "LANG": "C", "LANGUAGE": "", "ORTFIX_LANG": ""}
    english = run_ortfix("check", "--python", python, env=env)
    assert english.stdout.startswith("target ") and run_ortfix("check", "--python", python, env=env).stdout == (
        english.stdout)  # replayed
    for args, extra in ((("check", "--python", python, "--lang", "zh_CN"), {}),
                        (("--lang", "zh_CN", "check", "--python", python), {}),
                        (("--lang", "zh_CN", "check", "--python", python), {"ORTFIX_NO_FASTPATH": "1"})):
        chinese = run_ortfix(*args, env={**env, **extra})
        assert chinese.stdout.startswith(f"目标 {python}（"), (args, chinese.stdout[:200])
    assert run_ortfix("check", "--python", python, env=env).stdout == english.stdout


def test_an_exported_files_reasons_are_in_its_language_too() -> None:
    """The findings' summaries reach the file's `fixes` lines in the file's language: a Msg with its values (the
    English text of one with values is no catalog key, so a str() of it stayed English in a Chinese file)."""
    from dataclasses import replace
    from types import SimpleNamespace
    from typing import cast

    from ortfix.check.codes import FindingCode, Severity
    from ortfix.check.findings import Finding
    from ortfix.commands.apply import PreparedApply
    from ortfix.commands.export import export_input, render
    from ortfix.export.model import ExportFormat
    from ortfix.i18n import N_, Msg

    plan = _export_input("/opt/infer", "/opt/infer/bin/python").plan
    plan = replace(plan, actions=plan.actions[:1])
    summary = Msg(N_("the CPU-only package {name} {version} is installed, not {gpu}: only CPUExecutionProvider (and "
                     "AzureExecutionProvider) exist"), name="onnxruntime", version="1.22.0", gpu="onnxruntime-gpu")
    finding = Finding(FindingCode("ORT002"), Severity.ERROR, summary, (), "")
    prepared = cast(PreparedApply, SimpleNamespace(plan=plan, check=SimpleNamespace(findings=[finding])))
    inp = export_input(prepared, ExportFormat.SH)  # the plan only uninstalls: no pins to resolve
    script, _undo = i18n.rendered_in("zh_CN", lambda: render(inp, ExportFormat.SH, None))
    fixes = [line for line in script.splitlines() if "ORT002" in line]
    assert fixes and all(HAN.search(line) and not english_sentences(line) for line in fixes), fixes
