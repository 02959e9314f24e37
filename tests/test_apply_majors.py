"""apply → an independent fresh-process loader check → rollback byte for byte, with real NVIDIA wheels, for one
release of each CUDA major (11, 12, 13): the ORT wheel alone is installed, ortfix installs the NVIDIA wheels of
the build's own major and makes them findable. The check here is the test's own: it loads every library the
provider NEEDs or `_ld_preload.py` loads (read with readelf / from the file, not from ortfix), cuDNN's sub-libraries,
and what cuDNN dlopens (libcublasLt.so.N), then reads /proc/self/maps: one CUDA major only. Marked `realwheels`
(about 4 GB of wheels once; pip's cache keeps reruns quick)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from checktools import site_packages
from ortvenvs import cached_venv, linked_copy, linked_numpy
from txtools import assert_same_tree, ortfix_json, tree_state

pytestmark = pytest.mark.realwheels

# The release of each major, and the sonames that tell a CUDA major (the runtime's and cuBLAS's).
# What the provider dlopens lazily, not NEEDed (../shared/facts/ort-gpu-wheels.md: 1.28-1.31 load cuFFT, nvrtc and
# cuDNN themselves).
LAZY = {"1.31.1": ["libcufft.so.12", "libnvrtc.so.13", "libcudnn.so.9"]}
CASES = {
    "1.18.1": 11,  # CUDA 11.8 / cuDNN 8: the provider NEEDs the CUDA 11 libraries (no build_and_package_info.py)
    "1.20.2": 12,  # CUDA 12 / cuDNN 9: the provider NEEDs every cuDNN sub-library, and one of them libcuda.so.1
    "1.31.1": 13,  # CUDA 13 / cuDNN 9: the provider NEEDs libcuda.so.1 and dlopens cuFFT, nvrtc and cuDNN lazily
}
_CUDA_SONAME = re.compile(r"lib(cudart|cublas|cublasLt|cufft|curand|cudnn\w*|nvrtc|nvJitLink)\.so\.[\d.]+")

# Runs in the target: load what the provider needs and what the hook has made findable; report failures and the
# CUDA libraries in /proc/self/maps. Never loads the provider itself (it can crash without a driver).
_CHECK = r"""
import ctypes, json, os, sys
names = json.loads(sys.argv[1])
import onnxruntime
failed = {}
for name in names:
    try:
        ctypes.CDLL(name)
    except OSError as exc:
        failed[name] = str(exc)
maps = sorted({line.split(None, 5)[5].strip() for line in open("/proc/self/maps") if len(line.split(None, 5)) == 6})
print(json.dumps({"failed": failed, "maps": maps}))
"""


def _needed(library: Path) -> list[str]:
    out = subprocess.run(["readelf", "-d", str(library)], capture_output=True, text=True, check=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def _provider_needs(site: Path) -> list[str]:
    capi = site / "onnxruntime" / "capi"
    names = [n for n in _needed(capi / "libonnxruntime_providers_cuda.so") if _CUDA_SONAME.fullmatch(n)]
    preload = capi / "_ld_preload.py"
    blocks = preload.read_text().split("try:")[1:] if preload.exists() else []
    for block in blocks:  # one per provider before 1.16; the CUDA provider's is the one without TensorRT
        if "libnvinfer" not in block:
            names += re.findall(r'CDLL\("([^"]+)"', block)
            break
    return list(dict.fromkeys(names))


def _major_of(path: str) -> int | None:
    """The CUDA major a mapped file's name tells: libcudart.so.12.x, libcublas(Lt).so.13.x, libcufft.so.11 (12)."""
    m = re.match(r"lib(cudart|cublas|cublasLt|nvrtc|nvJitLink|cufft)\.so\.(\d+)", os.path.basename(path))
    if not m:
        return None
    return int(m.group(2)) + (1 if m.group(1) == "cufft" else 0)


def _ort_alone(venv: Path, version: str, numpy: str) -> Path:
    """A venv at `venv` with onnxruntime-gpu `version` alone (`--no-deps`), numpy (which it imports) and its own pip
    (apply runs it). The ORT wheel's files are hard links to test_releases.py's venv of that release (made once per
    machine, tests/ortvenvs.py): pip unpacked and compiled that wheel, hundreds of MB, in each test before."""
    linked_copy(cached_venv("releases", f"onnxruntime-gpu=={version}", no_deps=True), venv)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "ensurepip", "--default-pip"], check=True, capture_output=True)
    linked_numpy(venv, numpy)  # as `pip install --no-deps` would, from a venv made once per machine
    return venv


@pytest.mark.parametrize("version", sorted(CASES))
def test_apply_loads_one_cuda_major_and_rolls_back(tmp_path: Path, version: str) -> None:
    major = CASES[version]
    venv = _ort_alone(tmp_path / "venv", version, "numpy<2" if major == 11 else "numpy")
    python = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "LD_LIBRARY_PATH")}
    before = tree_state(venv)

    doc = ortfix_json("apply", "--python", str(python), "--yes", env=env)
    assert doc["status"] == "applied", doc.get("verification")
    assert doc["verification"]["loader"]["mixed_majors"] is None
    if version == "1.20.2":  # its provider NEEDs the sub-library that NEEDs libcuda.so.1: said, not failed
        assert any(n.startswith("libcudnn_engines_runtime_compiled.so.9: not loaded: it needs the NVIDIA driver")
                   for n in doc["verification"]["notes"]), doc["verification"]

    site = site_packages(venv)
    cudnn = site / "nvidia" / "cudnn" / "lib"
    subs = sorted(n for n in os.listdir(cudnn) if n.startswith("libcudnn_") and re.fullmatch(r"[\w]+\.so\.\d+", n))
    # cuDNN's sub-libraries that NEED the driver's libcuda.so.1 cannot load on this machine: left out by name
    needs_driver = {n for n in subs if "libcuda.so.1" in _needed(cudnn / n)}
    # cuDNN dlopens its sub-libraries by name from libcudnn.so.N, whose RUNPATH is $ORIGIN: from its own folder
    main = next(cudnn.glob("libcudnn.so.[0-9]"))
    assert "$ORIGIN" in subprocess.run(["readelf", "-d", str(main)], capture_output=True, text=True).stdout
    names = [n for n in (*_provider_needs(site), *LAZY.get(version, ()), f"libcublasLt.so.{major}")
             if n not in needs_driver]
    names += [str(cudnn / n) for n in subs if n not in needs_driver]
    assert len(names) > 8
    # the target as a user starts it: no variables set by hand
    run = subprocess.run([str(python), "-c", _CHECK, json.dumps(names)], capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin"}, check=False)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["failed"] == {}, result["failed"]
    majors = {m for m in map(_major_of, result["maps"]) if m is not None}
    assert majors == {major}, [p for p in result["maps"] if _major_of(p) is not None]

    ortfix_json("rollback", "--python", str(python), "--yes", env=env)
    assert_same_tree(before, tree_state(venv))
