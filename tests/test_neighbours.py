"""Never break a neighbour, and share torch's stack (issue 20, item 1): real venvs, real pip, small wheels built here
that carry torch's real `Requires-Dist` (cuDNN 8 pinned by torch 2.3.0+cu121; the CUDA 13 wheels of torch 2.14.1).

The expected values come from the issue and from the wheels' own metadata, not from the planner."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from checktools import plan_json
from clitools import run_ortfix
from support.fixtures import (
    build_wheel,
    fake_nvidia_wheel,
    fake_ort_gpu_wheel,
    make_venv,
    nvidia_cu12_set,
    pip_install,
)
from txtools import assert_same_tree, ortfix, ortfix_env, ortfix_json, pip_config, pip_venv, tree_state

pytestmark = pytest.mark.slow  # every test here builds a venv, runs pip or starts wine

CU13 = "nvidia/cu13/lib"
# torch 2.14.1's CUDA 13 wheels (Linux x86_64 Requires-Dist, the NVIDIA part), with the sonames each installs
TORCH_CU13 = {
    ("nvidia-cudnn-cu13", "9.13.0.50", "nvidia/cudnn/lib"): [
        "libcudnn.so.9", *(f"libcudnn_{s}.so.9" for s in ("adv", "cnn", "engines_precompiled",
                                                          "engines_runtime_compiled", "graph", "heuristic", "ops"))],
    ("nvidia-cuda-runtime", "13.0.96", CU13): ["libcudart.so.13"],
    ("nvidia-cublas", "13.1.0.3", CU13): ["libcublas.so.13", "libcublasLt.so.13"],
    ("nvidia-cufft", "12.0.0.61", CU13): ["libcufft.so.12"],
    ("nvidia-curand", "10.4.0.35", CU13): ["libcurand.so.10"],
    ("nvidia-cuda-nvrtc", "13.0.88", CU13): ["libnvrtc.so.13"],
}
LINUX = 'platform_system == "Linux" and platform_machine == "x86_64"'


def _torch_wheel(out: Path, version: str, cuda: str, requires: list[str]) -> Path:
    files: dict[str, bytes | Path] = {"torch/__init__.py": b"",
                                      "torch/version.py": f"__version__ = '{version}'\ncuda = '{cuda}'\n".encode()}
    return build_wheel(out, "torch", version, files, requires=requires)


def _pip_check(python: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(python), "-m", "pip", "check", "--disable-pip-version-check"], capture_output=True,
                          text=True, check=False)


@pytest.fixture(scope="module")
def cu13_house(tmp_path_factory: pytest.TempPathFactory) -> Path:
    house = tmp_path_factory.mktemp("cu13-house")
    for (dist, version, folder), sonames in TORCH_CU13.items():
        fake_nvidia_wheel(house, dist, version, {s: s for s in sonames}, folder, namespace=True)
    _torch_wheel(house, "2.14.1", "13.0", [f"{d}=={v}; {LINUX}" for d, v, _ in TORCH_CU13])
    fake_ort_gpu_wheel(house, version="1.31.1", cuda_version="13.0", extras=None, requires_python=">=3.11",
                       provider_needed=["libcublasLt.so.13", "libcublas.so.13", "libcurand.so.10",
                                        "libcudart.so.13"])
    return house


def _torch_pinning_cudnn8(tmp_path: Path, wheelhouse: Path) -> Path:
    """Seed 003's stack: onnxruntime-gpu 1.22.0 (cuDNN 9) and torch 2.3.0+cu121 pinning nvidia-cudnn-cu12==8.9.2.26
    (fake wheels with those requirements); the venv's python."""
    extra = tmp_path / "extra"
    fake_nvidia_wheel(extra, "nvidia-cudnn-cu12", "8.9.2.26", {"libcudnn.so.8": "libcudnn.so.8"}, "nvidia/cudnn/lib")
    _torch_wheel(extra, "2.3.0+cu121", "12.1", [f"nvidia-cudnn-cu12==8.9.2.26; {LINUX}"])
    python = make_venv(tmp_path / "venv")
    pip_install(python, "onnxruntime-gpu==1.22.0", find_links=wheelhouse)
    pip_install(python, "torch", find_links=extra)
    return python


def test_cudnn8_pin_of_torch_is_kept(tmp_path: Path, wheelhouse: Path) -> None:
    """Seed 003: torch 2.3.0+cu121 pins nvidia-cudnn-cu12==8.9.2.26; a cuDNN-9 ORT must not take it away: the plan
    moves to the CUDA 12 / cuDNN 8 build instead."""
    python = _torch_pinning_cudnn8(tmp_path, wheelhouse)
    proc = run_ortfix("plan", "--python", str(python), "--json")
    assert proc.returncode == 1 and proc.stdout.strip(), proc.stderr
    plan = json.loads(proc.stdout)
    assert plan["target"]["cudnn_major"] == 8 and plan["target"]["cuda_major"] == 12, plan["target"]
    for action in plan["actions"]:
        assert action["details"].get("distribution") != "nvidia-cudnn-cu12", action
        for req in action["details"].get("requirements", []):
            assert not req.startswith("nvidia-cudnn") or "8.9.2.26" in req or req.endswith("~=8.0"), req
    assert any("torch 2.3.0+cu121 uses CUDA 12 and cuDNN 8" in n for n in plan["notes"]), plan["notes"]


def test_forced_cudnn9_build_next_to_the_pin_is_refused_in_one_line(tmp_path: Path, wheelhouse: Path) -> None:
    python = _torch_pinning_cudnn8(tmp_path, wheelhouse)
    before = tree_state(python.parent.parent)
    proc = run_ortfix("plan", "--python", str(python), "--ort-version", "1.22.0", "--cuda", "12")
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert "would break torch 2.3.0+cu121, which requires nvidia-cudnn-cu12==8.9.2.26" in lines[0], proc.stderr
    assert "--ort-version/--cuda" in lines[0] and "CUDA 12 and cuDNN 8" in lines[0]
    assert_same_tree(before, tree_state(python.parent.parent))


def test_cuda13_torch_stack_is_shared_by_default(tmp_path: Path, wheelhouse: Path, cu13_house: Path,
                                                 venv_template: Path) -> None:
    """torch 2.14.1 (CUDA 13) beside onnxruntime-gpu 1.22.0 (CUDA 12): the default plan installs the CUDA 13 build
    and reuses torch's wheels; apply leaves `pip check` clean; rollback is byte for byte."""
    python = pip_venv(venv_template, tmp_path / "venv")
    pip_install(python, "onnxruntime-gpu==1.22.0", find_links=wheelhouse)
    pip_install(python, "torch==2.14.1", find_links=cu13_house)
    assert _pip_check(python).returncode == 0
    env = ortfix_env(pip_config(tmp_path, wheelhouse, cu13_house), tmp_path)
    _, plan = plan_json(python, env=env)
    assert plan["target"]["version"] == "1.31.1" and plan["target"]["cuda_major"] == 13, plan["target"]
    removed = [a["details"]["distribution"] for a in plan["actions"] if a["kind"] == "pip-uninstall"]
    assert removed == ["onnxruntime-gpu"], removed
    [install] = [a for a in plan["actions"] if a["kind"] == "pip-install"]
    assert install["details"]["requirements"] == ["onnxruntime-gpu==1.31.1"], install
    assert sum("torch 2.14.1 uses CUDA 13 and cuDNN 9" in n for n in plan["notes"]) == 1, plan["notes"]

    venv = python.parent.parent
    before = tree_state(venv)
    proc = ortfix("apply", "--python", str(python), "--yes", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    check = _pip_check(python)
    assert check.returncode == 0, check.stdout
    ortfix_json("rollback", "--python", str(python), "--yes", env=env)
    assert_same_tree(before, tree_state(venv))


def test_a_dependency_broken_by_the_install_rolls_the_apply_back(tmp_path: Path, wheelhouse: Path,
                                                                 venv_template: Path) -> None:
    """The planner cannot see what pip upgrades on its own: here the GPU wheel needs fakedep>=2 while another
    installed package needs fakedep<2. The apply's `pip check` comparison finds the new broken requirement, names
    it, and rolls everything back."""
    small = tmp_path / "small"
    build_wheel(small, "fakedep", "1.0", {"fakedep/__init__.py": b""})
    build_wheel(small, "neighbour", "1.0", {"neighbour/__init__.py": b""}, requires=["fakedep<2"])
    python = pip_venv(venv_template, tmp_path / "venv")
    pip_install(python, "onnxruntime==1.22.0", find_links=wheelhouse)
    pip_install(python, "neighbour", find_links=small)
    gpu = tmp_path / "gpu"
    fake_ort_gpu_wheel(gpu, version="1.22.0", requires=["fakedep>=2"])
    build_wheel(gpu, "fakedep", "2.0", {"fakedep/__init__.py": b"2"})
    nvidia_cu12_set(gpu)
    assert _pip_check(python).returncode == 0
    venv = python.parent.parent
    before = tree_state(venv)
    env = ortfix_env(pip_config(tmp_path, gpu), tmp_path)
    proc = ortfix("apply", "--python", str(python), "--yes", env=env)
    assert proc.returncode == 1, (proc.stdout[-3000:], proc.stderr[-3000:])
    out = proc.stdout + proc.stderr
    assert "neighbour 1.0 has requirement fakedep<2, but you have fakedep 2.0" in out, out[-3000:]
    assert_same_tree(before, tree_state(venv))
