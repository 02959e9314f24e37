"""The probe script (src/ortfix/_probe.py) on its own: it runs in the target interpreter with the standard library only
and, to start fast, without json, re, platform or importlib. Its hand-written JSON encoder and string matching are
checked here against json.dumps and the regular expressions it replaced, and its report against what those modules say
inside a real venv."""

from __future__ import annotations

import ast
import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import ortfix
from ortfix.target.choose import PROBE_SOURCE, probe_argv, probe_source
from ortfix.target.probecmd import SOURCE_VAR, probe_env
from support.fixtures import make_venv

PROBE = Path(ortfix.__file__).parent / "target" / "_probe.py"

# What the probe used before it dropped `re`: the references its replacements must agree with.
# `NAME = 'value'`, or annotated (`cuda: Optional[str] = '12.4'`, torch 2.x's version.py)
ASSIGNMENT_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*(?::[^=\n]*)?=\s*(['\"])(.*?)\2\s*$", re.M)
INTERESTING_RE = re.compile(r"^(onnxruntime|ort[-_]nightly|nvidia[-_]|torch$|tensorrt)", re.IGNORECASE)
TORCH_LIB_RE = re.compile(r"^(lib)?(cud|cublas|cufft|curand|nvrtc|nvJit)")
DEPENDENT_RE = re.compile(r"^\s*onnxruntime", re.I)

# Modules the probe must not load: each costs milliseconds of its start-up.
SLOW_MODULES = {"json", "re", "platform", "importlib.util", "importlib.machinery", "enum", "traceback", "typing",
                # a codec's module, only to drop a BOM from pyvenv.cfg and .pth files (pth_lines does it itself)
                "encodings.utf_8_sig"}

# What the probe reports, worked out by the target interpreter with the modules the probe does without.
EXPECTED_SCRIPT = """
import importlib.util, json, os, platform, site, sys, sysconfig
uname = platform.uname()
print(json.dumps({
    "executable": sys.executable,
    "version": "%d.%d.%d" % sys.version_info[:3],
    "implementation": platform.python_implementation().lower(),
    "cache_tag": sys.implementation.cache_tag,
    "has_pip": importlib.util.find_spec("pip") is not None,
    "system": uname.system, "release": uname.release, "machine": uname.machine,
    "purelib": sysconfig.get_paths()["purelib"], "platlib": sysconfig.get_paths()["platlib"],
    "site_packages": site.getsitepackages(),
    "user_site": site.getusersitepackages() if site.ENABLE_USER_SITE else None,
    "prefix": sys.prefix, "base_prefix": sys.base_prefix,
}))
"""


@pytest.fixture(scope="module")
def probe() -> dict[str, Any]:
    """The probe's functions, its source executed under a name other than __main__ so that main() does not run."""
    namespace: dict[str, Any] = {"__name__": "probe_under_test"}
    saved = list(sys.path)
    try:
        exec(compile(PROBE.read_text(encoding="utf-8"), str(PROBE), "exec"), namespace)
    finally:
        sys.path[:] = saved  # it drops a leading "" from sys.path, as `python -c` puts one there
    return namespace


def run_probe(python: Path | str, cwd: Path, pythonpath: str | None = None) -> tuple[str, str]:
    """Run the probe as ortfix does (`python -S -c SOURCE`); its stdout and stderr."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PYTHONIOENCODING"] = "utf-8"
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    argv = probe_argv(python)
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, proc.stderr


def probe_doc(python: Path | str, cwd: Path, pythonpath: str | None = None) -> dict[str, Any]:
    out, _ = run_probe(python, cwd, pythonpath)
    assert out.isascii(), "the probe writes ASCII, as json.dumps does"
    doc: dict[str, Any] = json.loads(out)
    return doc


# ---------------------------------------------------------------------------------------------------------------
# The probe in real interpreters
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("with_pip", [False, True], ids=["no-pip", "pip"])
def test_probe_reports_what_the_stdlib_says_in_a_venv(tmp_path: Path, with_pip: bool) -> None:
    python = make_venv(tmp_path / "venv")
    if with_pip:  # a stand-in: the probe only asks whether `pip` can be imported
        site_dir = next((tmp_path / "venv" / "lib").glob("python3*/site-packages"))
        (site_dir / "pip").mkdir()
        (site_dir / "pip" / "__init__.py").write_text("")
    expected = json.loads(subprocess.run([str(python), "-c", EXPECTED_SCRIPT], capture_output=True, text=True,
                                         check=True, cwd=tmp_path).stdout)
    doc = probe_doc(python, tmp_path)

    assert expected["has_pip"] is with_pip
    assert doc["probe_schema"] == 2
    assert doc["python"] == {
        "executable": expected["executable"],
        "real_executable": os.path.realpath(expected["executable"]),
        "version": expected["version"],
        "implementation": expected["implementation"],
        "cache_tag": expected["cache_tag"],
        "pointer_bits": 64 if sys.maxsize > 2**32 else 32,
        "has_pip": expected["has_pip"],
    }
    assert {k: doc["os"][k] for k in ("system", "release", "machine")} == {
        k: expected[k] for k in ("system", "release", "machine")}
    assert doc["os"]["wsl"] == ("microsoft" in expected["release"].lower())
    env = doc["env"]
    assert env["kind"] == "venv"
    assert (env["prefix"], env["base_prefix"]) == (expected["prefix"], expected["base_prefix"])
    assert (env["purelib"], env["platlib"]) == (expected["purelib"], expected["platlib"])
    assert env["site_packages"] == expected["site_packages"]
    assert env["user_site"] == expected["user_site"]
    assert doc["distributions"] == [] and doc["dependents"] == [] and doc["torch"] is None


def test_probe_in_the_test_interpreter_matches_find_spec(tmp_path: Path) -> None:
    """This interpreter's venv may carry setuptools' distutils-precedence.pth, whose meta-path finder the probe skips:
    the answer must still be importlib.util.find_spec's."""
    import importlib.util
    import platform

    doc = probe_doc(sys.executable, tmp_path)
    assert doc["python"]["has_pip"] == (importlib.util.find_spec("pip") is not None)
    assert doc["python"]["implementation"] == platform.python_implementation().lower()
    assert doc["os"]["machine"] == platform.uname().machine


@pytest.mark.slow
def test_probe_imports_none_of_the_slow_modules(tmp_path: Path) -> None:
    """Every module the probe's process imports, as `-X importtime` lists it while it runs (the probe ends with
    os._exit: code after it never runs), against an interpreter that only starts the same way."""
    python = make_venv(tmp_path / "venv")
    env = {k: v for k, v in probe_env().items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PYTHONPROFILEIMPORTTIME"] = "1"

    def imported(argv: list[str]) -> set[str]:
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path, check=True)
        return {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}

    loaded = imported(probe_argv(python))
    assert {"sysconfig", "site"} <= loaded, loaded  # what it does import is listed
    assert SLOW_MODULES & (loaded - imported([str(python), "-S", "-c", "pass"])) == set()


def test_probe_source_is_python36_syntax(probe: dict[str, Any]) -> None:
    ast.parse(PROBE.read_text(encoding="utf-8"), feature_version=(3, 6))
    assert "main" in probe  # loaded without running it


# ---------------------------------------------------------------------------------------------------------------
# The JSON encoder
# ---------------------------------------------------------------------------------------------------------------

TRICKY_STRINGS = [
    "", "plain", 'a"b\\c', "\u00e9", "caf\u00e9", "\u2028\u2029", "\U0001f600", "x\U0010ffffy", "\udcff",
    "/tmp/\udcff\udc80/site-packages", "\ud800", "\udbff\udfff", "\x00\x1f\x7f\x80\x9f", "tab\tnew\nline\r\x08\x0c",
    "</script>", "\ufeff\ufffe\uffff", "".join(chr(i) for i in range(0x80)),
]


@pytest.mark.parametrize("c_escaper", [True, False], ids=["_json", "pure-python"])
@pytest.mark.parametrize("text", TRICKY_STRINGS + [chr(i) for i in range(0x80)], ids=ascii)
def test_encode_strings_as_json_dumps_does(probe: dict[str, Any], text: str, c_escaper: bool,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """With _json's C escaper (the probe's own import of it), and without it (an interpreter built without _json)."""
    assert probe["c_encode_string"] is not None
    if not c_escaper:
        monkeypatch.setitem(probe, "c_encode_string", None)
    encoded = probe["encode"](text)
    assert encoded.isascii()
    assert encoded == json.dumps(text)
    assert json.loads(encoded) == json.loads(json.dumps(text))  # text itself, but for a pair of lone surrogates


def test_encode_every_code_point(probe: dict[str, Any]) -> None:
    step = 0x1000
    for start in range(0, 0x110000, step):
        text = "".join(chr(i) for i in range(start, start + step))
        assert probe["encode"](text) == json.dumps(text), hex(start)


@pytest.mark.parametrize("value", [
    None, True, False, 0, -1, 2**70, [], {}, (), [[]], {"a": {}}, [1, "x", None, True, False],
    ("tuple", 3), {"k\u00e9y\n": ["v", {"n": [None, -0, 12345678901234567890]}]},
    {"files": [["onnxruntime/capi/\udcff.so", "sha256=abc", 12], ["a,\"b\".txt", "", None]]},
    {"": "", "\U0001f600": "\udcff"},
], ids=repr)
def test_encode_values_as_json_dumps_does(probe: dict[str, Any], value: Any) -> None:
    encoded = probe["encode"](value)
    assert encoded.isascii()
    assert encoded == json.dumps(value)
    assert json.loads(encoded) == json.loads(json.dumps(value))


def test_encode_refuses_other_types(probe: dict[str, Any]) -> None:
    with pytest.raises(TypeError):
        probe["encode"]({"x": 1.5})


@pytest.mark.parametrize("key", [1, None, True, (1,)], ids=repr)
def test_encode_refuses_a_key_that_is_not_a_string(probe: dict[str, Any], key: Any) -> None:
    """dumps()' fallback: a JSON object's keys are strings (it wrote `{1: ...}`, which is not JSON)."""
    with pytest.raises(TypeError):
        probe["encode"]({key: "x"})


DOCUMENTS = [
    None, True, False, 0, -1, 2**70, [], {}, (), [[]], {"a": {}}, [1, "x", None, True, False], ("tuple", 3),
    {"k\u00e9y\n": ["v", {"n": [None, -0, 12345678901234567890]}]},
    {"files": [["onnxruntime/capi/\udcff.so", "sha256=abc", 12], ["a,\"b\".txt", "", None]]},
    {"": "", "\U0001f600": "\udcff"}, {"strings": TRICKY_STRINGS},
]


@pytest.mark.parametrize("c_encoder", [True, False], ids=["_json", "encode()"])
@pytest.mark.parametrize("value", DOCUMENTS, ids=repr)
def test_dumps_as_json_dumps_does(probe: dict[str, Any], value: Any, c_encoder: bool,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The report is written by dumps(): json.dumps' own C encoder where the interpreter has it, else encode()."""
    assert probe["c_make_encoder"] is not None
    if not c_encoder:
        monkeypatch.setitem(probe, "c_make_encoder", None)
    encoded = probe["dumps"](value)
    assert encoded.isascii()
    assert encoded == json.dumps(value)


def test_dumps_uses_the_c_encoder(probe: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole report in one call of json's C encoder (a third of encode()'s time), not value by value."""
    made: list[tuple[Any, ...]] = []
    real = probe["c_make_encoder"]

    def recording(*args: Any) -> Any:
        made.append(args)
        return real(*args)

    monkeypatch.setitem(probe, "c_make_encoder", recording)
    monkeypatch.setitem(probe, "encode", lambda value: pytest.fail("encode() used"))
    assert probe["dumps"]({"a": [1, "\u2028"]}) == json.dumps({"a": [1, "\u2028"]})
    assert len(made) == 1


def test_dumps_falls_back_when_the_encoder_takes_other_arguments(probe: dict[str, Any],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    def other_signature(*args: Any) -> Any:
        raise TypeError("make_encoder() takes 10 arguments")

    monkeypatch.setitem(probe, "c_make_encoder", other_signature)
    assert probe["dumps"]({"a": ["\udcff", None]}) == json.dumps({"a": ["\udcff", None]})


# ---------------------------------------------------------------------------------------------------------------
# String matching without `re`
# ---------------------------------------------------------------------------------------------------------------

ASSIGNMENT_TEXTS = [
    "__version__ = '2.5.0+cu124'\ncuda = \"12.4\"\n",
    "__version__='1.0'", "x = ''", "x = \"\"", "x = '", "x = 'a'b'", "x = 'a' # note", "x = 'it's'",
    "x = \"a'b\"", "x = 'a\"", "x = 'a'  \t\r\n", "x = 'a'\r\ny = 'b'\r\n", "  x = 'a'", "1x = 'a'", "_x1 = 'a'",
    "x\n= 'a'", "x =\n\n'a'\ny = 'b'", "x = 'a\nb'", "x = 'a'\n\n\ny = 'b'", "x = 'a' \x0b\x0c\x1c\n", "x = 'a'\u2028",
    "x = 'a'\u2028z", "x = 'a'\u2028y = 'b'", "x = 'first'\nx = 'second'", "x = 'a'\n  \ny = 'b'\n", "x = 'é'",
    "x = 'a'\ny == 'b'\nz = 'c'", "\n\nx = 'a'", "x = 'a'\n", "x = 'a' 'b'", "K = 'kelvin'", "x = ''''",
    "cuda = None\ngit_version = 'abc'\n", "",
    "cuda: Optional[str] = '12.4'\n", "hip: Optional[str] = None\n", "x: int = 'a'", "x : str= 'a'", "x:\n= 'a'",
    "x: str == 'b'", "x: Dict[str, str] = 'a'\ny: = 'b'", "x:= 'a'", "x: 'a' = 'b'", "x::= 'a'",
]


@pytest.mark.parametrize("text", ASSIGNMENT_TEXTS, ids=repr)
def test_parse_assignments_matches_the_regex(probe: dict[str, Any], text: str) -> None:
    expected = {m.group(1): m.group(3) for m in ASSIGNMENT_RE.finditer(text)}
    assert probe["parse_assignments"](text) == expected


def test_parse_assignments_matches_the_regex_on_random_text(probe: dict[str, Any]) -> None:
    rng = random.Random(20240601)
    pieces = ["A", "b", "_", "1", " ", "=", "'", '"', "\n", "\t", "\r", "\x0b", "\x1c", "\u2028", "\x85", "x", "\u00e9",
              "\\", "#", "__version__ = '1.0'\n", "cuda = \"12.4\"\n", ":", "[", "cuda: Optional[str] = '12.4'\n"]
    for _ in range(20000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(25)))
        expected = {m.group(1): m.group(3) for m in ASSIGNMENT_RE.finditer(text)}
        assert probe["parse_assignments"](text) == expected, repr(text)


def _headers_of_every_line(text: str) -> dict[str, list[str]]:
    """METADATA's headers as the probe read them before it split only the header block: every line of the text
    looked at in turn, up to the first blank one (the reference the faster split must keep to)."""
    headers: dict[str, list[str]] = {}
    for line in text.split("\n"):
        if not line.strip():
            break
        if line[:1] in (" ", "\t") or ":" not in line:
            continue
        key, _, value = line.partition(":")
        headers.setdefault(key.strip().lower(), []).append(value.strip())
    return headers


def test_metadata_headers_stop_at_the_first_blank_line_on_random_text(probe: dict[str, Any]) -> None:
    rng = random.Random(20261126)
    pieces = ["Name: a\n", "Version: 1\n", "Requires-Dist: nvidia-cudnn-cu12\n", "\n", "\n\n", " \n", "\t\n",
              "\r\n", "\x0c\n", " continued\n", ":", "Name", " ", "x", "\u2028", "\x85\n", "Description: d\n"]
    for _ in range(20000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(14)))
        assert probe["metadata_headers"](text) == _headers_of_every_line(text), repr(text)


@pytest.mark.parametrize("name", [
    "onnxruntime", "onnxruntime_gpu", "ONNXRuntime-GPU", "onnxruntimeX", " onnxruntime", "onnx", "",
    "ort_nightly_gpu", "ort-nightly", "Ort.Nightly", "ortnightly",
    "nvidia_cudnn_cu12", "NVIDIA-cublas", "nvidia", "nvidiax",
    "torch", "Torch", "TORCH", "torch\n", "torch\n\n", "torchvision", "torch_tensorrt",
    "tensorrt", "tensorrt_cu12_libs", "TensorRT",
    # The non-ASCII letters re.IGNORECASE matches to ASCII ones (and one it does not).
    "\u0130nvidia_x", "nv\u0131dia_x", "nv\u0130dia_x", "ten\u017eorrt", "ten\u017forrt", "tor\u212ah",
    "onnxrunt\u0130me", "\u212aorch", "onnxruntime\u0130",
], ids=ascii)
def test_interesting_names_match_the_regex(probe: dict[str, Any], name: str) -> None:
    assert probe["is_interesting"](name) == bool(INTERESTING_RE.match(name))


@pytest.mark.parametrize("name", ["Foo.Bar_baz", "a--b__c..d", "-a-", "._a_.", "", "...", "A", "x-_.-y", "\u0130_x"],
                         ids=ascii)
def test_normalize_matches_the_regex(probe: dict[str, Any], name: str) -> None:
    assert probe["normalize"](name) == re.sub(r"[-_.]+", "-", name).lower()


@pytest.mark.parametrize("requirement", [
    "onnxruntime>=1.15", "  onnxruntime", "\tONNXRuntime-GPU ; extra == 'gpu'", "onnxruntime-extensions",
    "onnx>=1.14", "sklearn-onnxruntime", "\u2028onnxruntime", "onnxrunt\u0131me", "onnxrunt\u0130me", "onnxruntim",
    "",
], ids=ascii)
def test_dependent_requirements_match_the_regex(probe: dict[str, Any], requirement: str) -> None:
    assert probe["requires_onnxruntime"](requirement) == bool(DEPENDENT_RE.match(requirement))


def test_dependents_are_read_from_the_header_block(probe: dict[str, Any], tmp_path: Path) -> None:
    """A requirement is read from METADATA's header block alone: a long description that names onnxruntime makes no
    dependent; a header block with letters re.IGNORECASE folds to ASCII ones (dotless i) still names onnxruntime
    where the file's bytes mention it anywhere, and not where they do not (what the byte test always let through)."""
    bodies = {
        "body-only": "Requires-Dist: numpy\n\nWorks with ONNXRuntime-GPU and nvidia-cudnn.\n",
        "folded": "Requires-Dist: onnxrunt\u0131me>=1.15\n\nSee onnxruntime.\n",
        "folded-alone": "Requires-Dist: onnxrunt\u0131me>=1.15\n\nNothing else.\n",
        "ascii": "Requires-Dist: NVIDIA-cudnn-cu12\nRequires-Dist: numpy\n\nText.\n",
        "no-blank-line": "Requires-Dist: tensorrt\n",
    }
    for name, body in bodies.items():
        info = tmp_path / f"{name}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n{body}", encoding="utf-8")
    found = probe["scan_distributions"]([str(tmp_path)])
    assert {d["name"]: d["requires"] for d in found["dependents"]} == {
        "folded": ["onnxrunt\u0131me>=1.15"], "ascii": ["NVIDIA-cudnn-cu12"], "no-blank-line": ["tensorrt"]}
    assert found["total"] == 5 and found["interesting"] == []


@pytest.mark.parametrize("name", [
    "libcudnn.so.9", "libcublasLt.so.12", "libcufft.so.11", "libcurand.so.10", "libnvrtc.so.12", "libnvJitLink.so.12",
    "libnvjitlink.so.12", "cudart64_12.dll", "nvrtc64_120_0.dll", "libc10.so", "libc10_cuda.so", "libtorch_cuda.so",
    "lib", "libcu", "liblibcudnn", "LIBcudnn", "cublas64_12.dll",
])
def test_torch_lib_filter_matches_the_regex(probe: dict[str, Any], name: str) -> None:
    assert probe["is_torch_cuda_lib"](name) == bool(TORCH_LIB_RE.match(name))


# ---------------------------------------------------------------------------------------------------------------
# Scanning a site-packages folder
# ---------------------------------------------------------------------------------------------------------------


def write_dist(site: Path, entry: str, metadata: str, **files: str) -> Path:
    dist = site / entry
    dist.mkdir()
    (dist / ("PKG-INFO" if entry.endswith(".egg-info") else "METADATA")).write_text(metadata, encoding="utf-8")
    for name, text in files.items():
        (dist / name).write_text(text, encoding="utf-8")
    return dist


@pytest.mark.slow
def test_probe_scans_distributions(tmp_path: Path) -> None:
    # A folder name that is not UTF-8: the probe reports it as os.listdir decodes it (surrogateescape).
    site = Path(os.fsdecode(bytes(tmp_path) + b"/site-\xff"))
    site.mkdir()
    write_dist(site, "onnxruntime_gpu-1.22.0.dist-info",
               "Metadata-Version: 2.1\nName: onnxruntime-gpu\nVersion: 1.22.0\nRequires-Dist: numpy>=1.21\n"
               "Requires-Dist: nvidia-cudnn-cu12~=9.0; extra == \"cudnn\"\n\nonnxruntime description\n",
               INSTALLER="pip\n",
               RECORD='onnxruntime/__init__.py,sha256=abc,123\n"onnxruntime/a,""b"".txt",,\n'
                      "onnxruntime/capi/onnxruntime_pybind11_state.so,sha256=ghi,0\n"
                      "onnxruntime/caf\u00e9.txt,sha256=def,7\nbroken line\n")
    write_dist(site, "nvidia_cudnn_cu12-9.1.0.70.dist-info", "Name: nvidia-cudnn-cu12\nVersion: 9.1.0.70\n",
               INSTALLER="uv")
    write_dist(site, "ORT_Nightly_GPU-1.23.0.dev1.dist-info", "Name: ort-nightly-gpu\nVersion: 1.23.0.dev1\n")
    write_dist(site, "torch-2.5.0.dist-info", "Name: torch\nVersion: 2.5.0\n")
    write_dist(site, "torchvision-0.20.0.dist-info", "Name: torchvision\nVersion: 0.20.0\nRequires-Dist: torch\n")
    write_dist(site, "myapp-1.0.dist-info",
               "Name: myapp\nVersion: 1.0\nRequires-Dist: numpy\nRequires-Dist: onnxruntime>=1.15\n"
               "Requires-Dist:   ONNXRuntime-GPU ; extra == 'gpu'\nRequires-Dist: sklearn-onnxruntime\n")
    write_dist(site, "extras_user-2.0.dist-info",
               "Name: extras-user\nVersion: 2.0\nRequires-Dist: onnxruntime-extensions\n")
    # Mentions onnxruntime only in its description and in a requirement that does not start with it: not a dependent.
    write_dist(site, "docsonly-1.0.dist-info",
               "Name: docsonly\nVersion: 1.0\nRequires-Dist: sklearn-onnxruntime\n\nRequires-Dist: onnxruntime\n")
    (site / "legacy-0.1-py3.11.egg-info").write_text("Name: legacy\nVersion: 0.1\nRequires-Dist: onnxruntime\n")
    (site / "not_a_dist.txt").write_text("onnxruntime")

    torch = site / "torch"
    (torch / "lib").mkdir(parents=True)
    (torch / "version.py").write_text("__version__ = '2.5.0+cu124'\ngit_version = 'abc'\ncuda = \"12.4\"\n"
                                      "debug = False\n")
    for lib in ("libcudnn.so.9", "libc10.so", "libnvJitLink.so.12", "libnvjitlink.so", "libcublasLt.so.12"):
        (torch / "lib" / lib).write_text("")
    capi = site / "onnxruntime" / "capi"
    capi.mkdir(parents=True)
    (capi / "build_and_package_info.py").write_text("package_name = 'onnxruntime-gpu'\n__version__ = '1.22.0'\n"
                                                    "cuda_version = '12.4'\ncudnn_version = '9.1'\n")
    for name in ("onnxruntime_pybind11_state.so", "libonnxruntime_providers_cuda.so", "libfoo.so.1", "x.pyd",
                 "readme.txt", "__init__.py"):
        (capi / name).write_text("")
    # As onnxruntime-gpu 1.15.1's capi/_ld_preload.py reads (its providers NEED no CUDA library).
    (capi / "_ld_preload.py").write_text(
        "# This file can be modified by setup.py when building a manylinux2010 wheel\n"
        "from ctypes import CDLL, RTLD_GLOBAL\ntry:\n"
        '    _libcublasLt = CDLL("libcublasLt.so.11", mode=RTLD_GLOBAL)\n'
        '    _libcudnn = CDLL("libcudnn.so.8", mode=RTLD_GLOBAL)\n'
        '    _libcudart = CDLL("libcudart.so.11.0", mode=RTLD_GLOBAL)\n'
        'except OSError:\n    import os\n    os.environ["ORT_CUDA_UNAVAILABLE"] = "1"\n'
        "from ctypes import CDLL, RTLD_GLOBAL\ntry:\n"
        '    _libcudnn = CDLL("libcudnn.so.8", mode=RTLD_GLOBAL)\n'
        '    _libnvinfer = CDLL("libnvinfer.so.8", mode=RTLD_GLOBAL)\n'
        'except OSError:\n    import os\n    os.environ["ORT_TENSORRT_UNAVAILABLE"] = "1"\n')

    python = make_venv(tmp_path / "venv")
    doc = probe_doc(python, tmp_path, pythonpath=str(site))

    location = os.path.realpath(site)
    assert "\udcff" in location and location in doc["sys_path"]
    assert doc["environ"]["PYTHONPATH"] == str(site)

    dists = {d["name"]: d for d in doc["distributions"]}
    assert sorted(dists) == ["nvidia-cudnn-cu12", "onnxruntime-gpu", "ort-nightly-gpu", "torch"]
    ort = dists["onnxruntime-gpu"]
    assert ort == {
        "name": "onnxruntime-gpu",
        "normalized": "onnxruntime-gpu",
        "version": "1.22.0",
        "location": location,
        "dist_info": os.path.join(location, "onnxruntime_gpu-1.22.0.dist-info"),
        "requires": ["numpy>=1.21", 'nvidia-cudnn-cu12~=9.0; extra == "cudnn"'],
        "installer": "pip",
        # each row's path; the whole row (digest, size) only where it may list the extension module
        "files": ["onnxruntime/__init__.py", 'onnxruntime/a,"b".txt',
                  ["onnxruntime/capi/onnxruntime_pybind11_state.so", "sha256=ghi", 0], "onnxruntime/caf\u00e9.txt"],
        # neither file exists: the rows with a size are checked, the one without is not
        "record": True,
        "checked": 2,
        "damaged": [["onnxruntime/__init__.py", 123, None, None], ["onnxruntime/caf\u00e9.txt", 7, None, None]],
    }
    assert dists["nvidia-cudnn-cu12"]["files"] == [] and dists["nvidia-cudnn-cu12"]["installer"] == "uv"
    assert dists["nvidia-cudnn-cu12"]["record"] is False  # checked, and it has no RECORD
    assert dists["ort-nightly-gpu"]["normalized"] == "ort-nightly-gpu"
    assert dists["ort-nightly-gpu"]["files"] == [] and dists["ort-nightly-gpu"]["record"] is False  # no RECORD
    assert dists["torch"]["record"] is None and dists["torch"]["damaged"] == []  # not checked
    assert dists["torch"]["version"] == "2.5.0"

    dependents = {d["name"]: d["requires"] for d in doc["dependents"]}
    assert dependents == {
        "myapp": ["onnxruntime>=1.15", "ONNXRuntime-GPU ; extra == 'gpu'"],
        "extras-user": ["onnxruntime-extensions"],
        "legacy": ["onnxruntime"],
    }
    entries = [e for d in doc["sys_path"] for e in os.listdir(d) if e.endswith((".dist-info", ".egg-info"))]
    assert doc["distribution_count"] == len(entries) >= 9

    assert doc["torch"] == {"dir": os.path.join(location, "torch"), "version": "2.5.0+cu124", "cuda": "12.4",
                            "lib_dir": os.path.join(location, "torch", "lib"),
                            "libs": ["libcublasLt.so.12", "libcudnn.so.9", "libnvJitLink.so.12"]}
    assert doc["onnxruntime_dirs"] == [{
        "package_dir": os.path.join(location, "onnxruntime"),
        "location": location,
        "build_info": {"package_name": "onnxruntime-gpu", "__version__": "1.22.0", "cuda_version": "12.4",
                       "cudnn_version": "9.1"},
        "preload": [["libcublasLt.so.11", "libcudnn.so.8", "libcudart.so.11.0"], ["libcudnn.so.8", "libnvinfer.so.8"]],
        "files": ["libfoo.so.1", "libonnxruntime_providers_cuda.so", "onnxruntime_pybind11_state.so", "x.pyd"],
    }]


@pytest.mark.slow
def test_probe_checks_installed_files_against_record_by_size(tmp_path: Path) -> None:
    """ORT and NVIDIA .dist-info folders: every RECORD row with a size is stat'ed; bytecode and empty files are not
    looked at; a file with the size another distribution in the folder lists for it was overwritten by that one."""
    site = tmp_path / "site"
    (site / "onnxruntime" / "capi").mkdir(parents=True)
    (site / "nvidia" / "x" / "lib").mkdir(parents=True)
    for rel, size in (("onnxruntime/__init__.py", 5), ("onnxruntime/capi/cut.so", 4),
                      ("onnxruntime/capi/shared.so", 6), ("nvidia/x/lib/libok.so.1", 9)):
        (site / rel).write_bytes(b"x" * size)
    write_dist(site, "onnxruntime_gpu-1.22.0.dist-info", "Name: onnxruntime-gpu\nVersion: 1.22.0\n",
               RECORD="onnxruntime/__init__.py,sha256=a,5\n"
                      "onnxruntime/capi/cut.so,sha256=b,10\n"
                      "onnxruntime/capi/gone.py,sha256=c,3\n"
                      "onnxruntime/capi/shared.so,sha256=d,8\n"
                      "onnxruntime/__pycache__/__init__.cpython-311.pyc,sha256=e,99\n"
                      "onnxruntime/empty/__init__.py,sha256=f,0\n"
                      "onnxruntime_gpu-1.22.0.dist-info/RECORD,,\n")
    write_dist(site, "onnxruntime-1.22.0.dist-info", "Name: onnxruntime\nVersion: 1.22.0\n",
               RECORD="onnxruntime/capi/shared.so,sha256=g,6\nonnxruntime/__init__.py,sha256=a,5\n")
    write_dist(site, "nvidia_x_cu12-1.0.dist-info", "Name: nvidia-x-cu12\nVersion: 1.0\n",
               RECORD="nvidia/__init__.py,sha256=h,0\nnvidia/x/lib/libok.so.1,sha256=i,9\n"
                      "nvidia/x/lib/libgone.so.1,sha256=j,7\n")
    write_dist(site, "nvidia_y_cu12-1.0.dist-info", "Name: nvidia-y-cu12\nVersion: 1.0\n")
    (site / "onnxruntime_directml-1.0-py3.11.egg-info").write_text("Name: onnxruntime-directml\nVersion: 1.0\n")

    doc = probe_doc(make_venv(tmp_path / "venv"), tmp_path, pythonpath=str(site))
    dists = {d["name"]: d for d in doc["distributions"]}
    gpu = dists["onnxruntime-gpu"]
    assert (gpu["record"], gpu["checked"]) == (True, 4)
    assert gpu["damaged"] == [["onnxruntime/capi/cut.so", 10, 4, None], ["onnxruntime/capi/gone.py", 3, None, None],
                              ["onnxruntime/capi/shared.so", 8, 6, "onnxruntime"]]
    assert len(gpu["files"]) == 7  # every ORT row is still reported, as its path at least
    assert (dists["onnxruntime"]["record"], dists["onnxruntime"]["checked"], dists["onnxruntime"]["damaged"]) == \
        (True, 2, [])
    nvidia = dists["nvidia-x-cu12"]
    assert nvidia == {**nvidia, "files": [], "record": True, "checked": 2,
                      "damaged": [["nvidia/x/lib/libgone.so.1", 7, None, None]]}
    assert (dists["nvidia-y-cu12"]["record"], dists["nvidia-y-cu12"]["damaged"]) == (False, [])
    assert (dists["onnxruntime-directml"]["record"], dists["onnxruntime-directml"]["checked"]) == (None, 0)


@pytest.mark.slow
def test_probe_keeps_the_digest_that_tells_two_builds_apart(tmp_path: Path) -> None:
    """Two ORT builds in one folder whose extension modules have the same size: only the RECORD's digest tells which
    one is on disk (check/facts.py). The probe reports every other row as its path alone, but that row whole."""
    import base64
    import hashlib

    from ortfix.check.facts import _owners
    from ortfix.target.probe import parse_probe

    site = tmp_path / "site"
    (site / "onnxruntime" / "capi").mkdir(parents=True)
    module = "onnxruntime/capi/onnxruntime_pybind11_state.so"
    (site / module).write_bytes(b"cpu!")
    digest = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(b"cpu!").digest()).rstrip(b"=").decode()
    other = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(b"gpu!").digest()).rstrip(b"=").decode()
    (site / "onnxruntime" / "__init__.py").write_text("")
    for entry, name, row_digest in (("onnxruntime_gpu-1.22.0.dist-info", "onnxruntime-gpu", other),
                                    ("onnxruntime-1.22.0.dist-info", "onnxruntime", digest)):
        write_dist(site, entry, f"Name: {name}\nVersion: 1.22.0\n",
                   RECORD=f"onnxruntime/__init__.py,sha256=a,0\n{module},{row_digest},4\n")
    doc = probe_doc(make_venv(tmp_path / "venv"), tmp_path, pythonpath=str(site))
    ort = {d["name"]: d["files"] for d in doc["distributions"]}
    assert ort == {"onnxruntime-gpu": ["onnxruntime/__init__.py", [module, other, 4]],
                   "onnxruntime": ["onnxruntime/__init__.py", [module, digest, 4]]}
    facts = parse_probe(doc)
    owners, on_disk = _owners(facts.ort_dirs[0], facts)
    assert sorted(owners) == ["onnxruntime", "onnxruntime-gpu"] and on_disk == "onnxruntime"


@pytest.mark.parametrize("data", [b"", b"\xef\xbb\xbf", b"\xef\xbb\xbfa\nb\n", b"a\xef\xbb\xbf\n",
                                  b"\xef\xbb\xbf\xef\xbb\xbfx", b"\xef\xbbx", b"\xef\xbb\xbf\xff\n",
                                  b"caf\xc3\xa9\r\nz"], ids=repr)
def test_pth_lines_read_as_site_reads_them(probe: dict[str, Any], tmp_path: Path, data: bytes) -> None:
    """site.py decodes a .pth file as UTF-8 with a BOM dropped (utf-8-sig), else in the locale's encoding."""
    (tmp_path / "x.pth").write_bytes(data)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = data.decode(sys.getfilesystemencoding(), "surrogateescape")
    assert probe["pth_lines"](str(tmp_path / "x.pth")) == text.splitlines()


def test_record_sizes_are_plain_digits_only(probe: dict[str, Any], tmp_path: Path) -> None:
    """str.isdigit() says yes to '²' (and int() then fails): a RECORD row's size must be ASCII digits, else None."""
    (tmp_path / "RECORD").write_text("a.py,sha256=x,12\nb.py,sha256=y,\u00b2\nc.py,,\nd.py,,\u0663\n", encoding="utf-8")
    assert probe["read_record"](str(tmp_path)) == [["a.py", "sha256=x", 12], ["b.py", "sha256=y", None],
                                                   ["c.py", "", None], ["d.py", "", None]]


@pytest.mark.slow
def test_probe_leaves_the_files_of_other_onnxruntime_packages_alone(tmp_path: Path) -> None:
    """onnxruntime-genai and -extensions are no ORT build (they do not install `onnxruntime/`): `check` does not judge
    them, so the probe, which runs on every check, does not stat their files either."""
    site = tmp_path / "site"
    (site / "onnxruntime_genai").mkdir(parents=True)
    write_dist(site, "onnxruntime_genai-0.5.0.dist-info", "Name: onnxruntime-genai\nVersion: 0.5.0\n",
               RECORD="onnxruntime_genai/__init__.py,sha256=a,5\nonnxruntime_genai/gone.so,sha256=b,9\n")
    doc = probe_doc(make_venv(tmp_path / "venv"), tmp_path, pythonpath=str(site))
    [genai] = [d for d in doc["distributions"] if d["normalized"] == "onnxruntime-genai"]
    assert genai["record"] is True and len(genai["files"]) == 2
    assert (genai["checked"], genai["damaged"]) == (0, [])


# ---------------------------------------------------------------------------------------------------------------
# sys.path without `site`: the probe runs with -S and reads .pth files as text (test_owner.py: why)
# ---------------------------------------------------------------------------------------------------------------

SYS_PATH_SCRIPT = """
import json, os, sys
seen = []
for entry in sys.path:
    if entry and os.path.isdir(entry) and os.path.realpath(entry) not in seen:
        seen.append(os.path.realpath(entry))
print(json.dumps(seen))
"""


@pytest.mark.slow
@pytest.mark.parametrize("system_site", [False, True], ids=["venv", "system-site-packages"])
def test_probe_sys_path_is_sites_without_running_pth_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          system_site: bool) -> None:
    """The sys.path the probe works out under -S is the one site.py makes, less what `import` lines of .pth files
    add (the probe never runs them): plain, relative, missing, duplicate and commented path lines, the user site
    (a venv with the system's site-packages has one), PYTHONPATH."""
    python = make_venv(tmp_path / "venv", system_site_packages=system_site)
    site_dir = next((tmp_path / "venv" / "lib").glob("python3*/site-packages"))
    dirs = {name: tmp_path / name for name in ("extra", "pythonpath", "user-extra", "by-import")}
    for folder in dirs.values():
        folder.mkdir()
    (site_dir / "relative").mkdir()
    marker = tmp_path / "import-line-ran"
    (site_dir / "a.pth").write_text(
        f"# a comment\n\n{dirs['extra']}\n{tmp_path / 'missing'}\nrelative   \n{dirs['extra']}\n#{tmp_path}\n")
    (site_dir / "b.pth").write_text(
        f"import sys; sys.path.append({str(dirs['by-import'])!r}); open({str(marker)!r}, 'a').write('ran')\n"
        f"import\tos\n{site_dir}\n")
    user_base = tmp_path / "userbase"
    user_site = user_base / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    user_site.mkdir(parents=True)
    (user_site / "u.pth").write_text(f"{dirs['user-extra']}\n")
    monkeypatch.setenv("PYTHONUSERBASE", str(user_base))

    doc = probe_doc(python, tmp_path, pythonpath=str(dirs["pythonpath"]))
    assert not marker.exists(), "the probe ran a .pth import line"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    real = json.loads(subprocess.run([str(python), "-c", SYS_PATH_SCRIPT], capture_output=True, text=True, check=True,
                                     cwd=tmp_path, env={**env, "PYTHONPATH": str(dirs["pythonpath"])}).stdout)
    assert marker.exists(), "site.py ran the import line (the comparison is with the real thing)"
    assert str(dirs["by-import"]) in real
    expected = [p for p in real if p != str(dirs["by-import"])]
    assert doc["sys_path"] == expected
    assert (str(dirs["user-extra"]) in expected) is system_site
    assert {str(dirs["extra"]), str(site_dir / "relative"), str(dirs["pythonpath"])} <= set(expected)


@pytest.mark.slow
def test_probe_under_a_strict_c_locale(tmp_path: Path) -> None:
    """LC_ALL=C without UTF-8 mode decodes `-c`'s argument as ASCII: the probe's source is ASCII, and it writes its
    report as ASCII bytes (a non-ASCII path comes out escaped, byte for byte)."""
    venv = tmp_path / "caf\u00e9" / "venv"
    python = make_venv(venv)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONIOENCODING")}
    env.update(LC_ALL="C", LANG="C", PYTHONUTF8="0", PYTHONCOERCECLOCALE="0")
    proc = subprocess.run(probe_argv(python), capture_output=True, env=env, cwd=tmp_path, check=False)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    doc = json.loads(proc.stdout)
    assert os.fsencode(doc["env"]["prefix"]) == os.fsencode(str(venv))


@pytest.mark.slow
def test_check_under_a_strict_c_locale(tmp_path: Path) -> None:
    """The whole `check` in that locale: no traceback, no blame on the interpreter; the report's marks escaped."""
    from txtools import ortfix as run_ortfix

    python = make_venv(tmp_path / "venv")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONIOENCODING")}
    env.update(LC_ALL="C", LANG="C", PYTHONUTF8="0", PYTHONCOERCECLOCALE="0", ORTFIX_NO_CACHE="1")
    proc = run_ortfix("check", "--python", str(python), env=env)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "ORT001" in proc.stdout and "not a working Python" not in proc.stderr, proc.stdout


@pytest.mark.slow
def test_locate_asks_the_interpreter_without_site(tmp_path: Path) -> None:
    """Where the layout does not say the prefix (a venv's interpreter outside bin/), rollback and history ask the
    interpreter: with -S, finding the venv as site.py does, and running none of its .pth lines."""
    from ortfix.target.locate import locate_environment

    python = make_venv(tmp_path / "venv")
    marker = tmp_path / "import-line-ran"
    site_dir = next((tmp_path / "venv" / "lib").glob("python3*/site-packages"))
    (site_dir / "x.pth").write_text(f"import os; open({str(marker)!r}, 'a')\n")
    scripts = tmp_path / "venv" / "Scripts"
    scripts.mkdir()
    (scripts / "python").symlink_to(python)
    found = locate_environment(str(scripts / "python"))
    assert (found.prefix, found.environment) == (str(tmp_path / "venv"), "venv")
    assert not marker.exists()


def test_the_probe_fits_a_windows_command_line_and_is_the_same_code() -> None:
    """CreateProcessW takes at most 32,767 characters of command line, quotes escaped: the probe, started as
    `python -S -c SOURCE`, must fit with a long python.exe path (a Store Python's is over 100 characters), and the
    source passed must be the file's code exactly (its comment lines left out, nothing else)."""
    exe = "C:\\Users\\" + "u" * 40 + "\\AppData\\Local\\Microsoft\\WindowsApps\\" + "p" * 180 + "\\python.exe"
    argv = [exe, "-S", "-c", probe_source()]  # as probe_argv starts it where no cache folder is used (Windows)
    assert len(subprocess.list2cmdline(argv)) < 32767 - 4000  # room for the probe to grow
    assert ast.dump(ast.parse(argv[-1])) == ast.dump(ast.parse(Path(PROBE_SOURCE).read_text(encoding="utf-8")))


def test_probe_runs_from_its_cached_bytecode_and_reports_the_same(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """probe_argv imports the probe from ortfix's cache folder (its bytecode kept there, even under
    PYTHONDONTWRITEBYTECODE=1, and nowhere else); the report is the one `python -S -c SOURCE` prints. A cache folder
    others can write to is not used."""
    monkeypatch.setenv("ORTFIX_CACHE_DIR", str(tmp_path / "cache"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PYTHONIOENCODING="utf-8", PYTHONDONTWRITEBYTECODE="1")
    plain = subprocess.run([sys.executable, "-S", "-c", PROBE.read_text(encoding="utf-8")], capture_output=True,
                           env=env, cwd=tmp_path, check=True).stdout
    argv = probe_argv(sys.executable)
    assert probe_source() not in argv[-1] and probe_env()[SOURCE_VAR] == probe_source()  # the fallback's source
    for _ in range(2):  # compiled and written, then read back
        assert subprocess.run(argv, capture_output=True, env=env, cwd=tmp_path, check=True).stdout == plain
    cached = sorted(p.name for p in (tmp_path / "cache" / "probe" / "__pycache__").iterdir())
    assert len(cached) == 1 and cached[0].startswith("ortfix_probe_"), cached

    (tmp_path / "cache" / "probe").chmod(0o777)
    assert probe_argv(sys.executable)[-1] == probe_source()



@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="what root may import from")
def test_root_takes_no_probe_from_a_cache_under_another_users_folder(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Under `sudo -E` ortfix's cache folder may be in a user's HOME: that user could swap a folder above it before
    the target imports from it, so root runs the probe's source instead."""
    home = tmp_path / "alice"
    home.mkdir()
    os.chown(home, 1000, 1000)
    monkeypatch.setenv("ORTFIX_CACHE_DIR", str(home / "cache"))
    assert probe_argv(sys.executable)[-1] == probe_source()
    monkeypatch.setenv("ORTFIX_CACHE_DIR", str(tmp_path / "root-cache"))
    assert probe_argv(sys.executable)[-1] != probe_source()  # a cache only root controls is used

def test_probe_falls_back_to_its_source_where_the_cache_cannot_be_imported(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A target that cannot import from the cache folder (a Windows interpreter under wine cannot read a Linux
    path) runs the source the bootstrap carries, with the current folder first on sys.path as `-c` has it."""
    monkeypatch.setenv("ORTFIX_CACHE_DIR", str(tmp_path / "cache"))
    argv = probe_argv(sys.executable)
    for module in (tmp_path / "cache" / "probe").glob("ortfix_probe_*.py"):
        module.unlink()
    env = {k: v for k, v in probe_env().items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}  # as ortfix starts it
    plain = subprocess.run([sys.executable, "-S", "-c", PROBE.read_text(encoding="utf-8")], capture_output=True,
                           env=env, cwd=tmp_path, check=True).stdout
    assert subprocess.run(argv, capture_output=True, env=env, cwd=tmp_path, check=True).stdout == plain


def test_the_cached_probe_s_command_line_is_the_short_bootstrap(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The target decodes its command line with the locale's decoder, copies it and parses it whole before it runs
    a line of it: the bootstrap that imports the cached probe does not carry the probe's source (26,000 characters,
    6.7M instructions of the probe's run); its fallback takes the source from the environment ortfix gives the
    probe, and runs it only where the import fails."""
    monkeypatch.setenv("ORTFIX_CACHE_DIR", str(tmp_path / "cache"))
    argv = probe_argv(sys.executable)
    assert argv[:3] == [sys.executable, "-S", "-c"] and len(argv) == 4
    assert len(argv[-1].encode("utf-8")) < 1000, len(argv[-1])
    env = {k: v for k, v in probe_env().items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env[SOURCE_VAR] = "raise SystemExit('the fallback ran')"  # it is not run where the cached copy is imported
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path, check=False)
    assert proc.returncode == 0 and json.loads(proc.stdout)["probe_schema"] == 2, proc.stderr
    for module in (tmp_path / "cache" / "probe").glob("ortfix_probe_*.py"):
        module.unlink()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path, check=False)
    assert proc.returncode != 0 and "the fallback ran" in proc.stderr, proc.stderr


@pytest.mark.parametrize("cache", ["cached", "no cache"])
def test_modules_in_the_current_folder_do_not_hijack_the_probe(tmp_path: Path, cache: str,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """`python -c` puts the current folder first on sys.path: a site.py or sysconfig.py there is never imported,
    whether the probe comes from the cache folder or from its source."""
    monkeypatch.setenv("ORTFIX_CACHE_DIR", str(tmp_path / "cache"))
    if cache == "no cache":
        monkeypatch.setenv("ORTFIX_NO_CACHE", "1")
    work = tmp_path / "work"
    work.mkdir()
    for name in ("site", "sysconfig", "_json", "ortfix_probe"):
        (work / f"{name}.py").write_text("raise SystemExit('hijacked')\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = subprocess.run(probe_argv(sys.executable), capture_output=True, text=True, env=env, cwd=work, check=False)
    assert proc.returncode == 0 and "hijacked" not in proc.stderr, proc.stderr
    assert json.loads(proc.stdout)["cwd"] == str(work)
