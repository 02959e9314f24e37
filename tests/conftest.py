"""Shared pytest fixtures: a session-wide wheelhouse of fake-but-real wheels (see tests/support/fixtures.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from support.fixtures import fake_ort_cpu_wheel, fake_ort_gpu_wheel, nvidia_cu12_set, pip_install


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A --find-links folder with onnxruntime-gpu 1.22.0, onnxruntime 1.22.0 and the NVIDIA CUDA 12 set.

    Built once per session (about a second; the compiled stubs are cached across sessions). Shared by every test:
    one that needs other wheels builds them into a folder of its own, never into this one."""
    house = tmp_path_factory.mktemp("wheelhouse")
    fake_ort_gpu_wheel(house, version="1.22.0")
    fake_ort_cpu_wheel(house, version="1.22.0")
    nvidia_cu12_set(house)
    return house


@pytest.fixture(scope="session")
def cpu_template(tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path) -> Path:
    """A venv with its own pip and the CPU package onnxruntime 1.22.0 from `wheelhouse`, made once; tests copy it."""
    root = tmp_path_factory.mktemp("cpu-template")
    subprocess.run([sys.executable, "-m", "venv", str(root / "venv")], check=True, capture_output=True)
    pip_install(root / "venv" / "bin" / "python", "onnxruntime==1.22.0", find_links=wheelhouse)
    return root / "venv"


# Each pytest-xdist worker runs wine in a prefix of its own (tests/wintools.wine_slot): with one shared prefix, a test
# ending its wineserver in one worker left an `ortfix apply` under wine waiting in the other for 8 minutes.
