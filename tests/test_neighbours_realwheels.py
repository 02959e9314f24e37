"""torch 2.14.1 (its default build: CUDA 13, cuDNN 9 through nvidia-cudnn-cu13) beside onnxruntime-gpu 1.22.0
(CUDA 12), with real wheels: the default plan keeps torch whole. It used to uninstall torch's nvidia-cudnn-cu13
("nvidia-cudnn-cu12 installs into the same folder") and install the CUDA 12 wheels; apply said "verified" and
`pip check` then said `torch 2.14.1 requires nvidia-cudnn-cu13, which is not installed`.

Slow tier (`realwheels`): torch's CUDA build installs with this machine's pip configuration (on these machines it
lies on a local disk: about 5.5 GB in the venv), onnxruntime-gpu 1.22.0 and 1.31.1 from the index."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from txtools import assert_same_tree, fresh_process, ortfix_json, tree_state

pytestmark = pytest.mark.realwheels

# torch's own CUDA 13 libraries, which the shared build (CUDA 13) needs: loaded by SONAME after `import onnxruntime`
# (the preload hook fires), as onnxruntime's provider will load them
CU13_SONAMES = ["libcublasLt.so.13", "libcublas.so.13", "libcudart.so.13", "libcurand.so.10", "libcufft.so.12",
                "libcudnn.so.9"]


def _pip(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(python), "-m", "pip", *args, "--disable-pip-version-check"], capture_output=True,
                          text=True, check=False)


def test_torch_cuda13_beside_ort_cuda12_keeps_torch_whole(tmp_path: Path) -> None:
    venv = tmp_path / "torch venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    python = venv / "bin" / "python"
    installed = _pip(python, "install", "-q", "torch==2.14.1", "onnxruntime-gpu==1.22.0")
    if installed.returncode != 0:
        pytest.skip(f"torch 2.14.1 with its CUDA wheels cannot be installed here: {installed.stderr.strip()[-300:]}")
    assert "No broken requirements" in _pip(python, "check").stdout
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "LD_LIBRARY_PATH")}
    before = tree_state(venv)

    plan = ortfix_json("plan", "--python", str(python), "--driver", "580.159.04", env=env, expect=1)
    assert plan["target"]["cuda_major"] == 13 and plan["target"]["package"] == "onnxruntime-gpu", plan["target"]
    removed = [a["details"]["distribution"] for a in plan["actions"] if a["kind"] == "pip-uninstall"]
    assert removed == ["onnxruntime-gpu"], removed  # never one of torch's NVIDIA wheels
    installs = [r for a in plan["actions"] if a["kind"] == "pip-install" for r in a["details"]["requirements"]]
    assert installs == [f"onnxruntime-gpu=={plan['target']['version']}"], installs  # torch's libraries are reused
    assert any("torch 2.14.1" in note and "shared" in note for note in plan["notes"]), plan["notes"]

    doc = ortfix_json("apply", "--python", str(python), "--driver", "580.159.04", "--yes", env=env)
    assert doc["status"] == "applied", doc.get("verification")
    assert "No broken requirements" in _pip(python, "check").stdout
    code = f"import ctypes, onnxruntime, torch\nfor n in {CU13_SONAMES!r}:\n    ctypes.CDLL(n)\nprint('all loaded')\n"
    run = fresh_process(python, code)
    assert "all loaded" in run.stdout, run.stderr

    ortfix_json("rollback", "--python", str(python), "--yes", env=env)
    assert_same_tree(before, tree_state(venv))  # 5.5 GB: only what apply and rollback touched is read again
