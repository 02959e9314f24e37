"""Issue 25, the findings in the user's language: every summary, evidence line and fix that `check` (and plan's
"needs you" lines) print is a marked English string or an `i18n.Msg`: English in `--json` and saved files, Chinese on
the terminal under zh_CN. Also the messages of fields.py (saved JSON read back) and compat/ (the matrix files).

Fast: `check` runs for real (subprocess) on ortfix's own interpreter with hermetic package folders put on its
PYTHONPATH (dist-infos written here, a fake onnxruntime-gpu wheel unpacked, gcc stub libraries): no venv, no pip. The
broad sweep over finding codes renders the findings of the recorded environments (tests/data/facts/) under drivers,
GPUs and changes that reach the other codes."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from clitools import REPO, run_ortfix
from factsdata import load_facts, recorded
from ortfix import i18n
from ortfix.check.diagnose import diagnose
from ortfix.check.facts import Facts
from ortfix.check.findings import Finding, finding_json
from ortfix.check.windows import windows_findings
from ortfix.cli.render import render_findings
from ortfix.compat.load import load_matrix
from ortfix.fields import BadField, requirement, want_str
from ortfix.system.driver import DriverFacts, overridden_driver
from ortfix.system.inventory import ORIGIN_TORCH, LibCopy
from ortfix.system.windows.facts import DllAt, LoginDifference
from ortfix.target.probe import TorchInfo
from support.fixtures import build_stub_lib, fake_ort_cpu_wheel, fake_ort_gpu_wheel
from test_i18n import english_sentences, extract_messages

SRC = REPO / "src" / "ortfix"
AREA = sorted([*(SRC / "check").glob("*.py"), SRC / "fields.py", *(SRC / "compat").glob("*.py")])
MATRIX = load_matrix()
_FINDING_LINE = re.compile(r"^[✗!i] [A-Z]+\d{3} ")
_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)")
ZH_ERROR = "ortfix: \u9519\u8bef\uff1a"  # the zh_CN error prefix


def test_the_findings_modules_have_no_unmarked_english() -> None:
    """Every English sentence in check/, fields.py and compat/ is marked for the catalog (or says why it stays
    English with `# i18n: english`): the findings, BadField's and the matrix files' messages."""
    assert len(AREA) > 20
    left = {str(p.relative_to(REPO)): extract_messages.unmarked(p) for p in AREA}
    assert not {k: v for k, v in left.items() if v}, {k: v for k, v in left.items() if v}


# ---------------------------------------------------------------------------------------------------------------------
# check, for real, on hermetic package folders
# ---------------------------------------------------------------------------------------------------------------------


def _dist_info(folder: Path, name: str, version: str, *, installer: str | None = "pip",
               record: Sequence[str] | None = None, requires: Sequence[str] = ()) -> None:
    info = folder / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                                   + "".join(f"Requires-Dist: {r}\n" for r in requires), encoding="utf-8")
    if installer is not None:
        (info / "INSTALLER").write_text(f"{installer}\n", encoding="utf-8")
    if record is not None:
        (info / "RECORD").write_text("".join(f"{r}\n" for r in record), encoding="utf-8")


def _damaged_cpu_layout(folder: Path) -> Path:
    """The CPU package cut short before its RECORD (ORT002, ORT007), another ONNX Runtime build beside it (ORT004),
    an NVIDIA wheel whose library is gone (LIB007), a package that pulls the CPU package back (ORT005)."""
    (folder / "onnxruntime").mkdir(parents=True)
    (folder / "onnxruntime" / "__init__.py").write_text("", encoding="utf-8")
    _dist_info(folder, "onnxruntime", "1.22.0")
    _dist_info(folder, "onnxruntime-directml", "1.20.0", installer=None, record=[])
    _dist_info(folder, "nvidia-cublas-cu12", "12.9.1.4", record=["nvidia/cublas/lib/libcublas.so.12,sha256=x,1234"])
    _dist_info(folder, "textpipe", "1.0", requires=["onnxruntime>=1.16"])
    return folder


def _gpu_layout(folder: Path, *, version: str, torch_cuda: str | None, tensorrt: bool = False) -> Path:
    """A fake onnxruntime-gpu wheel unpacked as pip would lay it out (its RECORD intact; with the TensorRT provider
    when `tensorrt`), and torch built for `torch_cuda`."""
    with zipfile.ZipFile(fake_ort_gpu_wheel(folder.parent / "wheels", version=version, tensorrt=tensorrt)) as wheel:
        wheel.extractall(folder)
    _dist_info(folder, "onnxruntime-genai", "0.8.2", installer=None, record=[])  # the CPU genai: GENAI001
    if tensorrt:  # TensorRT built for CUDA 13 beside a CUDA 12 build: TRT004
        _dist_info(folder, "tensorrt-cu13-libs", "10.13.3.9", installer=None, record=[])
    if torch_cuda:
        (folder / "torch").mkdir()
        (folder / "torch" / "__init__.py").write_text("", encoding="utf-8")
        (folder / "torch" / "version.py").write_text(f"__version__ = '2.3.0'\ncuda = '{torch_cuda}'\n",
                                                     encoding="utf-8")
    return folder


def _both_builds_layout(folder: Path) -> Path:
    """The GPU and then the CPU wheel unpacked into one folder (ORT003: the CPU package's files won)."""
    for make in (fake_ort_gpu_wheel, fake_ort_cpu_wheel):
        with zipfile.ZipFile(make(folder.parent / "wheels-both")) as wheel:
            wheel.extractall(folder)
    return folder


def _gpu_without_provider_layout(folder: Path) -> Path:
    """onnxruntime-gpu's metadata and package, but no CUDA provider library in onnxruntime/capi (ORT006)."""
    (folder / "onnxruntime" / "capi").mkdir(parents=True)
    (folder / "onnxruntime" / "__init__.py").write_text("", encoding="utf-8")
    _dist_info(folder, "onnxruntime-gpu", "1.22.0", installer=None, record=[])
    return folder


def _outside_libraries(folder: Path) -> Path:
    """A folder for LD_LIBRARY_PATH: CUDA 13's runtime where 12's is needed (LIB003), and a cuBLASLt file without its
    SONAME link (LIB005; installed but not findable: LIB002)."""
    folder.mkdir(parents=True)
    build_stub_lib(folder / "libcudart.so.13", soname="libcudart.so.13")
    build_stub_lib(folder / "libcublasLt.so.12.9.1.4", soname="libcublasLt.so.12")
    return folder


Situations = dict[str, tuple[list[str], dict[str, str]]]


@pytest.fixture(scope="module")
def situations(tmp_path_factory: pytest.TempPathFactory) -> Situations:
    """name → (check's arguments, its environment) for each hermetic situation."""
    root = tmp_path_factory.mktemp("i18n-check")
    outside = _outside_libraries(root / "outside")
    return {
        "damaged-cpu": ([], {"PYTHONPATH": str(_damaged_cpu_layout(root / "cpu"))}),
        "gpu-old-driver": (["--driver", "470.57.02", "--compute-capability", "3.5"],
                           {"PYTHONPATH": str(_gpu_layout(root / "gpu", version="1.22.0", torch_cuda="11.8")),
                            "LD_LIBRARY_PATH": str(outside)}),
        "unknown-build": (["--driver", "580.65.06", "--compute-capability", "8.6", "--with", "tensorrt"],
                          {"PYTHONPATH": str(_gpu_layout(root / "new", version="1.99.0", torch_cuda=None,
                                                           tensorrt=True))}),
        "both-builds": (["--driver", "580.65.06"], {"PYTHONPATH": str(_both_builds_layout(root / "both"))}),
        "no-provider": (["--driver", "580.65.06"], {"PYTHONPATH": str(_gpu_without_provider_layout(root / "bare"))}),
    }


# What each situation must show, whatever CUDA libraries the machine has (so the test reads the findings it means to).
EXPECTED = {
    "damaged-cpu": {"ORT002", "ORT004", "ORT005", "ORT007", "LIB007"},
    "gpu-old-driver": {"DRV002", "GPU001", "LIB005", "TORCH001", "GENAI001"},
    "unknown-build": {"MTX001", "TRT001", "TRT004"},
    "both-builds": {"ORT003"},
    "no-provider": {"ORT006"},
}


def _check(args: Sequence[str], env: dict[str, str], lang: str, *extra: str) -> str:
    proc = run_ortfix("check", "--python", sys.executable, "--fresh", *args, *extra,
                      env={**env, "ORTFIX_LANG": lang})
    assert proc.returncode in (0, 1) and not proc.stderr, proc.stderr
    return proc.stdout


def _findings_block(screen: str) -> list[str]:
    """The check screen's findings: from the first finding line to the blank line after the last."""
    lines = screen.splitlines()
    start = next(i for i, line in enumerate(lines) if _FINDING_LINE.match(line))
    end = lines.index("", start)
    return lines[start:end]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_check_speaks_chinese_in_its_findings(name: str, situations: Situations) -> None:
    """Under ORTFIX_LANG=zh_CN, every finding's summary, evidence and fix reads as Chinese; codes, paths, versions and
    commands stay as they are."""
    args, env = situations[name]
    found = {f["code"] for f in json.loads(_check(args, env, "en", "--json"))["findings"]}
    assert EXPECTED[name] <= found, (name, found)
    block = _findings_block(_check(args, env, "zh_CN"))
    assert len(block) >= 3 * len(found)
    for line in block:
        assert not english_sentences(line), (english_sentences(line), line)
    summaries = [line for line in block if _FINDING_LINE.match(line)]
    assert len(summaries) == len(found) and all(re.search(r"[\u4e00-\u9fff]", s) for s in summaries), summaries


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_check_json_is_the_same_in_every_language(name: str, situations: Situations) -> None:
    """`check --json` is data: byte for byte the same under zh_CN and en, its words English; and the English screen
    prints exactly the words the JSON holds."""
    args, env = situations[name]
    en, zh = (_check(args, env, lang, "--json") for lang in ("en", "zh_CN"))
    assert zh == en
    assert not re.search(r"[\u4e00-\u9fff]", en)
    screen = _check(args, env, "en")
    for f in json.loads(en)["findings"]:
        assert f"{f['code']} {f['severity']}: {f['summary']}" in screen
        assert all(f"    {e}" in screen for e in f["evidence"]) and f"    fix: {f['fix']}" in screen


def test_plan_says_what_needs_you_in_chinese(situations: Situations) -> None:
    """plan's "needs you" block (the findings no change fixes: the damaged wheels, no driver) in Chinese; `plan
    --json` the same bytes in both languages (but for the time it was made)."""
    args, env = situations["damaged-cpu"]
    screens = {lang: run_ortfix("plan", "--python", sys.executable, *args, env={**env, "ORTFIX_LANG": lang})
               for lang in ("en", "zh_CN")}
    assert all(p.returncode in (0, 1) and not p.stderr for p in screens.values()), screens
    lines = screens["zh_CN"].stdout.splitlines()
    block = lines[lines.index(_zh("Not fixed by this plan (needs you):")) + 1:]
    block = block[:block.index("")]
    assert {line.split()[0] for line in block if not line.startswith("      ")} >= {"LIB007", "ORT007", "DRV001"}
    for line in block:
        assert not english_sentences(line), (english_sentences(line), line)
    en, zh = (re.sub(_TIMESTAMP, "TIME", run_ortfix("plan", "--python", sys.executable, "--json", *args,
                                                    env={**env, "ORTFIX_LANG": lang}).stdout)
              for lang in ("en", "zh_CN"))
    assert zh == en and "LIB007" in en and not re.search(r"[\u4e00-\u9fff]", en)


@pytest.mark.parametrize(("change", "english"), [
    (("schema_version: 1", "schema_version: 99"), "schema_version 99 is not supported (this ortfix reads 1) "
                                                  "(upgrade ortfix or use a matching matrix)"),
    (('versions: ["1.11.0", "1.11.1"]', 'versions: ["1.11.0", "1.11.0"]'), "onnxruntime-gpu 1.11.0 (CUDA 11, default "
                                                                            "index) is already in row 1"),
])
def test_matrix_file_errors_speak_chinese(tmp_path: Path, change: tuple[str, str], english: str) -> None:
    """A broken matrix file (ORTFIX_COMPAT_DIR): the one-line error in Chinese on stderr (the file, its line and the
    values as they are), in English as before, and the `--json` error envelope the same bytes in both languages."""
    compat = tmp_path / "compat"
    compat.mkdir()
    for f in (REPO / "compat").glob("*.yaml"):
        text = f.read_text(encoding="utf-8")
        (compat / f.name).write_text(text.replace(*change, 1) if f.name == "ort.yaml" else text, encoding="utf-8")
    bad = compat / "ort.yaml"

    def show(lang: str, *json: str) -> subprocess.CompletedProcess[str]:
        proc = run_ortfix("matrix", "show", *json, env={"ORTFIX_LANG": lang, "ORTFIX_COMPAT_DIR": str(compat)})
        assert proc.returncode == 2, proc
        return proc

    en = show("en").stderr.strip()
    assert en.startswith(f"ortfix: error: {bad}:") and en.endswith(english), en
    zh = show("zh_CN").stderr.strip()
    assert zh.startswith(f"{ZH_ERROR}{bad}:") and re.search(r"[\u4e00-\u9fff]", zh), zh
    assert not english_sentences(zh.removeprefix(ZH_ERROR)), zh
    en_json, zh_json = (show(lang, "--json").stdout for lang in ("en", "zh_CN"))
    error = json.loads(en_json)["error"]
    assert zh_json == en_json and english.startswith(error["message"].split(": ", 1)[1]), error


def test_a_bad_saved_field_says_so_in_english_and_in_chinese() -> None:
    """BadField (a saved plan's or journal's field of the wrong type): its str() the English line it always was (the
    journals, the error envelope), its `message` translated where it is printed for people."""
    with pytest.raises(BadField) as caught:
        want_str({"summary": 7}, "summary", limit=80, where="action 3")
    assert str(caught.value) == "action 3 field 'summary' is not a string of at most 80 characters"
    assert _zh(caught.value.message) == "action 3 的字段 'summary' 不是不超过 80 个字符的字符串"
    with pytest.raises(BadField) as caught:
        requirement("numpy @ https://example.invalid/numpy.whl")
    assert str(caught.value) == ("'numpy @ https://example.invalid/numpy.whl' is not a plain requirement (a name and "
                                 "version specifiers only)")


def _zh(message: str | i18n.Msg) -> str:
    """`message` as printed under zh_CN (a plain string as a catalog key)."""
    try:
        i18n.set_language("zh_CN")
        return i18n.text(message)
    finally:
        i18n.set_language()


# ---------------------------------------------------------------------------------------------------------------------
# the sweep: recorded environments, and changes that reach the other codes
# ---------------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Unfinished:
    """An interrupted transaction as check/facts.py's UnfinishedTransaction describes it."""

    id: str
    status: None
    created: str
    steps_started: int
    steps_total: int
    folder: str
    error: str | None


def _variants(facts: Facts) -> Iterator[Facts]:
    """`facts` under drivers and GPUs of every band, and changed to show what a recorded environment does not."""
    for driver, capability in ((None, None), ("470.57.02", "3.5"), ("525.60.13", "7.0"), ("580.65.06", "8.6")):
        yield dataclasses.replace(facts, driver=overridden_driver(driver, capability, facts.driver)) if driver \
            else facts
    yield dataclasses.replace(facts, driver=DriverFacts(present=True, version="550.54.14",
                                                        kernel_module="535.104.05", userspace="550.54.14",
                                                        libcuda="/usr/lib/x86_64-linux-gnu/libcuda.so.1",
                                                        source="/proc/driver/nvidia/version"))
    yield dataclasses.replace(facts, loader=dataclasses.replace(facts.loader, unreadable=("/opt/locked/lib",)),
                              interrupted=(_Unfinished("20261126-1", None, "2026-11-26T10:00:00", 1, 3,
                                                       f"{facts.probe.prefix}/.ortfix/transactions/20261126-1",
                                                       "journal.json: not JSON"),))
    cudnn = LibCopy("/opt/cudnn/lib/libcudnn.so.9", "cudnn", "libcudnn.so.9", 9, "9.1.0", "LD_LIBRARY_PATH", False)
    torch = TorchInfo(f"{facts.probe.prefix}/lib/torch", "2.3.0", "11.8", f"{facts.probe.prefix}/lib/torch/lib", ())
    yield dataclasses.replace(facts, libraries=(*facts.libraries, cudnn),
                              probe=dataclasses.replace(facts.probe, torch=torch))


def _sweep() -> list[Finding]:
    out: dict[tuple[str, str], Finding] = {}
    for name in recorded():
        for facts in _variants(load_facts(name)):
            for f in diagnose(facts, MATRIX):
                out.setdefault((f.code, str(f.summary)), f)
    return list(out.values())


def _assert_chinese_and_english(findings: Sequence[Finding]) -> None:
    """`findings` rendered under zh_CN: no English sentence in any line; under English, each line is exactly the
    finding's JSON words (the English screen did not change)."""
    try:
        i18n.set_language("zh_CN")
        chinese = render_findings(findings)
        i18n.set_language("en")
        english = render_findings(findings)
    finally:
        i18n.set_language()
    for line in chinese:
        assert not english_sentences(line), (english_sentences(line), line)
    expected = []
    for f in findings:
        doc = finding_json(f)
        expected += [f"{doc['summary']}", *(f"    {e}" for e in doc["evidence"]), f"    fix: {doc['fix']}"]
    assert [re.sub(r"^[✗!i] [A-Z]+\d{3} \w+: ", "", line) for line in english] == expected


def test_every_finding_of_the_sweep_speaks_chinese() -> None:
    """The findings of the recorded environments (and their changes), in Chinese and in English."""
    findings = _sweep()
    codes = {f.code for f in findings}
    assert {"ORT001", "ORT002", "DRV001", "DRV002", "DRV003", "GPU001", "LIB001", "LIB002", "LIB003", "LIB004",
            "LIB006", "LIB009", "TX001", "TORCH001"} <= codes, codes
    _assert_chinese_and_english(findings)


def test_the_windows_findings_speak_chinese(tmp_path: Path) -> None:
    """WIN001-WIN004 (an old, a missing and an unversioned MSVC runtime; cuDNN 8 without zlibwapi.dll; a DLL only in
    torch\\lib; a DLL a new login finds elsewhere), in Chinese and in English."""
    from test_windows_check import _facts, _windows

    system32 = "C:\\Windows\\System32\\msvcp140.dll"
    runtimes = [DllAt("msvcp140.dll", system32, "System32", (14, 29, 30133, 0)),
                DllAt("msvcp140.dll", None, None, None, ("C:\\py", "C:\\Windows\\System32")),
                DllAt("msvcp140.dll", system32, "System32", None)]
    later = (LoginDifference("cudnn64_9.dll", None, "C:\\cudnn\\bin\\cudnn64_9.dll"),)
    torch_copy = LibCopy("C:\\py\\Lib\\site-packages\\torch\\lib\\cublas64_12.dll", "cublas", "cublas64_12.dll", 12,
                         "12.1.3.1", ORIGIN_TORCH, True)
    findings: list[Finding] = []
    for facts in (*(_facts(tmp_path, _windows(r)) for r in runtimes),
                  _facts(tmp_path, _windows(runtimes[0], later), cudnn="8.9.2.26"),
                  _facts(tmp_path, _windows(runtimes[0]), missing=("cublas64_12.dll",), libraries=(torch_copy,))):
        findings += windows_findings(facts, facts.ort[0])
    assert {"WIN001", "WIN002", "WIN003", "WIN004"} <= {f.code for f in findings}, findings
    _assert_chinese_and_english(findings)
