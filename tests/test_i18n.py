# ruff: noqa: RUF001  (Chinese text and its full-width punctuation are what this file tests)
"""Issue 25, phase 1: ortfix speaks the user's language (zh_CN) where it explains, and nothing a program reads changes.

The catalog is in step with the code (every marked string translated, placeholders kept, the shipped .mo a fresh
compile of the .po), the language is chosen as gettext chooses it (plus --lang / ORTFIX_LANG, and Windows' UI
language), a broken catalog means English, `--json` is byte-identical across locales, English output is byte for
byte what it was before catalogs existed (tests/data/i18n/seed_explain_en.txt was written by the code before this
change), and `explain` on the seeds' own messages prints no English sentence under LANG=zh_CN.UTF-8.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import shutil
import string
import subprocess
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

from clitools import NEUTRAL, REPO, run_ortfix
from ortfix import i18n
from ortfix.explain.message_os import message_os
from ortfix.system.windows.uilang import locale_name

DATA = Path(__file__).parent / "data" / "i18n"
PO = REPO / "src" / "ortfix" / "locale" / "zh_CN" / "LC_MESSAGES" / "ortfix.po"


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


compile_catalogs = _script("compile_catalogs")
extract_messages = _script("extract_messages")


@functools.cache
def _marked() -> dict[str, str]:
    found: dict[str, str] = extract_messages.messages()
    return found


def _catalog() -> dict[str, str]:
    entries: dict[str, str] = compile_catalogs.parse_po(PO.read_text(encoding="utf-8"), str(PO))
    return entries


def seed_messages() -> list[str]:
    return (DATA / "seed_messages.txt").read_text(encoding="utf-8").split("\n----\n")[1:]


# --- the catalog ----------------------------------------------------------------------------------------------------

def test_every_marked_string_has_a_chinese_translation() -> None:
    marked = _marked()
    catalog = _catalog()
    assert len(marked) > 240  # errors.yaml's 78 rows (title, cause, fix) and explain's own strings
    untranslated = [m for m in marked if not catalog.get(m)]
    assert not untranslated, untranslated[:5]
    stale = set(catalog) - set(marked) - {""}
    assert not stale, sorted(stale)[:5]


def test_the_yaml_keys_are_the_folded_text_the_program_looks_up() -> None:
    """errors.yaml's `>-` text is folded into one line: the catalog's keys are exactly what explain looks up."""
    from ortfix.explain.patterns import load_default_patterns

    catalog = _catalog()
    for p in load_default_patterns():
        assert catalog.get(p.title) and catalog.get(p.cause) and catalog.get(p.fix_source), p.id
        assert "\n" not in p.cause


def _placeholders(text: str) -> tuple[set[str], list[str]]:
    names = {field for _, field, _, _ in string.Formatter().parse(text) if field is not None}
    return names, sorted(re.findall(r"%[sdr]", text))


def test_placeholders_match_between_source_and_translation() -> None:
    yaml_keys = set(extract_messages.yaml_messages())
    formatted = {m for m in _marked() if m not in yaml_keys or "{msvc_remedy}" in m}
    for msgid, msgstr in _catalog().items():
        if not msgid:
            continue
        if msgid in formatted:
            assert _placeholders(msgid) == _placeholders(msgstr), (msgid, msgstr)
        else:  # shown as it is: its braces (`{...}` in a quoted message) are text, kept verbatim
            assert msgid.count("{") == msgstr.count("{"), (msgid, msgstr)


def test_the_shipped_mo_is_a_fresh_compile_of_the_po() -> None:
    mo = PO.with_suffix(".mo")
    assert mo.read_bytes() == compile_catalogs.mo_bytes(_catalog()), "run python scripts/compile_catalogs.py"
    assert compile_catalogs.main(["--check"]) == 0


def test_the_compiled_catalog_reads_back_with_the_standard_library(tmp_path: Path) -> None:
    import gettext

    entries = {"": "Content-Type: text/plain; charset=UTF-8\n", "a {x}": "甲 {x}", 'say "hi"\n': "说 \"你好\"\n"}
    mo = tmp_path / "t.mo"
    mo.write_bytes(compile_catalogs.mo_bytes(entries))
    with mo.open("rb") as fp:
        t = gettext.GNUTranslations(fp)
    assert t.gettext("a {x}") == "甲 {x}" and t.gettext('say "hi"\n') == "说 \"你好\"\n" and t.gettext("b") == "b"
    po = tmp_path / "t.po"
    po.write_text('msgid ""\nmsgstr "Content-Type: text/plain; charset=UTF-8\\n"\n\n#, fuzzy\nmsgid "f"\n'
                  'msgstr "模糊"\n\nmsgid "m"\n"ulti"\nmsgstr "多"\n"行"\n', encoding="utf-8")
    assert compile_catalogs.parse_po(po.read_text(encoding="utf-8")) == {
        "": "Content-Type: text/plain; charset=UTF-8\n", "multi": "多行"}  # a fuzzy entry is left out


def test_no_module_prints_an_unmarked_english_sentence(tmp_path: Path) -> None:
    """Every module of ortfix marks its English sentences for the catalog (`_`, `N_`, `tr`, `Msg`), or says on the
    line why one stays English (`# i18n: english`: a file ortfix writes, a fact saved with a check, a program run in
    the target). The detector is the one `scripts/extract_messages.py --unmarked` runs, and it finds a new one."""
    modules = sorted((REPO / "src" / "ortfix").rglob("*.py"))
    found = [(p.relative_to(REPO).as_posix(), line, text) for p in modules
             for line, text in extract_messages.unmarked(p)]
    assert not found, found
    assert len(modules) > 150
    sample = tmp_path / "sample.py"
    sample.write_text('def f() -> str:\n    return "the detector finds this sentence, which is not marked"\n'
                      'X = "this sentence is English on purpose, in a file"  # i18n: english\n')
    assert [line for line, _text in extract_messages.unmarked(sample)] == [2]  # the marked line 3 is let through


# --- choosing the language ------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("environ", "override", "chosen"), [
    ({"LANG": "zh_CN.UTF-8"}, None, "zh_CN"),
    ({"LANG": "zh_CN.utf8"}, None, "zh_CN"),
    ({"LC_ALL": "zh_CN.GB18030"}, None, "zh_CN"),
    ({"LANG": "zh_SG.UTF-8"}, None, "zh_CN"),
    ({"LANG": "zh"}, None, "zh_CN"),
    ({"LANG": "zh-Hans"}, None, "zh_CN"),
    ({"LANG": "zh_TW.UTF-8"}, None, "en"),  # Traditional Chinese: no catalog yet, English
    ({"LANG": "zh_HK.UTF-8"}, None, "en"),
    ({"LANG": "de_DE.UTF-8"}, None, "en"),  # unknown: English
    ({"LANG": "C"}, None, "en"),
    ({"LANG": "POSIX"}, None, "en"),
    ({"LANG": "C.UTF-8", "LANGUAGE": "zh_CN"}, None, "en"),  # GNU: LANGUAGE is ignored under the C locale
    ({"LANG": "en_US.UTF-8", "LANGUAGE": "zh_CN:en"}, None, "zh_CN"),  # LANGUAGE before LANG
    ({"LANG": "zh_CN.UTF-8", "LANGUAGE": "en:zh_CN"}, None, "en"),  # the first of the list wins
    ({"LANG": "en_US.UTF-8", "LANGUAGE": "de:zh_CN"}, None, "zh_CN"),  # the first with a catalog
    ({"LC_ALL": "C", "LANG": "zh_CN.UTF-8"}, None, "en"),  # LC_ALL before LANG
    ({"LC_MESSAGES": "zh_CN.UTF-8", "LANG": "C"}, None, "zh_CN"),
    ({"LC_ALL": "", "LANG": "zh_CN.UTF-8"}, None, "zh_CN"),  # empty means unset
    ({"LANG": "C", "ORTFIX_LANG": "zh_CN"}, None, "zh_CN"),  # ORTFIX_LANG over the locale
    ({"LANG": "zh_CN.UTF-8", "ORTFIX_LANG": "en"}, None, "en"),
    ({"LANG": "C", "ORTFIX_LANG": "zh_CN"}, "en", "en"),  # --lang over everything
    ({"LANG": "C"}, "zh_CN.UTF-8", "zh_CN"),
])
def test_the_language_is_chosen_as_gettext_does(environ: dict[str, str], override: str | None, chosen: str) -> None:
    assert i18n.choose(environ, override) == chosen


def test_a_language_name_is_never_a_path(tmp_path: Path) -> None:
    """ORTFIX_LANG=/some/folder must not load a catalog from that folder (Path joins an absolute name in place)."""
    folder = tmp_path / "lang"
    (folder / "LC_MESSAGES").mkdir(parents=True)
    shutil.copy(Path(i18n.LOCALE_DIR) / "zh_CN" / "LC_MESSAGES" / "ortfix.mo", folder / "LC_MESSAGES" / "ortfix.mo")
    assert i18n.choose({"ORTFIX_LANG": str(folder)}) == "en"
    assert i18n.choose({"LANG": "C"}, f"{folder}:zh_CN") == "zh_CN"


def test_english_answers_as_gettext_null_translations_without_importing_gettext() -> None:
    """English needs no catalog: its messages come back as gettext.NullTranslations returns them, and gettext
    (6M instructions of every English `check`) is not imported; a catalog language still loads through gettext."""
    script = ("import sys\n"
              "from ortfix import i18n\n"
              "i18n.set_language('en')\n"
              "answers = [i18n._('a line'), *(i18n.ngettext('one', 'many', n) for n in (0, 1, 2, -1))]\n"
              "english_only = 'gettext' not in sys.modules\n"
              "import gettext\n"
              "null = gettext.NullTranslations()\n"
              "print(english_only, answers == [null.gettext('a line'),\n"
              "      *(null.ngettext('one', 'many', n) for n in (0, 1, 2, -1))], i18n.set_language('zh_CN'))\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["True", "True", "zh_CN"]


def test_windows_ui_language_ids_are_named_as_locales() -> None:
    """GetUserDefaultUILanguage's ids (Windows' LANGID table): Simplified Chinese (PRC, Singapore), Traditional
    (Taiwan), US English."""
    assert [locale_name(i) for i in (0x0804, 0x1004, 0x0404, 0x0409)] == ["zh_CN", "zh_SG", "zh_TW", "en_US"]
    assert locale_name(0x7FFF) is None
    assert [i18n.normalize(n) for n in ("zh_CN", "zh_SG", "zh_TW", "en_US")] == ["zh_CN", "zh_CN", "zh_TW", "en"]


# --- what never changes with the language ---------------------------------------------------------------------------

def test_json_documents_are_byte_identical_across_locales() -> None:
    """check and plan (ortfix's own interpreter as the target: the probe, diagnosis and planning run for real) and
    explain."""
    python = sys.executable
    seeds = "\n".join(seed_messages())
    outputs: dict[str, list[str]] = {}
    for name, env, lang in (("C", {"LANG": "C"}, []), ("zh", {"LANG": "zh_CN.UTF-8", "LANGUAGE": "zh_CN"}, []),
                            ("--lang", {"LANG": "C"}, ["--lang", "zh_CN"])):
        check = run_ortfix(*lang, "check", "--python", python, "--json", "--fresh", env=env)
        explain = run_ortfix(*lang, "explain", "--no-check", "--json", seeds, env=env)
        plan = run_ortfix(*lang, "plan", "--python", python, "--json", env=env)
        assert explain.returncode == 0 and check.returncode in (0, 1), (check.stderr, explain.stderr)
        assert plan.returncode in (0, 1) and plan.stdout, plan.stderr
        created = re.sub(r'"created": "[^"]*"', '"created": ""', plan.stdout)  # the one field that is the time
        outputs[name] = [check.stdout, explain.stdout, created]
    assert all(out == outputs["C"] for out in outputs.values())
    assert re.search(r"[\u4e00-\u9fff]", "".join(outputs["C"])) is None
    assert '"title": "cuDNN 9, which onnxruntime-gpu 1.18.1 and later need, is not found"' in outputs["zh"][1]


UNRECOGNISED = "ValueError: operands could not be broadcast together\n"


def _explain_seeds(*args: str, env: dict[str, str]) -> str:
    """explain --no-check of the seeds' messages (one log of the Windows ones, one of the rest: an explanation follows
    the OS of the log) and of a message it does not know, with their exit codes."""
    windows = [m for m in seed_messages() if message_os(m) == "windows" or "MSVC" in m]
    others = [m for m in seed_messages() if m not in windows]
    out = []
    for message in ("\n".join(others), "\n".join(windows), UNRECOGNISED):
        proc = subprocess.run([sys.executable, "-m", "ortfix", *args, "explain", "--no-check"], input=message,
                              capture_output=True, text=True, encoding="utf-8", env={**_clean_env(), **env},
                              cwd=NEUTRAL, timeout=120, check=False)
        assert not proc.stderr, proc.stderr
        out.append(f"== exit {proc.returncode}\n{proc.stdout}")
    return "".join(out)


def _clean_env() -> dict[str, str]:
    drop = ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG", "ORTFIX_LANG", "VIRTUAL_ENV", "CONDA_PREFIX")
    return {k: v for k, v in os.environ.items() if k not in drop}


@pytest.mark.parametrize(("args", "env"), [
    ((), {"LANG": "C.UTF-8", "LANGUAGE": "zh_CN"}),
    (("--lang=en",), {"LANG": "zh_CN.UTF-8", "ORTFIX_LANG": "zh_CN"}),
], ids=["LANG=C", "--lang en"])
def test_english_is_byte_for_byte_what_it_was_before_catalogs(args: tuple[str, ...], env: dict[str, str]) -> None:
    assert _explain_seeds(*args, env=env) == (DATA / "seed_explain_en.txt").read_text(encoding="utf-8")


# --- explain in Chinese ---------------------------------------------------------------------------------------------

# Words that make an English sentence; a product, file or option name has none of them.
_ENGLISH_GLUE = re.compile(r"\b(?:the|is|are|was|and|not|of|to|that|which|with|this|it|be|no|or|on|in|by|from|its)\b",
                           re.IGNORECASE)


def english_sentences(line: str) -> list[str]:
    """The parts of a rendered line that read as English prose: what is left outside code spans (`...`), quoted
    messages ("..."), paths and URLs that has three or more of English's glue words."""
    prose = re.sub(r"`[^`]*`|\"[^\"]*\"|'[^']*'|\S*[/\\]\S*|https?://\S+", " ", line)
    parts = re.split(r"[。；：，（）]", prose)
    return [p.strip() for p in parts if len(_ENGLISH_GLUE.findall(p)) >= 3]


def test_the_english_sentence_check_can_fail() -> None:
    assert english_sentences("  原因：libcudnn.so.9 is part of cuDNN 9: the loader did not find it.")
    assert not english_sentences("  解决：运行 `pip install onnxruntime-gpu[cuda,cudnn]`，把 \"Failed to load the "
                                 "library\" 交给 `ortfix explain`，位于 C:\\Program Files\\NVIDIA\\cuda\\bin")


def test_explain_on_the_seeds_messages_is_all_chinese() -> None:
    zh = _explain_seeds(env={"LANG": "zh_CN.UTF-8"})
    english = (DATA / "seed_explain_en.txt").read_text(encoding="utf-8")
    assert zh.count("\n● ") == english.count("\n● ") >= 10 and zh.count("== exit 0") == english.count("== exit 0")
    for line in zh.splitlines():
        if not line.strip() or line.startswith("== exit") or line.startswith("  匹配"):  # the matched text is data
            continue
        assert re.search(r"[\u4e00-\u9fff]", line), line
        assert not english_sentences(line), (english_sentences(line), line)
    assert "cuDNN 9" in zh and "LD_LIBRARY_PATH" in zh and "`pip install onnxruntime-gpu[cuda,cudnn]`" in zh
    assert "[LIB002]" in zh and "[WIN002]" in zh  # finding codes as they are


# --- a missing or broken catalog ------------------------------------------------------------------------------------

_RUN_WITH_LOCALE = """
import sys
from pathlib import Path
import ortfix.i18n as i18n
i18n.LOCALE_DIR = Path(sys.argv[1])
sys.argv = ["ortfix", *sys.argv[2:]]
from ortfix.__main__ import entry
entry()
"""


def _broken_catalogs(tmp_path: Path) -> dict[str, Path]:
    good = PO.with_suffix(".mo").read_bytes()
    bad_placeholder = compile_catalogs.mo_bytes({**_catalog(), "  cause: {cause}": "  原因：{reason}"})
    cases = {"truncated": good[:40], "bad magic": b"\0" * 64, "missing": None,
             "wrong placeholder": bad_placeholder}
    out = {}
    for name, data in cases.items():
        folder = tmp_path / name.replace(" ", "_")
        (folder / "zh_CN" / "LC_MESSAGES").mkdir(parents=True)
        if data is not None:
            (folder / "zh_CN" / "LC_MESSAGES" / "ortfix.mo").write_bytes(data)
        out[name] = folder
    return out


def _run_with_locale(folder: Path, lang: str, message: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _RUN_WITH_LOCALE, str(folder), "explain", "--no-check"],
                          input=message, capture_output=True, text=True, encoding="utf-8", cwd=NEUTRAL,
                          env={**_clean_env(), "LANG": lang}, timeout=120, check=False)


def test_a_broken_catalog_means_english_and_never_fails_a_command(tmp_path: Path) -> None:
    seed = seed_messages()[0]
    english = _run_with_locale(PO.parents[2], "C", seed).stdout
    assert english.startswith("● cuDNN 9, which")
    assert "原因：" in _run_with_locale(PO.parents[2], "zh_CN.UTF-8", seed).stdout  # the shipped catalog is read
    for name, folder in _broken_catalogs(tmp_path).items():
        proc = _run_with_locale(folder, "zh_CN.UTF-8", seed)
        assert proc.returncode == 0 and not proc.stderr, (name, proc.stderr)
        if name == "wrong placeholder":  # the catalog is read: only the translation that does not fit is English
            assert "  cause: " in proc.stdout and "解决：" in proc.stdout, proc.stdout
        else:
            assert proc.stdout == english, name


# --- the package ships the catalogs ---------------------------------------------------------------------------------

@pytest.mark.slow
def test_the_wheel_built_from_the_repo_ships_the_catalog(tmp_path: Path) -> None:
    src = tmp_path / "checkout"
    for part in ("src", "compat"):
        shutil.copytree(REPO / part, src / part, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", ".gitignore"):
        shutil.copy2(REPO / name, src / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "dist"), str(src)],
                   check=True, capture_output=True, timeout=600)
    wheel = next((tmp_path / "dist").glob("ortfix-*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        mo = zf.read("ortfix/locale/zh_CN/LC_MESSAGES/ortfix.mo")
    assert "ortfix/locale/zh_CN/LC_MESSAGES/ortfix.po" in names
    assert mo == PO.with_suffix(".mo").read_bytes()


def test_explain_names_its_target_in_the_users_language() -> None:
    """With the machine checked (ortfix's own interpreter as the target), the target line is translated too; under
    LANG=C it is the line every command prints."""
    lines = {}
    for lang in ("zh_CN.UTF-8", "C"):
        proc = run_ortfix("explain", "--python", sys.executable, "libcudnn.so.9: cannot open shared object file",
                          env={"LANG": lang, "LANGUAGE": ""})
        assert proc.returncode == 0, proc.stderr
        lines[lang] = proc.stdout.splitlines()[0]
    assert lines["zh_CN.UTF-8"].startswith(f"目标 {sys.executable}（Python "), lines
    assert lines["C"].startswith(f"target {sys.executable} (Python "), lines


# --- the check, plan, verify, tune and export screens (phase 2) -----------------------------------------------------

def test_display_width_of_ascii_is_its_length_as_unicodedata_says() -> None:
    """ASCII text is measured without `unicodedata` (a library to load on a check's path): the same columns."""
    import unicodedata

    for code in range(128):
        char = chr(code)
        said = 0 if unicodedata.combining(char) else 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
        assert i18n.display_width(char) == said == 1, code
    assert i18n.display_width("onnxruntime 1.22.0\tx") == 20


def test_display_width_counts_chinese_as_two_columns() -> None:
    assert [i18n.display_width(t) for t in ("system", "系统", "加载器", "onnxruntime", "驱动：x", "e\u0301")] == [
        6, 4, 6, 11, 7, 1]
    assert i18n.pad("系统", 12) == "系统" + " " * 8 and i18n.pad("system", 12) == "system      "
    assert i18n.pad("加载", 8, right=True) == "    加载" and i18n.pad("onnxruntime-gpu", 4) == "onnxruntime-gpu"


def _screen(*args: str, lang: str) -> str:
    proc = run_ortfix(*args, "--python", sys.executable, env={"LANG": lang, "LANGUAGE": "", "ORTFIX_LANG": ""})
    assert proc.returncode in (0, 1) and not proc.stderr, proc.stderr
    return proc.stdout


def test_check_and_plan_screens_speak_chinese() -> None:
    """check and plan on ortfix's own interpreter (the probe, diagnosis and planning run for real) under
    LANG=zh_CN.UTF-8: the renderers' labels and sentences are Chinese, their English gone; under LANG=C English."""
    check = _screen("check", "--fresh", lang="zh_CN.UTF-8")
    lines = check.splitlines()
    for label in ("系统", "驱动", "加载器"):
        assert any(line.startswith(label + " ") for line in lines), (label, check)
    assert re.search(r"^\d+ 个错误，\d+ 个警告。`ortfix plan` 会列出|^GPU 路径看起来正常。$", check, re.MULTILINE)
    for label in ("system ", "driver ", "loader "):
        assert not any(line.startswith(label) for line in lines), label
    for english in ("error(s)", "    fix: ", "The GPU path looks healthy"):
        assert english not in check, english
    assert "LD_LIBRARY_PATH=" in check or "PATH=" in check  # the variable's name as it is
    plan = _screen("plan", lang="zh_CN.UTF-8")
    assert "计划：新增 " in plan and "指纹 " in plan, plan
    assert "Plan: " not in plan and "Fingerprint" not in plan and "Nothing has been changed" not in plan
    english = _screen("check", "--fresh", lang="C")
    assert english.splitlines()[1].startswith("system      ") and "计" not in _screen("plan", lang="C")


def test_the_check_screens_columns_line_up_in_chinese() -> None:
    """The stack rows' values start in one terminal column in Chinese as in English: labels are padded by display
    width (a Chinese character takes two columns), not by characters."""
    for lang in ("zh_CN.UTF-8", "C"):
        rows = _screen("check", "--fresh", lang=lang).splitlines()[1:4]  # system, driver, onnxruntime
        starts = {i18n.display_width(re.match(r"\S+\s+", row).group(0)) for row in rows}  # type: ignore[union-attr]
        assert starts == {12}, (lang, rows)


def test_verify_screen_speaks_chinese_in_aligned_columns() -> None:
    """verify on ortfix's own interpreter (no onnxruntime there: level 1 fails, 2 and 3 do not run): the target line,
    level titles, marks and verdict lines are Chinese, and each level's verdict starts in the same terminal column
    (31) in Chinese as in English."""
    if importlib.util.find_spec("onnxruntime") is not None:
        pytest.skip("ortfix's own environment has onnxruntime: the verdicts this test reads are not printed")
    for lang in ("zh_CN.UTF-8", "C"):
        proc = run_ortfix("verify", "--python", sys.executable, env={"LANG": lang, "LANGUAGE": "", "ORTFIX_LANG": ""})
        assert proc.returncode in (0, 1, 3) and not proc.stderr, proc.stderr
        rows = [line for line in proc.stdout.splitlines() if re.match(r"[123]\. ", line)]
        assert len(rows) == 3, proc.stdout
        marks = [re.search(r"(?:✓|✗|-) \S+(?: run)?\s+", row[3:]) for row in rows]  # the verdict follows its mark
        verdicts = [3 + m.end() for m in marks if m is not None]
        assert len(verdicts) == 3 and all("onnxruntime" in row[i:] for row, i in zip(rows, verdicts)), rows
        assert {i18n.display_width(row[:i]) for row, i in zip(rows, verdicts)} == {31}, (lang, rows)
        if lang == "C":
            assert "libraries load" in proc.stdout and proc.stdout.startswith("target ")
        else:
            assert "库能加载" in proc.stdout and "第 1 级" in proc.stdout and proc.stdout.startswith("目标 ")
            assert "libraries load" not in proc.stdout and "Failed:" not in proc.stdout and "not run" not in proc.stdout


# --- the matrix screen and plan --output (phase 3) ------------------------------------------------------------------

def test_the_matrix_screen_speaks_chinese_in_the_english_columns() -> None:
    """`matrix show`: the headings are Chinese and each column starts in the terminal column it starts in English."""
    screens = {}
    for lang in ("zh_CN.UTF-8", "C"):
        proc = run_ortfix("matrix", "show", env={"LANG": lang, "LANGUAGE": "", "ORTFIX_LANG": ""})
        assert proc.returncode == 0 and not proc.stderr, proc.stderr
        screens[lang] = proc.stdout
    zh, en = screens["zh_CN.UTF-8"].splitlines(), screens["C"].splitlines()
    assert zh[0].startswith("兼容性矩阵 ") and en[0].startswith("compatibility matrix ")
    for zh_word, en_word in (("需要的库", "needs"), ("驱动（Windows）", "driver (Windows)"), ("wheel", "wheels")):
        [zh_row] = [row for row in zh if zh_word in row and row.startswith(("ONNX Runtime", "CUDA"))]
        [en_row] = [row for row in en if en_word in row and row.startswith(("ONNX Runtime", "CUDA"))]
        assert i18n.display_width(zh_row[:zh_row.rindex(zh_word)]) == en_row.rindex(en_word), (zh_row, en_row)
    assert "  用于 CUDA 12 的 cuDNN 9：nvidia-cudnn-cu12~=9.0" in zh
    for english in ("compatibility matrix", "cuDNN wheels:", "driver (Linux)", " for CUDA "):
        assert english not in screens["zh_CN.UTF-8"], english


def test_plan_output_says_where_it_saved_in_chinese(tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    proc = run_ortfix("plan", "--python", sys.executable, "--output", str(out),
                      env={"LANG": "zh_CN.UTF-8", "LANGUAGE": "", "ORTFIX_LANG": ""})
    assert proc.returncode in (0, 1) and out.is_file(), proc.stderr
    assert f"已保存到 {out}。" in proc.stdout and "Saved to" not in proc.stdout
