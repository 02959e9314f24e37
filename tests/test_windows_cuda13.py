"""A CUDA 13 build on Windows, under wine's real loader, with the real wheels (issue 21's proof for item 2): the real
onnxruntime-gpu 1.31.1 win_amd64 installed by the target's own pip with no NVIDIA wheel → `ortfix check` names the
missing `cublasLt64_13.dll` → `ortfix plan` installs the NVIDIA 13 wheels and puts `nvidia\\cu13\\bin\\x86_64` on the
PATH hook → `ortfix apply` installs the real wheels (pip under wine, from a local wheelhouse only) and a fresh Windows
process gets past every DLL load to its first CUDA call (no driver) → `ortfix rollback` leaves the install as it
was, byte for byte.

One scenario, every assertion in it: the real NVIDIA 13 win_amd64 wheels the plan installs are 1.1 GB (1.7 GB
installed), downloaded with onnxruntime-gpu once per machine into the test cache at the exact versions below (`pip
download --platform win_amd64 --no-deps`), keyed by those versions. The versions are those a Windows user's pip picks
for the plan's requirements with driver R580 (the newest win_amd64 release of each; NVRTC capped below 13.1 for the
driver's PTX JIT): a version given here that the plan's requirement refuses makes apply's pip fail, which the test
reports."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from pathlib import Path, PureWindowsPath
from typing import Any

import pytest

from support import winwheels
from support.testcache import cache_root, locked
from txtools import assert_same_tree, tree_state
from wintools import WinPython, to_windows, win_python

pytestmark = pytest.mark.realwheels
ORT = "1.31.1"
DRIVER = "580.88"  # R580: the first CUDA 13 driver branch
NVIDIA_13 = ("nvidia-cublas==13.10.0.20", "nvidia-cufft==12.5.0.14", "nvidia-cuda-nvrtc==13.0.88",
             "nvidia-nvjitlink==13.5.37", "nvidia-cudnn-cu13==9.28.1.4")  # nvJitLink: cuFFT's Requires-Dist
# cuDNN 9's sub-libraries in every 9.x wheel (unzip -l of the win_amd64 wheels; it loads them by name)
CUDNN9_SUBS = ("cudnn_adv64_9.dll", "cudnn_cnn64_9.dll", "cudnn_engines_precompiled64_9.dll",
               "cudnn_engines_runtime_compiled64_9.dll", "cudnn_graph64_9.dll", "cudnn_heuristic64_9.dll",
               "cudnn_ops64_9.dll")
CU13_BIN = ("nvidia", "cu13", "bin", "x86_64")  # the DLL folder of every NVIDIA 13 win_amd64 wheel but cuDNN's


def cu13_wheelhouse() -> Path:
    """The cached folder of onnxruntime-gpu ORT and the NVIDIA 13 wheels for win_amd64 (1.2 GB, downloaded once)."""
    requirements = (f"onnxruntime-gpu=={ORT}", *NVIDIA_13)
    key = hashlib.sha256(json.dumps(requirements).encode()).hexdigest()[:12]
    house = cache_root() / f"win-cu13-{key}"
    with locked(cache_root() / "win-cu13.lock"):
        if not (house / ".done").is_file():
            house.mkdir(parents=True, exist_ok=True)
            winwheels._download(house, *requirements)
            (house / ".done").write_text("\n".join(requirements) + "\n")
    return house


@pytest.fixture
def w() -> WinPython:
    return win_python()


def _ortfix(w: WinPython, *args: str, houses: list[Path], expect: int) -> dict[str, Any]:
    proc = winwheels.ortfix_windows(w, *args, "--json", wheelhouses=houses)
    assert proc.returncode == expect, (args, proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc


def _hook_folders(plan: Mapping[str, Any]) -> list[PureWindowsPath]:
    module = next(a for a in plan["actions"] if a["kind"] == "write-file"
                  and a["details"]["path"].lower().endswith(".py"))
    line = next(ln for ln in module["details"]["content"].splitlines() if ln.startswith("FOLDERS = "))
    return [PureWindowsPath(f) for f in json.loads(line.removeprefix("FOLDERS = ").replace("'", '"'))]


def test_cuda13_build_gets_the_real_nvidia_13_wheels_loads_past_the_dlls_and_rolls_back(w: WinPython,
                                                                                        tmp_path: Path) -> None:
    houses = [winwheels.win_wheelhouse(), cu13_wheelhouse()]
    exe = winwheels.home_with_pip(w, tmp_path)
    winwheels.pip_windows(w, exe, "install", f"onnxruntime-gpu=={ORT}", winwheels.NUMPY, wheelhouses=houses)
    model = tmp_path / "tiny.onnx"
    model.write_bytes(winwheels.tiny_model())
    site = exe.parent / "Lib" / "site-packages"
    python = to_windows(exe)
    assert winwheels.missing_dll(winwheels.fresh_cuda_session(w, exe, model)) == "cublasLt64_13.dll"

    check = _ortfix(w, "check", "--python", python, "--driver", DRIVER, houses=houses, expect=1)
    missing = {f["code"]: f for f in check["findings"]}.get("LIB001")
    assert missing is not None and "cublasLt64_13.dll" in json.dumps(missing), check["findings"]

    plan = _ortfix(w, "plan", "--python", python, "--driver", DRIVER, houses=houses, expect=1)
    asked = [r for a in plan["actions"] if a["kind"] == "pip-install" for r in a["details"]["requirements"]]
    names = sorted(r.split("~")[0].split("=")[0].split("<")[0] for r in asked)
    # The real provider imports cuBLAS only (cudart is linked in; no cuRAND import on Windows) and loads cuFFT, cuDNN
    # and NVRTC by name on demand: those wheels, no more (the cuda extra's runtime and cuRAND wheels load nothing).
    assert names == ["nvidia-cublas", "nvidia-cuda-nvrtc", "nvidia-cudnn-cu13", "nvidia-cufft"], asked
    assert not [n for n in plan["notes"] if "no NVIDIA pip wheel is known" in n], plan["notes"]
    folders = _hook_folders(plan)
    assert PureWindowsPath(to_windows(site.joinpath(*CU13_BIN))) in folders, folders
    assert PureWindowsPath(to_windows(site / "nvidia" / "cudnn" / "bin")) in folders, folders

    before = tree_state(exe.parent)
    applied = _ortfix(w, "apply", "--python", python, "--driver", DRIVER, "--yes", "--system", houses=houses,
                      expect=0)
    assert applied["status"] == "applied", applied
    assert (site.joinpath(*CU13_BIN) / "cublasLt64_13.dll").is_file()  # the real wheel's file, where the plan said
    # apply's own fresh-process check loaded the provider and every DLL loaded later by bare name: ORT's on-demand
    # cuFFT, cuDNN and NVRTC, and cuDNN 9's sub-libraries
    loader = applied["verification"]["loader"]
    assert loader["imported"] and loader["ok"], loader
    by_name = {PureWindowsPath(n).name for n in loader["libraries"]} - {"onnxruntime_providers_cuda.dll"}
    assert by_name == {"cufft64_12.dll", "cudnn64_9.dll", "nvrtc64_130_0.dll", *CUDNN9_SUBS}, loader
    fixed = winwheels.fresh_cuda_session(w, exe, model)  # PATH is not set by the test: the hook does it
    # Past every DLL: the provider started and its first CUDA call failed (wine has no driver; 801 here, where a
    # Windows machine without one says 35).
    assert winwheels.missing_dll(fixed) is None and "depends on" not in fixed, fixed
    assert re.search(r"CUDA failure \d+\b.*expr=cudaSetDevice", fixed), fixed

    rolled = _ortfix(w, "rollback", "--python", python, "--yes", houses=houses, expect=0)
    assert rolled["transaction"]["status"] == "rolled-back" and not rolled["warnings"], rolled
    assert_same_tree(before, tree_state(exe.parent))
