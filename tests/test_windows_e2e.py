"""The stage the Windows end-to-end tests stand on, under wine: a Windows CPython with pip, the real onnxruntime 1.23.2
win_amd64 wheels installed by the Windows pip (support/winwheels.py), a venv made under wine. The CPU package has no
CUDA provider, and the hand-encoded model is valid ONNX (a CPU session computes it). The flow with ortfix itself, on
the GPU build and the stub NVIDIA wheels, is tests/test_windows_apply.py. Each wine step is timed and printed (pytest
-s shows them). The tests install real wheels downloaded once (38 MB), hence `realwheels`; without wine they skip with
one line."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from support import winwheels
from wintools import WinPython, from_windows, to_windows, win_python

pytestmark = pytest.mark.realwheels
T = TypeVar("T")
Stage = tuple[Path, list[winwheels.StubWheel]]  # the target's python.exe, the NVIDIA wheels installed


def timed(step: str, action: Callable[[], T]) -> T:
    start = time.monotonic()
    try:
        return action()
    finally:
        print(f"[wine timing] {step}: {time.monotonic() - start:.1f} s")


@pytest.fixture(scope="module")
def w() -> WinPython:
    return win_python()


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.onnx"
    path.write_bytes(winwheels.tiny_model())
    return path


_CPU_SCRIPT = r"""
import json, sys
import numpy as np
import onnxruntime as ort
session = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
(y,) = session.run(None, {"x": np.array([1.0, 2.0, 3.5], dtype=np.float32)})
print(json.dumps({"version": ort.__version__, "available": ort.get_available_providers(),
                  "providers": session.get_providers(), "y": [float(v) for v in y],
                  "file": ort.__file__}))
"""


def test_cpu_package_installed_by_windows_pip_has_no_cuda_then_uninstalls(w: WinPython, tmp_path: Path,
                                                                           model: Path) -> None:
    house = winwheels.win_wheelhouse()
    exe = timed("copy of the CPython + pip from Linux, pip install onnxruntime==1.23.2 (+ deps) under wine",
                lambda: winwheels.cpu_target(w, tmp_path))
    site = exe.parent / "Lib" / "site-packages"
    assert (site / f"onnxruntime-{winwheels.ORT_VERSION}.dist-info" / "INSTALLER").read_text().strip() == "pip"
    run = timed("CPU session", lambda: winwheels.run_target(w, exe, "-c", _CPU_SCRIPT, to_windows(model)))
    assert run.returncode == 0, run.stderr[-3000:]
    doc = json.loads(run.stdout.strip().splitlines()[-1])
    assert doc["version"] == winwheels.ORT_VERSION
    assert "CUDAExecutionProvider" not in doc["available"] and "CPUExecutionProvider" in doc["available"]
    assert doc["providers"] == ["CPUExecutionProvider"]
    assert doc["y"] == [2.0, 4.0, 7.0]  # the hand-encoded model is valid ONNX: y = x + x
    assert from_windows(doc["file"]) == site / "onnxruntime" / "__init__.py"  # the target's own, not the deps'
    # ortfix itself runs on the Windows CPython and answers about this target with one JSON document (which one
    # depends on how far Windows support has come), never a traceback.
    check = timed("ortfix check --json under wine", lambda: winwheels.ortfix_windows(
        w, "check", "--python", to_windows(exe), "--json"))
    assert json.loads(check.stdout)["command"] == "check", check.stdout + check.stderr
    assert "Traceback" not in check.stderr, check.stderr
    timed("pip uninstall -y onnxruntime under wine",
          lambda: winwheels.pip_windows(w, exe, "uninstall", "-y", "onnxruntime", wheelhouses=[house]))
    assert not (site / "onnxruntime").exists()
    assert not list(site.glob("onnxruntime-*.dist-info"))
    assert (site / "numpy").is_dir()  # only what was asked for went


def test_venv_made_under_wine_has_a_working_pip(w: WinPython, tmp_path: Path) -> None:
    house = winwheels.win_wheelhouse()
    base = w.new_home(tmp_path) / "python.exe"
    venv = tmp_path / "venv"
    exe = timed("python -m venv --without-pip under wine + pip from Linux",
                lambda: winwheels.venv_with_pip(w, base, venv))
    assert (venv / "pyvenv.cfg").is_file()
    site = venv / "Lib" / "site-packages"
    timed("pip install flatbuffers in the venv",
          lambda: winwheels.pip_windows(w, exe, "install", "flatbuffers", wheelhouses=[house]))
    assert (site / "flatbuffers").is_dir()
    assert not (base.parent / "Lib" / "site-packages" / "flatbuffers").exists()  # the venv's, not the base's
    run = winwheels.run_target(w, exe, "-c", "import sys, flatbuffers; print(sys.prefix); print(flatbuffers.__file__)")
    assert run.returncode == 0, run.stderr[-2000:]
    prefix, module = run.stdout.strip().splitlines()[-2:]
    assert from_windows(prefix) == venv
    assert from_windows(module).is_relative_to(site)
