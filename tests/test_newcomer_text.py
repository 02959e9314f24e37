"""What a newcomer reads (issue 27): every note names the one rule that ruled a build out, the footers and headers
say what is true, a system Python's plan says what PEP 668 means for it, and `check`'s first screen leads with the
cause. The real `ortfix` command on real venvs built from hermetic wheels."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from checktools import plan_json
from clitools import assert_one_line_error, run_ortfix
from support.fixtures import base_python, fake_ort_cpu_wheel, make_venv, pip_install


@pytest.fixture()
def cpu_venv(tmp_path: Path, wheelhouse: Path) -> Path:
    """onnxruntime 1.22.0 (the CPU build): the plan swaps it for a GPU build."""
    python = make_venv(tmp_path / "venv")
    pip_install(python, "onnxruntime==1.22.0", find_links=wheelhouse)
    return python


def test_cuda_option_is_named_as_the_cause(cpu_venv: Path) -> None:
    _rc, plan = plan_json(cpu_venv, "--cuda", "13")
    note = next(n for n in plan["notes"] if "1.22" in n and "build" in n)
    assert "no CUDA 13 build" in note and "--cuda 13" in note, note
    assert "--cuda 12 keeps 1.22" in note, note  # the closest thing that would work
    assert "driver, GPU or Python" not in note


@pytest.mark.slow
def test_unpublished_version_says_so(tmp_path: Path) -> None:
    house = tmp_path / "house"
    fake_ort_cpu_wheel(house, version="1.32.0")
    python = make_venv(tmp_path / "venv")
    pip_install(python, "onnxruntime==1.32.0", find_links=house)
    _rc, plan = plan_json(python)
    note = next(n for n in plan["notes"] if "1.32" in n)
    assert "no onnxruntime-gpu 1.32 build is published" in note, note
    assert "driver, GPU or Python" not in note


def test_ort_version_without_that_cuda(cpu_venv: Path) -> None:
    proc = run_ortfix("plan", "--python", str(cpu_venv), "--cuda", "11", "--ort-version", "1.22.0")
    line = assert_one_line_error(proc, "1.22.0 has no CUDA 11 build", "--cuda 12 keeps 1.22.0")
    assert "Python, platform, driver or GPU" not in line


def test_driver_is_named_with_what_it_runs(cpu_venv: Path) -> None:
    proc = run_ortfix("plan", "--python", str(cpu_venv), "--ort-version", "1.26.0", "--driver", "470.57.02")
    assert_one_line_error(proc, "needs an NVIDIA driver >= 525.60.13", "(the driver is 470.57.02)",
                          "the newest build that runs here is onnxruntime-gpu 1.21.1 (CUDA 11)")


def test_cuda_option_nothing_runs_is_refused_not_an_uninstall(cpu_venv: Path) -> None:
    """--cuda 10 (only withdrawn builds): before, the plan uninstalled onnxruntime and installed nothing."""
    proc = run_ortfix("plan", "--python", str(cpu_venv), "--cuda", "10")
    assert_one_line_error(proc, "has no CUDA 10 build", "--cuda 11 or 12 or 13 instead")


@pytest.mark.slow
def test_apply_history_and_given_machine_read_true(tmp_path: Path, wheelhouse: Path) -> None:
    """apply shows the plan without 'Nothing has been changed'; history after the rollback has nothing to undo; the
    header of a plan for another machine reads as one statement."""
    python = make_venv(tmp_path / "venv")
    pip_install(python, "onnxruntime-gpu[cuda,cudnn]==1.22.0", find_links=wheelhouse)  # only hook files to write
    plan = run_ortfix("plan", "--python", str(python))
    assert "Nothing has been changed" in plan.stdout  # the plan itself keeps its footer
    applied = run_ortfix("apply", "--python", str(python), "--yes")
    assert applied.returncode == 0, (applied.stdout[-2000:], applied.stderr[-2000:])
    assert "1. write" in applied.stdout and "Nothing has been changed" not in applied.stdout + applied.stderr
    assert "Undo the newest: ortfix rollback" in run_ortfix("history", "--python", str(python)).stdout
    assert run_ortfix("rollback", "--python", str(python), "--yes").returncode == 0
    history = run_ortfix("history", "--python", str(python)).stdout
    assert "rolled-back" in history and "Undo the newest" not in history
    assert "Nothing to undo" in history
    check = run_ortfix("check", "--python", str(python), "--driver", "535.104.12", "--compute-capability", "8.0")
    driver = next(line for line in check.stdout.splitlines() if line.startswith("driver"))
    assert driver.split(None, 1)[1] == ("535.104.12, compute capability 8.0 (both given: planning for another "
                                        "machine)")


def test_externally_managed_system_python_plan_says_what_system_passes(tmp_path: Path) -> None:
    python = base_python(tmp_path)
    if python is None:
        pytest.skip("the test interpreter's installation cannot be copied as a system Python")
    stdlib = python.parent.parent / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    (stdlib / "EXTERNALLY-MANAGED").write_text("[externally-managed]\nError=use a venv\n")
    proc = run_ortfix("plan", "--python", str(python))
    assert proc.returncode == 1, proc.stderr
    note = next(line for line in proc.stdout.splitlines() if "PEP 668" in line)
    assert "--system" in note and "--break-system-packages" in note and "a venv is better" in note
