"""`ortfix explain`: compat/errors.yaml validates, every real-world example is recognised by its own pattern, and
unrelated text is left alone."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from ortfix.errors import OrtfixError
from ortfix.explain import (
    ERROR_PATTERNS_SCHEMA,
    FINDING_CODES,
    Pattern,
    explain_text,
    explanation_to_dict,
    load_default_patterns,
    load_patterns,
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
    jsonschema.Draft202012Validator.check_schema(ERROR_PATTERNS_SCHEMA)
    jsonschema.Draft202012Validator(ERROR_PATTERNS_SCHEMA).validate(DOC)


def test_header() -> None:
    head = ERRORS_YAML.read_text(encoding="utf-8").splitlines()[:3]
    assert head == ["schema_version: 1", "kind: error-patterns", 'data_version: "2026.11.22"']


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
    "numpy-abi": "ImportError: numpy.core.multiarray failed to import\n"
                 "A module that was compiled using NumPy 1.x cannot be run in NumPy 2.0.0 as it may crash.",
    "pip-resolver": (
        "ERROR: Cannot install onnxruntime-gpu==1.19.2 and numpy==2.1.0 because these package versions have "
        "conflicting dependencies.\n\nThe conflict is caused by:\n    The user requested numpy==2.1.0\n"
        "    onnxruntime-gpu 1.19.2 depends on numpy<2.0 and >=1.21.6\n\n"
        "ERROR: ResolutionImpossible: for help visit "
        "https://pip.pypa.io/en/latest/topics/dependency-resolution/#dealing-with-dependency-conflicts\n"
    ),
    "pip-no-version": "ERROR: Could not find a version that satisfies the requirement onnxruntime-gpu==1.16.3 "
                      "(from versions: 1.17.0, 1.17.1, 1.18.0)\n"
                      "ERROR: No matching distribution found for onnxruntime-gpu==1.16.3",
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
    assert lines["cuda-provider-not-created-require"] == 5


def test_matching_ignores_case_and_snippets_are_one_line(patterns: list[Pattern]) -> None:
    found = explain_text("LIBCUDNN.SO.9: Cannot Open Shared Object File", patterns)
    assert [e.pattern_id for e in found] == ["cudnn9-not-found"]
    wrapped = explain_text("Failed to create \nCUDAExecutionProvider. Please reference https://x", patterns)
    assert wrapped[0].matched == "Failed to create CUDAExecutionProvider. Please reference"


def test_explanation_to_dict(patterns: list[Pattern]) -> None:
    d = explanation_to_dict(explain_text("libcudnn.so.9: cannot open shared object file", patterns)[0])
    assert d["pattern"] == "cudnn9-not-found" and d["finding"] == "LIB002" and d["line"] == 1
    assert d["groups"] == {"soname": "libcudnn.so.9"}
    assert set(d) == {"pattern", "finding", "line", "matched", "groups", "title", "cause", "fix"}


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
    errors = list(jsonschema.Draft202012Validator(ERROR_PATTERNS_SCHEMA).iter_errors(_one_row(**change)))
    assert errors and any(needle in (".".join(map(str, e.absolute_path)) + e.message) for e in errors)


def test_schema_requires_the_header() -> None:
    doc = _one_row()
    del doc["kind"]
    assert not jsonschema.Draft202012Validator(ERROR_PATTERNS_SCHEMA).is_valid(doc)
    doc["kind"] = "cuda"
    assert not jsonschema.Draft202012Validator(ERROR_PATTERNS_SCHEMA).is_valid(doc)


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
