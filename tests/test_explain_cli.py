"""`ortfix explain` end to end: the message is recognised and tied to what check sees on this machine."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.version import Version

from clitools import assert_one_line_error, run_ortfix
from ortfix.check.facts import Facts
from ortfix.commands.check import run_check
from ortfix.compat.matrix import Matrix
from ortfix.explain.patterns import explain_text, load_default_patterns
from ortfix.system.driver import DriverFacts, Gpu
from support.fixtures import make_venv, pip_install
from test_explain import DEEP_LIVE_CAM_947, DEEP_LIVE_CAM_1055, HALLO2_74, ORT_YAML, STEP_AUDIO_28, _python_tags

SEED_000 = ("Failed to load library libonnxruntime_providers_cuda.so with error: \n"
            "libcudnn.so.9: cannot open shared object file: No such file or directory\n")


@pytest.mark.slow
def test_explains_seed_message_and_ties_it_to_this_machine(tmp_path: Path, wheelhouse: Path) -> None:
    python = make_venv(tmp_path / "venv")
    pip_install(python, "onnxruntime-gpu[cuda,cudnn]==1.22.0", find_links=wheelhouse)
    proc = run_ortfix("explain", SEED_000, "--python", str(python), "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["recognised"]
    by_finding = {e["finding"] for e in doc["explanations"]}
    assert by_finding & {"LIB001", "LIB002"}
    here = [f["code"] for e in doc["explanations"] for f in e["on_this_machine"]]
    assert "LIB002" in here  # installed, not findable: what this venv really has


def test_log_on_stdin_and_unrelated_text() -> None:
    env_cmd = [sys.executable, "-m", "ortfix", "explain", "--no-check"]
    proc = subprocess.run(env_cmd, input="Traceback...\nGET was unable to find an engine to execute this computation\n",
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "line 2" in proc.stdout
    proc = subprocess.run(env_cmd, input="ValueError: operands could not be broadcast together\n",
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 1 and "Not recognised" in proc.stdout


def test_unreadable_log_file(tmp_path: Path) -> None:
    assert_one_line_error(run_ortfix("explain", "--file", str(tmp_path / "missing.log")), "missing.log")


# --- the messages added for "explain misses common real messages": the real CLI, and this machine's facts ----------


def _explain_json(text: str, *extra: str) -> dict[str, Any]:
    proc = run_ortfix("explain", text, "--no-check", "--json", *extra)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert isinstance(doc, dict)
    return doc


def test_cli_explains_a_pip_log_from_the_message_and_the_matrix() -> None:
    doc = _explain_json(DEEP_LIVE_CAM_947)
    [e] = doc["explanations"]  # the "No matching distribution" line is part of the same report, not a second one
    assert e["pattern"] == "pip-onnxruntime-gpu-version-not-found" and e["line"] == 4
    assert e["groups"]["requirement"] == "onnxruntime-gpu==1.16.3"
    assert "lacks the asked 1.16.3" in e["cause"] and "CPython 3.12" in e["cause"]
    assert e["details"] and e["cause"].startswith(e["details"][0])
    proc = subprocess.run([sys.executable, "-m", "ortfix", "explain", "--no-check"], input=HALLO2_74,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "separate feed, configured in your pip configuration" in proc.stdout
    assert "://" not in proc.stdout


def test_cli_explains_numpy2_and_the_performance_warnings() -> None:
    doc = _explain_json(DEEP_LIVE_CAM_1055 + STEP_AUDIO_28)
    ids = [e["pattern"] for e in doc["explanations"]]
    assert ids == ["numpy2-runs-module-built-for-numpy1", "cuda-memcpy-nodes-added",
                   "nodes-not-assigned-to-preferred-provider"]
    assert all(e["finding"] is None for e in doc["explanations"])
    assert "onnxruntime_pybind11_state" in doc["explanations"][0]["cause"]


@pytest.fixture(scope="module")
def here(tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path) -> tuple[Path, Facts, Matrix]:
    """A real venv with onnxruntime-gpu 1.22.0 (the hermetic wheel), as `ortfix check` sees it on this machine."""
    python = make_venv(tmp_path_factory.mktemp("explain-here") / "venv")
    pip_install(python, "onnxruntime-gpu==1.22.0", find_links=wheelhouse)
    result = run_check(str(python))
    return python, result.facts, result.matrix


def _interpreter(python: Path, expr: str) -> str:
    return subprocess.run([str(python), "-c", f"print({expr})"], capture_output=True, text=True,
                          check=True).stdout.strip()


def _details(text: str, facts: Facts, matrix: Matrix) -> str:
    found = explain_text(text, load_default_patterns(), matrix=matrix, facts=facts)
    assert len(found) == 1, [e.pattern_id for e in found]
    return " ".join(found[0].details)


def _with(facts: Facts, **probe: Any) -> Facts:
    return replace(facts, probe=replace(facts.probe, **probe))


@pytest.mark.slow
def test_pip_answer_is_about_this_interpreter(here: tuple[Path, Facts, Matrix]) -> None:
    python, facts, matrix = here
    tag = _interpreter(python, "'cp%d%d' % __import__('sys').version_info[:2]")
    glibc = _interpreter(python, "__import__('os').confstr('CS_GNU_LIBC_VERSION').split()[-1]")
    details = _details(DEEP_LIVE_CAM_947, facts, matrix)
    if tag in _python_tags("1.16.3"):
        assert f"Python ({tag}) and platform (linux_{platform.machine()}) have 1.16.3 wheels" in details
        assert f"glibc ({glibc};" in details
    else:
        assert f"({tag}), for which 1.16.3 has no wheel" in details


def _newest_default(tag: str, platform_tag: str) -> str:
    rows = yaml.safe_load(ORT_YAML.read_text(encoding="utf-8"))["releases"]
    fits = [Version(v) for r in rows if r["package"] == "onnxruntime-gpu" and r["index"] == "default"
            and tag in r.get("python_tags", []) and platform_tag in r.get("platforms", []) for v in r["versions"]]
    return str(max(fits))


@pytest.mark.slow
def test_pip_answer_for_a_newer_python(here: tuple[Path, Facts, Matrix]) -> None:
    _, facts, matrix = here
    details = _details(DEEP_LIVE_CAM_947, _with(facts, python_version="3.12.3", system="Linux", machine="x86_64"),
                       matrix)
    newest = _newest_default("cp312", "linux_x86_64")
    assert "CPython 3.12 (cp312), for which 1.16.3 has no wheel" in details
    assert f"the newest onnxruntime-gpu with a cp312 wheel for linux_x86_64 is {newest}" in details


@pytest.mark.slow
def test_pip_answer_for_aarch64_macos_and_an_old_glibc(here: tuple[Path, Facts, Matrix]) -> None:
    _, facts, matrix = here
    facepoke = "ERROR: No matching distribution found for onnxruntime-gpu==1.19.2\n"
    details = _details(facepoke, _with(facts, python_version="3.10.12", system="Linux", machine="aarch64"), matrix)
    rows = yaml.safe_load(ORT_YAML.read_text(encoding="utf-8"))["releases"]
    first = min(Version(v) for r in rows if r["index"] == "default" and "linux_aarch64" in r.get("platforms", [])
                for v in r["versions"])
    assert f"This machine is linux_aarch64; 1.19.2 has no wheel for it (the first onnxruntime-gpu with a " \
           f"linux_aarch64 wheel is {first})" in details
    mac = _details("ERROR: Could not find a version that satisfies the requirement onnxruntime-gpu (from versions: "
                   "none)\n", _with(facts, system="Darwin", machine="arm64"), matrix)
    assert "Darwin arm64: onnxruntime-gpu publishes no wheels for it (there is no CUDA on macOS)" in mac
    old = _details(HALLO2_74, _with(facts, python_version="3.10.12", system="Linux", machine="x86_64",
                                    glibc="2.17"), matrix)
    assert "Python (cp310) and platform (linux_x86_64) have 1.18.0 wheels" in old and "glibc (2.17;" in old


@pytest.mark.slow
def test_numpy_answer_names_the_installed_onnxruntime(here: tuple[Path, Facts, Matrix]) -> None:
    _, facts, matrix = here
    [gpu] = [d for d in facts.ort_distributions if d.normalized == "onnxruntime-gpu"]
    assert gpu.version == "1.22.0"  # what the fixture installed
    assert "has onnxruntime-gpu 1.22.0; releases from 1.19.0 on are built against NumPy 2" in \
        _details(DEEP_LIVE_CAM_1055, facts, matrix)
    old = replace(facts, probe=replace(facts.probe, distributions=tuple(
        replace(d, version="1.18.0") if d is gpu else d for d in facts.probe.distributions)))
    assert "has onnxruntime-gpu 1.18.0, built against NumPy 1.x: it needs `numpy<2`" in \
        _details(DEEP_LIVE_CAM_1055, old, matrix)


@pytest.mark.slow
def test_driver_answers_use_this_machines_driver_and_build(here: tuple[Path, Facts, Matrix]) -> None:
    _, facts, matrix = here
    [install] = facts.ort
    assert install.cuda_version == "12.2"  # the hermetic wheel's build_and_package_info.py
    gpus = (Gpu(0, "NVIDIA A10", "8.6"), Gpu(1, "NVIDIA A10", "8.6"))
    old_driver = replace(facts, driver=DriverFacts(present=True, version="525.60.13", cuda_version="12.0",
                                                   gpus=gpus))
    ptx = ("Status Message: CUDA error cudaErrorUnsupportedPtxVersion:the provided PTX was compiled with an "
           "unsupported toolchain.")
    details = _details(ptx, old_driver, matrix)
    assert "The NVIDIA driver here is 525.60.13, which runs CUDA up to 12.0, with 2 GPUs." in details
    assert "onnxruntime-gpu 1.22.0 is a CUDA 12 build compiled with CUDA 12.2, newer than the driver's CUDA 12.0" \
        in details
    ordinal = ("CUDA failure 101: invalid device ordinal ; GPU=0 ; hostname=4dbec2b03d4e ; "
               "expr=cudaSetDevice(info_.device_id);")
    assert "reports 2 GPUs (0: NVIDIA A10, 1: NVIDIA A10); valid device_id values are 0 to 1" in \
        _details(ordinal, old_driver, matrix)
    none = replace(facts, driver=DriverFacts(present=False, version=None))
    assert "No NVIDIA driver was found" in _details("CUDA failure 3: initialization error ; GPU=0", none, matrix)
