"""`ortfix explain`: compat/errors.yaml validates, every real-world example is recognised by its own pattern, and
unrelated text is left alone."""

from __future__ import annotations

import copy
import datetime
import functools
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from ortfix.compat.schemas import ERROR_PATTERNS_SCHEMA, SCHEMAS
from ortfix.compat.validate import check_schema, schema_errors
from ortfix.errors import OrtfixError
from ortfix.explain.analyses import ANALYSES
from ortfix.explain.patterns import (
    FINDING_CODES,
    Explanation,
    Pattern,
    explain_text,
    explanation_to_dict,
    load_default_patterns,
    load_patterns,
    read_patterns_document,
)

REPO = Path(__file__).resolve().parents[1]
ERRORS_YAML = REPO / "compat" / "errors.yaml"


def _doc() -> dict[str, Any]:
    doc = yaml.safe_load(ERRORS_YAML.read_text(encoding="utf-8"))
    assert isinstance(doc, dict)
    return doc


DOC = _doc()
ROWS: list[dict[str, Any]] = DOC["patterns"]
EXAMPLES = [
    pytest.param(row["id"], row["finding"], example, id=f"{row['id']}-{n}")
    for row in ROWS
    for n, example in enumerate(row["examples"])
]


@pytest.fixture(scope="module")
def patterns() -> list[Pattern]:
    return load_default_patterns()


def _ids(text: str, patterns: list[Pattern]) -> list[str]:
    return [e.pattern_id for e in explain_text(text, patterns)]


# --- the data file -------------------------------------------------------------------------------------------------


def test_errors_yaml_validates_against_the_schema() -> None:
    for schema in SCHEMAS.values():
        check_schema(schema)
    assert schema_errors(ERROR_PATTERNS_SCHEMA, DOC) == []


def test_header() -> None:
    """errors.yaml starts with its header; the data_version ortfix loads is the one that line says, and it is a real
    day (the scripts stamp it with the day they run)."""
    head = ERRORS_YAML.read_text(encoding="utf-8").splitlines()[:3]
    assert head[:2] == ["schema_version: 1", "kind: error-patterns"]
    stamp = re.fullmatch(r'data_version: "(?P<day>[^"]*)"', head[2])
    assert stamp is not None, head[2]
    assert read_patterns_document(ERRORS_YAML)["data_version"] == stamp.group("day")
    datetime.datetime.strptime(stamp.group("day"), "%Y.%m.%d")  # raises for 2026.13.45 as for 2026-11-23


@pytest.mark.parametrize("stamp", ["2026-11-23", "2026.11.3", "26.11.23", 20261123, None])
def test_a_data_version_that_is_no_day_is_refused(tmp_path: Path, stamp: object) -> None:
    path = tmp_path / "errors.yaml"
    path.write_text(yaml.safe_dump({**DOC, "data_version": stamp}), encoding="utf-8")
    with pytest.raises(OrtfixError, match="data_version"):
        read_patterns_document(path)


def test_at_least_twenty_distinct_patterns(patterns: list[Pattern]) -> None:
    ids = [p.id for p in patterns]
    assert len(ids) == len(set(ids)) == len(ROWS)
    assert len(ids) >= 20
    assert len({p.regex.pattern for p in patterns}) == len(ids)


def test_finding_codes_are_the_readme_ones() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| ([A-Z]+\d{3}) \|", readme, flags=re.MULTILINE))
    assert documented == set(FINDING_CODES)
    for row in ROWS:
        assert row["finding"] is None or row["finding"] in documented, row["id"]


def test_every_row_cites_a_source_and_has_real_examples() -> None:
    for row in ROWS:
        assert row["source"].strip(), row["id"]
        assert row["examples"] and all(e.strip() for e in row["examples"]), row["id"]


def test_the_seed_messages_are_covered(patterns: list[Pattern]) -> None:
    seeds = {
        "libcudnn.so.9: cannot open shared object file": "cudnn9-not-found",
        "Failed to create CUDAExecutionProvider. Require cuDNN 9.* and CUDA 12.*": "cuda-provider-not-created-require",
        'Error loading "...onnxruntime_providers_cuda.dll" which depends on "cublas64_12.dll" which is missing.':
            "windows-dependency-dll-missing",
        "Could not locate zlibwapi.dll. Please make sure it is in your library path!": "cudnn8-zlibwapi-missing",
        "Could not load library libcudnn_cnn_train.so.8": "cudnn8-sublibrary-load-failed",
        "GET was unable to find an engine to execute this computation": "cudnn-engine-not-found",
        "['AzureExecutionProvider', 'CPUExecutionProvider']": "providers-only-azure-and-cpu",
    }
    for text, pid in seeds.items():
        assert pid in _ids(text, patterns), text


# --- every example is recognised by its own pattern ----------------------------------------------------------------


@pytest.mark.parametrize(("pattern_id", "finding", "example"), EXAMPLES)
def test_example_is_recognised(patterns: list[Pattern], pattern_id: str, finding: str | None, example: str) -> None:
    hits = {e.pattern_id: e for e in explain_text(example, patterns)}
    assert pattern_id in hits, f"{pattern_id} does not match its own example; matched: {sorted(hits)}"
    e = hits[pattern_id]
    assert e.finding == finding
    assert e.title and e.cause and e.fix
    assert e.matched and e.line >= 1


# --- unrelated text ------------------------------------------------------------------------------------------------

UNRELATED = {
    "hello": "hello world",
    "empty": "",
    "numpy-traceback": (
        "Traceback (most recent call last):\n"
        '  File "/home/u/x.py", line 3, in <module>\n'
        "    a = np.zeros((2, 3)) + np.zeros((4,))\n"
        "ValueError: operands could not be broadcast together with shapes (2,3) (4,) \n"
    ),
    "numpy-version": "numpy 2.1.3 installed; import numpy as np; np.__version__ == '2.1.3'",
    "pip-resolver": (
        "ERROR: Cannot install onnxruntime-gpu==1.19.2 and numpy==2.1.0 because these package versions have "
        "conflicting dependencies.\n\nThe conflict is caused by:\n    The user requested numpy==2.1.0\n"
        "    onnxruntime-gpu 1.19.2 depends on numpy<2.0 and >=1.21.6\n\n"
        "ERROR: ResolutionImpossible: for help visit "
        "https://pip.pypa.io/en/latest/topics/dependency-resolution/#dealing-with-dependency-conflicts\n"
    ),
    "pip-other-package": "ERROR: Could not find a version that satisfies the requirement torch==2.0.0 "
                         "(from versions: 2.2.0, 2.2.1)\nERROR: No matching distribution found for torch==2.0.0",
    "ort-info-log": "[I:onnxruntime:, transformer_memcpy.cc:329 AddCopyNode] Add MemcpyFromHost after input_ids "
                    "for CUDAExecutionProvider",
    "healthy-providers": "['TensorrtExecutionProvider', 'CUDAExecutionProvider', 'AzureExecutionProvider', "
                         "'CPUExecutionProvider']",
    "nvidia-smi": "| NVIDIA-SMI 535.104.12             Driver Version: 535.104.12   CUDA Version: 12.2     |",
    "ldd-resolved": "\tlibcudnn.so.9 => /usr/lib/x86_64-linux-gnu/libcudnn.so.9 (0x00007f04c3372000)",
}


@pytest.mark.parametrize("name", sorted(UNRELATED))
def test_unrelated_text_gives_no_explanation(patterns: list[Pattern], name: str) -> None:
    assert explain_text(UNRELATED[name], patterns) == []


# --- captured groups, line numbers, order --------------------------------------------------------------------------


def test_soname_is_captured(patterns: list[Pattern]) -> None:
    found = explain_text("libcudnn.so.9: cannot open shared object file", patterns)
    assert found and found[0].pattern_id == "cudnn9-not-found"
    assert found[0].groups == {"soname": "libcudnn.so.9"}
    assert found[0].finding == "LIB002" and found[0].line == 1
    assert all(e.groups.get("soname", "libcudnn.so.9") == "libcudnn.so.9" for e in found)


def test_sonames_and_dlls_of_other_messages(patterns: list[Pattern]) -> None:
    def groups(text: str, pid: str) -> dict[str, str]:
        return next(e.groups for e in explain_text(text, patterns) if e.pattern_id == pid)

    provider = ("[ONNXRuntimeError] : 1 : FAIL : Failed to load library libonnxruntime_providers_cuda.so with error: "
                "libcublasLt.so.11: cannot open shared object file: No such file or directory")
    assert groups(provider, "cuda11-library-not-found") == {"soname": "libcublasLt.so.11"}
    assert groups(provider, "provider-dependency-missing") == {"provider": "cuda", "soname": "libcublasLt.so.11"}
    assert groups('"cudnn64_9.dll" which is missing', "windows-dependency-dll-missing") == {"dll": "cudnn64_9.dll"}
    require = "Failed to create CUDAExecutionProvider. Require cuDNN 9.* and CUDA 13.*, and the latest MSVC runtime."
    assert groups(require, "cuda-provider-not-created-require") == {"cudnn_major": "9", "cuda_major": "13"}


def test_multi_line_log_yields_both_errors_with_their_lines(patterns: list[Pattern]) -> None:
    log = "\n".join([
        "2025-04-25 13:50:56 INFO starting the service",
        "2025-04-25 13:50:56.628631617 [E:onnxruntime:Default, provider_bridge_ort.cc:2036 TryGetProviderInfo_CUDA] "
        "/onnxruntime_src/onnxruntime/core/session/provider_bridge_ort.cc:1695 onnxruntime::Provider& "
        "onnxruntime::ProviderLibrary::Get() [ONNXRuntimeError] : 1 : FAIL : Failed to load library "
        "libonnxruntime_providers_cuda.so with error: libcublasLt.so.12: cannot open shared object file: "
        "No such file or directory",
        "",
        "Applied providers: ['CPUExecutionProvider'], with options: {'CPUExecutionProvider': {}}",
        "RuntimeError: CUDA failure 35: CUDA driver version is insufficient for CUDA runtime version ; GPU=0",
        "Applied providers: ['CPUExecutionProvider'], with options: {'CPUExecutionProvider': {}}",
    ])
    found = explain_text(log, patterns)
    lines = {e.pattern_id: e.line for e in found}
    assert lines["cuda12-library-not-found"] == 2
    assert lines["cuda-driver-too-old"] == 5
    assert lines["session-applied-cpu-only"] == 4  # reported once, at its first match
    assert [e.pattern_id for e in found].count("session-applied-cpu-only") == 1
    order = [p.id for p in patterns]
    assert [e.pattern_id for e in found] == sorted(lines, key=order.index)  # file order
    assert {e.finding for e in found} >= {"LIB001", "DRV002"}


def test_a_message_wrapped_over_lines_is_recognised(patterns: list[Pattern]) -> None:
    log = ("noise\nFailed to load library libonnxruntime_providers_cuda.so with error: \n"
           "libcudnn.so.9: cannot open shared object file: No such file or directory\n\n"
           "Failed to create CUDAExecutionProvider. \nRequire cuDNN 9.* and CUDA 12.*\n")
    lines = {e.pattern_id: e.line for e in explain_text(log, patterns)}
    assert lines["cudnn9-not-found"] == 3
    assert lines["provider-dependency-missing"] == 2
    assert lines["cuda-provider-not-created-require-linux"] == 5  # a Linux log: the Linux wording
    assert "cuda-provider-not-created-require" not in lines


def test_matching_ignores_case_and_snippets_are_one_line(patterns: list[Pattern]) -> None:
    found = explain_text("LIBCUDNN.SO.9: Cannot Open Shared Object File", patterns)
    assert [e.pattern_id for e in found] == ["cudnn9-not-found"]
    wrapped = explain_text("Failed to create \nCUDAExecutionProvider. Please reference https://x", patterns)
    assert wrapped[0].matched == "Failed to create CUDAExecutionProvider. Please reference"


def test_explanation_to_dict(patterns: list[Pattern]) -> None:
    d = explanation_to_dict(explain_text("libcudnn.so.9: cannot open shared object file", patterns)[0])
    assert d["pattern"] == "cudnn9-not-found" and d["finding"] == "LIB002" and d["line"] == 1
    assert d["groups"] == {"soname": "libcudnn.so.9"}
    assert set(d) == {"pattern", "finding", "line", "matched", "groups", "title", "cause", "fix", "details"}
    assert d["details"] == []


# --- loading: bad data is an OrtfixError ---------------------------------------------------------------------------


def _one_row(**changes: Any) -> dict[str, Any]:
    row = {"id": "demo", "finding": None, "regex": "demo error", "title": "t", "cause": "c", "fix": "f",
           "examples": ["demo error"], "source": "here"}
    row.update(changes)
    return {"schema_version": 1, "kind": "error-patterns", "data_version": "2026.11.22", "patterns": [row]}


def test_invalid_regex_raises_naming_the_pattern() -> None:
    with pytest.raises(OrtfixError) as err:
        load_patterns(_one_row(id="broken-one", regex="libcudnn(\\.so"))
    assert "broken-one" in err.value.message and "regex" in err.value.message


def test_regex_matching_empty_text_is_rejected() -> None:
    with pytest.raises(OrtfixError, match="matches-everything"):
        load_patterns(_one_row(id="matches-everything", regex="x*"))


def test_duplicate_ids_are_rejected() -> None:
    doc = _one_row()
    doc["patterns"].append(copy.deepcopy(doc["patterns"][0]))
    with pytest.raises(OrtfixError, match="used twice"):
        load_patterns(doc)


def test_load_patterns_compiles_case_insensitive() -> None:
    [p] = load_patterns(_one_row())
    assert explain_text("xx DEMO ERROR xx", [p])[0].groups == {}


@pytest.mark.parametrize(("change", "needle"), [
    ({"finding": "LIB999"}, "finding"),
    ({"id": "Not_Kebab"}, "id"),
    ({"examples": []}, "examples"),
    ({"extra": "no"}, "extra"),
    ({"title": "two\nlines"}, "title"),
])
def test_schema_rejects_bad_rows(change: dict[str, Any], needle: str) -> None:
    errors = schema_errors(ERROR_PATTERNS_SCHEMA, _one_row(**change))
    assert errors and any(needle in (e.where + e.message) for e in errors)


def test_schema_requires_the_header() -> None:
    doc = _one_row()
    del doc["kind"]
    assert schema_errors(ERROR_PATTERNS_SCHEMA, doc)
    doc["kind"] = "cuda"
    assert schema_errors(ERROR_PATTERNS_SCHEMA, doc)


def test_load_default_patterns_reports_file_and_problem(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORTFIX_COMPAT_DIR", str(tmp_path))
    bad = _one_row(finding="NOPE")
    (tmp_path / "errors.yaml").write_text(yaml.safe_dump(bad), encoding="utf-8")
    with pytest.raises(OrtfixError) as err:
        load_default_patterns()
    assert str(tmp_path / "errors.yaml") in err.value.message and "finding" in err.value.message

    (tmp_path / "errors.yaml").write_text("schema_version: 1\npatterns: [\n", encoding="utf-8")
    with pytest.raises(OrtfixError, match="invalid YAML"):
        load_default_patterns()

    (tmp_path / "errors.yaml").unlink()
    with pytest.raises(OrtfixError, match="cannot read"):
        load_default_patterns()

    (tmp_path / "errors.yaml").write_text(yaml.safe_dump(_one_row()), encoding="utf-8")
    assert [p.id for p in load_default_patterns()] == ["demo"]


# --- unless and analysis: the row mechanics -------------------------------------------------------------------------


def test_unless_leaves_out_a_row_when_the_named_row_matched() -> None:
    doc = _one_row(id="specific", regex="disk full: (?P<disk>\\w+)")
    doc["patterns"].append({**doc["patterns"][0], "id": "generic", "regex": "disk full", "unless": ["specific"]})
    patterns = load_patterns(doc)
    assert [e.pattern_id for e in explain_text("disk full: sda", patterns)] == ["specific"]
    assert [e.pattern_id for e in explain_text("disk full", patterns)] == ["generic"]


def test_unless_must_name_another_row() -> None:
    with pytest.raises(OrtfixError, match="'nobody'"):
        load_patterns(_one_row(unless=["nobody"]))
    with pytest.raises(OrtfixError, match="no other row"):
        load_patterns(_one_row(id="me", unless=["me"]))


def test_unknown_analysis_is_rejected() -> None:
    with pytest.raises(OrtfixError, match="unknown analysis 'guess'"):
        load_patterns(_one_row(analysis="guess"))
    errors = schema_errors(ERROR_PATTERNS_SCHEMA, _one_row(analysis="guess"))
    assert errors


@pytest.mark.parametrize("name", ANALYSES)
def test_every_analysis_the_schema_allows_runs_on_any_text(name: str) -> None:
    [p] = load_patterns(_one_row(analysis=name))
    [e] = explain_text("a demo error and nothing else", [p])
    assert e.cause.endswith("c") and all(isinstance(d, str) and d for d in e.details)


# --- the messages added for the issue "explain misses common real messages" ----------------------------------------
# Each text is a verbatim report (source in compat/errors.yaml) inside the log lines a user pastes with it. Expected
# facts about releases are read from compat/ort.yaml here, independently of ortfix's matrix code.

ORT_YAML = REPO / "compat" / "ort.yaml"
NEW_IDS = (
    "pip-onnxruntime-gpu-version-not-found", "pip-onnxruntime-gpu-no-matching-distribution",
    "numpy2-runs-module-built-for-numpy1", "numpy-older-than-module-needs", "numpy-multiarray-failed-to-import",
    "numpy-dtype-size-changed", "cuda-initialization-error", "cuda-invalid-device-ordinal",
    "cuda-ptx-unsupported-toolchain", "cuda-illegal-memory-access", "cpu-session-cannot-run-memcpy-nodes",
    "cuda-memcpy-nodes-added", "nodes-not-assigned-to-preferred-provider",
)


@functools.cache
def _releases() -> tuple[dict[str, Any], ...]:
    """The matrix file's releases, parsed once a session (about 0.3 s each time: tests here ask 22 times)."""
    return tuple(yaml.safe_load(ORT_YAML.read_text(encoding="utf-8"))["releases"])


def _gpu_rows(version: str, index: str = "default") -> list[dict[str, Any]]:
    """Copies of the rows, so no test can change what the next one reads."""
    return [copy.deepcopy(r) for r in _releases()
            if r["package"] == "onnxruntime-gpu" and r["index"] == index and version in r["versions"]]


def _python_tags(version: str) -> set[str]:
    return {t for r in _gpu_rows(version) for t in r.get("python_tags", [])}


def _one(text: str, patterns: list[Pattern]) -> Explanation:
    found = explain_text(text, patterns)
    assert len(found) == 1, [e.pattern_id for e in found]
    return found[0]


DEEP_LIVE_CAM_947 = (
    "(venv) C:\\Deep-Live-Cam>pip install -r requirements.txt\n"
    "Collecting numpy>=1.23.5 (from -r requirements.txt (line 3))\n"
    "  Using cached numpy-2.2.3-cp312-cp312-win_amd64.whl.metadata (60 kB)\n"
    "ERROR: Could not find a version that satisfies the requirement onnxruntime-gpu==1.16.3 (from versions: 1.17.0, "
    "1.17.1, 1.18.0, 1.18.1, 1.19.0, 1.19.2, 1.20.0, 1.20.1)\n"
    "ERROR: No matching distribution found for onnxruntime-gpu==1.16.3\n"
)
HALLO2_74 = (
    "Collecting onnx==1.16.1 (from -r requirements.txt (line 24))\n"
    "ERROR: Could not find a version that satisfies the requirement onnxruntime-gpu==1.18.0 (from versions: 1.12.0, "
    "1.12.1, 1.13.1, 1.14.0, 1.14.1, 1.15.0, 1.15.1, 1.16.0, 1.16.1, 1.16.2, 1.16.3, 1.18.1, 1.19.0, 1.19.2, "
    "1.20.0, 1.20.1)\n"
    "ERROR: No matching distribution found for onnxruntime-gpu==1.18.0\n"
)


def test_pip_offered_versions_point_at_the_python_version(patterns: list[Pattern]) -> None:
    e = _one(DEEP_LIVE_CAM_947, patterns)
    assert e.pattern_id == "pip-onnxruntime-gpu-version-not-found" and e.finding is None and e.line == 4
    assert e.groups["requirement"] == "onnxruntime-gpu==1.16.3"
    assert e.groups["offered"].split(", ")[0] == "1.17.0" and e.groups["offered"].endswith("1.20.1")
    offered = ["1.17.0", "1.17.1", "1.18.0", "1.18.1", "1.19.0", "1.19.2", "1.20.0", "1.20.1"]
    common = set.intersection(*(_python_tags(v) for v in offered if _python_tags(v)))  # 1.20.1: not in ort.yaml
    [likely] = sorted(common - _python_tags("1.16.3"))
    details = " ".join(e.details)
    assert "lacks the asked 1.16.3" in details
    assert f"CPython {likely[2]}.{likely[3:]}" in details  # cp312: the Python this user really had (issue #947)
    assert e.cause.startswith(e.details[0]) and "from versions:" in e.cause


def test_pip_says_which_build_of_the_asked_version_lives_on_a_separate_feed(patterns: list[Pattern]) -> None:
    e = _one(HALLO2_74, patterns)
    [default] = {r["cuda_major"] for r in _gpu_rows("1.18.0")}
    [alternate] = {r["cuda_major"] for r in _gpu_rows("1.18.0", "alternate")}
    details = " ".join(e.details)
    assert f"1.18.0 is the CUDA {default} build" in details
    assert f"CUDA {alternate} build lives on a separate feed, configured in your pip configuration" in details
    assert "1.20.1" in details and "lacks the asked 1.18.0" in details
    assert "manylinux" in details  # the offered releases share cp310 with 1.18.0: not the Python version


def test_pip_last_line_alone_and_a_withdrawn_release(patterns: list[Pattern]) -> None:
    e = _one("  Downloading diffusers-0.25.1-py3-none-any.whl.metadata (19 kB)\n"
             "ERROR: No matching distribution found for onnxruntime-gpu==1.19.2\n", patterns)
    assert e.pattern_id == "pip-onnxruntime-gpu-no-matching-distribution"
    tags = sorted(_python_tags("1.19.2"), key=lambda t: int(t[3:]))
    assert f"1.19.2 has wheels for {tags[0]}-{tags[-1]}" in " ".join(e.details)
    withdrawn = _one("ERROR: No matching distribution found for onnxruntime-gpu==1.8.1", patterns)
    assert _gpu_rows("1.8.1") == [] and _gpu_rows("1.8.1", "withdrawn")
    assert "1.8.1 is no longer published" in " ".join(withdrawn.details)


def test_pip_none_at_all(patterns: list[Pattern]) -> None:
    e = _one("Collecting insightface==0.7.3\nERROR: Could not find a version that satisfies the requirement "
             "onnxruntime-gpu (from versions: none)\nERROR: No matching distribution found for onnxruntime-gpu\n",
             patterns)
    assert e.groups == {"requirement": "onnxruntime-gpu", "offered": "none"}
    assert "no onnxruntime-gpu release at all" in e.details[0]


DEEP_LIVE_CAM_1055 = """\
PS C:\\WINDOWS\\system32\\Deep-Live-Cam> python run.py --execution-provider cuda

A module that was compiled using NumPy 1.x cannot be run in
NumPy 2.1.3 as it may crash. To support both 1.x and 2.x
versions of NumPy, modules must be compiled with NumPy 2.0.
Some module may need to rebuild instead e.g. with 'pybind11>=2.12'.

If you are a user of the module, the easiest solution will be to
downgrade to 'numpy<2' or try to upgrade the affected module.
We expect that some modules will need time to support NumPy 2.

Traceback (most recent call last):  File "C:\\WINDOWS\\system32\\Deep-Live-Cam\\run.py", line 3, in <module>
    from modules import core
  File "C:\\WINDOWS\\system32\\Deep-Live-Cam\\modules\\core.py", line 15, in <module>
    import onnxruntime
  File "C:\\Python310\\lib\\site-packages\\onnxruntime\\__init__.py", line 23, in <module>
    from onnxruntime.capi._pybind_state import ExecutionMode  # noqa: F401
  File "C:\\Python310\\lib\\site-packages\\onnxruntime\\capi\\_pybind_state.py", line 32, in <module>
    from .onnxruntime_pybind11_state import *  # noqa
AttributeError: _ARRAY_API not found
ImportError: numpy.core.multiarray failed to import
"""


def test_numpy2_under_an_old_onnxruntime_is_one_explanation(patterns: list[Pattern]) -> None:
    e = _one(DEEP_LIVE_CAM_1055, patterns)  # the multiarray line below it is not explained a second time
    assert e.pattern_id == "numpy2-runs-module-built-for-numpy1" and e.line == 3
    assert e.groups == {"numpy": "2.1.3"}
    details = " ".join(e.details)
    assert "NumPy in use is 2.1.3" in details and "onnxruntime_pybind11_state" in details
    assert '"numpy<2"' in e.fix and "1.19" in e.fix
    assert "1.19.0 is the first release built against NumPy 2" in e.cause
    alone = _one("Traceback (most recent call last):\nImportError: numpy.core.multiarray failed to import\n", patterns)
    assert alone.pattern_id == "numpy-multiarray-failed-to-import"
    assert not any("onnxruntime_pybind11_state" in d for d in alone.details)  # this traceback does not say so


def test_numpy_older_than_the_build(patterns: list[Pattern]) -> None:
    text = (">>> import onnxruntime\nRuntimeError: module compiled against API version 0xf but this version of "
            "numpy is 0xd\nImportError: numpy.core.multiarray failed to import\n\nThe above exception was the direct "
            "cause of the following exception:\n\nSystemError: <built-in function __import__> returned a result with "
            "an error set\n")
    e = _one(text, patterns)
    assert e.pattern_id == "numpy-older-than-module-needs" and e.groups == {"kind": "API", "built": "f",
                                                                             "running": "d"}
    assert "NumPy is older than the one the module was built with" in " ".join(e.details)
    abi = _one("RuntimeError: module compiled against ABI version 0x1000009 but this version of numpy is 0x2000000",
               patterns)
    assert abi.pattern_id == "numpy2-runs-module-built-for-numpy1"


@pytest.mark.parametrize(("expected", "got", "built", "running"), [
    ("96", "88", "NumPy 1.x", "NumPy 2.x"),  # sizeof(PyArray_Descr): 96 bytes in NumPy 1.x, 88 in NumPy 2 (64-bit)
    ("88", "96", "NumPy 2.x", "NumPy 1.x"),
])
def test_numpy_dtype_size_says_which_way(patterns: list[Pattern], expected: str, got: str, built: str,
                                         running: str) -> None:
    text = ("got prompt\n!!! Exception during processing !!! numpy.dtype size changed, may indicate binary "
            f"incompatibility. Expected {expected} from C header, got {got} from PyObject\nTraceback (most recent "
            "call last):\n")
    e = _one(text, patterns)
    assert e.pattern_id == "numpy-dtype-size-changed" and e.line == 2
    assert f"built against {built} and runs under {running}" in " ".join(e.details)


STEP_AUDIO_28 = """\
2025-05-07 09:14:14.906816010 [W:onnxruntime:, transformer_memcpy.cc:83 ApplyImpl] 10 Memcpy nodes are added to \
the graph main_graph for CUDAExecutionProvider. It might have negative impact on performance (including unable to \
run CUDA graph). Set session_options.log_severity_level=1 to see the detail logs before this message.
2025-05-07 09:14:14.907946469 [W:onnxruntime:, session_state.cc:1263 VerifyEachNodeIsAssignedToAnEp] Some nodes \
were not assigned to the preferred execution providers which may or may not have an negative impact on performance. \
e.g. ORT explicitly assigns shape related ops to CPU to improve perf.
2025-05-07 09:14:14.907955128 [W:onnxruntime:, session_state.cc:1265 VerifyEachNodeIsAssignedToAnEp] Rerunning \
with verbose output on a non-minimal build will show node assignments.
"""


def test_performance_warnings_are_explained_as_warnings(patterns: list[Pattern]) -> None:
    found = {e.pattern_id: e for e in explain_text(STEP_AUDIO_28, patterns)}
    assert set(found) == {"cuda-memcpy-nodes-added", "nodes-not-assigned-to-preferred-provider"}
    memcpy, placement = found["cuda-memcpy-nodes-added"], found["nodes-not-assigned-to-preferred-provider"]
    assert memcpy.groups == {"count": "10", "graph": "main_graph", "provider": "CUDAExecutionProvider"}
    assert (memcpy.line, placement.line) == (1, 2)
    for e in (memcpy, placement):
        assert e.finding is None and e.title.startswith("warning, not an error")
        assert "log_severity_level" in e.fix and "ort.set_default_logger_severity(3)" in e.fix
        assert "ortfix tune MODEL" in e.fix
    assert "CUDA graph" in memcpy.cause and '"CPUExecutionProvider"]' in placement.fix
    wrapped = "Memcpy nodes are added to the graph\nmain_graph for CUDAExecutionProvider. It might have"
    assert _one(wrapped, patterns).groups == {"graph": "main_graph", "provider": "CUDAExecutionProvider"}


@pytest.mark.parametrize(("text", "pattern_id", "finding", "groups"), [
    ("Traceback (most recent call last):\n  File \"/opt/conda/lib/python3.10/site-packages/onnxruntime/capi/"
     "onnxruntime_inference_collection.py\", line 217, in run\n    return self._sess.run(output_names, input_feed, "
     "run_options)\nonnxruntime.capi.onnxruntime_pybind11_state.Fail: [ONNXRuntimeError] : 1 : FAIL : CUDA failure 3: "
     "initialization error ; GPU=32764 ; hostname=dcd468bff115 ; file=/onnxruntime_src/onnxruntime/core/providers/"
     "cuda/cuda_execution_provider.cc ; line=388 ; expr=cudaSetDevice(GetDeviceId()); \n",
     "cuda-initialization-error", None, {}),
    ("Inference device: GPU\n/onnxruntime_src/onnxruntime/core/providers/cuda/cuda_call.cc:121 bool onnxruntime::"
     "CudaCall(ERRTYPE, const char*, const char*, ERRTYPE, const char*) [with ERRTYPE = cudaError; bool THRW = true] "
     "CUDA failure 101: invalid device ordinal ; GPU=0 ; hostname=4dbec2b03d4e ; expr=cudaSetDevice(info_.device_id);",
     "cuda-invalid-device-ordinal", None, {}),
    ("    generator.append_tokens(input_ids)\nonnxruntime_genai.onnxruntime_genai.OrtException: Non-zero status code "
     "returned while running Gather node. Name:'/model/embed_tokens/Gather' Status Message: CUDA error "
     "cudaErrorUnsupportedPtxVersion:the provided PTX was compiled with an unsupported toolchain.\n",
     "cuda-ptx-unsupported-toolchain", "DRV002", {}),
    ("Applied providers: ['CUDAExecutionProvider', 'CPUExecutionProvider'], with options: {'CUDAExecutionProvider': "
     "{'device_id': '0'}}\n2025-02-02 21:40:08.2047006 [E:onnxruntime:Default, cuda_call.cc:119 onnxruntime::CudaCall] "
     "CUDA failure 700: an illegal memory access was encountered ; GPU=0 ; hostname=DESKTOP ; "
     "expr=cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));\n",
     "cuda-illegal-memory-access", None, {}),
    ("opt_model = ORTModelForSequenceClassification.from_pretrained('onnx-optimized-wecheck-model')\n"
     "NotImplemented: [ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : Could not find an implementation for MemcpyToHost(1) "
     "node with name 'Memcpy_token_167'\n",
     "cpu-session-cannot-run-memcpy-nodes", "ORT002", {"op": "MemcpyToHost"}),
])
def test_more_frequent_runtime_messages(patterns: list[Pattern], text: str, pattern_id: str, finding: str | None,
                                        groups: dict[str, str]) -> None:
    found = {e.pattern_id: e for e in explain_text(text, patterns)}
    assert pattern_id in found, sorted(found)
    assert found[pattern_id].finding == finding and found[pattern_id].groups == groups


@pytest.mark.parametrize(("text", "pattern_id"), [
    ("CUDA failure 100: no CUDA-capable device is detected ; GPU=32712 ; hostname=HOME-PC", "cuda-no-device"),
    ("CUDNN failure 5000: CUDNN_STATUS_EXECUTION_FAILED ; GPU=0", "cudnn-call-failed"),
    ("CUDNN failure 4: CUDNN_STATUS_INTERNAL_ERROR ; GPU=0 ; hostname=x", "cudnn-call-failed"),
    ("Failed to create CUDAExecutionProvider. Require cuDNN 9.* and CUDA 12.*", "cuda-provider-not-created-require"),
    ("CUDA error cudaErrorNoKernelImageForDevice:no kernel image is available for execution on the device",
     "gpu-architecture-not-in-build"),
    ('LoadLibrary failed with error 126 "" when trying to load "C:\\x\\onnxruntime_providers_cuda.dll"',
     "windows-provider-loadlibrary-126"),
])
def test_the_issues_other_examples_were_already_recognised(patterns: list[Pattern], text: str,
                                                           pattern_id: str) -> None:
    assert pattern_id in _ids(text, patterns)


def test_new_rows_name_no_host_and_explain_without_a_machine(patterns: list[Pattern]) -> None:
    by_id = {p.id: p for p in patterns}
    for pid in NEW_IDS:
        p = by_id[pid]
        for example in p.examples:
            for e in explain_text(example, patterns):
                text = " ".join((e.title, e.cause, e.fix))
                assert "://" not in text and ".org" not in text and "pypi" not in text.lower(), pid


def test_pip_requires_python_line_is_read(patterns: list[Pattern]) -> None:
    [spec] = {r["requires_python"] for r in _gpu_rows("1.21.0")}
    text = (f"ERROR: Ignored the following versions that require a different python version: 1.21.0 Requires-Python "
            f"{spec}; 1.21.1 Requires-Python {spec}\nERROR: Could not find a version that satisfies the requirement "
            "onnxruntime-gpu==1.21.0 (from versions: 1.17.0, 1.17.1, 1.18.0, 1.18.1, 1.19.0, 1.19.2)\n")
    e = _one(text, patterns)
    assert f"pip skipped 1.21.0 because it requires Python {spec}." in e.details


# --- Windows: the messages Windows users paste ----------------------------------------------------------------------

SEEDS = REPO.parent / "shared" / "seeds"


def _hit(text: str, patterns: list[Pattern], pattern_id: str) -> Explanation:
    found = {e.pattern_id: e for e in explain_text(text, patterns)}
    assert pattern_id in found, sorted(found)
    return found[pattern_id]


@pytest.mark.parametrize(("text", "dll", "wheel", "folder", "major"), [
    # onnxruntime 1.22+ (windows.md, measured under wine with the real 1.23.2 wheel)
    ('Error loading "…\\onnxruntime_providers_cuda.dll" which depends on "cublasLt64_12.dll" which is missing. '
     '(Error 126: "The specified module could not be found.")', "cublasLt64_12.dll", "nvidia-cublas-cu12",
     "nvidia\\cublas\\bin", "CUDA 12"),
    # seeds/001
    ('Error loading "...onnxruntime_providers_cuda.dll" which depends on "cublas64_12.dll" which is missing.',
     "cublas64_12.dll", "nvidia-cublas-cu12", "nvidia\\cublas\\bin", "CUDA 12"),
    # a 1.27+ build (CUDA 13: one folder for every CUDA 13 wheel)
    ('Error loading "C:\\env\\Lib\\site-packages\\onnxruntime\\capi\\onnxruntime_providers_cuda.dll" which depends on '
     '"cublasLt64_13.dll" which is missing.', "cublasLt64_13.dll", "nvidia-cublas", "nvidia\\cu13\\bin\\x86_64",
     "CUDA 13"),
    ('Error loading "...onnxruntime_providers_cuda.dll" which depends on "cufft64_11.dll" which is missing.',
     "cufft64_11.dll", "nvidia-cufft-cu12", "nvidia\\cufft\\bin", "CUDA 12"),
    ('Error loading "...onnxruntime_providers_cuda.dll" which depends on "cudart64_110.dll" which is missing.',
     "cudart64_110.dll", "nvidia-cuda-runtime-cu11", "nvidia\\cuda_runtime\\bin", "CUDA 11"),
])
def test_windows_missing_dll_names_its_wheel_and_major(patterns: list[Pattern], text: str, dll: str, wheel: str,
                                                       folder: str, major: str) -> None:
    e = _hit(text, patterns, "windows-dependency-dll-missing")
    assert e.groups["dll"] == dll
    details = " ".join(e.details)
    assert f"{dll} is" in details and major in details, details
    assert f"{wheel} installs it into site-packages\\{folder}" in details, details
    assert "PATH" in details


def test_windows_cudnn_dll_names_the_cudnn_wheels(patterns: list[Pattern]) -> None:
    e = _hit('Error loading "...onnxruntime_providers_cuda.dll" ... "cudnn64_9.dll" which is missing', patterns,
             "windows-dependency-dll-missing")
    details = " ".join(e.details)
    assert "cuDNN 9" in details and "nvidia-cudnn-cu12 (for CUDA 12 builds)" in details
    assert "nvidia-cudnn-cu13 (for CUDA 13 builds)" in details and "nvidia\\cudnn\\bin" in details


def test_windows_error_126_of_old_releases_says_to_run_check(patterns: list[Pattern]) -> None:
    """1.21 and older name no DLL: the remedy is to let ortfix find it."""
    text = ('D:\\a\\_work\\1\\s\\onnxruntime\\core\\session\\provider_bridge_ort.cc:1637 onnxruntime::ProviderLibrary::'
            'Get [ONNXRuntimeError] : 1 : FAIL : LoadLibrary failed with error 126 "" when trying to load '
            '"C:\\venv\\lib\\site-packages\\onnxruntime\\capi\\onnxruntime_providers_cuda.dll"')
    e = _hit(text, patterns, "windows-provider-loadlibrary-126")
    assert "`ortfix check`" in e.fix and "PATH" in e.fix
    assert e.groups["provider"] == "cuda"
    assert "windows-dependency-dll-missing" not in _ids(text, patterns)


@pytest.mark.parametrize(("text", "cuda", "wheels"), [
    ("Failed to create CUDAExecutionProvider. Require cuDNN 9.* and CUDA 12.*, and the latest MSVC runtime.", "12",
     ("nvidia-cublas-cu12", "nvidia-cudnn-cu12")),
    ("Failed to create CUDAExecutionProvider. Require cuDNN 9.* and CUDA 13.*, and the latest MSVC runtime. Please "
     "install all dependencies as mentioned in the GPU requirements page, make sure they're in the PATH, and that "
     "your GPU is supported.", "13", ("nvidia-cublas,", "nvidia-cudnn-cu13")),
])
def test_windows_require_message_names_the_wheels_and_the_msvc_runtime(patterns: list[Pattern], text: str, cuda: str,
                                                                       wheels: tuple[str, ...]) -> None:
    e = _hit(text, patterns, "cuda-provider-not-created-require")
    details = " ".join(e.details)
    assert f"CUDA {cuda} and cuDNN 9" in details
    for wheel in wheels:
        assert wheel in details, details
    assert "msvcp140.dll" in details and "14.40" in details
    assert "Visual C++ Redistributable for Visual Studio 2015-2022 (x64)" in details


def test_linux_require_message_does_not_mention_the_msvc_runtime(patterns: list[Pattern]) -> None:
    e = _hit("Failed to create CUDAExecutionProvider. Require cuDNN 9.* and CUDA 12.*", patterns,
             "cuda-provider-not-created-require")
    assert not any("msvcp140" in d for d in e.details)


def test_windows_zlibwapi_says_move_to_cudnn_9(patterns: list[Pattern]) -> None:
    text = (SEEDS / "002_0b2d7f744e54ca01.txt").read_text(encoding="utf-8")
    e = _hit(text, patterns, "cudnn8-zlibwapi-missing")
    assert "cuDNN 9" in e.fix and "1.19" in e.fix and "`ortfix plan" in e.fix
    assert "exit code 9" in e.cause and "8.3" in e.cause and "no pip wheel ships it" in e.cause


def test_windows_cudnn8_sublibrary_not_located(patterns: list[Pattern]) -> None:
    e = _hit("Could not locate cudnn_ops_infer64_8.dll. Please make sure it is in your library path!", patterns,
             "cudnn-windows-dll-not-located")
    assert e.groups["dll"] == "cudnn_ops_infer64_8.dll"
    assert "exit code 9" in e.cause and "PATH" in e.fix
    details = " ".join(e.details)
    assert "part of cuDNN 8" in details and "nvidia-cudnn-cu11" in details and "nvidia\\cudnn\\bin" in details


def test_cudnn9_cannot_load_its_own_symbol(patterns: list[Pattern]) -> None:
    text = "Invalid handle. Cannot load symbol cudnnGetVersion"
    e = _hit(text, patterns, "cudnn9-cannot-load-own-symbol")
    assert e.groups["symbol"] == "cudnnGetVersion" and e.finding == "LIB002"
    assert "nvidia\\cudnn\\bin" in e.fix and "PATH" in e.fix
    assert "cudnn-cannot-load-cublas-symbol" not in _ids(text, patterns)


def test_seed_001_windows_report_yields_the_dll_and_the_require_line(patterns: list[Pattern]) -> None:
    text = (SEEDS / "001_84561876bdd9e25a.txt").read_text(encoding="utf-8")
    ids = _ids(text, patterns)
    assert "windows-dependency-dll-missing" in ids and "cuda-provider-not-created-require" in ids
    e = _hit(text, patterns, "windows-dependency-dll-missing")
    assert e.groups["dll"] == "cublas64_12.dll" and any("nvidia-cublas-cu12" in d for d in e.details)
