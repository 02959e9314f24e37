# ruff: noqa: RUF001  (Chinese text and its full-width punctuation are what this file tests)
"""Issue 25, phase 4: the plan's action lines and the transaction steps' wording speak Chinese under zh_CN, and what
is data stays English.

An action's summary, undo line, notes and reasons are `i18n.Msg`s: the plan's JSON and files get the English, the
terminal the translation. A step read back from a plan or journal holds only the English summary: each handler
rebuilds the step's title from its details (transaction/actions/base.py `step_title`), so apply, rollback and
history show it translated too, and English stays byte for byte what the file says.

The plans are made for real (diagnose and make_plan on the recorded facts of real venvs, tests/data/facts) and
rendered by `plan`'s renderer; the one slow test runs plan, apply, history and rollback as commands on the hermetic
CPU venv (tests/conftest.py `cpu_venv`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from clitools import REPO
from factsdata import load_facts, recorded
from ortfix import i18n
from ortfix.check.diagnose import diagnose
from ortfix.cli.render import render_plan
from ortfix.compat.load import load_matrix
from ortfix.errors import OrtfixError
from ortfix.plan.make import make_plan
from ortfix.plan.model import Plan, PlanOptions
from ortfix.target.choose import TargetDescription
from ortfix.transaction.actions.base import ORIGIN_PLAN, ORIGIN_REPLACED, step_title
from ortfix.transaction.journal import Step, StepState
from test_i18n import english_sentences, extract_messages
from txtools import ortfix

MATRIX = load_matrix()
AREA = [*sorted((REPO / "src" / "ortfix" / "plan").glob("*.py")),
        *sorted((REPO / "src" / "ortfix" / "transaction" / "actions").glob("*.py"))]
_CHINESE = re.compile(r"[\u4e00-\u9fff]")
# The options each recorded environment is planned with: the default hook, conda's and none (the note instead).
_OPTIONS = (PlanOptions(), PlanOptions(hook="conda"), PlanOptions(hook="none"))


@pytest.fixture()
def chinese(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This process speaks zh_CN (chosen afresh on first use); the language in use before comes back afterwards."""
    monkeypatch.setenv("ORTFIX_LANG", "zh_CN")
    monkeypatch.setattr(i18n, "_current", None)
    monkeypatch.setattr(i18n, "_chosen", "en")
    assert i18n.language() == "zh_CN"
    yield


def test_no_unmarked_english_is_left_in_the_plan_and_the_step_handlers() -> None:
    assert len(AREA) > 25
    left = {str(p.relative_to(REPO)): found for p in AREA if (found := extract_messages.unmarked(p))}
    assert left == {}


def _plans() -> Iterator[tuple[str, Plan]]:
    for name in recorded():
        facts = load_facts(name)
        for options in _OPTIONS:
            yield f"{name} --hook {options.hook}", make_plan(facts, diagnose(facts, MATRIX), MATRIX, options)


def _screen(plan: Plan) -> str:
    return render_plan(plan, TargetDescription(plan.python, "3.11.7", "venv", plan.prefix, "--python", False))


def _action_lines(screen: str) -> list[str]:
    """The action lines of a plan's screen (each numbered summary, its changes and undo line) and its notes: not the
    hooks' contents (files, English by design) nor the unresolved findings (check's wording, not the plan's)."""
    lines, inside = [], False
    for line in screen.splitlines():
        inside = inside or bool(re.match(r"\d+\. ", line))
        if line.startswith(("本计划未修复", "Not fixed by this plan")):
            break
        if inside and line.strip() and not line.startswith("       | "):
            lines.append(line)
    return lines


def test_plan_action_lines_notes_and_undo_lines_speak_chinese(chinese: None) -> None:
    """Every recorded environment's plan: each action's summary, changes and undo line, and each note, read as
    Chinese; no line of them holds an English sentence."""
    kinds: set[str] = set()
    summaries = notes = 0
    for name, plan in _plans():
        kinds.update(a.kind for a in plan.actions)
        for line in _action_lines(_screen(plan)):
            assert not english_sentences(line), (name, english_sentences(line), line)
            if re.match(r"\d+\. |     撤销：|注：", line):
                assert _CHINESE.search(line), (name, line)
                summaries += line[0].isdigit()
                notes += line.startswith("注：")
    assert {"pip-uninstall", "pip-install", "write-file"} <= kinds, kinds
    assert summaries > 20 and notes > 10, (summaries, notes)


def test_a_plan_error_and_its_hint_speak_chinese(chinese: None) -> None:
    """--ort-version of a release the matrix does not know: the one line and its hint, in Chinese; English in the
    error's own fields (the JSON envelope)."""
    facts = load_facts("cpu")
    with pytest.raises(OrtfixError) as caught:
        make_plan(facts, diagnose(facts, MATRIX), MATRIX, PlanOptions(ort_version="1.99.0"))
    said = caught.value.rendered()
    assert "没有发布 onnxruntime-gpu 1.99.0 的构建" in said and "会列出已知的构建" in said, said
    assert not english_sentences(said), said
    assert caught.value.one_line().startswith("--ort-version 1.99.0: no onnxruntime-gpu 1.99.0 build is published")


def test_the_plans_json_is_the_same_in_every_language(chinese: None) -> None:
    """Plan.to_json (what `plan --json` and `plan -o` write) under zh_CN is the English document, byte for byte."""
    chinese = {name: _document(plan) for name, plan in _plans()}
    i18n.set_language("en")
    english = {name: _document(plan) for name, plan in _plans()}
    assert chinese == english and not _CHINESE.search("".join(chinese.values()))
    assert '"summary": "uninstall onnxruntime 1.22.0"' in english["cpu --hook auto"]


def _document(plan: Plan) -> str:
    """The plan's JSON, its one field that is the time blanked."""
    return json.dumps({**plan.to_json(), "created": ""}, sort_keys=True, ensure_ascii=False)


# --- a step read back from a journal -------------------------------------------------------------------------------

def _step(kind: str, summary: str, details: Mapping[str, object], origin: str = ORIGIN_PLAN) -> Step:
    return Step(index=1, kind=kind, summary=summary, origin=origin, details=details, state=StepState.DONE, record={},
                started=None, finished=None, error=None)


SP = "/v/lib/python3.11/site-packages"
# One step of each kind as a journal holds it: the English summary the plan wrote, and the details.
JOURNALED = [
    (_step("pip-uninstall", "uninstall onnxruntime 1.22.0", {
        "distribution": "onnxruntime", "version": "1.22.0", "location": SP,
        "dist_info": f"{SP}/onnxruntime-1.22.0.dist-info"}), "卸载 onnxruntime 1.22.0"),
    (_step("pip-uninstall", "move aside nvidia-cudnn-cu12 9.1.0.70 (pip would replace it with 9.5.1.17)", {
        "distribution": "nvidia-cudnn-cu12", "version": "9.1.0.70", "location": SP,
        "dist_info": f"{SP}/nvidia_cudnn_cu12-9.1.0.70.dist-info"}, ORIGIN_REPLACED),
     "移开 nvidia-cudnn-cu12 9.1.0.70（pip 会替换它）"),
    (_step("pip-install", "install onnxruntime-gpu==1.22.0, nvidia-cudnn-cu12~=9.0", {
        "requirements": ["onnxruntime-gpu==1.22.0", "nvidia-cudnn-cu12~=9.0"], "installer": "pip",
        "reinstall": False}), "安装 onnxruntime-gpu==1.22.0, nvidia-cudnn-cu12~=9.0"),
    (_step("write-file", f"write {SP}/_ortfix_preload.pth: activate the preload hook at interpreter start-up", {
        "path": f"{SP}/_ortfix_preload.pth", "content": "import _ortfix_preload\n", "sha256": "0" * 64,
        "mode": 0o644, "replaces_existing": False}), f"写入 {SP}/_ortfix_preload.pth"),
    (_step("symlink", f"create {SP}/nvidia/cudnn/lib/libcudnn.so.9 -> libcudnn.so.9.1.0", {
        "path": f"{SP}/nvidia/cudnn/lib/libcudnn.so.9", "target": "libcudnn.so.9.1.0"}),
     f"创建 {SP}/nvidia/cudnn/lib/libcudnn.so.9 -> libcudnn.so.9.1.0"),
    (_step("user-path", "add 2 folder(s) at the front of the user PATH (HKCU\\Environment, for programs started "
                        "afterwards)", {"entries": ["C:\\v\\Lib\\site-packages\\nvidia\\cublas\\bin",
                                                    "C:\\v\\Lib\\site-packages\\nvidia\\cudnn\\bin"]}),
     "在用户 PATH 最前面添加 2 个目录（HKCU\\Environment，对之后启动的程序生效）"),
    (_step("project-update", "update the uv project at /work/app", {
        "project": "/work/app", "manager": "uv", "files": {"pyproject.toml": "", "uv.lock": ""},
        "section": "dependencies", "remove": ["onnxruntime"], "add": ["onnxruntime-gpu==1.22.0"], "edits": []}),
     "更新 /work/app 处的 uv 项目"),
]


@pytest.mark.parametrize(("step", "chinese_title"), JOURNALED, ids=[f"{s.kind}-{s.origin}" for s, _ in JOURNALED])
def test_a_journaled_step_is_titled_in_chinese_from_its_details(step: Step, chinese_title: str,
                                                                 chinese: None) -> None:
    title = step_title(step)
    assert title.text() == chinese_title
    assert str(title) == step.summary  # what a journal or --json says: the English as it was written
    i18n.set_language("en")
    assert title.text() == step.summary  # English on the terminal: the summary byte for byte, all it says included


def test_a_step_whose_details_do_not_check_out_keeps_its_english_summary(chinese: None) -> None:
    """Details a journal could hold that a handler cannot read (a hostile or damaged journal) and an unknown kind: the
    summary as it is written, never an exception."""
    for step in (_step("symlink", "create a link", {"path": 7, "target": "libx.so.1"}),
                 _step("pip-install", "install x", {"requirements": ["--index-url=http://x"], "installer": "pip"}),
                 _step("pip-uninstall", "uninstall x", {"distribution": "no such name!", "version": "1"}),
                 _step("teleport", "beam it up", {})):
        assert step_title(step).text() == step.summary == str(step_title(step)), step


# --- the commands, on a real venv (slow) ---------------------------------------------------------------------------

def _in(env: Mapping[str, str], lang: str) -> dict[str, str]:
    return {**env, "LANG": lang, "LANGUAGE": "", "ORTFIX_LANG": "", "LC_ALL": "", "LC_MESSAGES": ""}


def _steps(document: str) -> str:
    """A dry run's steps (summaries, what each would do) and its plan, as its JSON says them; the time blanked."""
    doc = json.loads(document)
    return json.dumps([doc["steps"], {**doc["plan"], "created": ""}], ensure_ascii=False)


def _step_lines(output: str) -> list[str]:
    """Lines that name a step: apply's `ortfix: [i/n] …`, rollback's undo lines, history show's `i. [state] …`."""
    return [line for line in output.splitlines()
            if re.match(r"(?:ortfix: )?(?:\[\d+/\d+\]|撤销 \[|undo \[|\d+\. \[)", line)]


def test_plan_apply_history_rollback_name_their_steps_in_chinese(cpu_venv: Path, tmp_path: Path,
                                                                  env: dict[str, str]) -> None:
    """The CPU venv under LANG=zh_CN.UTF-8: `plan`'s action lines, apply's steps as it runs them, `history show`'s
    steps read back from the journal and rollback's undo lines (the journal again) are Chinese; `plan --json` and
    `plan -o FILE` are the same bytes as under LANG=C."""
    python = str(cpu_venv / "bin" / "python")
    zh, en = _in(env, "zh_CN.UTF-8"), _in(env, "C")
    written = {}
    for lang, environ in (("zh", zh), ("en", en)):
        out = tmp_path / f"plan-{lang}.json"
        assert ortfix("plan", "--python", python, "-o", str(out), env=environ).returncode in (0, 1)
        document = ortfix("plan", "--python", python, "--json", env=environ)
        written[lang] = (re.sub(r'"created": "[^"]*"', "", document.stdout),
                         re.sub(rb'"created": "[^"]*"', b"", out.read_bytes()))
    assert written["zh"] == written["en"] and '"summary": "uninstall onnxruntime 1.22.0"' in written["en"][0]
    plan = ortfix("plan", "--python", python, env=zh).stdout
    assert "1. 卸载 onnxruntime 1.22.0" in plan and "撤销：它的文件被移到事务的暂存区" in plan, plan
    dry = {lang: ortfix("apply", "--python", python, "--dry-run", *json, env=environ).stdout
           for lang, environ in (("zh", zh), ("en", en)) for json in ((), ("--json",))
           for lang in [lang + "".join(json)]}
    assert _steps(dry["zh--json"]) == _steps(dry["en--json"]) and "move aside " in _steps(dry["en--json"])
    assert "1. pip-uninstall: 卸载 onnxruntime 1.22.0" in dry["zh"], dry["zh"]
    assert re.search(r"^     把 onnxruntime 1\.22\.0 的 \d+ 个文件.*移到事务的暂存区", dry["zh"], re.M), dry["zh"]
    described = [line for line in dry["zh"].splitlines() if re.match(r"\d+\. |     \S", line)]
    assert len(described) >= 6 and not [line for line in described if english_sentences(line)], described
    apply = ortfix("apply", "--python", python, "--yes", env=zh)
    assert apply.returncode == 0, (apply.stdout[-3000:], apply.stderr[-3000:])
    tx_id = re.findall(r"\d{8}T\d{9}Z-[0-9a-f]+", apply.stdout)[-1]
    show = ortfix("history", "show", tx_id, "--python", python, env=zh).stdout
    rollback = ortfix("rollback", "--python", python, "--yes", env=zh)
    assert rollback.returncode == 0, (rollback.stdout[-3000:], rollback.stderr[-3000:])
    screens = {"apply": apply.stdout + apply.stderr, "show": show, "rollback": rollback.stdout + rollback.stderr}
    for screen, text in screens.items():
        steps = _step_lines(text)
        assert len(steps) >= 3, (screen, text)
        for line in steps:
            assert _CHINESE.search(line) and not english_sentences(line), (screen, line)
            assert not re.search(r"\] (?:uninstall|install|write|replace|create) ", line), (screen, line)
    assert "[1/" in screens["apply"] and "卸载 onnxruntime 1.22.0" in screens["apply"]
    assert re.search(r"^1\. \[done\] 卸载 onnxruntime 1\.22\.0$", show, re.MULTILINE), show
    assert "撤销 [1/" in screens["rollback"], screens["rollback"]


def test_the_step_lines_check_can_fail() -> None:
    assert _step_lines("ortfix: [1/4] uninstall onnxruntime 1.22.0\n1. [done] 卸载 x\nortfix: undo [2/4] y\n"
                       "     + onnxruntime-gpu 1.22.0\n") == [
        "ortfix: [1/4] uninstall onnxruntime 1.22.0", "1. [done] 卸载 x", "ortfix: undo [2/4] y"]


def test_a_refused_rollback_says_why_in_chinese(cpu_venv: Path, env: dict[str, str]) -> None:
    """A stashed file gone: rollback refuses, and the reasons the handlers give (check_undo) are Chinese too, not the
    English sentences inside a Chinese line; the journal's English is unchanged."""
    python = str(cpu_venv / "bin" / "python")
    applied = ortfix("apply", "--python", python, "--yes", "--json", env=env)
    assert applied.returncode == 0, applied.stderr[-3000:]
    tx_id = json.loads(applied.stdout)["transaction"]["id"]
    stash = cpu_venv / ".ortfix" / "transactions" / tx_id / "steps" / "1" / "stash"
    victim = next(p for p in stash.rglob("*.py") if p.name == "__init__.py")
    victim.unlink()
    refused = ortfix("rollback", "--python", python, "--yes", env=_in(env, "zh_CN.UTF-8"))
    assert refused.returncode != 0
    assert f"暂存区中缺少 {victim}" in refused.stderr and "missing from the stash" not in refused.stderr, \
        refused.stderr
