"""`ortfix explain` on real messages from every layer (tests/data/explain/corpus.yaml), judged strictly: the top
explanation is the row written for the message's true cause and names that cause in its title, cause or fix (words
the message itself contains do not count); no explanation repeats one of the wrong diagnoses explain used to give;
normal output stays unrecognised. Plus: every errors.yaml example is won by its own row (or by a more specific one),
wording follows the OS the message came from, and a soname's number turns into the major it means."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from explain_score import Entry, load_corpus, misses, said
from factsdata import load_facts
from ortfix.explain.message_os import message_os
from ortfix.explain.patterns import Explanation, Pattern, explain_text, load_default_patterns

ENTRIES, NEGATIVES = load_corpus()


@pytest.fixture(scope="module")
def patterns() -> list[Pattern]:
    return load_default_patterns()


def _top(text: str, patterns: list[Pattern]) -> Explanation:
    found = explain_text(text, patterns)
    assert found, "not recognised"
    return found[0]


# --- the corpus ----------------------------------------------------------------------------------------------------


def test_the_corpus_is_real_messages_with_their_source() -> None:
    assert len(ENTRIES) >= 50 and len(NEGATIVES) >= 10
    assert len({e.id for e in ENTRIES}) == len(ENTRIES)
    for e in ENTRIES:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+#\d+", e.source), e.id
        assert e.cause and all(e.cause), e.id
    assert len({e.layer for e in ENTRIES}) >= 12
    for text in [e.text for e in ENTRIES] + [n["text"] for n in NEGATIVES]:
        # no package registry's address: the only hosts quoted are the projects' documentation sites
        assert set(re.findall(r"https?://([^/\s]+)", text)) <= {"onnxruntime.ai", "pytorch.org"}, text


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.id for e in ENTRIES])
def test_the_cause_words_are_not_in_the_message(entry: Entry) -> None:
    """Echoing the message does not count: a word that names the cause must be one the message does not contain."""
    for group in entry.cause:
        for word in group:
            assert word.lower() not in entry.text.lower(), f"{entry.id}: {word!r} is in the message itself"


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.id for e in ENTRIES])
def test_real_message_gets_its_true_cause(patterns: list[Pattern], entry: Entry) -> None:
    found = explain_text(entry.text, patterns)
    assert found and found[0].pattern_id == entry.expect, [e.pattern_id for e in found]
    assert misses(entry, found) == []


@pytest.mark.parametrize("text", [n["text"] for n in NEGATIVES], ids=[f"{n['source']}-{i}"
                                                                        for i, n in enumerate(NEGATIVES)])
def test_normal_output_is_not_recognised(patterns: list[Pattern], text: str) -> None:
    assert explain_text(text, patterns) == []


# Generic rows whose examples a more specific row rightly wins (the example also shows the specific message).
MORE_SPECIFIC = {
    "ort-import-cuda-library-missing": {"cudnn8-not-found"},
    "provider-dependency-missing": {"cuda11-library-not-found"},
    "cuda-provider-not-created-require-linux": {"cudnn9-not-found"},
}


def test_every_example_is_won_by_its_own_row(patterns: list[Pattern]) -> None:
    lost = []
    for p in patterns:
        for example in p.examples:
            top = _top(example, patterns).pattern_id
            if top != p.id and top not in MORE_SPECIFIC.get(p.id, ()):
                lost.append(f"{p.id}: won by {top}: {example[:80]}")
    assert lost == []


# --- the wrong diagnoses of the issue, one by one -------------------------------------------------------------------


def test_a_missing_tensorrt_dll_is_not_blamed_on_the_cuda_provider(patterns: list[Pattern]) -> None:
    text = ('Error loading "C:\\app\\onnxruntime\\capi\\onnxruntime_providers_tensorrt.dll" which depends on '
            '"nvinfer_10.dll" which is missing. (Error 126: "The specified module could not be found.")')
    found = explain_text(text, patterns)
    assert [e.pattern_id for e in found] == ["tensorrt-windows-dll-missing"]
    assert "TensorRT 10" in found[0].cause and "onnxruntime_providers_cuda.dll" not in said(found[0])


def test_a_missing_genai_dll_is_not_blamed_on_the_cuda_provider(patterns: list[Pattern]) -> None:
    text = ('Cuda interface not available: Failed to load library: Error loading "onnxruntime-genai-cuda.dll" which '
            'is missing.')
    found = explain_text(text, patterns)
    assert [e.pattern_id for e in found] == ["genai-cuda-library-not-loaded"]
    assert "onnxruntime-genai-cuda" in found[0].fix


def test_cudnn8_failing_on_the_unversioned_libcuda_is_the_driver(patterns: list[Pattern]) -> None:
    text = "Could not load library libcudnn_cnn_infer.so.8. Error: libcuda.so: cannot open shared object file"
    found = explain_text(text, patterns)
    assert [e.pattern_id for e in found] == ["wsl-cudnn8-needs-unversioned-libcuda"]
    assert "/usr/lib/wsl/lib" in found[0].fix
    # a cuDNN 8 sub-library that is itself missing still gets the sub-library answer
    other = "Could not load library libcudnn_cnn_infer.so.8. Error: libcudnn_ops_infer.so.8: cannot open shared object"
    assert _top(other, patterns).pattern_id == "cudnn8-sublibrary-load-failed"


def test_the_wsl_ldconfig_warning_is_harmless(patterns: list[Pattern]) -> None:
    found = explain_text("ldconfig: /usr/lib/wsl/lib/libcuda.so.1 is not a symbolic link", patterns)
    assert [e.pattern_id for e in found] == ["wsl-ldconfig-libcuda-warning"]
    assert found[0].finding is None and "cp -P" not in said(found[0])
    # outside the WSL driver folder the copy is still a copying mistake
    copy = explain_text("sbin/ldconfig.real: /usr/local/cuda/lib64/libcudnn.so.5 is not a symbolic link", patterns)
    assert [e.pattern_id for e in copy] == ["ldconfig-soname-not-a-link"]


@pytest.mark.parametrize("text", [
    "Could not locate cudnn_engines_tensor_ir64_9.dll. Please make sure it is in your library path!",
    "Could not locate cudnn_graph64_9.dll. Please make sure it is in your library path!",
    "Could not load library cudnn_engines_precompiled64_9.dll",
])
def test_a_cudnn9_sublibrary_gets_the_cudnn9_answer(patterns: list[Pattern], text: str) -> None:
    found = explain_text(text, patterns)
    assert [e.pattern_id for e in found] == ["cudnn9-windows-dll-not-located"]
    assert "cuDNN 9" in found[0].cause and "cudnn 8" not in said(found[0])


def test_cudnn9_24_sublibrary_says_which_release_added_it(patterns: list[Pattern]) -> None:
    cause = _top("Could not locate cudnn_engines_tensor_ir64_9.dll. Please make sure", patterns).cause
    assert "added this sub-library in 9.24" in cause


def test_a_linux_log_line_gets_no_windows_wording(patterns: list[Pattern]) -> None:
    log = ("/onnxruntime_src/onnxruntime/core/session/provider_bridge_ort.cc:1778 Failed to load library "
           "libonnxruntime_providers_cuda.so with error: libcublasLt.so.12: cannot open shared object file\n"
           "Failed to create CUDAExecutionProvider. Require cuDNN 9.* and CUDA 12.*. Please install all dependencies "
           "as mentioned in the GPU requirements page, make sure they're in the PATH, and that your GPU is supported.")
    found = explain_text(log, patterns)
    assert "cuda-provider-not-created-require-linux" in [e.pattern_id for e in found]
    for e in found:
        assert ".dll" not in said(e) and "msvc" not in said(e) and "site-packages\\" not in said(e), e.pattern_id
    # the same line from Windows keeps the DLL and MSVC answer
    win = explain_text("Failed to create CUDAExecutionProvider. Require cuDNN 9.* and CUDA 12.*, and the latest "
                       "MSVC runtime. C:\\app\\onnxruntime\\capi", patterns)
    assert [e.pattern_id for e in win] == ["cuda-provider-not-created-require"]
    assert "msvcp140" in win[0].cause.lower()


@pytest.mark.parametrize(("text", "os"), [
    ("Failed to load library libonnxruntime_providers_cuda.so with error: x", "linux"),
    ('LoadLibrary failed with error 126 "" when trying to load "C:\\x\\onnxruntime_providers_cuda.dll"', "windows"),
    ("Failed to create CUDAExecutionProvider. Require cuDNN 9.* and CUDA 12.*", None),
])
def test_the_message_os_is_read_from_the_text(text: str, os: str | None) -> None:
    assert message_os(text) == os


# --- a soname's number turns into its major -------------------------------------------------------------------------
# The expected majors are NVIDIA's naming: cuFFT's SONAME is one below its CUDA major, the runtime and NVRTC of CUDA 11
# are libcudart.so.11.0 and libnvrtc.so.11.2, TensorRT's DLLs carry the TensorRT major.


@pytest.mark.parametrize(("text", "says"), [
    ("ImportError: libcufft.so.11: cannot open shared object file: No such file or directory", "CUDA 12"),
    ("ImportError: libcurand.so.10: cannot open shared object file: No such file or directory", "CUDA 11 and 12"),
    ("Failed to load library libonnxruntime_providers_cuda.so with error: libnvrtc.so.11.2: cannot open shared "
     "object file", "CUDA 11"),
    ("Failed to load library libonnxruntime_providers_cuda.so with error: libcufft.so.12: cannot open shared "
     "object file", "CUDA 13"),
    ("libcublasLt.so.13 => not found", "CUDA 13"),
    ("libcudnn_graph.so.9 => not found", "cuDNN 9"),
    ('"nvonnxparser_10.dll" which is missing', "TensorRT 10"),
    ("Failed to load library libonnxruntime_providers_tensorrt.so with error: libnvinfer.so.8: cannot open shared "
     "object file", "TensorRT 8"),
])
def test_a_soname_names_its_major(patterns: list[Pattern], text: str, says: str) -> None:
    assert says in _top(text, patterns).cause


# --- why it happens on this machine ---------------------------------------------------------------------------------


def test_with_facts_the_answer_names_the_build_and_the_machine(patterns: list[Pattern]) -> None:
    facts = load_facts("sweep-1.18.1")  # a recorded onnxruntime-gpu 1.18.1 CUDA 11 / cuDNN 8 environment
    e = explain_text("FAIL : Failed to load library libonnxruntime_providers_cuda.so with error: libcublasLt.so.11: "
                     "cannot open shared object file", patterns, facts=facts)[0]
    assert "Here: onnxruntime-gpu 1.18.1, a CUDA 11 build for cuDNN 8." in e.details
    wsl = replace(facts, probe=replace(facts.probe, wsl=True))
    e = explain_text("Could not load library libcudnn_cnn_infer.so.8. Error: libcuda.so: cannot open shared object "
                     "file", patterns, facts=wsl)[0]
    assert any("This machine is WSL2" in d for d in e.details)
    old = replace(facts, probe=replace(facts.probe, glibc="2.17"))
    e = explain_text("/lib64/libstdc++.so.6: version `GLIBCXX_3.4.30' not found", patterns, facts=old)[0]
    assert "GCC 12" in e.cause and "This machine's glibc is 2.17." in e.details


def test_uv_and_pip_platform_answers(patterns: list[Pattern]) -> None:
    glibc = _top("hint: You're on Linux (`manylinux_2_17_x86_64`), but `onnxruntime-gpu` (v1.20.2) only has wheels "
                 "for the following platforms: `manylinux_2_27_x86_64`, `manylinux_2_28_x86_64`, `win_amd64`", patterns)
    assert "glibc 2.17" in glibc.cause and "glibc 2.28 (manylinux_2_28)" in glibc.cause
    renamed = _top("ERROR: onnxruntime_gpu-1.16.0-cp38-cp38m-linux_aarch64.whl is not a supported wheel on this "
                   "platform.", patterns)
    assert "no 'm' ABI tag" in renamed.cause
    fine = _top("ERROR: onnxruntime_gpu-1.22.0-cp312-cp312-manylinux2014_aarch64.whl is not a supported wheel on this "
                "platform.", patterns)
    assert "'m' ABI" not in fine.cause and "Python cp312, ABI cp312, platform manylinux2014_aarch64" in fine.cause
