"""The end-to-end stage under wine, proven by hand-made fixes (ortfix's apply comes later): a Windows CPython with pip,
the real onnxruntime / onnxruntime-gpu 1.23.2 win_amd64 wheels installed by the Windows pip, stub NVIDIA wheels
(support/winwheels.py), and a fresh Windows process that creates a CUDA session.

What the real Windows loader (wine's) shows here: the CPU package has no CUDA provider; the GPU package with the NVIDIA
wheels installed but nothing on PATH fails on the provider's first import ("depends on "cublasLt64_12.dll" which is
missing", as the seed reports); the same process with the NVIDIA `bin` folders put in front of PATH before onnxruntime
is imported gets past DLL loading and stops at the absent driver ("CUDA failure 35"). Each wine step is timed and
printed (pytest -s shows them). Every test here installs real wheels downloaded once (support/winwheels.py: 38 MB,
with the GPU wheel 275 MB), hence `realwheels`; without wine they skip with one line."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from checktools import tree_hash
from support import winwheels
from support.winstubs import mingw_missing
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


@pytest.fixture(scope="module")
def gpu_stage(w: WinPython, tmp_path_factory: pytest.TempPathFactory) -> Stage:
    """A Windows CPython with onnxruntime-gpu 1.23.2 and the NVIDIA wheels installed by its own pip under wine."""
    missing = mingw_missing()
    if missing:
        pytest.skip(missing)
    where = tmp_path_factory.mktemp("gpu-stage")
    winwheels.win_wheelhouse(gpu=True)
    return timed("stub NVIDIA wheels, pip install onnxruntime-gpu + NVIDIA wheels under wine",
                 lambda: winwheels.gpu_target(w, where))


def test_stub_wheels_match_the_matrix_and_the_real_provider(gpu_stage: Stage) -> None:
    from ortfix.compat.load import load_matrix
    from ortfix.system.pe import read_pe

    exe, stubs = gpu_stage
    site = exe.parent / "Lib" / "site-packages"
    matrix = load_matrix()
    build = next(b for b in matrix.builds_for(winwheels.ORT_VERSION) if b.package == "onnxruntime-gpu")
    cuda, cudnn = matrix.cuda_major(build.cuda_major), matrix.cudnn_wheel(build.cudnn_major or 0, build.cuda_major)
    assert cuda is not None and cudnn is not None
    specs = {w.distribution: w for w in (*cuda.wheels, cudnn.wheel)}
    versions = {s.distribution: s.version for s in stubs}
    # Every extra of the real build is satisfied by the set, and every wheel sits where the matrix says on Windows.
    for requirement in (r for reqs in build.extras.values() for r in reqs):
        name = requirement.split("~")[0]
        assert name in versions, requirement
    for stub in stubs:
        spec = specs[stub.distribution]
        assert spec.windows_dir == stub.layout.bin_dir, stub.distribution
        # The matrix lists the DLLs every version ships; the stubs carry those and the later ones (cuDNN's ext, ...).
        assert spec.dlls and set(spec.dlls) <= set(stub.layout.dlls), stub.distribution
        for dll in stub.layout.dlls:
            assert (site / stub.layout.bin_dir / dll).is_file(), dll
    # The provider's CUDA imports all land in the set, under the real names (read off the real provider).
    provider = read_pe(str(site / "onnxruntime" / "capi" / "onnxruntime_providers_cuda.dll"))
    shipped = {d.lower() for s in stubs for d in s.layout.dlls}
    cuda_imports = {n.lower() for n in provider.needed if n.lower().startswith(("cu", "nv"))}
    assert cuda_imports == {"cublaslt64_12.dll", "cublas64_12.dll", "cufft64_11.dll", "cudart64_12.dll",
                            "cudnn64_9.dll"}
    assert cuda_imports <= shipped
    cublas = read_pe(str(site / "nvidia" / "cublas" / "bin" / "cublas64_12.dll"))
    assert "cublasLt64_12.dll" in cublas.needed and cublas.machine == "AMD64"


def test_gpu_package_fails_on_missing_dll_then_path_gets_past_loading(
        w: WinPython, gpu_stage: Stage, model: Path) -> None:
    exe, stubs = gpu_stage
    site = exe.parent / "Lib" / "site-packages"
    unfound = timed("fresh CUDA session, nothing on PATH", lambda: winwheels.fresh_cuda_session(w, exe, model))
    assert winwheels.missing_dll(unfound) == "cublasLt64_12.dll", unfound
    assert "CUDAExecutionProvider" in (winwheels.available_providers(unfound) or []), unfound
    assert winwheels.providers_of(unfound) == ["CPUExecutionProvider"], unfound
    assert not winwheels.past_dll_loading(unfound)

    bins = sorted({to_windows(site / s.layout.bin_dir) for s in stubs})
    found = timed("fresh CUDA session, NVIDIA bin folders in front of PATH",
                  lambda: winwheels.fresh_cuda_session(w, exe, model, path_dirs=bins))
    assert winwheels.missing_dll(found) is None, found
    assert "CUDA failure 35" in found, found  # the real cudart64_12.dll finds no driver
    assert winwheels.reached_driver(found) and winwheels.past_dll_loading(found)

    # A hand-made fix of the kind apply will make (a .pth line that prepends the folders to PATH at start-up), then
    # undone by hand: a fresh process gets past loading, and the target is byte-identical afterwards.
    before = tree_hash(exe.parent)
    pth = site / "zz_handmade_nvidia_path.pth"
    pth.write_text(f"import os; os.environ['PATH'] = {';'.join(bins)!r} + ';' + os.environ.get('PATH', '')\n")
    hooked = timed("fresh CUDA session, a .pth prepends PATH", lambda: winwheels.fresh_cuda_session(w, exe, model))
    assert winwheels.reached_driver(hooked), hooked
    pth.unlink()
    assert tree_hash(exe.parent) == before  # the Windows processes wrote nothing into the target
